"""Turning a validated RunConfig into a ready Runner: plugins loaded, secrets resolved."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .._contract._workload import Workload
from .._plugins import load_workload, provider_class
from .._runner._results import Target
from .._runner._runner import Observer, Runner, check_run
from .._runner._telemetry import Instruments
from .._store._store import Store
from ..cost._meter import budget_guard
from ._config import RunConfig, provider_options


def build_run(
    config: RunConfig,
    *,
    store: Store | str | Path | None = None,
    instruments: Instruments | None = None,
    observers: Iterable[Observer] = (),
    budget_share: float = 1.0,
    recorded: Mapping[str, Any] | None = None,
) -> Runner:
    """A Runner for ``config``. Fails before anything is sent if a plugin or option is wrong.

    ``budget_share`` scales the plan's ``max_cost_usd`` caps: each of N load-generating
    processes gets 1/N of them, so together they can never pass a cap (each meters only
    its own requests). ``recorded`` is added to the config stored with the run (e.g. the Ray
    backend's workers and their measured clock offsets).
    """
    targets, workload = _parts(config)
    return Runner(
        targets,
        workload,
        config.build_scenarios(),
        store=store if store is not None else config.run.output,
        name=config.run.name,
        config={**config.stored(), **(recorded or {})},
        instruments=instruments,
        observers=observers,
        max_requests=config.run.max_requests,
        flush_interval_s=config.run.flush_interval_s,  # used when store is a path
        cost_guard=budget_guard(
            config, {t.name: t.provider.capabilities.billing for t in targets}, share=budget_share
        ),  # None unless the plan sets a max_cost_usd
    )


def check_plan(config: RunConfig) -> None:
    """Everything ``build_run`` and the Runner refuse, without opening a store or sending:
    plugins, provider options, secrets, scenarios against the providers' capabilities, and
    each target's input map against the workload's request (``gpubench run --dry-run``)."""
    targets, workload = _parts(config)
    check_run(targets, workload, config.build_scenarios(), config.run.max_requests)


def _parts(config: RunConfig) -> tuple[list[Target], Workload]:
    targets = []
    for t in config.targets:
        cls = provider_class(t.provider)
        targets.append(Target(t.name, cls(provider_options(t, cls.Options))))
    workload = load_workload(config.workload.kind, **config.workload.workload_options())
    return targets, workload
