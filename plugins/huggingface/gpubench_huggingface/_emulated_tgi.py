"""What the emulator's model server answers: toolkit and TGI bodies, TGI's SSE events and its
timing headers, built from a simulated fleet's job (sources in ``_protocol``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from gpubench_sdk.testing import Job, JobStatus, SimulatedFleet


class TgiShapes:
    """Turns request bodies into fleet payloads and finished jobs into TGI/toolkit answers.

    A text ``inputs`` is a prompt; JSON text or an object is the fleet payload itself (so the
    echo probe's ``sleep_ms``/``chunks`` reach the fleet through TGI's text-only ``inputs``).
    ``max_new_tokens`` makes that many tokens, ``time_per_token_ms`` each.
    """

    def __init__(
        self, fleet: SimulatedFleet, compute_time_unit: Literal["s", "ms"], time_per_token_ms: float
    ) -> None:
        self.fleet = fleet
        self.compute_time_unit = compute_time_unit
        self.time_per_token_ms = time_per_token_ms

    def payload(self, body: dict[str, Any]) -> dict[str, Any]:
        inputs = body["inputs"]
        parameters = body.get("parameters") or {}
        payload: dict[str, Any]
        if isinstance(inputs, dict):
            payload = dict(inputs)
        else:
            try:
                decoded = json.loads(inputs) if isinstance(inputs, str) else None
            except ValueError:
                decoded = None
            payload = dict(decoded) if isinstance(decoded, dict) else {"prompt": inputs}
        tokens = parameters.get("max_new_tokens") if isinstance(parameters, dict) else None
        if isinstance(tokens, int) and tokens > 0:
            payload.setdefault("chunks", tokens)
            payload.setdefault("sleep_ms", tokens * self.time_per_token_ms)
        return payload

    @staticmethod
    def _tokens(job: Job) -> list[str]:
        return [f" tok{i}" for i in range(len(job.stream))]

    def generated_text(self, job: Job) -> str:
        if job.stream:
            return "".join(self._tokens(job))
        output = job.output
        return output if isinstance(output, str) else json.dumps(output)

    def toolkit_output(self, job: Job) -> Any:
        """A prompt gets the text-generation pipeline's ``[{"generated_text"}]``; any other
        input the handler's own answer."""
        if "prompt" in job.input:
            return [{"generated_text": self.generated_text(job)}]
        return job.output

    def generate_output(self, job: Job) -> dict[str, Any]:
        text = self.generated_text(job)
        details = {"finish_reason": "length", "generated_tokens": max(1, len(job.stream))}
        return {"generated_text": text, "details": {**details, "seed": None, "prefill": []}}

    def _boot_end_s(self, job: Job) -> float | None:
        for bill in self.fleet.billing.workers:
            if bill.worker_id == job.worker_id:
                return bill.boot_end_s
        return None

    def headers(self, job: Job) -> dict[str, str]:
        """TGI's timing headers (whole ms, as ``as_millis`` writes them). TGI sees a request
        only once a replica is up: time the proxy held it is in none of them."""
        assert job.started_s is not None and job.finished_s is not None
        boot_end_s = self._boot_end_s(job)
        seen_s = max(job.submitted_s, boot_end_s or job.submitted_s)
        total_ms = (job.finished_s - seen_s) * 1e3
        inference_ms = (job.finished_s - job.started_s) * 1e3
        generated = max(1, len(job.stream))
        prompt = job.input.get("prompt")
        seconds = self.compute_time_unit == "s"
        compute = repr(total_ms / 1e3) if seconds else str(int(total_ms))
        return {
            "x-request-id": job.id,
            "x-compute-type": "gpu+optimized",
            "x-compute-time": compute,
            "x-total-time": str(int(total_ms)),
            "x-validation-time": "0",
            "x-queue-time": str(int((job.started_s - seen_s) * 1e3)),
            "x-inference-time": str(int(inference_ms)),
            "x-time-per-token": str(int(inference_ms / generated)),
            "x-prompt-tokens": str(len(prompt.split()) if isinstance(prompt, str) else 1),
            "x-generated-tokens": str(generated),
        }

    async def stream_events(self, job: Job) -> AsyncIterator[dict[str, Any]]:
        """One event per token as the fleet produces it; the last token's event carries
        ``generated_text`` and ``details`` (held back until the job ends, as TGI does)."""
        sent = 0
        pending: dict[str, Any] | None = None
        while True:
            while sent < len(job.stream):
                if pending is not None:
                    yield pending
                token = {"id": sent, "text": f" tok{sent}", "logprob": -0.1, "special": False}
                pending = {"index": sent, "token": token, "generated_text": None, "details": None}
                sent += 1
            if job.done.is_set() and sent >= len(job.stream):
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.done.wait(), 0.002)
        if job.status is not JobStatus.COMPLETED:
            yield {"error": job.error or f"request {job.status.value}", "error_type": "generation"}
            return
        if pending is None:  # nothing generated: only the end-of-sequence token
            token = {"id": 0, "text": "</s>", "logprob": -0.1, "special": True}
            pending = {"index": 0, "token": token}
        details = {"finish_reason": "length", "generated_tokens": max(1, sent), "seed": None}
        yield {**pending, "generated_text": self.generated_text(job), "details": details}
