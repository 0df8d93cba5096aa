"""The testing kit's ``throwaway_tls``: an emulator served over HTTPS on loopback with it is
trusted by a client given its CA, and refused by one that is not."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

pytest.importorskip("trustme")
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from gpubench_sdk.testing import serve, throwaway_tls


async def hello(request: object) -> JSONResponse:
    return JSONResponse({"hello": "tls"})


def test_a_client_trusting_the_ca_reads_the_https_answer(tmp_path: Path) -> None:
    ca, cert, key = throwaway_tls(tmp_path / "tls")
    assert all(Path(p).read_bytes().startswith(b"-----BEGIN") for p in (ca, cert, key))
    with serve(Starlette(routes=[Route("/", hello)]), tls=(cert, key)) as served:
        assert served.url.startswith("https://")
        trusted = httpx.get(served.url + "/", verify=ssl.create_default_context(cafile=ca))
        assert trusted.json() == {"hello": "tls"}
        with pytest.raises(httpx.ConnectError):  # the system's CAs do not know it
            httpx.get(served.url + "/")
