"""``gpu_probe``: the workload that sends the probe to an endpoint and stores what it measured."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from .._base._types import Request
from .._contract._workload import Units, Workload, WorkloadOptions
from ._fields import check_result, probe_fields
from ._probe import PHASES

_Backend = Literal["auto", "torch", "cupy", "numpy"]
_Phase = Literal["matmul", "memory", "transfer", "launch", "first_op"]
_Dtype = Literal["fp32", "tf32", "fp16", "bf16", "fp8"]
_ALL_PHASES: tuple[_Phase, ...] = ("matmul", "memory", "transfer", "launch", "first_op")
assert _ALL_PHASES == PHASES


class GpuProbeOptions(WorkloadOptions):
    quick: bool = Field(default=True, description="smaller sizes: ~5 s on a GPU, a few on a CPU")
    backend: _Backend = "auto"
    phases: tuple[_Phase, ...] = Field(default=_ALL_PHASES, min_length=1)
    dtypes: tuple[_Dtype, ...] = Field(default=(), description="empty: all the device supports")
    matmul_n: int | None = Field(default=None, ge=16, le=65536)


class GpuProbe(Workload):
    """Each request runs the probe (``gpubench_sdk.probe.handle``) where the endpoint runs; the
    result's flat fields (``probe_fields``) are stored on the invocation as ``detail``.

    The endpoint must serve one of the probe handlers (examples/probe_handlers/, or the local
    runtime with ``handler = "gpubench_sdk.probe:handle"``); see docs/gpu-probe.md.
    """

    name = "gpu_probe"
    kind = "gpu_probe"
    Options = GpuProbeOptions

    def __init__(self, options: WorkloadOptions | None = None, **fields: Any) -> None:
        super().__init__(options, **fields)
        opts = self.options
        assert isinstance(opts, GpuProbeOptions)
        # flat, strings and scalars only: every platform's input schema takes these as they are
        body: dict[str, Any] = {
            "quick": opts.quick,
            "backend": opts.backend,
            "phases": ",".join(opts.phases),
        }
        if opts.dtypes:
            body["dtypes"] = ",".join(opts.dtypes)
        if opts.matmul_n is not None:
            body["matmul_n"] = opts.matmul_n
        self._payload = body

    def request(self, seq: int) -> Request:
        return Request(seq=seq, payload=self._payload, kind=self.kind)

    def read(self, output: Any) -> Units:
        check_result(output)
        return (None, None)

    def detail(self, output: Any) -> Mapping[str, Any] | None:
        return probe_fields(output)
