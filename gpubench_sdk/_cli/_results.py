"""``gpubench results ...``: list, show, export and compare stored runs."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from .._errors import ConfigError
from .._monitor import client_bound_spans
from .._store import Store
from .._summary import summarize
from ._console import json_safe, out, resolve_store, store_option
from ._run import print_run


@click.group("results")
def results() -> None:
    """Read stored runs."""


@results.command("list")
@store_option
def results_list(store_path: str | None) -> None:
    """List the runs in the store, newest first."""
    with Store(resolve_store(store_path), readonly=True) as store:
        table = Table()
        for col in ("id", "uuid", "name", "status", "started", "samples"):
            table.add_column(col)
        for r in store.runs():
            started = dt.datetime.fromtimestamp(r.started_wall_ns / 1e9).isoformat(" ", "seconds")
            table.add_row(str(r.id), r.uuid[:8], r.name, r.status, started, str(r.samples))
        out.print(table)


@results.command("show")
@click.argument("run_ref", metavar="RUN", default="latest")
@store_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def results_show(run_ref: str, store_path: str | None, as_json: bool) -> None:
    """Summarize RUN (id, uuid prefix, or 'latest')."""
    with Store(resolve_store(store_path), readonly=True) as store:
        run = store.run(run_ref)
        rows = summarize(store, run)
        if as_json:
            data = {
                "run": {"id": run.id, "uuid": run.uuid, "name": run.name, "status": run.status},
                "summary": [asdict(r) for r in rows],
                "client_bound": client_bound_spans(store.health_windows(run.id)),
            }
            click.echo(json.dumps(json_safe(data), indent=2, default=str))
            return
        print_run(store, run, run.status + (f" ({run.error})" if run.error else ""))


@results.command("export")
@click.argument("run_ref", metavar="RUN", default="latest")
@store_option
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True
)
@click.option("-o", "--output", type=click.File("w"), default="-", help="file (default stdout)")
def results_export(run_ref: str, store_path: str | None, fmt: str, output: Any) -> None:
    """Export every invocation of RUN as JSON lines or CSV."""
    with Store(resolve_store(store_path), readonly=True) as store:
        run = store.run(run_ref)
        (store.export_jsonl if fmt == "jsonl" else store.export_csv)(run.id, output)


@results.command("compare")
@click.argument("target_a")
@click.argument("target_b")
@click.option("--run", "run_ref", default="latest", show_default=True, help="run of TARGET_A")
@click.option("--run-b", "run_b_ref", default=None, help="run of TARGET_B (default: --run)")
@click.option("--scenario", type=int, default=None, help="scenario index (default: each shared)")
@store_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def results_compare(
    target_a: str,
    target_b: str,
    run_ref: str,
    run_b_ref: str | None,
    scenario: int | None,
    store_path: str | None,
    as_json: bool,
) -> None:
    """Compare the latency of TARGET_A and TARGET_B: p50/p95 differences with 95% CIs, a
    Mann-Whitney U test and a verdict (see docs/metrics.md)."""
    from ..metrics import compare_targets

    with Store(resolve_store(store_path), readonly=True) as store:
        run_a = store.run(run_ref)
        run_b = run_a if run_b_ref is None else store.run(run_b_ref)
        shared = min(len(run_a.scenarios), len(run_b.scenarios))
        if scenario is not None and not 0 <= scenario < shared:
            raise ConfigError("--scenario", scenario, f"an index below {shared}")
        found = []
        for idx in [scenario] if scenario is not None else range(shared):
            c = compare_targets(store, run_a, target_a, target_b, run_b=run_b, scenario=idx)
            if c.a_count and c.b_count:
                found.append((f"{idx}:{run_a.scenarios[idx].kind}", c))
    if as_json:
        data = [{"scenario": s} | asdict(c) for s, c in found]
        click.echo(json.dumps(json_safe(data), indent=2))
        return
    table = Table(title=f"{target_a} (A) vs {target_b} (B)", title_justify="left")
    for col in ("scenario", "n A/B", "p50 ms A/B", "p95 ms A/B", "B - A at p95 (95% CI)", "U p"):
        table.add_column(col, justify="left" if col == "scenario" else "right")
    for s, c in found:
        lo, hi = c.p95.diff_ci_ms
        table.add_row(
            s,
            f"{c.a_count}/{c.b_count}",
            f"{c.p50.a_ms:.1f}/{c.p50.b_ms:.1f}",
            f"{c.p95.a_ms:.1f}/{c.p95.b_ms:.1f}",
            f"{c.p95.diff_ms:+.1f} ({lo:+.1f} to {hi:+.1f})",
            f"{c.rank_test.p_value:.2g}",
        )
    out.print(table)
    for s, c in found:
        out.print(f"{s}: {escape(c.verdict)}", highlight=False)
    if not found:
        out.print("no scenario has successful requests from both targets")
