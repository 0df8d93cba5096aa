"""Plans (TOML) whose one target, "loc", is the demo echo handler on the embedded local runtime."""

from __future__ import annotations

LOCAL_ECHO = """[[targets]]
name = "loc"
provider = "local"
handler = "gpubench_sdk.demo:echo"
load = ""
"""


def local_plan(head: str, target: str, scenarios: str) -> str:
    """``head`` (``[run]``, ``[workload]``...), then the target "loc" with ``target``'s keys after
    its own, then ``scenarios``, each part apart from the next by a blank line."""
    return f"{head}\n{LOCAL_ECHO}{target}\n{scenarios}"


def local_target(**keys: object) -> dict[str, object]:
    """The target "loc" of ``LOCAL_ECHO`` as a parsed plan's dict, with ``keys`` added."""
    return {
        "name": "loc",
        "provider": "local",
        "handler": "gpubench_sdk.demo:echo",
        "load": "",
        **keys,
    }
