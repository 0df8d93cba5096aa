"""Campaign tables in the results store: plans, slots, attempts and per-run tags.

They live in the same SQLite file as the runs, so one file holds a whole study, but they are
created here (``CREATE TABLE IF NOT EXISTS campaign_*``) and versioned by their own ``meta``
key, ``campaign_schema_version``; the core schema is untouched. Any SQLite tool can read them:

* ``campaign_plans``: one row per campaign (plan snapshot without secrets, schedule, budgets).
* ``campaign_slots``: one row per scheduled slot; ``status`` is ``pending``, ``running``,
  ``done``, ``failed``, ``missed`` (never started within its grace window), ``interrupted``
  (its last attempt died and it could not be retried in time) or ``skipped`` (budget spent).
* ``campaign_attempts``: each try at a slot: the run it made, the process that ran it (host,
  pid, heartbeat) and how it ended.
* ``campaign_tags``: per run and target, what the analysis groups by: slot, scheduled time,
  local time of day, weekday, date, and the target's region.

A slot is claimed inside one ``BEGIN IMMEDIATE`` transaction, so two schedulers (a long-running
``campaign run`` and a cron ``campaign tick``) never both start it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .._base._errors import ConfigError, StoreError
from .._store._schema import describe, pid_alive, to_json, write_txn
from .._store._store import Store
from ._records import (
    CAMPAIGN_SCHEMA_VERSION,
    DDL,
    META_KEY,
    AttemptRecord,
    Budget,
    CampaignRecord,
    Claim,
    SlotRecord,
    run_name,
)
from ._schedule import Schedule, zone

_SET_SLOT = "UPDATE campaign_slots SET status = ?, reason = ? WHERE campaign_id = ? AND idx = ?"


class CampaignDB:
    """The campaign tables of one store file (its own SQLite connection, one thread)."""

    def __init__(
        self, path: str | Path, *, readonly: bool = False, busy_timeout_s: float = 30.0
    ) -> None:
        self.path = Path(path)
        # the core schema first, and its checks
        Store(self.path, readonly=readonly, busy_timeout_s=busy_timeout_s).close()
        try:
            if readonly:
                uri = f"file:{quote(str(self.path.absolute()))}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, isolation_level=None)
            else:
                self._conn = sqlite3.connect(self.path, isolation_level=None)
            # Another scheduler's claim is one short transaction: waiting for it is bounded,
            # and a lock held longer is named (``describe``) rather than waited on for ever.
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open campaign tables ({exc})") from exc
        self.readonly = readonly
        self._ensure_schema()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> CampaignDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def txn(self) -> Iterator[sqlite3.Connection]:
        with write_txn(self._conn, f"{self.path}: campaign tables") as conn:
            yield conn

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            why = describe(exc, self._conn)
            raise StoreError(f"{self.path}: campaign tables: read failed ({why})") from exc

    def _ensure_schema(self) -> None:
        tables = {r[0] for r in self.query("SELECT name FROM sqlite_master WHERE type='table'")}
        (row,) = self.query("SELECT count(*) FROM meta WHERE key = ?", (META_KEY,)) or [(0,)]
        if row[0]:
            (version,) = self.query("SELECT value FROM meta WHERE key = ?", (META_KEY,))[0]
            if int(version) > CAMPAIGN_SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: campaign tables version {version} are newer than this "
                    f"gpubench supports ({CAMPAIGN_SCHEMA_VERSION}); upgrade gpubench"
                )
        if self.readonly or ("campaign_plans" in tables and row[0]):
            return
        with self.txn() as conn:
            for statement in DDL:
                conn.execute(statement)
            conn.execute(
                "INSERT OR IGNORE INTO meta VALUES (?, ?)", (META_KEY, str(CAMPAIGN_SCHEMA_VERSION))
            )

    def _has_tables(self) -> bool:
        return bool(self.query("SELECT 1 FROM sqlite_master WHERE name = 'campaign_plans'"))

    # -- campaigns ---------------------------------------------------------------------------

    def create(
        self,
        name: str,
        plan: Mapping[str, Any],
        schedule: Schedule,
        budget: Budget,
        regions: Mapping[str, str | None],
        created_wall_ns: int,
    ) -> CampaignRecord:
        slots = schedule.slots_ns()
        schedule.effective_grace_s()
        with self.txn() as conn:
            if conn.execute("SELECT 1 FROM campaign_plans WHERE name = ?", (name,)).fetchall():
                raise ConfigError("--name", name, "a campaign name not used in this store yet")
            cur = conn.execute(
                "INSERT INTO campaign_plans (name, created_wall_ns, plan_json, schedule_json,"
                " budget_json, regions_json) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    name,
                    created_wall_ns,
                    to_json(plan),
                    to_json(schedule.to_dict()),
                    to_json(_budget_dict(budget)),
                    to_json(dict(regions)),
                ),
            )
            campaign_id = cur.lastrowid
            conn.executemany(
                "INSERT INTO campaign_slots (campaign_id, idx, scheduled_ns, status)"
                " VALUES (?, ?, ?, 'pending')",
                [(campaign_id, k, t) for k, t in enumerate(slots)],
            )
        return self.get(name)

    def names(self) -> list[str]:
        if not self._has_tables():
            return []
        return [r[0] for r in self.query("SELECT name FROM campaign_plans ORDER BY id")]

    def get(self, name: str | None = None) -> CampaignRecord:
        """A campaign by name; without one, the store's only campaign."""
        names = self.names()
        if name is None:
            if len(names) != 1:
                found = ", ".join(names) if names else "none"
                raise ConfigError(
                    "NAME", None, f"a campaign name: this store has several ({found})"
                    if names else "a campaign: this store has none; create one with "
                    "`gpubench campaign create PLAN.toml --every 4h --for 5d`",
                )  # fmt: skip
            name = names[0]
        rows = self.query(
            "SELECT id, name, created_wall_ns, plan_json, schedule_json, budget_json,"
            " regions_json FROM campaign_plans WHERE name = ?",
            (name,),
        ) if names else []  # fmt: skip
        if not rows:
            raise ConfigError(
                "NAME", name, f"a campaign in {self.path} ({', '.join(names) or 'none'})"
            )
        cid, cname, created, plan, sched, budget, regions = rows[0]
        return CampaignRecord(
            cid, cname, created, json.loads(plan), Schedule.from_dict(json.loads(sched)),
            Budget(**json.loads(budget)), json.loads(regions),
        )  # fmt: skip

    def slots(self, campaign: CampaignRecord) -> list[SlotRecord]:
        return [
            SlotRecord(*r)
            for r in self.query(
                "SELECT idx, scheduled_ns, status, attempts, reason FROM campaign_slots"
                " WHERE campaign_id = ? ORDER BY idx",
                (campaign.id,),
            )
        ]

    def attempts(self, campaign: CampaignRecord) -> list[AttemptRecord]:
        return [
            AttemptRecord(*r)
            for r in self.query(
                "SELECT slot, attempt, run_name, run_id, status, host, pid, started_ns,"
                " heartbeat_ns, ended_ns, requests, cost_usd, error FROM campaign_attempts"
                " WHERE campaign_id = ? ORDER BY slot, attempt",
                (campaign.id,),
            )
        ]

    # -- the scheduler's transitions ---------------------------------------------------------

    def claim(
        self,
        campaign: CampaignRecord,
        now_ns: int,
        *,
        stale_s: float,
        max_attempts: int,
        budget_spent: str | None = None,
    ) -> Claim | str:
        """Reap dead attempts, expire slots past their grace window, then claim the earliest
        due slot; returns the claim, or why nothing was claimed."""
        host, pid = socket.gethostname(), os.getpid()
        grace_ns = round(campaign.grace_s * 1e9)
        with self.txn() as conn:
            self._reap(conn, campaign, now_ns, stale_s, max_attempts, grace_ns)
            conn.execute(
                "UPDATE campaign_slots SET status = CASE WHEN attempts = 0 THEN 'missed'"
                " ELSE 'interrupted' END, reason = coalesce(reason, 'not started within its"
                " grace window') WHERE campaign_id = ? AND status = 'pending'"
                " AND scheduled_ns + ? < ?",
                (campaign.id, grace_ns, now_ns),
            )
            if budget_spent is not None:
                conn.execute(
                    "UPDATE campaign_slots SET status = 'skipped', reason = ?"
                    " WHERE campaign_id = ? AND status = 'pending'",
                    (budget_spent, campaign.id),
                )
                return budget_spent
            busy = conn.execute(
                "SELECT slot, host, pid FROM campaign_attempts WHERE campaign_id = ?"
                " AND status = 'running'",
                (campaign.id,),
            ).fetchall()
            if busy:
                slot, bhost, bpid = busy[0]
                return f"slot {slot} is running (pid {bpid} on {bhost})"
            due = conn.execute(
                "SELECT idx, scheduled_ns, attempts FROM campaign_slots WHERE campaign_id = ?"
                " AND status = 'pending' AND scheduled_ns <= ? ORDER BY idx LIMIT 1",
                (campaign.id, now_ns),
            ).fetchall()
            if not due:
                return "no slot is due"
            idx, scheduled, attempts = due[0]
            attempt = attempts + 1
            name = run_name(campaign.name, idx, attempt)
            conn.execute(
                "UPDATE campaign_slots SET status = 'running', attempts = ?"
                " WHERE campaign_id = ? AND idx = ?",
                (attempt, campaign.id, idx),
            )
            conn.execute(
                "INSERT INTO campaign_attempts (campaign_id, slot, attempt, run_name, status,"
                " host, pid, started_ns, heartbeat_ns) VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?)",
                (campaign.id, idx, attempt, name, host, pid, now_ns, now_ns),
            )
        return Claim(campaign, idx, attempt, scheduled, name)

    def _reap(
        self,
        conn: sqlite3.Connection,
        campaign: CampaignRecord,
        now_ns: int,
        stale_s: float,
        max_attempts: int,
        grace_ns: int,
    ) -> None:
        """Attempts whose process died: the attempt is ``interrupted`` (its samples stay); the
        slot is retried as a new attempt while within its grace window and under
        ``max_attempts``, else it is ``interrupted`` too."""
        here = socket.gethostname()
        rows = conn.execute(
            "SELECT a.slot, a.attempt, a.run_name, a.host, a.pid, a.heartbeat_ns, s.scheduled_ns"
            " FROM campaign_attempts a JOIN campaign_slots s ON s.campaign_id = a.campaign_id"
            " AND s.idx = a.slot WHERE a.campaign_id = ? AND a.status = 'running'",
            (campaign.id,),
        ).fetchall()
        for slot, attempt, name, host, pid, beat_ns, scheduled in rows:
            gone = host == here and not pid_alive(pid)
            silent = now_ns - beat_ns > stale_s * 1e9
            if not (gone or silent):
                continue
            why = f"attempt {attempt} interrupted: its process (pid {pid} on {host}) " + (
                "is gone" if gone else f"sent no heartbeat for {stale_s:g} s"
            )
            run_id, samples = _run_of(conn, name)
            conn.execute(
                "UPDATE campaign_attempts SET status = 'interrupted', ended_ns = ?, run_id = ?,"
                " requests = ?, error = ? WHERE campaign_id = ? AND slot = ? AND attempt = ?",
                (now_ns, run_id, samples, why, campaign.id, slot, attempt),
            )
            if run_id is not None:
                self._tag(conn, campaign, slot, attempt, scheduled, run_id)
            retry = now_ns <= scheduled + grace_ns and attempt < max_attempts
            conn.execute(
                _SET_SLOT,
                ("pending" if retry else "interrupted", why, campaign.id, slot),
            )

    def heartbeat(self, claim: Claim, now_ns: int) -> bool:
        """Refresh the attempt's heartbeat; False when it is no longer running (another
        scheduler found it silent for too long and took the slot over)."""
        with self.txn() as conn:
            cur = conn.execute(
                "UPDATE campaign_attempts SET heartbeat_ns = ? WHERE campaign_id = ?"
                " AND slot = ? AND attempt = ? AND status = 'running'",
                (now_ns, claim.campaign.id, claim.slot, claim.attempt),
            )
        return cur.rowcount == 1

    def finish(
        self,
        claim: Claim,
        *,
        status: str,
        now_ns: int,
        cost_usd: float | None = None,
        error: str | None = None,
    ) -> int | None:
        """Record how an attempt ended (``completed``, ``failed`` or ``cancelled``); the slot
        becomes ``done``, ``failed``, or ``pending`` again after a cancelled attempt.

        An attempt another scheduler already declared interrupted (it took the slot over)
        keeps that record, and the slot is left to the newer attempt: a late finish never
        overwrites it. Its run and samples stay in the store.
        """
        slot_status = {"completed": "done", "failed": "failed", "cancelled": "pending"}[status]
        campaign = claim.campaign
        with self.txn() as conn:
            run_id, samples = _run_of(conn, claim.run_name)
            cur = conn.execute(
                "UPDATE campaign_attempts SET status = ?, ended_ns = ?, run_id = ?, requests = ?,"
                " cost_usd = ?, error = ? WHERE campaign_id = ? AND slot = ? AND attempt = ?"
                " AND status = 'running'",
                (status, now_ns, run_id, samples, cost_usd, error, campaign.id, claim.slot,
                 claim.attempt),
            )  # fmt: skip
            if cur.rowcount != 1:
                return run_id
            conn.execute(
                _SET_SLOT,
                (slot_status, error, campaign.id, claim.slot),
            )
            if run_id is not None:
                self._tag(conn, campaign, claim.slot, claim.attempt, claim.scheduled_ns, run_id)
        return run_id

    def set_cost(self, campaign: CampaignRecord, slot: int, attempt: int, cost_usd: float) -> None:
        with self.txn() as conn:
            conn.execute(
                "UPDATE campaign_attempts SET cost_usd = ? WHERE campaign_id = ? AND slot = ?"
                " AND attempt = ?",
                (cost_usd, campaign.id, slot, attempt),
            )

    def _tag(
        self,
        conn: sqlite3.Connection,
        campaign: CampaignRecord,
        slot: int,
        attempt: int,
        scheduled_ns: int,
        run_id: int,
    ) -> None:
        local = dt.datetime.fromtimestamp(scheduled_ns / 1e9, zone(campaign.schedule.tz))
        targets = [str(t.get("name")) for t in campaign.plan.get("targets", [])]
        conn.executemany(
            "INSERT OR REPLACE INTO campaign_tags VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (run_id, t, campaign.id, slot, attempt, scheduled_ns, local.date().isoformat(),
                 local.strftime("%H:%M"), local.hour, local.weekday(), campaign.regions.get(t))
                for t in targets
            ],
        )  # fmt: skip

    def tags(self, campaign: CampaignRecord) -> list[tuple[Any, ...]]:
        """(run_id, target, slot, attempt, scheduled_ns, local_date, local_time, hour, weekday,
        region) of the runs the analysis uses: per slot, its latest attempt that made a run."""
        return self.query(
            "SELECT t.run_id, t.target, t.slot, t.attempt, t.scheduled_ns, t.local_date,"
            " t.local_time, t.hour, t.weekday, t.region FROM campaign_tags t"
            " WHERE t.campaign_id = ? AND t.attempt = (SELECT max(u.attempt) FROM campaign_tags u"
            " WHERE u.campaign_id = t.campaign_id AND u.slot = t.slot)"
            " ORDER BY t.slot, t.target",
            (campaign.id,),
        )


def _run_of(conn: sqlite3.Connection, name: str) -> tuple[int | None, int | None]:
    """The run an attempt made (found by its unique name) and its stored samples."""
    rows = conn.execute(
        "SELECT id, (SELECT count(*) FROM invocations i WHERE i.run_id = runs.id) FROM runs"
        " WHERE name = ? ORDER BY id DESC LIMIT 1",
        (name,),
    ).fetchall()
    return (rows[0][0], rows[0][1]) if rows else (None, None)


def _budget_dict(budget: Budget) -> dict[str, Any]:
    return {
        "slot_max_requests": budget.slot_max_requests,
        "slot_max_cost_usd": budget.slot_max_cost_usd,
        "max_requests": budget.max_requests,
        "max_cost_usd": budget.max_cost_usd,
    }
