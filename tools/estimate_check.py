"""How far from the rounds a run took is `vitperf ab`'s estimate of the rounds still to come, at each look of the
runs kept in tests/data/ab: each row's estimate taken as the truth (verdicts.budget.rounds_to_decide, the slowest
row's rounds: what the progress line counts) against a predictive forecast (`forecast` below, the mean over its
futures of the round the last open row is decided at), a candidate that has not yet earned its place?

    python tools/estimate_check.py [--threshold 0.75%] [--confidence 95%]

Each run is replayed as `vitperf ab` would judge it today (verdicts.ab.sequential: a look every 4 rounds, decided rows
leaving); a run whose kept rounds end with rows still open is left out (its length is not known).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_vitperf.options.parsers import parse_threshold
from pytest_vitperf.verdicts.ab import BLOCK, MOST_ROUNDS, Row, Side, sequential, spent
from pytest_vitperf.verdicts.budget import _t, rounds_to_decide
from pytest_vitperf.verdicts.stats import CONFIDENCE

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "ab"


PATHS = 400  # predictive paths of the rounds to come: enough that the estimate moves by well under a round


def _margin(m: Any, threshold: float) -> Any:
    """How far a log B/A stands from where it could not be decided: from 1 beyond the threshold (SLOWER, FASTER),
    from the threshold inside it (SAME); as rounds_to_decide measures it."""
    import numpy as np

    edge = math.log1p(threshold)
    return np.where(np.abs(m) >= edge, np.abs(m), edge - np.abs(m))


def forecast(
    rows: Sequence[Row],
    *,
    threshold: float = 0.0075,
    confidence: float = CONFIDENCE,
    look_at: int | None = None,
    paths: int = PATHS,
    seed: int = 0,
) -> Any:
    """What the rounds so far predict of the open rows: for each of `paths` futures, the round in all by which each
    open row is decided (at most MOST_ROUNDS), an array of paths x open rows; None where an open row has no interval
    yet. Each future draws the row's true log B/A from what its rounds say (normal, about its estimate, with its
    spread over sqrt(n)), then each later block's rounds about it, and decides it at the first look whose interval
    rounds_to_decide's rule would decide. Unlike rounds_to_decide, which takes each estimate as the truth (a row on
    the threshold then never decides, and the slowest row sets the run's length), this is the spread of outcomes the
    looks so far leave open."""
    import numpy as np

    open_rows = [r for r in rows if r.open]
    if any(r.interval is None for r in open_rows):
        return None
    rng = np.random.default_rng(seed)
    out = np.full((paths, len(open_rows)), MOST_ROUNDS)
    # How far the rows' true B/A spread about 1, from how far their estimates do beyond their own errors (method of
    # moments over every row with an interval): an A/A's are all 1, and a row's truth is drawn near it.
    judged = [r.interval for r in rows if r.interval is not None]
    logs = [math.log(t.estimate) for t in judged]
    errors = [t.sd_log**2 / t.n for t in judged]
    spread = max(0.0, statistics.fmean(x * x for x in logs) - statistics.fmean(errors)) if judged else 0.0
    for j, r in enumerate(open_rows):
        t = r.interval
        assert t is not None
        n0, s = t.n, max(t.sd_log, 1e-12)
        df = t.df if t.df is not None else n0 - 1
        se2 = s * s / n0
        shrink = spread / (spread + se2)
        truth = math.log(t.estimate) * shrink + rng.standard_normal(paths) * math.sqrt(se2 * shrink)
        total, n_prev = np.full(paths, math.log(t.estimate) * n0), n0
        n, look = (look_at, r.look) if look_at is not None and look_at > n0 else (n0 + BLOCK, r.look + 1)
        undecided = np.ones(paths, dtype=bool)
        while n <= MOST_ROUNDS and undecided.any():
            added = n - n_prev
            total = total + truth * added + rng.standard_normal(paths) * s * math.sqrt(added)
            decided = _margin(total / n, threshold) * math.sqrt(n) > _t(1 - spent(confidence, look), df + n - n0) * s
            out[undecided & decided, j] = n
            undecided &= ~decided
            n_prev, n, look = n, n + BLOCK, look + 1
    return out


def runs() -> list[tuple[str, list]]:
    """Every list of rounds kept in tests/data/ab ([A, B] pairs, each {row: [median ms, SM MHz]})."""
    out = []
    for path in sorted(DATA.glob("*.json")):
        for key, value in json.loads(path.read_text()).items():
            if isinstance(value, list) and value and isinstance(value[0], list) and len(value[0]) == 2:
                rounds = [tuple({k: Side(*v) for k, v in side.items()} for side in pair) for pair in value]
                out.append((f"{path.stem}:{key}", rounds))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=parse_threshold, default=0.0075)
    parser.add_argument("--confidence", type=parse_threshold, default=0.95)
    args = parser.parse_args()
    errors: dict[str, list[int]] = {"forecast": [], "slowest row": []}
    print("run | look at | rounds it took | forecast | slowest row")
    for name, rounds in runs():
        looks = list(range(BLOCK, len(rounds) + 1, BLOCK))
        judged = {n: sequential(rounds[:n], threshold=args.threshold, confidence=args.confidence) for n in looks}
        ended = [n for n in looks if not any(r.open for r in judged[n])]
        if not ended:
            continue
        for n in looks:
            if n >= ended[0]:
                break
            rows = judged[n]
            futures = forecast(rows, threshold=args.threshold, confidence=args.confidence)
            if futures is None:
                continue
            mean_end = round(float(futures.max(axis=1).mean()))
            slowest = rounds_to_decide(rows, threshold=args.threshold, confidence=args.confidence)
            errors["forecast"].append(mean_end - ended[0])
            errors["slowest row"].append(slowest - ended[0])
            print(f"{name} | {n} | {ended[0]} | {mean_end} | {slowest}")
    for rule, e in errors.items():
        if e:
            size = [abs(x) for x in e]
            print(f"{rule}: {len(e)} looks, mean error {statistics.mean(e):+.1f} rounds, mean |error| "
                  f"{statistics.mean(size):.1f}, median |error| {statistics.median(size):.0f}")


if __name__ == "__main__":
    main()
