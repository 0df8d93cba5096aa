"""A provider plugin for a queue-style API, written from the plugin guide with ``run_job``.

The API (``queue_server.py`` serves one on the testing kit's simulated fleet)::

    POST {url}/jobs              {"input": {...}}  ->  {"id", "status": "queued"}
    GET  {url}/jobs/{id}         ->  {"id", "status", "output", "error", "queue_ms",
                                      "execution_ms", "cold"}   (times in milliseconds)
    POST {url}/jobs/{id}/cancel

Statuses: queued, running, then completed, failed or cancelled. The plugin writes the four
calls; ``run_job`` polls with backoff, retries a passing 429/5xx/reset (Retry-After honoured),
keeps ``timeout_s``, names the job in every error and cancels an abandoned job.
"""

from __future__ import annotations

from typing import Any

from gpubench_sdk import (
    Capabilities,
    Job,
    Polling,
    Provider,
    ProviderOptions,
    Request,
    Result,
    ServerHTTPError,
    first_byte_ns,
    run_job,
)


class QueueOptions(ProviderOptions):
    url: str  # the API's base URL
    poll_interval_s: float = 0.02  # first poll delay; it grows 1.5 times per poll up to 1 s


class QueueProvider(Provider):
    name = "queue-example"
    options: QueueOptions
    capabilities = Capabilities(server_timings=frozenset({"queue_ms", "execution_ms"}))

    async def invoke(self, request: Request) -> Result:
        polling = Polling(interval_s=self.options.poll_interval_s)
        job = QueueJob(self, dict(request.payload))
        return await run_job(
            job, provider=self.name, timeout_s=self.options.timeout_s, polling=polling
        )


class QueueJob(Job[dict[str, Any]]):
    """One job: ``httpx`` errors may simply escape, ``run_job`` maps them."""

    def __init__(self, provider: QueueProvider, payload: dict[str, Any]) -> None:
        self.client, self.base = provider.client, provider.options.url.rstrip("/")
        self.headers, self.payload = provider.auth_headers(), payload

    async def submit(self) -> dict[str, Any]:
        body = {"input": self.payload}
        self.response = await self.client.post(f"{self.base}/jobs", json=body, headers=self.headers)
        state: dict[str, Any] = self.response.raise_for_status().json()
        self.id = str(state["id"])  # from here on, every error names the job
        return state

    async def status(self) -> dict[str, Any]:
        self.response = await self.client.get(f"{self.base}/jobs/{self.id}", headers=self.headers)
        state: dict[str, Any] = self.response.raise_for_status().json()
        return state

    def finished(self, state: dict[str, Any]) -> bool:
        return state["status"] not in ("queued", "running")

    async def result(self, state: dict[str, Any]) -> Result:
        if state["status"] != "completed":
            message = f"job {state['status']}: {state.get('error')}"
            raise ServerHTTPError(message, provider=QueueProvider.name)
        return Result(
            output=state["output"],
            request_id=self.id,
            http_status=self.response.status_code,
            first_byte_ns=first_byte_ns(self.response),
            queue_ms=state["queue_ms"],
            execution_ms=state["execution_ms"],
            cold=state["cold"],
        )

    async def cancel(self) -> None:
        await self.client.post(f"{self.base}/jobs/{self.id}/cancel", headers=self.headers)
