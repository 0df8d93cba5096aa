"""A Cog predictor for examples/cog_own_server.py: setup() stands for loading weights (1 s),
predict() for the model (it sleeps the request's ``sleep_ms``). It takes the keys gpubench's
``probe`` workload sends (``echo``, ``sleep_ms``) and answers ``{"echo": echo}``."""

import time

from cog import BasePredictor


class Predictor(BasePredictor):
    def setup(self) -> None:
        time.sleep(1.0)

    def predict(self, echo: str = "", sleep_ms: float = 0.0) -> dict[str, str]:
        time.sleep(sleep_ms / 1000)
        return {"echo": echo}
