"""``gpubench providers`` (installed plugins) and ``gpubench local serve`` (the local runtime)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table

from .._base._errors import ConfigError
from .._plugins import PROVIDERS, SCENARIOS, WORKLOADS, list_plugins
from ._console import FiniteRange, out


@click.command("providers")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def providers_cmd(as_json: bool) -> None:
    """List installed provider and workload plugins with their capabilities."""
    groups = {
        "providers": list_plugins(PROVIDERS),
        "workloads": list_plugins(WORKLOADS),
        "scenarios": list_plugins(SCENARIOS),
    }
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


@click.group("local")
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
    type=FiniteRange(0),
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
    from .._base._validate import resolve_secret
    from .._local import LocalRuntimeConfig, serve

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
    try:
        fields["api_key"] = resolve_secret("api_key", env=api_key_env, file=None)
    except ConfigError as exc:  # named after the option given, not the plan's field
        raise ConfigError("--api-key-env", api_key_env, exc.expected) from None
    if max_workers < min_workers:
        raise ConfigError("--max-workers", max_workers, f">= --min-workers ({min_workers})")
    serve(LocalRuntimeConfig(**fields))
