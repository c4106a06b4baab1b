"""Speedup floors: the least speedup over FP16 a precision must reach, per GPU and backend version.

File format (JSON, schema 1)::

    {
      "schema": 1,
      "floors": [
        {"gpu": "NVIDIA RTX PRO 6000 Blackwell*", "backend": "tensorrt", "version": "10.14.*",
         "model": "vit_base_patch16_224", "batch": 64, "precision": "nvfp4",
         "min_speedup": 1.50, "source": "seed 001: 1.60x measured"}
      ]
    }

`gpu`, `version` and `model` are shell-style globs (case-insensitive for `gpu`); `batch` may be
omitted or "*" for any batch. `gpu`, `backend`, `precision` and `min_speedup` are required. When
several entries match, the most specific (fewest wildcards) wins; two equally specific entries for
the same key are an error in the file. Floors are judged against FP16 measured in the same run, so a
faster FP16 on a new backend version lowers every speedup: keep floors per version.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from pytest_vitperf.jsonfile import FileError, read_json
from pytest_vitperf.measurement import Measurement
from pytest_vitperf.precision import PRECISIONS, REFERENCE

SCHEMA = 1
FLOORS_FILE = "floors.json"
_REQUIRED = ("gpu", "backend", "precision", "min_speedup")
_FIELDS = (*_REQUIRED, "version", "model", "batch", "source")


class FloorsFileError(FileError):
    kind = "floors file"


@dataclass(frozen=True)
class Floor:
    gpu: str
    backend: str
    precision: str
    min_speedup: float
    version: str = "*"
    model: str = "*"
    batch: int | str = "*"
    source: str = ""

    def matches(self, *, gpu: str, backend: str, version: str, model: str, batch: int, precision: str) -> bool:
        return (
            fnmatchcase(gpu.lower(), self.gpu.lower())
            and backend == self.backend
            and fnmatchcase(version, self.version)
            and fnmatchcase(model, self.model)
            and (self.batch == "*" or self.batch == batch)
            and precision == self.precision
        )

    @property
    def specificity(self) -> int:
        fields = (self.gpu, self.version, self.model, str(self.batch))
        return sum(not any(c in f for c in "*?[") for f in fields)


@dataclass(frozen=True)
class Verdict:
    """A speedup judged against a floor; `floor` None means no floor applies (recorded, never failed)."""

    reference: Measurement
    candidate: Measurement
    floor: float | None
    source: str = ""

    @property
    def speedup(self) -> float:
        return self.reference.median / self.candidate.median

    @property
    def passed(self) -> bool:
        return self.floor is None or self.speedup >= self.floor

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference.to_dict(),
            "candidate": self.candidate.to_dict(),
            "floor": self.floor,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        ref, cand = Measurement.from_dict(d["reference"]), Measurement.from_dict(d["candidate"])
        return cls(ref, cand, d["floor"], d.get("source", ""))


def _parse_entry(path: Path, i: int, raw: Any) -> Floor:
    where = f"floors[{i}]"
    if not isinstance(raw, dict):
        raise FloorsFileError(path, f"{where} is a {type(raw).__name__}, expected an object")
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise FloorsFileError(path, f"{where} lacks {', '.join(missing)}")
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise FloorsFileError(path, f"{where} has unknown field(s) {', '.join(unknown)}; valid: {', '.join(_FIELDS)}")
    for key in ("gpu", "backend", "precision", "version", "model", "source"):
        if key in raw and not isinstance(raw[key], str):
            raise FloorsFileError(path, f"{where}.{key} must be a string")
    if raw["precision"] not in PRECISIONS or raw["precision"] == REFERENCE:
        valid = ", ".join(p for p in PRECISIONS if p != REFERENCE)
        raise FloorsFileError(path, f"{where}.precision {raw['precision']!r} is not one of: {valid}")
    speed = raw["min_speedup"]
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not speed > 0:
        raise FloorsFileError(path, f"{where}.min_speedup must be a number > 0, got {speed!r}")
    batch = raw.get("batch", "*")
    if batch != "*" and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise FloorsFileError(path, f'{where}.batch must be a positive integer or "*", got {batch!r}')
    return Floor(**{**raw, "min_speedup": float(speed), "batch": batch})


@dataclass(frozen=True)
class FloorsFile:
    path: Path
    floors: tuple[Floor, ...]

    @classmethod
    def load(cls, path: Path) -> FloorsFile:
        data = read_json(path, FloorsFileError)
        if not isinstance(data, dict):
            raise FloorsFileError(path, "top level must be an object with 'schema' and 'floors'")
        if data.get("schema") != SCHEMA:
            raise FloorsFileError(path, f"schema is {data.get('schema')!r}, this version reads schema {SCHEMA}")
        entries = data.get("floors")
        if not isinstance(entries, list):
            raise FloorsFileError(path, "'floors' must be a list")
        floors = tuple(_parse_entry(path, i, e) for i, e in enumerate(entries))
        seen: dict[tuple[Any, ...], int] = {}
        for i, f in enumerate(floors):
            key = (f.gpu.lower(), f.backend, f.version, f.model, f.batch, f.precision)
            if key in seen:
                raise FloorsFileError(path, f"floors[{i}] repeats floors[{seen[key]}] for the same key")
            seen[key] = i
        return cls(path, floors)

    def find(self, *, gpu: str, backend: str, version: str, model: str, batch: int, precision: str) -> Floor | None:
        hits = [
            f
            for f in self.floors
            if f.matches(gpu=gpu, backend=backend, version=version, model=model, batch=batch, precision=precision)
        ]
        return max(hits, key=lambda f: f.specificity) if hits else None
