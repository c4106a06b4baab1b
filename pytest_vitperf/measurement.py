"""Measurement as data: what was measured (a frozen Spec) plus the raw samples, and statistics
computed from those samples on demand. Round-trips through JSON so baselines can store it whole.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from pytest_vitperf.clocks import ClockReading, median_sm

SCHEMA = 1
# trtexec warns ("unstable performance") when the coefficient of variation of GPU compute time exceeds 1.0%
# (kUNSTABLE_PERF_REPORTING_THRESHOLD in samples/common/sampleReporting.cpp).
NOISY_COV = 0.01


@dataclass(frozen=True)
class Spec:
    model: str
    precision: str
    batch: int
    backend: str
    backend_version: str | None
    device: str  # device name, e.g. "NVIDIA H100 80GB HBM3" or a CPU model
    sm: int | None = None
    timer: str = "perf_counter"  # "cuda-event" on a GPU
    gpu_index: int | None = field(default=None, compare=False)  # which of the machine's GPUs, and which GPU it is
    gpu_uuid: str | None = field(default=None, compare=False)
    options: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.model, self.precision, self.batch, self.backend)

    @property
    def label(self) -> str:
        return f"{self.model}-{self.precision}-b{self.batch}"


def _percentile(sorted_xs: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    n = len(sorted_xs)
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Measurement:
    spec: Spec
    samples_ms: tuple[float, ...]  # one entry per timed inference of a whole batch
    clocks: tuple[ClockReading, ...] = ()  # NVML readings, one per timed chunk, covering every sample; () on a CPU

    def __post_init__(self) -> None:
        if not self.samples_ms:
            raise ValueError(f"{self.spec.label}: a Measurement needs at least one sample")
        bad = [s for s in self.samples_ms if not math.isfinite(s) or s < 0]
        if bad:
            raise ValueError(f"{self.spec.label}: samples must be finite and >= 0, got {bad[:3]}")
        covered = sum(r.samples for r in self.clocks)
        if self.clocks and covered != self.n:
            raise ValueError(f"{self.spec.label}: clock readings cover {covered} samples, not {self.n}")

    @cached_property
    def _sorted(self) -> list[float]:
        return sorted(self.samples_ms)

    @property
    def n(self) -> int:
        return len(self.samples_ms)

    @property
    def mean(self) -> float:
        return math.fsum(self.samples_ms) / self.n

    @property
    def median(self) -> float:
        return _percentile(self._sorted, 50)

    def percentile(self, q: float) -> float:
        return _percentile(self._sorted, q)

    @property
    def p90(self) -> float:
        return self.percentile(90)

    @property
    def p95(self) -> float:
        return self.percentile(95)

    @property
    def p99(self) -> float:
        return self.percentile(99)

    @property
    def min(self) -> float:
        return self._sorted[0]

    @property
    def max(self) -> float:
        return self._sorted[-1]

    @property
    def stdev(self) -> float:
        """Sample standard deviation (n - 1); 0 for a single sample."""
        if self.n < 2:
            return 0.0
        m = self.mean
        return math.sqrt(math.fsum((s - m) ** 2 for s in self.samples_ms) / (self.n - 1))

    @property
    def cov(self) -> float:
        m = self.mean
        return self.stdev / m if m > 0 else 0.0

    @property
    def noisy(self) -> bool:
        return self.cov > NOISY_COV

    @property
    def sm_mhz(self) -> float | None:
        """Median SM clock over the samples, None without readings."""
        return median_sm(self.clocks)

    @property
    def images_per_s(self) -> float:
        return self.spec.batch * 1000.0 / self.median if self.median > 0 else math.inf

    def stats(self) -> dict[str, float]:
        return {
            "n": self.n,
            "mean": self.mean,
            "median": self.median,
            "p90": self.p90,
            "p95": self.p95,
            "p99": self.p99,
            "min": self.min,
            "max": self.max,
            "stdev": self.stdev,
            "cov": self.cov,
            "images_per_s": self.images_per_s,
            **({"sm_mhz": sm} if (sm := self.sm_mhz) is not None else {}),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "spec": asdict(self.spec),
            "unit": "ms",
            "samples": list(self.samples_ms),
            "stats": self.stats(),
            **({"clocks": [r.to_dict() for r in self.clocks]} if self.clocks else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"measurement schema {data.get('schema')!r} is not {SCHEMA}")
        if data.get("unit", "ms") != "ms":
            raise ValueError(f"measurement unit {data.get('unit')!r} is not 'ms'")
        spec = Spec(**data["spec"])
        clocks = tuple(ClockReading(**r) for r in data.get("clocks", ()))
        return cls(spec=spec, samples_ms=tuple(float(s) for s in data["samples"]), clocks=clocks)

    @classmethod
    def from_json(cls, text: str) -> Measurement:
        return cls.from_dict(json.loads(text))


def speedup(reference: Measurement, candidate: Measurement) -> float:
    """How many times faster `candidate` is than `reference`, by median."""
    return reference.median / candidate.median
