"""``HTTPProvider``: any JSON endpoint (Modal web endpoints, Azure Container Apps, Baseten, a
user's own service), described by options: method, URL, auth, body template, where to read."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal, Self

import httpx
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

import gpubench_sdk as sdk

from ._template import Render, compile_path, compile_template


class Timing(BaseModel):
    """Where one server-reported time is read: a response header or a JSON path, in ms or s."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: Literal["queue_ms", "execution_ms", "setup_ms"]
    header: str | None = None
    json_path: str | None = None
    unit: Literal["ms", "s"] = "ms"
    _path: Callable[[Any], Any] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.header is None) == (self.json_path is None):
            raise ValueError(f"timing {self.field}: give exactly one of header or json_path")
        if self.json_path is not None:
            self._path = compile_path(self.json_path, f"timings.{self.field}.json_path")
        return self

    def read(self, headers: Mapping[str, str], document: Any) -> float | None:
        """The time in ms, or None where the answer lacks it or it is not a finite number >= 0
        (a missing timing is not a failed request)."""
        path = self._path  # set exactly when the time is read from the JSON body
        try:
            value = sdk.reported_time(path(document) if path else headers.get(str(self.header)))
        except (LookupError, TypeError, ValueError):
            return None
        return None if value is None else value * (1000.0 if self.unit == "s" else 1.0)


class HTTPOptions(sdk.ProviderOptions):
    """Options of a generic JSON endpoint. The API key (``api_key_env``) is sent as
    ``auth_scheme`` says: ``bearer`` (``Authorization: Bearer <key>``), ``api-key``
    (``Authorization: Api-Key <key>``, Baseten), ``key`` (``Authorization: Key <key>``, fal),
    ``modal`` (``Modal-Key`` and ``Modal-Secret`` from a key written ``<key>:<secret>``), or
    ``none``."""

    url: str = Field(description="the endpoint to call")
    method: Literal["POST", "PUT", "GET"] = "POST"
    auth_scheme: sdk.KeyScheme = Field(default="bearer", description="how the API key is sent")
    body: Any = Field(default="{payload}", description="the JSON body template")
    output_path: str = Field(default="$", description="JSON path of the output in the answer")
    request_id_header: str | None = Field(default="x-request-id")
    request_id_path: str | None = Field(default=None, description="JSON path of a request id")
    timings: list[Timing] = Field(default_factory=list)
    health_url: str | None = Field(
        default=None,
        description="GET it for readiness: 2xx = ready, anything else = not",
    )
    _render: Render = PrivateAttr()

    @field_validator("url", "health_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, got {value!r}")
        return value

    @model_validator(mode="after")
    def _compile(self) -> Self:
        self._render = compile_template(self.body)  # ConfigError names the body field
        compile_path(self.output_path, "output_path")
        if self.request_id_path is not None:
            compile_path(self.request_id_path, "request_id_path")
        fields = [t.field for t in self.timings]
        if len(set(fields)) != len(fields):
            raise sdk.ConfigError("timings", fields, "at most one source per field")
        if self.method == "GET" and self.body != "{payload}":
            raise sdk.ConfigError("body", self.body, "no body with method GET (use POST or PUT)")
        key = self.api_key
        if self.auth_scheme == "modal" and key is not None and ":" not in key.get_secret_value():
            expected = "'<Modal-Key>:<Modal-Secret>' for auth_scheme=modal"
            raise sdk.ConfigError("api_key", "<hidden>", expected)
        return self

    def render(self, request: sdk.Request) -> Any:
        return self._render(request)


class HTTPProvider(sdk.Provider):
    """POSTs (or PUTs/GETs) the rendered body, follows redirects (Modal answers requests over
    150 s with a 303 to a result URL), reads the output and any configured server timings."""

    name = "http"
    capabilities = sdk.Capabilities()  # per target: server timings and readiness come from options
    options: HTTPOptions

    def __init__(self, options: sdk.ProviderOptions | None = None, **kw: Any) -> None:
        super().__init__(options, **kw)
        o = self.options
        # What this target can do depends on its options: the instance says so to the runner.
        timings = frozenset(t.field for t in o.timings)
        sdk.with_capabilities(self, fleet_state=o.health_url is not None, server_timings=timings)

    def auth_headers(self) -> dict[str, str]:
        return sdk.key_headers(self.options.api_key, self.options.auth_scheme)

    async def open(self) -> None:
        o = self.options
        self._headers = {**o.headers, **self.auth_headers()}
        # The call is the same every time but for its body: prepared once (the lean path).
        headers = self._headers if o.method == "GET" else {**self._headers, "Content-Type": _JSON}
        self._call = sdk.PreparedCall(self.client, o.method, o.url, headers=headers)
        self._read_output = compile_path(o.output_path, "output_path")
        self._read_id = compile_path(o.request_id_path, "") if o.request_id_path else None

    async def invoke(self, request: sdk.Request) -> sdk.Result:
        o = self.options
        content = None if o.method == "GET" else json.dumps(o.render(request)).encode()
        # A timeout, reset, refused connection, truncated body or too many redirects leaves
        # through invoke's boundary as the core's ProviderError (as_provider_error).
        response = await self._call.send(content)
        status = response.status_code
        if status >= 400:
            raise self._http_error(response)
        if 300 <= status < 400:  # a redirect the client was told not to follow
            raise self._invalid(
                f"unfollowed redirect {status} to {response.headers.get('location')}", status
            )
        try:
            document: Any = response.json()
        except ValueError:
            if o.output_path != "$":
                raise self._invalid("the answer is not JSON", status) from None
            document = response.text
        try:
            output = self._read_output(document)
            found = self._read_id(document) if self._read_id else None
        except LookupError as exc:
            raise self._invalid(str(exc), status) from None
        request_id = None if found is None else str(found)
        if request_id is None and o.request_id_header:
            request_id = response.headers.get(o.request_id_header)
        result = sdk.http_result(response, output=output, request_id=request_id)
        for timing in o.timings:
            setattr(result, timing.field, timing.read(response.headers, document))
        return result

    async def state(self) -> sdk.FleetState:
        """Readiness from ``health_url``: 2xx is one replica ready (at least), else none."""
        url = self.options.health_url
        if url is None:
            return await super().state()
        try:
            response = await self.client.get(url, headers=self._headers)
        except httpx.HTTPError as exc:
            raise sdk.as_provider_error(exc, provider=self.name) from exc
        ready = 200 <= response.status_code < 300
        return sdk.FleetState(
            ready=1 if ready else 0, detail={"healthy": ready, "status": response.status_code}
        )

    def _http_error(self, response: sdk.CallResponse) -> sdk.ProviderError:
        """The core's error for a status >= 400 (a 429's ``Retry-After`` read in seconds or as
        an HTTP date), showing the answer's own ``error``, ``detail`` or ``message`` text where
        it has one (FastAPI's 422 list as ``loc: msg`` per field), else the start of its body."""
        detail = sdk.error_text(response)
        return sdk.status_error(response.as_httpx(), provider=self.name, detail=detail)

    def _invalid(self, message: str, status: int) -> sdk.InvalidResponseError:
        return sdk.InvalidResponseError(message, provider=self.name, status_code=status)


_JSON = "application/json"
