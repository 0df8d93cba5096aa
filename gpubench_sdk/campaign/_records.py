"""What the campaign tables hold, as records, and their DDL (see ``_db`` for the tables)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._schedule import Schedule

CAMPAIGN_SCHEMA_VERSION = 1
META_KEY = "campaign_schema_version"
SLOT_STATUSES = ("pending", "running", "done", "failed", "missed", "interrupted", "skipped")
FINAL_SLOT_STATUSES = frozenset(SLOT_STATUSES) - {"pending", "running"}

DDL = (
    """CREATE TABLE IF NOT EXISTS campaign_plans (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_wall_ns INTEGER NOT NULL,
    plan_json TEXT NOT NULL,
    schedule_json TEXT NOT NULL,
    budget_json TEXT NOT NULL,
    regions_json TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS campaign_slots (
    campaign_id INTEGER NOT NULL REFERENCES campaign_plans(id),
    idx INTEGER NOT NULL,
    scheduled_ns INTEGER NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    PRIMARY KEY (campaign_id, idx)
) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS campaign_attempts (
    campaign_id INTEGER NOT NULL,
    slot INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    run_name TEXT NOT NULL,
    run_id INTEGER,
    status TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_ns INTEGER NOT NULL,
    heartbeat_ns INTEGER NOT NULL,
    ended_ns INTEGER,
    requests INTEGER,
    cost_usd REAL,
    error TEXT,
    PRIMARY KEY (campaign_id, slot, attempt)
) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS campaign_tags (
    run_id INTEGER NOT NULL,
    target TEXT NOT NULL,
    campaign_id INTEGER NOT NULL,
    slot INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    scheduled_ns INTEGER NOT NULL,
    local_date TEXT NOT NULL,
    local_time TEXT NOT NULL,
    hour INTEGER NOT NULL,
    weekday INTEGER NOT NULL,
    region TEXT,
    PRIMARY KEY (run_id, target)
) WITHOUT ROWID""",
)


@dataclass(frozen=True, slots=True)
class Budget:
    """Caps per slot and for the whole campaign; ``None`` = no cap."""

    slot_max_requests: int | None = None
    slot_max_cost_usd: float | None = None
    max_requests: int | None = None
    max_cost_usd: float | None = None

    @property
    def needs_prices(self) -> bool:
        return self.slot_max_cost_usd is not None or self.max_cost_usd is not None


@dataclass(frozen=True, slots=True)
class CampaignRecord:
    id: int
    name: str
    created_wall_ns: int
    plan: Mapping[str, Any]
    schedule: Schedule
    budget: Budget
    regions: Mapping[str, str | None]

    @property
    def grace_s(self) -> float:
        return self.schedule.effective_grace_s()


@dataclass(frozen=True, slots=True)
class SlotRecord:
    idx: int
    scheduled_ns: int
    status: str
    attempts: int
    reason: str | None


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    slot: int
    attempt: int
    run_name: str
    run_id: int | None
    status: str
    host: str
    pid: int
    started_ns: int
    heartbeat_ns: int
    ended_ns: int | None
    requests: int | None
    cost_usd: float | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Claim:
    """A slot this process holds: run it, then ``finish`` it."""

    campaign: CampaignRecord
    slot: int
    attempt: int
    scheduled_ns: int
    run_name: str


def run_name(campaign: str, slot: int, attempt: int) -> str:
    return f"campaign {campaign} slot {slot} attempt {attempt}"
