"""gpubench cost: price catalog, billing models, calculators and what-if fleet simulation.

Prices are data (``data/prices.json``: unit, source and date read for every price); this
package holds the pure arithmetic over them. See docs/cost.md for every formula and rounding
rule.
"""

from .._contract._billing import (
    BilledPhase,
    BillingModel,
    WorkerBill,
    WorkerInterval,
    price_worker_intervals,
)
from ._calc import (
    BreakEven,
    GroupBill,
    RunCost,
    ScenarioBill,
    UnitCosts,
    break_even,
    replay_worker_intervals,
    run_cost,
    scenario_bill,
    split_bill,
    unit_costs,
)
from ._catalog import (
    DEFAULT_MAX_AGE_DAYS,
    PriceCatalog,
    PriceEntry,
    StalePriceWarning,
    load_catalog,
)
from ._commitments import Commitment, CommitmentComparison, compare_commitments
from ._dryrun import DryRun, PlannedScenario, dry_run
from ._meter import BudgetGuard, CostMeter
from ._policy import WORKER_POLICIES, PolicyFact, WorkerPolicy, provider_policy
from ._sensitivity import Sensitivity, sweep_sensitivity
from ._sim import FleetSettings, SimResult, SweepResult, simulate, sweep
from ._traffic import (
    MeasuredDistributions,
    arrivals_from_run,
    distributions_from_run,
    poisson_arrivals,
)

__all__ = [
    "DEFAULT_MAX_AGE_DAYS",
    "WORKER_POLICIES",
    "BilledPhase",
    "BillingModel",
    "BreakEven",
    "BudgetGuard",
    "Commitment",
    "CommitmentComparison",
    "CostMeter",
    "DryRun",
    "FleetSettings",
    "GroupBill",
    "MeasuredDistributions",
    "PlannedScenario",
    "PolicyFact",
    "PriceCatalog",
    "PriceEntry",
    "RunCost",
    "ScenarioBill",
    "Sensitivity",
    "SimResult",
    "StalePriceWarning",
    "SweepResult",
    "UnitCosts",
    "WorkerBill",
    "WorkerInterval",
    "WorkerPolicy",
    "arrivals_from_run",
    "break_even",
    "compare_commitments",
    "distributions_from_run",
    "dry_run",
    "load_catalog",
    "poisson_arrivals",
    "price_worker_intervals",
    "provider_policy",
    "replay_worker_intervals",
    "run_cost",
    "scenario_bill",
    "simulate",
    "split_bill",
    "sweep",
    "sweep_sensitivity",
    "unit_costs",
]
