"""A known delay added to an engine: the sensitivity self-test (--vitperf-inject-delay PRECISION=REL).

What a run can detect on a machine is best shown, not claimed: the engine of one precision gets a delay of a known
share of its own time after every launch, on its own stream, so the time the timer sees grows by that share. A run
then says whether the change was seen. On a GPU the delay is a spin of a fixed number of SM clock cycles
(`torch.cuda._sleep`), calibrated once against the engine's own time at the same moment: the engine and the spin
slow down together when the power cap lowers the clock. On a CPU it is a busy wait of a fixed time. Either is then
timed after the engine and fitted to what the timer sees (_fitted); the share it adds is in the JSON as `seen`.

The spin draws less power than the kernels it stands for, so under the power cap the other engines of its family
can run at a higher clock: beside +5% on FP8, FP16 b64 read 0.4-0.8% faster on an H200
(docs/measurements/2026-11-27-h200-five-gates-one-board.md). Read a neighbour's small improvement in such a run as that.

Off unless asked for; the header and the summary say so loudly, and a run with it cannot write baselines.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pytest_vitperf.core.errors import VitperfError

if TYPE_CHECKING:
    import torch

    from pytest_vitperf.engines.backends.base import Engine
    from pytest_vitperf.measure.kernels import Breakdown
    from pytest_vitperf.measure.timing import Clock

CALIBRATION_LAUNCHES = 20
FIT_PAIRS = 60  # launches with and without the delay, in turn: a standard error of about 0.5 us at batch 1
DELAY_LABEL = "vitperf::injected_delay"
SPIN_PROBE_CYCLES = 1_000_000


class DelayedEngine:
    """`engine`, with `delay` run after every launch; its output and everything else are the engine's own."""

    def __init__(
        self, engine: Engine, rel: float, delay: Callable[[], None], facts: dict[str, Any], stream: Any = None
    ) -> None:
        self.engine = engine
        self._stream = stream  # where the delay runs: a GPU's profile follows it there
        self.rel = rel
        self.backend, self.model_name, self.precision = engine.backend, engine.model_name, engine.precision
        self.batch: int = engine.batch
        self.clock: Clock = engine.clock
        self._delay = delay
        self._facts = facts

    def launch(self) -> None:
        self.engine.launch()
        self._delay()

    def output(self) -> torch.Tensor:
        return self.engine.output()

    def run(self, x: torch.Tensor) -> torch.Tensor:
        return self.engine.run(x)

    def close(self) -> None:
        getattr(self.engine, "close", lambda: None)()

    def describe(self) -> dict[str, Any]:
        return {**self.engine.describe(), "injected_delay": {"rel": self.rel, **self._facts}}

    def kernel_breakdown(self) -> Breakdown:
        """The engine's breakdown with the delay in each of its profiles, as the timer sees both."""
        from pytest_vitperf.measure.kernels import kernel_times, of_profiles

        base = self.engine.kernel_breakdown()
        if not base.profiles:  # no profiles to add it to
            return base
        delays = [kernel_times(self._delay, self._stream) for _ in base.profiles]
        out = of_profiles([{**p, **d} for p, d in zip(base.profiles, delays, strict=True)], base.device)
        if not base.modules:
            return out
        modules = [{**m, DELAY_LABEL: math.fsum(d.values())} for m, d in zip(base.modules, delays, strict=True)]
        return replace(out, modules=modules)


def _median_ms(clock: Clock, launch: Callable[[], None], n: int) -> float:
    clock.time(launch, 3)  # out of the numbers: the first launches after a pause are slower
    return statistics.median(clock.time(launch, n))


def _added_ms(engine: Engine, delay: Callable[[], None], n: int = FIT_PAIRS) -> tuple[float, float]:
    """What `delay` after a launch adds to it as the engine's timer sees it, and that estimate's standard error: the
    median of n differences between a launch with it and the launch before without, queued back to back as a turn
    queues them, so that a clock that moves meanwhile moves both."""
    with_delay = [False]

    def launch() -> None:
        engine.launch()
        if with_delay[0]:
            delay()
        with_delay[0] = not with_delay[0]

    engine.clock.time(launch, 4)  # out of the numbers: the first launches after a pause are slower
    times = engine.clock.time(launch, 2 * n)
    differences = [b - a for a, b in zip(times[0::2], times[1::2], strict=True)]
    return statistics.median(differences), 1.2533 * statistics.stdev(differences) / math.sqrt(n)


def _fitted(engine: Engine, want_ms: float, delay_of: Callable[[float], Callable[[], None]], ms_per_unit: float
            ) -> tuple[Callable[[], None], dict[str, float]]:  # fmt: skip
    """The delay that adds `want_ms` to a launch as the engine's timer sees it, and what it found. Sized by its own
    cost alone, a spin is a launch of its own whose gap to the engine's adds to that cost: at batch 1, FP8's rows
    read 1.2-1.5% slower where 1% was asked (ViT-B, H200, 2026-12-01/02), and its gap measured 1.6-3.3 us at batch 1
    and 64 alike. So the delay is timed after the engine and shortened by the gap it showed, by at most half. Every
    gap is taken, not only those clear of their noise: taking only those (20 pairs) left two of four processes
    unshortened, and batch 1 read 1.3% (docs/measurements/2026-12-02-h200-ab-second-look-within-5-min.md)."""
    size = want_ms / ms_per_unit
    added, se = _added_ms(engine, delay_of(size))
    gap = added - want_ms
    size = (want_ms - min(max(gap, 0.0), want_ms / 2)) / ms_per_unit
    delay = delay_of(size)
    seen, _ = _added_ms(engine, delay)
    return delay, {"gap_ms": round(gap, 6), "gap_se_ms": round(se, 6), "added_ms": round(seen, 6), "size": size}


def inject(engine: Engine, rel: float) -> DelayedEngine:
    """`engine` with a delay of `rel` of its own median time after every launch (0.02: 2% slower)."""
    if not 0 < rel < 1:
        raise VitperfError(f"an injected delay must be between 0 and 1 of the engine's time, not {rel!r}")
    if hasattr(engine, "time_itself"):
        raise VitperfError(
            f"{engine.precision}: a delay cannot be injected into an engine that a tool times in its own process; "
            "inject it with the Python API's backend: --vitperf-backend tensorrt"
        )
    own_ms = _median_ms(engine.clock, engine.launch, CALIBRATION_LAUNCHES)
    stream = getattr(engine.clock, "stream", None)
    delay_of: Callable[[float], Callable[[], None]] = _busy_wait  # a CPU engine, timed by the host clock
    ms_per_unit, facts, on = 1.0, {}, None
    if stream is not None:
        import torch

        on = stream if isinstance(stream, torch.cuda.Stream) else torch.cuda.ExternalStream(int(stream))
        delay_of = _spin(on)
        probe_ms = _median_ms(engine.clock, delay_of(SPIN_PROBE_CYCLES), 5)
        ms_per_unit, facts = probe_ms / SPIN_PROBE_CYCLES, {"spin_ms_per_million_cycles": probe_ms}
    delay, found = _fitted(engine, rel * own_ms, delay_of, ms_per_unit)
    size = found.pop("size")
    sized = {"wait_ms": round(size, 6)} if on is None else {"cycles": max(1, round(size))}
    return DelayedEngine(engine, rel, delay, {**sized, "engine_ms": own_ms, **facts, **found,
                                              "seen": round(found["added_ms"] / own_ms, 6)}, on)  # fmt: skip


def _busy_wait(wait_ms: float) -> Callable[[], None]:
    """A CPU delay: a busy wait of `wait_ms`, named in a profile as a GPU's spin kernel is."""
    from torch.profiler import record_function

    def run() -> None:
        with record_function(DELAY_LABEL):
            end = time.perf_counter() + wait_ms / 1e3
            while time.perf_counter() < end:
                pass

    return run


def _spin(stream: Any) -> Callable[[float], Callable[[], None]]:
    """A GPU delay on `stream`: a spin of so many SM clock cycles."""
    import torch

    def spin(cycles: float) -> Callable[[], None]:
        def run() -> None:
            with torch.cuda.stream(stream):
                torch.cuda._sleep(max(1, round(cycles)))

        return run

    return spin
