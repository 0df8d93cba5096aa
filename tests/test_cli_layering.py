"""Layers: no module of the SDK, the plugins or the examples imports the CLI, and plugins and
examples use only gpubench_sdk's public names (a third party's plugin can do all ours do)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]
CLI = ROOT / "gpubench_sdk" / "_cli"
# `python -m gpubench_sdk` is the CLI's other door, so it may (must) import it
ALLOWED = {ROOT / "gpubench_sdk" / "__main__.py"}


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports, relative imports resolved to absolute names."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = (
        _module_of(path).rsplit(".", 1)[0]
        if path.name != "__init__.py"
        else _module_of(path.parent / "__init__.py").removesuffix(".__init__")
    )
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found += [base] + [f"{base}.{a.name}" for a in node.names]
    return found


def _sources() -> list[Path]:
    paths = [*ROOT.glob("gpubench_sdk/**/*.py"), *ROOT.glob("plugins/*/gpubench_*/**/*.py")]
    paths += ROOT.glob("examples/**/*.py")
    return [p for p in paths if CLI not in p.parents and p not in ALLOWED]


def test_nothing_below_the_cli_imports_it() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(
            {
                m
                for m in _imports(p)
                if m == "gpubench_sdk._cli" or m.startswith("gpubench_sdk._cli")
            }
        )
        for p in _sources()
    }
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"modules importing the CLI: {offenders}"


def test_the_check_sees_relative_imports() -> None:
    """The resolver must catch `from .._cli import x` (a check that cannot fail proves nothing)."""
    probe = ROOT / "gpubench_sdk" / "_report" / "_collect.py"
    assert "gpubench_sdk.cost._priced.priced_targets" in _imports(probe)
    assert "gpubench_sdk._cli" in _imports(ROOT / "gpubench_sdk" / "__main__.py")


def _private(module: str) -> bool:
    """``gpubench_sdk._base._secrets``, ``gpubench_sdk.testing._conformance``: not dunders."""
    head, *parts = module.split(".")
    return head == "gpubench_sdk" and any(
        p.startswith("_") and not p.startswith("__") for p in parts
    )


def test_plugins_and_examples_use_only_public_names() -> None:
    paths = [*ROOT.glob("plugins/*/**/*.py"), *ROOT.glob("examples/**/*.py")]
    offenders = {
        str(p.relative_to(ROOT)): found
        for p in paths
        if (found := sorted({m for m in _imports(p) if _private(m)}))
    }
    assert not offenders, f"private gpubench_sdk modules imported: {offenders}"
    assert _private("gpubench_sdk.testing._conformance") and not _private("gpubench_sdk.Store")
