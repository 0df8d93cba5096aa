"""The demo handlers' old address, kept so plans written with ``gpubench_sdk._local.demo:...``
still run; they live in the public ``gpubench_sdk.demo`` now."""

from ..demo import echo, load, predict

__all__ = ["echo", "load", "predict"]
