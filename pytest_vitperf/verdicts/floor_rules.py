"""The rules that turn runs measured on a GPU into floors for it: `suggest`, a floor between what the runs showed and
what a given slowdown would show (`vitperf floors suggest`), and `at_false_alarm`, a floor that an unchanged run
misses (FAIL or inconclusive) at most at a chosen rate, from the spread between fresh processes (`vitperf floors
make`)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from pytest_vitperf.verdicts.stats import Interval

MIN_RUNS = 3  # a spread between processes needs two degrees of freedom at least


@dataclass(frozen=True)
class Suggestion:
    """A floor that the intervals of several runs support: `floor` None when no floor tells a `regression` of the
    candidate from the spread those runs show (`why` says so)."""

    floor: float | None
    lowest: float  # the lowest lower bound among the runs
    highest: float  # the highest upper bound among the runs
    regression: float  # the slowdown of the candidate the floor must catch: 0.05 for 5%
    why: str = ""


def suggest(intervals: list[Interval], regression: float = 0.05) -> Suggestion:
    """A floor between what the runs showed and what a `regression` would show: every run's interval lies above it
    (no run would have failed), and a run slowed by `regression` would have its whole interval below it, were its
    interval as high as the highest seen. It sits midway (in log space) between the lowest lower bound and the highest
    upper bound divided by 1 + regression; if those cross, the runs' spread hides such a regression and no floor
    is suggested."""
    lowest = min(i.low for i in intervals)
    highest = max(i.high for i in intervals)
    caught = highest / (1 + regression)  # the top of a regressed run's interval
    if caught >= lowest:
        why = (
            f"the runs' intervals reach down to {lowest:.3f}x, and a {regression:.0%} slower candidate could still "
            f"read up to {caught:.3f}x: a floor cannot tell them apart. Where one run's interval is wide, add rounds "
            f"(--vitperf-rounds); where the runs disagree, ask for a larger change: "
            f"vitperf floors suggest --regression {2 * regression:g} RUN.json ..."
        )
        return Suggestion(None, lowest, highest, regression, why)
    return Suggestion(math.sqrt(lowest * caught), lowest, highest, regression)


def at_false_alarm(intervals: list[Interval], false_alarm: float = 0.05, judged_at: float | None = None) -> Suggestion:
    """A floor from fresh processes' intervals of one speedup (one each) that a run of the same engines passes with
    probability 1 - `false_alarm`: a run passes when its interval at the confidence the floor is judged at
    (`judged_at`, the next run's share of its confidence among its floors and looks: stats.family_wise; None: the
    intervals' own) clears the floor. So the floor is the lower prediction bound of a new run's log estimate (Student's
    t with K - 1 degrees of freedom, its sd widened by sqrt(1 + 1/K) for the new run) less the half-width such an
    interval has (the runs' median, scaled to `judged_at`), and no higher than the lowest lower bound any run showed.
    FAIL asks the whole interval below the floor, so an unchanged run fails far more rarely still. Three H100
    processes of fp8-fused at batch 64 put the bound without the half-width 0.2% under their lowest lower bound
    (2026-12-08), less than a run's own half-width: a next run's interval would straddle it about half the time.
    `regression` is what the floor catches: the slowdown at which a run at the runs' mean estimate, with their median
    judged half-width, would have its whole interval below the floor."""
    from scipy.stats import t

    k = len(intervals)
    lowest, highest = min(i.low for i in intervals), max(i.high for i in intervals)
    if k < MIN_RUNS:
        return Suggestion(None, lowest, highest, math.nan, f"{k} run(s): a spread between processes needs "
                          f"{MIN_RUNS} or more: vitperf floors make --runs {MIN_RUNS}")  # fmt: skip
    logs = [math.log(i.estimate) for i in intervals]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = statistics.median(math.log(i.estimate / i.low) * _widened(i, judged_at) for i in intervals)
    bound = mean - float(t.ppf(1 - false_alarm, k - 1)) * sd * math.sqrt(1 + 1 / k) - half
    floor = min(math.exp(bound), lowest)
    return Suggestion(floor, lowest, highest, math.exp(mean + half - math.log(floor)) - 1)


def _widened(interval: Interval, confidence: float | None) -> float:
    """How much wider (in log) `interval` would be at `confidence`: the ratio of their two-sided t quantiles."""
    from scipy.stats import t

    if confidence is None or confidence == interval.confidence:
        return 1.0
    df = interval.df or max(1, interval.n - 1)
    return float(t.ppf(1 - (1 - confidence) / 2, df) / t.ppf(1 - (1 - interval.confidence) / 2, df))
