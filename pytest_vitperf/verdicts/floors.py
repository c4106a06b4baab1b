"""Speedup floors: the least speedup over FP16 a precision must reach, per GPU and backend version, and the verdict
that judges a measured speedup against one.

File format (JSON, schema 1)::

    {
      "schema": 1,
      "floors": [
        {"gpu": "NVIDIA H100 80GB HBM3", "backend": "torch", "version": "2.11.*",
         "model": "vit_base_patch16_224", "batch": 64, "precision": "fp8",
         "min_speedup": 1.09, "judged_in": "cycles",
         "source": "3 processes on 2 H100s: 1.117x-1.125x in cycles",
         "provenance": {"command": "...", "date": "2026-11-25", "commit": "...", "interval": [1.113, 1.129],
                        "margin": 0.025}}
      ]
    }

`gpu`, `version` and `model` are shell-style globs (case-insensitive for `gpu`); `batch` may be omitted or "*" for
any batch. `gpu`, `backend`, `precision` and `min_speedup` are required. `judged_in` is "time" (the default) or
"cycles" (time x SM clock, where the clock is read): on a power-capped GPU the clock follows the work, and a ratio in
cycles moves less from board to board. `provenance` is free-form: where the floor came from (`vitperf floors make`
and `suggest` write it).

A floor set on a version holds for every later version until one of that later version exists: a run on torch
2.14.1 is judged by the `2.11.*` floors until `2.14.*` ones are written, and each verdict says which version set its
floor. When several entries hold, the one set on the newest version wins, then the most specific (fewest wildcards);
two entries for the same key are an error in the file. Floors are judged against FP16 measured in the same run, so a
faster FP16 on a new backend version lowers every speedup: keep floors per version.

A verdict judges the speedup's interval, not its point: pass when the interval clears the floor, FAIL when it lies
below, inconclusive when it straddles the floor after every round the budget allowed (verdicts/stats.py).

The same file may hold accuracy floors, what a precision may cost on the accuracy suite's task, judged by the same
rule on the paired intervals (verdicts/accuracy.py)::

      "accuracy": [
        {"precision": "fp8", "model": "vit_base_patch16_224*", "via": "engine", "max_drop": 1.0,
         "min_agreement": 0.97, "source": "..."}
      ]

`precision` and one of `max_drop` (points of top-1 below FP32) or `min_agreement` (share of images with FP32's
class) are required; `model` is a glob (default any), `via` is "engine", "fake-quant" or "*" (default).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.core.files import FileError, read_json
from pytest_vitperf.core.precision import PRECISIONS, REFERENCE
from pytest_vitperf.measure.measurement import Measurement
from pytest_vitperf.verdicts.builds import BuildSpread, build_spread, nested_interval, settles
from pytest_vitperf.verdicts.stats import CONFIDENCE, FAIL, INCONCLUSIVE, PASS, UNKNOWN, Bounds, Interval, against_floor

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.accuracy import TaskAccuracy

SCHEMA = 1
FLOORS_FILE = "floors.json"
TIME, CYCLES = "time", "cycles"
NO_FLOOR = "no floor"
_REQUIRED = ("gpu", "backend", "precision", "min_speedup")
_FIELDS = (*_REQUIRED, "version", "model", "batch", "source", "judged_in", "provenance")
_ACCURACY_FIELDS = ("precision", "model", "via", "max_drop", "min_agreement", "source", "provenance")
VIAS = ("engine", "fake-quant", "*")


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
    judged_in: str = TIME
    provenance: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def matches(self, *, gpu: str, backend: str, model: str, batch: int, precision: str) -> bool:
        """Whether the floor is for this GPU, backend, model, batch and precision, at some version."""
        return (fnmatchcase(gpu.lower(), self.gpu.lower()) and fnmatchcase(model, self.model)
                and (backend, precision) == (self.backend, self.precision) and self.batch in ("*", batch))  # fmt: skip

    def holds_on(self, version: str) -> bool:
        """Whether the floor holds on `version`: its glob matches it, or it was set on an earlier release."""
        if fnmatchcase(version, self.version):
            return True
        mine, theirs = release(self.version), release(version)
        return mine is not None and theirs is not None and mine <= theirs

    @property
    def specificity(self) -> int:
        return _specificity(self.gpu, self.version, self.model, str(self.batch))

    @property
    def set_on(self) -> str:
        """'torch 2.11': the backend version the floor was set on, as its verdicts name it; "" for every version."""
        return "" if self.version == "*" else f"{self.backend} {self.version.removesuffix('.*')}"

    @property
    def rank(self) -> tuple[tuple[int, ...], int]:
        """Which of several floors for one row applies: the one set on the newest version, then the most specific."""
        return release(self.version) or (), self.specificity


def release(version: str) -> tuple[int, ...] | None:
    """'2.11.*' -> (2, 11), '2.14.1+cu130' -> (2, 14, 1), '10.16.0.72' -> (10, 16, 0, 72): the numbered release a
    version, or a floor's version glob, begins with; None for '*', '?' or ''."""
    m = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(x) for x in m[0].split(".")) if m else None


def _specificity(*fields: str) -> int:
    """How many of a floor's key fields are not globs: the most specific matching floor is the one that applies."""
    return sum(not any(c in f for c in "*?[") for f in fields)


@dataclass(frozen=True)
class AccuracyFloor:
    """What a precision may cost on the accuracy task: at most `max_drop` points of top-1 below FP32, at least
    `min_agreement` of the images given FP32's class."""

    precision: str
    model: str = "*"
    via: str = "*"
    max_drop: float | None = None
    min_agreement: float | None = None
    source: str = ""
    provenance: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def judge(self, acc: TaskAccuracy, confidence: float = CONFIDENCE) -> tuple[str, str]:
        """PASS when every interval clears its floor, FAIL when one lies wholly beyond it, else INCONCLUSIVE (more
        images would tell); and what was found, the deciding criteria first."""
        found = []
        if self.max_drop is not None:  # judged as what is kept: minus the drop, in points, against minus the floor
            d = acc.drop_interval(confidence)
            kept = replace(d, low=-d.high * 100, high=-d.low * 100)
            found.append((_side(kept, -self.max_drop), f"drop {d.text(signed=True)} points, at most {self.max_drop:g}"))
        if self.min_agreement is not None:
            a = acc.agreement_interval(confidence)
            found.append((_side(a, self.min_agreement), f"agreement {a.text()}, at least {self.min_agreement:.2%}"))
        outcomes = {o for o, _ in found}
        outcome = FAIL if FAIL in outcomes else INCONCLUSIVE if INCONCLUSIVE in outcomes else PASS
        return outcome, "; ".join(t for _, t in sorted(found, key=lambda f: f[0] != outcome))


def _side(interval: Bounds, floor: float) -> str:
    """stats.against_floor, where UNKNOWN once the data is spent is INCONCLUSIVE."""
    found = against_floor(interval, floor)
    return INCONCLUSIVE if found == UNKNOWN else found


def _logs(m: Measurement, unit: str) -> list[list[float]]:
    """builds x rounds log values (time, or time x clock), nan where a round kept nothing."""
    values = m.round_cycles() if unit == CYCLES else m.round_medians()
    return [[math.log(v) if v else math.nan for v in build] for build in m.per_build(values)]


def family_spread(measurements: list[Measurement], unit: str = TIME) -> BuildSpread | None:
    """The build-to-build spread of a family's precisions measured in one run (builds.build_spread)."""
    return build_spread([_logs(m, unit) for m in measurements if m.builds > 1])


Paired = tuple[list[list[float]], list[list[float]], BuildSpread | None]  # builds x rounds logs of both, the spread


def _paired(reference: Measurement, candidate: Measurement, unit: str) -> Paired | None:
    """The builds x rounds logs of both and the family's build spread, where both were measured in one interleaved
    run over the same rounds; else None."""
    run = reference.run
    if run is None or run != candidate.run:
        return None
    if reference.rounds_taken != candidate.rounds_taken:
        return None
    info = reference.spec.options["rounds"].get("spread", {}).get(unit)
    return _logs(reference, unit), _logs(candidate, unit), BuildSpread(**info) if info else None


def speedup_interval(
    reference: Measurement, candidate: Measurement, confidence: float = CONFIDENCE, unit: str = TIME
) -> Interval | None:
    """The speedup reference/candidate with its interval over the rounds they shared (time, or time x SM clock in
    `unit` CYCLES), widened by the family's build-to-build spread where each precision was built more than once (as
    recorded with the measurements); None unless both were measured in the same interleaved run."""
    paired = _paired(reference, candidate, unit)
    return nested_interval(*paired, confidence) if paired is not None else None


@dataclass(frozen=True)
class Verdict:
    """A speedup judged against a floor; `floor` None means no floor applies (recorded, never failed).

    `confidence` is the level the floor is judged at: the run's confidence shared among all the floors it judges
    (stats.family_wise), so that it is the chance that none of them is judged wrongly. The intervals shown next to
    the speedup are at the run's own confidence (`shown`)."""

    reference: Measurement
    candidate: Measurement
    floor: float | None
    source: str = ""
    judged_in: str = TIME
    confidence: float = CONFIDENCE
    shown: float = CONFIDENCE
    set_on: str = ""  # the backend version the floor was set on (Floor.set_on); "" for a floor given as a number

    @classmethod
    def by(cls, reference: Measurement, candidate: Measurement, floor: Floor, confidence: float = CONFIDENCE,
           shown: float = CONFIDENCE) -> Verdict:  # fmt: skip
        """The verdict of `floor` on candidate's speedup over reference."""
        return cls(reference, candidate, floor.min_speedup, floor.source, floor.judged_in, confidence, shown,
                   floor.set_on)  # fmt: skip

    @property
    def speedup(self) -> float:
        return self.reference.median / self.candidate.median

    def interval(self, unit: str = TIME, confidence: float | None = None) -> Interval | None:
        return speedup_interval(self.reference, self.candidate, confidence or self.shown, unit)

    @property
    def judged(self) -> Interval | None:
        """The interval the floor is judged on: in the floor's unit, at the verdict's confidence."""
        return self.interval(self.judged_in, self.confidence)

    @property
    def outcome(self) -> str:
        """NO_FLOOR, PASS, FAIL or INCONCLUSIVE (the interval straddles the floor once the rounds are spent). A
        speedup without an interval (engines timed one after the other) is judged by its medians."""
        if self.floor is None:
            return NO_FLOOR
        interval = self.judged
        if interval is None:
            point = self.speedup if self.judged_in == TIME else self._cycle_point()
            return PASS if point >= self.floor else FAIL
        return _side(interval, self.floor)

    def settles_in(self, rounds: Iterable[float] | None = None) -> bool:
        """Whether any of `rounds` rounds in all could settle this verdict at its present estimate (builds.settles);
        None: 2 to 64 times the rounds taken, or endless. False when the spread between builds alone straddles the
        floor at every one of them."""
        paired = _paired(self.reference, self.candidate, self.judged_in)
        if self.floor is None or paired is None:
            return True
        n = self.reference.rounds_taken
        ahead = rounds if rounds is not None else (*(n * k for k in (2, 4, 16, 64)), math.inf)
        return any(settles(*paired, self.floor, self.confidence, r) for r in ahead)

    def _cycle_point(self) -> float:
        r, c = self.reference.sm_mhz, self.candidate.sm_mhz
        return self.speedup * (r / c) if r and c else self.speedup

    @property
    def passed(self) -> bool:
        """Not FAIL. What an inconclusive verdict does to its test is the run's choice (--vitperf-inconclusive)."""
        return self.outcome != FAIL

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference.to_dict(),
            "candidate": self.candidate.to_dict(),
            "floor": self.floor,
            "source": self.source,
            "judged_in": self.judged_in,
            "confidence": self.confidence,
            "shown": self.shown,
            "set_on": self.set_on,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], measured: dict[Any, Measurement] | None = None) -> Verdict:
        """`measured`: the measurements that a verdict names by key (results.export); else it holds its own."""
        ref, cand = (measured[tuple(d[k])] if isinstance(d[k], list) and measured is not None
                     else Measurement.from_dict(d[k]) for k in ("reference", "candidate"))  # fmt: skip
        return cls(
            ref,
            cand,
            d["floor"],
            d.get("source", ""),
            d.get("judged_in", TIME),
            d.get("confidence", CONFIDENCE),
            d.get("shown", CONFIDENCE),
            d.get("set_on", ""),
        )


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
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not 0 < speed <= sys.float_info.max:
        raise FloorsFileError(path, f"{where}.min_speedup must be a number > 0, got {speed!r}")
    batch = raw.get("batch", "*")
    if batch != "*" and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise FloorsFileError(path, f'{where}.batch must be a positive integer or "*", got {batch!r}')
    if raw.get("judged_in", TIME) not in (TIME, CYCLES):
        raise FloorsFileError(path, f"{where}.judged_in must be {TIME!r} or {CYCLES!r}, got {raw['judged_in']!r}")
    if not isinstance(raw.get("provenance", {}), dict):
        raise FloorsFileError(path, f"{where}.provenance must be an object (command, date, commit, interval, margin)")
    return Floor(**{**raw, "min_speedup": float(speed), "batch": batch})


def _parse_accuracy(path: Path, i: int, raw: Any) -> AccuracyFloor:
    where = f"accuracy[{i}]"
    if not isinstance(raw, dict):
        raise FloorsFileError(path, f"{where} is a {type(raw).__name__}, expected an object")
    unknown = sorted(set(raw) - set(_ACCURACY_FIELDS))
    if unknown:
        raise FloorsFileError(path, f"{where} has unknown field(s) {', '.join(unknown)}; valid: "
                              f"{', '.join(_ACCURACY_FIELDS)}")  # fmt: skip
    if raw.get("precision") not in PRECISIONS:
        valid = ", ".join(PRECISIONS)
        raise FloorsFileError(path, f"{where}.precision {raw.get('precision')!r} is not one of: {valid}")
    if raw.get("via", "*") not in VIAS or not isinstance(raw.get("model", "*"), str):
        raise FloorsFileError(path, f"{where}: via must be one of {', '.join(VIAS)} and model a string (a glob)")
    if not isinstance(raw.get("source", ""), str) or not isinstance(raw.get("provenance", {}), dict):
        raise FloorsFileError(path, f"{where}: source must be a string and provenance an object")
    drop, agreement = raw.get("max_drop"), raw.get("min_agreement")
    if drop is None and agreement is None:
        raise FloorsFileError(path, f"{where} states neither max_drop (points) nor min_agreement (a share)")
    for key, value, top in (("max_drop", drop, 100), ("min_agreement", agreement, 1)):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if value is not None and not (number and 0 <= value <= top):
            raise FloorsFileError(path, f"{where}.{key} must be a number in [0, {top}], got {value!r}")
    return AccuracyFloor(**raw)


@dataclass(frozen=True)
class FloorsFile:
    path: Path
    floors: tuple[Floor, ...]
    accuracy: tuple[AccuracyFloor, ...] = ()

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
        accuracy = data.get("accuracy", [])
        if not isinstance(accuracy, list):
            raise FloorsFileError(path, "'accuracy' must be a list")
        return cls(path, floors, tuple(_parse_accuracy(path, i, e) for i, e in enumerate(accuracy)))

    def find(self, *, gpu: str, backend: str, version: str, model: str, batch: int, precision: str) -> Floor | None:
        """The floor that judges this row on `version`: of those that hold on it, the newest set, the most specific."""
        hits = [f for f in self.floors
                if f.matches(gpu=gpu, backend=backend, model=model, batch=batch, precision=precision)
                and f.holds_on(version)]  # fmt: skip
        return max(hits, key=lambda f: f.rank) if hits else None

    def covers(self, *, gpu: str, backend: str, version: str) -> bool:
        """Whether any floor holds for this GPU and backend on `version` (a run without is told how to make them)."""
        return any(fnmatchcase(gpu.lower(), f.gpu.lower()) and f.backend == backend and f.holds_on(version)
                   for f in self.floors)  # fmt: skip

    def find_accuracy(self, *, model: str, precision: str, via: str) -> AccuracyFloor | None:
        """The accuracy floor for `precision` on `model` measured `via` an engine or fake quantization: the most
        specific (fewest wildcards) that matches."""
        hits = [f for f in self.accuracy if f.precision == precision and fnmatchcase(model, f.model)
                and f.via in ("*", via)]  # fmt: skip
        return max(hits, key=lambda f: _specificity(f.model, f.via)) if hits else None
