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
    """The variance of one build's log time around its precision's (`var`), with its degrees of freedom."""

    var: float
    df: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


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
    return BuildSpread(max(0.0, (between - within) / rounds), df_b)


def _paired_rounds(
    reference: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]], spread: BuildSpread | None
) -> tuple[list[float], float]:
    """Per round, the mean log of the reference's builds minus the candidate's (rounds a build lacks left out), and
    the builds' variance of that difference: spread.var for each build, divided by the builds averaged."""
    r = min(len(b) for b in (*reference, *candidate))
    diffs = [
        math.fsum(b[i] for b in reference) / len(reference) - math.fsum(b[i] for b in candidate) / len(candidate)
        for i in range(r)
    ]
    v_builds = spread.var * (1 / len(reference) + 1 / len(candidate)) if spread is not None else 0.0
    return [d for d in diffs if math.isfinite(d)], v_builds


def _mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    mean = math.fsum(xs) / len(xs)
    return mean, math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1))


def _error(sd: float, rounds: float, v_builds: float, df_builds: float) -> tuple[float, float]:
    """The standard error of a mean over `rounds` rounds of spread `sd`, widened by the builds' variance `v_builds`,
    and its degrees of freedom (Satterthwaite). Infinite rounds leave the builds' part alone."""
    v_rounds = sd * sd / rounds if math.isfinite(rounds) else 0.0
    var = v_rounds + v_builds
    den = (v_rounds**2 / (rounds - 1) if v_rounds else 0.0) + v_builds**2 / df_builds
    return math.sqrt(var), var**2 / den if den > 0.0 else math.inf  # den underflows only for a variance near 0


def nested_interval(
    reference: Sequence[Sequence[float]],
    candidate: Sequence[Sequence[float]],
    spread: BuildSpread | None,
    confidence: float = CONFIDENCE,
) -> Interval | None:
    """The ratio exp(mean log reference - mean log candidate) of builds x rounds log values taken in the same rounds:
    Student's t on the rounds' differences of build means (log_ratio_interval), its variance widened by the builds'
    (spread.var for each build, divided by the builds averaged), with Satterthwaite's degrees of freedom."""
    diffs, v_builds = _paired_rounds(reference, candidate, spread)
    if spread is None or v_builds == 0.0:
        return log_ratio_interval(diffs, confidence)
    n = len(diffs)
    if n < 3:
        return None
    mean, sd = _mean_sd(diffs)
    se, df = _error(sd, n, v_builds, spread.df)
    from scipy.stats import t

    half = float(t.ppf(1 - (1 - confidence) / 2, df)) * se
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
    diffs, v_builds = _paired_rounds(reference, candidate, spread)
    n = len(diffs)
    if n < 3:
        return True
    mean, sd = _mean_sd(diffs)
    rounds = max(rounds, n)
    if v_builds == 0.0 and (sd == 0.0 or not math.isfinite(rounds)):
        return mean != math.log(floor)  # nothing left to average away: only a point on the floor stays there
    se, df = _error(sd, rounds, v_builds, spread.df if spread is not None else 1.0)
    from scipy.stats import t

    half = float(t.ppf(1 - (1 - confidence) / 2, df)) * se
    return abs(mean - math.log(floor)) > half
