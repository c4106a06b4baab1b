"""The statistics every verdict shares: intervals of a ratio and of shares of images, three-outcome decisions, control
of many decisions at once, and the smallest change a design can see. Written once; floors, stored baselines, A/B
runs and the accuracy table all judge with it (shares of images: proportions.py; the spread between processes and
its priors: spreads.py). scipy.stats does the arithmetic; this module decides what is an observation.

An observation is one independent unit: a round of an interleaved family (every engine timed once in a shuffled
order), a fresh process, a pair of A/B runs. The thousands of samples inside one slice are not independent of one
another (clocks, heat and caches carry over from one launch to the next), so a slice gives one number, its median,
and only the spread between observations enters an interval (docs/statistics.md).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from pytest_vitperf.verdicts.spreads import K, Spread, group_prior, smallest_detectable, spread_prior

CONFIDENCE = 0.95
T_ON_LOG_RATIOS = "t on log ratios"
MODERATED_T = "moderated t on log ratios"

PASS, FAIL, UNKNOWN, INCONCLUSIVE = "pass", "FAIL", "unknown", "inconclusive"


def exp_or_inf(x: float) -> float:
    """exp, with inf past the float range: three rounds judged at Bonferroni's 1 - 3e-7 have a t quantile in the
    hundreds, and an interval of [0, inf] says what it should (nothing is known yet) instead of raising."""
    return math.inf if x > 709.0 else math.exp(x)


@dataclass(frozen=True)
class Interval:
    """A ratio with its confidence interval: `estimate` is the geometric mean of the observations' ratios, [low, high]
    the two-sided interval at `confidence`, `p_value` the two-sided test of a ratio of 1 (for false-discovery control),
    `sd_log` the standard deviation of the observations' log ratios (what the smallest detectable change is made of)."""

    estimate: float
    low: float
    high: float
    confidence: float
    n: int
    sd_log: float
    p_value: float
    method: str = T_ON_LOG_RATIOS
    df: float | None = None  # the t quantile's degrees of freedom where they are not n - 1 (a moderated spread)

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    @property
    def half_width(self) -> float:
        """Half the interval's width relative to the estimate: 0.002 is ±0.2%."""
        return (self.high - self.low) / 2 / self.estimate

    def text(self) -> str:
        """'1.24x [1.22, 1.26]'."""
        digits = 3 if self.half_width < 0.005 else 2
        return f"{self.estimate:.{digits}f}x [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Interval:
        return cls(**d)


def _mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (n - 1) of two or more observations."""
    mean = math.fsum(xs) / len(xs)
    return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1))


def _point(mean: float, confidence: float, n: int, method: str = T_ON_LOG_RATIOS, df: float | None = None) -> Interval:
    """The interval of identical observations: the point itself, significant unless it is 1."""
    r = math.exp(mean)
    return Interval(r, r, r, confidence, n, 0.0, 1.0 if mean == 0 else 0.0, method, df)


def log_ratio_interval(log_ratios: Sequence[float], confidence: float = CONFIDENCE) -> Interval | None:
    """The interval of exp(mean log ratio): Student's t on the observations' log ratios (scipy.stats.ttest_1samp),
    mapped back by exp. Log ratios, because a speedup is a ratio: its logarithm is symmetric (1.25x and 0.8x lie as
    far from 1) and the mean of logs is the geometric mean. None below 3 observations: two points give an interval,
    but not one anybody should gate on."""
    xs = [x for x in log_ratios if math.isfinite(x)]
    n = len(xs)
    if n < 3:
        return None
    from scipy.stats import ttest_1samp

    mean, sd = _mean_sd(xs)
    if sd == 0.0:  # identical observations: scipy warns and answers NaN; the interval is the point
        return _point(mean, confidence, n)
    with warnings.catch_warnings():  # nearly equal observations: scipy warns of precision loss, the interval stands
        warnings.simplefilter("ignore", RuntimeWarning)
        result = ttest_1samp(xs, 0.0)
        ci = result.confidence_interval(confidence)
    return Interval(
        math.exp(mean), exp_or_inf(float(ci.low)), exp_or_inf(float(ci.high)), confidence, n, sd, float(result.pvalue)
    )


def moderated_intervals(
    rows: Mapping[K, Sequence[float]],
    at: Mapping[K, float],
    confidence: float = CONFIDENCE,
    groups: Mapping[K, Hashable] | None = None,
) -> dict[K, Interval | None]:
    """Each row's interval of exp(mean log ratio), as log_ratio_interval gives it, but with the row's spread moderated
    toward the matrix's (spread_prior over the rows' spreads, with a trend in their log latencies `at`; then
    Spread.moderated): limma's moderated t (Smyth 2004). A row of a few observations borrows degrees of freedom from
    rows of like spread, and its t quantile shrinks: at 4 observations and a 5% rate shared by 14 rows, from 7.5 to
    at most 4.3. None below 3 observations. Rows of one of `groups` share their noise (a family's, timed in the same
    processes): a row is moderated toward its group's other rows where they spread clearly more than the matrix
    does at its latency (group_prior)."""
    from scipy.stats import t

    own: dict[K, tuple[float, float, int]] = {}
    for k, logs in rows.items():
        xs = [x for x in logs if math.isfinite(x)]
        if len(xs) >= 3:
            own[k] = (*_mean_sd(xs), len(xs))
    spreads = {k: Spread(sd, n - 1, 1) for k, (_, sd, n) in own.items()}
    prior = spread_prior(list(spreads.values()), [at[k] for k in spreads])
    out: dict[K, Interval | None] = dict.fromkeys(rows)
    for k, (mean, _, n) in own.items():
        spread = spreads[k].moderated(group_prior(prior, k, spreads, at, groups or {}), at[k])
        se = spread.sd_log / math.sqrt(n)
        if se == 0.0:  # identical observations in a matrix that lends nothing: the interval is the point
            out[k] = _point(mean, confidence, n, MODERATED_T, spread.df)
            continue
        q = float(t.ppf(1 - (1 - confidence) / 2, spread.df))
        p = float(2 * t.sf(abs(mean) / se, spread.df))
        out[k] = Interval(math.exp(mean), exp_or_inf(mean - q * se), exp_or_inf(mean + q * se), confidence, n,
                          spread.sd_log, p, MODERATED_T, spread.df)  # fmt: skip
    return out


def ratio_interval(
    numerators: Sequence[float], denominators: Sequence[float], confidence: float = CONFIDENCE
) -> Interval | None:
    """The paired ratio numerator/denominator over observations taken together (the i-th of each in the same round),
    e.g. a speedup: reference time over candidate time. Pairs with a missing or non-positive side are left out."""
    logs = [math.log(a / b) for a, b in zip(numerators, denominators, strict=True) if a > 0 and b > 0]
    return log_ratio_interval(logs, confidence)


class Bounds(Protocol):  # anything with an interval: a ratio's (Interval), a share's (proportions.Share)
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...


def against_floor(interval: Bounds, floor: float) -> str:
    """PASS when the whole interval clears the floor, FAIL when the whole interval is below it, else UNKNOWN: the
    data cannot tell yet, and more rounds may."""
    if interval.low >= floor:
        return PASS
    if interval.high < floor:
        return FAIL
    return UNKNOWN


def family_wise(confidence: float, decisions: int) -> float:
    """The confidence each of `decisions` intervals needs so that, with probability `confidence`, none of them is
    wrong (Bonferroni: it assumes nothing about how the decisions depend on one another)."""
    return 1.0 - (1.0 - confidence) / max(1, decisions)


def false_discoveries(p_values: Sequence[float], rate: float = 1.0 - CONFIDENCE) -> list[bool]:
    """Which of many tests stay significant once the expected share of false discoveries among them is held at
    `rate` (Benjamini-Hochberg, through scipy.stats.false_discovery_control)."""
    if not p_values:
        return []
    from scipy.stats import false_discovery_control

    adjusted = false_discovery_control(list(p_values), method="bh")
    return [bool(q <= rate) for q in adjusted]


def detectable_change(
    sd_log: float,
    n: int,
    confidence: float = CONFIDENCE,
    power: float = 0.8,
    threshold: float = 0.0,
    df: float | None = None,
) -> float:
    """The smallest relative change that n paired observations with this spread flag with probability `power`, by a
    two-sided test at `confidence` whose verdict also asks the estimate to exceed `threshold`; `df` where the spread
    has other than n - 1 degrees of freedom (moderated). inf below 3."""
    if n < 3:
        return math.inf
    return smallest_detectable(sd_log / math.sqrt(n), n - 1 if df is None else df, 1 - confidence, power, threshold)
