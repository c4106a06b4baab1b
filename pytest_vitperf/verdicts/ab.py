"""A/B verdicts: a candidate environment (B) against the current one (A), measured on one GPU in fresh processes that
alternate sides in a balanced order, so that what the machine does (clocks, heat, a neighbour) falls on both sides.

One round is a pair of processes, one per side. A row's observation is the log of B's median over A's in that
pair; the rounds' observations give an interval (stats.moderated_intervals: Student's t on the log ratios, each row's
spread moderated toward the matrix's, as limma does, or toward its family's like rows' where they spread clearly more),
in time and, where both sides recorded SM clocks, in cycles. A row is
- SLOWER (FASTER) when Benjamini-Hochberg over the matrix keeps its test of a ratio of 1 and its estimate is beyond
  the practical threshold;
- SAME when its interval lies within the threshold on both sides: an equivalence shown, not a difference missed.
  The interval is two one-sided tests at the rate its look may spend (spent). The run passes only if every row is
  SAME or FASTER, so a row truly beyond the threshold passes it at most at that rate, however many rows there are:
  an intersection-union test (Berger and Hsu 1996), which needs no share among the rows. Bonferroni over the rows
  would guard a claim the gate never makes (that no single SAME is wrong) and leave most noisy rows UNKNOWN;
- UNKNOWN otherwise: more rounds may tell.
Speedups over FP16 are judged the same way, each side's speedup taken within its own process.

Rows are judged after every block of rounds (a look), and a row decided at a look keeps that verdict and leaves the
later rounds (Pinpoint's way: only the open comparisons get more runs). Look k may spend (1 - confidence) / (k(k+1))
of the error rate, which sums to under 1 - confidence over any number of looks: by the union bound over looks, a
row's chance of ever being called wrongly, and the run's share of false SLOWER or FASTER (Benjamini-Hochberg at each
look over the rows still open), stay at the nominal rate however long the run goes on (docs/statistics.md;
tools/ab_stopping.py simulates it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_vitperf.verdicts.stats import (
    CONFIDENCE,
    Interval,
    detectable_change,
    false_discoveries,
    family_wise,
    moderated_intervals,
)

SAME, SLOWER, FASTER, UNKNOWN = "SAME", "SLOWER", "FASTER", "UNKNOWN"
# The practical threshold: SLOWER asks the estimate to exceed it, so a gate that must flag +1% can take 0.75% at
# most. The widest decides most in the fewest rounds: 11 of 14 latency-suite A/As (H200s, 2026-12-02 to -04) had 12
# or more rows SAME in 6 rounds at 0.75%, 4 at 0.5%; +1% on FP8 as before (docs/statistics.md).
THRESHOLD = 0.0075
BLOCK = 4  # rounds come in ABBA BAAB blocks of four: each side leads as often as it follows
MOST_ROUNDS = 64  # the most rounds a run plans for one aim: beyond, a row's spread, not its rounds, is what to fix
LATENCY, SPEEDUP = "latency", "speedup over fp16"
# Exit codes of `vitperf ab`: what a nightly job branches on.
EXIT_SAME, EXIT_SLOWER, EXIT_UNKNOWN = 0, 1, 3


@dataclass(frozen=True)
class Side:
    """One row as one process measured it."""

    median_ms: float
    sm_mhz: float | None = None


@dataclass(frozen=True)
class Row:
    """The verdict of one row: `interval` is B over A (above 1: B is slower, or for a speedup, faster)."""

    name: str  # model precision bBATCH
    what: str  # LATENCY or SPEEDUP
    rounds: int
    interval: Interval | None  # in time, at the equivalence level (judge)
    cycles: Interval | None
    verdict: str
    detectable: float  # the smallest change this many rounds flag SLOWER 4 times in 5 (judge)
    gpu: str | None = None  # where its rounds ran, when vitperf ab split the suite over GPUs
    two_states: bool = False  # its family ran in two states among one side's processes: not judged (other_states)
    look: int = 1  # the look that judged it: its last, or the one that decided it (it left the rounds then)

    @property
    def open(self) -> bool:
        """Whether more rounds may still decide it: UNKNOWN, and not for two states (which rounds do not settle)."""
        return self.verdict == UNKNOWN and not self.two_states

    def to_dict(self) -> dict[str, object]:
        """Plain data for JSON: an infinite 'can see' (fewer than 3 rounds) is null, which JSON can say."""
        return {**asdict(self), "detectable": self.detectable if math.isfinite(self.detectable) else None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Row:
        """A row as to_dict wrote it (a run's --json)."""
        ratios = {k: None if d[k] is None else Interval.from_dict(d[k]) for k in ("interval", "cycles")}
        seen = math.inf if d["detectable"] is None else float(d["detectable"])
        return cls(**{**d, **ratios, "detectable": seen})


def order(rounds: int) -> list[tuple[str, str]]:
    """The sides of each round's pair: ABBA BAAB ..., so that every side runs first as often as second, and a drift
    that is linear in time cancels within each block of four processes."""
    return [("A", "B") if i % 4 in (0, 3) else ("B", "A") for i in range(rounds)]


Process = Mapping[str, Side]  # one process's rows by name
Pair = tuple[Side, Side]  # one round of one row: (A, B)


def family_of(name: str) -> str:
    """'MODEL bBATCH' of a row named 'MODEL PRECISION bBATCH': the engines a process measured together."""
    model, _, batch = name.rsplit(" ", 2)
    return f"{model} {batch}"


# How far, all one way, a family's rows sit from their side's medians in a process in another state: on average, and
# each (a state moves every precision, each row with its own noise: batch 64 ran 2.7-5.1% faster, 3.6-4.0% on
# average, in 2 of 10 processes of one side, where every other process sat within 1.1%; H200, 2026-12-04).
STATE, STATE_ROW = 0.03, 0.02


def other_states(rounds: Sequence[tuple[Process, Process]]) -> dict[tuple[int, str], list[str]]:
    """The processes that ran a family in another state than their side's others, as (round, side) -> ['MODEL
    bBATCH', ...]: every row of the family (two or more) at least STATE_ROW from its side's median over the rounds,
    all the same way, and STATE on average. On H200s a process's batch-1 latencies sat in one of two states about 6%
    apart, every precision together (2026-11-28): 1 process of 24 in one A/A, 6 of 10 in another run. Such a process
    breaks what the intervals assume (one spread per row): `states` sets them aside, or leaves the family unjudged
    (judge's `two_states`). A family that the round's other process ran as far the same way is not counted: the
    round's pair cancels what the two shared (DINOv2 at batch 16 ran 4% faster in both processes of one round on an
    H200, 2026-12-03)."""
    return {k: sorted(ways) for k, ways in _ways(rounds).items()}


def _ways(rounds: Sequence[tuple[Process, Process]]) -> dict[tuple[int, str], dict[str, int]]:
    """other_states, with the way each family sat: (round, side) -> {'MODEL bBATCH': 1 slower, -1 faster}."""
    if len(rounds) < 3:
        return {}
    bar, row_bar = math.log1p(STATE), math.log1p(STATE_ROW)
    moved: dict[tuple[int, str], dict[str, float]] = {}  # (round, side) -> {row: log distance from its side's median}
    for k, side in enumerate("AB"):
        logs = [{n: math.log(s.median_ms) for n, s in r[k].items()} for r in rounds]
        middle = {n: statistics.median(x[n] for x in logs if n in x) for n in {n for x in logs for n in x}}
        for i, x in enumerate(logs):
            moved[(i, side)] = {n: v - middle[n] for n, v in x.items()}

    def one_way(d: Mapping[str, float]) -> dict[str, int]:
        families: dict[str, list[float]] = {}
        for name, v in d.items():
            families.setdefault(family_of(name), []).append(v)
        return {f: 1 if x[0] > 0 else -1 for f, x in families.items()
                if len(x) > 1 and (min(x) >= row_bar or max(x) <= -row_bar) and abs(math.fsum(x)) >= bar * len(x)}

    out = {}
    for (i, side), d in moved.items():
        other = moved[(i, "B" if side == "A" else "A")]
        apart = one_way({n: v - other[n] for n, v in d.items() if n in other})
        if odd := {f: way for f, way in one_way(d).items() if f in apart}:
            out[(i, side)] = odd
    return out


@dataclass(frozen=True)
class States:
    """What other_states found, as the verdicts use it: a family whose processes in another state all sat the same
    way (all slower than their sides' others, or all faster) has their rounds of it set aside (`aside`, (round,
    side) -> ['MODEL bBATCH', ...]; `kept` is the rounds without them); one whose processes sat both ways ran in two
    states (`mixed`): its rows are not judged."""

    kept: list[tuple[Process, Process]]
    mixed: set[str]
    found: dict[tuple[int, str], list[str]]  # other_states' own

    @property
    def aside(self) -> dict[tuple[int, str], list[str]]:
        return {k: kept for k, families in self.found.items() if (kept := [f for f in families if f not in self.mixed])}


def states(rounds: Sequence[tuple[Process, Process]], most: int | None = None) -> States:
    """The rounds as the verdicts take them (States); `most`, the most processes a family may have set aside (None:
    any number, all one way; the simulation's other rules). A process in another state is as likely either side's
    in an A/A, and the pair of its round is left out of that family whichever side it is: nothing of B against A is
    lost but that round. Those found are the minority of their side, as they sit beyond its median; all the same
    way, they are one state's rare processes, whichever side ran them. An H200 ran one process of 12 (the latency
    suite's A/A, 2026-12-03: its batch-64 family 4-7% faster, at 1957 MHz where the others ran at 1800-1815 under
    the power cap), and two of 16 (the nightly set's ViT-S at batch 16, 2026-12-03: 4.4% slower, one each side).
    Processes found both ways are a mixture that setting aside would turn into one side's majority against the
    other's: where states are common, a side's median sits in either, and only the processes beyond it are found
    (a +1% run of 4 rounds, 2026-11-28: A's processes ran mostly in the faster state and B's in the slower, and the
    one found on A's side was slower, the one on B's faster). They stay unjudged."""
    ways = _ways(rounds)
    seen: dict[str, list[int]] = {}
    for families in ways.values():
        for f, way in families.items():
            seen.setdefault(f, []).append(way)
    mixed = {f for f, w in seen.items() if len(set(w)) > 1 or (most is not None and len(w) > most)}
    found = {k: sorted(families) for k, families in ways.items()}
    out = []
    for i, (a, b) in enumerate(rounds):
        gone = {f for side in "AB" for f in found.get((i, side), ()) if f not in mixed}  # aside
        out.append((_without(a, gone), _without(b, gone)) if gone else (a, b))
    return States(out, mixed, found)


def _without(process: Process, families: Collection[str]) -> Process:
    return {n: s for n, s in process.items() if family_of(n) not in families}


def pairs(rounds: Sequence[tuple[Process, Process]]) -> dict[tuple[str, str], list[Pair]]:
    """Each row's (A, B) pair per round, keyed by (name, what); a row missing on either side of a round is left out
    of that round. Speedups over FP16 come from each process's own fp16 row of the same model and batch (names
    'MODEL PRECISION bBATCH'), as the candidate's time over fp16's: B over A above 1 still means B is slower."""
    out: dict[tuple[str, str], list[Pair]] = {}
    for a, b in rounds:
        for name in sorted(a.keys() & b.keys()):
            out.setdefault((name, LATENCY), []).append((a[name], b[name]))
            model, precision, batch = name.rsplit(" ", 2)
            ref = f"{model} fp16 {batch}"
            if precision != "fp16" and ref in a and ref in b:
                relative = (Side(a[name].median_ms / a[ref].median_ms), Side(b[name].median_ms / b[ref].median_ms))
                out.setdefault((name, SPEEDUP), []).append(relative)
    return out


def _logs(pairs: Sequence[Pair], cycles: bool) -> list[float]:
    """log(B / A) per round; in cycles (time x SM clock) only where every round has both clocks."""
    if cycles and not all(a.sm_mhz and b.sm_mhz for a, b in pairs):
        return []
    return [math.log(b.median_ms / a.median_ms * ((b.sm_mhz or 1.0) / (a.sm_mhz or 1.0) if cycles else 1.0))
            for a, b in pairs]  # fmt: skip


def decide(interval: Interval | None, significant: bool, threshold: float) -> str:
    if interval is None:
        return UNKNOWN
    if significant and interval.estimate > 1 + threshold:
        return SLOWER
    if significant and interval.estimate < 1 / (1 + threshold):
        return FASTER
    if interval.low >= 1 / (1 + threshold) and interval.high <= 1 + threshold:
        return SAME
    return UNKNOWN


def spent(confidence: float, look: int) -> float:
    """The error rate look `look` (1, 2, ...) may spend: (1 - `confidence`) / (look (look + 1)), half of it at the
    first look, a sixth at the second, and so on, summing to under 1 - `confidence` however many looks are taken."""
    return (1 - confidence) / (max(1, look) * (max(1, look) + 1))


def equivalence_level(confidence: float, look: int) -> float:
    """The two-sided confidence of the intervals that decide SAME at `look`: two one-sided tests at the rate it may
    spend (95% at a 95% confidence's first look)."""
    return 1 - 2 * spent(confidence, look)


def judge(
    rows: Mapping[tuple[str, str], Sequence[Pair]],
    *,
    threshold: float = THRESHOLD,
    confidence: float = CONFIDENCE,
    look: int = 1,
    two_states: Collection[str] = (),
    decided: Mapping[tuple[str, str], Row] | None = None,
    by_family: bool = True,
) -> list[Row]:
    """Every row's verdict at `look`. The rows of `decided` (by (name, what)) keep the verdicts earlier looks gave
    them; the others are judged at the rate this look may spend (spent): held over them by Benjamini-Hochberg for
    SLOWER and FASTER, and each row's, one-sided on each side, for SAME. "Can see" is taken at Benjamini-Hochberg's
    strictest step, the Bonferroni share of every open row, so that it is never optimistic. The rows of the families
    in `two_states` ('MODEL bBATCH', other_states) are UNKNOWN, whatever their intervals say. Every row's rounds,
    decided or not, inform the spreads the open ones borrow: a family's rows (its latencies; its speedups) share
    their processes' noise, and lend theirs where it is clearly above the matrix's (`by_family`, group_prior)."""
    decided = decided or {}
    rate = spent(confidence, look)
    open_rows = [k for k in rows if k not in decided]
    level = family_wise(1 - rate, len(open_rows))
    # Spreads follow latencies (short products spread more): a row's is read at its precision's log latency.
    latency = {k[0]: math.fsum(math.log(a.median_ms) for a, _ in p) / len(p) for k, p in rows.items()
               if k[1] == LATENCY and p}  # fmt: skip
    at = {k: latency.get(k[0], 0.0) for k in rows}
    groups = {k: (family_of(k[0]), k[1]) for k in rows if by_family}
    times = moderated_intervals({k: _logs(p, False) for k, p in rows.items()}, at, 1 - 2 * rate, groups)
    cycles = moderated_intervals({k: _logs(p, True) for k, p in rows.items()}, at, 1 - 2 * rate, groups)
    p_values = {k: t.p_value for k in open_rows if (t := times[k]) is not None}
    kept = dict(zip(p_values, false_discoveries(list(p_values.values()), rate), strict=True))
    out = []
    for name, what in sorted(rows):
        if (name, what) in decided:
            out.append(decided[(name, what)])
            continue
        t, c = times[(name, what)], cycles[(name, what)]
        n = 0 if t is None else t.n
        seen = math.inf if t is None else detectable_change(t.sd_log, n, level, threshold=threshold, df=t.df)
        odd = family_of(name) in two_states
        verdict = UNKNOWN if odd else decide(t, kept.get((name, what), False), threshold)
        out.append(Row(name, what, n, t, c, verdict, seen, two_states=odd, look=look))
    return out


def settled(rows: Iterable[Row]) -> dict[tuple[str, str], Row]:
    """The rows a look decided (or found in two states), by (name, what): they keep their verdicts and leave."""
    return {(r.name, r.what): r for r in rows if not r.open}


def still_measured(rows: Iterable[Row]) -> set[str]:
    """The rows ('MODEL PRECISION bBATCH') the next rounds measure: each with a latency or speedup row still open,
    and the FP16 of each family with one, which every speedup of the family is taken over."""
    names = {r.name for r in rows if r.open}
    return names | {f"{model} fp16 {batch}" for model, _, batch in (n.rsplit(" ", 2) for n in names)}


def sequential(
    rounds: Sequence[tuple[Process, Process]],
    *,
    threshold: float = THRESHOLD,
    confidence: float = CONFIDENCE,
    first: int = BLOCK,
    step: int = BLOCK,
    most: int | None = None,
    by_family: bool = True,
    at: Sequence[int] | None = None,
) -> list[Row]:
    """The rows as a run would judge `rounds` (recorded with every row in every round): a look after the first
    `first` rounds and after every `step` after them, each decided row leaving the later rounds (its data there is
    dropped, as it would not have been measured; still_measured). What `vitperf ab` does as it runs, replayed.
    `at`: the rounds after which the looks came instead, as a live run logs them (a half block where its budget
    paid for no whole one: budget.more_rounds)."""
    rows: list[Row] = []
    kept: list[tuple[Process, Process]] = []
    look, begin = 0, 0
    for end in at or [*range(first, len(rounds), step), len(rounds)]:
        names = still_measured(rows) if rows else None
        for a, b in rounds[begin:end]:
            kept.append((a, b) if names is None else (_only(a, names), _only(b, names)))
        look, begin = look + 1, end
        found = states(kept, most)
        rows = judge(pairs(found.kept), threshold=threshold, confidence=confidence, look=look,
                     two_states=found.mixed, decided=settled(rows), by_family=by_family)  # fmt: skip
        if not any(r.open for r in rows):
            break
    return rows


def _only(process: Process, names: Collection[str]) -> Process:
    return {n: s for n, s in process.items() if n in names}


def exit_code(rows: Iterable[Row]) -> int:
    """0: every row SAME or FASTER; 1: a row SLOWER; 3: none slower, but a row UNKNOWN."""
    verdicts = {r.verdict for r in rows}
    return EXIT_SLOWER if SLOWER in verdicts else EXIT_UNKNOWN if UNKNOWN in verdicts else EXIT_SAME
