"""A KServe model served by kserve's own ``ModelServer`` (the Open Inference Protocol server
KServe ships): it sleeps the ``sleep_ms`` its request carries (the echo probe's contract) and
answers its input tensors back. gpubench's Inferless plugin benchmarks it as it would a model
on Inferless (see examples/inferless_kserve.toml and docs/providers/inferless.md).

Run it with an interpreter that has kserve (kserve pins psutil<6, so give it its own venv):

    python3 -m venv .kserve && .kserve/bin/pip install kserve==0.21.0
    .kserve/bin/python examples/kserve_sleep_model.py --http_port 8080 --model_name sleepy

(``--http_port`` and ``--model_name`` are kserve's own ``kserve.model_server.parser``
arguments.) Each answer's ``parameters.inference_ms`` is the time ``predict`` took, measured
inside the server. The Inferless plugin's tests serve this same file.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import kserve
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer


class SleepModel(Model):  # type: ignore[misc]
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.ready = True

    async def predict(
        self, payload: InferRequest, headers: dict[str, str] | None = None
    ) -> InferResponse:
        started = time.perf_counter()
        sleep_ms = [float(t.data[0]) for t in payload.inputs if t.name == "sleep_ms"]
        await asyncio.sleep(sleep_ms[0] / 1e3 if sleep_ms else 0.0)
        outputs = [
            InferOutput(name=t.name, shape=list(t.shape), datatype=t.datatype, data=t.data)
            for t in payload.inputs
        ]
        spent_ms = (time.perf_counter() - started) * 1e3
        return InferResponse(
            response_id=payload.id or str(uuid.uuid4()),
            model_name=self.name,
            infer_outputs=outputs,
            parameters={"inference_ms": spent_ms},
        )


def main() -> None:
    parser = argparse.ArgumentParser(parents=[kserve.model_server.parser])
    args, _ = parser.parse_known_args()
    model = SleepModel(args.model_name)
    server = ModelServer(http_port=args.http_port, enable_grpc=False, workers=1)
    server.start([model])


if __name__ == "__main__":
    main()
