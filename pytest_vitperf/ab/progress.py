"""How far a `vitperf ab` run has got, told as it goes: as the prepares begin and end, then after every round, the
time so far, the rounds done, the rows SAME / SLOWER / FASTER / open at the last look, and an estimate of the time
left. In a log (CI), one line each; on a terminal, one live line through rich, whose clock and estimate run on
between them (a cold prepare of the nightly set is minutes without a round)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from pytest_vitperf.verdicts.ab import FASTER, SAME, SLOWER, still_measured
from pytest_vitperf.verdicts.budget import rounds_to_decide

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.ab import Row

Shown = tuple[str, float | None, float | None]  # a line's text, then the time left (to the first look), and in all

# The share of a round's seconds that does not shrink with the engines it measures, fitted to what rounds after a
# look took on H200s: the nightly set's 0.72 of a whole one with 19 of its 56 engines (2026-12-03) and about 0.63
# with 5-15 (2026-12-04); the latency suite's 0.78-0.86 with 2-4 of 8 (2026-12-02). Where it goes is not measured,
# and those rounds may have waited for processes started too late (ab.turns.ahead_for). The nightly set's warm A/A
# with processes started as many turns ahead as they need (2026-12-05) kept 0.02-0.16 (8 engines: 23-34 s a round
# where 56 took 101-107 s; 3-4 engines: 37-40 s a block of 4). Priced at 0.6, its budget paid for too few of them:
# at its first look the line said "2 min 20 s left" where 4 min 07 s were, though within 3% after the first third of
# its rounds. Not lowered while the latency suite's own has not been measured again: priced too low, it overran.
ROUND_FIXED = 0.6


def measured_share(rows: Sequence[Row]) -> float:
    """The share of the engines that rounds judged as `rows` leaves still measure (verdicts.ab.still_measured)."""
    engines = {r.name for r in rows}
    return len(still_measured(rows) & engines) / len(engines) if engines else 1.0


def round_cost(share: float) -> float:
    """A round's seconds at `share` of the engines, as a share of a whole round's."""
    return ROUND_FIXED + (1 - ROUND_FIXED) * share


def minutes(seconds: float) -> str:
    """'42 s', '3 min 05 s'."""
    s = round(seconds)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


def counts(rows: Sequence[Row]) -> str:
    """'9 SAME, 0 SLOWER, 0 FASTER, 5 open', and ', 2 in two states' where there are any: UNKNOWN for good, so
    neither open nor decided, but counted, so that the line adds up to the rows."""
    n = {v: sum(r.verdict == v for r in rows) for v in (SAME, SLOWER, FASTER)}
    odd = sum(r.two_states for r in rows)
    return (f"{n[SAME]} SAME, {n[SLOWER]} SLOWER, {n[FASTER]} FASTER, {sum(r.open for r in rows)} open"
            + (f", {odd} in two states" if odd else ""))  # fmt: skip


class Progress:
    """A run's progress. `rounds_done` after each round; `judged` after each look, `forecast` between looks. The
    estimate of the time left is the rounds planned, and with a budget those the open rows still need
    (verdicts.budget.rounds_to_decide, on the rows as the rounds so far would judge them; before they have intervals,
    all it pays) as far as it pays, at the seconds the last round took, scaled by round_cost to the engines each
    round measures: the rows a look decides leave the rounds after it. Counted at the last round's seconds, the
    nightly set's estimate after 3 rounds of 8 was 29% long (2026-12-03)."""

    def __init__(self, threshold: float, confidence: float, budget_s: float = 0.0, out: IO[str] | None = None):
        self.began = time.monotonic()
        self.threshold, self.confidence, self.budget_s = threshold, confidence, budget_s
        self.out = out or sys.stdout
        self.rows: Sequence[Row] = ()
        self.foreseen: Sequence[Row] = ()  # between looks: the rows as the rounds so far would judge them
        self.last_round_s = 0.0
        self._round_ended = self.began
        self._running = self._ran_at = 1.0  # the measured_share of the rounds running now, and of the last one ended
        self._shown: Shown = ("", None, None)
        self._live: Any = None
        if self.out.isatty():
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(file=self.out, highlight=False), refresh_per_second=1, transient=False,
                              get_renderable=lambda: self._text(self._shown))  # fmt: skip
            self._live.start()

    def preparing(self, what: str) -> None:
        """The prepares begin: `what` they are (where their output goes)."""
        self._say(("preparing " + what, None, None))

    def started(self) -> None:
        """The rounds begin now (the prepares have ended): the first round is timed from here."""
        self._round_ended = time.monotonic()
        self._say(("both sides prepared; round 1 runs", None, None))

    def _say(self, shown: Shown) -> None:
        """A line in the log, or the live line's new text."""
        self._shown = shown
        if self._live is not None:
            self._live.refresh()
        else:
            print(self._text(shown), file=self.out, flush=True)

    def _text(self, shown: Shown) -> str:
        """`shown` as of now: on a terminal its estimates count down from the last round's end."""
        text, left, in_all = shown
        now = time.monotonic()
        if self._live is not None:
            left, in_all = (None if x is None else max(0.0, x - (now - self._round_ended)) for x in (left, in_all))
        if left is not None:
            text += f"; about {minutes(left)} " + (
                "left" if in_all is None else f"to the first look, {minutes(in_all)} in all if it leaves rows open")
        return f"vitperf ab: {minutes(now - self.began)}, {text}"

    def judged(self, rows: Sequence[Row]) -> None:
        self.rows, self.foreseen, self._running = rows, (), measured_share(rows)

    def forecast(self, rows: Sequence[Row]) -> None:
        """The rows as the rounds so far would judge them: what the estimate reads until the next look (the line
        still says the last look's verdicts). Before the first look, the only way to see a second block coming."""
        self.foreseen = rows

    def per_round_s(self, share: float) -> float:
        """A round's seconds at `share` of the engines, from the last round's."""
        return self.last_round_s * round_cost(share) / round_cost(self._ran_at)

    def left_s(self, done: int, planned: int) -> float | None:
        """Seconds still to go, or None before a round has ended."""
        if not self.last_round_s:
            return None
        left, more = max(0, planned - done), 0
        rows = self.foreseen or self.rows
        if self.budget_s and rows:  # more blocks while rows are open, as far as the budget pays
            look_at = planned if self.foreseen else None  # between looks: the one this block ends with comes first
            need = rounds_to_decide(rows, threshold=self.threshold, confidence=self.confidence, look_at=look_at)
            paid = int((self.budget_s - (time.monotonic() - self.began)) // self.last_round_s)
            more = min(need - done, paid) - left  # beyond those planned: blocks or half blocks (more_rounds), so even
            more = max(0, more - more % 2)
        after = measured_share(self.foreseen) if self.foreseen else self._running  # the rounds after this block's look
        return left * self.per_round_s(self._running) + more * self.per_round_s(after)

    def line(self, done: int, planned: int, last: bool = False) -> str:
        """Before the first look, where the rows still open may need more rounds, it says both times: to that look,
        and in all. Which of them is right is the look's to say (the latency suite's A/As of 2026-12-04 on an H200
        ended at it, +1% on FP8 went on for 6 rounds more)."""
        return self._text(self._parts(done, planned, last))

    def _parts(self, done: int, planned: int, last: bool) -> Shown:
        left = None if last else self.left_s(done, planned)
        judged = f"{counts(self.rows)} ({len(self.rows)} rows)" if self.rows else "not judged yet"
        text = f"round {done} of {planned} planned: {judged}{'; the last' if last else ''}"
        to_look = (planned - done) * self.per_round_s(self._running)
        if left is not None and not self.rows and left > to_look:
            return text, to_look, left
        return text, left, None

    def rounds_done(self, done: int, planned: int, last: bool = False) -> None:
        """Round `done` of `planned` has ended (and, at a block's end, been judged); `last`: the run ends here."""
        now = time.monotonic()
        self.last_round_s, self._round_ended = now - self._round_ended, now
        self._say(self._parts(done, planned, last))
        self._ran_at = self._running  # the rounds until the next look measure as many engines as the next one

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
