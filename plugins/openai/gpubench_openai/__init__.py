"""gpubench provider plugin for OpenAI-compatible servers (vLLM, TGI, SGLang, hosted APIs)."""

from gpubench_sdk import SSEParser  # the core's; named here too, where it was first

from ._provider import OpenAIOptions, OpenAIProvider

__all__ = ["OpenAIOptions", "OpenAIProvider", "SSEParser"]
