"""A custom handler for Hugging Face Inference Endpoints that answers gpubench's echo probe: it
sleeps the request's ``sleep_ms`` and echoes its ``echo`` back, with the time it took.

Push it as ``handler.py`` at the root of a model repository and deploy an endpoint from it (HF
runs custom handlers with its inference toolkit), or serve it here with the toolkit itself:

    HF_MODEL_DIR=examples/hf_probe_handler \\
        python -m uvicorn huggingface_inference_toolkit.webservice_starlette:app --port 8080

then benchmark it with ``provider = "huggingface"``, ``url = "http://127.0.0.1:8080"`` and the
``probe`` workload. The toolkit calls ``EndpointHandler(path)(data)`` with the request body
(``{"inputs": ..., "parameters"?: ...}``) and answers any exception with 400 ``{"error"}``
(huggingface-inference-toolkit ``handler.py``, ``webservice_starlette.py``).
"""

from __future__ import annotations

import time
from typing import Any


class EndpointHandler:
    def __init__(self, path: str = "") -> None:
        self.path = path  # the model directory: this probe loads nothing

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        inputs = data.get("inputs")
        if not isinstance(inputs, dict):
            raise ValueError("inputs must be the probe's object: {'sleep_ms', 'echo'}")
        if "fail" in inputs:
            raise RuntimeError(str(inputs["fail"]))
        started = time.perf_counter()
        time.sleep(float(inputs.get("sleep_ms", 0)) / 1e3)
        spent_ms = (time.perf_counter() - started) * 1e3
        return {"echo": inputs.get("echo"), "inference_ms": spent_ms}
