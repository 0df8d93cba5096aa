"""gpubench provider plugin for OpenAI-compatible servers (vLLM, TGI, SGLang, hosted APIs)."""

from ._provider import OpenAIOptions, OpenAIProvider
from ._sse import SSEParser

__all__ = ["OpenAIOptions", "OpenAIProvider", "SSEParser"]
