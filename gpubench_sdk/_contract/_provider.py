"""The Provider interface: one required method, everything else a declared capability."""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextvars import ContextVar
from types import TracebackType
from typing import Any, ClassVar, Literal, Self

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from .._base._errors import CapabilityError, ProviderError
from .._base._secrets import remember, scrub, scrub_headers, scrub_url
from .._base._types import ColdCheck, FleetState, Request, Result, ScalingSettings
from .._base._validate import check_url
from .._transport._client import as_provider_error, make_client
from ._capabilities import Capabilities
from ._input import InputMap


class ProviderOptions(BaseModel):
    """Options every provider accepts. A provider subclasses it to add its own fields.

    ``api_key`` is never written in a config file: the config names ``api_key_env`` or
    ``api_key_file`` and gpubench resolves it into a masked ``SecretStr``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    timeout_s: float = Field(default=300.0, gt=0, description="per-request deadline in seconds")
    headers: dict[str, str] = Field(default_factory=dict, description="extra request headers")
    input: InputMap | None = Field(
        default=None, description="how the workload's request maps onto the model's input"
    )

    @model_validator(mode="after")
    def _remember_secrets(self) -> Self:
        # However the options were made (config file or Python), their secrets get scrubbed
        # from any error text that leaves the process.
        if self.api_key is not None:
            remember(self.api_key.get_secret_value())
        scrub(dict(self))  # remembers credential values: headers', options', URLs'.
        return self

    @model_validator(mode="after")
    def _urls_valid(self) -> Self:
        # Every plugin's URL options, checked here so that none needs code of its own: a
        # URL without a scheme or host would only fail later, as an opaque transport error.
        for name, value in self:
            if isinstance(value, str) and _is_url_field(name):
                check_url(name, value, host_only_ok=not name.endswith("url"))
        return self

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            if name == "headers" and isinstance(value, dict):
                value = scrub_headers(value)
            elif isinstance(value, str) and _is_url_field(str(name)):
                value = scrub_url(value)
            yield name, value

    def public(self) -> dict[str, Any]:
        """The options as stored with a run: no api_key; header values (all but a few public
        ones), credential-named options and URL query values masked (``_secrets.scrub``)."""
        data: dict[str, Any] = scrub(json.loads(self.model_dump_json()))
        return data


def _is_url_field(name: str) -> bool:
    return name in ("url", "endpoint") or name.endswith(("_url", "_endpoint"))


KeyScheme = Literal["bearer", "api-key", "key", "modal", "none"]
_SCHEMES = {"bearer": "Bearer", "api-key": "Api-Key", "key": "Key"}


def key_headers(api_key: SecretStr | None, scheme: KeyScheme = "bearer") -> dict[str, str]:
    """The headers carrying ``api_key``: ``Authorization: Bearer|Api-Key|Key <key>``, Modal's
    ``Modal-Key``/``Modal-Secret`` from a key written ``<id>:<secret>``, or none."""
    if api_key is None or scheme == "none":
        return {}
    key = api_key.get_secret_value()
    if scheme == "modal":
        token_id, _, secret = key.partition(":")
        return {"Modal-Key": token_id, "Modal-Secret": secret}
    return {"Authorization": f"{_SCHEMES[scheme]} {key}"}


Invoke = Callable[["Provider", Request], Coroutine[Any, Any, Result]]
# The provider whose invoke boundary the current call is inside: a subclass's invoke calling
# super().invoke() must not map the input or the errors a second time.
_INSIDE: ContextVar[Provider | None] = ContextVar("gpubench_invoke", default=None)


def _boundary(invoke: Invoke) -> Invoke:
    """Wrap a plugin's ``invoke``: map the input on the way in, errors on the way out."""

    @functools.wraps(invoke)
    async def bounded(self: Provider, request: Request) -> Result:
        if _INSIDE.get() is self:
            return await invoke(self, request)
        mapping: InputMap | None = getattr(self.options, "input", None)
        if mapping is not None:
            request = mapping.map_request(request)
        token = _INSIDE.set(self)
        try:
            return await invoke(self, request)
        except ProviderError:
            raise
        except Exception as exc:
            raise as_provider_error(exc, provider=self.name) from exc
        finally:
            _INSIDE.reset(token)

    bounded.__gpubench_boundary__ = True  # type: ignore[attr-defined]
    return bounded


def _declared_options(cls: type, hint: Any) -> type[ProviderOptions]:
    """The class a provider's ``options: AcmeOptions`` names: its ``Options``, so the options
    are declared once, for mypy and for validation alike. A postponed annotation (``from
    __future__ import annotations``) is a name, or a dotted one, looked up in the class's
    module; anything else needs ``Options = ...`` set as well."""
    if isinstance(hint, str):
        head, *attributes = hint.split(".")
        found = vars(sys.modules[cls.__module__]).get(head.strip())
        for name in attributes:
            found = getattr(found, name.strip(), None)
        hint = found if found is not None else hint
    if isinstance(hint, type) and issubclass(hint, ProviderOptions):
        return hint
    raise TypeError(
        f"{cls.__qualname__}: its annotation 'options: {hint}' names no ProviderOptions "
        f"subclass in module {cls.__module__}; set Options = <that class> in the class body"
    )


class Provider:
    """Adapter for one serverless platform.

    Subclasses set ``name`` and ``capabilities``, may declare their ``ProviderOptions``
    subclass (``options: AcmeOptions``, which sets ``Options`` too, or ``Options = AcmeOptions``),
    and implement ``invoke``. Each capability they declare obliges them to implement
    the matching method (``fleet_state`` -> ``state``, ``cold_start_control`` -> ``ensure_cold``,
    ``scaling_settings`` -> ``get_scaling``/``set_scaling``).

    A provider is an async context manager around one ``httpx.AsyncClient`` (``self.client``),
    which the runner may hand in; otherwise it makes its own with ``gpubench_sdk.make_client``.

    Every subclass's ``invoke`` is wrapped once, where it is defined, so that whoever calls it
    (the runner, the testing kit, a script) gets the same behaviour: the request's payload is
    first mapped by ``options.input`` (``InputMap``), and any exception other than a
    ``ProviderError`` leaves as the ``ProviderError`` it stands for (``as_provider_error``).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = inspect.get_annotations(cls)  # the class's own, not its bases'
        if "Options" not in cls.__dict__ and "options" in declared:
            cls.Options = _declared_options(cls, declared["options"])
        invoke = cls.__dict__.get("invoke")
        if callable(invoke) and not getattr(invoke, "__gpubench_boundary__", False):
            cls.invoke = _boundary(invoke)  # type: ignore[method-assign,assignment]

    name: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    Options: ClassVar[type[ProviderOptions]] = ProviderOptions
    key_scheme: ClassVar[KeyScheme] = "bearer"
    """How ``auth_headers`` sends the API key (``key_headers``): ``Authorization: Bearer``,
    ``Api-Key`` or ``Key <key>``, Modal's ``Modal-Key``/``Modal-Secret``, or ``none``."""

    def __init__(
        self,
        options: ProviderOptions | None = None,
        *,
        client: httpx.AsyncClient | None = None,
        **fields: Any,
    ) -> None:
        if options is None:
            options = self.Options(**fields)
        elif fields:  # validated again (model_copy would not), so api_key stays a SecretStr
            options = type(options).model_validate({**dict(options), **fields})
        self.options = options
        self._given_client = client
        self._client: httpx.AsyncClient | None = client
        self._depth = 0  # re-entrant: a provider the caller already opened is not reopened

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @property
    def endpoint(self) -> str | None:
        """Where requests go (span attribute ``gpubench.endpoint``); never with credentials."""
        url = getattr(self.options, "url", None)
        if not url:
            return None
        return scrub_url(str(url)).split("?", 1)[0]

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError(f"{self!r} is not open: use 'async with provider:'")
        return self._client

    def auth_headers(self) -> dict[str, str]:
        """Headers carrying the API key, as the class's ``key_scheme`` says; override it where
        the options decide the scheme."""
        return key_headers(self.options.api_key, self.key_scheme)

    async def __aenter__(self) -> Self:
        self._depth += 1
        if self._depth > 1:
            return self
        if self._client is None:
            self._client = make_client(timeout_s=self.options.timeout_s)
        try:
            await self.open()
        except BaseException:
            self._depth = 0
            await self._close_client()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth > 0:
            return
        try:
            await self.close()
        finally:
            await self._close_client()

    async def _close_client(self) -> None:
        if self._client is not None and self._given_client is None:
            await self._client.aclose()
        self._client = self._given_client

    async def open(self) -> None:
        """Hook: connect, discover endpoints. Runs on entering the context."""

    async def close(self) -> None:
        """Hook: restore settings the benchmark changed, release resources."""

    async def invoke(self, request: Request) -> Result:
        """Send one request; return what the provider said or raise ``ProviderError``."""
        raise NotImplementedError

    async def state(self) -> FleetState:
        raise CapabilityError(self.name, "fleet_state")

    async def ensure_cold(self, timeout_s: float) -> ColdCheck:
        """Bring the target to zero warm workers and verify it, within ``timeout_s``."""
        raise CapabilityError(self.name, "cold_start_control")

    async def get_scaling(self) -> ScalingSettings:
        raise CapabilityError(self.name, "scaling_settings")

    async def deployed(self) -> dict[str, Any]:
        """Hook: what is deployed, as the provider's API reports it: the model or image and
        its revision or digest, the hardware. A run keeps it with its results (metadata a
        reader needs months later); short JSON values, no secrets. Default: nothing."""
        return {}

    async def set_scaling(self, settings: ScalingSettings) -> None:
        raise CapabilityError(self.name, "scaling_settings")
