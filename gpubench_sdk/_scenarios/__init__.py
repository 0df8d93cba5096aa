"""Scenarios: how requests are scheduled. Plain data; ``drive`` sends through a ``Load``.

Built-in kinds are registered under the ``gpubench.scenarios`` entry point like any plugin's,
and use only the ``Load`` interface declared here (the runner, above, implements it).
"""

from ._base import (
    DEFAULT_MAX_INFLIGHT,
    MAX_CONCURRENCY,
    MAX_DURATION_S,
    MAX_REQUESTS,
    MAX_RPS,
    SEQ_BLOCK,
    Count,
    Scenario,
    check,
)
from ._builtin import Burst, ColdStarts, Rate
from ._load import Fields, Load, Offsets, share
from ._replay import Replay
from ._search import MaxRate, Sweep
from ._stages import Concurrency, Stage, Stages
from ._users import Users

BUILTIN_SCENARIOS: dict[str, type[Scenario]] = {
    cls.kind: cls
    for cls in (Burst, Rate, ColdStarts, Concurrency, Stages, Sweep, MaxRate, Replay, Users)
}
"""The kinds gpubench ships (also registered under ``gpubench.scenarios``)."""

__all__ = [
    "BUILTIN_SCENARIOS",
    "DEFAULT_MAX_INFLIGHT",
    "MAX_CONCURRENCY",
    "MAX_DURATION_S",
    "MAX_REQUESTS",
    "MAX_RPS",
    "SEQ_BLOCK",
    "Burst",
    "ColdStarts",
    "Concurrency",
    "Count",
    "Fields",
    "Load",
    "MaxRate",
    "Offsets",
    "Rate",
    "Replay",
    "Scenario",
    "Stage",
    "Stages",
    "Sweep",
    "Users",
    "check",
    "share",
]
