"""The sampling loop, driven by real launches on the host clock."""

from __future__ import annotations

import time
from collections.abc import Callable

from pytest_vitperf.measure.timing import PerfCounterClock, sample


def sleeper(ms: float):
    calls = []

    def launch() -> None:
        calls.append(time.perf_counter())
        time.sleep(ms / 1e3)

    return launch, calls


def test_min_iterations_rule_when_duration_is_zero() -> None:
    launch, calls = sleeper(1)
    out = sample(launch, PerfCounterClock(), warmup_ms=0, duration_ms=0, min_iterations=7)
    assert len(out) == 7
    assert len(calls) == 8  # one warm-up launch is always made
    assert all(s >= 1.0 for s in out)


def test_duration_rule_takes_more_than_min_iterations() -> None:
    launch, _ = sleeper(2)
    t0 = time.perf_counter()
    out = sample(launch, PerfCounterClock(), warmup_ms=0, duration_ms=60, min_iterations=2)
    assert (time.perf_counter() - t0) * 1e3 >= 60
    assert len(out) > 2
    assert sum(out) >= 50  # the samples cover the sampling time, less loop overhead


def test_warmup_launches_are_not_sampled() -> None:
    launch, calls = sleeper(1)
    out = sample(launch, PerfCounterClock(), warmup_ms=30, duration_ms=0, min_iterations=3)
    assert len(out) == 3
    assert len(calls) > 3 + 10  # about 30 ms of 1 ms launches happened before sampling


def test_the_cache_flush_runs_before_every_launch_outside_the_timed_region() -> None:
    order: list[str] = []

    def launch() -> None:
        order.append("launch")

    def flush() -> None:
        order.append("flush")
        time.sleep(0.01)  # if this were timed, every sample would be over 10 ms

    out = PerfCounterClock().time(launch, 4, before=flush)
    assert order == ["flush", "launch"] * 4 and max(out) < 5


def test_the_cpu_cache_flush_writes_over_the_last_level_cache() -> None:
    from pytest_vitperf.measure.timing import FLUSH_TIMES, cpu_last_level_cache_bytes

    size = cpu_last_level_cache_bytes()
    assert (1 << 16) <= size <= (1 << 31)  # between 64 KiB and 2 GiB on anything that runs this
    flush = PerfCounterClock().cache_flush()
    t0 = time.perf_counter()
    flush()
    assert time.perf_counter() - t0 > FLUSH_TIMES * size / 200e9  # it really writes: no CPU writes 200 GB/s


def test_cold_sampling_flushes_in_warm_up_and_samples() -> None:
    calls = {"launch": 0}

    def launch() -> None:
        calls["launch"] += 1

    class Counting(PerfCounterClock):
        flushes = 0

        def cache_flush(self) -> Callable[[], None]:
            def flush() -> None:
                Counting.flushes += 1

            return flush

    out = sample(launch, Counting(), warmup_ms=0, duration_ms=0, min_iterations=6, cold=True)
    assert len(out) == 6 and Counting.flushes == calls["launch"]  # warm-up launches were flushed too
