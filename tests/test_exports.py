"""The public surface is exactly what ``__all__`` says, and nothing private leaks into it."""

from __future__ import annotations

import types

import gpubench_sdk


def test_all_matches_public_names() -> None:
    public = {n for n in dir(gpubench_sdk) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(gpubench_sdk, n)).__name__ == "module"}
    assert set(gpubench_sdk.__all__) - {"__version__"} == public - modules
    for name in gpubench_sdk.__all__:
        obj = getattr(gpubench_sdk, name)
        if isinstance(obj, type | types.FunctionType):
            assert obj.__module__.startswith("gpubench_sdk"), name


def test_error_tree_is_rooted() -> None:
    errors = [getattr(gpubench_sdk, n) for n in gpubench_sdk.__all__ if n.endswith("Error")]
    assert all(issubclass(e, gpubench_sdk.GpubenchError) for e in errors)
    assert issubclass(gpubench_sdk.ThrottledError, gpubench_sdk.ProviderError)
    assert issubclass(gpubench_sdk.ServerHTTPError, gpubench_sdk.HTTPStatusError)


def test_registry_plumbing_is_private_with_a_warning() -> None:
    import pytest

    from gpubench_sdk import _plugins

    for name in ("provider_class", "workload_class"):
        assert name not in gpubench_sdk.__all__ and name not in dir(gpubench_sdk)
        with pytest.warns(DeprecationWarning, match=f"gpubench_sdk.{name} is private"):
            alias = getattr(gpubench_sdk, name)
        assert alias is getattr(_plugins, name)
    with pytest.raises(AttributeError):
        gpubench_sdk.no_such_name  # noqa: B018


def test_load_workload_validates_like_a_plan() -> None:
    import pytest

    probe = gpubench_sdk.load_workload("probe")
    assert isinstance(probe, gpubench_sdk.EchoProbe)
    with pytest.raises(gpubench_sdk.ConfigError, match="workload"):
        gpubench_sdk.load_workload("probe", no_such_option=1)
