"""A KServe model for the Inferless tests, served by kserve's own ``ModelServer`` (the Open
Inference Protocol server KServe ships): it sleeps the ``sleep_ms`` its request carries (the
echo probe's contract) and answers its input tensors back.

Run as a script with an interpreter that has ``kserve`` (see ``test_inferless_kserve.py``):
``python kserve_sleep_model.py --http_port P --model_name M`` (both parsed by kserve's own
``kserve.model_server.parser``). The answer's ``parameters.inference_ms`` is the time
``predict`` took, measured inside the server: the server-reported time to compare against.
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
