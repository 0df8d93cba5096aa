"""Ray backend overhead: Ray with 1 and 2 workers against ``processes = 1, 2`` and one process.

Run by hand (not a test): ``python bench/ray_bench.py [--rounds 3] [--total 20000]``. Needs
nginx (``apt-get install -y nginx``) and the ray extra (``pip install -e '.[ray]'``).

Every mode runs the same plan through the same code a user runs (the ``http`` provider plugin,
the ``image`` workload, a closed loop of 64 concurrent requests) against the same local nginx
as ``bench/loadgen.py`` (an instant endpoint): one process (``run_blocking``), ``processes =
1, 2`` (``run_processes``) and Ray (``run_on_ray`` on a one-node Ray started here, workers = 1,
2). Modes are interleaved round by round, so a burst of load from the machine's other tenants
hits all of them alike; each ratio is taken within a round and the table shows the median and
the spread over rounds. Throughput is requests stored OK / (last end - first start).

Target (issue 16): Ray's throughput within 10% of ``processes = N`` at equal workers, and the
client-saturation flag (``RunResult.client_bound_s``) still raised when the client saturates.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1]))

from bench import loadgen

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # Ray on 127.0.0.1 only

IMAGE = {"/image": """default_type application/json; return 200 '{"images": ["x"]}';"""}
PORT = 18182


def plan(url: str, total: int, workers: int) -> dict[str, Any]:
    return {
        "run": {"name": "ray-bench"},
        "workload": {"kind": "image"},
        "execution": {"backend": "ray", "workers": workers},
        "targets": [{"name": "nginx", "provider": "http", "url": url, "auth_scheme": "none"}],
        "scenarios": [{"kind": "burst", "total": total, "concurrency": 64}],
    }


def _build(data: dict[str, Any], store: str) -> Any:
    """A Runner (module level: run_processes pickles it)."""
    from gpubench_sdk._plan._build import build_run
    from gpubench_sdk._plan._config import parse_config

    return build_run(parse_config(data), store=store)


def _measure(store: Path, result: Any) -> dict[str, float]:
    from gpubench_sdk import Store

    with Store(store, readonly=True) as s:
        cols = s.columns(result.run.id)
    return {**loadgen.served(cols), "client_bound_s": float(result.client_bound_s)}


def run_mode(mode: str, n: int, url: str, total: int, tmp: Path) -> dict[str, float]:
    from gpubench_sdk._plan._config import parse_config
    from gpubench_sdk._ray import run_on_ray
    from gpubench_sdk._runner._multiproc import run_blocking, run_processes

    store = tmp / f"{mode}{n}-{time.monotonic_ns()}.sqlite"
    data = plan(url, total, n)
    if mode == "one":
        result = run_blocking(_build(data, str(store)))
    elif mode == "processes":
        result = run_processes(functools.partial(_build, data, str(store)), n)
    else:
        result = run_on_ray(parse_config(data), store=store)
    if result.status != "completed":
        raise RuntimeError(f"{mode} {n}: {result.status} {result.run.error}")
    return _measure(store, result)


def _spread(values: list[float]) -> str:
    med = statistics.median(values)
    return f"{med:.2f} ({min(values):.2f}-{max(values):.2f})"


def ingest(total: int = 100_000, batch: int = 1000) -> None:
    """What streaming costs the driver per request: a worker's batch pickled (as Ray's object
    store does), unpickled, its wall clock moved, and appended to the store until committed."""
    import pickle

    from gpubench_sdk import Invocation, Outcome, Phase, Store
    from gpubench_sdk._store._store import ScenarioRecord, TargetRecord

    def make(seq: int) -> Invocation:
        t = seq * 300_000
        return Invocation(
            target="nginx", scenario=0, seq=seq, phase=Phase.MEASURE, scheduled_ns=t,
            start_ns=t + 1000, end_ns=t + 2_000_000, wall_start_ns=time.time_ns(),
            outcome=Outcome.OK, first_byte_ns=t + 1_500_000, http_status=200,
            request_id=f"req-{seq}", output_units=1, input_units=1,
        )  # fmt: skip

    lists = [[make(i + b) for i in range(batch)] for b in range(0, total, batch)]
    began = time.perf_counter()
    batches = [pickle.dumps(invs) for invs in lists]  # the worker's side of the hand-over
    pickled_us = (time.perf_counter() - began) / total * 1e6
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "i.sqlite") as store:
        info = store.begin_run(
            name="ingest", config={}, targets=[TargetRecord("nginx", "http", {}, [])],
            scenarios=[ScenarioRecord("burst")], origin_ns=0, started_wall_ns=time.time_ns(),
        )  # fmt: skip
        began = time.perf_counter()
        for blob in batches:
            for inv in pickle.loads(blob):
                inv.wall_start_ns -= 0
                store.append(info.id, inv)
        store.flush()
        spent = time.perf_counter() - began
    us = spent / total * 1e6
    print(
        f"ingest: worker {pickled_us:.1f} us to pickle, driver {us:.1f} us to unpickle and "
        f"store per request ({total / spent:,.0f} requests/s on one driver core)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--total", type=int, default=20000, help="requests per run")
    parser.add_argument("--ingest", action="store_true", help="only the driver's cost per sample")
    ns = parser.parse_args()
    if ns.ingest:
        for _ in range(3):
            ingest()
        return
    if shutil.which("nginx") is None:
        sys.exit("needs nginx: apt-get install -y nginx")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    root = Path(tempfile.mkdtemp(prefix="gpubench-raybench-"))
    nginx = loadgen.start_nginx(root, IMAGE, port=PORT, cpus=None)
    url = f"http://127.0.0.1:{PORT}/image"
    modes = [("one", 1), ("processes", 1), ("ray", 1), ("processes", 2), ("ray", 2)]
    runs: dict[tuple[str, int], list[dict[str, float]]] = {m: [] for m in modes}
    try:
        run_mode("ray", 2, url, 2000, root)  # warm Ray's worker pool: not measured
        for r in range(ns.rounds):
            for mode in modes:
                cell = run_mode(*mode, url, ns.total, root)
                runs[mode].append(cell)
                print(f"round {r}: {mode[0]} {mode[1]}: {cell}", flush=True)
    finally:
        nginx.terminate()
        nginx.wait()
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    print("\n| mode | workers | req/s median (min-max) | p50 ms | client-bound s (median) |")
    print("|---|---|---|---|---|")
    for mode in modes:
        cells = runs[mode]
        print(
            f"| {mode[0]} | {mode[1]} | {_spread([c['rps'] for c in cells])} "
            f"| {statistics.median(c['p50_ms'] for c in cells):.2f} "
            f"| {statistics.median(c['client_bound_s'] for c in cells):.1f} |"
        )
    for n in (1, 2):
        ratios = [
            ray["rps"] / proc["rps"]
            for ray, proc in zip(runs[("ray", n)], runs[("processes", n)], strict=True)
        ]
        print(f"ray/processes at {n} worker(s), per round: {_spread(ratios)}")
    ratios = [
        two["rps"] / one["rps"] for two, one in zip(runs[("ray", 2)], runs[("ray", 1)], strict=True)
    ]
    print(f"ray 2 workers / 1 worker, per round: {_spread(ratios)}")


if __name__ == "__main__":
    main()
