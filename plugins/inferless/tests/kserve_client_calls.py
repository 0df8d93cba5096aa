"""KServe's own v2 client (``kserve.InferenceRESTClient``) against a v2 server: every call the
Inferless plugin's protocol relies on, one JSON line per call with whether it was accepted.

Run with an interpreter that has kserve (``test_inferless_kserve.py`` does, against the
emulator): ``python kserve_client_calls.py BASE_URL MODEL API_KEY``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig


async def main(base: str, model: str, key: str) -> None:
    auth = {"Authorization": f"Bearer {key}"}
    client = InferenceRESTClient(RESTConfig(protocol="v2", retries=0, timeout=10))

    async def call(name: str, run: Callable[[], Awaitable[Any]], check: Any) -> None:
        try:
            value = await run()
            ok, detail = bool(check(value)), repr(value)[:300]
        except Exception as exc:  # a refused call is a result here, not a crash
            ok, detail = bool(check(exc)), f"{type(exc).__name__}: {exc}"[:300]
        print(json.dumps({"call": name, "accepted": ok, "detail": detail}), flush=True)

    def as_dict(response: Any) -> dict[str, Any]:
        return {o.name: list(o.data) for o in response.outputs}

    await call("is_server_live", lambda: client.is_server_live(base, headers=auth), bool)
    await call("is_server_ready", lambda: client.is_server_ready(base, headers=auth), bool)
    await call("is_model_ready", lambda: client.is_model_ready(base, model, headers=auth), bool)
    await call(
        "is_model_ready(unknown)",
        lambda: client.is_model_ready(base, "no_such_model", headers=auth),
        lambda ready: ready is False,
    )
    body = {
        "id": "kserve-client-1",
        "inputs": [
            {"name": "echo", "shape": [1], "datatype": "BYTES", "data": ["hello"]},
            {"name": "sleep_ms", "shape": [1], "datatype": "FP32", "data": [5.0]},
        ],
    }
    await call(
        "infer(dict)",
        lambda: client.infer(base, body, model_name=model, headers=auth),
        lambda r: r.id == "kserve-client-1" and as_dict(r)["echo"] == ["hello"],
    )
    request = InferRequest(
        model_name=model,
        infer_inputs=[
            InferInput("echo", [1], "BYTES", ["typed"]),
            InferInput("n", [1], "INT64", [3]),
        ],
        request_id="kserve-client-2",
    )
    await call(
        "infer(InferRequest)",
        lambda: client.infer(base, request, model_name=model, headers=auth),
        lambda r: r.id == "kserve-client-2" and as_dict(r)["echo"] == ["typed"],
    )
    await call(
        "infer(unknown model) -> 404",
        lambda: client.infer(base, body, model_name="no_such_model", headers=auth),
        lambda e: isinstance(e, httpx.HTTPStatusError) and e.response.status_code == 404,
    )
    no_shape = {"inputs": [{"name": "echo", "datatype": "BYTES", "data": ["x"]}]}
    await call(
        "infer(no shape) -> 422",
        lambda: client.infer(base, no_shape, model_name=model, headers=auth),
        lambda e: isinstance(e, httpx.HTTPStatusError) and e.response.status_code == 422,
    )
    await call(
        "infer(wrong key) -> 401",
        lambda: client.infer(base, body, model_name=model, headers={"Authorization": "x"}),
        lambda e: isinstance(e, httpx.HTTPStatusError) and e.response.status_code == 401,
    )
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
