"""A provider's options declared once: ``options: AcmeOptions`` is also its ``Options``.

The classes live at module level, as a plugin's do: a postponed annotation (this module's
``from __future__ import annotations``) is looked up by name in the class's module.
"""

from __future__ import annotations

import pytest

import gpubench_sdk as sdk
from gpubench_sdk import ConfigError, Provider, ProviderOptions, Request, Result


class AcmeOptions(ProviderOptions):
    url: str
    region: str = "eu"


class AcmeProvider(Provider):
    name = "acme"
    options: AcmeOptions

    async def invoke(self, request: Request) -> Result:
        return Result(output=self.options.region)


class DottedProvider(Provider):
    name = "dotted"
    options: sdk.ProviderOptions


class ExplicitProvider(Provider):
    """``Options`` set in the class body wins over the annotation."""

    name = "explicit"
    Options = AcmeOptions
    options: ProviderOptions


class ChildProvider(AcmeProvider):
    """No annotation of its own: the parent's options."""


def test_the_annotation_sets_options_and_validates_a_target() -> None:
    assert AcmeProvider.Options is AcmeOptions
    provider = AcmeProvider(url="http://127.0.0.1:1", region="us")
    assert isinstance(provider.options, AcmeOptions) and provider.options.region == "us"
    entry = {"url": "http://127.0.0.1:1", "regoin": "us"}  # a typo is refused, not ignored
    with pytest.raises(ConfigError, match="did you mean 'region'"):
        sdk.validate_options(AcmeProvider.Options, entry, "targets[0]")


def test_a_dotted_name_an_explicit_options_and_a_subclass() -> None:
    assert DottedProvider.Options is ProviderOptions
    assert ExplicitProvider.Options is AcmeOptions
    assert ChildProvider.Options is AcmeOptions


def test_an_annotation_the_module_cannot_resolve_says_the_fix() -> None:
    with pytest.raises(TypeError, match=r"options: Local.*set Options = <that class>"):

        class Local(ProviderOptions):
            pass

        class Inner(Provider):  # Local is not a name in this module
            options: Local


def test_an_annotation_that_is_no_options_class_says_the_fix() -> None:
    with pytest.raises(TypeError, match=r"'options: dict' names no ProviderOptions subclass"):

        class Wrong(Provider):
            options: dict  # type: ignore[assignment,type-arg]
