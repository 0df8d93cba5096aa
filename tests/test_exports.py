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
