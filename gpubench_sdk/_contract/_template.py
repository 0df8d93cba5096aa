"""JSON templates with ``{name}`` placeholders, compiled once: the shared input map's
``template`` and a plugin's own request body (the ``http`` provider's ``body``) are both this.

A template is any JSON value. A string that is exactly one placeholder becomes the value the
name stands for, with its own JSON type (an object, a number); a placeholder inside a longer
string is written into it as text (JSON for anything but a string); ``{{`` and ``}}`` are
literal braces. What a name stands for is the caller's to say: ``resolve(name, text, field)``
turns each placeholder, once, into a reader of the render's context (a payload, a request),
and refuses a name it does not know with a ``ConfigError``, so a typo fails before anything is
sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from .._base._errors import ConfigError

__all__ = ["compile_json_template"]

Context = TypeVar("Context")
Render = Callable[[Context], Any]
# (placeholder name, the string it is in, the field's path) -> a reader of the context
Resolve = Callable[[str, str, str], Callable[[Context], Any]]

PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def compile_json_template(
    template: Any, resolve: Resolve[Context], field: str = "template"
) -> Render[Context]:
    """A function building ``template``'s value for a context: each placeholder read by the
    reader ``resolve`` gave for it. ``ConfigError`` names the field (``body.inputs[0]``) of a
    value that is not JSON, of unbalanced braces, or of a name ``resolve`` refuses."""
    if isinstance(template, str):
        return _compile_string(template, resolve, field)
    if isinstance(template, Mapping):
        parts = [
            (str(k), compile_json_template(v, resolve, f"{field}.{k}")) for k, v in template.items()
        ]
        return lambda context: {k: render(context) for k, render in parts}
    if isinstance(template, list):
        items = [compile_json_template(v, resolve, f"{field}[{i}]") for i, v in enumerate(template)]
        return lambda context: [render(context) for render in items]
    if template is None or isinstance(template, bool | int | float):
        return lambda context: template
    raise ConfigError(field, template, "a JSON value (object, array, string, number, bool, null)")


def placeholders(template: Any, field: str = "template") -> Iterator[tuple[str, str]]:
    """``(field, name)`` of every placeholder in ``template``, for checking names against a
    sample before any render."""
    if isinstance(template, str):
        for piece in _pieces(template, field):
            if isinstance(piece, tuple):
                yield field, piece[0]
    elif isinstance(template, Mapping):
        for k, v in template.items():
            yield from placeholders(v, f"{field}.{k}")
    elif isinstance(template, list):
        for i, v in enumerate(template):
            yield from placeholders(v, f"{field}[{i}]")


def _pieces(text: str, field: str) -> list[str | tuple[str]]:
    """``text`` split into literal strings and ``(name,)`` placeholders."""
    pieces: list[str | tuple[str]] = []
    pos = 0
    for match in PLACEHOLDER.finditer(text):
        pieces.append(text[pos : match.start()])
        token = match.group(0)
        pieces.append(token[0] if token in ("{{", "}}") else (match.group(1).strip(),))
        pos = match.end()
    rest = text[pos:]
    if "{" in rest or "}" in rest:
        raise ConfigError(field, text, "balanced braces: a {name}, or {{ and }} for literals")
    pieces.append(rest)
    return [p for p in pieces if p != ""]


def _compile_string(text: str, resolve: Resolve[Context], field: str) -> Render[Context]:
    pieces = [p if isinstance(p, str) else resolve(p[0], text, field) for p in _pieces(text, field)]
    if len(pieces) == 1 and callable(pieces[0]):
        return pieces[0]  # exactly one placeholder: the value keeps its own JSON type
    if all(isinstance(p, str) for p in pieces):
        literal = "".join(p for p in pieces if isinstance(p, str))
        return lambda context: literal
    return lambda context: "".join(p if isinstance(p, str) else _text(p(context)) for p in pieces)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
