"""``Load``: the interface a scenario's ``drive`` schedules its requests through.

Declared here, beside the shapes that consume it, and implemented by the runner
(``gpubench_sdk._runner._load``): a shape, built-in or a ``gpubench.scenarios`` plugin, imports
nothing of the runner and uses only these methods. A shape decides *when* requests go out; the
``Load`` sends them with the runner's own path, so every request is timed from its scheduled
time, stored as it completes, counted by progress, held to ``max_requests`` and the cost caps,
and judged by thresholds.

The loops (``open_loop``, ``closed_loop``, ``burst``) drive every target at once, and in a
multi-process run each process sends only its share (``share``: shard ``shard`` of
``shards``), so a shape needs no sharding code of its own: it calls ``sync()`` where every
process must agree before going on, and reads ``results()`` (all processes' requests, from the
store) to decide adaptively. ``send`` and ``ensure_cold`` act on one target, in this process
only: a sequential shape (``cold_starts``) sends from the first process (``shard == 0``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._base._types import ColdCheck, Invocation, Phase

Fields = Callable[[int], Mapping[str, Any] | None]
"""Body fields for request ``i`` of an open loop (a replayed trace's inputs), or None."""

Offsets = Iterable[float] | Callable[[str], Iterable[float]]
"""An open loop's schedule: send times in seconds from its start, or a target's own schedule
(a function of its name)."""


def share(shard: int, shards: int, slots: int) -> tuple[int, int]:
    """Shard ``shard`` of ``shards`` processes' part of a loop with ``slots`` parallel slots:
    ``(its slots, m)``, where request ``i`` of the loop is shard ``i % m``'s.

    The slots go as evenly as they divide to the first ``m = min(shards, slots)`` processes
    only, so no request is ever dealt to a process with no slot to send it. Every loop shards
    with it: a closed loop's ``concurrency``, an open loop's ``max_inflight``, a sequential
    shape's single slot (the first process's). The merged load is the planned one.
    """
    m = min(shards, slots)
    if shard >= m:
        return 0, m
    return slots // m + (1 if shard < slots % m else 0), m


class Load(ABC):
    """One scenario's handle on the run, given to ``Scenario.drive`` (made by the runner).

    Loops drive every target at once with this process's share of the schedule; each starts
    once every process got there (``sync``). Requests of a loop are numbered from ``step *
    SEQ_BLOCK`` (``burst``: from ``first_seq``), so the store says which step each belonged to.
    """

    __slots__ = ()

    @property
    @abstractmethod
    def index(self) -> int:
        """The scenario's position in the plan (``Invocation.scenario``)."""

    @property
    @abstractmethod
    def shard(self) -> int:
        """This process's number among the load-generating processes (0 when alone)."""

    @property
    @abstractmethod
    def shards(self) -> int:
        """How many processes generate the load (1 when alone)."""

    @property
    @abstractmethod
    def targets(self) -> list[str]:
        """The targets' names, in the plan's order."""

    @property
    def turns(self) -> int:
        """Requests per session of the run's workload (``Workload.turns``; 1: each request
        stands alone): request ``seq`` is turn ``seq % turns`` of session ``seq // turns``."""
        return 1

    @abstractmethod
    def capabilities(self, target: str) -> frozenset[str]:
        """What ``target``'s provider declares (``Capabilities.names()``: ``"streaming"``,
        ``"fleet_state"``, ``"cold_start_control"``, ...)."""

    @abstractmethod
    def stopped(self, target: str | None = None) -> bool:
        """True once the run's budget is spent or it was stopped (a cost cap included): send
        nothing more. With ``target``: once that target may send nothing more (the budget is
        spent or its own ``max_cost_usd`` stopped it)."""

    @abstractmethod
    async def open_loop(
        self,
        offsets_s: Offsets,
        *,
        step: int = 0,
        max_inflight: int | None = None,
        fields: Fields | None = None,
    ) -> None:
        """Send request ``i`` at ``offsets_s[i]`` seconds from now to every target, whatever the
        responses (latency counts from that scheduled time). ``max_inflight`` bounds the
        requests in flight per target (then the schedule waits, and the wait counts in
        latency); unset, ``DEFAULT_MAX_INFLIGHT`` or what the open-files limit holds.
        ``fields(i)`` adds body fields to request ``i``. Pass a function of the target's name
        instead of offsets to give each target its own schedule (made lazily)."""

    @abstractmethod
    async def closed_loop(
        self,
        concurrency: int,
        duration_s: float,
        *,
        think_s: float = 0.0,
        step: int = 0,
        phase: Phase = Phase.MEASURE,
    ) -> None:
        """Keep ``concurrency`` requests in flight per target for ``duration_s`` (requests in
        flight at the end finish), each slot pausing ``think_s`` after each response."""

    @abstractmethod
    async def burst(
        self,
        total: int,
        concurrency: int,
        *,
        first_seq: int = 0,
        phase: Phase = Phase.MEASURE,
    ) -> None:
        """Send ``total`` requests per target, ``concurrency`` in flight at once, each slot
        sending its next as soon as its last answered (hey's ``-n total -c concurrency``).
        Requests are numbered ``first_seq`` up (a warm-up: ``first_seq=-total``,
        ``phase=Phase.WARMUP``)."""

    @abstractmethod
    async def send(
        self,
        target: str,
        seq: int,
        *,
        phase: Phase = Phase.MEASURE,
        expect_cold: bool | None = None,
        cold_check: ColdCheck | None = None,
    ) -> bool:
        """Send request ``seq`` to ``target`` now, from this process only, and wait for it:
        False when the budget or the target's cost cap refused it (nothing was sent).
        ``expect_cold`` says whether it should meet a cold target (stored where the provider
        does not say); ``cold_check`` is the check made just before (``ensure_cold``): the
        sample is stored as a confirmed cold start only when it confirmed."""

    @abstractmethod
    async def ensure_cold(self, target: str, timeout_s: float) -> ColdCheck:
        """Make ``target`` cold with its provider's cold-start control (``"cold_start_control"``
        in ``capabilities``) and verify it, within ``timeout_s``. A failed check does not
        raise: it is logged and returned unconfirmed, so the sample is kept as inferred."""

    @abstractmethod
    async def sync(self) -> None:
        """Wait until every process got here with its requests stored (a no-op when alone)."""

    @abstractmethod
    async def results(self, step: int | None = None, target: str | None = None) -> list[Invocation]:
        """This scenario's measured requests stored so far by every process (call ``sync``
        first), or only those of ``step``, or of ``target``."""
