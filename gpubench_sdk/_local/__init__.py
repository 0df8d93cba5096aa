"""The local serverless runtime: an HTTP gateway on loopback in front of worker processes that
start on demand (a real cold start), stay warm while used, and scale to zero when idle.

Names are imported lazily: every worker process imports this package, and whatever it imports
would be paid again in each cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base._lazy import lazy_getattr

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


__getattr__ = lazy_getattr(__name__, _HOMES)
