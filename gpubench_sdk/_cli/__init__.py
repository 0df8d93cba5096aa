"""The ``gpubench`` command line: one module per command group, the shared parts in _console.

Nothing outside this package imports it (tests/test_cli_layering.py checks): the CLI sits on
top of the SDK, never under it.
"""

from __future__ import annotations

import click

from ._advise import advise_cmd
from ._campaign import campaign, compare
from ._console import EXIT_CODES_HELP, Group
from ._cost import cost
from ._providers import local, providers_cmd
from ._report import report_cmd
from ._results import results
from ._run import demo_cmd, run_cmd
from ._site import site


@click.group(
    cls=Group,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_CODES_HELP,
)
@click.version_option(package_name="gpubench-sdk")
def main() -> None:
    """Benchmark serverless GPU inference providers: cold starts, bursts, variability, cost."""


for _command in (
    run_cmd, demo_cmd, providers_cmd, results, local, cost, campaign, compare, report_cmd,
    advise_cmd, site,
):  # fmt: skip
    main.add_command(_command)

__all__ = ["main"]
