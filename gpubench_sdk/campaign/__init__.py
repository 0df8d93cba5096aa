"""Campaigns: the same plan repeated on a schedule across days, and a regression gate.

The reference report measured cold starts on five days at different times, because serverless
performance drifts with time of day, region and provider load. A campaign makes that a
standing practice::

    import time

    from gpubench_sdk import Store
    from gpubench_sdk.campaign import Schedule, campaign_summary, create_campaign, run_campaign

    create_campaign("plan.toml", Schedule(start_ns=time.time_ns(), duration_s=5 * 86400,
                    every_s=4 * 3600, jitter_s=600), name="five-days", store="study.sqlite")
    run_campaign("study.sqlite", "five-days")          # or `gpubench campaign tick` from cron
    with Store("study.sqlite") as store:
        summary = campaign_summary(store, "five-days")

See docs/campaigns.md.
"""

from ._analysis import (
    CampaignSummary,
    HourStats,
    SlotPoint,
    TargetSeries,
    TimeOfDay,
    campaign_summary,
    time_of_day,
)
from ._cron import CronExpression, parse_cron
from ._db import CampaignDB
from ._exec import SlotReport, campaign_spend, create_campaign, run_campaign
from ._export import ExportReport, export_campaign
from ._gate import METRICS, GateReport, GateRow, Sample, Threshold, evaluate, parse_fail_on
from ._records import AttemptRecord, Budget, CampaignRecord, SlotRecord
from ._schedule import Schedule, parse_duration
from ._sides import Side, read_sample, regression_gate, resolve_side

__all__ = [
    "METRICS",
    "AttemptRecord",
    "Budget",
    "CampaignDB",
    "CampaignRecord",
    "CampaignSummary",
    "CronExpression",
    "ExportReport",
    "GateReport",
    "GateRow",
    "HourStats",
    "Sample",
    "Schedule",
    "Side",
    "SlotPoint",
    "SlotRecord",
    "SlotReport",
    "TargetSeries",
    "Threshold",
    "TimeOfDay",
    "campaign_spend",
    "campaign_summary",
    "create_campaign",
    "evaluate",
    "export_campaign",
    "parse_cron",
    "parse_duration",
    "parse_fail_on",
    "read_sample",
    "regression_gate",
    "resolve_side",
    "run_campaign",
    "time_of_day",
]
