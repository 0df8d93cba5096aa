"""gpubench cost: price catalog, billing models, calculators and what-if fleet simulation.

Prices are data (``data/prices.json``: unit, source and date read for every price); this
package holds the pure arithmetic over them. See docs/cost.md for every formula and rounding
rule.
"""

from ._billing import (
    BilledPhase,
    BillingModel,
    WorkerBill,
    WorkerInterval,
    price_worker_intervals,
)
from ._calc import (
    BreakEven,
    RunCost,
    ScenarioBill,
    UnitCosts,
    break_even,
    replay_worker_intervals,
    run_cost,
    scenario_bill,
    unit_costs,
)
from ._catalog import (
    DEFAULT_MAX_AGE_DAYS,
    PriceCatalog,
    PriceEntry,
    StalePriceWarning,
    load_catalog,
)
from ._meter import BudgetGuard, CostMeter
from ._sim import FleetSettings, SimResult, SweepResult, simulate, sweep
from ._traffic import (
    MeasuredDistributions,
    arrivals_from_run,
    distributions_from_run,
    poisson_arrivals,
)

__all__ = [
    "DEFAULT_MAX_AGE_DAYS",
    "BilledPhase",
    "BillingModel",
    "BreakEven",
    "BudgetGuard",
    "CostMeter",
    "FleetSettings",
    "MeasuredDistributions",
    "PriceCatalog",
    "PriceEntry",
    "RunCost",
    "ScenarioBill",
    "SimResult",
    "StalePriceWarning",
    "SweepResult",
    "UnitCosts",
    "WorkerBill",
    "WorkerInterval",
    "arrivals_from_run",
    "break_even",
    "distributions_from_run",
    "load_catalog",
    "poisson_arrivals",
    "price_worker_intervals",
    "replay_worker_intervals",
    "run_cost",
    "scenario_bill",
    "simulate",
    "sweep",
    "unit_costs",
]
