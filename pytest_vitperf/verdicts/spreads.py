"""The spread between processes: how far one run of a row may sit from the runs before it (Spread, with a board's
own spread where the runs came from another board), what the other rows of a matrix say about a row's spread
before its own runs do (Prior: spread_prior, group_prior), and the smallest change a spread lets a test see. The
stored baselines' gate judges with it, and the A/B verdicts' moderated intervals (stats.py) borrow its priors.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TypeVar

K = TypeVar("K", bound=Hashable)  # a row's key in a matrix (stats.moderated_intervals takes it too)
ROUNDING = 1e-12  # a log difference this small is floating-point rounding of equal latencies, not a change

def smallest_detectable(se: float, df: float, level: float, power: float, threshold: float = 0.0) -> float:
    """A change is flagged when its estimate clears both the test's bar (t_{1-a/2} se) and the practical threshold,
    and the estimate falls t_{power} se short of the truth 1 time in 5: max(t_{1-a/2} se, log(1 + threshold)) +
    t_{power} se, as a ratio minus 1. A change of exactly the threshold is flagged half the time, not 4 in 5."""
    from scipy.stats import t

    bar = max(float(t.ppf(1 - level / 2, df)) * se, math.log1p(threshold))
    return math.expm1(bar + float(t.ppf(power, df)) * se)


# -- one run against the runs before it: the spread between processes ----------------------------------------------
# A stored baseline is judged by runs, not samples: each fresh process gives one median, and the runs recorded on a
# row (`vitperf calibrate`, --vitperf-record-run) give the spread between processes that a new run must stand out
# from. A new run x against the mean m of n earlier runs with spread s: (log x - log m) / (s sqrt(1 + 1/n)) follows
# Student's t with the spread's degrees of freedom (a prediction interval). On another board of the same model the
# boards' own spread adds 2 b^2 (both boards are draws), taken as known (docs/baselines.md).


@dataclass(frozen=True)
class Spread:
    """The spread between runs of one row: `sd_log` with `df` degrees of freedom, pooled over the groups of runs that
    share a board and a baseline (a refreshed baseline starts a new group); `n_reference` runs make the reference;
    `board_sd` is the assumed spread between boards, 0 on the board that made the runs."""

    sd_log: float
    df: float
    n_reference: int
    board_sd: float = 0.0

    @property
    def _var_runs(self) -> float:
        return self.sd_log**2 * (1 + 1 / self.n_reference)

    @property
    def se(self) -> float:
        """The standard error of log(new run / reference)."""
        return math.sqrt(self._var_runs + 2 * self.board_sd**2)

    @property
    def df_total(self) -> float:
        """Satterthwaite's degrees of freedom, the board term known (infinite df)."""
        if self._var_runs == 0.0:
            return math.inf
        return self.se**4 / (self._var_runs**2 / self.df)

    def p_value(self, log_change: float) -> float:
        """Two-sided: how often runs of an unchanged row differ from the reference by this much or more."""
        from scipy.stats import t

        if self.se == 0.0:
            return 1.0 if abs(log_change) < ROUNDING else 0.0
        return float(2 * t.sf(abs(log_change) / self.se, self.df_total))

    def bound(self, level: float) -> float:
        """The relative change an unchanged row exceeds with probability `level` (two-sided), e.g. 0.021: +2.1%."""
        from scipy.stats import t

        return math.expm1(float(t.ppf(1 - level / 2, self.df_total)) * self.se)

    def detectable(self, level: float, power: float = 0.8, threshold: float = 0.0) -> float:
        """The smallest slowdown flagged at `level` and beyond `threshold` with probability `power`."""
        return smallest_detectable(self.se, self.df_total, level, power, threshold)

    def moderated(self, prior: Prior | None, at: float = 0.0) -> Spread:
        """The spread shrunk toward the matrix's (`spread_prior`, read at the row's log latency `at`): the variances
        weighted by their degrees of freedom, and the degrees of freedom added, as limma's moderated t takes them
        (Smyth 2004). The prior weighs at most as much as the row's own runs: its degrees of freedom, fitted to a few
        dozen rows, are a noisy estimate, and at full weight simulated A/A matrices flagged 6-9% of the time at a
        5% rate (docs/baselines.md). A row far noisier than the prior (its own variance beyond the prior's 95th
        percentile, F on its df and the prior's) keeps its own spread, as limma's robust fit spares hypervariable
        rows (Phipson et al. 2016): shrunk toward quiet rows it would claim a precision it lacks, and in simulation a
        7x noisier row truly 2% slower was called SAME 6.7% of the time at a 5% rate (2.5% with the guard)."""
        from scipy.stats import f

        if prior is None or self.sd_log**2 > prior.var_at(at) * float(f.ppf(0.95, self.df, prior.df)):
            return self
        weight = min(prior.df, self.df)
        df = self.df + weight
        return replace(self, sd_log=math.sqrt((weight * prior.var_at(at) + self.df * self.sd_log**2) / df), df=df)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class Prior:
    """What the other rows of a matrix say about one row's spread before its own runs do: a variance of log run
    values, worth `df` degrees of freedom, at the log latency `center`; it scales by exp(slope) per unit of log
    latency away from it (short products spread more than whole ViTs)."""

    var: float
    df: float
    slope: float = 0.0
    center: float = 0.0

    def var_at(self, at: float) -> float:
        return self.var * math.exp(self.slope * (at - self.center))

    def text(self) -> str:
        """e.g. 'sd 1.03% at 0.52 ms, x1.40 for every 10x shorter, worth 3.3 df' (without a trend: 'sd 1.03%, ...')."""
        per_decade = math.exp(-self.slope / 2 * math.log(10))  # sd is the square root of the variance
        trend = f" at {math.exp(self.center):.3g} ms, x{per_decade:.2f} for every 10x shorter" if self.slope else ""
        return f"sd {math.sqrt(self.var):.2%}{trend}, worth {self.df:.1f} df"


TREND_RANGE = 2.0  # the least ratio between a matrix's longest and shortest row for a trend in latency


def spread_prior(rows: Sequence[Spread], at: Sequence[float] | None = None) -> Prior | None:
    """Smyth's (2004) empirical-Bayes prior for the rows' variances: a scaled inverse chi-square fitted by moments to
    the logs of the rows' sample variances, around a straight line in the rows' log latencies `at` where given
    (limma's trend: on an H100 the GEMM rows of tens of microseconds spread 1.5-3% between processes, the ViT rows
    0.3-0.8%). Five runs give a row 4 degrees of freedom, and a t quantile at a 5% rate shared by 80 rows of 9.9;
    rows of like spread lend it theirs. Rows of unlike spread (the fitted df is small) lend little. The prior's df
    is capped at the rows' own df in all: it cannot know more than they do. None below 3 rows; a trend needs 4, whose
    latencies span at least a factor of TREND_RANGE."""
    from scipy.special import digamma, polygamma

    xs = [0.0] * len(rows) if at is None else list(at)
    data = [(r.sd_log**2, r.df, x) for r, x in zip(rows, xs, strict=True) if r.sd_log > 0 and r.df > 0]
    if len(data) < 3:
        return None
    logs = [x for *_, x in data]
    # A line needs latencies that differ: over a narrow range its slope is noise, and extrapolates wildly.
    trend = at is not None and len(data) >= 4 and max(logs) - min(logs) >= math.log(TREND_RANGE)
    e = [math.log(v) - float(digamma(d / 2)) + math.log(d / 2) for v, d, _ in data]
    center = math.fsum(logs) / len(logs) if trend else 0.0
    mean = math.fsum(e) / len(e)
    slope = 0.0
    if trend:
        sxx = math.fsum((x - center) ** 2 for x in logs)
        slope = math.fsum((x - center) * (y - mean) for x, y in zip(logs, e, strict=True)) / sxx
    residuals = [y - mean - slope * (x - center) for x, y in zip(logs, e, strict=True)]
    excess = math.fsum(r**2 for r in residuals) / (len(e) - 1 - trend)
    excess -= math.fsum(float(polygamma(1, d / 2)) for _, d, _ in data) / len(data)
    cap = math.fsum(d for _, d, _ in data)
    df = cap if excess <= 0 else min(cap, 2 * _trigamma_inverse(excess))
    return Prior(math.exp(mean + float(digamma(df / 2)) - math.log(df / 2)), df, slope, center)


def group_prior(
    prior: Prior | None, row: K, spreads: Mapping[K, Spread], at: Mapping[K, float], groups: Mapping[K, Hashable]
) -> Prior | None:
    """The prior `row` is moderated toward: the matrix's, or, where the other rows of its group spread clearly more
    (their variances pooled by degrees of freedom, beyond the matrix's at the row's latency by the 95th percentile
    of F), theirs at the matrix's weight. The matrix's trend follows latency, but a family's noise is its own: the
    nightly set's ViT-S rows at batch 1 spread 0.9-1.6% a round where rows of like latency spread about 0.4%.
    Moderated toward the matrix, a ViT-S row whose first 4 rounds happened to agree (0.36%) was called SLOWER by
    +1.4% in an A/A (H200, 2026-12-04); its 14 rounds spread 1.05%. The row's own rounds are left out of its group's
    variance: a row does not lend to itself. The F guard keeps quiet families as they were: a few rows' variances
    at 3 degrees of freedom each are noisy, and a plain maximum would widen every family that drew high."""
    from scipy.stats import f

    group = groups.get(row)
    if prior is None or group is None:
        return prior
    others = [s for k, s in spreads.items() if k != row and groups.get(k) == group]
    df = math.fsum(s.df for s in others)
    if not df:
        return prior
    var = math.fsum(s.df * s.sd_log**2 for s in others) / df
    return prior if var <= prior.var_at(at[row]) * float(f.ppf(0.95, df, prior.df)) else Prior(var, prior.df)


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x, by Newton's method from Smyth's starting point (limma's trigammaInverse)."""
    from scipy.special import polygamma

    if x > 1e7:
        return 1 / math.sqrt(x)
    if x < 1e-6:
        return 1 / x
    y = 0.5 + 1 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        step = tri * (1 - tri / x) / float(polygamma(2, y))
        y += step
        if -step / y < 1e-8:
            break
    return y


def pooled_spread(groups: Sequence[Sequence[float]], n_reference: int, board_sd: float = 0.0) -> Spread | None:
    """The spread of log run values pooled over groups (each group's runs around their own mean). None below 2
    degrees of freedom in all (3 runs of one group, or 2 of each of two): too few to judge with."""
    ss, df = 0.0, 0
    for g in groups:
        xs = [x for x in g if math.isfinite(x)]
        if len(xs) < 2:
            continue
        mean = math.fsum(xs) / len(xs)
        ss += math.fsum((x - mean) ** 2 for x in xs)
        df += len(xs) - 1
    if df < 2 or n_reference < 1:
        return None
    sd = math.sqrt(ss / df)
    return Spread(0.0 if sd < ROUNDING else sd, df, n_reference, board_sd)
