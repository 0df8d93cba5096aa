"""The other half of the docs' code samples (``test_docs_samples.py`` has the rules and the
first half): a file of its own, so that pytest-xdist can run the two halves on two workers."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_docs_samples import THERE, Sample, run_sample, workspace

__all__ = ["workspace"]  # the fixture, shared with the first half


@pytest.mark.parametrize("sample", THERE, ids=[s.id for s in THERE])
def test_doc_sample_runs(sample: Sample, workspace: Path, tmp_path: Path) -> None:
    run_sample(sample, workspace, tmp_path)
