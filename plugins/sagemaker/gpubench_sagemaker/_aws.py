"""boto3 sessions, clients and errors for the SageMaker plugin.

Credentials come from boto3's standard chain (environment, shared config/profile, container
or instance role: https://boto3.amazonaws.com/v1/documentation/api/latest/guide/credentials.html)
unless the target names an access key id and a secret (``api_key_env``). Whatever the source,
the secret and any session token are remembered by ``gpubench_sdk.remember`` so they are
scrubbed from error text, and botocore's DEBUG log lines (which print response bodies, where
a server may echo a credential) pass through the same scrubber.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

import gpubench_sdk as sdk
from gpubench_sdk import telemetry

PROVIDER = "sagemaker"
# Error codes AWS uses for throttling across services (botocore's retry handler lists them:
# botocore/data/_retry.json "throttling" and botocore.retries.standard.ThrottledRetryableChecker)
THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "SlowDown",
        "RequestThrottled",
    }
)
# While an inference component scales out from zero, invocations fail with a ValidationError
# "Inference Component has no capacity to process this request..." (counted by the CloudWatch
# metric NoCapacityInvocationFailures) or ModelNotReadyException:
# https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html
NO_CAPACITY = re.compile(r"no capacity|NoCapacity", re.IGNORECASE)
MODEL_FAILURES = frozenset({"ModelError", "ModelStreamError", "InternalStreamFailure"})
_BOTO_LOGGERS = (
    "botocore.parsers",
    "botocore.endpoint",
    "botocore.auth",
    "botocore.hooks",
    "botocore.httpsession",
    "botocore.retryhandler",
    "botocore.eventstream",
    "urllib3.connectionpool",
)


_SCRUB = sdk.RedactingFilter()  # remembered secrets masked before any handler sees them


def scrub_boto_logs() -> None:
    """Attach the scrubber to the loggers that print requests and response bodies (a logger's
    filters do not apply to its children's records, so each is named)."""
    for name in _BOTO_LOGGERS:
        logger = logging.getLogger(name)
        if _SCRUB not in logger.filters:
            logger.addFilter(_SCRUB)


def make_session(
    *,
    region: str | None,
    profile: str | None,
    access_key_id: str | None,
    secret_access_key: str | None,
) -> Any:
    """A boto3 session whose credentials are resolved now (so a missing one fails the run at
    start with a clear message) and remembered for scrubbing."""
    import boto3
    from botocore.exceptions import BotoCoreError

    scrub_boto_logs()
    kw: dict[str, Any] = {}
    if profile:
        kw["profile_name"] = profile
    if region:
        kw["region_name"] = region
    if access_key_id and secret_access_key:
        kw["aws_access_key_id"] = access_key_id
        kw["aws_secret_access_key"] = secret_access_key
    try:
        session = boto3.Session(**kw)
        credentials = session.get_credentials()
    except BotoCoreError as exc:
        raise sdk.ConfigError("profile", profile, f"an AWS profile boto3 can load ({exc})") from exc
    expected = (
        "AWS credentials from boto3's chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
        "a profile, or a role), or aws_access_key_id with api_key_env"
    )
    frozen = sdk.required(credentials, "credentials", expected).get_frozen_credentials()
    for secret in (frozen.secret_key, frozen.token):
        if secret:
            sdk.remember(secret)
    if session.region_name is None:
        raise sdk.ConfigError("region", None, "an AWS region (region = 'us-east-1' or AWS_REGION)")
    return session


def client_config(max_pool: int, timeout_s: float) -> Any:
    """No retries: a benchmark must see every throttle and failure (botocore would retry
    throttles up to 3 times in 'standard' mode, hiding them in the latency)."""
    from botocore.config import Config

    return Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        max_pool_connections=max_pool,
        connect_timeout=min(timeout_s, 60.0),
        read_timeout=timeout_s,
        tcp_keepalive=True,
    )


def trace_http_calls(client: Any) -> None:
    """An HTTP client span per HTTP call botocore makes (gpubench's own transport opens them
    for httpx only): botocore's ``before-send`` and ``response-received`` events bracket each
    attempt, in the one worker thread that makes it."""
    open_span = threading.local()

    def before_send(request: Any, **_: Any) -> None:
        open_span.value = telemetry.start_http_span(request.method, request.url)

    def response_received(
        response_dict: dict[str, Any] | None = None,
        exception: BaseException | None = None,
        **_: Any,
    ) -> None:
        span, open_span.value = getattr(open_span, "value", None), None
        if span is not None:
            span.finish(status=(response_dict or {}).get("status_code"), error=exception)

    client.meta.events.register("before-send", before_send)
    client.meta.events.register("response-received", response_received)


def error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str((response.get("Error") or {}).get("Code") or "")


def is_scaling_from_zero(exc: BaseException) -> bool:
    """The endpoint has no model copy yet: a cold start in progress, not a failure."""
    code = error_code(exc)
    if code == "ModelNotReadyException":
        return True
    response = getattr(exc, "response", None) or {}
    message = str((response.get("Error") or {}).get("Message") or "")
    return code in ("ValidationError", "ValidationException") and bool(NO_CAPACITY.search(message))


def map_error(exc: BaseException, operation: str) -> sdk.ProviderError | sdk.ConfigError:
    """botocore's errors in gpubench's taxonomy (the sagemaker-runtime error shapes are
    InternalFailure, ServiceUnavailable, ValidationError, ModelError, ModelNotReadyException,
    InternalDependencyException, ModelStreamError, InternalStreamFailure: botocore's
    data/sagemaker-runtime/2017-05-13/service-2.json)."""
    from botocore import exceptions as bexc

    if isinstance(exc, bexc.ClientError):
        response: dict[str, Any] = dict(exc.response)
        meta = response.get("ResponseMetadata") or {}
        status = int(meta.get("HTTPStatusCode") or 0) or None
        code = error_code(exc)
        detail = (response.get("Error") or {}).get("Message") or ""
        message = sdk.redact(f"{operation}: {code or status}: {detail}".rstrip(": "))
        kw: dict[str, Any] = {"provider": PROVIDER, "status_code": status}
        if code in THROTTLING_CODES or (status == 429 and code != "ModelNotReadyException"):
            # botocore's headers; Retry-After in seconds or as an HTTP date (the core's parser)
            wait_s = sdk.retry_after_s((meta.get("HTTPHeaders") or {}).get("retry-after"))
            return sdk.ThrottledError(message, retry_after_s=wait_s, **kw)
        if is_scaling_from_zero(exc):
            return sdk.ColdTimeoutError(message, **kw)
        if code in MODEL_FAILURES or (status is not None and status >= 500):
            # the container failed (ModelError is a 424; the stream errors come mid-answer,
            # under the 200 of the response): the model, not the client
            return sdk.ServerHTTPError(message, **kw)
        return sdk.ClientHTTPError(message, **kw)  # ValidationError, AccessDenied, bad signature
    if isinstance(exc, bexc.NoCredentialsError | bexc.PartialCredentialsError):
        return sdk.ConfigError("credentials", None, "AWS credentials (see the provider page)")
    # no answer: a timeout, or the connection failed (EndpointConnectionError,
    # ConnectionClosedError, ResponseStreamingError: a body cut short, ProtocolError)
    timed_out = isinstance(exc, bexc.ReadTimeoutError | bexc.ConnectTimeoutError | TimeoutError)
    return sdk.sdk_error(exc, provider=PROVIDER, service=operation, timed_out=timed_out)
