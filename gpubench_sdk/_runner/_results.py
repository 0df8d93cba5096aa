"""What a run is made of and what it leaves: targets, the result, and the outcome of a failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .._base._errors import ProviderError
from .._base._monitor import HealthWindow, client_bound_spans
from .._base._secrets import redact
from .._base._types import Outcome
from .._contract._provider import Provider
from .._store._store import RunInfo, Store
from .._transport._client import as_provider_error


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


def stored_result(
    store: Store, run_id: int, stop_reason: Callable[[RunInfo], str | None]
) -> RunResult:
    """The result of run ``run_id`` as ``store`` holds it once ended, for a run whose requests
    other processes sent (processes or Ray workers); closes ``store``. ``stop_reason`` says
    why it stopped early, given the stored run."""
    final = store.run(run_id)
    health = store.health_windows(run_id)
    store.close()
    return RunResult(
        run=final,
        store_path=Path(store.path),
        status=final.status,
        requests=final.samples,
        stop_reason=stop_reason(final),
        health=health,
        deadline_cut=tuple(i for i, sc in enumerate(final.scenarios) if sc.status == "deadline"),
    )


def classify(exc: BaseException, provider: str) -> tuple[Outcome, int | None, str]:
    """Place an exception from ``invoke`` in the outcome taxonomy, with a safe message.

    ``Provider`` already maps what its ``invoke`` raises (``as_provider_error``); the same
    function maps anything else that reaches here (e.g. from ``Workload.read``). A mapped
    non-provider exception keeps its original type name, so plugin bugs stay visible.
    """
    mapped = exc if isinstance(exc, ProviderError) else as_provider_error(exc, provider=provider)
    message = f"{type(mapped).__name__}: {mapped}" if str(mapped) else type(mapped).__name__
    return mapped.outcome, mapped.status_code, redact(message)[:500]


def sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one leaf exception of nested single-member groups, else the group itself."""
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
        inner = inner.exceptions[0]
    return inner
