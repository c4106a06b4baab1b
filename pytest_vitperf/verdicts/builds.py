"""Engines built more than once: the spread between builds, the speedup interval that carries it, and whether more
rounds could still settle a verdict (the rounds' share of the variance shrinks with rounds, the builds' share does
not). Part of the statistics room (stats.py): the floors judge with it.

Two builds of one engine are not the same engine. On an H100 at batch 1, five FP16 builds of vit_base in one process
differed by up to 0.7% (the later-built ones slower), while each one's interval over 20 rounds was +-0.02%: an
interval over rounds is an interval for these builds, not for the precision. With every precision built k >= 2
times, the differences between builds of one precision estimate that spread (pooled over the family's precisions),
and a speedup's interval carries it (docs/statistics.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from pytest_vitperf.verdicts.stats import CONFIDENCE, T_ON_LOG_RATIOS, Interval, exp_or_inf, log_ratio_interval


@dataclass(frozen=True)
class BuildSpread:
    """The variance of one build's log time around its precision's (`var`, never below 0), with its degrees of
    freedom; and the mean squares it comes from, per round: `mean_var`, the variance of one build's mean over its
    `rounds` rounds (the builds' mean square over the rounds), and `within`, one round's variance about its build's
    mean once the round's clock is taken out (`df_within`). Records written before the mean squares were kept have
    only `var` and `df`."""

    var: float
    df: float
    mean_var: float | None = None
    within: float | None = None
    df_within: float | None = None
    rounds: int | None = None

    def to_dict(self) -> dict[str, float | int | None]:
        return asdict(self)

    def mean_squares(self) -> tuple[float, float, int] | None:
        """(mean_var, within, rounds), or None for a record written before they were kept."""
        if self.mean_var is None or self.within is None or self.rounds is None:
            return None
        return self.mean_var, self.within, self.rounds


def build_spread(families: Sequence[Sequence[Sequence[float]]]) -> BuildSpread | None:
    """The build-to-build variance from a family's precisions: for each precision, its builds' log round values
    (builds x rounds, the same rounds for every build). Round effects (the clock of that round) are removed within
    each precision; the builds' mean square over the rounds' mean square, as in a one-way random-effects ANOVA,
    pooled over the precisions. Rounds a build lacks (nan) are left out. None without a precision of two builds and
    two rounds."""
    msb = msw = 0.0
    df_b = df_w = 0.0
    rounds = 0
    for builds in families:
        n = min((len(b) for b in builds), default=0)
        keep = [i for i in range(n) if all(math.isfinite(b[i]) for b in builds)]  # rounds every build has
        k, r = len(builds), len(keep)
        if k < 2 or r < 2:
            continue
        rows = [[b[i] for i in keep] for b in builds]
        round_means = [math.fsum(row[i] for row in rows) / k for i in range(r)]
        z = [[row[i] - round_means[i] for i in range(r)] for row in rows]  # the round's clock drops out
        build_means = [math.fsum(row) / r for row in z]
        msb += r * math.fsum(m * m for m in build_means)  # the z's build means sum to 0 over the builds
        msw += math.fsum((row[i] - m) ** 2 for row, m in zip(z, build_means, strict=True) for i in range(r))
        df_b += k - 1
        df_w += (k - 1) * (r - 1)
        rounds = r
    if df_b == 0:
        return None
    between, within = msb / df_b, msw / df_w
    return BuildSpread(max(0.0, (between - within) / rounds), df_b, between / rounds, within, df_w, rounds)


def _paired_rounds(
    reference: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]]
) -> tuple[list[float], float]:
    """Per round, the mean log of the reference's builds minus the candidate's (rounds a build lacks left out), and
    what a variance per build becomes in that difference of build means: 1/builds of each side, added."""
    r = min(len(b) for b in (*reference, *candidate))
    diffs = [
        math.fsum(b[i] for b in reference) / len(reference) - math.fsum(b[i] for b in candidate) / len(candidate)
        for i in range(r)
    ]
    return [d for d in diffs if math.isfinite(d)], 1 / len(reference) + 1 / len(candidate)


def _mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    mean = math.fsum(xs) / len(xs)
    return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1))


def _error(sd: float, c: float, spread: BuildSpread | None, rounds: float) -> tuple[float, float]:
    """The standard error of the mean difference over `rounds` rounds (with the rounds' spread `sd`, and c as
    _paired_rounds gives it), and its degrees of freedom (Satterthwaite). Endless rounds leave the builds' part.

    Two parts, each from a mean square with its own degrees of freedom. The builds': the variance of a build's mean
    over the rounds (`mean_var`, the builds' degrees of freedom), with its rounds' share moved to `rounds`. The
    rounds': whatever the pair's rounds vary by beyond what rounds vary by within a build (a clock that moves one
    precision more than the other), sd^2 - c x within, which is 0 when nothing does. Taking the builds' part from
    its mean square, rather than from var, which is 0 whenever the builds' mean square falls below the rounds', keeps
    the interval at its level when the builds' spread is of the size of the rounds' (in simulation, 95% where the
    older sum, the rounds' variance plus var, covered 92%: tools/build_coverage.py). Records without the mean squares
    use that older sum."""
    inv = 1 / rounds if math.isfinite(rounds) else 0.0
    squares = spread.mean_squares() if spread is not None else None
    if spread is None:
        parts = [(sd * sd * inv, rounds - 1)]
    elif squares is None:
        parts = [(sd * sd * inv, rounds - 1), (c * spread.var, spread.df)]
    else:
        mean_var, within, measured = squares
        builds = c * max(0.0, mean_var + within * (inv - 1 / measured))
        parts = [(builds, spread.df), (max(0.0, sd * sd - c * within) * inv, rounds - 1)]
    var = math.fsum(v for v, _ in parts)
    den = math.fsum(v * v / df for v, df in parts if v)
    return math.sqrt(var), var**2 / den if den > 0.0 else math.inf  # den underflows only for a variance near 0


def _half_width(se: float, df: float, confidence: float) -> float:
    from scipy.stats import t

    return float(t.ppf(1 - (1 - confidence) / 2, df)) * se


def nested_interval(
    reference: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    spread: BuildSpread | None,
    confidence: float = CONFIDENCE,
) -> Interval | None:
    """The ratio exp(mean log reference - mean log candidate) of builds x rounds log values taken in the same rounds:
    Student's t on the rounds' differences of build means (log_ratio_interval), its variance widened by the builds'
    (_error), with Satterthwaite's degrees of freedom."""
    diffs, c = _paired_rounds(reference, candidate)
    if spread is None or (spread.mean_squares() is None and spread.var == 0.0):
        return log_ratio_interval(diffs, confidence)
    n = len(diffs)
    if n < 3:
        return None
    mean, sd = _mean_sd(diffs)
    se, df = _error(sd, c, spread, n)
    if se == 0.0:  # every build and round alike: nothing to widen
        return log_ratio_interval(diffs, confidence)
    from scipy.stats import t

    half = _half_width(se, df, confidence)
    p = float(2 * t.sf(abs(mean) / se, df))
    method = f"{T_ON_LOG_RATIOS} and the spread of {len(reference)} builds"
    return Interval(math.exp(mean), exp_or_inf(mean - half), exp_or_inf(mean + half), confidence, n, sd, p, method)


def settles(
    reference: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    spread: BuildSpread | None,
    floor: float,
    confidence: float = CONFIDENCE,
    rounds: float = math.inf,
) -> bool:
    """Whether `rounds` rounds in all could take nested_interval off `floor`, were the estimate and the rounds' spread
    to stay as measured: a futility check, as sequential designs make before they spend more. The rounds' share of
    the variance shrinks as 1/rounds; the builds' share does not, so where it alone straddles the floor, more rounds
    are time spent for nothing (more builds are not). True where nothing is known yet (under 3 rounds)."""
    diffs, c = _paired_rounds(reference, candidate)
    n = len(diffs)
    if n < 3:
        return True
    mean, sd = _mean_sd(diffs)
    se, df = _error(sd, c, spread, max(rounds, n))
    if se == 0.0:
        return mean != math.log(floor)  # nothing left to average away: only a point on the floor stays there
    return abs(mean - math.log(floor)) > _half_width(se, df, confidence)
