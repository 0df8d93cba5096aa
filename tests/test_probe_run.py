"""Probe results through a whole run: the local runtime serves the probe handler, the
gpu_probe workload stores its fields, and probe_results / print_probe_results read them back
with fraction of peak and cost per delivered TFLOP-hour."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from gpubench_sdk import Invocation, Outcome, Phase, Store
from gpubench_sdk._plugins import workload_class
from gpubench_sdk._store._store import ScenarioRecord, TargetRecord
from gpubench_sdk.cost import load_catalog
from gpubench_sdk.probe import GpuProbe, print_probe_results, probe_results, usd_per_tflop_hour

EXAMPLE = Path(__file__).parents[1] / "examples" / "probe_local.toml"


def test_gpu_probe_is_a_registered_workload() -> None:
    assert workload_class("gpu_probe") is GpuProbe
    request = GpuProbe(quick=True, phases=["matmul"], dtypes=["bf16"]).request(3)
    assert request.seq == 3
    assert request.payload == {
        "quick": True,
        "backend": "auto",
        "phases": "matmul",
        "dtypes": "bf16",
    }


def test_example_plan_stores_probe_fields(tmp_path: Path) -> None:
    store_path = tmp_path / "probe.sqlite"
    command = ["run", str(EXAMPLE), "--store", str(store_path), "--quiet"]
    done = subprocess.run(
        [sys.executable, "-m", "gpubench_sdk", *command],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "GPU probe: dense matmul" in done.stdout  # the run report prints the probe's tables
    with Store(store_path, readonly=True) as store:
        run = store.run("latest")
        invocations = store.invocations(run.id)
        assert len(invocations) == 2 and all(i.ok for i in invocations)
        for inv in invocations:
            assert inv.detail is not None and inv.detail["backend"] == "numpy"
            assert inv.detail["matmul_fp32_tflop_per_s"] > 0
            assert inv.detail["memory_copy_gb_per_s"] > 0 and inv.detail["first_op_ms"] >= 0
        [row] = probe_results(store, run)
        assert (row.target, row.provider, row.probes, row.distinct_hosts) == (
            "local-probe",
            "local",
            2,
            1,
        )
        tflops = row.tflop_per_s["fp32"]
        measured = sorted(i.detail["matmul_fp32_tflop_per_s"] for i in invocations if i.detail)
        assert tflops == pytest.approx(sum(measured) / 2)  # the median of two
        assert row.usd_per_s == 0.0002  # the plan's notional price
        assert row.usd_per_tflop_hour["fp32"] == pytest.approx(0.0002 * 3600 / tflops)
        out = io.StringIO()
        print_probe_results(store, run.id, console=Console(file=out, width=160))
        text = out.getvalue()
        assert "local-probe" in text and "fp32" in text and "1/2" in text


def _probe_invocation(seq: int, detail: dict[str, object], **kw: object) -> Invocation:
    fields: dict[str, object] = {
        "target": "gpu", "scenario": 0, "seq": seq, "phase": Phase.MEASURE, "scheduled_ns": seq,
        "start_ns": seq, "end_ns": seq + 10**9, "wall_start_ns": seq, "outcome": Outcome.OK,
        "detail": detail,
    }  # fmt: skip
    fields.update(kw)
    return Invocation(**fields)  # type: ignore[arg-type]


def test_fraction_of_peak_and_catalog_price(tmp_path: Path) -> None:
    catalog = load_catalog(max_age_days=100_000)
    rate = catalog.rate_usd_per_s("runpod", "L4")
    config = {"targets": [{"name": "gpu", "provider": "runpod", "price_sku": "L4"}]}
    detail = {
        "probe_version": 1, "backend": "torch", "device_name": "NVIDIA L4", "spec_model": "L4",
        "device_uuid": "GPU-a", "matmul_bf16_peak_tflop_per_s": 121.0,
        "matmul_fp32_tflop_per_s": 20.0,
    }  # fmt: skip
    with Store(tmp_path / "hand.sqlite") as store:
        run = store.begin_run(
            name="hand", config=config, targets=[TargetRecord("gpu", "runpod")],
            scenarios=[ScenarioRecord("burst", {})], origin_ns=0, started_wall_ns=0,
        )  # fmt: skip
        for seq, (bf16, boot) in enumerate(
            [(90.0, "boot-1"), (100.0, "boot-2"), (110.0, "boot-1")]
        ):
            fields = {**detail, "matmul_bf16_tflop_per_s": bf16, "boot_id": boot}
            fields["matmul_bf16_fraction_of_peak"] = bf16 / 121.0
            store.append(run.id, _probe_invocation(seq, fields))
        # neither a warm-up nor a failed request counts
        store.append(
            run.id,
            _probe_invocation(7, {**detail, "matmul_bf16_tflop_per_s": 1.0}, phase=Phase.WARMUP),
        )
        store.append(
            run.id,
            _probe_invocation(
                8, {**detail, "matmul_bf16_tflop_per_s": 1.0}, outcome=Outcome.HTTP_5XX
            ),
        )
        store.append(run.id, _probe_invocation(9, {"not": "a probe"}))
        store.flush()
        [row] = probe_results(store, run.id, catalog=catalog)
    assert row.probes == 3 and row.distinct_hosts == 2 and row.distinct_devices == 1
    assert row.tflop_per_s == {"fp32": 20.0, "bf16": 100.0} and row.best_dtype == "bf16"
    assert row.fraction_of_peak["bf16"] == pytest.approx(100 / 121)
    assert row.usd_per_s == rate
    assert row.usd_per_tflop_hour["bf16"] == pytest.approx(rate * 3600 / 100)
    assert row.usd_per_tflop_hour["fp32"] == pytest.approx(rate * 3600 / 20)


def test_usd_per_tflop_hour_edges() -> None:
    assert usd_per_tflop_hour(50.0, 0.001) == pytest.approx(0.072)
    assert usd_per_tflop_hour(None, 0.001) is None
    assert usd_per_tflop_hour(0.0, 0.001) is None
    assert usd_per_tflop_hour(50.0, None) is None


def test_read_refuses_what_is_not_a_probe_result() -> None:
    from gpubench_sdk import InvalidResponseError

    workload = GpuProbe()
    with pytest.raises(InvalidResponseError, match="probe_version"):
        workload.read({"echo": "x"})
    with pytest.raises(InvalidResponseError, match="not a JSON object"):
        workload.read("text")
    with pytest.raises(InvalidResponseError, match="not valid JSON"):
        workload.read(['{"probe_version": 1,'])
    assert workload.read('{"probe_version": 1, "backend": "numpy"}') == (None, None)
