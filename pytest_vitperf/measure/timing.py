"""Timers and the sampling loop.

Like trtexec: warm up for a time, then take samples until both a minimum duration and a minimum
iteration count are met. On a GPU each sample is the time between two CUDA events recorded on the
engine's own (non-default) stream around one launch, so host work and transfers are not counted:
launches are queued back to back in chunks and synchronised once per chunk.
"""

from __future__ import annotations

import contextlib
import math
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

Launch = Callable[[], None]


class Laps(dict[str, float]):
    """Host seconds spent in named steps, added up: where preparing an engine goes."""

    @contextlib.contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add({step: time.perf_counter() - start})

    def add(self, other: dict[str, float]) -> None:
        for step, seconds in other.items():
            self[step] = round(self.get(step, 0.0) + seconds, 3)


class Clock(Protocol):
    name: str

    def time(self, launch: Launch, n: int, before: Launch | None = None) -> list[float]:
        """Run `launch` n times back to back; return each run's time in ms. `before` runs ahead of every launch,
        outside the timed region."""
        ...

    def cache_flush(self) -> Launch:
        """A launch that evicts the cache the timed work reads through (the GPU's L2, the CPU's last-level
        cache), queued where the timed launches run."""
        ...


class PerfCounterClock:
    """Host wall-clock per call; for the CPU path, where a launch is synchronous."""

    name = "perf_counter"

    def time(self, launch: Launch, n: int, before: Launch | None = None) -> list[float]:
        out = []
        for _ in range(n):
            if before is not None:
                before()
            t0 = time.perf_counter()
            launch()
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    def cache_flush(self) -> Launch:
        import torch

        buf = torch.empty(FLUSH_TIMES * cpu_last_level_cache_bytes(), dtype=torch.uint8)

        def flush() -> None:
            buf.zero_()

        return flush


class TorchCudaEventClock:
    """CUDA events from torch, recorded on `stream` around each launch."""

    name = "cuda-event"

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def time(self, launch: Launch, n: int, before: Launch | None = None) -> list[float]:
        import torch

        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        with torch.cuda.stream(self.stream):
            for s, e in zip(starts, ends, strict=False):
                if before is not None:
                    before()
                s.record(self.stream)
                launch()
                e.record(self.stream)
        ends[-1].synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=False)]

    def cache_flush(self) -> Launch:
        import torch

        l2 = torch.cuda.get_device_properties(self.stream.device).L2_cache_size
        buf = torch.empty(FLUSH_TIMES * l2, dtype=torch.uint8, device=self.stream.device)

        def flush() -> None:
            with torch.cuda.stream(self.stream):
                buf.zero_()  # a write through L2 on the timed stream: it evicts what the last launch left there

        return flush


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

    def time(self, launch: Any, n: int, before: Launch | None = None) -> list[float]:
        from cuda.bindings import runtime as rt

        starts = [check_cuda(rt.cudaEventCreate()) for _ in range(n)]
        ends = [check_cuda(rt.cudaEventCreate()) for _ in range(n)]
        try:
            for s, e in zip(starts, ends, strict=True):
                if before is not None:
                    before()
                check_cuda(rt.cudaEventRecord(s, self.stream))
                launch()
                check_cuda(rt.cudaEventRecord(e, self.stream))
            check_cuda(rt.cudaEventSynchronize(ends[-1]))
            return [float(check_cuda(rt.cudaEventElapsedTime(s, e))) for s, e in zip(starts, ends, strict=True)]
        finally:
            for ev in (*starts, *ends):
                rt.cudaEventDestroy(ev)

    def cache_flush(self) -> Launch:
        from cuda.bindings import runtime as rt

        device = check_cuda(rt.cudaGetDevice())
        size = FLUSH_TIMES * int(
            check_cuda(rt.cudaDeviceGetAttribute(rt.cudaDeviceAttr.cudaDevAttrL2CacheSize, device))
        )
        ptr = check_cuda(rt.cudaMalloc(size))
        weakref.finalize(self, rt.cudaFree, ptr)

        def flush() -> None:
            check_cuda(rt.cudaMemsetAsync(ptr, 0, size, self.stream))

        return flush


# The flush writes this many times the cache's size, as NVBench does: on an H100, 2x and 4x the L2 gave the same
# cold latency as 1x (docs/measurements/2026-11-22-h100-clocks-under-the-samples.md, "Cold mode").
FLUSH_TIMES = 1


def cpu_last_level_cache_bytes() -> int:
    """The largest CPU cache's size, from sysfs (Linux), else 32 MiB."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes, default=32 << 20)


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
    cold: bool = False,
) -> list[float]:
    """Warm up for `warmup_ms` of wall time (at least one launch), then return per-launch samples
    in ms, taken until `duration_ms` of wall time has passed and `min_iterations` were timed.
    With `max_noise`, sampling goes on after that until the median's 95% confidence half-width, relative to the
    median, is at most `max_noise`, or until `timeout_ms` of sampling (NVBench's stopping rule, on the median).
    With `cold`, the clock's cache flush runs before every launch, warm-up included, outside the timed region.
    `on_chunk` gets each synchronised chunk's samples, outside the timed region (clocks.py reads NVML there)."""
    before = clock.cache_flush() if cold else None
    t0 = now()
    warm = clock.time(launch, 1, before)
    while (now() - t0) * 1e3 < warmup_ms:
        warm += clock.time(launch, 1 if warm[-1] > CHUNK_MS else 8, before)
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
        timed = clock.time(launch, want, before)
        samples += timed
        if on_chunk is not None:
            on_chunk(timed)
    return samples


GRAPH_SAMPLE_MS = 1.0  # a batched sample's target length: launch and event overhead become a small part of it
MAX_GRAPH_LAUNCHES = 256


def in_graph(launch: Callable[[], Any], stream: Any, target_ms: float = GRAPH_SAMPLE_MS) -> tuple[Launch, int]:
    """(replay, n): a CUDA graph of n back-to-back `launch`es on `stream`, n chosen so that one replay takes about
    `target_ms`. A sample of a microsecond kernel launched alone times the host's launch latency as much as the
    kernel: on an H100 a 25 us GEMM flipped between 0.023 and 0.039 ms from run to run. Divided by n, a replay's
    time is the kernel's own, as NVBench's batch measurement takes it."""
    import torch

    def capture(n: int) -> Any:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(n):
                launch()
        return graph

    with torch.cuda.stream(stream):
        launch()  # cuBLAS picks its kernel and workspace outside capture
    stream.synchronize()
    probe_n = 8
    probe = capture(probe_n)
    per_launch = max(min(TorchCudaEventClock(stream).time(probe.replay, 5)) / probe_n, 1e-6)
    n = max(1, min(MAX_GRAPH_LAUNCHES, math.ceil(target_ms / per_launch)))
    graph = probe if n == probe_n else capture(n)
    return graph.replay, n
