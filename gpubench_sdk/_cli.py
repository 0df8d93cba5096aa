"""The ``gpubench`` command line."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ._cli_campaign import campaign, compare
from ._cli_cost import cost
from ._cli_report import report_cmd
from ._config import RunConfig, load_config, parse_config
from ._errors import ConfigError, GpubenchError
from ._monitor import client_bound_spans
from ._multiproc import run_blocking, run_processes
from ._plan import build_run
from ._plugins import PROVIDERS, WORKLOADS, list_plugins
from ._results import RunResult
from ._runner import Runner
from ._secrets import redact
from ._store import RunInfo, Store
from ._summary import render, summarize
from ._types import Invocation

F = TypeVar("F", bound=Callable[..., Any])

# Wide when captured (pipes, CI logs): rich would otherwise squeeze tables into 80 columns.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True)


class _Group(click.Group):
    """Every command's errors end here: a clear line on stderr and an exit code, never a key.

    gpubench's own errors (bad config, missing plugin...) print their message: exit 2 for
    configuration, 1 otherwise. Anything else is a bug: its type and (redacted) message print,
    with the traceback only when GPUBENCH_DEBUG is set.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GpubenchError as exc:
            err.print(
                f"[bold red]error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True
            )
            sys.exit(2 if isinstance(exc, ConfigError) else 1)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except Exception as exc:
            if os.environ.get("GPUBENCH_DEBUG"):
                raise
            message = escape(redact(f"{type(exc).__name__}: {exc}"))
            err.print(
                f"[bold red]internal error:[/] {message} (GPUBENCH_DEBUG=1 shows where)",
                highlight=False,
                soft_wrap=True,
            )
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gpubench-sdk")
def main() -> None:
    """Benchmark serverless GPU inference providers: cold starts, bursts, variability, cost."""


def _store_option(f: F) -> F:
    return click.option(
        "--store",
        "store_path",
        default="gpubench.sqlite",
        show_default=True,
        type=click.Path(dir_okay=False),
        help="results store (SQLite file)",
    )(f)


# -- run / demo ---------------------------------------------------------------------------


@main.command("run")
@click.argument("config_path", metavar="CONFIG", type=click.Path(dir_okay=False))
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), help="store path (overrides run.output)"
)
@click.option("--otlp-endpoint", metavar="URL", help="export spans and metrics over OTLP/HTTP")
@click.option(
    "--prometheus-port",
    metavar="[HOST:]PORT",
    help="serve metrics for Prometheus at http://HOST:PORT/metrics (HOST default 0.0.0.0)",
)
@click.option("--quiet", is_flag=True, help="no progress bar")
@click.option(
    "-p",
    "--processes",
    default=1,
    show_default=True,
    type=click.IntRange(1, 256),
    help="load-generating processes (use the machine's cores)",
)
def run_cmd(
    config_path: str,
    output: str | None,
    otlp_endpoint: str | None,
    prometheus_port: str | None,
    quiet: bool,
    processes: int,
) -> None:
    """Run the benchmark plan in CONFIG (TOML)."""
    config = load_config(config_path)
    if prometheus_port and processes > 1:
        raise ConfigError(
            "--prometheus-port",
            prometheus_port,
            "a single process (-p 1); several processes export through --otlp-endpoint to a "
            "collector, which Prometheus scrapes",
        )
    _execute(config, output, otlp_endpoint, quiet, processes, prometheus_port)


@main.command("demo")
@click.option(
    "-o",
    "--output",
    default="gpubench-demo.sqlite",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="store path",
)
@click.option("--otlp-endpoint", metavar="URL", help="export spans and metrics over OTLP/HTTP")
@click.option("--quiet", is_flag=True, help="no progress bar")
def demo_cmd(output: str, otlp_endpoint: str | None, quiet: bool) -> None:
    """Start the local serverless runtime and run the quickstart plan against it."""
    config = load_config(_quickstart_path())
    out.print(
        f"[bold]gpubench demo[/]: {len(config.scenarios)} scenarios against the "
        "embedded local runtime (real worker processes, real cold starts)"
    )
    _execute(config, output, otlp_endpoint, quiet)


def _quickstart_path() -> Path:
    bundled = resources.files("gpubench_sdk").joinpath("_quickstart.toml")
    if bundled.is_file():
        return Path(str(bundled))
    # editable install: the file lives in the repository's examples/
    return Path(__file__).resolve().parents[1] / "examples" / "quickstart.toml"


def _progress(quiet: bool) -> Progress:
    """One bar per scenario (or one for a multi-process run), on stderr."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[errors]} errors"),
        TimeElapsedColumn(),
        console=err,
        disable=quiet,
    )


def _execute(
    config: RunConfig,
    output: str | None,
    otlp_endpoint: str | None,
    quiet: bool,
    processes: int = 1,
    prometheus_port: str | None = None,
) -> None:
    store = output or config.run.output
    if processes > 1:
        _execute_processes(config, store, otlp_endpoint, quiet, processes)
        return
    setup = None
    if otlp_endpoint or prometheus_port:
        from .telemetry import configure, parse_prometheus_address

        host, port = parse_prometheus_address(prometheus_port)
        setup = configure(otlp_endpoint=otlp_endpoint, prometheus_port=port, prometheus_host=host)
    progress = _progress(quiet)
    tasks = [
        progress.add_task(f"{i}:{s.kind}", total=s.planned(len(config.targets)), errors=0)
        for i, s in enumerate(config.build_scenarios())
    ]
    errors = [0] * len(tasks)

    def advance(inv: Invocation) -> None:
        if not inv.ok:
            errors[inv.scenario] += 1
        progress.update(tasks[inv.scenario], advance=1, errors=errors[inv.scenario])

    runner = build_run(
        config, store=store, instruments=setup.instruments() if setup else None, observers=[advance]
    )
    try:
        with progress:
            result = run_blocking(runner)
    finally:
        if setup is not None:
            setup.shutdown()
    _report(result)


def _build_for_process(
    config: dict[str, Any], store: str, otlp_endpoint: str | None, processes: int
) -> Runner:
    """Runs in each load-generating process (it must be picklable, hence module level).

    Each process meters only its own requests, so each gets 1/N of any ``max_cost_usd``."""
    instruments = None
    if otlp_endpoint:
        from .telemetry import configure

        instruments = configure(otlp_endpoint=otlp_endpoint).instruments()
    return build_run(
        parse_config(config), store=store, instruments=instruments, budget_share=1 / processes
    )


def _execute_processes(
    config: RunConfig, store: str, otlp_endpoint: str | None, quiet: bool, processes: int
) -> None:
    for i, t in enumerate(config.targets):
        if t.provider == "local" and not t.provider_options().get("url"):
            raise ConfigError(
                f"targets[{i}].url",
                None,
                "the URL of a running local runtime when --processes > 1, so all processes "
                "share one: start it with `gpubench local serve`",
            )
    total = sum(s.planned(len(config.targets)) for s in config.build_scenarios())
    progress = _progress(quiet)
    task = progress.add_task(f"{processes} processes", total=total, errors="-")
    build = functools.partial(_build_for_process, config.stored(), store, otlp_endpoint, processes)
    with progress:
        result = run_processes(
            build, processes, on_progress=lambda n: progress.update(task, completed=n)
        )
    _report(result)


def _report(result: RunResult) -> None:
    status = result.status + (f" ({result.stop_reason})" if result.stop_reason else "")
    with Store(result.store_path, readonly=True) as store:
        _print_run(store, result.run, status)
    out.print(
        f"stored in {result.store_path} (run {result.run.uuid}); "
        f"see: gpubench results show {result.run.id} --store {result.store_path}"
    )


def _print_run(store: Store, run: RunInfo, status: str) -> None:
    out.print(render(summarize(store, run), f"run {run.id} {run.name!r}: {status}"))
    from ._cli_cost import print_run_costs  # the cost catalog loads only when a plan has prices

    print_run_costs(store, run)
    workload = run.config.get("workload")
    if isinstance(workload, dict) and workload.get("kind") == "gpu_probe":
        from .probe import print_probe_results  # reads every invocation: only for probe runs

        print_probe_results(store, run, console=out)
    spans = client_bound_spans(store.health_windows(run.id))
    if spans:
        total = sum(b - a for a, b in spans)
        where = ", ".join(f"{a:.0f}-{b:.0f} s" for a, b in spans[:8])
        more = f" and {len(spans) - 8} more" if len(spans) > 8 else ""
        out.print(
            f"[yellow]warning:[/] the client was the bottleneck for {total:.0f} s of this run "
            f"({where}{more} from its start; event-loop lag or CPU): latencies then include the "
            "load generator's own queueing; lower the load or add --processes"
        )


# -- plugins ------------------------------------------------------------------------------


@main.command("providers")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def providers_cmd(as_json: bool) -> None:
    """List installed provider and workload plugins with their capabilities."""
    groups = {"providers": list_plugins(PROVIDERS), "workloads": list_plugins(WORKLOADS)}
    if as_json:
        data = {
            g: [
                {
                    "name": i.name,
                    "target": i.target,
                    "distribution": i.distribution,
                    "capabilities": i.capabilities,
                    "error": i.error,
                }
                for i in infos
            ]
            for g, infos in groups.items()
        }
        click.echo(json.dumps(data, indent=2))
        return
    for group, infos in groups.items():
        table = Table(title=group, title_justify="left")
        for col in ("name", "status", "capabilities" if group == "providers" else "class", "from"):
            table.add_column(col)
        for i in infos:
            status = "[green]ok[/]" if i.ok else f"[red]broken[/]: {i.error}"
            detail = ", ".join(i.capabilities) if group == "providers" else i.target
            table.add_row(i.name, status, detail if i.ok else "-", i.distribution or "-")
        out.print(table)


# -- results ------------------------------------------------------------------------------


@main.group("results")
def results() -> None:
    """Read stored runs."""


@results.command("list")
@_store_option
def results_list(store_path: str) -> None:
    """List the runs in the store, newest first."""
    with Store(store_path, readonly=True) as store:
        table = Table()
        for col in ("id", "uuid", "name", "status", "started", "samples"):
            table.add_column(col)
        import datetime as dt

        for r in store.runs():
            started = dt.datetime.fromtimestamp(r.started_wall_ns / 1e9).isoformat(" ", "seconds")
            table.add_row(str(r.id), r.uuid[:8], r.name, r.status, started, str(r.samples))
        out.print(table)


@results.command("show")
@click.argument("run_ref", metavar="RUN", default="latest")
@_store_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def results_show(run_ref: str, store_path: str, as_json: bool) -> None:
    """Summarize RUN (id, uuid prefix, or 'latest')."""
    with Store(store_path, readonly=True) as store:
        run = store.run(run_ref)
        rows = summarize(store, run)
        if as_json:
            from dataclasses import asdict

            data = {
                "run": {"id": run.id, "uuid": run.uuid, "name": run.name, "status": run.status},
                "summary": [asdict(r) for r in rows],
                "client_bound": client_bound_spans(store.health_windows(run.id)),
            }
            click.echo(json.dumps(_json_safe(data), indent=2, default=str))
            return
        _print_run(store, run, run.status + (f" ({run.error})" if run.error else ""))


def _json_safe(value: Any) -> Any:
    """NaN (an undefined figure) as JSON null: strict JSON parsers reject NaN."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


@results.command("export")
@click.argument("run_ref", metavar="RUN", default="latest")
@_store_option
@click.option(
    "--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True
)
@click.option("-o", "--output", type=click.File("w"), default="-", help="file (default stdout)")
def results_export(run_ref: str, store_path: str, fmt: str, output: Any) -> None:
    """Export every invocation of RUN as JSON lines or CSV."""
    with Store(store_path, readonly=True) as store:
        run = store.run(run_ref)
        (store.export_jsonl if fmt == "jsonl" else store.export_csv)(run.id, output)


@results.command("compare")
@click.argument("target_a")
@click.argument("target_b")
@click.option("--run", "run_ref", default="latest", show_default=True, help="run of TARGET_A")
@click.option("--run-b", "run_b_ref", default=None, help="run of TARGET_B (default: --run)")
@click.option("--scenario", type=int, default=None, help="scenario index (default: each shared)")
@_store_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def results_compare(
    target_a: str,
    target_b: str,
    run_ref: str,
    run_b_ref: str | None,
    scenario: int | None,
    store_path: str,
    as_json: bool,
) -> None:
    """Compare the latency of TARGET_A and TARGET_B: p50/p95 differences with 95% CIs, a
    Mann-Whitney U test and a verdict (see docs/metrics.md)."""
    from dataclasses import asdict

    from .metrics import compare_targets

    with Store(store_path, readonly=True) as store:
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
        click.echo(json.dumps(_json_safe(data), indent=2))
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


# -- local runtime ------------------------------------------------------------------------


@main.group("local")
def local() -> None:
    """The embedded local serverless runtime."""


@local.command("serve")
@click.option("--handler", default=None, help="module:function handling each request")
@click.option("--load", "load_fn", default=None, help="module:function run once per worker")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8585, show_default=True, type=click.IntRange(0, 65535))
@click.option("--min-workers", default=0, show_default=True, type=click.IntRange(0))
@click.option("--max-workers", default=4, show_default=True, type=click.IntRange(1))
@click.option(
    "--idle-timeout",
    "idle_timeout_s",
    default=5.0,
    show_default=True,
    type=click.FloatRange(0),
    help="seconds before an idle worker stops",
)
@click.option("--api-key-env", default=None, metavar="VAR", help="require this env var's key")
def local_serve(
    handler: str | None,
    load_fn: str | None,
    host: str,
    port: int,
    min_workers: int,
    max_workers: int,
    idle_timeout_s: float,
    api_key_env: str | None,
) -> None:
    """Serve the local runtime until Ctrl-C."""
    from ._local import LocalRuntimeConfig, serve
    from ._secrets import resolve_secret

    fields: dict[str, Any] = {
        "host": host,
        "port": port,
        "min_workers": min_workers,
        "max_workers": max_workers,
        "idle_timeout_s": idle_timeout_s,
    }
    if handler:
        fields["handler"] = handler
        fields["load"] = load_fn
    elif load_fn:
        fields["load"] = load_fn
    fields["api_key"] = resolve_secret("api_key", env=api_key_env, file=None)
    if max_workers < min_workers:
        raise ConfigError("--max-workers", max_workers, f">= --min-workers ({min_workers})")
    serve(LocalRuntimeConfig(**fields))


main.add_command(cost)
main.add_command(campaign)
main.add_command(compare)
main.add_command(report_cmd)
