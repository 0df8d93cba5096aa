"""What every ``gpubench cost`` command shares: the catalog options and price warnings."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from ..cost._catalog import StalePriceWarning, stale_summary
from ._console import FiniteRange, warn

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def price_warnings(*, others_as_usual: bool = False) -> Iterator[None]:
    """Warnings while pricing print once each as 'warning:' lines on stderr, never silenced;
    stale catalog prices print as one line naming the oldest. ``others_as_usual``: any other
    warning is shown the way Python would have (around a whole run)."""
    with warnings.catch_warnings(record=True) as caught:
        # around a run, other warnings keep Python's filters (no DeprecationWarning noise)
        warnings.simplefilter("always", StalePriceWarning if others_as_usual else Warning)
        yield
    stale = [w.message for w in caught if isinstance(w.message, StalePriceWarning)]
    summary = stale_summary(stale)
    if summary is not None:
        warn(summary)
    others = [w for w in caught if not isinstance(w.message, StalePriceWarning)]
    if others_as_usual:
        for w in others:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        return
    for message in dict.fromkeys(str(w.message) for w in others):
        warn(message)


def catalog_options(f: F) -> F:
    f = click.option(
        "--prices",
        multiple=True,
        type=click.Path(dir_okay=False, exists=True),
        help="price override file (TOML or JSON, the catalog's schema); repeatable",
    )(f)
    return click.option(
        "--max-age-days",
        default=180.0,
        show_default=True,
        type=FiniteRange(0),
        help="warn about prices read longer ago than this",
    )(f)
