"""Every wait outside the Ray backend has a bound, and says what did not answer when it runs out.

The Ray backend's waits are in ``test_ray.py`` (the unreachable driver); the local runtime's
worker boot and start-up bounds are in ``test_local_runtime.py``. Here: the results store and
the campaign tables when another process holds the SQLite write lock, and the testing kit's
emulator start. Each lock is a real second connection to the same file, which is what another
``gpubench`` process or an open ``sqlite3`` session is to SQLite.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_store import begin, make_inv

from gpubench_sdk import Store, StoreError
from gpubench_sdk.campaign import CampaignDB
from gpubench_sdk.testing import CliEndToEnd

LOCKED = "another connection holds the file's write lock"


@contextmanager
def write_locked(path: Path) -> Iterator[sqlite3.Connection]:
    """Hold ``path``'s write lock (as another writer would) until the block ends."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN EXCLUSIVE")
        yield other
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()


def test_a_store_locked_by_another_writer_is_refused_naming_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    Store(path).close()
    with write_locked(path):
        began = time.monotonic()
        with pytest.raises(StoreError, match=f"{LOCKED}.*waited 0.3 s") as caught:
            Store(path, busy_timeout_s=0.3)
        assert time.monotonic() - began < 5
    assert "another store" in str(caught.value) and str(path) in str(caught.value)
    Store(path, busy_timeout_s=0.3).close()  # released: opens again


def test_a_lock_held_during_a_run_loses_no_result(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The lock outlasts SQLite's own wait five times over; the writer keeps the rows and
    # writes them once it is released (before, the writer died: "N samples lost").
    path = tmp_path / "runs.sqlite"
    with Store(path, flush_interval_s=0.02, busy_timeout_s=0.1) as store:
        run = begin(store)
        store.open_writer()
        with write_locked(path):
            for i in range(50):
                store.append(run.id, make_inv(i))
            time.sleep(0.5)
            assert LOCKED in caplog.text and "50 results wait in memory" in caplog.text
        store.flush()
        assert len(store.invocations(run.id)) == 50
    assert "the write lock was released" in caplog.text


def test_a_lock_never_released_ends_the_wait_at_close_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = Store(path, flush_interval_s=0.02, busy_timeout_s=0.2)
    run = begin(store)
    store.open_writer()
    with write_locked(path):
        for i in range(3):
            store.append(run.id, make_inv(i))
        began = time.monotonic()
        with pytest.raises(StoreError, match="3 results not yet written: " + LOCKED):
            store.flush()  # bounded: one more busy_timeout_s after the flush began
        store.append(run.id, make_inv(3))  # still taken: the lock may yet be released
        with pytest.raises(StoreError, match=f"{LOCKED}.*4 samples lost"):
            store.close()  # the last wait: what could not be written is counted, not hidden
        assert time.monotonic() - began < 5
    with Store(path) as reopened:  # what was committed before the lock is intact
        assert [r.id for r in reopened.runs()] == [run.id]


def test_campaign_tables_locked_by_another_scheduler_are_named(tmp_path: Path) -> None:
    path = tmp_path / "campaign.sqlite"
    CampaignDB(path).close()
    with write_locked(path):
        began = time.monotonic()
        with pytest.raises(StoreError, match=f"{LOCKED}.*waited 0.2 s"):
            CampaignDB(path, busy_timeout_s=0.2)  # the core store's open, first
        assert time.monotonic() - began < 5
    refused = pytest.raises(StoreError, match=f"campaign tables: write failed .*{LOCKED}.*0.2 s")
    with CampaignDB(path, busy_timeout_s=0.2) as db, write_locked(path):
        began = time.monotonic()
        with refused, db.txn() as conn:  # the campaign tables' own connection and bound
            conn.execute("DELETE FROM campaign_plans")
        assert time.monotonic() - began < 5


def test_an_emulator_that_never_prints_its_url_is_stopped_and_named(tmp_path: Path) -> None:
    (tmp_path / "hanging_emulator.py").write_text(
        "import os, time\n"
        "open(os.environ['PID_FILE'], 'w').write(str(os.getpid()))\n"
        "time.sleep(3600)\n"
    )
    cli = CliEndToEnd(tmp_path)
    pid_file = tmp_path / "pid"
    cli.env.update(PYTHONPATH=str(tmp_path), PID_FILE=str(pid_file))
    other = tmp_path / "serving_emulator.py"  # started first: it must outlive the failure
    other.write_text(
        "import os, time\n"
        "open(os.environ['PID_FILE'] + '.serving', 'w').write(str(os.getpid()))\n"
        "print('http://127.0.0.1:2/', flush=True)\n"
        "time.sleep(3600)\n"
    )
    assert cli.emulator("serving_emulator") == "http://127.0.0.1:2/"
    serving = int((tmp_path / "pid.serving").read_text())
    began = time.monotonic()
    # 5 s: far more than an interpreter takes to start and write its pid, even on a busy machine
    with pytest.raises(RuntimeError, match="hanging_emulator printed no URL within 5 s"):
        cli.emulator("hanging_emulator", start_timeout_s=5.0)
    assert time.monotonic() - began < 20
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # stopped and reaped, not left running
        os.kill(pid, 0)
    os.kill(serving, 0)  # the other emulator still runs ...
    cli.close()
    with pytest.raises(ProcessLookupError):  # ... until the test's end stops it
        os.kill(serving, 0)


def test_an_emulator_that_prints_its_url_is_used_at_once(tmp_path: Path) -> None:
    # The bound is only an upper limit: a start that answers is not held to it.
    (tmp_path / "quick_emulator.py").write_text(
        "import sys, time\nprint('http://127.0.0.1:1/', flush=True)\ntime.sleep(3600)\n"
    )
    cli = CliEndToEnd(tmp_path)
    cli.env["PYTHONPATH"] = str(tmp_path)
    try:
        began = time.monotonic()
        assert cli.emulator("quick_emulator", start_timeout_s=30) == "http://127.0.0.1:1/"
        assert time.monotonic() - began < 15
    finally:
        cli.close()
