"""Scenarios sit below the runner: they import none of it and use only the public ``Load`` API a
third-party shape gets, the runner knows no scenario kind, and one function splits every loop
among the load-generating processes."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from _imports import import_graph

import gpubench_sdk
from gpubench_sdk._runner._load import RunLoad
from gpubench_sdk._scenarios import BUILTIN_SCENARIOS, Load, share

ROOT = Path(__file__).parents[1]
SCENARIOS = sorted((ROOT / "gpubench_sdk" / "_scenarios").glob("*.py"))
RUNNER = sorted((ROOT / "gpubench_sdk" / "_runner").glob("*.py"))
# what a scenario may import of the SDK: the leaves (pure statistics among them)
ALLOWED = ("_base", "_scenarios")


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_scenarios_import_nothing_of_the_runner(path: Path) -> None:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    outside = {
        m
        for m in import_graph()[module]
        if not m.removeprefix("gpubench_sdk.").startswith(ALLOWED) and m != "gpubench_sdk"
    }
    assert not outside, f"{path.name} imports {sorted(outside)}"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_shapes_use_only_the_public_load_api(path: Path) -> None:
    public = {n for n in dir(Load) if not n.startswith("_")}
    used = {
        node.attr
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "load"
    }
    assert used <= public, f"{path.name} uses Load.{sorted(used - public)}"


@pytest.mark.parametrize(
    "path",
    RUNNER,  # the runner's folder, _resources.py and _multiproc.py among them
    ids=lambda p: p.name,
)
def test_the_runner_knows_no_scenario_kind(path: Path) -> None:
    kinds = {cls.__name__ for cls in BUILTIN_SCENARIOS.values()}
    names = {
        node.id if isinstance(node, ast.Name) else node.attr
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Name | ast.Attribute)
    }
    assert not names & kinds, f"{path.name} names {sorted(names & kinds)}"


def test_load_is_the_public_abstract_type_the_runner_implements() -> None:
    assert gpubench_sdk.Load is Load
    assert issubclass(RunLoad, Load) and inspect.isabstract(Load)
    assert not inspect.isabstract(RunLoad)


@pytest.mark.parametrize("shards", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("slots", [1, 2, 3, 5, 64])
def test_share_deals_every_slot_and_request_once(shards: int, slots: int) -> None:
    parts = [share(k, shards, slots) for k in range(shards)]
    assert sum(s for s, _ in parts) == slots
    assert max(s for s, _ in parts) - min(s for s, _ in parts if s) <= 1
    m = parts[0][1]
    assert all(mm == m for _, mm in parts) and m == min(shards, slots)
    # request i belongs to shard i % m, which always has a slot to send it
    owners = [[k for k in range(shards) if parts[k][0] and i % parts[k][1] == k] for i in range(50)]
    assert all(len(o) == 1 for o in owners)
