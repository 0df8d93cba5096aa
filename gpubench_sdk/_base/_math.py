"""The two pieces of statistics every layer uses: the Wilson score interval of a proportion and
the inverse normal CDF. A leaf, so that the shapes that search by an SLO (``_scenarios``) and
the metrics built on stored runs (``metrics``, a layer above) share the very same rule."""

from __future__ import annotations

import math


def check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence!r}")


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (Wilson 1927; Agresti & Coull 1998)."""
    check_confidence(confidence)
    if trials <= 0:
        return (math.nan, math.nan)
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be in [0, trials={trials}], got {successes}")
    z = normal_ppf(1 - (1 - confidence) / 2)
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    # at 0 or n successes the bound is 0 or 1 exactly (the formula leaves rounding dust)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def normal_ppf(p: float) -> float:
    """Inverse standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9,
    refined by one Newton step on ``math.erfc``)."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p!r}")
    a = (-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269,
         -30.66479806614716, 2.506628277459239)  # fmt: skip
    b = (-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972,
         -13.28068155288572)  # fmt: skip
    c = (-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734,
         4.374664141464968, 2.938163982698783)  # fmt: skip
    d = (0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416)
    if p < 0.02425:
        t = math.sqrt(-2 * math.log(p))
        x = (((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t + c[5]) / (
            (((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1
        )
    elif p <= 1 - 0.02425:
        t = p - 0.5
        r = t * t
        x = (
            (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
            * t
            / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
        )
    else:
        return -normal_ppf(1 - p)
    err = 0.5 * math.erfc(-x / math.sqrt(2)) - p
    return x - err * math.sqrt(2 * math.pi) * math.exp(x * x / 2)
