"""``gpubench site build``: the public tracker, a static site built from the data documents.

``DATA_DIR/data/YYYY/MM/DD/*.json`` (written by ``gpubench campaign export``) becomes::

    SITE_DIR/index.html             the four questions, the flagged changes, every target
    SITE_DIR/targets/<slug>.html    a target's history (``_target``)
    SITE_DIR/days/YYYY-MM-DD.html   a day's figures and its documents: the permalinks
    SITE_DIR/methodology.html       what was sent, how often, from where (``_more``)
    SITE_DIR/downloads.html         every day, and through them every document
    SITE_DIR/index.json             the site's figures for machines
    SITE_DIR/data/...               the documents themselves, copied

Every page is self-contained (inline CSS and SVG, no script, no external URL) and holds no time
of the build, so the same data gives the same site. It sits at the report's layer and reads
only the documents (the format in ``_store/_documents``), never a store.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..._store._documents import read_documents
from . import _layout
from ._data import gather
from ._front import front_page
from ._more import day_page, downloads_page, index_json, methodology_page
from ._target import target_page

__all__ = ["SiteBuild", "build_site"]


@dataclass(frozen=True, slots=True)
class SiteBuild:
    """What ``build_site`` wrote: how many pages, from how many documents, and the front
    page's size in bytes."""

    pages: int
    documents: int
    front_page_bytes: int


def build_site(
    data_dir: str | Path,
    site_dir: str | Path,
    *,
    title: str = "Serverless GPU tracker",
    requests_per_day: int = 10_000,
) -> SiteBuild:
    """Build the site from ``data_dir``'s documents into ``site_dir`` (created; pages already
    there are replaced, other files left alone)."""
    data_root, site = Path(data_dir), Path(site_dir)
    documents = list(read_documents(data_root))
    tracker = gather(documents)
    n = len(documents)
    pages: dict[str, tuple[str, str]] = {  # path: (title, body)
        "index.html": (title, front_page(tracker, requests_per_day)),
        "methodology.html": (f"Methodology - {title}", methodology_page(tracker)),
        "downloads.html": (f"Data - {title}", downloads_page(tracker)),
    }
    for t in tracker.targets:
        pages[f"targets/{t.slug}.html"] = (f"{t.label} - {title}", target_page(t))
    dates = tracker.dates
    for i, date in enumerate(dates):
        before = dates[i - 1] if i else None
        after = dates[i + 1] if i + 1 < len(dates) else None
        pages[f"days/{date}.html"] = (f"{date} - {title}", day_page(tracker, date, before, after))
    for folder in ("targets", "days"):
        (site / folder).mkdir(parents=True, exist_ok=True)
    for rel, (page_title, body) in pages.items():
        root = "../" if "/" in rel else ""
        html = _layout.page(page_title, title, body, root=root, documents=n)
        (site / rel).write_text(html, encoding="utf-8")
    (site / "index.json").write_text(index_json(tracker, requests_per_day), encoding="utf-8")
    for doc_path, _ in documents:
        _publish(data_root / doc_path, site / doc_path)
    return SiteBuild(len(pages), n, (site / "index.html").stat().st_size)


def _publish(source: Path, copy: Path) -> None:
    """The document at ``copy`` in the site: a hard link where the file system allows (the
    site never writes to it, and thousands of copies are most of a long history's build),
    else a copy."""
    copy.parent.mkdir(parents=True, exist_ok=True)
    if copy.exists():
        if copy.samefile(source):
            return
        copy.unlink()
    try:
        os.link(source, copy)
    except OSError:  # another device, or a file system without links
        shutil.copyfile(source, copy)
