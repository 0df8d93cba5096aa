"""A campaign's finished slots as the tracker's data documents (``gpubench campaign export``).

Each slot that ended ``done`` becomes one JSON document (format: ``_store/_documents``) holding,
per target, what a reader needs to trust a figure months later without the store:

* the summary figures: latency p50/p95/p99 with 95% CIs (successful measured requests, from
  the scheduled send), per scenario too; every cold start with its phases where the provider
  reported them, and their median/p95; error counts by kind; throughput;
* the bill (``gpubench cost run``'s estimate) and the price it used;
* the metadata: provider, region, GPU type, model/image id and scaling settings as the plan set
  them (the options as stored with the run: already masked) and as the provider reported them
  when the run opened it, gpubench's version and the provider plugin's name and version (both
  stored with the run), and the plan's hash.

The raw per-request rows stay in the store. Nothing here reads a clock: the same stored slot
always gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._base._errors import GpubenchError
from .._base._secrets import redact, scrub
from .._base._types import Outcome
from .._plugins import plugin_distribution
from .._store._documents import SCHEMA, SCHEMA_VERSION, document_path, dump
from .._store._read import Columns
from .._store._store import RunInfo, Store, TargetRecord
from ..metrics import cold_starts_of, quantile_ci, throughput
from ._db import CampaignDB
from ._records import CampaignRecord

# Option names that say what runs where: shown as the target's GPU, model and scaling. A plugin
# names them its own way; these are the spellings the bundled plugins and the local runtime use.
_GPU_KEYS = ("gpu", "gpu_type", "gpu_ids", "instance_type", "accelerator", "machine_type")
_MODEL_KEYS = ("model", "model_id", "image", "image_digest", "digest", "endpoint_id",
               "deployment", "version", "app", "function", "handler")  # fmt: skip
_SCALING_KEYS = ("min_workers", "max_workers", "idle_timeout_s", "concurrency",
                 "max_concurrency", "min_replicas", "max_replicas", "scale_down_delay_s",
                 "keep_alive_s", "workers_min", "workers_max")  # fmt: skip
_PHASES = ("scheduling", "boot", "execution", "transfer")


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What ``export_campaign`` did: the documents written anew, rewritten, and kept as
    they were (the same bytes), as paths under the data directory."""

    written: tuple[Path, ...]
    rewritten: tuple[Path, ...]
    unchanged: tuple[Path, ...]


def export_campaign(
    store: str | Path,
    name: str | None,
    data_dir: str | Path,
    *,
    origin: str | None = None,
) -> ExportReport:
    """Write one document per finished slot of campaign ``name`` under ``data_dir/data/``.

    ``origin`` says where the client ran ("GitHub Actions, ubuntu-latest"), for the site's
    methodology page; the run's host name is not exported. A document already there with the
    same bytes is left alone, so a daily job's commit holds only the new day.
    """
    root = Path(data_dir)
    written: list[Path] = []
    rewritten: list[Path] = []
    unchanged: list[Path] = []
    with CampaignDB(store, readonly=True) as db, Store(store, readonly=True) as st:
        campaign = db.get(name)
        done = {s.idx for s in db.slots(campaign) if s.status == "done"}
        tags: dict[int, list[tuple[Any, ...]]] = {}
        for row in db.tags(campaign):
            if int(row[2]) in done:
                tags.setdefault(int(row[2]), []).append(row)
        for slot in sorted(tags):
            rows = tags[slot]
            doc = slot_document(st, campaign, rows, origin=origin)
            path = document_path(root, str(rows[0][5]), campaign.name, slot)
            text = dump(doc)
            if path.exists():
                if path.read_text(encoding="utf-8") == text:
                    unchanged.append(path.relative_to(root))
                    continue
                rewritten.append(path.relative_to(root))
            else:
                written.append(path.relative_to(root))
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)  # a reader (or a crash) never sees half a document
    return ExportReport(tuple(written), tuple(rewritten), tuple(unchanged))


def plan_hash(plan: Mapping[str, Any]) -> str:
    """``sha256:`` of the stored plan's canonical JSON: two slots ran the same plan if equal."""
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def slot_document(
    store: Store,
    campaign: CampaignRecord,
    rows: list[tuple[Any, ...]],
    *,
    origin: str | None = None,
) -> dict[str, Any]:
    """The document of one slot: ``rows`` are its ``CampaignDB.tags`` rows (one per target)."""
    run_id, _, slot, attempt, scheduled_ns, local_date, local_time = rows[0][:7]
    info = store.run(int(run_id))
    plan = scrub(dict(campaign.plan))  # stored without secrets; masked again all the same
    plan_targets = {t.get("name"): t for t in plan.get("targets", []) if isinstance(t, dict)}
    bills = _bills(store, info)
    targets = []
    for record in info.targets:
        options = scrub(dict(record.options))
        entry = plan_targets.get(record.name, {})
        cols = store.columns(info.id, target=record.name)
        targets.append(
            {
                "name": record.name,
                "provider": record.provider,
                "region": campaign.regions.get(record.name),
                "gpu": _first(options, _GPU_KEYS),
                "model": {k: options[k] for k in _MODEL_KEYS if options.get(k) is not None},
                "scaling": {k: options[k] for k in _SCALING_KEYS if options.get(k) is not None},
                **_deployment(record),
                **_figures(cols, info),
                "cold_start": _cold(cols),
                "bill": bills.get(record.name),
                "price": _price(entry, record.provider),
            }
        )
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "campaign": campaign.name,
        "slot": int(slot),
        "attempt": int(attempt),
        "scheduled_ns": int(scheduled_ns),
        "local_date": str(local_date),
        "local_time": str(local_time),
        "tz": campaign.schedule.tz,
        "schedule": campaign.schedule.describe(),
        "origin": origin,
        "run": {
            "uuid": info.uuid,
            "status": info.status,
            "error": None if info.error is None else redact(info.error),
            "started_ns": info.started_wall_ns,
            "ended_ns": info.ended_wall_ns,
            "requests": info.samples,
            "gpubench_version": info.gpubench_version,
        },
        "plan": {
            "hash": plan_hash(plan),
            "workload": plan.get("workload"),
            "scenarios": plan.get("scenarios"),
        },
        "targets": targets,
    }


def _first(options: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    return next((options[k] for k in keys if options.get(k) is not None), None)


def _deployment(record: TargetRecord) -> dict[str, Any]:
    """The plugin that measured, and the scaling settings and deployment details (model or
    image, hardware) the provider reported when the run opened it (``TargetRecord.
    deployment``). A run stored before gpubench kept them (store version 4) names the plugin
    as installed now, and says so."""
    found = record.deployment
    if found is None:
        dist = plugin_distribution(record.provider)
        name, version = dist if dist is not None else (None, None)
        plugin = {"name": name, "version": version, "as": "installed at export"}
        return {"plugin": plugin, "scaling_read": None, "deployed_read": None}
    plugin = {k: v for k, v in (found.get("plugin") or {}).items() if k in ("name", "version")}
    read = {"settings": found.get("scaling"), "how": found.get("scaling_read")}
    deployed = {"details": found.get("deployed"), "how": found.get("deployed_read")}
    return {
        "plugin": {**plugin, "as": "measured"},
        "scaling_read": scrub(read),
        "deployed_read": scrub(deployed),
    }


def _quantiles(values: npt.NDArray[np.float64]) -> dict[str, Any]:
    v = np.sort(values[~np.isnan(values)])
    if not v.size:
        return {"count": 0}
    rng = np.random.default_rng(0)  # seeded: the CI is part of the bytes
    out: dict[str, Any] = {"count": int(v.size)}
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        out[name] = float(np.quantile(v, q))
        out[f"{name}_ci"] = list(quantile_ci(v, q, rng=rng))
    return out


def _figures(cols: Columns, info: RunInfo) -> dict[str, Any]:
    """Requests, errors by kind, latency and throughput: all scenarios, then each one."""

    def summary(mask: npt.NDArray[np.bool_]) -> dict[str, Any]:
        outcome = cols["outcome"][mask]
        ok = outcome == Outcome.OK.code
        errors = Counter(Outcome.from_code(int(c)).value for c in outcome[~ok])
        tput = throughput(
            start_ns=cols["start_ns"][mask], end_ns=cols["end_ns"][mask], outcome=outcome
        )
        return {
            "requests": int(outcome.size),
            "ok": int(ok.sum()),
            "errors": dict(sorted(errors.items())),
            "error_rate": (outcome.size - int(ok.sum())) / outcome.size if outcome.size else None,
            "latency_ms": _quantiles(cols["latency_ms"][mask][ok]),
            "throughput_rps": tput.ok_per_s,
        }

    everything = summary(np.ones(cols["outcome"].size, dtype=bool))
    scenarios = {}
    for index, record in enumerate(info.scenarios):
        mask = cols["scenario"] == index
        if mask.any():
            scenarios[record.key(index)] = {"kind": record.kind, **summary(mask)}
    return {**everything, "scenarios": scenarios}


def _cold(cols: Columns) -> dict[str, Any]:
    """Every cold start (latency minus inference time) with its phases, and their summary."""
    cs = cold_starts_of(cols)
    values = cs.cold_start_ms
    phases = {p: getattr(cs, f"{p}_ms") for p in _PHASES}
    starts = [
        {
            "ms": float(values[i]),
            "confirmed": bool(cs.confirmed[i]),
            **{p: float(a[i]) for p, a in phases.items() if not math.isnan(float(a[i]))},
        }
        for i in range(values.size)
    ]
    return {**_quantiles(values), "inferred": cs.inferred, "starts": starts}


def _bills(store: Store, info: RunInfo) -> dict[str, dict[str, Any]]:
    """Each priced target's estimated bill for the slot (``gpubench cost run``)."""
    from ..cost import load_catalog
    from ..cost._priced import priced_targets

    try:
        costs = priced_targets(store, info, load_catalog(), {}, require_price=False)
    except GpubenchError as exc:  # an unknown SKU: the document says why there is no bill
        return {t.name: {"usd": None, "why": redact(str(exc))} for t in info.targets}
    return {
        c.target: {"usd": c.total_usd, "requests": c.requests, "workers": c.workers} for c in costs
    }


def _price(entry: Mapping[str, Any], provider: str) -> dict[str, Any] | None:
    """The price the plan gave the target: its SKU and USD per second (the catalog's for a
    SKU, as the catalog has it now), or None when unpriced."""
    from ..cost import load_catalog
    from ..cost._priced import target_rate
    from ..cost._tables import TargetSpec

    sku, rate = entry.get("price_sku"), entry.get("price_per_s_usd")
    if not sku and rate is None:
        return None
    billing = entry.get("billing")
    catalog_name = billing if isinstance(billing, str) and billing else provider
    try:
        spec = TargetSpec(provider, catalog_name, sku, 0.0, rate)
        usd_per_s: float | None = target_rate(load_catalog(), spec)
    except (GpubenchError, KeyError, ValueError):  # a SKU the catalog lacks: no rate
        usd_per_s = None
    return {"sku": sku, "usd_per_s": usd_per_s}
