"""What ``advise`` decides from: measured targets, a traffic profile and the objectives.

A ``MeasuredTarget`` is one target of a stored run reduced to what the fleet simulator needs:
the measured execution and cold-start samples (``cost.distributions_from_run``), the
provider's billing rules and rate (the plan's price, else one given), and the provider's stated
worker-selection policy (``cost.provider_policy``). Nothing here is a point value: the samples
are kept whole so ``advise`` can resample them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from .._base._errors import ConfigError
from .._contract._billing import BillingModel
from ..cost._catalog import PriceCatalog
from ..cost._commitments import Commitment
from ..cost._policy import WorkerPolicy, platform_policy, provider_policy
from ..cost._pricing import billing_for, declared_billing
from ..cost._traffic import SECONDS_PER_DAY, distributions_from_run, poisson_arrivals

if TYPE_CHECKING:
    from .._store._schema import TargetRecord
    from .._store._store import RunInfo, Store

# Simulate at most about this many arrivals per option and resample; a busier day is
# simulated over a shorter window and its bill scaled to the day (``Traffic.window_s``).
MAX_SIMULATED_ARRIVALS = 6_000
MAX_PROFILED_ARRIVALS = 30_000  # a daily shape needs the whole day simulated


@dataclass(frozen=True, slots=True)
class Traffic:
    """A traffic profile: a mean rate, Poisson (random gaps) or constant (even gaps).

    ``daily_profile``: relative Poisson rates over the day in equal slots (24 for hours),
    scaled so ``rate_per_s`` stays the day's mean; the whole day is then simulated.
    ``Traffic.per_day(1000)`` is the reference report's "1,000 documents a day"."""

    rate_per_s: float
    arrivals: Literal["poisson", "constant"] = "poisson"
    daily_profile: tuple[float, ...] | None = None
    trace_s: tuple[float, ...] | None = None  # recorded arrivals (``Traffic.from_trace``)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_per_s) and self.rate_per_s > 0):
            raise ConfigError("traffic.rate_per_s", self.rate_per_s, "requests per second > 0")
        if self.arrivals not in ("poisson", "constant"):
            raise ConfigError("traffic.arrivals", self.arrivals, "'poisson' or 'constant'")
        if self.trace_s is not None and self.daily_profile is not None:
            raise ConfigError("--profile", list(self.daily_profile), "no profile with a trace")
        if self.daily_profile is not None:
            p = self.daily_profile
            if not p or min(p) < 0 or sum(p) <= 0 or not all(map(math.isfinite, p)):
                raise ConfigError("--profile", list(p), "relative rates >= 0, not all zero")
            if self.arrivals != "poisson":
                raise ConfigError("--profile", list(p), "Poisson arrivals (not --constant)")
            if self.requests_per_day > MAX_PROFILED_ARRIVALS:
                raise ConfigError(
                    "--profile",
                    list(p),
                    f"at most {MAX_PROFILED_ARRIVALS:,} requests a day (a whole day is "
                    "simulated per resample); leave the profile out for busier traffic",
                )

    @classmethod
    def from_trace(cls, times_s: Sequence[float], span_s: float | None = None) -> Traffic:
        """Recorded arrival times (seconds, any origin) played as they are in every draw; the
        bill of their span (``span_s``, default first to last arrival) is scaled to a day."""
        t = np.sort(np.asarray(times_s, dtype=np.float64))
        if t.size < 2 or not np.isfinite(t).all():
            raise ConfigError("--trace", f"{t.size} arrivals", "at least 2 finite times")
        if t.size > MAX_PROFILED_ARRIVALS:
            raise ConfigError(
                "--trace", f"{t.size:,} arrivals", f"at most {MAX_PROFILED_ARRIVALS:,}"
            )
        t -= t[0]
        span = float(t[-1]) if span_s is None else span_s
        if not span > 0 or span < t[-1]:
            raise ConfigError("--trace", span, "a span > 0 holding every arrival")
        return cls(t.size / span, "poisson", None, tuple(t.tolist()))

    @property
    def peak_rate_per_s(self) -> float:
        """The busiest slot's rate (the mean rate without a daily profile)."""
        if self.daily_profile is None:
            return self.rate_per_s
        return self.rate_per_s * max(self.daily_profile) / float(np.mean(self.daily_profile))

    @classmethod
    def per_day(
        cls,
        requests: float,
        arrivals: Literal["poisson", "constant"] = "poisson",
        daily_profile: tuple[float, ...] | None = None,
    ) -> Traffic:
        if not requests > 0:
            raise ConfigError("--per-day", requests, "requests per day > 0")
        return cls(requests / SECONDS_PER_DAY, arrivals, daily_profile)

    @property
    def requests_per_day(self) -> float:
        return self.rate_per_s * SECONDS_PER_DAY

    @property
    def window_s(self) -> float:
        """The simulated window: a whole day, or less when a day holds too many requests
        (never less with a daily profile)."""
        if self.trace_s is not None:
            return len(self.trace_s) / self.rate_per_s
        if self.daily_profile is not None:
            return SECONDS_PER_DAY
        return min(SECONDS_PER_DAY, MAX_SIMULATED_ARRIVALS / self.rate_per_s)

    def sample(self, seed: int) -> npt.NDArray[np.float64]:
        """Arrival times (seconds) over ``window_s``."""
        if self.trace_s is not None:
            return np.asarray(self.trace_s, dtype=np.float64)
        if self.arrivals == "constant":
            gap = 1.0 / self.rate_per_s
            return np.arange(0.0, self.window_s, gap, dtype=np.float64)
        return poisson_arrivals(
            self.rate_per_s, self.window_s, daily_profile=self.daily_profile, seed=seed
        )

    def describe(self) -> str:
        if self.trace_s is not None:
            return (
                f"a trace of {len(self.trace_s):,} arrivals over {self.window_s:,.0f} s "
                f"({self.requests_per_day:,.0f} requests/day)"
            )
        kind = "Poisson" if self.arrivals == "poisson" else "evenly spaced"
        shape = ""
        if self.daily_profile is not None:
            peak = self.peak_rate_per_s / self.rate_per_s
            shape = f", a {len(self.daily_profile)}-slot daily shape (peak x{peak:.2g})"
        return f"{kind}, {self.requests_per_day:,.0f} requests/day ({self.rate_per_s:.4g}/s){shape}"


@dataclass(frozen=True, slots=True)
class Objectives:
    """What an option must meet: a latency percentile (``latency_percentile``, default p95)
    under ``latency_s``, optionally a cold-start rate and a daily budget."""

    latency_s: float
    latency_percentile: float = 95.0
    max_cold_rate: float | None = None
    budget_usd_per_day: float | None = None
    # time to first token (streamed responses): its ``ttft_percentile`` under ``ttft_s``
    ttft_s: float | None = None
    ttft_percentile: float = 95.0

    def __post_init__(self) -> None:
        if not self.latency_s > 0:
            raise ConfigError("--p95-ms", self.latency_s * 1e3, "milliseconds > 0")
        if self.ttft_s is not None and not (math.isfinite(self.ttft_s) and self.ttft_s > 0):
            raise ConfigError("--ttft-p95-ms", self.ttft_s * 1e3, "milliseconds > 0")
        if not 0 < self.ttft_percentile <= 100:
            raise ConfigError("--ttft-percentile", self.ttft_percentile, "in (0, 100]")
        if not 0 < self.latency_percentile <= 100:
            raise ConfigError("latency_percentile", self.latency_percentile, "in (0, 100]")
        if self.max_cold_rate is not None and not 0 <= self.max_cold_rate <= 1:
            raise ConfigError("--max-cold-rate", self.max_cold_rate, "a fraction in [0, 1]")
        if self.budget_usd_per_day is not None and not self.budget_usd_per_day > 0:
            raise ConfigError("--budget-usd-per-day", self.budget_usd_per_day, "dollars > 0")


@dataclass(frozen=True)
class MeasuredTarget:
    """One measured target: its samples, how it is billed, how its platform picks workers.

    ``committed_usd_per_hour``: the price of one worker kept on by commitment (a reserved or
    "active" worker, billed every hour whether used or not); when given, always-warm options
    are also priced with their pinned workers committed and only the burst on demand.
    ``runs``/``run_sizes``: the runs (days of a campaign) pooled into the arrays, in order, and
    how many (executions, cold starts) each gave; several runs are resampled day by day."""

    name: str
    provider: str
    execution_s: npt.NDArray[np.float64]
    cold_start_s: npt.NDArray[np.float64]
    billing: BillingModel
    rate_usd_per_s: float
    worker_policy: WorkerPolicy
    committed_usd_per_hour: float | None = None
    runs: tuple[int, ...] = ()
    run_sizes: tuple[tuple[int, int], ...] = ()
    # warm requests' time to first byte/token (streamed responses; None: not measured)
    ttft_s: npt.NDArray[np.float64] | None = None
    # commitments with a term for its pinned workers (``_commit.py``), and the measured
    # execution slowdown per requests served at once by one worker (``_concurrency.py``)
    commitments: tuple[Commitment, ...] = ()
    slowdown: tuple[float, ...] = ()
    # the scaling settings its platform lets a user set (``Capabilities.scaling_knobs``;
    # None: the plugin does not say, and every one is searched)
    knobs: frozenset[str] | None = None

    def can_set(self, knob: str) -> bool:
        """Whether advise may offer a value of ``knob`` for this target."""
        return self.knobs is None or knob in self.knobs

    def groups(self) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
        """(executions, cold starts) of each pooled run; one group when not told."""
        if len(self.run_sizes) <= 1:
            return [(self.execution_s, self.cold_start_s)]
        out, e, c = [], 0, 0
        for ne, nc in self.run_sizes:
            out.append((self.execution_s[e : e + ne], self.cold_start_s[c : c + nc]))
            e, c = e + ne, c + nc
        return out

    def __post_init__(self) -> None:
        c = self.committed_usd_per_hour
        if c is not None and not (math.isfinite(c) and c >= 0):
            raise ConfigError(f"{self.name}.committed_usd_per_hour", c, "USD per hour >= 0")
        if self.execution_s.size == 0:
            raise ConfigError(f"{self.name}.execution_s", "(empty)", "at least one measurement")
        if self.cold_start_s.size == 0:
            raise ConfigError(
                f"{self.name}.cold_start_s",
                "(none)",
                "at least one measured cold start (add a cold_starts scenario to the run)",
            )
        if not self.rate_usd_per_s >= 0:
            raise ConfigError(f"{self.name}.rate_usd_per_s", self.rate_usd_per_s, "USD/s >= 0")
        if self.run_sizes and (
            sum(n for n, _ in self.run_sizes) != self.execution_s.size
            or sum(n for _, n in self.run_sizes) != self.cold_start_s.size
        ):
            raise ConfigError(f"{self.name}.run_sizes", self.run_sizes, "the arrays' sizes")


def measured_targets(
    store: Store,
    runs: Sequence[int | str],
    catalog: PriceCatalog,
    prices: Mapping[str, tuple[str, float]] | None = None,
    committed: Mapping[str, float] | None = None,
    commitments: Mapping[str, Sequence[Commitment]] | None = None,
) -> list[MeasuredTarget]:
    """Every target of ``runs`` with its samples and price.

    A target's price is ``prices[name]`` (``(billing model name, USD per second)``), else its
    plan entry's ``price_per_s_usd``/``price_sku`` and ``billing`` (else the provider plugin's
    declared billing, else the catalog's). A target with no price is an error naming the fix.
    A target measured in several runs (a campaign's days) is one candidate: its samples are
    pooled and resampled run by run (``MeasuredTarget.run_sizes``), so the spread from day to
    day shows in the intervals; its price is taken from the first run that names one.
    ``committed``: a target's price per hour of one committed worker
    (``MeasuredTarget.committed_usd_per_hour``); ``commitments``: a target's commitments with a
    term (``MeasuredTarget.commitments``). Each target's concurrency slowdown is measured from
    the runs (``_concurrency.measured_slowdown``)."""
    from ._concurrency import execution_at_level_one, measured_slowdown

    prices = prices or {}
    committed = committed or {}
    commitments = commitments or {}
    infos = [store.run(r) for r in runs]
    known = {t.name for info in infos for t in info.targets}
    for name in set(prices) | set(committed) | set(commitments):
        if name not in known:
            raise ConfigError(
                "--price/--committed/--commit", name, f"a target of the runs: {sorted(known)}"
            )
    seen: dict[str, list[tuple[RunInfo, TargetRecord]]] = {}
    for info in infos:
        for t in info.targets:
            seen.setdefault(t.name, []).append((info, t))
    out: list[MeasuredTarget] = []
    for name, measured in seen.items():
        billing, rate, policy = _price(name, measured, catalog, prices)
        # a run (a campaign's slot) where the target never answered is left out of its pool
        measured = [(info, t) for info, t in measured if _answered(store, info.id, name)]
        if not measured:
            raise ConfigError(
                f"target {name}", "no successful request in these runs", "a run where it answered"
            )
        samples = [measured_samples(store, info.id, name) for info, _ in measured]
        slowdown = measured_slowdown(store, [info.id for info, _ in measured], name)
        if slowdown:  # executions as they would have run alone; the simulator slows them
            alone = [execution_at_level_one(store, i.id, name, slowdown) for i, _ in measured]
            samples = [
                (e if a is None or a.size != e.size else a, c)
                for (e, c), a in zip(samples, alone, strict=True)
            ]
        out.append(
            MeasuredTarget(
                name=name,
                provider=measured[0][1].provider,
                execution_s=np.concatenate([e for e, _ in samples]),
                cold_start_s=np.concatenate([c for _, c in samples]),
                billing=billing,
                rate_usd_per_s=rate,
                worker_policy=policy,
                committed_usd_per_hour=committed.get(name),
                runs=tuple(info.id for info, _ in measured),
                run_sizes=tuple((e.size, c.size) for e, c in samples),
                ttft_s=warm_ttft(store, [info.id for info, _ in measured], name),
                commitments=tuple(commitments.get(name, ())),
                slowdown=slowdown,
                knobs=declared_knobs(measured[0][1].provider),
            )
        )
    return out


def _answered(store: Store, run: int, target: str) -> bool:
    return bool((store.columns(run, target=target)["outcome"] == 0).any())


def _price(
    name: str,
    measured: Sequence[tuple[RunInfo, TargetRecord]],
    catalog: PriceCatalog,
    prices: Mapping[str, tuple[str, float]],
) -> tuple[BillingModel, float, WorkerPolicy]:
    """The billing, rate and worker policy of target ``name``: ``prices``, else the first
    run whose plan prices it."""
    provider = measured[0][1].provider
    if name in prices:
        model_name, rate = prices[name]
        return catalog.billing_model(model_name), rate, provider_policy(provider).policy
    for info, t in measured:
        entries = [p for p in info.config.get("targets", []) if isinstance(p, dict)]
        index, plan = next(
            ((i, p) for i, p in enumerate(entries) if p.get("name") == name), (0, {})
        )
        if plan.get("price_per_s_usd") is None and not plan.get("price_sku"):
            continue
        billing, _ = billing_for(
            index, plan.get("billing"), t.provider, declared_billing(t.provider), catalog
        )
        if plan.get("price_per_s_usd") is not None:
            rate = float(plan["price_per_s_usd"])
        else:
            rate = catalog.rate_usd_per_s(plan.get("billing") or t.provider, str(plan["price_sku"]))
        return billing, rate, platform_policy(t.provider, plan.get("billing")).policy
    runs = ", ".join(str(info.id) for info, _ in measured)
    raise ConfigError(
        "--price",
        name,
        f"{name}=BILLING_MODEL:USD_PER_S (the plan of run {runs} names no price_sku or "
        "price_per_s_usd for it)",
    )


def measured_samples(
    store: Store, run: int, target: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Execution and cold-start seconds of ``target`` in ``run``.

    As ``cost.distributions_from_run``, except that a cold request whose server reported its
    queue time (``queue_ms``: RunPod's ``delayTime``, from submission to the start of
    execution, boot included) but no ``setup_ms`` counts that queue time as its cold start,
    not ``latency - execution``: the latter adds the client's polling and network time, which
    the platform neither spends booting nor bills."""
    dist = distributions_from_run(store, run, target)
    cols = store.columns(run, target=target)
    cold = (cols["outcome"] == 0) & (cols["cold"] == 1)
    setup_s = cols["setup_ms"][cold] / 1e3
    queue_s = cols["queue_ms"][cold] / 1e3
    if cold.any() and np.isnan(setup_s).all() and not np.isnan(queue_s).any():
        return dist.execution_s, np.maximum(queue_s, 0.0)
    return dist.execution_s, dist.cold_start_s


def warm_ttft(store: Store, runs: Sequence[int], target: str) -> npt.NDArray[np.float64] | None:
    """Seconds from scheduling to the first streamed token of ``target``'s successful warm
    requests in ``runs`` (their TTFT, as ``metrics`` computes it from the stored token
    times; latency is measured from the same instant), or None when none streamed tokens.
    Cold requests are left out: the simulator adds its own cold starts."""
    out = []
    for run in runs:
        cols = store.columns(run, target=target)
        tokens = store.token_times(run, target=target)
        keep = (cols["outcome"] == 0) & (cols["cold"] != 1)
        out += [
            (int(t[0]) - int(cols["scheduled_ns"][i])) / 1e9
            for i, t in enumerate(tokens)
            if keep[i] and t.size
        ]
    return np.maximum(np.asarray(out, dtype=np.float64), 0.0) if out else None


def declared_knobs(provider: str) -> frozenset[str] | None:
    """The scaling settings the provider plugin says its platform has (None: not declared, or
    the plugin is not installed here: advise still works from the stored run)."""
    from .._plugins import declared_capabilities

    declared = declared_capabilities(provider)
    return None if declared is None else declared.scaling_knobs
