"""``run_job``: polling, backoff, Retry-After, the deadline, cancel and the job id in errors,
against a small queue API served over real HTTP on loopback; ``run_polled``, the same for a
provider with ``PollingOptions``."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from gpubench_sdk import (
    ClientHTTPError,
    Job,
    Polling,
    PollingOptions,
    Provider,
    ProviderError,
    Request,
    RequestTimeoutError,
    Result,
    ServerHTTPError,
    ThrottledError,
    run_job,
    run_polled,
)
from gpubench_sdk.testing import ServedApp, serve

JOB = "job-7f3a"
FAST = Polling(interval_s=0.01, max_interval_s=0.02, backoff=2.0)


@dataclass
class Answer:
    status: int = 200
    body: dict[str, Any] = field(default_factory=lambda: {"status": "RUNNING"})
    headers: dict[str, str] = field(default_factory=dict)


DONE = Answer(body={"status": "DONE", "output": 42})


@dataclass
class Queue:
    """What the server answers to each poll (the last answer repeats) and what it saw."""

    polls: list[Answer] = field(default_factory=lambda: [DONE])
    submit: Answer = field(default_factory=lambda: Answer(body={"id": JOB}))
    submit_delay_s: float = 0.0  # the job exists from the start; its answer comes this late
    submitted: list[str] = field(default_factory=list)
    polled_at: list[float] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        async def submit(request: HTTPRequest) -> JSONResponse:
            a = self.submit
            if a.status == 200:
                self.submitted.append(a.body["id"])
            await asyncio.sleep(self.submit_delay_s)
            return JSONResponse(a.body, a.status, a.headers)

        async def status(request: HTTPRequest) -> JSONResponse:
            self.polled_at.append(time.monotonic())
            a = self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]
            return JSONResponse(a.body, a.status, a.headers)

        async def cancel(request: HTTPRequest) -> JSONResponse:
            self.cancelled.append(request.path_params["id"])
            return JSONResponse({})

        return Starlette(
            routes=[
                Route("/jobs", submit, methods=["POST"]),
                Route("/jobs/{id}", status),
                Route("/jobs/{id}/cancel", cancel, methods=["POST"]),
            ]
        )


class EchoJob(Job[dict[str, Any]]):
    """A plugin's job for the API above, written as a plugin would."""

    def __init__(self, client: httpx.AsyncClient, base: str) -> None:
        self.client, self.base = client, base

    async def submit(self) -> None:
        response = await self.client.post(f"{self.base}/jobs", json={})
        self.id = response.raise_for_status().json()["id"]

    async def status(self) -> dict[str, Any]:
        response = await self.client.get(f"{self.base}/jobs/{self.id}")
        return dict(response.raise_for_status().json())

    def finished(self, state: dict[str, Any]) -> bool:
        return state["status"] in ("DONE", "FAILED")

    async def result(self, state: dict[str, Any]) -> Result:
        if state["status"] == "FAILED":
            raise ServerHTTPError("job FAILED: out of memory", provider="toy")
        return Result(output=state["output"], request_id=self.id)

    async def cancel(self) -> None:
        await self.client.post(f"{self.base}/jobs/{self.id}/cancel")


@pytest.fixture
def queue() -> Queue:
    return Queue()


@pytest.fixture
def served(queue: Queue) -> Iterator[ServedApp]:
    with serve(queue.app()) as served:
        yield served


async def follow(served: ServedApp, polling: Polling = FAST, **kw: Any) -> Result:
    async with httpx.AsyncClient() as client:
        return await run_job(EchoJob(client, served.url), provider="toy", polling=polling, **kw)


def run(served: ServedApp, polling: Polling = FAST, **kw: Any) -> Result:
    return asyncio.run(follow(served, polling, **kw))


def failure(served: ServedApp, polling: Polling = FAST, **kw: Any) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        run(served, polling, **kw)
    return info.value


async def cancel_once(served: ServedApp, seen: list[Any]) -> None:
    """Follow a job, cancel the task as soon as ``seen`` (what the server recorded) is not
    empty, and check the cancellation came through."""
    task = asyncio.create_task(follow(served))
    for _ in range(500):
        if seen:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def gaps(queue: Queue) -> list[float]:
    return [b - a for a, b in zip(queue.polled_at, queue.polled_at[1:], strict=False)]


def test_polls_with_a_growing_delay_up_to_the_cap(served: ServedApp, queue: Queue) -> None:
    queue.polls = [Answer()] * 6 + [DONE]
    result = run(served, Polling(interval_s=0.05, max_interval_s=0.2, backoff=2.0))
    assert result.output == 42 and result.request_id == JOB and len(queue.polled_at) == 7
    waited = gaps(queue)  # polled at once, then after 0.05, 0.1 and the cap 0.2 from there
    assert waited[0] >= 0.045 and waited[1] >= 0.095
    assert all(0.19 <= w < 0.45 for w in waited[2:]), waited
    assert queue.cancelled == []


def test_the_delays_grow_by_the_factor_to_the_cap() -> None:
    delays = Polling(interval_s=0.1, max_interval_s=0.5, backoff=2.0).delays()
    assert [round(next(delays), 3) for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]


def test_a_job_whose_submit_carries_no_state_is_polled_at_once(
    served: ServedApp, queue: Queue
) -> None:
    started = time.monotonic()
    run(served, Polling(interval_s=2.0))  # a first delay of 2 s would show
    assert len(queue.polled_at) == 1 and queue.polled_at[0] - started < 1.5


def test_a_passing_server_error_or_reset_is_outlived(served: ServedApp, queue: Queue) -> None:
    queue.polls = [Answer(502), Answer(503), Answer(500), DONE]
    assert run(served).output == 42
    assert len(queue.polled_at) == 4 and queue.cancelled == []


def test_retry_after_in_seconds_is_waited_out(served: ServedApp, queue: Queue) -> None:
    queue.polls = [Answer(429, {"detail": "slow down"}, {"Retry-After": "1"}), DONE]
    assert run(served).output == 42
    (waited,) = gaps(queue)
    assert waited >= 0.95, waited  # not the backoff's 0.02 s cap


def test_retry_after_as_an_http_date_is_waited_out(served: ServedApp, queue: Queue) -> None:
    when = email.utils.formatdate(time.time() + 3, usegmt=True)  # whole seconds: 2 to 3 s
    queue.polls = [Answer(429, {}, {"Retry-After": when}), DONE]
    assert run(served).output == 42
    (waited,) = gaps(queue)
    assert waited >= 1.9, waited


def test_a_retry_after_past_the_deadline_is_the_answer(served: ServedApp, queue: Queue) -> None:
    queue.polls = [Answer(429, {}, {"Retry-After": "30"})]
    started = time.monotonic()
    error = failure(served, timeout_s=5)
    assert isinstance(error, ThrottledError) and error.retry_after_s == 30
    assert error.request_id == JOB and time.monotonic() - started < 3
    assert queue.cancelled == [JOB]


def test_the_deadline_is_a_timeout_naming_the_job_which_is_cancelled(
    served: ServedApp, queue: Queue
) -> None:
    queue.polls = [Answer()]  # never ends
    started = time.monotonic()
    error = failure(served, timeout_s=0.3)
    assert 0.25 <= time.monotonic() - started < 2.0
    assert isinstance(error, RequestTimeoutError) and error.provider == "toy"
    assert error.request_id == JOB and f"job {JOB} not finished" in str(error)
    assert len(queue.polled_at) >= 2 and queue.cancelled == [JOB]


def test_a_cancelled_task_cancels_the_job(served: ServedApp, queue: Queue) -> None:
    queue.polls = [Answer()]
    asyncio.run(cancel_once(served, queue.polled_at))  # once the job runs and was polled
    assert queue.cancelled == [JOB]


def test_a_task_cancelled_while_its_submit_is_on_the_wire_still_cancels_the_job(
    served: ServedApp, queue: Queue
) -> None:
    """The job exists before its id reaches the client (Baseten's conformance test caught
    that gap): the submit's answer is awaited, shielded, so the job can be cancelled."""
    queue.polls, queue.submit_delay_s = [Answer()], 0.3
    asyncio.run(cancel_once(served, queue.submitted))  # once the job exists, not its answer
    assert queue.submitted == [JOB] and queue.cancelled == [JOB]
    assert queue.polled_at == []  # waited for the answer, polled nothing after it


def test_a_deadline_passing_during_the_submit_still_cancels_the_job(
    served: ServedApp, queue: Queue
) -> None:
    queue.polls, queue.submit_delay_s = [Answer()], 0.4
    error = failure(served, timeout_s=0.1)
    assert isinstance(error, RequestTimeoutError) and queue.cancelled == [JOB]


def test_a_submit_hung_past_the_grace_is_given_up(served: ServedApp, queue: Queue) -> None:
    """The wait for a submit's answer is bounded: ``cancel_grace_s``, then the error."""
    queue.submit_delay_s = 5.0
    started = time.monotonic()
    polling = Polling(interval_s=0.01, cancel_grace_s=0.2)
    error = failure(served, polling, timeout_s=0.1)
    assert isinstance(error, RequestTimeoutError) and "no answer to the submit" in str(error)
    assert time.monotonic() - started < 1.5 and queue.cancelled == []


def test_a_failed_poll_names_the_job_and_cancels_it(served: ServedApp, queue: Queue) -> None:
    queue.polls = [Answer(404, {"error": "no such job"})]
    error = failure(served)
    assert isinstance(error, ClientHTTPError) and error.status_code == 404
    assert error.request_id == JOB and "no such job" in str(error)
    assert len(queue.polled_at) == 1  # a 4xx is not retried
    assert queue.cancelled == [JOB]


def test_persistent_server_errors_fail_after_the_retries(served: ServedApp, queue: Queue) -> None:
    queue.polls = [Answer(503)]
    error = failure(served, Polling(interval_s=0.01, max_interval_s=0.01, retries=2))
    assert isinstance(error, ServerHTTPError) and error.status_code == 503
    assert error.request_id == JOB and len(queue.polled_at) == 3
    assert queue.cancelled == [JOB]


def test_a_failed_job_is_its_error_with_the_job_id(served: ServedApp, queue: Queue) -> None:
    queue.polls = [Answer(body={"status": "FAILED"})]
    error = failure(served)
    assert isinstance(error, ServerHTTPError) and error.status_code is None
    assert error.request_id == JOB and "out of memory" in str(error)
    assert len(queue.polled_at) == 1  # an ended job is not polled again
    assert queue.cancelled == []  # nor cancelled: it is over


def test_a_refused_submit_names_no_job_and_cancels_nothing(served: ServedApp, queue: Queue) -> None:
    queue.submit = Answer(429, {"detail": "queue full"}, {"Retry-After": "7"})
    error = failure(served)
    assert isinstance(error, ThrottledError) and error.retry_after_s == 7
    assert error.request_id is None and queue.polled_at == [] and queue.cancelled == []


def test_a_submit_that_names_no_job_is_an_invalid_response(served: ServedApp, queue: Queue) -> None:
    class Nameless(EchoJob):
        async def submit(self) -> None:
            await self.client.post(f"{self.base}/jobs", json={})

    async def go() -> Result:
        async with httpx.AsyncClient() as client:
            return await run_job(Nameless(client, served.url), provider="toy")

    with pytest.raises(ProviderError, match="named no job") as info:
        asyncio.run(go())
    assert info.value.outcome.value == "invalid_response"


class Toy(Provider):
    name = "toy"
    options: PollingOptions

    async def invoke(self, request: Request) -> Result:
        raise NotImplementedError


class Plain(Provider):
    name = "plain"

    async def invoke(self, request: Request) -> Result:
        raise NotImplementedError


def test_run_polled_takes_the_providers_name_deadline_and_backoff(
    served: ServedApp, queue: Queue
) -> None:
    async def go(given_s: float | None, options_s: float) -> Result:
        async with Toy(poll_interval_s=0.2, poll_max_interval_s=0.2, timeout_s=options_s) as toy:
            return await run_polled(toy, EchoJob(toy.client, served.url), timeout_s=given_s)

    queue.polls = [Answer(), Answer(), DONE]
    assert asyncio.run(go(None, 5.0)).output == 42 and len(queue.polled_at) == 3
    gaps = [b - a for a, b in zip(queue.polled_at, queue.polled_at[1:], strict=False)]
    assert min(gaps) >= 0.15  # the options' backoff (run_job's default starts at 0.05 s)
    queue.polls = [Answer()]  # never ends: the deadline is the options' or the one given
    for given_s, options_s in ((None, 0.3), (0.3, 60.0)):
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError) as info:
            asyncio.run(go(given_s, options_s))
        assert time.monotonic() - started < 3 and info.value.provider == "toy"

    async def plain() -> Result:
        async with httpx.AsyncClient() as client:
            return await run_polled(Plain(), EchoJob(client, served.url))

    with pytest.raises(TypeError, match="PollingOptions"):
        asyncio.run(plain())
