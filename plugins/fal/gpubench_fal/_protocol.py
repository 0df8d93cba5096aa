"""fal's queue and synchronous inference protocol: names shared by the provider and its emulator.

Sources (read 2026-12-01):

- Queue API, https://docs.fal.ai/model-endpoints/queue: ``POST https://queue.fal.run/{model_id}
  [/{subpath}]`` answers ``request_id``, ``response_url``, ``status_url``, ``cancel_url``;
  ``GET .../requests/{id}/status`` (``?logs=1``), ``GET .../requests/{id}/status/stream``
  (server-sent events until COMPLETED), ``GET .../requests/{id}`` (the result) and ``PUT
  .../requests/{id}/cancel``. The subpath is used to submit, not for status or result.
- Stream request status, https://fal.ai/docs/inference-api/queue/status-stream: each event's
  ``data:`` is a status object; the server closes the stream after COMPLETED and sends a comment
  line every 15 s meanwhile.
- Statuses as the official client parses them (``fal_client`` 1.0.3, ``client.py``
  ``_BaseRequestHandle._parse_status``): ``IN_QUEUE`` with ``queue_position``, ``IN_PROGRESS``
  with ``logs``, ``COMPLETED`` with ``logs``, optional ``metrics`` (``inference_time``, seconds)
  and, for a failed request, ``error`` and ``error_type``. Any other status is an error there.
- Status answers 202 while the request is queued or in progress, 200 once COMPLETED; the submit
  answer is an ``IN_QUEUE`` status (https://fal.ai/docs/api-reference/inference-api). Cancel
  answers ``status`` ``OK`` (removed from the queue), ``CANCELLATION_REQUESTED`` (the runner
  is told to stop), ``ALREADY_COMPLETED`` or ``NOT_FOUND``
  (https://fal.ai/docs/inference-api/queue/cancel).
- Auth ``Authorization: Key <key>`` (same page; ``fal_client.auth.AuthCredentials``).
- The synchronous route ``POST https://fal.run/{model_id}`` holds the request until the result;
  ``.../stream`` answers server-sent events (``fal_client`` ``SyncClient.run``/``stream``).
  Dropping a direct connection cancels the request
  (https://docs.fal.ai/documentation/development/handle-cancellations).
"""

from __future__ import annotations

from typing import Final

QUEUE_URL: Final = "https://queue.fal.run"
RUN_URL: Final = "https://fal.run"

IN_QUEUE: Final = "IN_QUEUE"
IN_PROGRESS: Final = "IN_PROGRESS"
COMPLETED: Final = "COMPLETED"
STATUSES: Final = frozenset({IN_QUEUE, IN_PROGRESS, COMPLETED})

# App ids with a namespace prefix have three fixed segments (fal_client.client.APP_NAMESPACES).
NAMESPACES: Final = frozenset({"workflows", "comfy"})

# Response headers: the request id on direct calls, a client-side timeout for the start of
# processing (fal_client._headers: X-Fal-Request-Timeout, more than 1 s).
REQUEST_ID_HEADER: Final = "x-fal-request-id"
REQUEST_TIMEOUT_HEADER: Final = "X-Fal-Request-Timeout"
# On a 504, this header says the timeout was the caller's (fal_client does not retry those).
REQUEST_TIMEOUT_TYPE_HEADER: Final = "X-Fal-Request-Timeout-Type"
MIN_REQUEST_TIMEOUT_S: Final = 1.0

# error_type values the emulator sends on a COMPLETED status that failed. fal documents
# ``error_type`` without a closed list; the provider only looks for these words in it.
ERROR_TIMEOUT: Final = "request_timeout"
ERROR_CANCELLED: Final = "request_cancelled"
ERROR_RUNNER: Final = "runner_error"

# Serverless billing (https://docs.fal.ai/documentation/serverless/pricing, read 2026-12-01):
# per second by machine type while a runner is in SETUP, IDLE (keep_alive included), RUNNING,
# DRAINING or TERMINATING; not PENDING, DOCKER_PULL, nor requests answered with a 5xx.
# keep_alive default 60 s (https://docs.fal.ai/documentation/serverless/optimizations/
# optimizing-costs, read 2026-12-01; PROVIDERS.md's older note says 10 s). The provider
# declares the catalog's copy of these rules (gpubench_sdk/cost/data/prices.json).


def app_base(app_id: str) -> str:
    """``owner/alias`` (or ``namespace/owner/alias``): an app id without its subpath, the
    part that status, result and cancel URLs use."""
    parts = app_id.strip("/").split("/")
    keep = 3 if parts[0] in NAMESPACES else 2
    return "/".join(parts[:keep])


def request_urls(requests_url: str, request_id: str) -> dict[str, str]:
    """A queued request's documented ``response_url``, ``status_url`` and ``cancel_url``, under
    ``requests_url`` (``.../{owner}/{alias}/requests``)."""
    own = f"{requests_url}/{request_id}"
    return {"response_url": own, "status_url": f"{own}/status", "cancel_url": f"{own}/cancel"}
