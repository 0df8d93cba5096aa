"""The plugin kit's pieces for a cloud SDK's control plane (``_contract._cloud``): its
exceptions as gpubench's errors (``sdk_error``, ``sdk_errors``) and the user's settings put
back once (``SavedSettings``)."""

from __future__ import annotations

import pytest

from gpubench_sdk import (
    ClientHTTPError,
    ConfigError,
    RequestTimeoutError,
    SavedSettings,
    ServerHTTPError,
    ThrottledError,
    TransportError,
    remember,
    sdk_error,
    sdk_errors,
)

pytestmark = pytest.mark.anyio


class SDKError(Exception):
    """What a cloud SDK raises: its own class, perhaps with a credential in the text."""


def test_sdk_error_maps_a_status_to_the_error_it_stands_for() -> None:
    cases = {429: ThrottledError, 503: ServerHTTPError, 404: ClientHTTPError}
    for status, kind in cases.items():
        error = sdk_error(SDKError("no"), provider="p", service="Admin API", status=status)
        assert type(error) is kind and error.status_code == status and error.provider == "p"
        assert "Admin API: SDKError: no" in str(error)


def test_sdk_error_without_a_status_is_a_timeout_or_a_transport_failure() -> None:
    timed_out = sdk_error(TimeoutError("slow"), provider="p", service="S", timed_out=True)
    assert type(timed_out) is RequestTimeoutError and timed_out.status_code is None
    broken = sdk_error(SDKError("reset"), provider="p", service="S")
    assert type(broken) is TransportError


def test_sdk_error_adds_the_hint_and_masks_secrets() -> None:
    remember("sdk-secret-5f1c0a9e")
    error = sdk_error(
        SDKError("token sdk-secret-5f1c0a9e refused"),
        provider="p",
        service="S",
        status=403,
        hint="the caller needs a role",
    )
    assert "sdk-secret-5f1c0a9e" not in str(error)
    assert str(error).endswith("(the caller needs a role)")


def test_sdk_errors_maps_the_sdks_exceptions_and_passes_gpubenchs_own() -> None:
    def mapped(exc: Exception) -> TransportError:
        return TransportError(f"mapped {exc}", provider="p")

    with pytest.raises(TransportError, match="mapped boom") as info, sdk_errors(mapped):
        raise SDKError("boom")
    assert isinstance(info.value.__cause__, SDKError)
    own = ThrottledError("throttled", provider="p")
    with pytest.raises(ThrottledError) as raised, sdk_errors(mapped):
        raise own
    assert raised.value is own
    with pytest.raises(ConfigError), sdk_errors(mapped):
        raise ConfigError("region", None, "a region")


async def test_saved_settings_keep_the_first_value_and_restore_it_once() -> None:
    written: list[int] = []

    async def write(copies: int) -> None:
        written.append(copies)

    saved = SavedSettings(write)
    await saved.restore()  # nothing kept: nothing written
    saved.keep(3)
    saved.keep(0)  # a later change: the user's value stays the first
    assert saved.value == 3
    await saved.restore()
    await saved.restore()
    assert written == [3] and saved.value is None
