"""What emulators' routes repeat beyond the builder: the count of requests in flight against a
server's cap (``InFlight``) and a control plane's long-running operations (``Operations``).

A cloud control plane answers a change with an operation to poll until it is done::

    operations = Operations(delay_s=0.5)

    @emu.route("/v1/services/{name}", "PATCH")
    async def update(request):
        ...
        return {"operation": operations.start(result=service_body())}

    @emu.route("/v1/operations/{op}")
    async def operation(request):
        done, result = operations.status(request.path_params["op"])
        return {"done": done, "response": result} if done else {"done": False}
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ._builder import Reject


class InFlight:
    """The requests a server is serving now, against its cap (TGI's
    ``max_concurrent_requests``, a model's concurrency): check ``full`` before admitting one,
    then count it with ``with in_flight:`` or ``enter()`` ... ``leave()`` (a stream's
    ``on_close``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    @property
    def full(self) -> bool:
        return self.count >= self.limit

    def enter(self) -> None:
        self.count += 1

    def leave(self) -> None:
        self.count -= 1

    def __enter__(self) -> InFlight:
        self.enter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()


class Operations:
    """A control plane's long-running operations (Google's ``operations/ID``, ARM's
    ``Location`` to poll): each is done ``delay_s`` after it starts (0: at once) and carries
    the result it was started with. ``missing`` is the 404's message for a name never
    started (``{name}`` is the name)."""

    def __init__(self, delay_s: float = 0.0, missing: str = "operation {name} not found") -> None:
        self.delay_s = delay_s
        self.missing = missing
        self._started: dict[str, tuple[float, Any]] = {}

    def start(self, result: Any = None, *, name: str | None = None) -> str:
        """Begin an operation that will answer ``result``: its ``name`` (a new UUID if none)."""
        name = name or str(uuid.uuid4())
        self._started[name] = (time.monotonic() + self.delay_s, result)
        return name

    def status(self, name: str) -> tuple[bool, Any]:
        """Whether ``name`` is done, and its result; ``Reject(404, missing)`` for a name that
        was never started."""
        if name not in self._started:
            raise Reject(404, self.missing.format(name=name))
        ready_at, result = self._started[name]
        return time.monotonic() >= ready_at, result
