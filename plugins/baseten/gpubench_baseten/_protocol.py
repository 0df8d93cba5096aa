"""Baseten's inference and management protocol: names shared by the provider and its emulator.

Sources (read 2026-12-01), checked against the official ``baseten`` SDK 0.13.1
(``baseten/client/inferenceapi/_client.py`` and ``managementapi/_client.py``, generated from
Baseten's OpenAPI description, with the success codes it expects):

- Inference host ``https://model-{model_id}.api.baseten.co``: ``POST
  /environments/{env}/predict`` (200, or a streamed body when the model streams), ``POST
  /deployment/{id}/predict``; ``POST .../async_predict`` (201, ``{"request_id"}``; body
  ``model_input``, ``webhook_endpoint``, ``priority`` 0-2, ``max_time_in_queue_seconds``
  10-259200); ``GET /async_request/{id}`` (status ``QUEUED``, ``IN_PROGRESS``, ``SUCCEEDED``,
  ``FAILED``, ``EXPIRED``, ``CANCELED``, ``WEBHOOK_FAILED``, with ``created_at``/``status_at``);
  ``DELETE /async_request/{id}`` (``{"request_id", "canceled", "message"}``: a queued request
  only); ``GET .../async_queue_status`` (``num_queued_requests``, ``num_in_progress_requests``).
  https://docs.baseten.co/api-reference/production-async-predict and
  https://docs.baseten.co/api-reference/get-async-request-status. Baseten does not store async
  outputs: they go to the webhook, or the model saves them.
- Rate limits: ``/async_predict`` 200/s, async status 20/s, both answering 429 (same pages).
- Management host ``https://api.baseten.co``: ``GET /v1/models/{id}/deployments/{dep}``
  (``status`` e.g. ``SCALED_TO_ZERO``/``WAKING_UP``/``ACTIVE``, ``active_replica_count``,
  ``autoscaling_settings``) and ``PATCH .../autoscaling_settings`` (``min_replica``,
  ``max_replica``, ``autoscaling_window``, ``scale_down_delay``, ``concurrency_target``,
  ``target_utilization_percentage``; answer ``{"status": ACCEPTED|QUEUED|UNCHANGED,
  "message"}``), ``dep`` also ``production`` or ``development``.
  https://docs.baseten.co/reference/management-api/deployments/autoscaling/updates-a-deployments-autoscaling-settings
- Every predict answer names its request in the ``X-Baseten-Request-Id`` header
  (https://docs.baseten.co/observability/logs).
- Auth ``Authorization: Api-Key <key>``; the API also takes ``Bearer <key>`` (what the SDK
  sends).
- Autoscaling defaults (https://docs.baseten.co/deploy/autoscaling): min 0, max 1, window 60 s
  (10-3600), scale-down delay 900 s (0-3600), concurrency target 1, target utilization 70 %
  (1-100), max scale-down rate 50 % (1-50). Scale-down waits the delay, then removes half the
  excess replicas, waits again, and so on: from several replicas, zero takes several delays.
- Billing (https://docs.baseten.co/observability/usage): per minute for every minute a
  replica is observed as up, model load (cold start) included; not image pull or scheduling.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

API_URL: Final = "https://api.baseten.co"
REQUEST_ID_HEADER: Final = "x-baseten-request-id"


def inference_url(model_id: str) -> str:
    return f"https://model-{model_id}.api.baseten.co"


QUEUED: Final = "QUEUED"
IN_PROGRESS: Final = "IN_PROGRESS"
SUCCEEDED: Final = "SUCCEEDED"
FAILED: Final = "FAILED"
EXPIRED: Final = "EXPIRED"
CANCELED: Final = "CANCELED"
WEBHOOK_FAILED: Final = "WEBHOOK_FAILED"
PENDING_STATES: Final = frozenset({QUEUED, IN_PROGRESS})
TERMINAL_STATES: Final = frozenset({SUCCEEDED, FAILED, EXPIRED, CANCELED, WEBHOOK_FAILED})
STATES: Final = PENDING_STATES | TERMINAL_STATES

# Deployment statuses that mean replicas are coming up rather than serving.
SCALED_TO_ZERO: Final = "SCALED_TO_ZERO"
WAKING_UP: Final = "WAKING_UP"
ACTIVE: Final = "ACTIVE"
STARTING_STATES: Final = frozenset({WAKING_UP, "LOADING_MODEL", "DEPLOYING", "UPDATING"})

DEFAULT_SCALE_DOWN_DELAY_S: Final = 900
MAX_SCALE_DOWN_DELAY_S: Final = 3600
MIN_AUTOSCALING_WINDOW_S: Final = 10
MAX_AUTOSCALING_WINDOW_S: Final = 3600
ASYNC_PREDICT_PER_S: Final = 200
ASYNC_STATUS_PER_S: Final = 20


# The autoscaling fields a PATCH may carry, each an integer (not a bool) within its bounds, from
# the SDK's UpdateAutoscalingSettings and the autoscaling docs; and the documented defaults of
# those the emulator's fleet does not simulate.
class AutoscalingPatch(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    min_replica: int | None = Field(None, ge=0)
    max_replica: int | None = Field(None, ge=1)
    scale_down_delay: int | None = Field(None, ge=0, le=MAX_SCALE_DOWN_DELAY_S)
    autoscaling_window: int | None = Field(
        None, ge=MIN_AUTOSCALING_WINDOW_S, le=MAX_AUTOSCALING_WINDOW_S
    )
    concurrency_target: int | None = Field(None, ge=1)
    target_utilization_percentage: int | None = Field(None, ge=1, le=100)
    target_in_flight_tokens: int | None = Field(None, ge=1)
    max_scale_down_rate: int | None = Field(None, ge=1, le=50)


AUTOSCALING_DEFAULTS: Final = {
    "autoscaling_window": 60,
    "concurrency_target": 1,
    "target_utilization_percentage": 70,
}
