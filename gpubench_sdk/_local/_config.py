"""Configuration of the local runtime, and the validation its scaling knobs share."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)

DEFAULT_HANDLER = "gpubench_sdk.demo:predict"
DEFAULT_LOAD = "gpubench_sdk.demo:load"
# Passes the gateway's API key to a runtime started by ``spawn_runtime``: never on a command line,
# where every user of the machine can read it.
API_KEY_ENV = "GPUBENCH_LOCAL_API_KEY"

HandlerSpec = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
        description="a callable as 'module:function' (the module must be importable by workers)",
    ),
]


def _empty_is_none(value: object) -> object:
    return None if value == "" else value


# "" means no load step too: TOML, where plans are written, has no null.
LoadSpec = Annotated[HandlerSpec | None, BeforeValidator(_empty_is_none)]
MinWorkers = Annotated[int, Field(ge=0, le=1024, description="workers kept warm at all times")]
MaxWorkers = Annotated[int, Field(ge=1, le=1024, description="most workers running at once")]
IdleTimeout = Annotated[
    float, Field(ge=0, le=86_400, description="seconds an idle worker lives before it stops")
]

# A worker that never says 'ready' (an interpreter that hangs, a load() that never returns)
# would hold a slot of max_workers for ever: past this bound it is stopped and named.
BootTimeout = Annotated[
    float,
    Field(gt=0, le=86_400, description="seconds a worker may take to load before it is stopped"),
]


def check_bounds(min_workers: int, max_workers: int) -> None:
    """Refuse a minimum above the maximum: the runtime could never satisfy both."""
    if min_workers > max_workers:
        raise ValueError(f"min_workers ({min_workers}) must not exceed max_workers ({max_workers})")


class LocalRuntimeConfig(BaseModel):
    """Everything the local runtime needs: the handler, the scaling knobs, where to listen.

    ``api_key``, when set, is required as ``Authorization: Bearer <key>`` on every route; it is
    masked in ``repr`` and left out of ``model_dump``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    handler: HandlerSpec = DEFAULT_HANDLER
    load: LoadSpec = DEFAULT_LOAD
    min_workers: MinWorkers = 0
    max_workers: MaxWorkers = 4
    idle_timeout_s: IdleTimeout = 5.0
    max_queue: int = Field(default=1000, ge=0, description="requests waiting beyond it get 429")
    request_timeout_s: float = Field(default=300.0, gt=0, description="queue plus execution")
    boot_timeout_s: BootTimeout = 300.0
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535, description="0 picks a free port")
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    python: str = Field(default=sys.executable, description="interpreter that runs the workers")
    env: dict[str, str] = Field(default_factory=dict, description="extra worker environment")

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        check_bounds(self.min_workers, self.max_workers)
        return self


class ScalingUpdate(BaseModel):
    """The body of ``PATCH /admin/scaling``: strict JSON types, unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    min_workers: MinWorkers | None = None
    max_workers: MaxWorkers | None = None
    idle_timeout_s: IdleTimeout | None = None


class ScalingError(ValueError):
    """A scaling update that cannot be applied; ``field`` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def parse_scaling_update(body: bytes, current: dict[str, Any]) -> dict[str, Any]:
    """The new scaling settings after applying ``body`` to ``current``, or ``ScalingError``."""
    try:
        update = ScalingUpdate.model_validate_json(body or b"{}")
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "body"
        raise ScalingError(field, error["msg"]) from None
    merged = {**current, **update.model_dump(exclude_none=True)}
    try:
        check_bounds(merged["min_workers"], merged["max_workers"])
    except ValueError as exc:
        field = "min_workers" if update.min_workers is not None else "max_workers"
        raise ScalingError(field, str(exc)) from None
    return merged
