"""A Cog model for examples/cog_own_server.py, with a schema as a real one declares it: ``prompt``
(required) and ``sleep_ms``, each an ``Input`` with its constraints, and a typed ``Output``.

setup() stands for loading weights (1 s), run() for the model: it sleeps ``sleep_ms`` and
answers ``{"echo": prompt}``. gpubench's ``probe`` workload sends ``echo`` and ``sleep_ms``, so
the benchmark maps ``echo`` onto ``prompt`` (``InputMap(rename={"echo": "prompt"})``); the
answer's ``echo`` is what the probe reads back. Cog 0.23's API: ``BaseRunner`` and ``run()``
(``BasePredictor``/``predict()`` still work there, deprecated).
"""

import time

from cog import BaseModel, BaseRunner, Input


class Output(BaseModel):
    echo: str


class Runner(BaseRunner):
    def setup(self) -> None:
        time.sleep(1.0)

    def run(
        self,
        prompt: str = Input(description="the text the model answers"),
        sleep_ms: float = Input(default=0.0, ge=0.0, description="time the model takes, in ms"),
    ) -> Output:
        time.sleep(sleep_ms / 1000)
        return Output(echo=prompt)
