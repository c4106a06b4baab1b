"""Comparing a measurement with its baseline.

A regression needs both a relative slowdown above the threshold (default 5%) and statistical significance:
a two-sided Mann-Whitney U test on the raw samples with p < 0.01. A baseline without raw samples (published
numbers) is judged on the threshold alone, and the comparison says so. Improvements beyond the threshold are
reported the same way, suggesting a refresh. Like asv, both conditions are required: a tiny but significant
shift, or a large but noisy one, is not a regression.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.baselines.store import Baseline

THRESHOLD = 0.05
ALPHA = 0.01

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
CLOCK = "clock"  # slower in time beyond the threshold, but not in cycles (time x SM clock): the clock moved


@dataclass(frozen=True)
class Comparison:
    baseline_ms: float
    current_ms: float
    statistic: str  # median or mean, as the baseline stores it
    threshold: float
    p_value: float | None  # None: no raw samples on one side, threshold only
    change: str  # REGRESSION, IMPROVEMENT, UNCHANGED or (baselines/gate.py) CLOCK

    @property
    def delta(self) -> float:
        """Relative change of latency: +0.10 is 10% slower."""
        return self.current_ms / self.baseline_ms - 1

    @property
    def method(self) -> str:
        return "threshold only: no raw samples" if self.p_value is None else "Mann-Whitney U"


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    from scipy.stats import mannwhitneyu

    if len(set(a)) == 1 and len(set(b)) == 1:
        return 1.0 if a[0] == b[0] else 0.0  # scipy warns on constant samples; the answer is clear
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def compare(
    baseline_ms: float,
    current_ms: float,
    *,
    statistic: str = "median",
    baseline_samples: Sequence[float] = (),
    current_samples: Sequence[float] = (),
    threshold: float = THRESHOLD,
    alpha: float = ALPHA,
) -> Comparison:
    if not threshold >= 0:
        raise ValueError(f"threshold must be >= 0, got {threshold!r}")
    if not (baseline_ms > 0 and current_ms > 0):
        raise ValueError(f"latencies must be positive, got baseline {baseline_ms!r} and current {current_ms!r}")
    p = None
    if len(baseline_samples) > 1 and len(current_samples) > 1:
        p = mann_whitney_p(list(current_samples), list(baseline_samples))
    significant = p is None or p < alpha
    delta = current_ms / baseline_ms - 1
    if delta > threshold and significant:
        change = REGRESSION
    elif delta < -threshold and significant:
        change = IMPROVEMENT
    else:
        change = UNCHANGED
    return Comparison(baseline_ms, current_ms, statistic, threshold, p, change)


def compare_to(baseline: Baseline, current_ms: float, current_samples: Sequence[float], threshold: float) -> Comparison:
    """`current_ms` (the baseline's statistic) and its samples against a stored baseline."""
    return compare(
        baseline.value,
        current_ms,
        statistic=baseline.statistic,
        baseline_samples=baseline.samples,
        current_samples=current_samples,
        threshold=threshold,
    )
