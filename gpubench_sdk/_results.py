"""What a run is made of and what it leaves: targets, the result, and the outcome of a failure."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ._errors import ProviderError
from ._monitor import HealthWindow, client_bound_spans
from ._provider import Provider
from ._secrets import redact
from ._store import RunInfo
from ._types import Outcome


@dataclass(frozen=True, slots=True)
class Target:
    """A named provider instance to benchmark. Names must be unique within a run."""

    name: str
    provider: Provider


@dataclass(slots=True)
class RunResult:
    """What a finished (or stopped) run leaves behind; the samples are in ``store_path``."""

    run: RunInfo
    store_path: Path
    status: str
    requests: int
    stop_reason: str | None = None
    health: list[HealthWindow] = field(default_factory=list)
    deadline_cut: tuple[int, ...] = ()  # indexes of scenarios cut short by their deadline_s

    @property
    def run_id(self) -> int:
        return self.run.id

    @property
    def client_bound(self) -> list[tuple[float, float]]:
        """Stretches (seconds from the run's start) when the client was the bottleneck."""
        return client_bound_spans(self.health)

    @property
    def client_bound_s(self) -> float:
        """Wall-clock seconds of the run during which the client was the bottleneck."""
        return sum(end - start for start, end in self.client_bound)


def classify(exc: BaseException, provider: str) -> tuple[Outcome, int | None, str]:
    """Place an exception from ``invoke`` in the outcome taxonomy, with a safe message."""
    status: int | None = None
    if isinstance(exc, ProviderError):
        outcome, status = exc.outcome, exc.status_code
    elif isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        if status == 429:
            outcome = Outcome.THROTTLED
        elif status >= 500:
            outcome = Outcome.HTTP_5XX
        else:
            outcome = Outcome.HTTP_4XX
    elif isinstance(exc, httpx.TimeoutException | TimeoutError):
        outcome = Outcome.TIMEOUT
    elif isinstance(exc, httpx.TransportError | OSError):
        outcome = Outcome.TRANSPORT
    else:
        # JSON/Key/Type errors while parsing a response, or a plugin bug: either way the
        # answer could not be used. The exception type is kept so bugs stay visible.
        outcome = Outcome.INVALID_RESPONSE
    message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if not isinstance(exc, ProviderError):
        message = f"[{provider}] {message}"
    return outcome, status, redact(message)[:500]


def sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one leaf exception of nested single-member groups, else the group itself."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
        inner = inner.exceptions[0]
    return inner
