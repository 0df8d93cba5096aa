"""The core's architecture holds: no import circles anywhere in gpubench_sdk, and the layers of
docs/architecture.md (pyproject's import-linter contract) kept by every import, deferred and
TYPE_CHECKING ones included. `.ci/run` also runs `lint-imports`; this test makes the README's
test command enforce the same."""

from __future__ import annotations

import shutil
import subprocess
import tomllib

import pytest
from _imports import PACKAGE, ROOT, import_graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the walk found the package
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def _layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = config["tool"]["importlinter"]["contracts"]
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def test_every_top_level_module_has_a_layer() -> None:
    named = {name for layer in _layers() for name in layer}
    children = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.parent.name for p in PACKAGE.glob("*/__init__.py")
    }
    assert children - named - {"__init__", "__main__"} == set()
    assert named - children == set()


def test_no_import_runs_against_the_layers() -> None:
    """The same contract `lint-imports` checks, read from pyproject.toml: a module imports only
    from its own layer or below, and siblings in a layer not from each other."""
    rank = {name: i for i, layer in enumerate(_layers()) for name in layer}
    wrong = []
    for module, targets in import_graph().items():
        parts = module.split(".")
        if len(parts) < 2 or parts[1] == "__main__":
            continue
        for target in targets:
            t = target.split(".")
            if len(t) < 2 or t[1] == parts[1]:
                continue
            if rank[t[1]] <= rank[parts[1]]:  # smaller rank: a higher layer, or a sibling
                wrong.append(f"{module} -> {target}")
    assert wrong == []


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter not installed")
def test_import_linter_keeps_the_contract() -> None:
    done = subprocess.run(
        [shutil.which("lint-imports") or "lint-imports", "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
