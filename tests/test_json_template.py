"""``compile_json_template``: the one JSON template compiler (the input map's ``template``, the
``http`` plugin's ``body``), with the names a placeholder may hold given by the caller."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpubench_sdk import ConfigError, compile_json_template


def _from(context: dict[str, Any]) -> Callable[[str, str, str], Callable[[Any], Any]]:
    """A resolver knowing exactly the keys of ``context`` (refused at compile time)."""

    def resolve(name: str, text: str, field: str) -> Callable[[Any], Any]:
        if name not in context:
            raise ConfigError(field, text, f"one of {sorted(context)}")
        return lambda given: given[name]

    return resolve


CONTEXT = {"n": 3, "doc": {"a": [1, 2]}, "who": "ann"}


def test_whole_placeholders_keep_their_type_and_inner_ones_become_text() -> None:
    render = compile_json_template(
        {"n": "{n}", "doc": "{ doc }", "id": "x-{n}-{who}", "j": "d={doc}", "k": [None, True, 1.5]},
        _from(CONTEXT),
    )
    assert render(CONTEXT) == {
        "n": 3,
        "doc": {"a": [1, 2]},
        "id": "x-3-ann",
        "j": 'd={"a": [1, 2]}',
        "k": [None, True, 1.5],
    }


def test_literal_braces_and_a_plain_value() -> None:
    assert compile_json_template("{{n}} {{", _from(CONTEXT))(CONTEXT) == "{n} {"
    assert compile_json_template("{n}", _from(CONTEXT))({"n": [7]}) == [7]  # the context's value
    assert compile_json_template(5, _from(CONTEXT))(CONTEXT) == 5


@pytest.mark.parametrize(
    ("template", "match"),
    [
        ({"a": {"b": "{nope}"}}, r"template\.a\.b.*one of"),  # the resolver refuses it
        ({"a": ["x", "{n"]}, r"template\.a\[1\].*balanced braces"),
        ({"a": "n}"}, r"template\.a.*balanced braces"),
        ({"a": object()}, r"template\.a.*a JSON value"),
    ],
)
def test_errors_name_the_field_at_compile_time(template: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        compile_json_template(template, _from(CONTEXT))


def test_the_field_prefix_is_the_callers() -> None:
    with pytest.raises(ConfigError, match=r"body\[0\]"):
        compile_json_template(["{nope}"], _from(CONTEXT), "body")
