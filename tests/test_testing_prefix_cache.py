"""The testing kit's ``PrefixCache``: vLLM's automatic prefix caching rules (whole blocks,
known by all before them, least recently used evicted, never the last token)."""

from __future__ import annotations

import pytest

from gpubench_sdk.testing import PrefixCache


def words(n: int, start: int = 0) -> list[str]:
    return [f"w{i}" for i in range(start, start + n)]


def test_whole_leading_blocks_are_reused_and_never_the_last_token() -> None:
    cache = PrefixCache(block_tokens=4)
    prompt = words(10)
    assert cache.reuse(prompt) == 0  # nothing computed before
    assert cache.reuse(prompt) == 8  # two full blocks; the rest is not a full block
    assert cache.reuse(words(6) + ["other"] * 6) == 4  # the second block differs at its end
    # a prompt that is all cached blocks recomputes its last token: the last block is redone
    assert cache.reuse(words(8)) == 4
    # a block is known by all before it: the same tokens after another beginning miss
    assert cache.reuse(["x"] * 4 + words(4, 4)) == 0


def test_least_recently_used_blocks_are_evicted_first() -> None:
    cache = PrefixCache(block_tokens=2, capacity_blocks=3)
    a, b = words(5), words(5, 100)
    cache.reuse(a)  # blocks a1, a2
    cache.reuse(b)  # b1, b2: a1 is evicted (capacity 3)
    assert cache.reuse(b) == 4
    assert cache.reuse(a) == 0  # its first block went, so nothing after it can hit
    with pytest.raises(ValueError, match="block_tokens"):
        PrefixCache(block_tokens=0)
