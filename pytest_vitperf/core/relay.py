"""The relay: a round's two processes (one per side of `vitperf ab`) on one GPU at once, taking it a family at a time
in turn. Both load every engine while neither measures, then A's family, B's same family, A's next, and so on: one
load time a round instead of two, a side's measurement of a family seconds from the other's instead of a whole turn,
and the second of a pair warmed up by the first's load (docs/statistics.md, "The relay").

Two small files per process. The process writes REQUEST ("N FAMILY": its N-th request, for FAMILY) when it gives the
GPU up and waits; `vitperf ab` writes its GO ("N RAN": go for request N; RAN, the family the GPU ran until then, or
nothing). A process holds the GPU from its go until its next request or its end, and the other is given it only
when this one waits or has ended, so that no load, check or test of one runs while the other times. Files, like
vitperf ab's turn files: a hand-over takes a few ms, against seconds a family.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

GO = ".go"  # beside a process's relay file: vitperf ab's answer
POLL_S = 0.001
LIMIT_S = 4 * 3600.0  # longer than any process should wait; a vitperf ab that died must not hold it forever


def put(path: Path, text: str) -> None:
    """Replace `path` with `text` whole (a reader never sees half of it); no fsync: it lives seconds."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _read(path: Path) -> tuple[int, str] | None:
    try:
        n, _, rest = path.read_text().partition(" ")
        return int(n), rest
    except (OSError, ValueError):  # not written yet
        return None


@dataclass
class Relay:
    """A process's side: `take(family)` gives the GPU up and returns once it is this process's again."""

    path: Path
    requests: int = 0
    waited_s: float = 0.0  # given up, waiting for the GPU back: the other process's families, most of it

    def take(self, family: str, limit_s: float = LIMIT_S) -> str:
        """Wait for the GPU, to run `family` ('MODEL bBATCH', or '' for what is not a family): returns the family the
        GPU ran until now ('' where it ran none: idle, loading, or another kind of test)."""
        self.requests += 1
        put(self.path, f"{self.requests} {family}")
        go, start = self.path.with_name(self.path.name + GO), time.monotonic()
        while (answer := _read(go)) is None or answer[0] != self.requests:
            if time.monotonic() - start > limit_s:
                raise TimeoutError(f"waited {limit_s:.0f} s for {go}, which vitperf ab writes when this process's "
                                   "turn on the GPU comes; run without --vitperf-relay to measure at once")  # fmt: skip
            time.sleep(POLL_S)
        self.waited_s += time.monotonic() - start
        return answer[1]


def alternate(relays: Sequence[Path], ended: Sequence[Callable[[], bool]], poll_s: float = POLL_S) -> list[str]:
    """vitperf ab's side: the GPU to the processes of `relays` in turn, the first first, until every one has
    `ended` (said it is done with the GPU, or exited). One is given it only once every other waits or has ended.
    Returns what was run, in order ('K FAMILY', K the process's index), for the record and tests."""
    given, ran, turn = [0] * len(relays), "", 0
    order: list[str] = []
    while True:
        done = [e() for e in ended]
        if all(done):
            return order
        asks = [None if d else _read(r) for r, d in zip(relays, done, strict=True)]
        waiting = [a is not None and a[0] > g for a, g in zip(asks, given, strict=True)]
        if all(w or d for w, d in zip(waiting, done, strict=True)):  # nobody holds it, nobody loads
            k = next(i for i in [*range(turn, len(relays)), *range(turn)] if waiting[i])
            n, family = asks[k] or (0, "")
            put(relays[k].with_name(relays[k].name + GO), f"{n} {ran}")
            given[k], ran, turn = n, family, (k + 1) % len(relays)
            order.append(f"{k} {family}")
        time.sleep(poll_s)
