"""A prompt prefix cache as LLM servers keep one, for emulators of them: what a request's
prompt finds already computed, so that an emulator prefills only the rest.

Sources (read 2026-12): vLLM docs, "Automatic Prefix Caching" (design/prefix_caching.md):
the KV cache is kept in blocks (``--block-size``, 16 tokens by default on GPUs), a block is
identified by the hash of its parent block's hash and its own tokens, only full blocks are
cached, unused blocks are evicted least recently used first, and "when all tokens hit the
cache, we must recompute the last token to obtain logits". vLLM reports the reused count as
``usage.prompt_tokens_details.cached_tokens`` (``--enable-prompt-tokens-details``), the field
OpenAI's API uses for its own prompt caching (API reference, the chat completion object).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class PrefixCache:
    """vLLM's automatic prefix caching over an emulator's tokens (any sequence of hashable
    tokens: an emulator's prompt words). One cache is one replica's: clear it when the
    emulated replica goes away."""

    def __init__(self, block_tokens: int = 16, capacity_blocks: int = 65_536) -> None:
        if block_tokens < 1 or capacity_blocks < 1:
            raise ValueError("block_tokens and capacity_blocks must be at least 1")
        self.block_tokens, self.capacity_blocks = block_tokens, capacity_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()  # block hash, least recent first

    def reuse(self, tokens: Sequence[str]) -> int:
        """How many leading ``tokens`` are served from the cache; this prompt's full blocks
        are cached (or refreshed) for the requests after it."""
        size, hits, parent, hitting = self.block_tokens, 0, 0, True
        for start in range(0, len(tokens) - size + 1, size):
            parent = hash((parent, tuple(tokens[start : start + size])))
            # a hit needs every block before it to hit too, and leaves the last token to compute
            hitting = hitting and parent in self._blocks and start + size < len(tokens)
            if hitting:
                hits = start + size
            self._blocks[parent] = None
            self._blocks.move_to_end(parent)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
        return hits

    def clear(self) -> None:
        self._blocks.clear()
