"""Timers and the sampling loop.

Like trtexec: warm up for a time, then take samples until both a minimum duration and a minimum
iteration count are met. On a GPU each sample is the time between two CUDA events recorded on the
engine's own (non-default) stream around one launch, so host work and transfers are not counted:
launches are queued back to back in chunks and synchronised once per chunk.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Protocol

Launch = Callable[[], None]


class Clock(Protocol):
    name: str

    def time(self, launch: Launch, n: int) -> list[float]:
        """Run `launch` n times back to back; return each run's time in ms."""
        ...


class PerfCounterClock:
    """Host wall-clock per call; for the CPU path, where a launch is synchronous."""

    name = "perf_counter"

    def time(self, launch: Launch, n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            launch()
            out.append((time.perf_counter() - t0) * 1e3)
        return out


class TorchCudaEventClock:
    """CUDA events from torch, recorded on `stream` around each launch."""

    name = "cuda-event"

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def time(self, launch: Launch, n: int) -> list[float]:
        import torch

        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        with torch.cuda.stream(self.stream):
            for s, e in zip(starts, ends, strict=False):
                s.record(self.stream)
                launch()
                e.record(self.stream)
        ends[-1].synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=False)]


def check_cuda(result: Any) -> Any:
    """cuda-python calls return (error, *values); raise on an error, return the values."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA call failed: {err}")
    return values[0] if len(values) == 1 else values


class CudaPythonEventClock:
    """CUDA events from cuda-python on the engine's stream."""

    name = "cuda-event"

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def time(self, launch: Any, n: int) -> list[float]:
        from cuda.bindings import runtime as rt

        starts = [check_cuda(rt.cudaEventCreate()) for _ in range(n)]
        ends = [check_cuda(rt.cudaEventCreate()) for _ in range(n)]
        try:
            for s, e in zip(starts, ends, strict=True):
                check_cuda(rt.cudaEventRecord(s, self.stream))
                launch()
                check_cuda(rt.cudaEventRecord(e, self.stream))
            check_cuda(rt.cudaEventSynchronize(ends[-1]))
            return [float(check_cuda(rt.cudaEventElapsedTime(s, e))) for s, e in zip(starts, ends, strict=True)]
        finally:
            for ev in (*starts, *ends):
                rt.cudaEventDestroy(ev)


def median_noise(samples: list[float]) -> float:
    """Half the width of a distribution-free 95% confidence interval of the median (order statistics n/2 ± 0.98
    √n), relative to the median; inf for fewer than 8 samples."""
    n = len(samples)
    if n < 8:
        return math.inf
    xs = sorted(samples)
    k = 0.98 * math.sqrt(n)
    lo, hi = max(0, math.floor(n / 2 - k)), min(n - 1, math.ceil(n / 2 + k))
    mid = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return (xs[hi] - xs[lo]) / 2 / mid if mid > 0 else math.inf


CHUNK_MS = 50.0  # queue about this much GPU work between synchronisations
MAX_CHUNK = 256


def sample(
    launch: Launch,
    clock: Clock,
    *,
    warmup_ms: float,
    duration_ms: float,
    min_iterations: int,
    now: Callable[[], float] = time.perf_counter,
    on_chunk: Callable[[list[float]], None] | None = None,
    max_noise: float | None = None,
    timeout_ms: float = 15000.0,
) -> list[float]:
    """Warm up for `warmup_ms` of wall time (at least one launch), then return per-launch samples
    in ms, taken until `duration_ms` of wall time has passed and `min_iterations` were timed.
    With `max_noise`, sampling goes on after that until the median's 95% confidence half-width, relative to the
    median, is at most `max_noise`, or until `timeout_ms` of sampling (NVBench's stopping rule, on the median).
    `on_chunk` gets each synchronised chunk's samples, outside the timed region (clocks.py reads NVML there)."""
    t0 = now()
    warm = clock.time(launch, 1)
    while (now() - t0) * 1e3 < warmup_ms:
        warm += clock.time(launch, 1 if warm[-1] > CHUNK_MS else 8)
    per_launch = max(min(warm[-8:]), 1e-6)
    chunk = max(1, min(MAX_CHUNK, math.ceil(CHUNK_MS / per_launch)))

    samples: list[float] = []
    t0 = now()

    def more() -> bool:
        elapsed = (now() - t0) * 1e3
        if elapsed < duration_ms or len(samples) < min_iterations:
            return True
        return max_noise is not None and elapsed < timeout_ms and median_noise(samples) > max_noise

    while more():
        want = chunk
        if (now() - t0) * 1e3 >= duration_ms and max_noise is None:
            want = min(chunk, min_iterations - len(samples))
        timed = clock.time(launch, want)
        samples += timed
        if on_chunk is not None:
            on_chunk(timed)
    return samples
