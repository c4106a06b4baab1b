"""Measurement as data: what was measured (a frozen Spec) plus the raw samples, and statistics
computed from those samples on demand. Round-trips through JSON so baselines can store it whole.

A measurement taken in interleaved rounds (measure/rounds.py) also says how many of its samples each round's slice
holds: one number per round, in order, 0 where a round kept none; with several builds of the engine, build after
build (all rounds of the first build, then of the second). Its spec's options["rounds"] names the family run (`run`)
the rounds belong to and the number of builds, so two measurements of one run pair round by round.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pytest_vitperf.core.files import FileError, read_json
from pytest_vitperf.core.settings import NOISY_COV
from pytest_vitperf.measure.clocks import ClockReading, median_sm

SCHEMA = 1


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
    rounds: tuple[int, ...] = ()  # samples in each round's slice, build after build; () when taken in one block

    def __post_init__(self) -> None:
        if not self.samples_ms:
            raise ValueError(f"{self.spec.label}: a Measurement needs at least one sample")
        bad = [s for s in self.samples_ms if not math.isfinite(s) or s < 0]
        if bad:
            raise ValueError(f"{self.spec.label}: samples must be finite and >= 0, got {bad[:3]}")
        covered = sum(r.samples for r in self.clocks)
        if self.clocks and covered != self.n:
            raise ValueError(f"{self.spec.label}: clock readings cover {covered} samples, not {self.n}")
        if self.rounds and (sum(self.rounds) != self.n or min(self.rounds) < 0):
            raise ValueError(f"{self.spec.label}: rounds hold {sum(self.rounds)} samples, not {self.n}")

    @property
    def timed_s(self) -> float:
        """The GPU time its samples cover: a graphed sample of n launches was divided by n."""
        return math.fsum(self.samples_ms) * self.spec.options.get("launches_per_sample", 1) / 1e3

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

    @property
    def run(self) -> str | None:
        """The family run whose rounds these are, or None (one block)."""
        info = self.spec.options.get("rounds")
        return info.get("run") if self.rounds and isinstance(info, dict) else None

    @property
    def builds(self) -> int:
        """How many separately built engines the samples come from (their rounds follow one another)."""
        info = self.spec.options.get("rounds")
        return int(info.get("builds", 1)) if self.rounds and isinstance(info, dict) else 1

    @property
    def rounds_taken(self) -> int:
        """How many interleaved rounds each build was timed in."""
        return len(self.rounds) // self.builds

    def per_build(self, values: list[float | None]) -> list[list[float | None]]:
        """Per-round values (round_medians, round_cycles) cut into one list per build."""
        r = len(values) // self.builds
        return [values[j * r : (j + 1) * r] for j in range(self.builds)]

    def _per_round(self) -> list[tuple[list[float], list[ClockReading]]]:
        """Each round's samples and the clock readings that cover them (a chunk never spans two rounds)."""
        out, start, readings = [], 0, list(self.clocks)
        for count in self.rounds:
            mine: list[ClockReading] = []
            while readings and sum(r.samples for r in mine) < count:
                mine.append(readings.pop(0))
            out.append((list(self.samples_ms[start : start + count]), mine))
            start += count
        return out

    def round_medians(self) -> list[float | None]:
        """The median of each round's slice; None for a round that kept no sample."""
        return [_percentile(sorted(xs), 50) if xs else None for xs, _ in self._per_round()]

    def round_cycles(self) -> list[float | None]:
        """Each round's median time x its median SM clock (ms x MHz); None without samples or readings."""
        out: list[float | None] = []
        for xs, readings in self._per_round():
            sm = median_sm(readings)
            out.append(_percentile(sorted(xs), 50) * sm if xs and sm is not None else None)
        return out

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
            **({"rounds": list(self.rounds)} if self.rounds else {}),
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
        rounds = tuple(int(n) for n in data.get("rounds", ()))
        return cls(spec=spec, samples_ms=tuple(float(s) for s in data["samples"]), clocks=clocks, rounds=rounds)

    @classmethod
    def from_json(cls, text: str) -> Measurement:
        return cls.from_dict(json.loads(text))


def speedup(reference: Measurement, candidate: Measurement) -> float:
    """How many times faster `candidate` is than `reference`, by median."""
    return reference.median / candidate.median


class BenchmarkJsonError(FileError):
    kind = "pytest-benchmark JSON"


def _measurement(b: dict[str, Any]) -> Measurement | None:
    """One benchmark of a --benchmark-json file, or None for one of pytest-benchmark's own fixture."""
    v = b.get("extra_info", {}).get("vitperf")
    if not v:
        return None
    p = b["params"]
    spec = Spec(p["model"], p["precision"], int(p["batch"]), v["backend"], v.get("backend_version"), v["device"],
                v.get("sm"), v.get("timer", "perf_counter"), v.get("gpu_index"), v.get("gpu_uuid"),
                {k: val for k, val in b.get("options", {}).items() if k != "timer"})  # fmt: skip
    clocks = tuple(ClockReading(**r) for r in v.get("clocks", []))
    rounds = tuple(int(n) for n in v.get("rounds", ()))
    return Measurement(spec, tuple(float(s) * 1e3 for s in b["stats"]["data"]), clocks, rounds)


def read_benchmark_json(path: Path) -> list[Measurement]:
    """The measurements of a `--benchmark-json` file written by this plugin (raw samples, options, clocks)."""
    return measurements_of(read_json(path, BenchmarkJsonError), path)


def measurements_of(doc: Any, path: Path) -> list[Measurement]:
    """The measurements of a `--benchmark-json` file already parsed (`doc`), as read_benchmark_json reads them."""
    benchmarks = doc.get("benchmarks", []) if isinstance(doc, dict) else []
    if not isinstance(benchmarks, list):
        raise BenchmarkJsonError(path, "'benchmarks' must be a list")
    out = []
    for i, b in enumerate(benchmarks):
        try:
            m = _measurement(b)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            what = f"lacks {exc}" if isinstance(exc, KeyError) else (str(exc) or type(exc).__name__).splitlines()[0]
            raise BenchmarkJsonError(path, f"benchmarks[{i}] is not a measurement of this plugin ({what})") from None
        if m is not None:
            out.append(m)
    if not out:
        raise BenchmarkJsonError(path, "holds no pytest-vitperf measurement; write one with: "
                                       "pytest --gpu-bench suites/ --benchmark-json run.json")  # fmt: skip
    return out
