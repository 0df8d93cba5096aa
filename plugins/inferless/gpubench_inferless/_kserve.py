"""The KServe v2 (Open Inference Protocol) bodies Inferless speaks, built from and read into
plain JSON values. Shared by the provider and its emulator.

Sources (read 2026-11): the Open Inference Protocol's HTTP/REST API
(https://kserve.github.io/website/docs/concepts/architecture/data-plane/v2-protocol):
``POST v2/models/<name>[/versions/<v>]/infer`` with ``{"id"?, "inputs": [{"name", "shape",
"datatype", "data"}], "outputs"?}``, answered ``{"model_name", "model_version"?, "id"?,
"outputs": [{"name", "shape", "datatype", "data"}]}`` (``id`` echoed when sent), errors as
``{"error": "<message>"}`` with a 4xx/5xx status; datatypes BOOL, UINT8..UINT64, INT8..INT64,
FP16, FP32, FP64, BYTES. Inferless's model URL and an example body with a ``prompt`` BYTES
tensor: PROVIDERS.md (Inferless docs, read 2026-06).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import BaseModel, Field, ValidationError

Integer = Literal["UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"]
DataType = Literal["BOOL", Integer, "FP16", "FP32", "FP64", "BYTES"]  # nested Literals flatten
DATATYPES: Final = frozenset(get_args(DataType))


def datatype_of(value: Any) -> DataType:
    """The datatype a JSON value is sent as unless configured: text (and anything structured,
    sent as its JSON text) BYTES, booleans BOOL, integers INT64, other numbers FP32 (what
    Inferless's templates use for sampling parameters)."""
    if isinstance(value, bool):
        return "BOOL"
    if isinstance(value, int):
        return "INT64"
    if isinstance(value, float):
        return "FP32"
    return "BYTES"


def _element(value: Any, datatype: str) -> Any:
    if datatype == "BYTES" and not isinstance(value, str):
        return json.dumps(value, separators=(",", ":"))
    return value


def tensor(name: str, value: Any, datatype: str | None = None) -> dict[str, Any]:
    """One input or output tensor: a list is a 1-D tensor of its items, anything else a
    tensor of shape ``[1]``."""
    items = list(value) if isinstance(value, list | tuple) else [value]
    dtype = datatype or (datatype_of(items[0]) if items else "BYTES")
    data = [_element(item, dtype) for item in items]
    return {"name": name, "shape": [len(data)], "datatype": dtype, "data": data}


def encode_inputs(payload: Mapping[str, Any], datatypes: Mapping[str, str]) -> list[dict[str, Any]]:
    """A payload as KServe inputs: one tensor per key, named by it (``None`` values left out:
    a tensor cannot hold one), typed by ``datatypes`` (input name -> datatype) or by
    ``datatype_of``."""
    return [
        tensor(name, value, datatypes.get(name))
        for name, value in payload.items()
        if value is not None
    ]


def _value(t: Mapping[str, Any]) -> Any:
    """A tensor's data as a plain value: a scalar for one element, the flat list otherwise."""
    data = t.get("data")
    if not isinstance(data, list):
        raise ValueError(f"tensor {t.get('name')!r} has no data list")
    shape = t.get("shape")
    if isinstance(shape, list) and math.prod(int(d) for d in shape) == 1 and len(data) == 1:
        return data[0]
    return data


def decode_tensors(tensors: Any) -> dict[str, Any]:
    """``[{"name", "shape", "datatype", "data"}, ...]`` as ``{name: value}``; ``ValueError``
    for anything else."""
    if not isinstance(tensors, list):
        raise ValueError("not a list of tensors")
    values: dict[str, Any] = {}
    for t in tensors:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise ValueError("a tensor without a name")
        if t.get("datatype") not in DATATYPES:
            raise ValueError(f"tensor {t['name']!r}: unknown datatype {t.get('datatype')!r}")
        values[t["name"]] = _value(t)
    return values


class _Tensor(BaseModel):  # kserve's InferInput: each field required
    name: str
    shape: list[Annotated[int, Field(strict=True, ge=0)]]
    datatype: str
    data: list[Any]


class InferenceRequest(BaseModel):
    """A v2 inference request as kserve's pydantic model reads it (extra fields ignored)."""

    id: str | None = None
    inputs: list[_Tensor]


def request_problem(body: Any) -> tuple[int, Any] | None:
    """What a v2 server refuses in an inference request, as ``(status, JSON body)``, else
    ``None``. As kserve 0.21's ``ModelServer`` answers (observed; its pydantic
    ``InferenceRequest``): a body that is not the schema (no ``inputs``, a tensor without
    ``name``/``shape``/``datatype``/``data``, an ``id`` that is not text) is FastAPI's 422
    ``{"detail": [{"type", "loc", "msg"}]}``; an unknown datatype is 400 ``{"error"}``; data
    that does not fill its ``shape`` is refused too (400 here; kserve fails it with a 500,
    Triton with a 400)."""
    try:
        request = InferenceRequest.model_validate(body)
    except ValidationError as exc:  # FastAPI's 422: pydantic's own errors, under "body"
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        return 422, {"detail": [{**e, "loc": ["body", *e["loc"]]} for e in errors]}
    for t in request.inputs:
        if t.datatype not in DATATYPES:
            return 400, {"error": "invalid datatype in the input"}
        size = _flat_size(t.data)
        if size != math.prod(t.shape):
            why = f"cannot reshape array of size {size} into shape {tuple(t.shape)}"
            return 400, {"error": f"input {t.name!r}: {why}"}
    return None


def _flat_size(data: list[Any]) -> int:
    """Elements in ``data``, nested lists flattened (v2 allows either layout)."""
    return sum(_flat_size(d) if isinstance(d, list) else 1 for d in data)


def encode_outputs(output: Any) -> list[dict[str, Any]]:
    """A model's answer as output tensors (a mapping: one per key; else one ``output``)."""
    if isinstance(output, Mapping):
        return [tensor(str(k), v) for k, v in output.items() if v is not None]
    return [tensor("output", output)]
