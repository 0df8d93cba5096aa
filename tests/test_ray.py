"""The Ray backend on a real two-node Ray cluster on this machine, against the HTTP emulator.

Every node and the GCS are bound to and advertised on 127.0.0.1: ``node_ip_address`` for the
nodes, and ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (Ray's own switch, ray_constants.py) so that
Ray's node-address lookup answers the loopback address instead of the machine's interface.
Ray is the optional extra ``gpubench-sdk[ray]``: without it the module skips, except in CI,
where it must be installed (.ci/run installs it). The Ray Client test starts its own one-node
head with ``ray start`` (a Ray Client server needs one), also on 127.0.0.1.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before Ray is imported

import contextlib
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _emulator import emulator as run_emulator

from gpubench_sdk import ConfigError, LLMCompletion, Outcome, Phase, Store, StoreError, summarize
from gpubench_sdk._plan._build import build_run
from gpubench_sdk._plan._config import parse_config
from gpubench_sdk._runner._multiproc import run_blocking
from gpubench_sdk._scenarios._base import SEQ_BLOCK
from gpubench_sdk._scenarios._search import MaxRate, Sweep, constant_offsets
from gpubench_sdk.metrics import slo_verdict, step_stats

if os.environ.get("CI"):
    import ray  # CI installs the extra: a missing Ray fails there
else:
    ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster

from gpubench_sdk._ray import run_on_ray

pytestmark = pytest.mark.ray

KEY = "sk-ray-test-9f8e7d6c5b4a3210"
NODE = {"num_cpus": 1, "object_store_memory": 78 * 1024 * 1024, "node_ip_address": "127.0.0.1"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    c.add_node(**NODE, labels={"region": "test-east"})
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def emulator() -> Iterator[str]:
    """The generic HTTP emulator (gpubench_sdk.testing's simulated fleet), requiring KEY."""
    args = ("--api-key-env", "EMU_KEY", "--cold-start-s", "0", "--max-workers", "64")
    with run_emulator("gpubench_http.emulator", *args, env={"EMU_KEY": KEY}) as url:
        yield url


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMU_KEY", KEY)


def plan(url: str, scenarios: list[dict[str, Any]], **execution: Any) -> dict[str, Any]:
    return {
        "run": {"name": "ray-test"},
        "execution": {"backend": "ray", "workers": 2, **execution},
        "targets": [
            {
                "name": t,
                "provider": "http",
                "url": f"{url}/predict",
                "api_key_env": "EMU_KEY",
                "output_path": "$.output",
            }
            for t in ("a", "b")
        ],
        "scenarios": scenarios,
    }


def alive_workers() -> list[str]:
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]


MIXED = [
    {"kind": "burst", "total": 30, "concurrency": 3, "warmup": 4},
    {"kind": "rate", "rps": 40, "duration_s": 1.0},
]


def test_import_gpubench_sdk_never_imports_ray() -> None:
    code = (
        "import sys, gpubench_sdk, gpubench_sdk._ray, gpubench_sdk._cli\n"
        "from gpubench_sdk import Runner, Store, run_on_ray\n"
        "assert 'ray' not in sys.modules, sorted(m for m in sys.modules if 'ray' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_two_workers_store_what_one_process_does(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    config = parse_config(plan(emulator, MIXED))
    seen: list[Any] = []  # observers see every worker's requests, as the driver stores them
    result = run_on_ray(config, store=tmp_path / "ray.sqlite", observers=[seen.append])
    alone = run_blocking(build_run(config, store=tmp_path / "one.sqlite"))
    assert result.status == alone.status == "completed"
    with Store(tmp_path / "ray.sqlite", readonly=True) as s:
        run = s.run(result.run.id)
        invs = s.invocations(run.id)
        ray_rows = {(r.target, r.scenario): r for r in summarize(s, run)}
    with Store(tmp_path / "one.sqlite", readonly=True) as s:
        one = s.invocations(alone.run.id)
        one_rows = {(r.target, r.scenario): r for r in summarize(s, s.run(alone.run.id))}
        one_targets = s.run(alone.run.id).targets
    # what the first worker found when it opened the providers, sent with its results
    assert [t.deployment for t in run.targets] == [t.deployment for t in one_targets]
    assert all(t.deployment and t.deployment["plugin"]["version"] for t in run.targets)
    # the same summaries: counts exactly, the open loop's throughput (set by its schedule)
    # within noise
    assert ray_rows.keys() == one_rows.keys() and len(ray_rows) == 4
    for k, row in ray_rows.items():
        assert (row.requests, row.ok) == (one_rows[k].requests, one_rows[k].ok)
        if "rate" in row.scenario:
            assert row.throughput_rps == pytest.approx(one_rows[k].throughput_rps, rel=0.2)

    def key(i: Any) -> tuple[str, int, str, int]:
        return (i.target, i.scenario, i.phase.value, i.seq)

    # every planned request exactly once, sent by one worker or the other
    assert sorted(map(key, invs)) == sorted(map(key, one)) == sorted(map(key, seen))
    assert Counter((i.target, i.scenario) for i in invs) == {
        ("a", 0): 34, ("b", 0): 34, ("a", 1): 40, ("b", 1): 40
    }  # fmt: skip
    assert all(i.outcome is Outcome.OK for i in invs), {i.error for i in invs}  # the key arrived
    # the workers were spread over both nodes, and their clock offsets recorded
    workers = run.config["ray"]["workers"]
    assert len({w["node_id"] for w in workers}) == 2
    for w in workers:  # one machine: the monotonic clocks agree within the measurement's error
        assert abs(w["clock_offset_ms"]) <= w["rtt_ms"] / 2 + 1.0
    # the open-loop schedule is one schedule: seq k is due at k/rps from a common start
    rate = sorted((i for i in invs if i.scenario == 1 and i.target == "a"), key=lambda i: i.seq)
    t0 = rate[0].scheduled_ns
    worst_ms = max(abs(i.scheduled_ns - t0 - i.seq * 25e6) for i in rate) / 1e6
    assert worst_ms < 15, worst_ms
    # latencies are of the same order as one process's (the loaded machine: generous)
    ray_ms = sorted(i.latency_ms for i in invs if i.phase is Phase.MEASURE)
    one_ms = sorted(i.latency_ms for i in one if i.phase is Phase.MEASURE)
    assert ray_ms[len(ray_ms) // 2] < 10 * one_ms[len(one_ms) // 2] + 20
    # nothing left running, and the key in clear nowhere: not in the store, not in Ray's logs
    assert alive_workers() == []
    assert KEY.encode() not in (tmp_path / "ray.sqlite").read_bytes()
    session = Path(cluster.head_node.get_session_dir_path())
    leaked = [p for p in session.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaked == []


def test_drawn_requests_are_the_same_on_every_worker(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    """A seeded length distribution: each request is built once, by whichever worker sends it,
    and asks for what the same plan asks for in one process (its stored ``requested``)."""
    lengths = {
        "kind": "llm",
        "prompt_tokens": {"dist": "lognormal", "mean": 40, "stdev": 30, "min": 4, "max": 256},
        "max_tokens": {"dist": "empirical", "values": [8, 16, 32]},
        "seed": 3,
    }
    config = parse_config(
        {**plan(emulator, [{"kind": "burst", "total": 40, "concurrency": 4}]), "workload": lengths}
    )
    result = run_on_ray(config, store=tmp_path / "ray.sqlite")
    alone = run_blocking(build_run(config, store=tmp_path / "one.sqlite"))

    def asked(path: Path, run_id: int) -> dict[tuple[str, int], Any]:
        with Store(path, readonly=True) as s:
            return {(i.target, i.seq): (i.detail or {})["requested"] for i in s.invocations(run_id)}

    on_ray = asked(tmp_path / "ray.sqlite", result.run.id)
    assert len(on_ray) == 80  # 40 requests to each of two targets, each sent once
    assert on_ray == asked(tmp_path / "one.sqlite", alone.run.id)
    workload = LLMCompletion(**{k: v for k, v in lengths.items() if k != "kind"})
    for (_, seq), requested in on_ray.items():
        assert requested == workload.request(seq).detail["requested"]  # type: ignore[index]


def test_max_requests_is_one_budget_and_labels_pin_the_workers(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    data = plan(emulator, [{"kind": "burst", "total": 50, "concurrency": 4}],
                workers=1, labels={"region": "test-east"})  # fmt: skip
    data["run"]["max_requests"] = 23
    result = run_on_ray(parse_config(data), store=tmp_path / "s.sqlite")
    assert result.run.samples == 23 and result.stop_reason == "max_requests reached"
    (worker,) = result.run.config["ray"]["workers"]
    labelled = [n["NodeID"] for n in ray.nodes() if n.get("Labels", {}).get("region")]
    assert [worker["node_id"]] == labelled


def test_the_budget_guard_stops_every_worker(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    """Each worker meters its own requests against its share of the cap, as with -p N."""
    data = plan(emulator, [{"kind": "burst", "total": 3000, "concurrency": 2}])
    data["run"]["max_cost_usd"] = 1.0
    # billed per request, each rounded up to a whole second: $0.001 a request, no idle tail
    # for the guard to reserve, so the cap admits about 1,000 of the plan's 6,000
    for t in data["targets"]:
        t.update(billing="replicate/public", price_per_s_usd=0.001, timeout_s=0.5)
    result = run_on_ray(parse_config(data), store=tmp_path / "s.sqlite")
    assert result.status == "completed"
    assert result.stop_reason is not None and "max_cost_usd" in result.stop_reason
    with Store(tmp_path / "s.sqlite", readonly=True) as s:
        invs = s.invocations(result.run.id)
    assert len(invs) < 6000  # stopped before the plan's end
    spent = len(invs) * 0.001
    assert 0.2 < spent <= 1.0  # the cap, shared: each worker stopped at its half
    by_shard = Counter(i.seq % 2 for i in invs)  # closed-loop seqs: dealt every other one
    assert by_shard[0] > 30 and by_shard[1] > 30  # both workers sent until their guard


def test_a_lost_worker_is_named_its_samples_kept_and_the_other_finishes(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    config = parse_config(plan(emulator, [{"kind": "rate", "rps": 60, "duration_s": 2.0}]))

    killed: list[str] = []

    def kill_w1(stored: int) -> None:  # the driver's progress callback: samples stored so far
        if stored >= 60 and not killed:
            (name,) = [n for n in alive_workers() if n.endswith("-w1")]
            ray.kill(ray.get_actor(name, namespace="gpubench"), no_restart=True)
            killed.append(name)

    result = run_on_ray(config, store=tmp_path / "s.sqlite", on_progress=kill_w1)
    assert killed
    assert result.status == "failed"
    assert result.run.error is not None and result.run.error.startswith("partial run")
    assert "worker w1 (node 127.0.0.1" in result.run.error
    with Store(tmp_path / "s.sqlite", readonly=True) as s:
        invs = s.invocations(result.run.id)
    seqs = {t: {i.seq for i in invs if i.target == t} for t in ("a", "b")}
    for t in ("a", "b"):
        assert {q for q in range(120) if q % 2 == 0} <= seqs[t]  # w0 (even seqs) finished
        odd = {q for q in seqs[t] if q % 2}
        assert 0 < len(odd) < 60  # w1's samples up to its last batch, then nothing
    assert alive_workers() == []


def test_a_plugin_missing_on_the_workers_is_named_with_its_node(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    data = plan(emulator, MIXED)
    data["targets"][0]["provider"] = "no-such-provider"
    with pytest.raises(ConfigError) as caught:
        run_on_ray(parse_config(data), store=tmp_path / "s.sqlite")
    message = str(caught.value)
    assert "w0 (node 127.0.0.1" in message and "w1 (node 127.0.0.1" in message
    assert "'no-such-provider' is not installed" in message and "runtime_env" in message
    assert alive_workers() == []
    assert not (tmp_path / "s.sqlite").exists()  # nothing begun


def test_a_placement_the_cluster_cannot_hold_is_refused_at_once(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    began = time.monotonic()
    with pytest.raises(ConfigError, match=r"execution\.workers: got 5") as caught:
        run_on_ray(parse_config(plan(emulator, MIXED, workers=5)), store=tmp_path / "s.sqlite")
    assert time.monotonic() - began < 30  # not the placement timeout
    assert "lower workers or num_cpus, or add nodes" in str(caught.value)
    assert not (tmp_path / "s.sqlite").exists()


def _outward_address() -> str:
    """The address this machine's node-address lookup answers without the loopback switch
    (a UDP socket's local end toward a public address: no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("8.8.8.8", 53))
        except OSError:
            return "127.0.0.1"
        return str(s.getsockname()[0])


def test_a_driver_its_cluster_cannot_reach_is_refused_within_the_timeout(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    """Without the loopback switch, the driver's node address is this machine's interface,
    where no node of the 127.0.0.1 cluster runs: ray.init waits without end (400 s seen, in
    silence). The run is refused after execution.timeout_s, naming that address."""
    import tomli_w

    outward = _outward_address()
    if outward.startswith("127."):
        pytest.skip("no interface but loopback: the driver's address is the cluster's")
    config = tmp_path / "p.toml"
    config.write_text(tomli_w.dumps(plan(emulator, MIXED, timeout_s=8)))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    began = time.monotonic()
    refused = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--ray", cluster.address,
         "--store", str(tmp_path / "s.sqlite"), "--quiet"],
        capture_output=True, text=True, timeout=120, env={**env, "EMU_KEY": KEY},
    )  # fmt: skip
    took = time.monotonic() - began
    assert refused.returncode == 2, refused.stderr
    assert took < 60, took  # the bound (8 s) and the process's start, not Ray's own waits
    error = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1, refused.stderr
    assert "execution.timeout_s=8 s" in error[0] and f"node address is {outward}" in error[0]
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "s.sqlite").exists()


def _driver(cluster: Cluster, emulator: str, tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """``gpubench run PLAN --ray ADDRESS`` in its own process, once 40 samples are committed."""
    import tomli_w

    config = tmp_path / "p.toml"
    config.write_text(
        tomli_w.dumps(plan(emulator, [{"kind": "rate", "rps": 40, "duration_s": 20}]))
    )
    store = tmp_path / "s.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--ray", cluster.address,
         "--store", str(store), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if store.exists():
            try:
                with Store(store, readonly=True) as s:
                    if (runs := s.runs()) and runs[0].samples >= 40:
                        return proc, store
            except StoreError:  # the file exists, its schema not yet committed
                pass
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"no 40 samples stored: {proc.communicate()}")


def _gone_within(seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while alive_workers() and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive_workers()


def test_ctrl_c_stops_every_worker(cluster: Cluster, emulator: str, tmp_path: Path) -> None:
    proc, store = _driver(cluster, emulator, tmp_path)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted:" in err, err
    assert _gone_within(10) == []
    with Store(store, readonly=True) as s:
        (run,) = s.runs()
    assert run.status == "cancelled" and 40 <= run.samples < 1600


def test_a_killed_driver_leaves_a_consistent_store(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    proc, store = _driver(cluster, emulator, tmp_path)
    proc.kill()
    proc.wait(10)
    assert _gone_within(30) == []  # Ray removes the actors of a dead driver
    with sqlite3.connect(store) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with Store(store, readonly=True) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.status == "interrupted" and len(invs) >= 40
    assert all(i.outcome is Outcome.OK for i in invs)


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ray_emulated.toml"


def test_the_example_runs_from_the_cli(cluster: Cluster, emulator: str, tmp_path: Path) -> None:
    """examples/ray_emulated.toml, as docs/ray.md runs it: gpubench run ... --ray ADDRESS."""
    config = tmp_path / "ray.toml"
    config.write_text(EXAMPLE.read_text().replace("http://127.0.0.1:8787", emulator))
    store = tmp_path / "s.sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--ray", cluster.address,
         "--store", str(store), "--quiet"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "EMU_KEY": KEY},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ray-emulated" in done.stdout and KEY not in done.stdout + done.stderr
    assert "ray: 2 worker(s): w0 on 127.0.0.1 (clock " in done.stderr
    with Store(store, readonly=True) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.status == "completed" and len(invs) == 108 + 50
    assert all(i.outcome is Outcome.OK for i in invs)
    assert [w["name"] for w in run.config["ray"]["workers"]] == ["w0", "w1"]


def test_the_python_example_runs(
    cluster: Cluster, emulator: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/ray_from_python.py, on this process's Ray connection (as in a notebook)."""
    import runpy

    plan = tmp_path / "ray.toml"
    text = EXAMPLE.read_text().replace("http://127.0.0.1:8787", emulator)
    plan.write_text(text.replace('output = "gpubench-ray.sqlite"', f'output = "{tmp_path}/s.db"'))
    example = runpy.run_path(str(EXAMPLE.with_name("ray_from_python.py")))
    result = example["main"](plan, cluster.address)
    out = capsys.readouterr().out
    assert result.status == "completed" and "158 requests {'emu': 158}" in out
    assert "w1 on 127.0.0.1" in out and ray.is_initialized()  # the caller's connection stays


ADAPTIVE = [
    {"kind": "sweep", "duration_s": 0.5, "rates": 2, "max_concurrency": 4},
    # at most 2 in flight per target (1 per worker), each request 30 ms: the rate past what
    # that holds queues at the client, its latency (from the scheduled time) grows, it fails
    {"kind": "max_rate", "p95_ms": 250, "confidence": 0.6, "error_rate": 0.05,
     "start_rps": 10, "max_rps": 160, "trial_s": 0.5, "precision": 0.25, "max_trials": 6,
     "max_inflight": 2},
]  # fmt: skip


def _one_schedule(invs: list[Any], rps: float, n: int) -> None:
    """Both workers sent one step's share of ONE schedule: ``n`` requests at ``rps``. Each
    sends every other seq from its own start instant, so the seqs together are exactly
    0..n-1 and each worker's scheduled times are spaced exactly by the rate it chose."""
    seqs = sorted(i.seq % SEQ_BLOCK for i in invs)
    assert seqs == list(range(n)), (rps, n, seqs)
    for parity in (0, 1):
        mine = sorted((i for i in invs if i.seq % 2 == parity), key=lambda i: i.seq)
        first = mine[0].seq % SEQ_BLOCK
        for i in mine:
            k = i.seq % SEQ_BLOCK
            due_ns = int(k / rps * 1e9) - int(first / rps * 1e9)
            assert abs(i.scheduled_ns - mine[0].scheduled_ns - due_ns) < 10_000, (rps, k)


def test_sweep_and_max_rate_decide_alike_on_every_worker(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    """Each next step is decided from every worker's results, read from the driver's store:
    every step's schedule is one schedule, at the rate the stored results give."""
    data = plan(emulator, ADAPTIVE)
    data["workload"] = {"kind": "probe", "sleep_ms": 30}
    config = parse_config(data)
    result = run_on_ray(config, store=tmp_path / "s.sqlite")
    assert result.status == "completed", result.run.error
    with Store(tmp_path / "s.sqlite", readonly=True) as s:
        invs = s.invocations(result.run.id)
    assert result.run.samples == len(invs) == result.requests
    assert all(i.outcome is Outcome.OK for i in invs), {i.error for i in invs}
    sweep, max_rate = config.build_scenarios()
    assert isinstance(sweep, Sweep) and isinstance(max_rate, MaxRate)
    for target in ("a", "b"):
        mine = [i for i in invs if i.target == target and i.phase is Phase.MEASURE]
        steps: dict[tuple[int, int], list[Any]] = {}
        for i in mine:
            steps.setdefault((i.scenario, i.seq // SEQ_BLOCK), []).append(i)
        # sweep: the constant rates between this target's two probes, as stored
        probes = {st.step: st for st in step_stats(steps[0, 0] + steps[0, 1])}
        rates = sweep.rates_between(probes[0].throughput_rps, probes[1].throughput_rps)
        assert sorted(j for sc, j in steps if sc == 0) == [0, 1, 2, 3]
        for j, rps in enumerate(rates):
            _one_schedule(steps[0, 2 + j], rps, len(list(constant_offsets(rps, 0.5))))
        # max_rate: each trial at the rate the search picks from the verdicts before it
        tried: list[tuple[float, bool]] = []
        while (rps := max_rate.next_rate(tried)) is not None:
            step = steps[1, len(tried)]
            _one_schedule(step, rps, len(max_rate.trial_offsets(rps)))
            verdict = slo_verdict(step, max_rate.p95_ms, max_rate.error_rate, max_rate.confidence)
            tried.append((rps, verdict.passed))
        assert len(tried) == len([j for sc, j in steps if sc == 1])  # and no step more
        assert [r for r, _ in tried[:2]] == [10, 20]  # it doubled, then ...
        assert any(ok for _, ok in tried) and not all(ok for _, ok in tried)  # ... bisected
    assert alive_workers() == []


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in socks]
    for sock in socks:
        sock.close()
    return ports


@pytest.fixture()
def client_head(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], Path]]:
    """A one-node cluster from ``ray start --head`` with its Ray Client server, on 127.0.0.1,
    with Ray's token authentication (which ``ray start`` of Ray 2.60 turns on by default) given
    explicitly: ``RAY_AUTH_MODE=token`` and the token in ``RAY_AUTH_TOKEN``, for the head and
    for every client (docs.ray.io/en/latest/ray-security/token-auth.html). Nothing is written
    to ~/.ray: the token is only in the environment. It is started with the ``ray`` command
    installed beside this Python: started with ``python -c`` from this checkout instead, the
    per-client servers exited at once here ("Starting Ray client server failed")."""
    gcs, client, agent = _free_ports(3)
    # not what this process's own ray.init (the module's cluster) added to its environment
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_CLIENT_MODE", "PYTHONBREAKPOINT")}
    env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    # The client server forks a server per client while its gRPC threads run; with gRPC's
    # fork handlers on, that child sometimes died at once ("fork_posix.cc: Other threads are
    # currently calling into gRPC, skipping fork() handlers", then "Starting Ray client
    # server failed"), 2 runs in 6 here. The child only execs: it needs no fork support.
    env["GRPC_ENABLE_FORK_SUPPORT"] = "0"
    temp = tempfile.mkdtemp(prefix="gbrc-", dir="/tmp")  # Ray's socket paths must stay short
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block",
         "--node-ip-address=127.0.0.1", f"--port={gcs}",
         f"--ray-client-server-port={client}", "--num-cpus=2", "--include-dashboard=false",
         f"--object-store-memory={78 * 1024 * 1024}", "--disable-usage-stats",
         f"--dashboard-agent-listen-port={agent}",  # not the default: another cluster's
         f"--temp-dir={temp}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", client), 1):
                break
            assert head.poll() is None and time.monotonic() < deadline, "no Ray Client server"
            time.sleep(0.2)
        yield f"ray://127.0.0.1:{client}", env, Path(temp)
    finally:
        os.killpg(head.pid, signal.SIGKILL)  # the head and everything it started (its group)
        head.wait(10)
        shutil.rmtree(temp, ignore_errors=True)


def _client_server_logs(temp: Path) -> str:
    """The head's Ray Client server logs, for a failure's message (they say why a client was
    not served)."""
    logs = sorted(temp.glob("session_*/logs/ray_client_server*"))
    return "".join(f"\n--- {p.name}:\n" + p.read_text(errors="replace")[:3000] for p in logs)


def test_a_plan_runs_through_ray_client(
    client_head: tuple[str, dict[str, str], Path], emulator: str, tmp_path: Path
) -> None:
    """``gpubench run plan.toml --ray ray://127.0.0.1:PORT``: the driver talks to the cluster
    through Ray Client (its store stays here), and a sweep's steps are decided alike."""
    import tomli_w

    address, env, temp = client_head
    sweep = [{"kind": "sweep", "duration_s": 0.3, "rates": 1, "max_concurrency": 4}]
    config = tmp_path / "p.toml"
    config.write_text(tomli_w.dumps(plan(emulator, sweep)))
    store = tmp_path / "s.sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--ray", address,
         "--store", str(store), "--quiet"],
        capture_output=True, text=True, timeout=120, env={**env, "EMU_KEY": KEY},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr + _client_server_logs(temp)
    assert "ray: 2 worker(s): w0 on 127.0.0.1 (clock " in done.stderr
    assert KEY not in done.stdout + done.stderr and env["RAY_AUTH_TOKEN"] not in done.stderr
    with Store(store, readonly=True) as s:
        (run,) = s.runs()
        invs = s.invocations(run.id)
    assert run.status == "completed" and run.config["ray"]["address"] == address
    assert all(i.outcome is Outcome.OK for i in invs)
    assert Counter(i.seq // SEQ_BLOCK for i in invs).keys() == {0, 1, 2}
    for target in ("a", "b"):
        mine = [i for i in invs if i.target == target]
        probes = {st.step: st for st in step_stats(mine) if st.step < 2}
        (rps,) = Sweep(duration_s=0.3, rates=1).rates_between(
            probes[0].throughput_rps, probes[1].throughput_rps
        )
        step = [i for i in mine if i.seq // SEQ_BLOCK == 2]
        _one_schedule(step, rps, len(list(constant_offsets(rps, 0.3))))
    assert KEY.encode() not in store.read_bytes()
    # a wrong token: refused, and the error says what to set (Ray Client retries a refused
    # token as a server not up yet: three tries, here of 1 s each instead of 5, 10 and 20)
    wrong = {**env, "EMU_KEY": KEY, "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    for knob in ("INITIAL", "MAX"):
        wrong[f"RAY_CLIENT_{knob}_CONNECTION_TIMEOUT_S"] = "1"
    refused = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(config), "--ray", address,
         "--store", str(tmp_path / "refused.sqlite"), "--quiet"],
        capture_output=True, text=True, timeout=120, env=wrong,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert f"execution.address: got '{address}'" in refused.stderr
    assert "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN" in refused.stderr
    assert "Traceback" not in refused.stderr and wrong["RAY_AUTH_TOKEN"] not in refused.stderr
    assert not (tmp_path / "refused.sqlite").exists()


def test_a_lost_node_is_named_and_the_run_partial(
    cluster: Cluster, emulator: str, tmp_path: Path
) -> None:
    """Last in the module: it removes the labelled node for good."""
    (labelled,) = [n for n in cluster.worker_nodes if n.node_id in _labelled_node_ids()]
    config = parse_config(plan(emulator, [{"kind": "rate", "rps": 60, "duration_s": 2.0}]))
    removed: list[bool] = []

    def remove(stored: int) -> None:
        if stored >= 60 and not removed:
            cluster.remove_node(labelled, allow_graceful=False)  # its raylet and workers die
            removed.append(True)

    result = run_on_ray(config, store=tmp_path / "s.sqlite", on_progress=remove)
    assert removed and result.status == "failed"
    assert result.run.error is not None and result.run.error.startswith("partial run")
    (lost,) = [w for w in result.run.config["ray"]["workers"] if w["node_id"] == labelled.node_id]
    assert f"worker {lost['name']} (node 127.0.0.1" in result.run.error
    assert "the other 1 worker(s) finished" in result.run.error
    with Store(tmp_path / "s.sqlite", readonly=True) as s:
        invs = s.invocations(result.run.id)
    assert 60 <= len(invs) < 240 and all(i.outcome is Outcome.OK for i in invs)
    assert alive_workers() == []


def _labelled_node_ids() -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n["Alive"] and n.get("Labels", {}).get("region")}
