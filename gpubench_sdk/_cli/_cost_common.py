"""What every ``gpubench cost`` command shares: the catalog options and price warnings."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from ._console import warn

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def price_warnings() -> Iterator[None]:
    """Stale-price warnings print once each, as 'warning:' lines on stderr, never silenced."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for message in dict.fromkeys(str(w.message) for w in caught):
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
        type=click.FloatRange(0),
        help="warn about prices read longer ago than this",
    )(f)
