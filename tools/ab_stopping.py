"""`vitperf ab`'s stopping rule under simulation: rows judged after every block of 4 rounds and leaving once decided
(verdicts.ab.sequential, the code a run uses), on matrices of known spread. Prints, for an A/A and for +1% on one
precision, the false-verdict rate per row and the power, each with its Clopper-Pearson 95% interval.

    python tools/ab_stopping.py [--matrices 10000] [--rounds 16] [--seed 1] [--scale 1] [--then 4] [--states 0]
                                [--most M] [--one-way] [--models M] [--noisy F] [--no-families] [--threshold 0.75%]
                                [--recorded FILE:KEY ... --target 'MODEL PRECISION']

A matrix is the latency suite's: one model, FP16, BF16, FP8 and INT8 at batch 1 and 64 (8 engines, 14 rows). A
process's median of a row is its true latency times exp(noise): a part shared by the family (the clock under the
power cap) and a part of the row's own, at the spreads of H200 processes (the recorded A/As of 2026-11-29 with
today's process plan, tests/data/ab/h200-ab-short-slices-2026-11-29.json: a row's median spread 0.13-0.20% between
processes at batch 1, 0.16-0.33% at batch 64); --scale multiplies them (the 4-round H200 runs of 2026-12-02 spread
about twice as much at batch 64). The practical threshold is `vitperf ab`'s (0.75%) unless --threshold says.
- A/A: a false verdict is a row SLOWER or FASTER.
- +1% on FP8 (side B): a false verdict is one of FP8's four rows SAME or FASTER, or another row SLOWER or FASTER;
  the power is the share of FP8's rows SLOWER.
The nominal rate of each is 1 - confidence (5%).
It also prints how many rows the A/A's first look (4 rounds) calls SAME, where 12 of 14 are asked for (issue 83),
and how many by the second look, --then rounds later (2: the half block a budget that has no room for 4 buys).
1,000 matrices a scale (2026-12-02): 12 or more in 10% of them at 1, 47% at 0.8, 73% at 0.7, 92.5% at 0.6. Six cold
H200 A/As had them twice (13, 8, 11, 13, 9, 5).
--states Q puts a process's family in another state (STATE_MOVE, either way at random; --one-way: the same way in
every process of a matrix, as ViT-S ran 4.4% slower in two processes of 16, 2026-12-03) with chance Q. A family's
processes found in another state are set aside when they all sit the same way (verdicts.ab.states); --most M sets
aside no more than M (0: none, every family with one unjudged; 1: one). docs/statistics.md has the rates.
--models M makes a matrix of M such models (14 M rows), and --noisy F multiplies the last one's batch-1 spreads (the
nightly set's ViT-S spread 2-3 times its other families at batch 1, H200, 2026-12-04); --no-families lets rows
borrow the matrix's spread alone, not also their family's where it is clearly larger (spreads.group_prior).
--recorded FILE:KEY draws a matrix's rounds from the first blocks of recorded runs instead (tests/data/ab, the 4
rounds before a run's first look, every row measured), round i from round i % 4 of a block at random, with each
row's B set level with A; --target names the model and precision that +1% slows ('vit_large_patch16_224 fp8'). It
prints how often all the target's rows are SLOWER. Rounds past the fourth are first-block rounds again: a
projection from the spreads a run had before its first look, not a replay.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from ab_spread import read_stored  # this folder is on sys.path when run as a script
from scipy.stats import binomtest

from pytest_vitperf.options.parsers import parse_threshold
from pytest_vitperf.verdicts.ab import BLOCK, FASTER, SAME, SLOWER, THRESHOLD, Process, Row, Side, sequential

Block = list[tuple[Process, Process]]

PRECISIONS = {"fp16": 1.0, "bf16": 1.01, "fp8": 0.87, "int8": 1.3}  # relative latencies (H200, ViT-B)
BATCHES = {1: (0.6, 0.0010, 0.0012), 64: (5.9, 0.0020, 0.0018)}  # ms, family sd, own sd (log, per process)


STATE_MOVE = 0.045  # how far a family run in another state sits: 4-7% at batch 64 (H200, 2026-12-03), ~6% at batch 1


def matrix(
    rng: np.random.Generator, rounds: int, slower: dict[str, float], scale: float = 1.0, states: float = 0.0,
    one_way: bool = False, models: int = 1, noisy: float = 1.0,
) -> list[tuple[Process, Process]]:
    """`rounds` rounds of one simulated matrix of `models` models ('vit0', 'vit1', ...); `slower` multiplies side
    B's rows of those names ('vit0 fp8'); `scale` the spreads, and `noisy` the last model's at batch 1 (as the
    nightly set's ViT-S spread 2-3 times its other families at batch 1, H200, 2026-12-04); `states`, the chance
    that a process runs a family in another state (STATE_MOVE faster or slower, either side alike; `one_way`: the
    same way in all of a matrix's processes)."""
    way = {(m, b): rng.choice((-1.0, 1.0)) for m in range(models) for b in BATCHES} if one_way else {}
    out = []
    for _ in range(rounds):
        pair = []
        for side in "AB":
            process: dict[str, Side] = {}
            for m in range(models):
                for batch, (ms, family_sd, own_sd) in BATCHES.items():
                    spread = scale * (noisy if m == models - 1 and batch == 1 else 1.0)
                    shared = rng.normal(0.0, family_sd * spread)
                    if states and rng.random() < states:
                        shared += math.log1p(STATE_MOVE) * (way[(m, batch)] if one_way else rng.choice((-1.0, 1.0)))
                    for p, rel in PRECISIONS.items():
                        factor = slower.get(f"vit{m} {p}", 1.0) if side == "B" else 1.0
                        noise = shared + rng.normal(0.0, own_sd * spread)
                        process[f"vit{m} {p} b{batch}"] = Side(ms * rel * factor * math.exp(noise))
            pair.append(process)
        out.append((pair[0], pair[1]))
    return out


def recorded(sources: Sequence[str]) -> list[Block]:
    """The first blocks of recorded runs ('FILE:KEY': a list of rounds [A, B], each {row: [median ms, SM MHz]}), each
    row's B divided by its median B/A over all of them: every row's truth is then 1, at the spreads it was measured
    with. Only rows that every round of every block measured are kept."""
    blocks = []
    for source in sources:
        path, _, key = source.rpartition(":")
        try:
            block = read_stored(Path(path), key, BLOCK)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise SystemExit(f"ab_stopping: cannot read the rounds '{key}' of {path} ({e!r}); name them FILE:KEY, "
                             "e.g. --recorded tests/data/ab/h200-ab-nightly-cold-2026-12-05.json:aa") from None
        if len(block) < BLOCK:
            raise SystemExit(f"ab_stopping: {source} holds {len(block)} rounds, not a block of {BLOCK}")
        blocks.append(block)
    names = set.intersection(*(set(p) for block in blocks for pair in block for p in pair))
    level = {n: float(np.median([math.log(b[n].median_ms / a[n].median_ms) for block in blocks for a, b in block]))
             for n in names}  # fmt: skip
    return [[({n: a[n] for n in names}, {n: Side(b[n].median_ms * math.exp(-level[n]), b[n].sm_mhz) for n in names})
             for a, b in block] for block in blocks]  # fmt: skip


def resampled(rng: np.random.Generator, blocks: Sequence[Block], rounds: int, slower: dict[str, float]) -> Block:
    """`rounds` rounds, round i that of a block drawn at random at i's place in a block (i % 4): the nightly set's
    ViT-S ran batch 16 in another state in processes 0A, 1B and 3A (each its round's first) of five recorded first
    blocks, never two on a side, which rounds drawn from anywhere would pile up. `slower` multiplies side B's rows
    of those names."""
    out = []
    for i in range(rounds):
        a, b = blocks[int(rng.integers(len(blocks)))][i % BLOCK]
        factor = {n: slower.get(n.rsplit(" ", 1)[0], 1.0) for n in b}
        out.append((a, {n: Side(s.median_ms * factor[n], s.sm_mhz) for n, s in b.items()}))
    return out


def run(
    matrices: int, rounds: int, delta: float, seed: int, confidence: float = 0.95, scale: float = 1.0,
    then: int = BLOCK, states: float = 0.0, most: int | None = None, one_way: bool = False, models: int = 1,
    noisy: float = 1.0, by_family: bool = True, threshold: float = THRESHOLD, blocks: Sequence[Block] = (),
    target: str = "vit0 fp8",
) -> dict[str, Any]:  # fmt: skip
    """What `matrices` simulated runs of up to `rounds` rounds decide, with `delta` (0: an A/A) on `target` (a model
    and precision) as side B; `most`: the processes in another state a family may have set aside
    (verdicts.ab.states); `by_family`: whether a family's latencies lend their spread (verdicts.ab.judge); `blocks`:
    recorded first blocks to draw the rounds from (resampled) instead of the simulated latency suite."""
    rng = np.random.default_rng(seed)
    wrong = rows = hit = targets = decided = every = 0
    spent_rounds: list[int] = []
    first_look: list[int] = []  # rows SAME at the first look, a matrix each
    second_look: list[int] = []  # and by the second
    any_wrong = 0
    for _ in range(matrices):
        slower = {target: 1 + delta} if delta else {}
        simulated = (resampled(rng, blocks, rounds, slower) if blocks
                     else matrix(rng, rounds, slower, scale, states, one_way, models, noisy))  # fmt: skip
        judged: Sequence[Row] = sequential(simulated, threshold=threshold, confidence=confidence, step=then,
                                           most=most, by_family=by_family)  # fmt: skip
        bad = found = mine = 0
        for r in judged:
            rows += 1
            decided += r.verdict in (SAME, SLOWER, FASTER)  # not those left unjudged in two states
            if delta > 0 and r.name.startswith(target + " "):
                mine += 1
                found += r.verdict == SLOWER
                bad += r.verdict in (SAME, FASTER)
            else:
                bad += r.verdict in (SLOWER, FASTER)
        targets, hit, every = targets + mine, hit + found, every + (mine > 0 and found == mine)
        wrong += bad
        any_wrong += bad > 0
        spent_rounds.append(max(r.rounds for r in judged))
        first_look.append(sum(r.verdict == SAME and r.look == 1 for r in judged))
        second_look.append(sum(r.verdict == SAME and r.look <= 2 for r in judged))
    return {
        "rows": rows, "false": wrong, "matrices with one": any_wrong, "matrices": matrices, "decided": decided,
        "power": (hit, targets), "all slower": every, "rounds": float(np.mean(spent_rounds)),
        "same at the first look": first_look, "same by the second look": second_look,
    }  # fmt: skip


def rate(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(0.95, method="exact") if n else None
    return f"{k / n:.2%} [{ci.low:.2%}, {ci.high:.2%}]" if ci else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrices", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--then", type=int, default=BLOCK, help="rounds between looks after the first (an even number)")
    parser.add_argument("--states", type=float, default=0.0, help="a process's chance to run a family in another state")
    parser.add_argument("--most", type=int, default=None, help="the most processes a family may set aside (any)")
    parser.add_argument("--one-way", action="store_true", help="a family's other state is the same way all the run")
    parser.add_argument("--models", type=int, default=1, help="models in a matrix, 14 rows each")
    parser.add_argument("--noisy", type=float, default=1.0, help="the last model's spreads at batch 1, times")
    parser.add_argument("--no-families", action="store_true", help="rows borrow the matrix's spread alone")
    parser.add_argument("--threshold", type=parse_threshold, default=THRESHOLD, help="the practical threshold (0.75%%)")
    parser.add_argument("--recorded", nargs="+", default=[], metavar="FILE:KEY",
                        help="draw the rounds from these runs' first blocks (tests/data/ab)")
    parser.add_argument("--target", default="vit0 fp8", help="the model and precision +1%% slows (vit0 fp8)")
    args = parser.parse_args()
    blocks = recorded(args.recorded) if args.recorded else []
    if blocks and not any(n.startswith(args.target + " ") for n in blocks[0][0][0]):
        models = sorted({n.rsplit(" ", 2)[0] for n in blocks[0][0][0]})
        parser.error(f"no row of '{args.target}' in the recorded rounds; name one, e.g. --target '{models[0]} fp8'")
    source = (f"{len(blocks[0][0][0])} engines' rows drawn from the first blocks of {', '.join(args.recorded)}"
              if blocks else f"{14 * args.models} rows, the last model's batch-1 spreads x{args.noisy:g}, spreads "
              f"x{args.scale:g}, a family in another state {args.states:.1%} of processes"
              f"{' (one way)' if args.one_way else ''}")  # fmt: skip
    print(f"{args.matrices} matrices of {source}; up to {args.rounds} rounds, threshold {args.threshold:.2%}, 95%, "
          f"{'the matrix' if args.no_families else 'the matrix and the families'} lending spreads, looks at {BLOCK} "
          f"rounds and every {args.then} after, {'any' if args.most is None else args.most} set aside")  # fmt: skip
    for name, delta in (("A/A", 0.0), (f"+1% on {args.target}", 0.01)):
        r = run(args.matrices, args.rounds, delta, args.seed, scale=args.scale, then=args.then, states=args.states,
                most=args.most, one_way=args.one_way, models=args.models, noisy=args.noisy, blocks=blocks,
                by_family=not args.no_families, threshold=args.threshold, target=args.target)  # fmt: skip
        hit, targets = r["power"]
        print(f"{name}: false verdicts per row {rate(r['false'], r['rows'])}; matrices with one "
              f"{rate(r['matrices with one'], r['matrices'])}; rows decided {rate(r['decided'], r['rows'])}; "
              f"power {rate(hit, targets) if targets else '-'}"
              + (f", all its rows SLOWER {rate(r['all slower'], r['matrices'])}" if delta else "")
              + f"; mean rounds {r['rounds']:.1f}")  # fmt: skip
        if not delta and args.models == 1 and not blocks:
            first = np.array(r["same at the first look"])
            low, mid, high = np.percentile(first, [10, 50, 90])
            second = np.array(r["same by the second look"])
            print(f"A/A, rows SAME at the first look: {mid:g} of {14 * args.models} (10th-90th percentile "
                  f"{low:g}-{high:g}); 12 or "
                  f"more {rate(int((first >= 12).sum()), len(first))}; by the second look ({BLOCK + args.then} "
                  f"rounds) {rate(int((second >= 12).sum()), len(second))}")  # fmt: skip


if __name__ == "__main__":
    main()
