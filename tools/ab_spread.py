"""Where a `vitperf ab` run's spread comes from: per batch, how far a row's B/A moves from round to round, how much of
a process's deviation is a level shared by the batch's rows and how much is each row's own, and whether that level
follows the SM clock the process ran at; and how much slower a round's first process ran than its second (an order
effect, which the ABBA order cancels in the estimate but not in the spread).

    python tools/ab_spread.py WORK_DIR [--rounds 4]
    python tools/ab_spread.py tests/data/ab/FILE.json --run aa [--rounds 4]

WORK_DIR is a run's --work-dir (its round*-A.json and round*-B.json); a stored file holds rounds as `vitperf ab`
reads them ([A, B] pairs of {row: [median ms, SM MHz]}, tests/data/ab). The first --rounds rounds are read (the
first look's, by default), and a batch's rows that every one of their processes measured. Each process's log median
of a row is centred on its side's mean, so a change between the sides (an A/B) is no spread. The shared level is
the mean over the batch's rows; the variance of the level is what remains of it beyond the rows' own share. From a
work folder it also gives the spread of a process's round medians within it (the noise more rounds would average).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from pytest_vitperf.verdicts.ab import Process, Side, order


@dataclass(frozen=True)
class BatchSpread:
    batch: str
    rows: int
    processes: int
    round_to_round: float  # sd of a row's log B/A over the rounds, RMS over the rows (%)
    shared: float  # sd of a process's level shared by the batch's rows (%)
    own: float  # sd of a row's deviation beyond that level (%)
    clock_r: float | None  # Pearson r of the level against the process's log SM clock; None: the clock did not move
    clock_slope: float | None  # % of time per % of clock
    within: float | None  # median over processes of the sd of a row's round medians within one (%), work folder only
    first_slower: float | None = None  # how much slower a round's first process ran, mean over the rows (%)


def read_work(work: Path, rounds: int) -> tuple[list[tuple[Process, Process]], dict[str, list[list[float]]]]:
    """The first `rounds` rounds of a work folder, and each row's round medians in each process."""
    from pytest_vitperf.measure.measurement import read_benchmark_json

    pairs: list[tuple[Process, Process]] = []
    inside: dict[str, list[list[float]]] = {}
    for i in range(rounds):
        sides = []
        for side in "AB":
            path = work / f"round{i}-{side}.json"
            if not path.exists():
                return pairs, inside
            process: dict[str, Side] = {}
            for m in read_benchmark_json(path):
                row = f"{m.spec.model} {m.spec.precision} b{m.spec.batch}"
                process[row] = Side(m.median, m.sm_mhz)
                inside.setdefault(row, []).append([x for x in m.round_medians() if x is not None])
            sides.append(process)
        pairs.append((sides[0], sides[1]))
    return pairs, inside


def read_stored(path: Path, run: str, rounds: int) -> list[tuple[Process, Process]]:
    data = json.loads(path.read_text())[run][:rounds]
    return [({k: Side(*v) for k, v in a.items()}, {k: Side(*v) for k, v in b.items()}) for a, b in data]


def spread(
    pairs: list[tuple[Process, Process]], inside: dict[str, list[list[float]]] | None = None
) -> list[BatchSpread]:
    """Each batch's spread over `pairs` (rounds of A and B processes); `inside`: each row's round medians a process."""
    rows = [r for r in pairs[0][0] if all(r in p for pair in pairs for p in pair)]
    out = []
    for batch in sorted({r.rsplit(" b", 1)[1] for r in rows}, key=int):
        mine = [r for r in rows if r.endswith(f" b{batch}")]
        ratios = [[math.log(b[r].median_ms / a[r].median_ms) for a, b in pairs] for r in mine]
        round_to_round = math.sqrt(statistics.fmean(statistics.variance(x) for x in ratios)) if len(pairs) > 1 else 0
        dev, clock = [], []
        for s in (0, 1):  # centred on each side's mean
            side = [pair[s] for pair in pairs]
            mean = {r: statistics.fmean(math.log(p[r].median_ms) for p in side) for r in mine}
            dev += [[math.log(p[r].median_ms) - mean[r] for r in mine] for p in side]
            for p in side:
                mhz = [p[r].sm_mhz for r in mine]
                clock.append(math.log(statistics.fmean([m for m in mhz if m])) if all(mhz) else math.nan)
        n, k = len(dev), len(mine)
        level = [statistics.fmean(d) for d in dev]
        own = [x - lv for d, lv in zip(dev, level, strict=True) for x in d]
        own_var = sum(x * x for x in own) / ((n - 2) * (k - 1)) if k > 1 else 0.0
        shared_var = max(0.0, sum(lv * lv for lv in level) / (n - 2) - own_var / k)
        r = slope = None
        if not any(math.isnan(c) for c in clock) and len(set(clock)) > 1:
            r = statistics.correlation(level, clock)
            slope = statistics.linear_regression(clock, level).slope
        within = None
        if inside:
            sds = [statistics.stdev(math.log(x) for x in medians) for row in mine for medians in inside.get(row, [])
                   if len(medians) > 1]  # fmt: skip
            within = 100 * statistics.median(sds) if sds else None
        out.append(BatchSpread(batch, k, n, 100 * round_to_round, 100 * math.sqrt(shared_var), 100 * math.sqrt(own_var),
                               r, slope, within, first_slower(ratios)))  # fmt: skip
    return out


def first_slower(ratios: list[list[float]]) -> float | None:
    """Half the difference between a row's mean log B/A in the rounds B ran first and in those A did (order: ABBA
    BAAB), averaged over the rows, in %: how much slower the first process of a round ran. None unless both orders
    ran."""
    firsts = [a for a, _ in order(len(ratios[0]))] if ratios else []
    if not {"A", "B"} <= set(firsts):
        return None
    def led(r: list[float], side: str) -> float:  # a row's mean log B/A in the rounds `side` ran first
        return statistics.fmean(x for x, f in zip(r, firsts, strict=True) if f == side)

    return 100 * statistics.fmean((led(r, "B") - led(r, "A")) / 2 for r in ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a vitperf ab --work-dir, or a stored rounds file (tests/data/ab)")
    parser.add_argument("--run", help="the stored file's run (aa, delay1, ...)")
    parser.add_argument("--rounds", type=int, default=4, help="the first ROUNDS rounds (default: the first look's)")
    args = parser.parse_args()
    if not args.source.is_dir() and not args.run:
        parser.error("a stored rounds file needs --run")
    try:
        if args.source.is_dir():
            pairs, inside = read_work(args.source, args.rounds)
        else:
            pairs, inside = read_stored(args.source, args.run, args.rounds), {}
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        parser.error(f"{args.source}: cannot read its rounds ({type(exc).__name__}: {exc})")
    if len(pairs) < 2:
        parser.error(f"{args.source}: fewer than 2 rounds to read")
    print(f"{args.source}{f' {args.run}' if args.run else ''}: {len(pairs)} rounds")
    print("| batch | rows | processes | round-to-round B/A | shared level | each row's own | level against clock | "
          "within a process | first process slower by |\n|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    for s in spread(pairs, inside):
        clock = "-" if s.clock_r is None else f"r = {s.clock_r:+.2f}, {s.clock_slope:+.2f}% per 1%"
        within = "-" if s.within is None else f"{s.within:.2f}%"
        first = "-" if s.first_slower is None else f"{s.first_slower:+.2f}%"
        print(f"| {s.batch} | {s.rows} | {s.processes} | {s.round_to_round:.2f}% | {s.shared:.2f}% | {s.own:.2f}% | "
              f"{clock} | {within} | {first} |")  # fmt: skip


if __name__ == "__main__":
    main()
