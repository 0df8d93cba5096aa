"""How fast ``gpubench site build`` is on a tracker's whole history, and how big the front page.

Target (issue 29): two years of daily data for 12 provider/region targets (about 9,000
documents) built "in seconds", the front page under 300 KB. Run by hand:

    python bench/site_bench.py [--days 730] [--targets 12] [--keep DIR]

Writes the documents (one campaign per target, one slot a day, as ``gpubench campaign export``
lays them out: ten cold starts with phases, latency quantiles with CIs, a burst scenario, the
bill, a price change a year in, and a cold-start step on three targets), then times the build
as a user runs it (``python -m gpubench_sdk site build``, interpreter start included) and
prints the time, the pages written and the front page's size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PROVIDERS = ("runpod", "modal", "replicate", "baseten", "fal", "huggingface")
REGIONS = ("us-east", "eu-west")
DAY0 = dt.date(2025, 1, 1)


def _q(values: np.ndarray) -> dict[str, Any]:
    v = np.sort(values)
    out: dict[str, Any] = {"count": int(v.size)}
    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
        mid = float(np.quantile(v, q))
        out[name], out[f"{name}_ci"] = round(mid, 3), [round(mid * 0.93, 3), round(mid * 1.07, 3)]
    return out


def document(target: int, day: int, rng: np.random.Generator) -> dict[str, Any]:
    provider, region = PROVIDERS[target % 6], REGIONS[target // 6 % 2]
    name = f"{provider}-{region}"
    base = 400.0 + 150 * target
    if target % 4 == 0 and day >= 400:  # a lasting step: the detector must flag its first day
        base *= 1.8
    colds = rng.lognormal(np.log(base), 0.15, 10)
    lat = rng.lognormal(np.log(80 + 10 * target), 0.3, 200)
    price = 0.0004 + 0.00005 * target
    if day >= 365 and target % 3 == 0:
        price *= 0.9  # a price cut a year in
    errors = int(rng.poisson(0.5))
    date = (DAY0 + dt.timedelta(days=day)).isoformat()
    starts = [
        {"ms": round(float(c), 3), "confirmed": True, "boot": round(float(c) * 0.8, 3),
         "scheduling": round(float(c) * 0.15, 3), "execution": round(float(c) * 0.05, 3)}
        for c in colds
    ]  # fmt: skip
    summary = {"requests": 210, "ok": 210 - errors, "error_rate": errors / 210,
               "errors": {"timeout": errors} if errors else {}, "latency_ms": _q(lat),
               "throughput_rps": 20.0}  # fmt: skip
    return {
        "schema": "gpubench-tracker",
        "schema_version": 1,
        "campaign": name,
        "slot": day,
        "attempt": 1,
        "local_date": date,
        "local_time": "09:00",
        "scheduled_ns": 0,
        "tz": "UTC",
        "schedule": "cron 0 9 * * * (UTC)",
        "origin": "GitHub Actions, ubuntu-latest",
        "run": {
            "uuid": f"{target}-{day}",
            "status": "completed",
            "error": None,
            "started_ns": 0,
            "ended_ns": 0,
            "requests": 210,
            "gpubench_version": "0.1.0",
        },
        "plan": {
            "hash": "sha256:" + "0" * 64,
            "workload": {"kind": "probe"},
            "scenarios": [{"kind": "cold_starts", "n": 10}, {"kind": "burst", "total": 200}],
        },
        "targets": [
            {
                "name": name,
                "provider": provider,
                "region": region,
                "gpu": "A10G",
                "model": {"endpoint_id": f"ep-{target}"},
                "scaling": {"max_workers": 4},
                "plugin": {"name": f"gpubench-{provider}", "version": "0.1.0"},
                **summary,
                "scenarios": {"1:burst": {"kind": "burst", **summary}},
                "cold_start": {**_q(colds), "inferred": False, "starts": starts},
                "bill": {"usd": float(colds.sum() / 1000 + 20) * price, "requests": 210},
                "price": {"sku": None, "usd_per_s": price},
            }
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=730)
    parser.add_argument("--targets", type=int, default=12)
    parser.add_argument("--keep", type=Path, default=None, help="build here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        data, site = work / "repo", work / "site"
        rng = np.random.default_rng(29)
        started = time.perf_counter()
        for day in range(args.days):
            for target in range(args.targets):
                doc = document(target, day, rng)
                date = doc["local_date"]
                folder = data / "data" / date[:4] / date[5:7] / date[8:]
                folder.mkdir(parents=True, exist_ok=True)
                text = json.dumps(doc, sort_keys=True, indent=1) + "\n"
                (folder / f"{doc['campaign']}-{day}.json").write_text(text)
        n = args.days * args.targets
        print(f"wrote {n:,} documents in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "gpubench_sdk", "site", "build", str(data), "-o", str(site)],
            capture_output=True, text=True, cwd=ROOT, check=False,
        )  # fmt: skip
        took = time.perf_counter() - started
        if proc.returncode:
            sys.exit(proc.stderr)
        front = (site / "index.html").stat().st_size
        print(proc.stdout.strip())
        print(f"site build: {took:.1f} s for {n:,} documents; front page {front / 1024:.0f} KB")


if __name__ == "__main__":
    main()
