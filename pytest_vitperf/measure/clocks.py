"""GPU clocks next to the samples: what the SM and memory clocks, the power draw and NVML's clock-event reasons were
while a measurement was taken, and what follows from them (pure functions over stored readings).

On a power-capped GPU the clock moves with the work: on an H200 at 700 W, FP16 ViT-B/16 batch 64 ran at a median
1725-1755 MHz and static-scale FP8 at 1950 MHz, because FP8 draws less power per unit of work. A speedup is then
part kernel, part clock. In cycle space (time x clock) the clock's share drops out, as NVBench confirms its
verdicts; a disagreement between the two is reported, never hidden.

Readings are taken through NVML (nvidia-ml-py) once per timed chunk (about 50 ms of queued work, after the chunk
has synchronised), so reading them adds no work inside the timed region.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any

from pytest_vitperf.measure.placement import current_cpu

# NVML's clock-event reasons (nvmlClocksEventReason*), by bit.
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clock",
}
GPU_IDLE = 0x1
# The software power cap is the normal state of the lent GPUs under load; idle shows between chunks.
EXPECTED_REASONS = frozenset({"sw_power_cap", "gpu_idle"})
THROTTLED_BELOW = 0.75  # NVBench discards samples below 75% of the default SM clock
CLOCK_SPAN_WARN = 0.05  # a measurement whose samples' SM clock spans more than 5% of its median is flagged


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


@dataclass(frozen=True)
class ClockReading:
    """One NVML reading, covering the `samples` timed samples of the chunk before it."""

    samples: int
    sm_mhz: int
    mem_mhz: int
    power_w: float
    reasons: int  # NVML clock-event reasons bitmask
    cpu: int | None = None  # the CPU the timing thread was on as it read them (measure/placement.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def per_sample_sm(readings: tuple[ClockReading, ...] | list[ClockReading]) -> list[int]:
    """The SM clock of each timed sample (each sample takes its chunk's reading)."""
    return [r.sm_mhz for r in readings for _ in range(r.samples)]


def median_sm(readings: tuple[ClockReading, ...] | list[ClockReading]) -> float | None:
    sm = per_sample_sm(readings)
    return float(statistics.median(sm)) if sm else None


def sm_span(readings: tuple[ClockReading, ...] | list[ClockReading]) -> tuple[int, int] | None:
    sm = per_sample_sm(readings)
    return (min(sm), max(sm)) if sm else None


def unexpected_reasons(readings: tuple[ClockReading, ...] | list[ClockReading]) -> list[str]:
    """Clock-event reasons other than the power cap (and idle) seen during the samples: thermal, power brake, ..."""
    seen = {name for r in readings for name in reason_names(r.reasons)}
    return sorted(seen - EXPECTED_REASONS)


def unlimited(reading: ClockReading, max_sm_mhz: int) -> bool:
    """Whether the GPU runs at its highest SM clock with nothing holding it back (no reason but idle): under a load
    that stays below the power cap, as batch 1 of ViT-B did on an H200 (1980 MHz, 250-260 W, every reading of 24
    processes), where batch 64 met the cap at once and its clock then wandered over 1470-1965 MHz."""
    return reading.sm_mhz >= max_sm_mhz and not reading.reasons & ~GPU_IDLE


def unthrottled(
    chunks: list[list[float]], readings: list[ClockReading], default_sm_mhz: int | None
) -> tuple[list[float], list[ClockReading], int]:
    """Drop the chunks whose reading is below THROTTLED_BELOW of the default SM clock: (samples kept, their
    readings, samples dropped). All of them stay when every chunk was throttled (the warning says so)."""
    if not default_sm_mhz:
        return [s for c in chunks for s in c], readings, 0
    keep = [r.sm_mhz >= THROTTLED_BELOW * default_sm_mhz for r in readings]
    if not any(keep):
        return [s for c in chunks for s in c], readings, 0
    samples = [s for c, k in zip(chunks, keep, strict=True) if k for s in c]
    dropped = sum(len(c) for c, k in zip(chunks, keep, strict=True) if not k)
    return samples, [r for r, k in zip(readings, keep, strict=True) if k], dropped


def last_busy(
    readings: list[tuple[float, ClockReading]], end: float, window_s: float, samples: int
) -> list[ClockReading]:
    """Of readings taken at known times while another process timed `samples` inferences, those of the last
    `window_s` before `end` where the GPU was not idle (a tool times last, after its start-up and warm-up), each
    standing for an equal share of the samples."""
    kept = [r for t, r in readings if t >= end - window_s and not r.reasons & GPU_IDLE]
    if not kept:
        return []
    share = [samples // len(kept) + (i < samples % len(kept)) for i in range(len(kept))]
    return [replace(r, samples=n) for r, n in zip(kept, share, strict=True)]


@dataclass(frozen=True)
class ClockComparison:
    """A speedup in time and in cycles: reference time x clock over candidate time x clock."""

    time_speedup: float
    clock_ratio: float  # candidate's median SM clock over the reference's
    reference_mhz: float
    candidate_mhz: float

    @property
    def cycle_speedup(self) -> float:
        """(reference time x its clock) / (candidate time x its clock): the speedup had both run at one clock."""
        return self.time_speedup / self.clock_ratio

    def disagreement(self, floor: float, reference: str, candidate: str) -> str | None:
        """Words for a floor that time and cycles judge differently (NVBench's AMBIGUOUS), else None."""
        by_time, by_cycles = self.time_speedup >= floor, self.cycle_speedup >= floor
        if by_time == by_cycles:
            return None
        clocks = f"{candidate} ran at {self.candidate_mhz:.0f} MHz, {reference} at {self.reference_mhz:.0f} MHz"
        return f"clock-assisted: {clocks}" if by_time else f"clock-hurt: {clocks}"


def compare_clocks(
    reference_ms: float, candidate_ms: float, reference_mhz: float | None, candidate_mhz: float | None
) -> ClockComparison | None:
    if not (reference_mhz and candidate_mhz and candidate_ms > 0):
        return None
    return ClockComparison(reference_ms / candidate_ms, candidate_mhz / reference_mhz, reference_mhz, candidate_mhz)


class NvmlProbe:
    """Reads one GPU's clocks, power and clock-event reasons through NVML. `open()` returns None, with no error,
    where NVML is missing (no NVIDIA driver, a CPU machine): measurements then simply carry no clocks."""

    def __init__(self, nvml: Any, handle: Any, bus_id: str | None = None) -> None:
        self._nvml = nvml
        self._handle = handle
        self.bus_id = bus_id  # where its NUMA node is read (measure/placement.py)

    @classmethod
    def open(cls, cuda_index: int) -> NvmlProbe | None:
        try:
            import pynvml

            pynvml.nvmlInit()
            bus_id = _pci_bus_id(cuda_index)
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        except Exception:  # no library, no driver, no such device: no clocks, not an error
            return None
        return cls(pynvml, handle, bus_id)

    def read(self, samples: int) -> ClockReading:
        n, h = self._nvml, self._handle
        return ClockReading(
            samples=samples,
            sm_mhz=int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            mem_mhz=int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
            power_w=n.nvmlDeviceGetPowerUsage(h) / 1000.0,
            reasons=int(n.nvmlDeviceGetCurrentClocksEventReasons(h)),
            cpu=current_cpu(),
        )

    def facts(self) -> dict[str, Any]:
        """The clocks and power limit that frame every reading: default and max SM clock, enforced power limit."""
        n, h = self._nvml, self._handle
        out: dict[str, Any] = {}
        for key, call in (
            ("default_sm_mhz", lambda: n.nvmlDeviceGetDefaultApplicationsClock(h, n.NVML_CLOCK_SM)),
            ("max_sm_mhz", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
            ("max_mem_mhz", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)),
            ("power_limit_w", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
        ):
            try:
                out[key] = call()
            except Exception:  # a query this GPU or driver does not support
                out[key] = None
        return out


def _pci_bus_id(cuda_index: int) -> str:
    """NVML numbers GPUs its own way (CUDA_VISIBLE_DEVICES does not apply to it): match by PCI bus id."""
    from cuda.bindings import runtime as rt

    err, bus = rt.cudaDeviceGetPCIBusId(32, cuda_index)
    if int(err) != 0:
        raise RuntimeError(f"cudaDeviceGetPCIBusId failed: {err}")
    return bus.split(b"\0", 1)[0].decode() if isinstance(bus, bytes) else str(bus)
