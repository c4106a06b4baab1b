"""Every run's medians over time, and the steps in them: nightly gating lives on history, not on one baseline.

Layout, as the baseline store's: `<root>/<backend>/<backend-version>/<gpu-slug>/<model>.json`, one readable file per
(backend, version, GPU, model), appended to under the same lock and atomic write::

    {"schema": 1, "backend": "torch", "backend_version": "2.11.0", "gpu": "NVIDIA H100 80GB HBM3",
     "model": "vit_base_patch16_224",
     "runs": [{"time": "2026-11-23T08:15:58+00:00", "entries": {"fp16/b64": {"median": 6.53, "cov": 0.022,
               "n": 412, "sm_mhz": 1605}, ...}}, ...]}

`vitperf history` reads every version of a (backend, GPU, model) in time order, so a backend upgrade is a point in
one series, and finds steps with ruptures' PELT (see `find_steps`).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock

from pytest_vitperf.core.files import FileError, read_json, write_atomic
from pytest_vitperf.measure.env import slug
from pytest_vitperf.measure.measurement import Measurement
from pytest_vitperf.store.baselines import BaselineKey, key_for

SCHEMA = 1
# PELT's penalty in units of sigma^2 * ln(n) (sigma: the series' noise, from its successive differences). On 200
# synthetic series of 60 runs with CoV 1% and steps of +3% and -5%, 6 found every step with 0.005 false steps per
# series, and 0.005 on series without a step (docs/measurements/2026-11-23-change-points-pelt-vs-e-divisive.md).
PENALTY = 6.0
MIN_SEGMENT = 3  # runs on each side of a step


class HistoryFileError(FileError):
    kind = "history file"


@dataclass(frozen=True)
class Point:
    time: str
    backend_version: str
    median: float
    cov: float | None = None
    sm_mhz: float | None = None


@dataclass(frozen=True)
class Step:
    index: int  # the first run after the step
    before: float  # mean median of the segment before, ms
    after: float
    time: str
    backend_version: str

    @property
    def change(self) -> float:
        return self.after / self.before - 1


def entry_of(m: Measurement) -> dict[str, Any]:
    """What a history keeps of a measurement."""
    return {"median": round(m.median, 6), "cov": round(m.cov, 6), "n": m.n, "sm_mhz": m.sm_mhz}


def append(root: Path, measurements: Iterable[Measurement], when: datetime | None = None) -> list[Path]:
    """Add this run's medians to each of its (backend, version, GPU, model) files; return the files written. A file
    that cannot be read is never overwritten: HistoryFileError, naming it."""
    stamp = (when or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    by_path: dict[Path, tuple[BaselineKey, dict[str, Any]]] = {}
    for m in measurements:
        key = key_for(m)
        path = Path(root) / key.relpath()
        by_path.setdefault(path, (key, {}))[1][key.entry] = entry_of(m)
    for path, (key, entries) in by_path.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path.parent / f".{path.name}.lock"), timeout=60):
            doc: dict[str, Any] = _read(path) if path.exists() else {
                "schema": SCHEMA, "backend": key.backend, "backend_version": key.backend_version, "gpu": key.gpu,
                "model": key.model, "runs": []}  # fmt: skip
            doc["runs"].append({"time": stamp, "entries": dict(sorted(entries.items()))})
            write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return sorted(by_path)


def _read(path: Path) -> dict[str, Any]:
    doc = read_json(path, HistoryFileError)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("runs"), list):
        raise HistoryFileError(path, f"is not a schema-{SCHEMA} history file (a 'runs' list); move it aside")
    return doc


def series(root: Path) -> dict[tuple[str, str, str, str], list[Point]]:
    """(backend, GPU, model, entry) -> its points in time order, across backend versions."""
    out: dict[tuple[str, str, str, str], list[Point]] = {}
    for path in sorted(Path(root).glob("*/*/*/*.json")):
        doc = _read(path)
        for run in doc["runs"]:
            for entry, e in run.get("entries", {}).items():
                point = Point(run["time"], doc["backend_version"], float(e["median"]), e.get("cov"), e.get("sm_mhz"))
                out.setdefault((doc["backend"], doc["gpu"], doc["model"], entry), []).append(point)
    return {k: sorted(v, key=lambda p: p.time) for k, v in sorted(out.items())}


class History(Protocol):
    """Where runs' medians accumulate: a folder of JSON files (this module), or a database (sql.SqlStore)."""

    def append(
        self,
        measurements: Iterable[Measurement],
        when: datetime | None = None,
        rows: Iterable[Mapping[str, Any]] = (),
        *,
        roles: Mapping[BaselineKey, str] | None = None,
        environment: Mapping[str, Any] | None = None,
    ) -> list[str]: ...

    def series(self) -> dict[tuple[str, str, str, str], list[Point]]: ...


@dataclass(frozen=True)
class Folder:
    """A --vitperf-history folder, as a History."""

    root: Path

    def append(
        self,
        measurements: Iterable[Measurement],
        when: datetime | None = None,
        rows: Iterable[Mapping[str, Any]] = (),
        *,
        roles: Mapping[BaselineKey, str] | None = None,
        environment: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """The medians; a folder keeps neither the rows' verdicts nor the rows' roles in their baselines."""
        return [str(p) for p in append(self.root, measurements, when)]

    def series(self) -> dict[tuple[str, str, str, str], list[Point]]:
        return series(self.root)


def find_steps(values: list[float], penalty: float = PENALTY) -> list[int]:
    """Indices where the level of `values` changes: ruptures' PELT on the log of the values (a step is then a ratio,
    the same for a 1 ms and a 60 ms series), least-squares cost, penalty * sigma^2 * ln(n). Sigma comes from the
    successive differences' median absolute deviation, which a step barely moves."""
    import numpy as np
    import ruptures

    n = len(values)
    if n < 2 * MIN_SEGMENT:
        return []
    y = np.log(np.asarray(values, dtype=float))
    d = np.diff(y)
    sigma = float(np.median(np.abs(d - np.median(d)))) / 0.6745 / math.sqrt(2)
    if sigma == 0.0:
        sigma = 1e-6  # identical runs: any change at all is a step
    ends = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(y).predict(pen=penalty * sigma**2 * math.log(n))
    return [int(i) for i in ends[:-1]]


def steps(points: list[Point], penalty: float = PENALTY) -> list[Step]:
    medians = [p.median for p in points]
    cuts = find_steps(medians, penalty)
    bounds = [0, *cuts, len(points)]
    out = []
    for i, cut in enumerate(cuts):
        before, after = medians[bounds[i] : cut], medians[cut : bounds[i + 2]]
        p = points[cut]
        out.append(Step(cut, sum(before) / len(before), sum(after) / len(after), p.time, p.backend_version))
    return out


def plot(key: tuple[str, str, str, str], points: list[Point], found: list[Step], path: Path) -> Path:
    """The series with each detected step marked and each backend version change named."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backend, gpu, model, entry = key
    fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
    x = list(range(len(points)))
    ax.plot(x, [p.median for p in points], "o-", ms=3, lw=1, color="#1f77b4", label="median per run")
    bounds = [0, *[s.index for s in found], len(points)]
    for lo, hi in itertools.pairwise(bounds):
        level = sum(p.median for p in points[lo:hi]) / (hi - lo)
        ax.hlines(level, lo - 0.4, hi - 0.6, color="#ff7f0e", lw=2, label="segment mean" if lo == 0 else "_")
    for s in found:
        ax.axvline(s.index - 0.5, color="#d62728", ls="--", lw=1)
        ax.annotate(f"{s.change:+.1%}", (s.index - 0.5, ax.get_ylim()[1]), color="#d62728", ha="center", va="top",
                    fontsize=8, xytext=(0, -2), textcoords="offset points")  # fmt: skip
    for i in range(1, len(points)):
        if points[i].backend_version != points[i - 1].backend_version:
            ax.annotate(f"{backend} {points[i].backend_version}", (i - 0.5, ax.get_ylim()[0]), fontsize=7,
                        rotation=90, va="bottom", ha="right", color="gray")  # fmt: skip
    ax.set_title(f"{model} {entry} on {gpu} ({backend})", fontsize=9)
    ax.set_xlabel("run")
    ax.set_ylabel("median latency (ms)")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def figure_name(key: tuple[str, str, str, str]) -> str:
    return "history-" + "-".join(slug(k) for k in key) + ".png"
