"""The control-plane pieces provider plugins kept writing for themselves: the provider's
scaling fields read into ``ScalingSettings``, the first step and the wait of ``ensure_cold``, a
restore that outlives a cancelled run, and a held JSON call judged by a ``ColdMark`` (made as
an ``IngressOptions`` provider makes it: ``ingress_call``).

Like ``_kit``, nothing here knows a provider: each plugin passes its own field names, its own
look at the fleet and its own words for what it saw.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from types import EllipsisType
from typing import Any

import anyio
import httpx

from .._base._errors import InvalidResponseError
from .._base._types import ColdCheck, Request, Result, ScalingSettings
from .._transport._client import first_byte_ns
from ._ingress import IngressOptions
from ._jobs import Polling
from ._kit import ColdMark, json_result
from ._provider import Provider

ColdLook = Callable[[], Awaitable[tuple[bool, str]]]


def read_scaling(
    fields: Mapping[str, Any],
    min_key: str,
    max_key: str,
    idle_key: str | None = None,
    *,
    provider: str,
    where: str,
    idle_unit_s: float = 1.0,
    idle_default: float | EllipsisType | None = ...,
) -> ScalingSettings:
    """The ``ScalingSettings`` in a provider's answer (the reverse of ``scaling_fields``):
    ``min_key`` and ``max_key`` as whole numbers of workers, ``idle_key`` in units of
    ``idle_unit_s`` seconds, where missing or null ``idle_default`` (in seconds; ``...``, the
    default, makes it required). A field missing or not a number is an
    ``InvalidResponseError`` saying ``where`` lacks it."""
    try:
        idle_timeout_s: float | None = None
        if idle_key is not None:
            units: Any = fields[idle_key] if idle_default is ... else fields.get(idle_key)
            if units is None and idle_default is not ...:
                idle_timeout_s = idle_default
            else:
                idle_timeout_s = float(units) * idle_unit_s
        return ScalingSettings(
            min_workers=int(fields[min_key]),
            max_workers=int(fields[max_key]),
            idle_timeout_s=idle_timeout_s,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidResponseError(
            f"{where} lacks a scaling field: {exc}", provider=provider
        ) from exc


async def wait_cold(
    look: ColdLook,
    *,
    timeout_s: float,
    poll: Polling | float,
    started: float | None = None,
    margin_s: float = 0.0,
    mark: ColdMark | None = None,
) -> ColdCheck:
    """Look at the fleet until it is cold or the time is up: the ``ensure_cold`` wait.

    ``look()`` answers ``(cold, how)``: when cold, ``how`` says how it was seen so (the
    confirmed ``ColdCheck``'s ``how``); else what is still up (the unconfirmed one's, after
    ``timed out:``). Looks follow each other after ``poll``'s delays (a ``Polling``'s
    backoff, or a fixed interval in seconds), each cut to the time left, so the last look
    starts by ``started + timeout_s - margin_s``: ``started`` is when ``ensure_cold`` began
    (``time.monotonic()``, default now), ``margin_s`` room for that look, so the answer comes
    within the runner's deadline (the same ``timeout_s``). A fleet seen cold tells ``mark``
    to expect it (the next request is cold as a fact).
    """
    started = time.monotonic() if started is None else started
    deadline = started + timeout_s - margin_s
    delays: Iterator[float] = (
        poll.delays() if isinstance(poll, Polling) else itertools.repeat(float(poll))
    )
    for delay_s in delays:
        cold, how = await look()
        now = time.monotonic()
        if cold:
            if mark is not None:
                mark.expect()
            return ColdCheck(confirmed=True, waited_s=now - started, how=how)
        if now >= deadline:
            return ColdCheck(confirmed=False, waited_s=now - started, how=f"timed out: {how}")
        await anyio.sleep(min(delay_s, deadline - now))
    raise AssertionError("unreachable")  # pragma: no cover - the delays never end


async def shielded(work: Awaitable[object], *, timeout_s: float | None = None) -> None:
    """Await ``work`` shielded from cancellation, given up after ``timeout_s`` (None: no
    limit): what ``close()`` puts back (the user's scaling) comes back even when the run was
    cancelled, and a stuck control plane does not hold the close for ever."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(timeout_s):
        await work


async def held_json_call(
    client: httpx.AsyncClient,
    url: httpx.URL | str,
    payload: Any,
    *,
    headers: dict[str, str],
    mark: ColdMark,
    provider: str,
    request_id_header: str,
) -> Result:
    """POST ``payload`` as JSON and wait for the answer: its ``Result`` (``json_result``) with
    the request id from ``request_id_header`` and the cold verdict of ``mark`` (the first
    request after ``ensure_cold``, or a first byte past its threshold). A status >= 400 is
    raised as ``httpx`` does, and it, a timeout or a reset leaves through ``invoke``'s boundary
    as the core's ``ProviderError`` (a 429's ``Retry-After`` read)."""
    sent_ns = time.perf_counter_ns()
    response = await client.post(url, json=payload, headers=headers)
    response.raise_for_status()
    cold, confirmed = mark.judge(sent_ns, first_byte_ns(response))
    return json_result(
        response,
        provider=provider,
        request_id=response.headers.get(request_id_header),
        cold=cold,
        cold_confirmed=confirmed,
    )


async def ingress_call(
    provider: Provider,
    url: httpx.URL,
    request: Request,
    headers: dict[str, str],
    mark: ColdMark,
) -> Result:
    """``held_json_call`` as a provider whose options are ``IngressOptions`` makes it:
    ``request``'s payload POSTed to ``url`` (``options.invoke_url``) through the provider's
    client, the request id read from its ``request_id_header``, errors named for it."""
    options = provider.options
    if not isinstance(options, IngressOptions):
        raise TypeError(f"{type(provider).__name__}'s options are no IngressOptions")
    return await held_json_call(
        provider.client,
        url,
        dict(request.payload),
        headers=headers,
        mark=mark,
        provider=provider.name,
        request_id_header=options.request_id_header,
    )


async def lower_min_workers(provider: Provider) -> ScalingSettings:
    """``ensure_cold``'s first step where the fleet drains by itself: ``min_workers`` set to 0
    (``set_scaling``, so ``close()`` puts it back) unless it is 0; the scaling as it was
    before, for the check's ``how``."""
    scaling = await provider.get_scaling()
    if scaling.min_workers:
        await provider.set_scaling(ScalingSettings(min_workers=0))
    return scaling
