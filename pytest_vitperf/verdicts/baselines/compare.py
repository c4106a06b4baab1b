"""Comparing a run with its baseline: does this run's median stand out from the row's earlier runs by more than
processes of an unchanged row do?

A row's runs (one median per fresh process: from `vitperf calibrate`, --vitperf-record-run and every refresh) give
the spread between processes. The samples inside one run are not independent of one another, and take no part: a
Mann-Whitney test on them gave p = 0 for changes of 0.2%. A change is a regression or an improvement when both
- it is larger than the practical threshold (3% by default), and
- it stands out from the spread: a t test of the run against the prediction interval of the earlier runs, with
  the p-values of the whole matrix held at a false-alarm rate by Benjamini-Hochberg (`settle`).
With too few runs to know the spread, the verdict is unknown and says how many runs there are. On another board of
the same model the boards' spread is added, and the row is judged in cycles where both sides recorded clocks.
The arithmetic, with numbers, is in docs/baselines.md.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pytest_vitperf.verdicts.spreads import Prior, Spread, pooled_spread, spread_prior
from pytest_vitperf.verdicts.stats import false_discoveries

if TYPE_CHECKING:
    from pytest_vitperf.store.baselines import Baseline, Run

THRESHOLD = 0.03  # the practical threshold: a change smaller than this is never worth a red nightly
FALSE_ALARM = 0.05  # Benjamini-Hochberg's rate over a run's rows; under A/A, the chance that a run flags anything
BOARD_SPREAD = 0.02  # the sd of log latency between boards of one model, assumed (docs/baselines.md)

REGRESSION = "regression"
IMPROVEMENT = "improvement"
WITHIN_NOISE = "within noise"
UNKNOWN = "unknown"
SAME_BOARD, OTHER_BOARD = "same board", "another board"
TIME, CYCLES = "time", "cycles"


@dataclass(frozen=True)
class Comparison:
    baseline_ms: float  # the reference: the geometric mean of the current baseline's runs, else its stored value
    current_ms: float
    statistic: str  # median or mean, as the baseline stores it
    threshold: float  # the practical threshold
    change: str  # REGRESSION, IMPROVEMENT, WITHIN_NOISE or UNKNOWN
    delta: float  # the relative change in `unit`: +0.10 is 10% slower
    unit: str = TIME
    runs: int = 0  # the runs the spread came from
    board: str = ""  # SAME_BOARD, OTHER_BOARD, or "" where no GPU UUID was recorded
    sd_log: float | None = None  # None: the spread is unknown
    p_value: float | None = None
    noise: float | None = None  # the change an unchanged row exceeds at the row's level
    detectable: float | None = None  # the smallest slowdown this row flags (80% power), beyond the threshold
    level: float = FALSE_ALARM  # the two-sided level the row was judged at
    own_sd_log: float | None = None  # the row's own spread, before the matrix's prior moderated it

    @property
    def method(self) -> str:
        if self.sd_log is None:
            return f"spread unknown: {self.runs} run(s)"
        where = f", {self.board}" if self.board else ""
        moderated = "" if self.own_sd_log is None else f", moderated from {self.own_sd_log:.2%}"
        return f"t on {self.runs} runs{where}{moderated}, in {self.unit}"


def decide(delta: float, significant: bool, threshold: float) -> str:
    if not significant or abs(delta) <= threshold:
        return WITHIN_NOISE
    return REGRESSION if delta > 0 else IMPROVEMENT


def _log(run: Run, cycles: bool) -> float:
    return math.log(run.kcycles if cycles and run.kcycles else run.median_ms)


def _pool(baseline: Baseline, gpu_uuid: str) -> tuple[list[Run], str]:
    """The runs a run of `gpu_uuid` is judged against (its board's where it has any, else every board's), and which
    board that is."""
    runs = list(baseline.runs)
    same = [r for r in runs if gpu_uuid and r.gpu_uuid == gpu_uuid]
    board = SAME_BOARD if same else OTHER_BOARD if gpu_uuid and any(r.gpu_uuid for r in runs) else ""
    return same or runs, board


def _groups(pool: Iterable[Run], cycles: bool) -> list[list[float]]:
    """Log run values by (board, baseline group): the spread is pooled within them."""
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in pool:
        groups[(r.gpu_uuid, r.group)].append(_log(r, cycles))
    return list(groups.values())


def _at(pool: Sequence[Run]) -> float:
    """The runs' mean log latency: where a row sits on the prior's trend, and (of the newest group) its reference."""
    return math.fsum(math.log(r.median_ms) for r in pool) / len(pool)


def matrix_prior(baselines: Iterable[Baseline], gpu_uuid: str) -> Prior | None:
    """The prior the rows of one GPU model's baselines give each other's spreads (spreads.spread_prior): each row's own
    spread in time, on the runs a run of `gpu_uuid` is judged against, with its latency."""
    own = [(pooled_spread(_groups(pool, False), 1), pool) for pool, _ in (_pool(b, gpu_uuid) for b in baselines)]
    known = [(sp, _at(pool)) for sp, pool in own if sp is not None]
    return spread_prior([sp for sp, _ in known], [x for _, x in known])


def compare(
    baseline: Baseline,
    current_ms: float,
    *,
    current_mhz: float | None = None,
    gpu_uuid: str = "",
    threshold: float = THRESHOLD,
    level: float = FALSE_ALARM,
    board_spread: float = BOARD_SPREAD,
    threshold_only: bool = False,
    prior: Prior | None = None,
) -> Comparison:
    """`current_ms` against the baseline's runs. `level` is the row's own two-sided level: the run's rate over its
    rows (Bonferroni) for a verdict taken at once, which `settle` then refines over the matrix. `prior` (from
    `matrix_prior`) moderates the row's spread with its neighbours'. `threshold_only` judges rows of unknown spread
    by the threshold alone (the upgrade report of published numbers) and says so."""
    if not threshold >= 0:
        raise ValueError(f"threshold must be >= 0, got {threshold!r}")
    if not (baseline.value > 0 and current_ms > 0):
        raise ValueError(f"latencies must be positive, got baseline {baseline.value!r} and current {current_ms!r}")
    pool, board = _pool(baseline, gpu_uuid)
    cycles = board == OTHER_BOARD and bool(current_mhz) and all(r.sm_mhz for r in pool)
    if not pool:
        delta = current_ms / baseline.value - 1
        change = decide(delta, True, threshold) if threshold_only else UNKNOWN
        return Comparison(baseline.value, current_ms, baseline.statistic, threshold, change, delta, level=level)
    newest = max(r.group for r in pool)
    reference = [r for r in pool if r.group == newest]
    own = pooled_spread(_groups(pool, cycles), len(reference), board_spread if board == OTHER_BOARD else 0.0)
    spread: Spread | None = None if own is None else own.moderated(prior, _at(pool))
    ref_ms = math.exp(_at(reference))
    ref_log = math.fsum(_log(r, cycles) for r in reference) / len(reference)
    current = math.log(current_ms * current_mhz) if cycles and current_mhz else math.log(current_ms)
    delta = math.expm1(current - ref_log)
    facts: dict[str, Any] = {"unit": CYCLES if cycles else TIME, "runs": len(pool), "board": board, "level": level}
    if own is None or spread is None:
        change = decide(delta, True, threshold) if threshold_only else UNKNOWN
        return Comparison(ref_ms, current_ms, "median", threshold, change, delta, **facts)
    p = spread.p_value(current - ref_log)
    return Comparison(
        ref_ms, current_ms, "median", threshold, decide(delta, p <= level, threshold), delta, **facts,
        sd_log=spread.sd_log, p_value=p, noise=spread.bound(level),
        detectable=spread.detectable(level, threshold=threshold), own_sd_log=None if prior is None else own.sd_log,
    )  # fmt: skip


def settle(comparisons: Sequence[Comparison | None], rate: float = FALSE_ALARM) -> list[Comparison | None]:
    """The verdicts of a whole matrix: Benjamini-Hochberg at `rate` over every row with a p-value, then the practical
    threshold. Under A/A the chance that any row is flagged is at most `rate`."""
    judged = [i for i, c in enumerate(comparisons) if c is not None and c.p_value is not None]
    significant = false_discoveries([comparisons[i].p_value for i in judged], rate)  # type: ignore[misc, union-attr]
    out = list(comparisons)
    for i, sig in zip(judged, significant, strict=True):
        c = out[i]
        assert c is not None
        out[i] = replace(c, change=decide(c.delta, sig, c.threshold))
    return out
