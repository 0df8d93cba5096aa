"""Adapters: the metrics of a stored run, one call each (``Store.columns`` underneath).

``run`` is anything ``Store.run`` takes (id, uuid prefix, ``"latest"``) or a ``RunInfo``;
``scenario`` is the scenario index in the run (``None``: all of them); only measured
requests count (warm-up requests are left out).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .._base._types import Outcome
from .._store._store import Columns, RunInfo, Store
from ._autoscaling import BurstAnalysis, ScaleUp, burst_analysis, scale_up
from ._coldstart import ColdStarts, cold_starts
from ._compare import Comparison, compare
from ._keepwarm import KeepWarmCurve, idle_gaps_s, keep_warm_curve
from ._stats import Summary, summarize_samples
from ._streaming import StreamMetrics, stream_metrics
from ._throughput import SLO, Throughput, meets_slo, throughput
from ._variability import Variability, daily_variability

RunRef = int | str | RunInfo


def _info(store: Store, run: RunRef) -> RunInfo:
    return run if isinstance(run, RunInfo) else store.run(run)


def run_columns(store: Store, run: RunRef, *, target: str, scenario: int | None = None) -> Columns:
    """The measured requests of one target (and scenario) as numpy arrays."""
    return store.columns(_info(store, run).id, target=target, scenario=scenario)


def _ok(cols: Columns) -> npt.NDArray[np.bool_]:
    ok: npt.NDArray[np.bool_] = np.asarray(cols["outcome"]) == Outcome.OK.code
    return ok


def latency_summary(
    store: Store, run: RunRef, *, target: str, scenario: int | None = None, seed: int = 0
) -> Summary:
    """Summary of the successful requests' latency (from the scheduled send)."""
    cols = run_columns(store, run, target=target, scenario=scenario)
    return summarize_samples(cols["latency_ms"][_ok(cols)], seed=seed)


def cold_starts_of(cols: Columns) -> ColdStarts:
    """``cold_starts`` over columns as ``Store.columns`` returns them."""
    return cold_starts(
        start_ns=cols["start_ns"],
        end_ns=cols["end_ns"],
        outcome=cols["outcome"],
        cold=cols["cold"],
        cold_confirmed=cols["cold_confirmed"],
        execution_ms=cols["execution_ms"],
        queue_ms=cols["queue_ms"],
        setup_ms=cols["setup_ms"],
    )


def run_cold_starts(
    store: Store, run: RunRef, *, target: str, scenario: int | None = None
) -> ColdStarts:
    return cold_starts_of(run_columns(store, run, target=target, scenario=scenario))


def run_throughput(
    store: Store, run: RunRef, *, target: str, scenario: int | None = None, slo: SLO | None = None
) -> Throughput:
    cols = run_columns(store, run, target=target, scenario=scenario)
    good = None
    if slo is not None:
        cold_start = np.full(cols["outcome"].size, np.nan)
        if slo.cold_start_ms is not None:
            cs = cold_starts_of(cols)
            cold_start[cs.index] = cs.cold_start_ms
        good = meets_slo(
            slo,
            ok=_ok(cols),
            latency_ms=cols["latency_ms"],
            ttft_ms=_ttft_ms(store, run, cols, target, scenario)
            if slo.ttft_ms
            else cols["ttfb_ms"],
            cold_start_ms=cold_start,
        )
    return throughput(
        start_ns=cols["start_ns"],
        end_ns=cols["end_ns"],
        outcome=cols["outcome"],
        output_units=cols["output_units"],
        good=good,
    )


def run_stream_metrics(
    store: Store, run: RunRef, *, target: str, scenario: int | None = None
) -> StreamMetrics:
    """TTFT, ITL, TPOT and token rates of one target's successful streamed requests.

    Only requests that stored token times count (a non-streaming request has none). Times
    count from the *scheduled* send, like ``latency_ms`` and ``ttfb_ms``, so an open-loop run's
    TTFT includes the client's own send lag instead of hiding it; ITL and TPOT are gaps between
    tokens and do not depend on it. A "token" is one streamed chunk as it arrived (an SSE event
    may carry several tokens; servers such as vLLM send one per event).
    """
    info = _info(store, run)
    cols = store.columns(info.id, target=target, scenario=scenario)
    times = store.token_times(info.id, target=target, scenario=scenario)
    ok = _ok(cols)
    keep = [i for i, t in enumerate(times) if ok[i] and t.size]
    send = cols["scheduled_ns"][keep]
    return stream_metrics(
        [times[i] - cols["scheduled_ns"][i] for i in keep],
        end_ns=cols["end_ns"][keep] - send,
        send_ns=send,
    )


def _ttft_ms(
    store: Store, run: RunRef, cols: Columns, target: str, scenario: int | None
) -> npt.NDArray[np.float64]:
    """Each request's TTFT: its first streamed token where tokens are stored, else its first
    byte (a non-streamed answer's first byte is its whole answer's), from the scheduled send."""
    ttft: npt.NDArray[np.float64] = np.array(cols["ttfb_ms"], dtype=np.float64)
    times = store.token_times(_info(store, run).id, target=target, scenario=scenario)
    for i, t in enumerate(times):
        if t.size:
            ttft[i] = (t[0] - cols["scheduled_ns"][i]) / 1e6
    return ttft


def run_burst(
    store: Store, run: RunRef, *, target: str, scenario: int, baseline_ms: float | None = None
) -> BurstAnalysis:
    cols = run_columns(store, run, target=target, scenario=scenario)
    return burst_analysis(
        start_ns=cols["start_ns"],
        end_ns=cols["end_ns"],
        latency_ms=cols["latency_ms"],
        outcome=cols["outcome"],
        baseline_ms=baseline_ms,
    )


def run_scale_up(
    store: Store, run: RunRef, *, target: str, target_ready: int | None = None
) -> ScaleUp:
    fleet = store.fleet(_info(store, run).id, target=target)
    return scale_up(fleet["t_ns"], fleet["ready"], target_ready=target_ready)


def run_keep_warm(
    store: Store, run: RunRef, *, target: str, scenario: int | None = None
) -> KeepWarmCurve:
    cols = run_columns(store, run, target=target, scenario=scenario)
    ok = _ok(cols)
    gaps = idle_gaps_s(cols["start_ns"], cols["end_ns"])
    return keep_warm_curve(gaps[ok], cols["cold"][ok], cols["latency_ms"][ok])


def compare_targets(
    store: Store,
    run_a: RunRef,
    target_a: str,
    target_b: str,
    *,
    run_b: RunRef | None = None,
    scenario: int | None = None,
    seed: int = 0,
) -> Comparison:
    """Latency of ``target_a`` against ``target_b`` (in ``run_b``, default the same run)."""
    a = run_columns(store, run_a, target=target_a, scenario=scenario)
    b = run_columns(store, run_a if run_b is None else run_b, target=target_b, scenario=scenario)
    return compare(
        a["latency_ms"][_ok(a)],
        b["latency_ms"][_ok(b)],
        a_name=target_a,
        b_name=target_b,
        seed=seed,
    )


def daily_cold_starts(
    store: Store, runs: Sequence[RunRef], *, target: str, tz_offset_s: float = 0.0
) -> Variability:
    """Per-day cold-start medians of ``target`` over several runs (e.g. a campaign's)."""
    walls, values = [], []
    for run in runs:
        cols = run_columns(store, run, target=target)
        cs = cold_starts_of(cols)
        walls.append(cols["wall_start_ns"][cs.index])
        values.append(cs.cold_start_ms)
    if not walls:
        raise ValueError("daily_cold_starts needs at least one run")
    return daily_variability(np.concatenate(walls), np.concatenate(values), tz_offset_s=tz_offset_s)
