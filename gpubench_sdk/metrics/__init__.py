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
from ._histogram import LogHistogram, merge_histograms
from ._keepwarm import KeepWarmCurve, idle_gaps_s, keep_warm_curve
from ._scoring import Criterion, ScoreRow, score
from ._stats import (
    Summary,
    bootstrap_ci,
    error_rates,
    order_statistic_ci,
    outcome_counts,
    percentile,
    quantile_ci,
    summarize_samples,
    wilson_interval,
)
from ._streaming import StreamMetrics, stream_metrics
from ._throughput import SLO, Throughput, meets_slo, throughput, windowed_rate
from ._variability import DayStats, Variability, daily_variability, holm_adjust

__all__ = [
    "SLO",
    "BurstAnalysis",
    "ColdStartRate",
    "ColdStarts",
    "Comparison",
    "Criterion",
    "DayStats",
    "KeepWarmCurve",
    "LogHistogram",
    "MannWhitney",
    "QuantileDifference",
    "ScaleUp",
    "ScoreRow",
    "StreamMetrics",
    "Summary",
    "Throughput",
    "Trend",
    "Variability",
    "bootstrap_ci",
    "burst_analysis",
    "cold_start_rate",
    "cold_starts",
    "cold_starts_of",
    "compare",
    "compare_targets",
    "daily_cold_starts",
    "daily_variability",
    "error_rates",
    "holm_adjust",
    "idle_gaps_s",
    "keep_warm_curve",
    "latency_summary",
    "linear_trend",
    "mann_whitney_u",
    "meets_slo",
    "merge_histograms",
    "order_statistic_ci",
    "outcome_counts",
    "percentile",
    "quantile_ci",
    "run_burst",
    "run_cold_starts",
    "run_columns",
    "run_keep_warm",
    "run_scale_up",
    "run_stream_metrics",
    "run_throughput",
    "scale_up",
    "score",
    "stream_metrics",
    "summarize_samples",
    "throughput",
    "wilson_interval",
    "windowed_rate",
]
