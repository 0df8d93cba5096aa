"""Cold starts as the mixtures they are: modes found by a Gaussian mixture on log times.

Snapshot and cache features (RunPod's FlashBoot, Modal's memory snapshots, weight caches on
the host) make a cold start fast when the host has the snapshot and slow when it does not, so
the cold starts of one target fall in separate modes. A median of such a mixture describes no
real request: ``cold_start_modes`` reports each mode's share and median, with intervals.

Method (``docs/metrics.md``): a Gaussian mixture of 1 to ``max_modes`` components is fitted
to the natural logarithms of the cold-start times by expectation-maximisation (the better of
two deterministic starts, a floor on each spread so a component cannot collapse onto a
few points). The number of modes is the one with the lowest BIC (``-2 log L + p log n``,
p = 3k - 1) among the fits whose every mode holds at least three samples' weight and whose
neighbouring medians differ by a factor of 1.5 or more. A mode's
median is ``exp(mean)`` of its log-normal; intervals are percentile bootstrap intervals over
resamples refitted with the same number of modes, components matched by rank of their medians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._store._store import Store
from ._frame import RunRef, run_cold_starts
from ._stats import as_samples

FloatArray = npt.NDArray[np.float64]
# A component narrower than this (in log units: about 5% of its median) would fit a few close
# values almost exactly and inflate the likelihood, hence win BIC with spurious modes.
_MIN_SIGMA = 0.05
_MIN_PER_MODE = 3  # fewer samples than this per component cannot make a mode
MIN_SAMPLES = 2 * _MIN_PER_MODE  # below this there is one mode, whatever the samples
# Modes whose medians are closer than this factor are one mode with a ragged shape (network
# and client noise split a tight mode in two): a snapshot and a full boot differ by multiples.
MIN_MODE_RATIO = 1.5


@dataclass(frozen=True, slots=True)
class ColdStartMode:
    """One mode: its share of the cold starts and its median (ms), each with an interval."""

    share: float
    share_ci: tuple[float, float]
    median_ms: float
    median_ci_ms: tuple[float, float]
    sigma: float  # spread of its log-normal (log units)

    @property
    def text(self) -> str:
        """``"82% at 1.9 s (1.8-2 s)"``: its share, its median and the median's interval."""
        lo, hi = self.median_ci_ms
        return f"{self.share:.0%} at {_seconds(self.median_ms)} ({_seconds(lo)}-{_seconds(hi)})"


@dataclass(frozen=True, slots=True)
class ColdStartModes:
    """The modes of ``n`` cold starts, fastest first, and the BIC of each number tried."""

    n: int
    modes: tuple[ColdStartMode, ...]
    bic: tuple[float, ...]  # bic[k - 1]: k modes
    confidence: float

    @property
    def text(self) -> str:
        """``"82% at 1.9 s, 18% at 41 s"``, or ``"one mode at 1.9 s"``."""
        if not self.modes:
            return "no cold starts"
        if len(self.modes) == 1:
            return f"one mode at {_seconds(self.modes[0].median_ms)}"
        return ", ".join(f"{m.share:.0%} at {_seconds(m.median_ms)}" for m in self.modes)


def run_cold_start_modes(
    store: Store, run: RunRef, *, target: str, scenario: int | None = None
) -> ColdStartModes:
    """The modes of one target's measured cold starts in a stored run (``cold_starts_of``'s
    cold-start times: latency less the warm inference time)."""
    times = run_cold_starts(store, run, target=target, scenario=scenario).cold_start_ms
    return cold_start_modes(times)


def modes_line(target: str, modes: ColdStartModes) -> str:
    """The console's line: ``runpod: 40 cold starts, 2 modes: 82% at 1.9 s (1.8-2 s), ...``."""
    parts = ", ".join(m.text for m in modes.modes)
    return f"{target}: {modes.n} cold starts, {len(modes.modes)} modes: {parts}"


def _apart(means: FloatArray) -> bool:
    """Whether every two neighbouring modes' medians differ by ``MIN_MODE_RATIO`` or more."""
    return bool(np.all(np.diff(np.sort(means)) >= math.log(MIN_MODE_RATIO)))


def _seconds(ms: float) -> str:
    s = ms / 1e3
    return f"{s:.2g} s" if s < 10 else f"{s:.0f} s"


def cold_start_modes(
    samples_ms: npt.ArrayLike,
    *,
    max_modes: int = 3,
    resamples: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> ColdStartModes:
    """The modes of cold-start times ``samples_ms`` (NaN ignored, values > 0), fastest first.

    Up to ``max_modes`` are tried, never more than the samples can hold (three per mode); with
    fewer than six samples there is one mode. Intervals come from ``resamples`` bootstrap
    refits at ``confidence``, drawn with ``seed``."""
    x = as_samples(samples_ms)
    x = x[x > 0]
    n = x.size
    if not n:
        return ColdStartModes(0, (), (), confidence)
    logs = np.log(x)
    most = max(1, min(max_modes, n // _MIN_PER_MODE))
    fits = [_fit(logs, k) for k in range(1, most + 1)]
    bic = tuple(
        -2 * ll + (3 * k - 1) * math.log(n)
        if k == 1 or (float(w.min()) * n >= _MIN_PER_MODE and _apart(m))
        else math.inf
        for k, (w, m, _, ll) in enumerate(fits, 1)
    )
    k = int(np.argmin(bic)) + 1
    weights, means, sigmas, _ = fits[k - 1]
    order = np.argsort(means)
    rng = np.random.default_rng(seed)
    boot_w, boot_m = [], []
    for _ in range(resamples if k > 1 or n > 1 else 0):
        w, m, _, _ = _fit(rng.choice(logs, size=n, replace=True), k)
        o = np.argsort(m)
        boot_w.append(w[o])
        boot_m.append(m[o])
    lo, hi = (1 - confidence) / 2, 1 - (1 - confidence) / 2
    modes = []
    for rank, j in enumerate(order):
        if boot_w:
            ws = np.array([b[rank] for b in boot_w])
            ms = np.exp(np.array([b[rank] for b in boot_m]))
            share_ci = (float(np.quantile(ws, lo)), float(np.quantile(ws, hi)))
            median_ci = (float(np.quantile(ms, lo)), float(np.quantile(ms, hi)))
        else:
            share_ci, median_ci = (1.0, 1.0), (float(x[0]), float(x[0]))
        modes.append(
            ColdStartMode(
                share=float(weights[j]),
                share_ci=share_ci,
                median_ms=float(math.exp(means[j])),
                median_ci_ms=median_ci,
                sigma=float(sigmas[j]),
            )
        )
    return ColdStartModes(n, tuple(modes), bic, confidence)


Fit = tuple[FloatArray, FloatArray, FloatArray, float]  # weights, means, sigmas, log L


def _fit(logs: FloatArray, k: int) -> Fit:
    """The better of two deterministic EM starts (EM finds a local optimum): means at evenly
    spaced quantiles, and means of the runs between the k - 1 widest gaps of the sorted data
    (the start that separates well-apart modes at once)."""
    ordered = np.sort(logs)
    starts = [np.quantile(logs, (np.arange(k) + 0.5) / k)]
    if k > 1:
        cuts = np.sort(np.argsort(np.diff(ordered))[-(k - 1) :] + 1)
        starts.append(np.array([run.mean() for run in np.split(ordered, cuts)]))
    return max((_em(logs, means) for means in starts), key=lambda fit: fit[3])


def _em(logs: FloatArray, start: FloatArray, iterations: int = 200) -> Fit:
    """EM for a 1-D Gaussian mixture from ``start`` means, equal weights and spreads."""
    n, k = logs.size, start.size
    spread = max(float(np.std(logs)), _MIN_SIGMA)
    means = np.asarray(start, dtype=np.float64)
    sigmas = np.full(k, spread / k if k > 1 else spread)
    sigmas = np.maximum(sigmas, _MIN_SIGMA)
    weights = np.full(k, 1.0 / k)
    ll = -math.inf
    for _ in range(iterations):
        # E step, in logs for stability: log(w_j N(x | m_j, s_j)) per sample and component
        z = (logs[:, None] - means[None, :]) / sigmas[None, :]
        log_p = np.log(weights)[None, :] - np.log(sigmas)[None, :] - 0.5 * z**2
        log_p -= 0.5 * math.log(2 * math.pi)
        top = log_p.max(axis=1, keepdims=True)
        log_total = top[:, 0] + np.log(np.exp(log_p - top).sum(axis=1))
        new_ll = float(log_total.sum())
        resp = np.exp(log_p - log_total[:, None])
        # M step
        mass = resp.sum(axis=0) + 1e-12
        weights = mass / n
        means = (resp * logs[:, None]).sum(axis=0) / mass
        var = (resp * (logs[:, None] - means[None, :]) ** 2).sum(axis=0) / mass
        sigmas = np.maximum(np.sqrt(var), _MIN_SIGMA)
        if new_ll - ll < 1e-9 * max(1.0, abs(new_ll)):
            ll = new_ll
            break
        ll = new_ll
    return weights, means, sigmas, ll
