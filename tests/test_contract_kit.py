"""The plugin kit's small readers and guards (``_contract._kit``, ``_jobs``, ``_provider``): each
is what several plugins wrote for themselves, so each is checked here on its own."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from gpubench_sdk import (
    Job,
    Provider,
    ProviderOptions,
    Request,
    Result,
    ServerHTTPError,
    TransportError,
    key_headers,
    naming_errors,
)


class _Toy(Job[Any]):
    terminal = frozenset({"DONE", "FAILED"})

    async def submit(self) -> None:
        return None

    async def status(self) -> Any:
        return {}

    async def result(self, state: Any) -> Result:
        return Result(output=None)


def test_a_jobs_default_end_is_a_terminal_status() -> None:
    job = _Toy()
    assert job.finished({"status": "DONE"}) and job.finished({"status": "FAILED"})
    assert not job.finished({"status": "RUNNING"}) and not job.finished({})
    assert not job.finished("DONE")  # a state that is no mapping: override finished


def test_naming_errors_names_the_request_known_when_it_fails() -> None:
    call_id: str | None = None
    with pytest.raises(TransportError) as info, naming_errors("p", lambda: call_id):
        call_id = "fc-1"
        raise httpx.ConnectError("refused", request=httpx.Request("GET", "http://h/x"))
    assert info.value.request_id == "fc-1" and info.value.provider == "p"
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    own = ServerHTTPError("failed", provider="p")
    with pytest.raises(ServerHTTPError) as raised, naming_errors("p", lambda: "fc-2"):
        raise own
    assert raised.value is own and own.request_id == "fc-2"  # its id set, itself raised


class _Keyed(Provider):
    name = "keyed"

    async def invoke(self, request: Request) -> Result:
        raise NotImplementedError


@pytest.mark.parametrize("scheme", ["bearer", "api-key", "key", "modal", "none"])
def test_auth_headers_send_the_key_as_the_class_says(scheme: Any) -> None:
    key = SecretStr("id:secret")
    keyed = type("Keyed", (_Keyed,), {"key_scheme": scheme})(ProviderOptions(api_key=key))
    assert keyed.auth_headers() == key_headers(key, scheme)
    assert type("Keyed", (_Keyed,), {"key_scheme": scheme})().auth_headers() == {}
    assert _Keyed(ProviderOptions(api_key=key)).auth_headers() == {
        "Authorization": "Bearer id:secret"  # the default: bearer
    }
