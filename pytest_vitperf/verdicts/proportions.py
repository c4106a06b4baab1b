"""The statistics room's counts: shares of images (an accuracy, an agreement) and the difference of two measured on
the same images, with their intervals and McNemar's exact test. Ratios of times are in stats.py."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from pytest_vitperf.verdicts.stats import CONFIDENCE


@dataclass(frozen=True)
class Share:
    """A share of images, or a difference of two, with its interval: `estimate` and [low, high] as fractions."""

    estimate: float
    low: float
    high: float
    confidence: float
    method: str

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def text(self, signed: bool = False) -> str:
        """In percent, '99.72% [98.44, 99.95]' (359 of 360), or signed points, '+0.28 [-0.79, +1.51]' (one of 360
        images lost)."""
        if signed:
            return f"{self.estimate * 100:+.2f} [{self.low * 100:+.2f}, {self.high * 100:+.2f}]"
        return f"{self.estimate:.2%} [{self.low * 100:.2f}, {self.high * 100:.2f}]"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> Share:
    """The share k / n with Wilson's score interval (scipy), which stays inside [0, 1] and keeps its coverage near
    0 and 1, where the agreement of a good precision with FP32 lives."""
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence, method="wilson")
    return Share(k / n, float(ci.low), float(ci.high), confidence, "Wilson score")


def paired_difference(both: int, first_only: int, second_only: int, neither: int,
                      confidence: float = CONFIDENCE) -> Share:  # fmt: skip
    """The difference of two shares measured on the same items (the first's minus the second's), e.g. FP32's top-1
    minus a precision's over the same images, from the paired 2x2 counts: Newcombe's method 10 (Statistics in
    Medicine 17:2635, 1998), which joins the two Wilson intervals with the pairs' correlation. scipy has no paired
    interval; the parts are scipy's."""
    n = both + first_only + second_only + neither
    p1, p2 = (both + first_only) / n, (both + second_only) / n
    w1, w2 = wilson(both + first_only, n, confidence), wilson(both + second_only, n, confidence)
    margins = (both + first_only) * (second_only + neither) * (both + second_only) * (first_only + neither)
    phi = (both * neither - first_only * second_only) / math.sqrt(margins) if margins else 0.0
    d1, u1 = p1 - w1.low, w1.high - p1
    d2, u2 = p2 - w2.low, w2.high - p2
    below = math.sqrt(max(d1 * d1 - 2 * phi * d1 * u2 + u2 * u2, 0.0))
    above = math.sqrt(max(u1 * u1 - 2 * phi * u1 * d2 + d2 * d2, 0.0))
    diff = p1 - p2
    return Share(diff, max(diff - below, -1.0), min(diff + above, 1.0), confidence, "Newcombe paired score")


def mcnemar_exact(first_only: int, second_only: int) -> float:
    """McNemar's exact test of two paired shares being equal: only the discordant items count, and under the null
    each is as likely to fall either way (scipy's two-sided binomial test); 1.0 when there are none."""
    from scipy.stats import binomtest

    discordant = first_only + second_only
    return float(binomtest(first_only, discordant, 0.5).pvalue) if discordant else 1.0
