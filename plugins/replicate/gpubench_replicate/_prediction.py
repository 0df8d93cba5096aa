"""The prediction object shared by Replicate's API and Cog containers, and the HTTP plumbing
both providers use to send, parse and map errors.

Sources (read 2026-11): Replicate's HTTP API reference https://replicate.com/docs/reference/http
(prediction fields ``id, model, version, input, output, logs, error, status, created_at,
started_at, completed_at, metrics{predict_time}, urls{get, cancel, stream}``; ``predict_time``
and ``total_time`` in **seconds**; statuses starting, processing, succeeded, failed, canceled and,
since the 2025-10-16 changelog https://replicate.com/changelog/2025-10-16-prediction-deadlines,
``aborted`` when a ``Cancel-After`` deadline passes before the prediction started); Cog's
``python/cog/schema.py`` (``Status``: starting, processing, succeeded, canceled, failed;
``PredictionResponse`` with the same timestamps and ``metrics``) in github.com/replicate/cog.
"""

from __future__ import annotations

from typing import Any, Final

import httpx

import gpubench_sdk as sdk

STARTING: Final = "starting"
PROCESSING: Final = "processing"
SUCCEEDED: Final = "succeeded"
FAILED: Final = "failed"
CANCELED: Final = "canceled"
ABORTED: Final = "aborted"
PENDING_STATES: Final = frozenset({STARTING, PROCESSING})
TERMINAL_STATES: Final = frozenset({SUCCEEDED, FAILED, CANCELED, ABORTED})


def phases_ms(prediction: dict[str, Any]) -> tuple[float | None, float | None]:
    """``(queue_ms, execution_ms)`` of a finished prediction.

    Queue is ``started_at - created_at`` (waiting for an instance, including its setup on a cold
    start); execution is ``metrics.predict_time`` (seconds, converted). Where ``started_at`` is
    missing, ``metrics.total_time - predict_time`` gives the queue instead.
    """
    metrics = prediction.get("metrics")
    metrics = metrics if isinstance(metrics, dict) else {}
    predict_s = sdk.finite_number(metrics.get("predict_time"))
    execution_ms = None if predict_s is None else predict_s * 1e3
    created = sdk.iso_seconds(prediction.get("created_at"))
    queue_ms = sdk.span_ms(created, sdk.iso_seconds(prediction.get("started_at")))
    if queue_ms is None:  # total_time - predict_time: the same gap, as the server timed it
        queue_ms = sdk.span_ms(predict_s, sdk.finite_number(metrics.get("total_time")))
    return queue_ms, execution_ms


class PredictionProvider(sdk.Provider):
    """What the Replicate and Cog providers share: sending, error mapping, parsing a
    prediction, and turning a terminal prediction into a ``Result`` or the right
    ``ProviderError`` (``gpubench_sdk.run_job`` polls, retries and cancels)."""

    # HTTP statuses that mean "busy, come back later" besides 429 (Cog answers 409).
    _busy_statuses: frozenset[int] = frozenset()

    async def open(self) -> None:
        self._send = sdk.Sender.of(self, self._http_error)

    def _http_error(self, response: httpx.Response) -> sdk.ProviderError:
        """The core's error for a status >= 400, its body read (as_provider_error: the call
        named, a 429's ``Retry-After`` in seconds or as an HTTP date), showing Replicate's
        problem ``detail`` or Cog's ``error``; a busy status (Cog's 409) is throttling too."""
        error = sdk.status_error(
            response, provider=self.name, detail=sdk.error_text(response, "detail", "error")
        )
        if response.status_code not in self._busy_statuses:
            return error
        return sdk.reclassified(
            error, sdk.ThrottledError, retry_after_s=sdk.retry_after_s(response)
        )

    def _prediction(self, response: httpx.Response) -> dict[str, Any]:
        prediction = sdk.json_object(response, provider=self.name)
        status = prediction.get("status")
        if not isinstance(prediction.get("id"), str) or status not in (
            TERMINAL_STATES | PENDING_STATES
        ):
            problem = f"not a prediction: status {status!r}"
            raise sdk.invalid_response(response, problem, provider=self.name)
        return prediction

    def _check_outcome(self, prediction: dict[str, Any], deadline_passed: bool) -> None:
        """Raise the taxonomy's error for a prediction that did not succeed."""
        status = prediction["status"]
        kw: dict[str, Any] = {"provider": self.name, "request_id": prediction["id"]}
        if status == FAILED:
            raise sdk.ServerHTTPError(
                sdk.redact(f"prediction failed: {prediction.get('error')}"), **kw
            )
        if status == ABORTED:  # Cancel-After passed while it was still waiting for an instance
            raise sdk.ColdTimeoutError(
                "prediction aborted: deadline passed before it started", **kw
            )
        if status == CANCELED:
            if deadline_passed:
                raise sdk.RequestTimeoutError(
                    "prediction canceled at its Cancel-After deadline", **kw
                )
            raise sdk.JobCancelledError("prediction canceled by someone else", **kw)
