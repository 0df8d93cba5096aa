"""``gpubench results ...``: list, show, export and compare stored runs."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from typing import TextIO, cast

import click
from rich.markup import escape
from rich.table import Table

from .._base._errors import ConfigError
from .._base._files import replacing
from .._base._monitor import client_bound_spans
from .._base._types import Outcome
from .._report._summary import error_groups, render_thresholds, summarize
from .._store._store import Store
from ..campaign._judge import check_thresholds
from ..metrics import shape_summary
from ._console import existing_store, json_safe, out, quiet_broken_pipe, store_option, writable_path
from ._run import print_run


@click.group("results")
def results() -> None:
    """Read stored runs."""


@results.command("list")
@store_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def results_list(store_path: str | None, as_json: bool) -> None:
    """List the runs in the store, newest first."""
    with Store(existing_store(store_path), readonly=True) as store:
        runs = store.runs()
    if as_json:
        data = [
            {
                "id": r.id, "uuid": r.uuid, "name": r.name, "status": r.status, "error": r.error,
                "started": _started(r.started_wall_ns), "samples": r.samples,
            }
            for r in runs
        ]  # fmt: skip
        click.echo(json.dumps(data, indent=2))
        return
    table = Table()
    for col in ("id", "uuid", "name", "status", "started", "samples"):
        table.add_column(col)
    for r in runs:
        table.add_row(
            str(r.id), r.uuid[:8], escape(r.name), r.status, _started(r.started_wall_ns),
            str(r.samples),
        )  # fmt: skip
    out.print(table)


def _started(wall_ns: int) -> str:
    return dt.datetime.fromtimestamp(wall_ns / 1e9).isoformat(" ", "seconds")


@results.command("show")
@click.argument("run_ref", metavar="RUN", default="latest")
@store_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def results_show(run_ref: str, store_path: str | None, as_json: bool) -> None:
    """Summarize RUN (id, uuid prefix, or 'latest'): figures, why requests failed, and the
    plan's thresholds."""
    with Store(existing_store(store_path), readonly=True) as store:
        run = store.run(run_ref)
        report = check_thresholds(store, run.id)
        if as_json:
            data = {
                "run": {"id": run.id, "uuid": run.uuid, "name": run.name, "status": run.status},
                "summary": [r.as_dict() for r in summarize(store, run)],
                "errors": [asdict(g) for g in error_groups(store, run)],
                "thresholds": [
                    {"rule": r.rule.describe(), "target": r.target, "scenario": r.scenario,
                     "value": r.value, "passed": r.passed, "note": r.note}
                    for r in report.rows
                ],
                "client_bound": client_bound_spans(store.health_windows(run.id)),
                "lines": shape_summary(store, run.id),
            }  # fmt: skip
            click.echo(json.dumps(json_safe(data), indent=2, default=str))
            return
        print_run(store, run, run.status + (f" ({run.error})" if run.error else ""))
        # as after the run: latency by what was asked, token sources, stages, sweep, max_rate
        for line in shape_summary(store, run.id):
            out.print(line, highlight=False, soft_wrap=True)
    table = render_thresholds(report)
    if table is not None:
        out.print(table)


@results.command("export")
@click.argument("run_ref", metavar="RUN", default="latest")
@store_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv", "parquet"]),
    default="jsonl",
    show_default=True,
    help="parquet needs pyarrow (pip install 'gpubench-sdk[parquet]') and -o",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
    help="file to write (default stdout)",
)  # fmt: skip
def results_export(run_ref: str, store_path: str | None, fmt: str, output: str) -> None:
    """Export every invocation of RUN as JSON lines, CSV or Parquet."""
    if fmt == "parquet" and output == "-":
        raise ConfigError("--output", output, "a file for Parquet (binary): -o run.parquet")
    store_path = existing_store(store_path)
    if output != "-":
        writable_path(output, "--output", reads={"--store": store_path})
    with Store(store_path, readonly=True) as store:
        run = store.run(run_ref)
        if fmt == "parquet":
            export = getattr(store, "export_parquet", None)
            if export is None:
                raise ConfigError("--format", fmt, "jsonl or csv: this store has no Parquet export")
            with replacing(output) as part:
                export(run.id, part)
            return
        write = store.export_jsonl if fmt == "jsonl" else store.export_csv
        try:
            if output == "-":
                with click.open_file("-", "w", encoding="utf-8") as fp:
                    write(run.id, cast(TextIO, fp))
                    fp.flush()  # a full stdout fails here, not in the interpreter's exit
            else:
                with replacing(output) as part, open(part, "w", encoding="utf-8") as fp:
                    write(run.id, fp)
        except BrokenPipeError:
            # the reader (head, less) has what it wanted; handled here, inside the store's
            # block, so the abandoned row cursor closes while its database is still open
            quiet_broken_pipe()


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
    from ..metrics import compare, run_columns

    with Store(existing_store(store_path), readonly=True) as store:
        run_a = store.run(run_ref)
        run_b = run_a if run_b_ref is None else store.run(run_b_ref)
        for target, run, option in ((target_a, run_a, "TARGET_A"), (target_b, run_b, "TARGET_B")):
            names = [t.name for t in run.targets]
            if target not in names:
                raise ConfigError(option, target, f"a target of run {run.id} ({', '.join(names)})")
        shared = min(len(run_a.scenarios), len(run_b.scenarios))
        if scenario is not None and not 0 <= scenario < shared:
            raise ConfigError("--scenario", scenario, f"an index below {shared}")
        # named with their runs, so the verdict says which run of which target was faster
        name_a, name_b = f"{target_a} (run {run_a.id})", f"{target_b} (run {run_b.id})"
        found = []
        for idx in [scenario] if scenario is not None else range(shared):
            a = run_columns(store, run_a.id, target=target_a, scenario=idx)
            b = run_columns(store, run_b.id, target=target_b, scenario=idx)
            ok_a, ok_b = a["outcome"] == Outcome.OK.code, b["outcome"] == Outcome.OK.code
            c = compare(a["latency_ms"][ok_a], b["latency_ms"][ok_b], a_name=name_a, b_name=name_b)
            if c.a_count and c.b_count:
                found.append((run_a.scenarios[idx].key(idx), c))
    if as_json:
        data = [{"scenario": s} | asdict(c) for s, c in found]
        click.echo(json.dumps(json_safe(data), indent=2))
        return
    table = Table(title=f"{name_a} (A) vs {name_b} (B)", title_justify="left")
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
