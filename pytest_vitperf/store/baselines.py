"""Baselines on disk, keyed by what changes performance.

Layout: `<root>/<backend>/<backend-version>/<gpu-slug>/<model>.json`, one file per model, readable and
diff-friendly (sorted keys, one entry per model/precision/batch)::

    {
      "schema": 1,
      "backend": "tensorrt", "backend_version": "10.14.1",
      "gpu": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "model": "vit_base_patch16_224",
      "entries": {
        "nvfp4/b64": {                                 # "nvfp4/b64/cold" with "cold": true: --vitperf-cold
          "precision": "nvfp4", "batch": 64, "unit": "ms",
          "statistic": "mean", "value": 5.14,          # the number compared against
          "stats": {"mean": 5.14},                     # everything known about the distribution
          "samples": [...],                            # raw samples, when measured by this suite
          "runs": [{"median_ms": 5.2, "sm_mhz": 1830, "gpu_uuid": "GPU-...", "date": "...", "group": 0}, ...],
          "environment": {"driver": "...", "torch": "...", "clock_readings": [...], ...},  # NVML, on a GPU
          "provenance": {"kind": "imported", "source": "seed 001_...txt", "note": "published, no raw samples"}
        }
      }
    }

Writes are atomic (a temp file in the same folder, fsync, rename, fsync of the folder) and serialised by a
file lock, so two xdist workers updating one file lose neither result, and a kill -9 at any point leaves
the old file or the new one whole. A file that fails to parse raises BaselineFileError naming it, and is
never overwritten by an update built on that failed read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock

from pytest_vitperf.core.files import FileError, read_json, write_atomic
from pytest_vitperf.measure.env import slug
from pytest_vitperf.measure.measurement import Measurement

SCHEMA = 1
_STATISTICS = ("median", "mean")
MAX_RUNS = 50  # the runs a row keeps: enough for its spread, few enough to follow a slow drift


class BaselineFileError(FileError):
    kind = "baseline file"


@dataclass(frozen=True)
class BaselineKey:
    backend: str
    backend_version: str
    gpu: str  # the device name as reported; its slug names the folder
    model: str
    precision: str
    batch: int
    cold: bool = False  # measured with the cache evicted before every sample (--vitperf-cold)

    @property
    def entry(self) -> str:
        return f"{self.precision}/b{self.batch}" + ("/cold" if self.cold else "")

    def relpath(self) -> Path:
        return Path(self.backend, self.backend_version, slug(self.gpu), f"{self.model}.json")


@dataclass(frozen=True)
class Run:
    """One fresh process's median of a row: the unit its spread is made of. `group` counts the row's baselines: a
    refreshed baseline starts a new group, and the spread is pooled within groups (verdicts/spreads.pooled_spread)."""

    median_ms: float
    date: str = ""
    gpu_uuid: str = ""
    sm_mhz: float | None = None
    group: int = 0

    @property
    def kcycles(self) -> float | None:
        return self.median_ms * self.sm_mhz if self.sm_mhz else None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Run:
        return cls(float(d["median_ms"]), str(d.get("date", "")), str(d.get("gpu_uuid", "")),
                   float(d["sm_mhz"]) if d.get("sm_mhz") else None, int(d.get("group", 0)))  # fmt: skip


@dataclass(frozen=True)
class Baseline:
    key: BaselineKey
    statistic: str  # "median" or "mean": which value `value` is
    value: float  # ms
    stats: dict[str, float] = field(default_factory=dict)
    samples: tuple[float, ...] = ()
    environment: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    runs: tuple[Run, ...] = ()

    @property
    def has_samples(self) -> bool:
        return len(self.samples) > 1

    @property
    def group(self) -> int:
        """The current baseline's group: its runs make the reference."""
        return max((r.group for r in self.runs), default=0)

    def to_entry(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "precision": self.key.precision,
            "batch": self.key.batch,
            **({"cold": True} if self.key.cold else {}),
            "unit": "ms",
            "statistic": self.statistic,
            "value": self.value,
            "stats": self.stats,
            "environment": self.environment,
            "provenance": self.provenance,
        }
        if self.samples:
            out["samples"] = list(self.samples)
        if self.runs:
            out["runs"] = [{k: v for k, v in asdict(r).items() if v not in (None, "")} for r in self.runs]
        return out


def _runs(path: Path, where: str, raw: Any) -> tuple[Run, ...]:
    if not isinstance(raw, list):
        raise BaselineFileError(path, f"{where}.runs must be a list")
    out = []
    for i, r in enumerate(raw):
        median = r.get("median_ms") if isinstance(r, dict) else None
        ok = isinstance(median, (int, float)) and not isinstance(median, bool)
        try:
            run = Run.from_dict(r) if ok else None
        except (TypeError, ValueError):
            run = None
        if run is None or not run.median_ms > 0 or (run.sm_mhz is not None and not run.sm_mhz > 0):
            raise BaselineFileError(path, f"{where}.runs[{i}] must be an object with a positive median_ms")
        out.append(run)
    return tuple(out)


def _entry(path: Path, name: str, raw: Any, head: dict[str, Any]) -> Baseline:
    where = f"entries[{name!r}]"
    if not isinstance(raw, dict):
        raise BaselineFileError(path, f"{where} must be an object")
    for k in ("precision", "batch", "statistic", "value"):
        if k not in raw:
            raise BaselineFileError(path, f"{where} lacks {k!r}")
    if raw["statistic"] not in _STATISTICS:
        raise BaselineFileError(path, f"{where}.statistic must be one of {', '.join(_STATISTICS)}")
    value = raw["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise BaselineFileError(path, f"{where}.value must be a positive number of ms, got {value!r}")
    if raw.get("unit", "ms") != "ms":
        raise BaselineFileError(path, f"{where}.unit must be 'ms'")
    samples = raw.get("samples", [])
    if not isinstance(samples, list) or not all(
        isinstance(s, (int, float)) and not isinstance(s, bool) and s >= 0 for s in samples
    ):
        raise BaselineFileError(path, f"{where}.samples must be a list of non-negative numbers")
    batch = raw["batch"]
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise BaselineFileError(path, f"{where}.batch must be a positive integer")
    cold = raw.get("cold", False)
    if not isinstance(cold, bool):
        raise BaselineFileError(path, f"{where}.cold must be true or false")
    key = BaselineKey(
        head["backend"], head["backend_version"], head["gpu"], head["model"], raw["precision"], batch, cold
    )
    if key.entry != name:
        raise BaselineFileError(path, f"{where} holds {key.entry!r}; the entry name must match")
    return Baseline(
        key=key,
        statistic=raw["statistic"],
        value=float(value),
        stats={k: float(v) for k, v in dict(raw.get("stats", {})).items()},
        samples=tuple(float(s) for s in samples),
        environment=dict(raw.get("environment", {})),
        provenance=dict(raw.get("provenance", {})),
        runs=_runs(path, where, raw.get("runs", [])),
    )


def read_file(path: Path) -> dict[str, Baseline]:
    """Entries of one baseline file by entry name; BaselineFileError for anything malformed."""
    data = read_json(path, BaselineFileError)
    if not isinstance(data, dict):
        raise BaselineFileError(path, "top level must be an object")
    if data.get("schema") != SCHEMA:
        raise BaselineFileError(path, f"schema is {data.get('schema')!r}, this version reads schema {SCHEMA}")
    for k in ("backend", "backend_version", "gpu", "model"):
        if not isinstance(data.get(k), str):
            raise BaselineFileError(path, f"{k!r} must be a string")
    entries = data.get("entries")
    if not isinstance(entries, dict):
        raise BaselineFileError(path, "'entries' must be an object")
    out = {}
    for name, raw in entries.items():
        try:
            out[name] = _entry(path, name, raw, data)
        except (TypeError, ValueError, OverflowError, AttributeError) as exc:
            if isinstance(exc, BaselineFileError):
                raise
            what = (str(exc) or type(exc).__name__).splitlines()[0]
            raise BaselineFileError(path, f"entries[{name!r}] holds a value of the wrong kind ({what})") from None
    return out


class BaselineStorage(Protocol):
    """Where the gate reads baselines: a folder of these files (JsonDirStorage), or the runs of a store
    (sql.SqlStore, --vitperf-store-baselines). A store is written only as a run is appended to it."""

    def get(self, key: BaselineKey) -> Baseline | None: ...

    def others(self, key: BaselineKey) -> list[BaselineKey]: ...

    def beside(self, key: BaselineKey) -> list[Baseline]: ...

    def where(self, key: BaselineKey) -> str: ...

    def all(self) -> Iterator[Baseline]: ...


class JsonDirStorage:
    """Baselines as JSON files under `root`, in the layout described in this module."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._cache: dict[Path, dict[str, Baseline]] = {}

    def path(self, key: BaselineKey) -> Path:
        return self.root / key.relpath()

    def where(self, key: BaselineKey) -> str:
        return f"{self.path(key)} [{key.entry}]"

    def _read(self, path: Path) -> dict[str, Baseline]:
        if path not in self._cache:
            self._cache[path] = read_file(path) if path.exists() else {}
        return self._cache[path]

    def get(self, key: BaselineKey) -> Baseline | None:
        return self._read(self.path(key)).get(key.entry)

    def others(self, key: BaselineKey) -> list[BaselineKey]:
        """Baselines for the same backend, version, model, precision and batch on other GPUs."""
        base = self.root / key.backend / key.backend_version
        out = []
        for f in sorted(base.glob(f"*/{key.model}.json")) if base.is_dir() else []:
            if f.parent.name == slug(key.gpu):
                continue
            b = read_file(f).get(key.entry)
            if b is not None:
                out.append(b.key)
        return out

    def beside(self, key: BaselineKey) -> list[Baseline]:
        """Every baseline of the key's backend version and GPU model (its folder). A file that cannot be read lends
        nothing here: the gate reports it on the rows it holds."""
        out: list[Baseline] = []
        for f in sorted(self.path(key).parent.glob("*.json")):
            try:
                out += read_file(f).values()
            except BaselineFileError:
                continue
        return out

    def put(self, baselines: list[Baseline]) -> None:
        """Write or refresh entries, merging with what is on disk under a lock."""
        by_path: dict[Path, list[Baseline]] = {}
        for b in baselines:
            by_path.setdefault(self.path(b.key), []).append(b)
        for path, items in by_path.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(path.parent / f".{path.name}.lock"), timeout=60):
                current = read_file(path) if path.exists() else {}  # raises: never overwrite what failed to read
                for b in items:
                    current[b.key.entry] = b
                k = items[0].key
                doc = {
                    "schema": SCHEMA,
                    "backend": k.backend,
                    "backend_version": k.backend_version,
                    "gpu": k.gpu,
                    "model": k.model,
                    "entries": {name: current[name].to_entry() for name in sorted(current)},
                }
                write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
            self._cache.pop(path, None)

    def all(self) -> Iterator[Baseline]:
        for f in sorted(self.root.glob("*/*/*/*.json")):
            yield from read_file(f).values()


# What a row of a store's run is to its baseline (verdicts/baselines/gate.roles decides it): the start of a new one,
# one more run of it, or a change the gate flagged, which no later baseline takes for its reference.
START, RUN, FLAGGED = "start", "run", "flagged"


def key_for(m: Measurement) -> BaselineKey:
    """The row a measurement is a run of: what changes performance (backend and version, GPU) and what it is."""
    s = m.spec
    return BaselineKey(
        s.backend, s.backend_version or "unknown", s.device, s.model, s.precision, s.batch, bool(s.options.get("cold"))
    )


def tool() -> str:
    """This plugin and its version, as baselines and stores record what wrote them."""
    from pytest_vitperf.measure.env import version_of

    return f"pytest-vitperf {version_of('pytest-vitperf') or ''}".strip()
