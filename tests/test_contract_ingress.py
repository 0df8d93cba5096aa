"""The plugin kit's ``IngressOptions``: the options of a service invoked by a held POST to
its own URL (Azure Container Apps, Cloud Run)."""

from __future__ import annotations

import httpx
import pytest

from gpubench_sdk import ConfigError, IngressOptions


class ServiceOptions(IngressOptions):
    url: str | None = None


def test_defaults_and_the_invoke_url() -> None:
    options = ServiceOptions()
    assert (options.path, options.request_id_header, options.cold_threshold_ms) == (
        "/",
        "x-request-id",
        None,
    )
    assert options.invoke_url("https://app.example.com/") == httpx.URL("https://app.example.com/")
    routed = ServiceOptions(path="/v1/generate")
    assert routed.invoke_url("https://app.example.com/") == httpx.URL(
        "https://app.example.com/v1/generate"
    )


def test_each_field_is_checked_and_described() -> None:
    with pytest.raises((ValueError, ConfigError)):
        ServiceOptions(path="v1")  # not a path from the root
    with pytest.raises((ValueError, ConfigError)):
        ServiceOptions(cold_threshold_ms=0)
    for name in ("path", "request_id_header", "cold_threshold_ms"):
        assert IngressOptions.model_fields[name].description
