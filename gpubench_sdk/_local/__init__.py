"""The local serverless runtime: an HTTP gateway on loopback in front of worker processes that
start on demand (a real cold start), stay warm while used, and scale to zero when idle.

Names are imported lazily: every worker process imports this package, and whatever it imports
would be paid again in each cold start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._config import LocalRuntimeConfig
    from ._gateway import LocalRuntime, serve
    from ._provider import LocalOptions, LocalProvider
    from ._spawn import RuntimeProcess, spawn_runtime

__all__ = [
    "LocalOptions",
    "LocalProvider",
    "LocalRuntime",
    "LocalRuntimeConfig",
    "RuntimeProcess",
    "serve",
    "spawn_runtime",
]

_HOMES = {
    "LocalRuntimeConfig": "._config",
    "LocalRuntime": "._gateway",
    "serve": "._gateway",
    "LocalOptions": "._provider",
    "LocalProvider": "._provider",
    "RuntimeProcess": "._spawn",
    "spawn_runtime": "._spawn",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
