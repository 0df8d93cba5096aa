"""Every page under docs/ is reachable from the site's navigation (mkdocs only logs an INFO line
for a page left out, so --strict would not catch it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _pages(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _pages(item)]
    if isinstance(node, dict):
        return [p for value in node.values() for p in _pages(value)]
    return []


def test_every_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    in_nav = _pages(config["nav"])
    on_disk = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(set(in_nav)) == sorted(in_nav), "a page is listed twice"
    assert [p for p in on_disk if p not in in_nav] == []
    assert [p for p in in_nav if p not in on_disk] == []
    sections = [next(iter(item)) for item in config["nav"] if isinstance(item, dict)]
    assert sections[1:] == [
        "Getting started", "Concepts & scenarios", "Metrics & cost", "Providers",
        "Observability", "Extending", "Reference",
    ]  # fmt: skip
