"""The rules that turn runs measured on a GPU into floors for it: `suggest`, a floor between what the runs showed and
what a given slowdown would show (`vitperf floors suggest`), and `at_false_alarm`, a floor that an unchanged run
fails at most at a chosen rate, from the spread between fresh processes (`vitperf floors make`)."""

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


def at_false_alarm(intervals: list[Interval], false_alarm: float = 0.05) -> Suggestion:
    """A floor from fresh processes' intervals of one speedup (one each) that a run of the same engines fails at most
    at the rate `false_alarm`: the lower prediction bound of a new run's estimate, from the runs' log estimates
    (Student's t with K - 1 degrees of freedom, its sd widened by sqrt(1 + 1/K) for the new run), and no higher than
    the lowest lower bound any run showed. A run fails a floor only when its whole interval lies below it, so the
    rate is a bound. `regression` is what the floor catches: the slowdown at which a run at the runs' mean estimate,
    with their median half-width, would have its whole interval below the floor."""
    from scipy.stats import t

    k = len(intervals)
    lowest, highest = min(i.low for i in intervals), max(i.high for i in intervals)
    if k < MIN_RUNS:
        return Suggestion(None, lowest, highest, math.nan, f"{k} run(s): a spread between processes needs "
                          f"{MIN_RUNS} or more: vitperf floors make --runs {MIN_RUNS}")  # fmt: skip
    logs = [math.log(i.estimate) for i in intervals]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    bound = mean - float(t.ppf(1 - false_alarm, k - 1)) * sd * math.sqrt(1 + 1 / k)
    floor = min(math.exp(bound), lowest)
    half = statistics.median(math.log(i.high / i.estimate) for i in intervals)
    return Suggestion(floor, lowest, highest, math.exp(mean + half - math.log(floor)) - 1)
