"""The statistics that decide between providers, as importable building blocks.

Pure functions over numpy arrays (durations in float64 ms), plus adapters that read a stored
run. Every definition (formula, interpolation, error bound) is written out in
``docs/metrics.md``::

    from gpubench_sdk import Store
    from gpubench_sdk import metrics

    with Store("gpubench.sqlite") as store:
        print(metrics.latency_summary(store, "latest", target="runpod"))
        print(metrics.compare_targets(store, "latest", "runpod", "replicate").verdict)
"""

from .._base._math import wilson_interval
from .._scenarios._slo import SLOVerdict, StepStats, min_samples, slo_verdict, step_stats
from ._autoscaling import BurstAnalysis, ScaleUp, Trend, burst_analysis, linear_trend, scale_up
from ._coldstart import ColdStartRate, ColdStarts, cold_start_rate, cold_starts
from ._compare import Comparison, MannWhitney, QuantileDifference, compare, mann_whitney_u
from ._frame import (
    cold_starts_of,
    compare_targets,
    daily_cold_starts,
    latency_summary,
    run_burst,
    run_cold_starts,
    run_columns,
    run_keep_warm,
    run_scale_up,
    run_stream_metrics,
    run_throughput,
)
from ._groups import (
    GROUPINGS,
    LatencyGroup,
    by_audio_duration,
    by_batch_size,
    by_image_size,
    by_prompt_length,
    by_shared_prefix,
    by_steps,
    by_turn,
    groupings_of,
    members,
    token_sources,
)
from ._histogram import LogHistogram, merge_histograms
from ._keepwarm import KeepWarmCurve, idle_gaps_s, keep_warm_curve
from ._modes import ColdStartMode, ColdStartModes, cold_start_modes, run_cold_start_modes
from ._ready import FalseReady, false_ready, mark_false_ready, run_false_ready
from ._scoring import Criterion, ScoreRow, score
from ._shapes import (
    MaxRateResult,
    ScalingResponse,
    SweepCurve,
    knee_index,
    max_rate_search,
    run_max_rate,
    run_scaling_response,
    run_sweep,
    scaling_response,
    schedule_origin_ns,
    shape_summary,
    sweep_curve,
)
from ._stats import (
    Summary,
    bootstrap_ci,
    error_rates,
    order_statistic_ci,
    outcome_counts,
    percentile,
    quantile_ci,
    summarize_samples,
)
from ._streaming import StreamMetrics, stream_metrics
from ._throughput import SLO, Throughput, meets_slo, throughput, windowed_rate
from ._variability import DayStats, Variability, daily_variability, holm_adjust

__all__ = [
    "GROUPINGS",
    "SLO",
    "BurstAnalysis",
    "ColdStartMode",
    "ColdStartModes",
    "ColdStartRate",
    "ColdStarts",
    "Comparison",
    "Criterion",
    "DayStats",
    "FalseReady",
    "KeepWarmCurve",
    "LatencyGroup",
    "LogHistogram",
    "MannWhitney",
    "MaxRateResult",
    "QuantileDifference",
    "SLOVerdict",
    "ScaleUp",
    "ScalingResponse",
    "ScoreRow",
    "StepStats",
    "StreamMetrics",
    "Summary",
    "SweepCurve",
    "Throughput",
    "Trend",
    "Variability",
    "bootstrap_ci",
    "burst_analysis",
    "by_audio_duration",
    "by_batch_size",
    "by_image_size",
    "by_prompt_length",
    "by_shared_prefix",
    "by_steps",
    "by_turn",
    "cold_start_modes",
    "cold_start_rate",
    "cold_starts",
    "cold_starts_of",
    "compare",
    "compare_targets",
    "daily_cold_starts",
    "daily_variability",
    "error_rates",
    "false_ready",
    "groupings_of",
    "holm_adjust",
    "idle_gaps_s",
    "keep_warm_curve",
    "knee_index",
    "latency_summary",
    "linear_trend",
    "mann_whitney_u",
    "mark_false_ready",
    "max_rate_search",
    "meets_slo",
    "members",
    "merge_histograms",
    "min_samples",
    "order_statistic_ci",
    "outcome_counts",
    "percentile",
    "quantile_ci",
    "run_burst",
    "run_cold_start_modes",
    "run_cold_starts",
    "run_columns",
    "run_false_ready",
    "run_keep_warm",
    "run_max_rate",
    "run_scale_up",
    "run_scaling_response",
    "run_stream_metrics",
    "run_sweep",
    "run_throughput",
    "scale_up",
    "scaling_response",
    "schedule_origin_ns",
    "score",
    "shape_summary",
    "slo_verdict",
    "step_stats",
    "stream_metrics",
    "summarize_samples",
    "sweep_curve",
    "throughput",
    "token_sources",
    "wilson_interval",
    "windowed_rate",
]
