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


def emulated_runpod(
    name: str, url: str, key_env: str, price_per_s_usd: float, **keys: object
) -> dict[str, object]:
    """A RunPod target against the RunPod emulator served at ``url`` (its key in ``key_env``),
    billed per millisecond of worker time ("local" billing) at ``price_per_s_usd``; ``keys``
    add to or replace the rest (a cold start from 150 ms, polled every 10 ms)."""
    return {
        "name": name,
        "provider": "runpod",
        "endpoint_id": "emulated-endpoint",
        "api_key_env": key_env,
        "base_url": f"{url}/v2",
        "rest_url": f"{url}/v1",
        "cold_threshold_ms": 150,
        "poll_interval_s": 0.01,
        "billing": "local",
        "price_per_s_usd": price_per_s_usd,
        **keys,
    }
