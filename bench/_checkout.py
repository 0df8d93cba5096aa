"""Running a bench's client from another checkout of gpubench (a ``--baseline DIR``).

A bench script puts this tree first on ``sys.path`` (for ``bench/``); a client it starts for
another checkout must then put that checkout's ``gpubench_sdk`` and OpenAI plugin ahead of it,
or it silently runs this tree's core with the other tree's plugin (what the ``--baseline``
figures of ``client_tail_bench`` and ``stream_capacity_bench`` did before this helper).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

_VARIABLE = "GPUBENCH_BENCH_TREE"


def env_for(tree: str | Path) -> dict[str, str]:
    """The environment of a client process that runs ``tree``'s gpubench."""
    path = [str(tree), f"{tree}/plugins/openai", str(Path(__file__).parents[1])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), _VARIABLE: str(tree)}


def put_first() -> None:
    """In a client process: the checkout ``env_for`` named, first on the path (call it after
    importing ``bench/``, before importing gpubench)."""
    tree = os.environ.get(_VARIABLE)
    if tree:
        sys.path[:0] = [tree, f"{tree}/plugins/openai"]


def running() -> str:
    """In a client process: the checkout whose ``gpubench_sdk`` it imported."""
    import gpubench_sdk

    return str(Path(gpubench_sdk.__file__).parents[1])


def check(kind: str, tree: str | Path, made: dict[str, Any]) -> dict[str, Any]:
    """A client's output, once it says it ran ``tree`` (``made["tree"]``, from ``running``)."""
    if Path(made["tree"]).resolve() != Path(tree).resolve():
        raise RuntimeError(f"{kind} ran the gpubench_sdk of {made['tree']}, not of {tree}")
    return made
