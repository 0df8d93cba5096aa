"""The Ray backend's parts that need no cluster: sealing, clock offsets, shares, the plan's
[execution] section and its CLI errors, a worker asking for results. tests/test_ray.py runs the
whole on a real cluster."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpubench_sdk import ConfigError
from gpubench_sdk._plan._config import parse_config

pytest.importorskip("cryptography")

from gpubench_sdk._ray._clock import measure
from gpubench_sdk._ray._handover import sealed_payload
from gpubench_sdk._ray._seal import Opener, seal
from gpubench_sdk._ray._worker import share

PLAN = {
    "targets": [{"name": "a", "provider": "http", "url": "http://127.0.0.1:9/x"}],
    "scenarios": [{"kind": "burst", "total": 4, "concurrency": 1}],
}


def test_sealed_for_one_worker_only_and_tamper_evident() -> None:
    worker, other = Opener(), Opener()
    box = seal(worker.public, {"env": {"K": "sk-sealed-123456"}})
    assert b"sk-sealed-123456" not in box
    assert worker.open(box) == {"env": {"K": "sk-sealed-123456"}}
    with pytest.raises(Exception):  # noqa: B017 - cryptography's InvalidTag: not for it
        other.open(box)
    flipped = box[:-1] + bytes([box[-1] ^ 1])
    with pytest.raises(Exception):  # noqa: B017 - cryptography's InvalidTag
        worker.open(flipped)
    assert "sk-" not in repr(worker)


def test_clock_offset_is_the_best_round_trip_midpoint() -> None:
    """A worker whose clocks run 5 s ahead, answering after a variable delay."""
    delays = iter([0.02, 0.001, 0.03, 0.01])

    def ask() -> tuple[int, int]:
        d = next(delays)
        time.sleep(d / 2)
        now = (time.perf_counter_ns() + 5_000_000_000, time.time_ns() + 5_000_000_000)
        time.sleep(d / 2)
        return now

    offset = measure(ask, rounds=4)
    assert offset.rtt_ns < 10_000_000  # the 1 ms round, not a slower one
    assert abs(offset.perf_ns - 5_000_000_000) <= offset.rtt_ns / 2 + 1_000_000
    assert abs(offset.wall_ns - 5_000_000_000) <= offset.rtt_ns / 2 + 1_000_000


@pytest.mark.parametrize("total,n", [(23, 1), (23, 2), (7, 3), (2, 5)])
def test_shares_add_up_to_the_budget(total: int, n: int) -> None:
    assert sum(share(total, k, n) for k in range(n)) == total


def test_secrets_are_read_here_and_files_become_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file-0123456789\n")
    monkeypatch.setenv("FROM_ENV", "sk-from-env-0123456789")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-0123456789")
    data = {
        "execution": {"backend": "ray", "env": ["AWS_SECRET_ACCESS_KEY"]},
        "targets": [
            {"name": "a", "provider": "http", "url": "http://h/x", "api_key_file": str(key_file)},
            {"name": "b", "provider": "http", "url": "http://h/x", "api_key_env": "FROM_ENV"},
        ],
        "scenarios": PLAN["scenarios"],
    }
    payload = sealed_payload(parse_config(data))
    a, _ = payload["plan"]["targets"]
    assert "api_key_file" not in a
    assert payload["env"][a["api_key_env"]] == "sk-from-file-0123456789"
    assert payload["env"]["FROM_ENV"] == "sk-from-env-0123456789"
    assert payload["env"]["AWS_SECRET_ACCESS_KEY"] == "aws-0123456789"
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ConfigError, match=r"execution\.env"):
        sealed_payload(parse_config(data))


def test_the_execution_section_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"execution\.runtime_env\.env_vars"):
        parse_config({**PLAN, "execution": {"runtime_env": {"env_vars": {"K": "v"}}}})
    with pytest.raises(ConfigError, match="workers"):
        parse_config({**PLAN, "execution": {"backend": "ray", "workers": 0}})
    with pytest.raises(ConfigError, match="worker"):
        parse_config({**PLAN, "execution": {"backend": "ray", "worker": 2}})
    local = parse_config(PLAN)
    assert "execution" not in local.stored()  # a local run's stored plan is as it was
    ray = parse_config({**PLAN, "execution": {"backend": "ray", "workers": 3}})
    assert ray.stored()["execution"]["workers"] == 3


def test_ray_and_processes_are_alternatives_on_the_cli(tmp_path: Path) -> None:
    plan = tmp_path / "p.toml"
    plan.write_text(
        '[[targets]]\nname = "a"\nprovider = "http"\nurl = "http://127.0.0.1:9/x"\n'
        '[[scenarios]]\nkind = "burst"\ntotal = 4\nconcurrency = 1\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", "run", str(plan), "--ray", "auto", "-p", "2"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--ray" in done.stderr and "execution.workers" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_ray_installed_the_error_names_the_extra(tmp_path: Path) -> None:
    plan = tmp_path / "p.toml"
    plan.write_text(
        '[execution]\nbackend = "ray"\n'
        '[[targets]]\nname = "a"\nprovider = "http"\nurl = "http://127.0.0.1:9/x"\n'
        '[[scenarios]]\nkind = "burst"\ntotal = 4\nconcurrency = 1\n'
    )
    code = (
        "import sys\n"
        "sys.modules['ray'] = None  # as if the extra were not installed\n"
        "from gpubench_sdk._cli import main\n"
        f"main(['run', {str(plan)!r}, '--store', {str(tmp_path / 's.sqlite')!r}])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "pip install 'gpubench-sdk[ray]'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_placements_the_cluster_can_never_hold_are_known_before_waiting() -> None:
    from gpubench_sdk._ray._place import feasible

    def node(cpus: float, alive: bool = True, **labels: str) -> dict[str, object]:
        return {"Alive": alive, "Resources": {"CPU": cpus}, "Labels": labels}

    nodes = [node(2), node(1, region="east"), node(4, alive=False)]
    cpu = {"CPU": 1.0}
    assert feasible(nodes, cpu, {}, "spread", 3)
    assert not feasible(nodes, cpu, {}, "spread", 4)  # the dead node's CPUs do not count
    assert not feasible(nodes, cpu, {}, "strict_spread", 3)  # two nodes alive
    assert feasible(nodes, cpu, {}, "strict_pack", 2) and not feasible(nodes, cpu, {}, "pack", 4)
    assert feasible(nodes, cpu, {"region": "east"}, "spread", 1)
    assert not feasible(nodes, cpu, {"region": "east"}, "spread", 2)
    assert not feasible(nodes, {"CPU": 1.0, "gpu_east": 1.0}, {}, "spread", 1)


def test_an_embedded_local_runtime_is_refused_before_connecting() -> None:
    from gpubench_sdk import run_on_ray

    data = {**PLAN, "targets": [{"name": "l", "provider": "local"}]}
    with pytest.raises(ConfigError, match=r"targets\[0\]\.url.*gpubench local serve"):
        run_on_ray(parse_config(data), address="ray://nowhere.invalid:10001")


def test_a_worker_asks_once_per_barrier_and_is_answered_by_barrier() -> None:
    """The worker's side of ``Load.results()`` (test_ray.py runs it on a cluster): it says in
    ``poll`` after which barrier it asks, takes only the answer for that barrier, asks once
    per barrier, and gives up (no results) when the run is stopped."""
    import threading

    from gpubench_sdk._ray._worker import LoadWorker

    worker: Any = LoadWorker("w0")  # answered with strings: the protocol carries any records
    got: list[list[str]] = []

    def ask() -> None:
        got.append(worker._results())

    worker._gen = 2  # it passed two barriers
    t = threading.Thread(target=ask)
    t.start()
    deadline = time.monotonic() + 10
    while worker.poll()[1]["asking"] != 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker.poll()[1]["asking"] == 2
    worker.answer(1, ["stale"])  # an older barrier's: not taken
    time.sleep(0.05)
    assert t.is_alive() and got == []
    worker.answer(2, ["a", "b"])
    t.join(10)
    assert got == [["a", "b"]] and worker.poll()[1]["asking"] is None
    assert worker._results() == ["a", "b"]  # again after the same barrier: no second ask
    worker._gen = 3
    t = threading.Thread(target=ask)
    t.start()
    while worker.poll()[1]["asking"] != 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.stop("stopped by SIGINT")  # the run is stopping: the shape sees nothing and ends
    t.join(10)
    assert got[-1] == [] and not t.is_alive()
