"""Body templates with per-request variables, and the small JSON paths that read answers.

A template is any JSON value. A string that is exactly one placeholder (``"{payload}"``,
``"{seq}"``) becomes the variable's own JSON value (an object, a number); a placeholder inside a
longer string is formatted into it as text (``"doc-{seq}"``). ``{{`` and ``}}`` are literal
braces. Variables: ``seq`` (the request's sequence number), ``prompt`` (the payload's
``prompt``), ``max_tokens`` (the request's output limit), ``payload`` (the workload's whole
payload) and ``payload.NAME`` (one of its fields). Templates are compiled once, at config time,
by the core's ``compile_json_template`` (the input map's compiler too), so a typo fails before
anything is sent, naming the field and the variables that exist.

A JSON path is ``$`` followed by ``.name`` or ``[index]`` steps: ``$.metrics.predict_time``,
``$.outputs[0].data``. Nothing else of JSONPath (filters, wildcards) is needed to point at one
value.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpubench_sdk import ConfigError, Request, compile_json_template

__all__ = ["VARIABLES", "compile_path", "compile_template"]

VARIABLES = ("seq", "prompt", "max_tokens", "payload", "payload.<field>")
_NAME = re.compile(r"^(seq|prompt|max_tokens|payload(\.[A-Za-z_][A-Za-z0-9_-]*)?)$")
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]")

Render = Callable[[Request], Any]


def compile_template(template: Any, field: str = "body") -> Render:
    """A function building a request's body from ``template``; ``ConfigError`` names ``field``
    (e.g. ``body.inputs``) for an unknown variable or an unbalanced brace."""
    return compile_json_template(template, _variable, field)


def _variable(name: str, text: str, field: str) -> Render:
    if not _NAME.match(name):
        raise ConfigError(
            field, text, f"placeholders naming one of {', '.join(VARIABLES)} (got {{{name}}})"
        )
    if name == "seq":
        return lambda request: request.seq
    if name == "max_tokens":
        return lambda request: request.max_output_tokens
    if name == "payload":
        return lambda request: dict(request.payload)
    key = "prompt" if name == "prompt" else name.split(".", 1)[1]

    def lookup(request: Request) -> Any:
        try:
            return request.payload[key]
        except KeyError:
            raise ConfigError(
                field, text, f"a field the workload's payload has ({sorted(request.payload)})"
            ) from None

    return lookup


def compile_path(path: str, field: str) -> Callable[[Any], Any]:
    """A reader of the value at ``path`` (``$``, ``$.a.b``, ``$.a[0]``); it raises
    ``LookupError`` naming the path when the answer has no such value."""
    if not path.startswith("$"):
        raise ConfigError(field, path, "a JSON path starting with $ (e.g. $.output)")
    steps: list[str | int] = []
    pos = 1
    for match in _STEP.finditer(path, 1):
        if match.start() != pos:
            break
        steps.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
        pos = match.end()
    if pos != len(path):
        raise ConfigError(field, path, "$ followed by .name or [index] steps, e.g. $.outputs[0]")

    def read(document: Any) -> Any:
        value = document
        for step in steps:
            try:
                value = value[step]
            except (KeyError, IndexError, TypeError):
                raise LookupError(f"the answer has no {path}") from None
        return value

    return read
