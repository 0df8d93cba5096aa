"""Every platform wrapper of the probe, imported the way its platform does (platform modules
stubbed) and called for a real (small, numpy) probe result."""

from __future__ import annotations

import importlib.util
import runpy
import sys
import types
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpubench_sdk.probe import probe_fields
from gpubench_sdk.probe._fields import check_result

HANDLERS = Path(__file__).parents[1] / "examples" / "probe_handlers"
SMALL = {"quick": True, "backend": "numpy", "phases": "matmul", "matmul_n": 128}


def _load(relative: str) -> types.ModuleType:
    path = HANDLERS / relative
    name = "probe_handler_" + relative.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _is_small_probe(result: Any) -> None:
    fields = probe_fields(result)  # raises on anything that is not a probe result
    assert fields["backend"] == "numpy" and fields["matmul_fp32_tflop_per_s"]
    assert result["matmul"]["fp32"]["n"] == 128 and result["errors"] == {}


def test_runpod_handler_and_its_start_call(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load("runpod/handler.py")
    _is_small_probe(module.handler({"id": "job-1", "input": SMALL}))
    # Run as the worker image runs it, with runpod stubbed: start() gets the handler.
    started: dict[str, Any] = {}
    runpod = types.ModuleType("runpod")
    runpod.serverless = types.SimpleNamespace(start=started.update)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "runpod", runpod)
    runpy.run_path(str(HANDLERS / "runpod" / "handler.py"), run_name="__main__")
    _is_small_probe(started["handler"]({"input": SMALL}))


def test_cog_predictor(monkeypatch: pytest.MonkeyPatch) -> None:
    cog = types.ModuleType("cog")

    class BasePredictor:
        pass

    def Input(default: Any = None, **_: Any) -> Any:  # cog's own name
        return default

    cog.BasePredictor = BasePredictor  # type: ignore[attr-defined]
    cog.Input = Input  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cog", cog)
    predictor = _load("cog/predict.py").Predictor()
    predictor.setup()
    result = predictor.predict(quick=True, backend="numpy", phases="matmul", dtypes="fp32")
    assert result["backend"] == "numpy" and "fp32" in result["matmul"]
    config = (HANDLERS / "cog" / "cog.yaml").read_text()
    assert 'predict: "predict.py:Predictor"' in config and "gpu: true" in config


def test_huggingface_endpoint_handler() -> None:
    handler = _load("huggingface/handler.py").EndpointHandler(path="/repository")
    _is_small_probe(handler({"inputs": SMALL}))
    _is_small_probe(handler({"inputs": "ignored", "parameters": SMALL}))


def test_inferless_model_unwraps_kserve_scalars() -> None:
    model = _load("inferless/app.py").InferlessPythonModel()
    model.initialize()
    tensors = {key: [value] for key, value in SMALL.items()}  # one-element KServe tensors
    output = model.infer(tensors)["result"]
    assert isinstance(output, str)  # JSON text: a KServe string tensor
    _is_small_probe(check_result([output]))  # as a one-element BYTES tensor reads back
    model.finalize()
    schema = _load("inferless/input_schema.py").INPUT_SCHEMA
    assert set(schema) <= {"quick", "backend", "phases", "dtypes", "matmul_n"}


def test_asgi_app_over_http(serve_app: Any) -> None:
    served = serve_app(_load("asgi/app.py").app)
    with httpx.Client(base_url=served.url, timeout=120) as client:
        assert client.get("/health").json() == {"status": "ok"}
        answer = client.post("/", json=SMALL)
        assert answer.status_code == 200
        _is_small_probe(answer.json())
        bad = client.post("/probe", json={"backend": "tpu"})
        assert bad.status_code == 400 and "backend" in bad.json()["error"]
        assert client.post("/", content=b"[1]").status_code == 400
        assert client.post("/", content=b"{nope").status_code == 400
        assert client.get("/").status_code == 405
        assert client.get("/elsewhere").status_code == 404
