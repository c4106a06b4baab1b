"""The sampling loop, driven by real launches on the host clock."""

from __future__ import annotations

import time

from pytest_vitperf.timing import PerfCounterClock, sample


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
