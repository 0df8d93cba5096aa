"""The testing kit's ``merge_patch`` against RFC 7396's own examples (Appendix A)."""

from __future__ import annotations

from typing import Any

import pytest

from gpubench_sdk.testing import merge_patch

RFC_7396_APPENDIX_A = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC_7396_APPENDIX_A)
def test_merge_patch_gives_the_rfcs_results(target: Any, patch: Any, result: Any) -> None:
    assert merge_patch(target, patch) == result


def test_merge_patch_changes_neither_argument_and_copies_the_patch() -> None:
    target = {"scale": {"minReplicas": 1, "rules": [{"name": "http"}]}}
    patch: dict[str, Any] = {"scale": {"rules": [{"name": "gpubench"}], "minReplicas": None}}
    merged = merge_patch(target, patch)
    assert merged == {"scale": {"rules": [{"name": "gpubench"}]}}
    assert target == {"scale": {"minReplicas": 1, "rules": [{"name": "http"}]}}
    merged["scale"]["rules"][0]["name"] = "changed"
    assert patch["scale"]["rules"][0]["name"] == "gpubench"
