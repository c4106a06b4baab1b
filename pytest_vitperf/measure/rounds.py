"""Interleaved rounds: the engines of a family timed in turns, so that a speedup is a paired comparison.

Timed one after the other in 5 s blocks, two engines see different minutes of the GPU: its clock under the power cap,
its temperature, whatever else the host did. Timed in rounds, each engine gets a slice of every round, so drift falls
on both sides of a ratio alike, and the rounds' ratios are repeated observations whose spread is an interval
(verdicts/stats.py).

A slice is cut into `turns` short turns, and each turn visits every engine in an order shuffled for that turn. At
batch 64 an H100 at its 700 W cap swings its SM clock by 10% within a second: two engines timed 0.2 s apart see
different clocks, and an A/A pair read 1.00x +- 0.9% over 20 rounds of whole 0.2 s slices. Turns of 25 ms put the
engines of a round under the same swings, and the round's median of each engine spans all its turns, so rounds a
second or more apart are close to independent observations. This module only schedules: what a turn runs and how it
is timed are the callables it is given.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pytest_vitperf.core.errors import NotBuilt, VitperfError
from pytest_vitperf.measure.clocks import ClockReading

# (samples, their clock readings, samples dropped for a throttled clock): what timing one slice gives
Slice = tuple[list[float], list[ClockReading], int]
AGREED_AFTER = 2  # the fewest rounds of one build that may end on agreeing (RoundPlan.fewest): a spread needs two


# trtexec warms up for 200 ms, but at an H200's 700 W cap the SM clock swings for about 4 s after any pause of 1 s
# or more: ViT-L/16 batch 64's calls spread 1.8-2.6% from 2 to 4 s into a load and 1.3-1.6% after (docs/options.md,
# 2026-12-02). A load below the cap ends it early (measure.clocks.unlimited).
GPU_WARMUP_MS = 4000.0
CPU_WARMUP_MS = 200.0


@dataclass(frozen=True)
class RoundPlan:
    """How a family is measured: each precision built `builds` times, then `rounds` rounds, each engine a slice of
    about `slice_ms` per round (shared by a precision's builds), cut into `turns` visits (the field keeps its old
    name, as stored runs have it) that go over the engines in orders drawn from `seed`; before them, `warmup_ms` of
    the engines one after another. `budget_s`: the longest a family may
    go on adding rounds to settle a verdict. With `agree`, rounds stop early once they agree (disagreement). With
    `first_look`, a family with floors looks at them after that many rounds and ends there if they are all settled."""

    rounds: int = 20
    agree: float = 0.001  # above 0: `rounds` is the most, and they end after `fewest()` once they disagree this little
    first_look: int = 6  # 0: the first look comes after `rounds`
    slice_ms: float = 200.0
    turns: int = 8
    builds: int = 2
    warmup_ms: float = GPU_WARMUP_MS
    budget_s: float = 60.0
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def fewest(self) -> int:
        """The rounds a plan with `agree` runs before they may end: two give a spread; with more than one build, a
        speedup's interval (widened by the builds' spread, builds.nested_interval) needs three."""
        return min(self.rounds, AGREED_AFTER + (self.builds > 1))

    def early_look(self) -> int | None:
        """The rounds after which a family with floors first looks at them, where that comes before `rounds`: never
        before a speedup has an interval (`fewest`)."""
        at = max(self.first_look, self.fewest())
        return at if self.first_look and at < self.rounds else None


def ended_early(recorded: Mapping[str, Any]) -> bool:
    """Whether a family ended at its early look, from the rounds its measurements record (`options["rounds"]`): its
    intervals then rest on those rounds, not on `rounds`."""
    if "first_look" not in recorded:  # recorded before there was an early look
        return False
    plan = RoundPlan(**{f.name: recorded[f.name] for f in fields(RoundPlan) if f.name in recorded})
    return recorded.get("looks") == 1 and recorded.get("done") == plan.early_look()


def order(names: Sequence[str], seed: int, round_index: int) -> list[str]:
    """Round `round_index`'s order: a shuffle of `names` that depends only on the seed and the round, so a rerun
    with the same seed repeats it, and adding rounds never changes the earlier ones."""
    out = sorted(names)
    random.Random(f"{seed}/{round_index}").shuffle(out)
    return out


@dataclass
class Slices:
    """What one engine collected over the rounds: every sample, how many each round kept, the readings, the drops."""

    samples: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    readings: list[ClockReading] = field(default_factory=list)
    dropped: int = 0

    def add(self, taken: Slice, new_round: bool = True) -> None:
        samples, readings, dropped = taken
        self.samples += samples
        if new_round or not self.counts:
            self.counts.append(0)
        self.counts[-1] += len(samples)
        self.readings += readings
        self.dropped += dropped

    def round_logs(self) -> list[float]:
        """The log of each round's median, for the rounds that kept a sample."""
        out, start = [], 0
        for n in self.counts:
            if n:
                out.append(math.log(statistics.median(self.samples[start : start + n])))
            start += n
        return out


def disagreement(slices: Iterable[Slices]) -> float:
    """How far the rounds' medians leave a process's median unsure: the standard error of a round's log median,
    its variance pooled over the engines (they share a round's clock, so one spread), over the rounds; infinite
    before two rounds. After two rounds of ViT-B on an H200: 0.008-0.11% at batch 1, at the clock's top; 0.42-1.07%
    at batch 64, whose clock wandered under the power cap (24 processes, 2026-11-29)."""
    logs = [x for x in (s.round_logs() for s in slices) if len(x) >= 2]
    if not logs:
        return math.inf
    pooled = sum(statistics.variance(x) * (len(x) - 1) for x in logs) / sum(len(x) - 1 for x in logs)
    return math.sqrt(pooled / min(len(x) for x in logs))


SETTLE_CHECK_MS = 250.0  # how often a warm-up asks whether the clock has anything left to settle to


def warm_up(
    warm: Mapping[str, Callable[[], object]],
    ms: float,
    now: Callable[[], float] = time.perf_counter,
    settled: Callable[[], bool] | None = None,
) -> float:
    """Run each engine in turn until `ms` have passed (each at least once): clocks settle under the load the rounds
    will put on the GPU, and every engine's kernels are loaded before its first slice. With `settled`, asked every
    SETTLE_CHECK_MS, it ends once that has said yes twice running: a load that never meets the power cap has no
    transient to wait out. Returns the ms it took."""
    start = now()
    names = sorted(warm)
    i = calm = checks = 0
    while True:
        spent = (now() - start) * 1e3
        if i >= len(names) and (spent >= ms or calm >= 2):
            return spent
        if settled is not None and spent >= (checks + 1) * SETTLE_CHECK_MS:
            checks += 1
            calm = calm + 1 if settled() else 0
            continue
        warm[names[i % len(names)]]()
        i += 1


def interleave(
    take: Mapping[str, Callable[[], Slice]],
    rounds: Iterable[int],
    seed: int,
    into: dict[str, Slices],
    turns: int = 1,
    each_round: Callable[[int], None] | None = None,
) -> list[list[str]]:
    """Time `turns` turns of every engine per round, each turn in its own order; append to `into` (one Slices per
    name, one count per round); `each_round(r + 1)` is told once round r has ended. Returns the orders used, one per
    turn."""
    used = []
    for r in rounds:
        for t in range(turns):
            names = order(list(take), seed, r * turns + t)
            for name in names:
                into.setdefault(name, Slices()).add(take[name](), new_round=t == 0)
            used.append(names)
        if each_round is not None:
            each_round(r + 1)
    return used


MAX_LOOKS = 3  # the first look after plan.rounds, then at most two doublings: each look costs confidence (stats)


def looks_ahead(done: int, looks: int, budget_rounds: int) -> list[int]:
    """The rounds in all at each look still to come: each doubles the rounds done, within `budget_rounds` more
    rounds and MAX_LOOKS looks in all. What a family checks before it spends them (verdicts/builds.settles)."""
    out: list[int] = []
    for _ in range(MAX_LOOKS - looks):
        more = min(done, budget_rounds)
        if more < 1:
            break
        done, budget_rounds = done + more, budget_rounds - more
        out.append(done)
    return out


@dataclass
class FamilyRun:
    """What measuring one family gave: a Measurement per precision timed, why a precision was not (its engine failed
    to build, or it cannot run here), and how the rounds went."""

    model: str
    batch: int
    plan: RoundPlan
    run: str  # names the rounds: two measurements pair only within one run
    measurements: dict[str, Any] = field(default_factory=dict)  # precision -> Measurement
    errors: dict[str, str] = field(default_factory=dict)  # precision -> why its engine failed (its test fails)
    skipped: dict[str, str] = field(default_factory=dict)  # precision -> why it cannot run here (its test skips)
    rounds_done: int = 0
    looks: int = 0
    seconds: float = 0.0
    sequential: str = ""  # why the engines were timed one block each instead of in rounds; "" when interleaved
    gated: set[str] = field(default_factory=set)  # precisions already judged against their baselines
    built: list[str] = field(default_factory=list)  # the order the engines were built in
    warmed_ms: float = 0.0  # the warm-up it took: the plan's, or less where the clock had nothing to settle to

    def set_aside(self, precision: str, why: VitperfError) -> None:
        """A precision that is not measured: skipped where nothing here builds it (NotBuilt), failed otherwise."""
        (self.skipped if isinstance(why, NotBuilt) else self.errors)[precision] = str(why)

    @property
    def aside(self) -> set[str]:
        """The precisions skipped or failed so far."""
        return {*self.skipped, *self.errors}
