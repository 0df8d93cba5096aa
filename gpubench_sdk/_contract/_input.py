"""Mapping the workload's request onto a model's real input schema, for every provider.

A workload sends provider-neutral fields (``prompt``, ``max_tokens``, ``echo``...); a deployed
model declares its own (Cog's ``predict()`` arguments, a Replicate model's input schema) and
refuses what it does not know. ``InputMap`` bridges the two without plugin code: it is an option
of every provider (``ProviderOptions.input``), applied at the ``invoke`` boundary (see
``Provider``), so the runner, the testing kit and a direct ``provider.invoke()`` all send the
same mapped input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from .._base._errors import ConfigError
from .._base._secrets import SENSITIVE
from .._base._types import Request
from ._template import PLACEHOLDER, compile_json_template, placeholders

if TYPE_CHECKING:
    from ._workload import Workload


class _Configured(Protocol):  # a provider, as far as its input map goes
    @property
    def options(self) -> Any: ...


class _Target(Protocol):  # the runner's Target (a layer above), as far as checking goes
    @property
    def name(self) -> str: ...
    @property
    def provider(self) -> _Configured: ...


__all__ = ["InputMap", "check_inputs"]

Payload = Mapping[str, Any]
_Render = Callable[[Payload], Any]


class InputMap(BaseModel):
    """How the workload's payload becomes the model's input.

    Either edit the payload (``drop`` keys, then ``rename`` keys, then ``set`` constant fields,
    which win over renamed ones) or replace it with a ``template``: a JSON object whose strings
    may hold ``{field}`` placeholders naming the payload's fields. A string that is exactly one
    placeholder takes the field's own value and type (``"{max_tokens}"`` stays a number);
    inside a longer string the value is written as text; ``{{`` and ``}}`` are literal braces.

    In a plan: ``[targets.input]`` under the target's ``[[targets]]`` entry; in Python:
    ``CogProvider(url=..., input=InputMap(rename={"echo": "text"}))``. Each name is checked
    against the workload's first request before anything is sent (``ConfigError``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rename: dict[str, str] = Field(
        default_factory=dict, description="workload field -> model input name"
    )
    drop: tuple[str, ...] = Field(default=(), description="workload fields not sent")
    template: dict[str, Any] | None = Field(
        default=None, description="the whole input, with {field} placeholders"
    )
    set: dict[str, Any] = Field(default_factory=dict, description="constant fields to add")

    _render: _Render | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _compile(self) -> InputMap:
        if self.template is not None and (self.rename or self.drop or self.set):
            raise ValueError(
                "template replaces the whole input: write constants into it and leave "
                "rename, drop and set out"
            )
        if len(self.rename) != len(frozenset(self.rename.values())):
            raise ValueError("rename maps two fields onto one name")
        both = sorted(frozenset(self.drop) & self.rename.keys())
        if both:
            raise ValueError(f"fields both dropped and renamed: {both}")
        for where, key in _constants(self.set, "set") + _constants(self.template, "template"):
            if SENSITIVE.search(key):
                raise ValueError(
                    f"{where}: a credential written here would be stored with the run; keep it "
                    "in the endpoint's own configuration"
                )
        if self.template is not None:
            self._render = compile_json_template(self.template, _field)
        return self

    def apply(self, payload: Payload) -> dict[str, Any]:
        """The model's input for ``payload`` (a new dict; ``payload`` is left untouched)."""
        if self._render is not None:
            rendered: dict[str, Any] = self._render(payload)
            return rendered
        rename, drop = self.rename, self.drop
        out = {rename.get(k, k): v for k, v in payload.items() if k not in drop}
        out.update(self.set)
        return out

    def map_request(self, request: Request) -> Request:
        """``request`` with its payload mapped; every other field unchanged."""
        return replace(request, payload=self.apply(request.payload))

    def check(self, sample: Payload, field: str = "input") -> None:
        """Raise ``ConfigError`` naming ``field``'s entry that ``sample`` cannot satisfy: a
        placeholder, renamed or dropped field the workload's request does not have."""
        have = f"a field of the workload's request ({', '.join(sorted(sample)) or 'none'})"
        for name in self.rename:
            if name not in sample:
                raise ConfigError(f"{field}.rename.{name}", name, have)
        for name in self.drop:
            if name not in sample:
                raise ConfigError(f"{field}.drop", name, have)
        for name, new in self.rename.items():
            if new in sample and new not in self.rename and new not in self.drop:
                raise ConfigError(
                    f"{field}.rename.{name}", new, "a name the request does not already use"
                )
        if self.template is not None:
            for where, name in placeholders(self.template, f"{field}.template"):
                if name not in sample:
                    raise ConfigError(where, f"{{{name}}}", f"a placeholder naming {have}")


def check_inputs(targets: Iterable[_Target], workload: Workload) -> None:
    """Check every target's ``input`` map against the workload's first request."""
    sample: Payload | None = None
    for target in targets:
        mapping = getattr(target.provider.options, "input", None)
        if mapping is None:
            continue
        if sample is None:
            sample = workload.request(0).payload
        mapping.check(sample, f"targets[{target.name}].input")


def _field(name: str, text: str, field: str) -> Callable[[Payload], Any]:
    """The template's reader of the payload field ``name``."""
    if not name:
        raise ConfigError(field, text, "a field name inside the braces, e.g. {prompt}")

    def lookup(payload: Payload) -> Any:
        try:
            return payload[name]
        except KeyError:
            have = f"a field of the request ({sorted(payload)})"
            raise ConfigError(field, f"{{{name}}}", have) from None

    return lookup


def _constants(value: Any, field: str) -> list[tuple[str, str]]:
    """(where, key) of every literal string under a key, placeholders excepted."""
    found: list[tuple[str, str]] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(v, str) and not PLACEHOLDER.search(v):
                found.append((f"{field}.{k}", str(k)))
            else:
                found += _constants(v, f"{field}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _constants(v, f"{field}[{i}]")
    return found
