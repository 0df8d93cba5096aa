"""The import graph of gpubench_sdk, read from the source: every import statement, wherever it
stands (top level, inside a function, under ``if TYPE_CHECKING:``). Shared by the architecture
and scenario-layering tests."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpubench_sdk"


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


@functools.cache  # one walk per test session: several tests read the same graph
def import_graph() -> dict[str, set[str]]:
    """Every gpubench_sdk module and the gpubench_sdk modules it imports, wherever the import
    statement stands (top level, a function, an ``if TYPE_CHECKING`` block)."""
    modules = {_module_name(p)[0]: p for p in PACKAGE.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        base = module if is_package else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = base.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    source = ".".join(parts + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" for a in node.names] or [source]
                targets = [t if t in modules else source for t in targets]
            for target in targets:
                if target.startswith("gpubench_sdk"):
                    found = resolve(target)
                    if found and found != module:
                        graph[module].add(found)
    return graph
