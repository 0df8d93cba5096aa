"""RunPod Serverless queue-endpoint protocol: names shared by the provider and its emulator.

Sources (read 2026-11): job operations and states
https://docs.runpod.io/serverless/endpoints/operation-reference and
https://docs.runpod.io/serverless/endpoints/job-states (``delayTime``/``executionTime`` in ms,
``delayTime`` includes the cold start); REST control plane ``PATCH /v1/endpoints/{id}`` with
``workersMin``, ``workersMax``, ``idleTimeout`` (seconds) https://docs.runpod.io/api;
the repository's ``PROVIDERS.md`` summarises both.
"""

from __future__ import annotations

from typing import Final

API_URL: Final = "https://api.runpod.ai/v2"
REST_URL: Final = "https://rest.runpod.io/v1"

IN_QUEUE: Final = "IN_QUEUE"
IN_PROGRESS: Final = "IN_PROGRESS"
RUNNING: Final = "RUNNING"  # listed by some docs pages as a synonym of IN_PROGRESS
COMPLETED: Final = "COMPLETED"
FAILED: Final = "FAILED"
CANCELLED: Final = "CANCELLED"
TIMED_OUT: Final = "TIMED_OUT"
PENDING_STATES: Final = frozenset({IN_QUEUE, IN_PROGRESS, RUNNING})
TERMINAL_STATES: Final = frozenset({COMPLETED, FAILED, CANCELLED, TIMED_OUT})
STATES: Final = PENDING_STATES | TERMINAL_STATES

# /runsync holds the request at most this long by default, then answers with a job still
# IN_QUEUE/IN_PROGRESS that must be polled; ``?wait=`` moves it within these bounds (ms).
RUNSYNC_DEFAULT_WAIT_MS: Final = 90_000
RUNSYNC_MIN_WAIT_MS: Final = 1_000
RUNSYNC_MAX_WAIT_MS: Final = 300_000

DEFAULT_IDLE_TIMEOUT_S: Final = 5  # RunPod's default idleTimeout

# Requests per 10 s per endpoint, by operation (the docs' rate-limit table; RunPod also answers
# 429 when the queue is very deep). No rate-limit headers are documented.
RATE_LIMIT_WINDOW_S: Final = 10.0
RATE_LIMITS_PER_WINDOW: Final = {"run": 1000, "runsync": 2000, "status": 2000, "stream": 2000}
