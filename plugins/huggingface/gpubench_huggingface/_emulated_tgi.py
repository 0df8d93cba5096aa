"""What the emulator's model server answers: toolkit and TGI bodies, TGI's SSE events, its
validation errors and timing headers, built from a simulated fleet's job (sources in
``_protocol``; the shapes checked against ``huggingface_hub``'s ``TextGenerationOutput`` and
``TextGenerationStreamOutput``, which parse them).

TGI's bodies (text-generation-inference ``router/src/lib.rs``): ``GenerateResponse`` is
``{"generated_text", "details"?}``, ``details`` only when the request asked for it
(``parameters.details``), as ``{"finish_reason", "generated_tokens", "seed", "prefill",
"tokens"}``; a ``StreamResponse`` event is ``{"index", "token", "generated_text", "details"}``,
the last one carrying the text and, when asked, ``{"finish_reason", "generated_tokens", "seed",
"input_length"}``. ``POST /`` (``compat_generate``) streams when the body says ``"stream":
true`` and otherwise answers ``[GenerateResponse]``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

from gpubench_sdk import json_or_text
from gpubench_sdk.testing import Job, JobStatus, SimulatedFleet, follow

REVISION = "0123456789abcdef0123456789abcdef01234567"  # the emulated model's commit

_POSITIVE = (lambda value: value > 0, "must be strictly positive")
# What TGI accepts of each number it validates, and its words when refused, in its order
_RULES: dict[str, tuple[Callable[[float], bool], str]] = {
    "temperature": _POSITIVE,
    "repetition_penalty": _POSITIVE,
    "top_p": (lambda value: 0 < value < 1, "must be > 0.0 and < 1.0"),
    "top_k": _POSITIVE,
    "max_new_tokens": _POSITIVE,
}


def validation_error(parameters: Any) -> str | None:
    """TGI's 422 ``validation`` message for parameters it refuses, else ``None`` (the rules
    and wording of text-generation-inference ``router/src/validation.rs``)."""
    if not isinstance(parameters, dict):
        return None if parameters is None else "`parameters` must be an object"
    for name, (accepted, refused) in _RULES.items():
        value = parameters.get(name)
        if isinstance(value, int | float) and not accepted(float(value)):
            return f"`{name}` {refused}"
    return None


def failure(job: Job) -> str:
    """What a generation that did not complete says: its error, else how it ended."""
    return job.error or f"request {job.status.value}"


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
        decoded = json_or_text(inputs) if isinstance(inputs, str) else inputs
        payload = dict(decoded) if isinstance(decoded, dict) else {"prompt": inputs}
        tokens = parameters.get("max_new_tokens") if isinstance(parameters, dict) else None
        if isinstance(tokens, int) and tokens > 0:
            payload.setdefault("chunks", tokens)
            payload.setdefault("sleep_ms", tokens * self.time_per_token_ms)
        return payload

    @staticmethod
    def _token(index: int) -> dict[str, Any]:
        return {"id": 100 + index, "text": f" tok{index}", "logprob": -0.1, "special": False}

    def generated_text(self, job: Job) -> str:
        if job.stream:
            return "".join(self._token(i)["text"] for i in range(len(job.stream)))
        output = job.output
        return output if isinstance(output, str) else json.dumps(output)

    @staticmethod
    def _details(generated: int) -> dict[str, Any]:
        """What a ``GenerateResponse``'s and a last ``StreamResponse``'s ``details`` share."""
        return {"finish_reason": "length", "generated_tokens": max(1, generated), "seed": None}

    def generate_output(self, job: Job, details: bool) -> dict[str, Any]:
        answer: dict[str, Any] = {"generated_text": self.generated_text(job)}
        if details:
            tokens = [self._token(i) for i in range(len(job.stream))]
            answer["details"] = {**self._details(len(tokens)), "prefill": [], "tokens": tokens}
        return answer

    def _boot_end_s(self, job: Job) -> float | None:
        bills = self.fleet.billing.workers
        return next((bill.boot_end_s for bill in bills if bill.worker_id == job.worker_id), None)

    def headers(self, job: Job) -> dict[str, str]:
        """TGI's timing headers (whole ms, as ``as_millis`` writes them). TGI sees a request
        only once a replica is up: time the proxy held it is in none of them."""
        assert job.started_s is not None and job.finished_s is not None
        boot_end_s = self._boot_end_s(job)
        seen_s = max(job.submitted_s, boot_end_s or job.submitted_s)
        total_ms = (job.finished_s - seen_s) * 1e3
        inference_ms = (job.finished_s - job.started_s) * 1e3
        generated = max(1, len(job.stream))
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
            "x-prompt-tokens": str(self.prompt_tokens(job)),
            "x-generated-tokens": str(generated),
        }

    @staticmethod
    def prompt_tokens(job: Job) -> int:
        prompt = job.input.get("prompt")
        return len(prompt.split()) if isinstance(prompt, str) else 1

    async def stream_events(self, job: Job, details: bool) -> AsyncIterator[dict[str, Any]]:
        """One event per token as the fleet produces it; the last token's event carries
        ``generated_text`` (and ``details`` when asked), held back until the job ends, as TGI
        does. A failed generation ends with TGI's ``{"error", "error_type"}`` event."""
        sent = 0
        pending: dict[str, Any] | None = None
        async for _ in follow(job, 0.002):
            if pending is not None:
                yield pending
            token = self._token(sent)
            pending = {"index": sent, "token": token, "generated_text": None, "details": None}
            sent += 1
        if job.status is not JobStatus.COMPLETED:
            yield {"error": failure(job), "error_type": "generation"}
            return
        if pending is None:  # nothing generated: only the end-of-sequence token
            token = {"id": 2, "text": "</s>", "logprob": -0.1, "special": True}
            pending = {"index": 0, "token": token, "generated_text": None, "details": None}
        final = {**pending, "generated_text": self.generated_text(job)}
        if details:
            final["details"] = {**self._details(sent), "input_length": self.prompt_tokens(job)}
        yield final
