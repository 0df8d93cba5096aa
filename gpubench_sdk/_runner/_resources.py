"""What a run needs from the operating system, checked before anything is sent, and the
causes of a failure we can name instead of an ExceptionGroup.

Every request in flight holds a socket, and a socket is a file descriptor. A plan asking for more
requests in flight than the process may open files would fail mid-run, one request after
another and possibly in the store itself, so the limit is raised as far as the system allows
(the soft limit up to the hard one) and a plan that still does not fit is refused up front.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence

from .._base._errors import ConfigError, GpubenchError, ResourceError
from .._scenarios import Scenario, share

try:  # POSIX only; elsewhere there is no such limit to raise or check
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

#: Descriptors kept for everything but sockets: stdio, the store (two SQLite connections with
#: their WAL and shared-memory files), the event loop, a local runtime's pipes, exporters.
DESCRIPTOR_MARGIN = 64


def raise_open_files_limit() -> int | None:
    """Raise the soft RLIMIT_NOFILE to the hard limit; the soft limit now in force (None where
    the platform has no such limit, or it is unlimited)."""
    if resource is None:
        return None
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard and (hard == resource.RLIM_INFINITY or soft < hard):
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
                soft = hard
            except (ValueError, OSError):  # e.g. macOS caps the soft limit below "unlimited"
                pass
    except (ValueError, OSError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


def descriptors_needed(scenarios: Sequence[Scenario], targets: int, shards: int = 1) -> int:
    """Open files one load-generating process (of ``shards``) needs for the plan at its peak:
    its share of the most requests in flight at once, each target driven at the same time.
    An open loop without ``max_inflight`` is left out: its bound adapts to the limit."""
    peak = max((sc.inflight() for sc in scenarios if not sc.inflight_adapts()), default=1)
    busiest, _ = share(0, shards, peak)  # the first process gets the most slots
    return busiest * targets + DESCRIPTOR_MARGIN


def check_open_files(scenarios: Sequence[Scenario], targets: int, shards: int = 1) -> int | None:
    """Raise the open-files limit, then refuse (``ConfigError``) a plan that cannot fit in it.
    Returns how many requests each target may have in flight in this process (None: no limit),
    the bound of an open loop without ``max_inflight``."""
    limit = raise_open_files_limit()
    if limit is None:
        return None
    needed = descriptors_needed(scenarios, targets, shards)
    fits = max(1, (limit - DESCRIPTOR_MARGIN) * shards // targets)
    if needed <= limit:
        return max(1, (limit - DESCRIPTOR_MARGIN) // targets)
    fixed = [i for i, sc in enumerate(scenarios) if not sc.inflight_adapts()]
    worst = max(fixed, key=lambda i: scenarios[i].inflight())
    sc = scenarios[worst]
    knob = sc.inflight_field()
    raise ConfigError(
        f"scenarios[{worst}].{sc.kind}.{knob}",
        getattr(sc, knob, sc.inflight()),
        f"a plan that fits the open-files limit: {sc.inflight():,} requests in flight per "
        f"target x {targets} target(s) need about {needed:,} open files, and this process may "
        f"open {limit:,} (ulimit -n; the hard limit, it cannot raise it further). Raise it "
        f"(ulimit -n {needed} in the shell, or LimitNOFILE= for a service) or set "
        f"{knob} <= {fits:,}",
    )


def out_of_files(exc: BaseException) -> ResourceError | None:
    """A ResourceError for an exception (or group) caused by running out of descriptors."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = out_of_files(inner)
            if found is not None:
                return found
        return None
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in (errno.EMFILE, errno.ENFILE):
            limit = raise_open_files_limit()
            shown = f"{limit:,}" if limit is not None else "the system's"
            return ResourceError(
                f"the run ran out of open files (limit {shown}: ulimit -n): lower the plan's "
                "concurrency or max_inflight, or raise the limit (ulimit -n)"
            )
        cause = cause.__cause__ or cause.__context__
    return None


def unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What a task group's exceptions should surface as: a cause we can name (out of open
    files, a gpubench error such as ``ConfigError``), else a lone exception as itself, else
    the group. No user should read "ExceptionGroup: unhandled errors in a TaskGroup"."""
    named: BaseException | None = out_of_files(group) or _first_gpubench_error(group)
    if named is not None:
        return named
    inner: BaseException = group  # a lone exception, however deeply nested, as itself
    while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
        inner = inner.exceptions[0]
    return inner


def _first_gpubench_error(group: BaseExceptionGroup[BaseException]) -> GpubenchError | None:
    """The first gpubench error among a task group's exceptions (nested groups included)."""
    for exc in group.exceptions:
        if isinstance(exc, GpubenchError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first_gpubench_error(exc)
            if found is not None:
                return found
    return None
