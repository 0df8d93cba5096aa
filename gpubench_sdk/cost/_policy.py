"""Which idle worker takes the next request: a stated policy, per provider, with its source.

The choice decides how many workers a fleet keeps warm and so what it costs: reusing the most
recently idle worker lets the others reach their scale-down delay and stop; waking the longest
idle one keeps every worker busy now and then, so none stops and fewer requests find a cold
fleet. With 4 workers and 60 s billing the two differ by half the bill (issue 18's
measurement). Both the what-if simulator (``_sim.py``) and the testing kit's metered fleet
(``testing/_fleet.py``) pick with ``choose_worker``, so their bills agree on the same trace.

Every provider's policy names where it comes from: ``documented`` (the provider says),
``inferred`` (follows from a documented mechanism, stated in ``source``) or ``assumed`` (no
public statement and not measured on the live platform; the simulator's historical choice).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .._base._errors import ConfigError

WorkerPolicy = Literal["most_recently_idle", "longest_idle", "random"]
WORKER_POLICIES: tuple[WorkerPolicy, ...] = ("most_recently_idle", "longest_idle", "random")
PolicyBasis = Literal["documented", "inferred", "assumed"]
#: The one default of everything that picks a worker without being told how: the what-if
#: simulator (``FleetSettings``, ``sweep``) and the testing kit's fleet (``FleetConfig``), so a
#: user comparing the two with their defaults compares like with like (they were 47% apart).
#: Longest idle, the testing fleet's behaviour that every emulator's tests are written against;
#: a measured platform's own policy (``provider_policy``) overrides it wherever one is known.
DEFAULT_WORKER_POLICY: WorkerPolicy = "longest_idle"


@dataclass(frozen=True, slots=True)
class PolicyFact:
    """A provider's worker-selection policy and where that claim comes from."""

    policy: WorkerPolicy
    basis: PolicyBasis
    source: str


_ASSUMED = PolicyFact(
    "most_recently_idle",
    "assumed",
    "not documented by the provider and not measured on the live platform; the simulator's "
    "historical default (a load balancer that packs work onto warm workers)",
)

PROVIDER_POLICIES: dict[str, PolicyFact] = {
    "runpod": PolicyFact(
        "random",
        "inferred",
        "workers pull jobs from the endpoint's queue (GET /v2/.../job-take, docs.runpod.io "
        "serverless/workers/overview); whichever idle worker polls first takes the job, and no "
        "order among idle workers is documented",
    ),
    "sagemaker": PolicyFact(
        "random",
        "documented",
        "ProductionVariantRoutingConfig.RoutingStrategy: RANDOM routes each request to a "
        "randomly chosen instance (docs.aws.amazon.com/sagemaker/latest/APIReference/"
        "API_ProductionVariantRoutingConfig.html); LEAST_OUTSTANDING_REQUESTS is the option",
    ),
    "cloudrun": PolicyFact(
        "most_recently_idle",
        "inferred",
        "Cloud Run does not document it; Knative's activator (its open-source ancestor) sends "
        "a request to the first pod with free capacity in a fixed order (knative/serving "
        "pkg/activator/net/lb_policy.go, firstAvailableLBPolicy), which packs work onto the "
        "same warm pods as most_recently_idle does",
    ),
    "testing-fleet": PolicyFact(
        "longest_idle",
        "documented",
        "gpubench_sdk.testing.FleetConfig.worker_policy's default (the order its workers "
        "were woken in before the policy was stated: asyncio wakes waiters first-in first-out)",
    ),
}


def provider_policy(provider: str) -> PolicyFact:
    """The policy of ``provider`` (a catalog provider name, ``plan`` suffix ignored)."""
    return PROVIDER_POLICIES.get(provider.split("/", 1)[0].lower(), _ASSUMED)


def platform_policy(provider: str, billing: str | None = None) -> PolicyFact:
    """The policy of the platform a target was measured on: its provider's where stated, else
    that of the platform its plan bills it as (a generic ``http`` target billed as
    ``cloudrun``), else assumed. A billing model that names no platform (``local``) never
    overrides the provider's: a RunPod endpoint priced ``local`` still routes as RunPod."""
    fact = provider_policy(provider)
    if fact.basis == "assumed" and billing:
        return provider_policy(billing)
    return fact


def check_policy(policy: str) -> WorkerPolicy:
    if policy not in WORKER_POLICIES:
        raise ConfigError("worker_policy", policy, f"one of {', '.join(WORKER_POLICIES)}")
    return policy


def choose_worker(idle_since_s: Sequence[float], policy: WorkerPolicy, rng: random.Random) -> int:
    """The index, in ``idle_since_s``, of the idle worker that takes the next request.

    ``idle_since_s`` holds when each candidate became idle; ties go to the earlier index (the
    order workers were listed), so the choice is deterministic for the two ordered policies.
    """
    if not idle_since_s:
        raise ValueError("no idle worker to choose from")
    if policy == "random":  # one candidate draws nothing, so seeded streams stay in step
        return rng.randrange(len(idle_since_s)) if len(idle_since_s) > 1 else 0
    best = 0
    for i in range(1, len(idle_since_s)):
        t = idle_since_s[i]
        if (t > idle_since_s[best]) if policy == "most_recently_idle" else (t < idle_since_s[best]):
            best = i
    return best


def may_stop(workers_up: int, min_workers: int) -> bool:
    """Whether an idle worker whose scale-down delay has run out may stop now, ``workers_up``
    counting every worker up or booting.

    The minimum is a count, not a set of pinned workers: each worker has its own idle timer
    (RunPod: "idle timeout", how long a worker stays up after its last job, docs.runpod.io
    pricing/serverless), and the platform keeps at least ``min_workers`` of them, whichever
    they are (RunPod's active (min) workers, ``workersMin``; Cloud Run "keeps at least the
    number of minimum instances running": min 10 with 6 busy leaves 4 idle,
    cloud.google.com/run/docs/configuring/min-instances). So the worker that stops is the one
    whose delay ran out first, the longest idle, under every selection policy. The simulator
    and the testing kit's fleet both ask this.
    """
    return workers_up > min_workers
