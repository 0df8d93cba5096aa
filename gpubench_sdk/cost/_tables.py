"""Rich tables of bills (the CLI's output), and the CLI's target specs, kept apart from click."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.table import Table

from .._base._errors import ConfigError
from ._calc import RunCost, ScenarioBill
from ._commitments import CommitmentComparison
from ._dryrun import DryRun
from ._sim import SweepResult

TARGET_SPEC = "provider[/plan][:SKU][,cold=S][,rate=USD_PER_S][,label=NAME]"


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """A priced target as written on the command line."""

    label: str
    provider: str
    sku: str | None
    cold_start_s: float
    rate_usd_per_s: float | None


def parse_target_spec(spec: str, default_cold_s: float = 0.0) -> TargetSpec:
    """``runpod:A100 80GB,cold=38.2`` or ``replicate/public,rate=0.0014,label=Replicate``."""
    head, *pairs = [p.strip() for p in spec.split(",")]
    provider, _, sku = head.partition(":")
    fields: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in ("cold", "rate", "label"):
            raise ConfigError("--target", spec, TARGET_SPEC)
        fields[key] = value
    try:
        cold = float(fields.get("cold", default_cold_s))
        rate = float(fields["rate"]) if "rate" in fields else None
    except ValueError:
        raise ConfigError("--target", spec, "numbers for cold= (s) and rate= (USD/s)") from None
    if not (math.isfinite(cold) and cold >= 0) or (
        rate is not None and not (math.isfinite(rate) and rate >= 0)
    ):  # a negative or infinite price or cold start would only give a nonsense bill
        raise ConfigError("--target", spec, "cold= (s) and rate= (USD/s) finite and >= 0")
    if not provider or (not sku and rate is None):
        raise ConfigError(
            "--target", spec, f"a SKU (provider:SKU) or rate=USD_PER_S: {TARGET_SPEC}"
        )
    label = fields.get("label") or f"{provider} {sku}".strip()
    return TargetSpec(label, provider, sku or None, cold, rate)


def _table(title: str, columns: Sequence[str]) -> Table:
    table = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right")
    return table


def bill_table(
    bills: Sequence[ScenarioBill], title: str, reported_usd: Sequence[float] | None = None
) -> Table:
    """The daily bill, one provider a row, laid out like the reference report's comparison."""
    columns = ["provider", "rate $/s", "scale-down s", "inference s/day"]
    columns += ["idle s/event", "idle s/day", "cold s/event", "cold s/day"]
    columns += ["billed s/day", "bill/day $", "per 1k req $"]
    table = _table(title, columns + (["report $"] if reported_usd is not None else []))
    for i, b in enumerate(bills):
        row = [b.label, f"{b.rate_usd_per_s:.9g}", f"{b.scale_down_s:g}", f"{b.inference_s:,.0f}"]
        row += [f"{b.idle_s_per_event:,.1f}", f"{b.idle_s:,.0f}"]
        row += [f"{b.cold_start_s_per_event:,.2f}", f"{b.cold_start_s:,.0f}", f"{b.billed_s:,.1f}"]
        row += [f"{b.total_usd:,.3f}", f"{b.per_1k_requests_usd:,.3f}"]
        if reported_usd is not None:
            row.append(f"{reported_usd[i]:g}" if i < len(reported_usd) else "-")
        table.add_row(*row)
    return table


# per-unit columns of a run's bill: shown when some target's workload counts that unit
UNIT_COLUMNS = (
    ("per_1k_input_tokens_usd", "per 1k in tok $"),
    ("per_million_input_tokens_usd", "per 1M in tok $"),
    ("per_1k_output_tokens_usd", "per 1k out tok $"),
    ("per_million_output_tokens_usd", "per 1M out tok $"),
    ("per_image_usd", "per image $"),
    ("per_audio_minute_usd", "per audio min $"),
)


def _unit(v: float | None) -> str:
    return "-" if v is None else f"{v:.6g}"


def run_cost_table(costs: Sequence[RunCost], title: str) -> Table:
    columns = ["target", "requests", "workers", "boot s", "execution s", "idle s", "billed s"]
    units = [(k, h) for k, h in UNIT_COLUMNS if any(getattr(c.units, k) is not None for c in costs)]
    headers = ["fees $", "total $", "per request $", "per 1k req $", *(h for _, h in units)]
    table = _table(title, [*columns, *headers])
    for r in costs:
        ph = r.bill.seconds_by_phase
        per_req = r.units.per_request_usd
        per_1k = r.units.per_1k_requests_usd
        table.add_row(
            r.target,
            str(r.requests),
            str(r.workers),
            f"{ph['cold_boot']:.1f}",
            f"{ph['execution']:.1f}",
            f"{ph['idle']:.1f}",
            f"{r.bill.billed_s:.1f}",
            f"{r.fees_usd:.4f}",
            f"{r.total_usd:.6f}",
            "-" if per_req is None else f"{per_req:.8f}",
            "-" if per_1k is None else f"{per_1k:.6f}",
            *(
                "-" if getattr(r.units, k) is None else f"{getattr(r.units, k):.6g}"
                for k, _ in units
            ),
        )
    return table


def sweep_table(result: SweepResult, title: str) -> Table:
    q = result.slo_percentile
    columns = ["min workers", "scale-down s", "cold %", "p50 s", f"p{q:g} s", "p99 s"]
    table = _table(title, [*columns, "workers started", "billed s", "bill $", "SLO"])
    for r in result.rows:
        at_q = r.latency_percentile_s(q)
        ok = at_q <= result.slo_latency_s
        mark = "[bold green]best[/]" if r is result.best else ("ok" if ok else "[red]miss[/]")
        table.add_row(
            str(r.settings.min_workers),
            f"{r.settings.scale_down_s:g}",
            f"{100 * r.cold_rate:.2f}",
            f"{r.latency_p50_s:.2f}",
            f"{at_q:.2f}",
            f"{r.latency_p99_s:.2f}",
            str(r.workers_started),
            f"{r.billed_s:,.0f}",
            f"{r.cost_usd:,.3f}",
            mark,
        )
    return table


def _secs(v: float | None) -> str:
    return "?" if v is None else f"{v:,.1f}"


def _usd(v: float | None) -> str:
    return "-" if v is None else f"{v:,.6f}"


def dry_run_table(plan: DryRun, title: str) -> Table:
    columns = ["target", "scenario", "requests", "expected s", "at most s"]
    table = _table(title, [*columns, "expected $", "worst case $"])
    for target in dict.fromkeys(r.target for r in plan.rows):
        for r in (r for r in plan.rows if r.target == target):
            table.add_row(
                r.target,
                r.label,
                f"{r.requests:,}",
                _secs(r.expected_s),
                _secs(r.worst_s),
                _usd(r.expected_usd),
                _usd(r.worst_usd),
            )
        cap = plan.caps.get(target)
        table.add_row(
            f"[bold]{target}[/]",
            "all" + ("" if cap is None else f" (cap ${cap:g})"),
            f"[bold]{plan.requests(target):,}[/]",
            "",
            "",
            f"[bold]{_usd(plan.total_usd(target, worst=False))}[/]",
            f"[bold]{_usd(plan.total_usd(target, worst=True))}[/]",
            end_section=True,
        )
    return table


def commitments_table(result: CommitmentComparison, title: str) -> Table:
    columns = ["option", "price", "min term", "$ per day", "break-even utilisation"]
    table = _table(title, [*columns, "billed h/day", "requests/day", "wins"])
    for line in result.lines:
        c = line.commitment
        u = line.break_even_utilization
        table.add_row(
            c.name,
            f"${c.usd:g}/{c.per}",
            f"{c.min_months:g} months" if c.min_months else "-",
            f"{line.usd_per_day:,.2f}",
            "never" if u is None else f"{100 * u:.1f}%",
            "-" if u is None else f"{24 * u:.1f}",
            "-"
            if line.break_even_requests_per_day is None
            else f"{line.break_even_requests_per_day:,.0f}",
            "-" if line.wins_from is None else f"above {100 * line.wins_from:.1f}%",
        )
    return table
