"""The plugin guide's complete example passes the conformance kit exactly as printed.

The first python block of docs/plugins.md is taken verbatim from the page and run as a module;
the kit then drives it against the toy protocol's emulator (``tests/conformance_toy``), which
answers ``POST /invoke`` with ``{"id", "output", ...}`` like the guide's endpoint.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

from gpubench_sdk import Provider
from gpubench_sdk.testing import ASGIApp, ProviderConformance, SimulatedFleet

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent / "conformance_toy"))

from toy import toy_emulator  # noqa: E402


def guide_example() -> str:
    """The guide's first python block: the complete plugin."""
    page = (ROOT / "docs" / "plugins.md").read_text()
    block = re.search(r"^```python\n(.*?)^```", page, re.M | re.S)
    assert block is not None, "docs/plugins.md lost its complete example"
    return block.group(1)


def guide_provider() -> type[Provider]:
    module = types.ModuleType("gpubench_guide_example")
    sys.modules[module.__name__] = module  # pydantic resolves the options' annotations here
    exec(compile(guide_example(), "docs/plugins.md", "exec"), module.__dict__)
    provider: type[Provider] = module.MyProvider
    return provider


class TestGuideExample(ProviderConformance):
    provider_class = guide_provider()
    cancels_remote_jobs = False  # the toy protocol is synchronous: no job to cancel

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return toy_emulator(fleet, self.api_key)

    def options(self, url: str) -> dict[str, Any]:
        return {"url": f"{url}/invoke"}


def test_the_example_uses_public_names_only() -> None:
    imports = re.findall(r"^(?:from|import) (\S+)", guide_example(), re.M)
    assert imports and all(not part.startswith("_") for m in imports for part in m.split("."))
