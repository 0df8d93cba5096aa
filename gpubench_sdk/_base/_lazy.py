"""PEP 562 lazy exports: a package's ``__getattr__`` that imports a name's module on first use.

The public facade (``gpubench_sdk``), ``gpubench_sdk.probe`` and the local runtime's package
export names this way so importing them stays cheap; this module needs only the standard
library, so even the light probe package can use it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(
    package: str,
    homes: Mapping[str, str],
    namespace: dict[str, Any] | None = None,
    *,
    missing: Callable[[str], object] | None = None,
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``name`` is imported from its module
    ``homes[name]`` (relative to ``package``) and, with ``namespace`` (the package's
    ``globals()``), kept there so later lookups skip the function. A name not in ``homes``
    goes to ``missing`` when given, else raises ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            if missing is not None:
                return missing(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        if namespace is not None:
            namespace[name] = value
        return value

    return __getattr__
