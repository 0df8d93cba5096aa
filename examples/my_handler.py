"""A model handler of your own, as the local runtime loads it: `load()` once per worker,
`predict(payload, model)` per request. Replace the body with your model's real load and call."""

from __future__ import annotations

import time
from typing import Any

import numpy as np


def load() -> dict[str, Any]:
    """Runs once per worker process: the part of a cold start your code owns."""
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((768, 768), dtype=np.float32)
    for _ in range(20):  # stand-in for reading and preparing weights
        weights = np.tanh(weights @ weights.T / 768)
    return {"weights": weights, "loaded_at": time.time()}


def predict(payload: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    x = np.full(768, len(str(payload.get("echo", ""))), dtype=np.float32)
    score = float(np.tanh(model["weights"] @ x).sum())
    time.sleep(payload.get("sleep_ms", 0) / 1000)
    return {"echo": payload.get("echo"), "score": score}
