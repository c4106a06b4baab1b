"""The rounds to come, read from the rows judged so far (verdicts.ab): how many rounds in all every open row would need
were its estimate and spread to hold (the progress line's estimate of the time left), how many of them a quiet
night would decide (the report's "Open rows" line), and how many rounds `--budget-s` buys next."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from pytest_vitperf.verdicts.ab import BLOCK, MOST_ROUNDS, THRESHOLD, Row, spent
from pytest_vitperf.verdicts.stats import CONFIDENCE


def rounds_to_decide(
    rows: Sequence[Row], *, threshold: float = THRESHOLD, confidence: float = CONFIDENCE, look_at: int | None = None
) -> int:
    """The rounds in all, in whole blocks, by which every open row would be decided if its estimate and spread held:
    SAME once its interval fits inside the threshold, SLOWER or FASTER once it clears it; at most MOST_ROUNDS (a row
    on the threshold is never decided). An estimate for the time left, not a plan: 0 when no row is open. Between
    looks (`rows` as the rounds so far would be judged at their look, ab.progress), `look_at` is the rounds at which
    that look comes: it is the first a row may be decided at. An open row without an interval (under 3 rounds) gives
    MOST_ROUNDS: nothing says when it decides. Counted as decided at the next look, it put the estimate after two
    rounds 50-86% short in 27 of the 41 runs in tests/data/ab: every one that went on past its first look."""
    need = 0
    for r in rows:
        t = r.interval
        if not r.open:
            continue
        if t is None:
            return MOST_ROUNDS
        df = t.df if t.df is not None else t.n - 1
        beyond = abs(math.log(t.estimate)) - math.log1p(threshold)
        margin = abs(math.log(t.estimate)) if beyond >= 0 else -beyond  # SLOWER / FASTER: tested against 1
        n, look = (look_at, r.look) if look_at is not None and look_at > t.n else (t.n + BLOCK, r.look + 1)
        while n < MOST_ROUNDS and margin * math.sqrt(n) <= _t(1 - spent(confidence, look), df + n - t.n) * t.sd_log:
            n, look = n + BLOCK, look + 1
        need = max(need, min(n, MOST_ROUNDS))
    return need


def decided_if_unchanged(
    rows: Sequence[Row], totals: Sequence[int], *, threshold: float = THRESHOLD, confidence: float = CONFIDENCE
) -> dict[int, int]:
    """How many of the open rows more rounds would decide, by each of `totals` rounds in all, were each row's B/A 1
    with the spread it has: what a quiet night needs. (At a row's own estimate, one near the threshold never
    decides: rounds_to_decide.)"""
    need = [rounds_to_decide([replace(r, interval=replace(r.interval, estimate=1.0))], threshold=threshold,
                             confidence=confidence) for r in rows if r.open and r.interval is not None]  # fmt: skip
    return {n: sum(k <= n for k in need) for n in totals}


def _t(p: float, df: float) -> float:
    from scipy.stats import t

    return float(t.ppf(p, df))


def more_rounds(rows: Sequence[Row], *, per_round_s: float, left_s: float) -> int:
    """How many rounds to run next: one block (a look) while a row is open, if `left_s` seconds pay for it at
    `per_round_s`; else half a block, two rounds (AB BA: each side still leads once, and a linear drift still cancels
    in their four processes), if they fit; else none. Of simulated A/As of the latency suite, a look at 6 rounds had
    12 or more of its 14 rows SAME in 78% and 52% (tools/ab_stopping.py --then 2, spreads x0.8 and x0.9), the first
    look at 4 in 47% and 24% (docs/statistics.md)."""
    if not any(r.open for r in rows):
        return 0
    if per_round_s <= 0 or left_s >= per_round_s * BLOCK:
        return BLOCK
    return BLOCK // 2 if left_s >= per_round_s * BLOCK // 2 else 0
