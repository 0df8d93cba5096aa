"""Prefix caching: the emulator's vLLM-style block cache (the kit's ``PrefixCache``, whose own
rules tests/test_testing_prefix_cache.py checks), what the official client reads of
its ``usage``, the plugin's stored ``cached_tokens``, and the shared-prefix example run
through the CLI, where the prefixed requests' TTFT stays near the short prompts' TTFT."""

from __future__ import annotations

import math
import time
from pathlib import Path

import httpx
import openai
import pytest
from gpubench_openai.emulator import make_app

from gpubench_sdk import metrics
from gpubench_sdk.testing import CliEndToEnd, PrefixCache, quick_fleet, serve

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "shared_prefix_emulated.toml"
KEY = "sk-prefix-cache-7d2e4b"
MODEL = "m"


def words(n: int, start: int = 0) -> list[str]:
    return [f"w{i}" for i in range(start, start + n)]


def chat(url: str, content: str) -> dict[str, object]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": 2}
    headers = {"Authorization": f"Bearer {KEY}"}
    response = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    assert isinstance(usage, dict)
    return usage


def test_the_emulator_prefills_only_what_is_not_cached_and_says_so() -> None:
    fleet = quick_fleet(0.0, max_workers=1, idle_timeout_s=0.3)
    app = make_app(fleet, api_key=KEY, model=MODEL, prefix_cache=PrefixCache())
    prefix = " ".join(words(640))
    with serve(app) as served:
        chat(served.url, "warm the worker")
        timings = []
        for question in ("first question", "second question"):
            started = time.perf_counter()
            usage = chat(served.url, f"{prefix} {question}")
            timings.append(time.perf_counter() - started)
            assert usage["prompt_tokens"] == 642
        # the second prompt reused the prefix's 40 blocks; vLLM's 0.2 ms a token for the rest
        assert usage["prompt_tokens_details"] == {"cached_tokens": 640}
        assert timings[0] - timings[1] > 0.05  # 640 tokens' prefill (0.128 s) not done again
        # once the fleet scaled to zero, the new replica has no cache
        deadline = time.monotonic() + 5
        while fleet.counts().workers and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fleet.counts().workers == 0
        assert chat(served.url, f"{prefix} third")["prompt_tokens_details"] == {"cached_tokens": 0}


def test_the_official_client_reads_the_cached_tokens() -> None:
    app = make_app(quick_fleet(0.0), api_key=KEY, model=MODEL, prefix_cache=PrefixCache())
    with serve(app) as served:
        url = f"{served.url}/v1"
        client = openai.OpenAI(base_url=url, api_key=KEY, _strict_response_validation=True)
        prompt = " ".join(words(40))
        for expected in (0, 32):
            stream = client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": prompt}],
                max_tokens=2,
                stream=True,
                stream_options={"include_usage": True},
            )
            (usage,) = [chunk.usage for chunk in stream if chunk.usage]  # one usage chunk
            assert usage.prompt_tokens_details is not None
            assert usage.prompt_tokens_details.cached_tokens == expected


@pytest.mark.slow
def test_the_shared_prefix_example_shows_the_cache_at_work(tmp_path: Path) -> None:
    e2e = CliEndToEnd(tmp_path)
    e2e.env["OPENAI_API_KEY"] = KEY
    try:
        url = e2e.emulator(
            "gpubench_openai.emulator", "--api-key-env", "OPENAI_API_KEY", "--prefix-cache",
            "--prefill-ms-per-token", "1", "--tokens-per-s", "500", "--max-workers", "2",
        )  # fmt: skip
        done = e2e.run(EXAMPLE, replace={"http://127.0.0.1:8000/v1": url}, args=("--quiet",))
        invs = done.measured(secret=KEY)
    finally:
        e2e.close()
    prefixed = [i for i in invs if i.detail and i.detail["shared_prefix"]]
    assert 10 <= len(prefixed) <= 30  # half of 40, drawn per request
    cached = [i.detail["cached_tokens"] for i in prefixed if i.detail]
    # the first prefixed request computed the prefix (a warm-up one may have done it first)
    assert set(cached) <= {0, 1024} and cached.count(1024) >= len(cached) - 1
    groups = {g.key: g for g in metrics.by_shared_prefix(invs)}
    without, with_ = groups[0], groups[1]
    assert math.isnan(without.cached_share) or without.cached_share == 0
    assert with_.cached_share > 0.85
    # uncached, each prefixed request would wait 1,024 ms more for its first token
    assert with_.ttft_p50_ms - without.ttft_p50_ms < 500
    assert "of the prefixed prompts' tokens were cached" in done.stdout
