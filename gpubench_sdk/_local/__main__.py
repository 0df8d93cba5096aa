"""``python -m gpubench_sdk._local serve-json '<config>'``: the process ``spawn_runtime`` starts.

It prints one line, the URL, to stdout and serves until SIGINT or SIGTERM, or until its stdin
closes (its parent died). The API key, if any, comes from the ``GPUBENCH_LOCAL_API_KEY``
environment variable; the log level from ``GPUBENCH_LOCAL_LOG_LEVEL`` (default WARNING, so that
a benchmark's terminal is not interleaved with a line per worker boot).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys

from pydantic import SecretStr

from ._config import API_KEY_ENV, LocalRuntimeConfig
from ._gateway import serve_async

USAGE = "usage: python -m gpubench_sdk._local serve-json '<LocalRuntimeConfig as JSON>'"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "serve-json":
        print(USAGE, file=sys.stderr)
        return 2
    config = LocalRuntimeConfig.model_validate_json(argv[1])
    # Popped, so that it is not inherited by workers, which run user code.
    key = os.environ.pop(API_KEY_ENV, None)
    if key:
        config = config.model_copy(update={"api_key": SecretStr(key)})
    level = os.environ.get("GPUBENCH_LOCAL_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_async(config, stop_on_stdin_eof=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
