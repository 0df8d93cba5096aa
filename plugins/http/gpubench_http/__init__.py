"""gpubench provider plugin for any JSON endpoint (Modal, Azure Container Apps, Baseten...)."""

from ._provider import HTTPOptions, HTTPProvider, Timing
from ._template import compile_path, compile_template

__all__ = ["HTTPOptions", "HTTPProvider", "Timing", "compile_path", "compile_template"]
