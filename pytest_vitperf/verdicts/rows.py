"""What the run decided for each row, decided once into plain records that every output renders and none recomputes:
the terminal summary, report.md and data.json, `vitperf report`, the store and the CI exports. A run's JSON carries
them, so a report made from it later says what the live run said.

A row is one measurement: its speedup over its reference (time and cycles, each with its interval at the run's
confidence where the rounds gave one) and its floor's verdict, with the interval the floor was judged on, at the
level it was judged at, and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from pytest_vitperf.core.precision import PRECISIONS, REFERENCE, get_precision, sort_key
from pytest_vitperf.measure.clocks import compare_clocks
from pytest_vitperf.measure.measurement import NOISY_COV, Measurement
from pytest_vitperf.measure.rounds import MAX_LOOKS
from pytest_vitperf.verdicts.floors import CYCLES, NO_FLOOR, TIME, FloorsFile, Verdict, speedup_interval
from pytest_vitperf.verdicts.stats import CONFIDENCE, FAIL, INCONCLUSIVE, Interval, family_wise

Key = tuple[str, str, int, str]
REFERENCE_ROW = "reference"  # the row the others are compared with
NO_REFERENCE = "no fp16 to compare"


@dataclass(frozen=True)
class RowVerdict:
    """One row, judged. `outcome` is REFERENCE_ROW, NO_REFERENCE, NO_FLOOR, or the floor's PASS, FAIL or
    INCONCLUSIVE; `judged` is the interval the floor was judged on (in `judged_in`, at `level`), None where the
    engines were timed one after the other and the medians decided."""

    model: str
    precision: str
    batch: int
    backend: str
    gpu_uuid: str | None
    outcome: str
    reference: str | None = None  # the precision the speedups are over; None: none was measured
    speedup: float | None = None  # the medians' ratio
    time: Interval | None = None  # the speedup's interval at the run's confidence
    clock_ratio: float | None = None
    cycle_speedup: float | None = None
    cycles: Interval | None = None
    floor: float | None = None
    judged_in: str = TIME
    judged: Interval | None = None
    level: float = CONFIDENCE
    source: str = ""
    set_on: str = ""  # the backend version the floor was set on: "torch 2.11"
    reason: str = ""  # time and cycles judge the floor differently (clocks.disagreement)
    notes: tuple[str, ...] = ()  # "sequential", "noisy: CoV > 1.0%"

    @property
    def key(self) -> Key:
        return (self.model, self.precision, self.batch, self.backend)

    def verdict_text(self) -> str:
        """'pass (floor 1.11x, set on torch 2.11)', 'no floor; noisy: CoV > 1.0%': the verdict as every output words
        it."""
        if self.floor is not None and self.outcome not in (REFERENCE_ROW, NO_REFERENCE, NO_FLOOR):
            word = {FAIL: "FAIL", INCONCLUSIVE: "inconclusive"}.get(self.outcome, "pass")
            unit = "" if self.judged_in == TIME else f", {self.judged_in}"
            on = f", set on {self.set_on}" if self.set_on else ""
            head = f"{word} (floor {self.floor:.2f}x{unit}{on}{'; ' + self.reason if self.reason else ''})"
        else:
            head = self.outcome
        return "; ".join([head, *self.notes])

    def ratio_text(self, unit: str = TIME) -> str:
        """The speedup over the reference as the summary shows it: '1.17x [1.16, 1.18]', '0.49x', or '-'."""
        point, interval = (self.speedup, self.time) if unit == TIME else (self.cycle_speedup, self.cycles)
        if point is None:
            return "-"
        text = interval.text() if interval is not None else f"{point:.2f}x"  # the reference's own row has none
        if unit == TIME and self.reference not in (None, REFERENCE):
            text += f" vs {self.reference}"  # a registered entry with its own reference
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RowVerdict:
        intervals = {k: Interval.from_dict(d[k]) if d.get(k) else None for k in ("time", "cycles", "judged")}
        return cls(**{**d, **intervals, "notes": tuple(d.get("notes", ()))})


def reference_of(precision: str) -> str:
    """The precision a speedup of `precision` is taken over: its registry entry's reference, FP16 for one not in it."""
    return get_precision(precision).reference if precision in PRECISIONS else REFERENCE


def judge_row(m: Measurement, ref: Measurement | None, verdict: Verdict | None, max_cov: float = NOISY_COV,
              confidence: float = CONFIDENCE) -> RowVerdict:  # fmt: skip
    """One row's record: its speedups over `ref` (the verdict's reference where a floor judged it) and its verdict."""
    s = m.spec
    notes = ["sequential"] if (s.options.get("rounds") or {}).get("sequential") else []
    if m.cov > max_cov and not m.rounds:  # in rounds, the spread between rounds is the interval's business
        notes.append(f"noisy: CoV > {max_cov:.1%}")
    row = RowVerdict(s.model, s.precision, s.batch, s.backend, s.gpu_uuid, NO_REFERENCE, notes=tuple(notes))
    if s.precision == REFERENCE:
        row = replace(row, outcome=REFERENCE_ROW)
    if ref is None:
        return row
    same = ref.spec.key == s.key
    c = compare_clocks(ref.median, m.median, ref.sm_mhz, m.sm_mhz)
    row = replace(row, reference=ref.spec.precision, speedup=ref.median / m.median,
                  outcome=REFERENCE_ROW if s.precision == REFERENCE else NO_FLOOR,
                  clock_ratio=c.clock_ratio if c else None, cycle_speedup=c.cycle_speedup if c else None,
                  time=None if same else speedup_interval(ref, m, confidence),
                  cycles=None if same or c is None else speedup_interval(ref, m, confidence, CYCLES))  # fmt: skip
    if verdict is None or verdict.floor is None or s.precision == REFERENCE:
        return row
    why = c.disagreement(verdict.floor, ref.spec.precision, s.precision) if c and verdict.judged_in == TIME else None
    return replace(row, outcome=verdict.outcome, floor=verdict.floor, judged_in=verdict.judged_in,
                   judged=verdict.judged, level=verdict.confidence, source=verdict.source, set_on=verdict.set_on,
                   reason=why or "")  # fmt: skip


def judge_rows(measurements: Iterable[Measurement], verdicts: Mapping[Key, Verdict], max_cov: float = NOISY_COV,
               confidence: float = CONFIDENCE) -> list[RowVerdict]:  # fmt: skip
    """Every row's record, in the summary's order; each ratio is taken on one GPU."""
    ms = sorted(measurements, key=lambda m: (m.spec.model, m.spec.batch, m.spec.backend, sort_key(m.spec.precision)))
    by_key = {(m.spec.key, m.spec.gpu_uuid): m for m in ms}
    rows = []
    for m in ms:
        s = m.spec
        verdict = verdicts.get(s.key)
        same_gpu = by_key.get(((s.model, reference_of(s.precision), s.batch, s.backend), s.gpu_uuid))
        rows.append(judge_row(m, verdict.reference if verdict is not None else same_gpu, verdict, max_cov, confidence))
    return rows


def verdicts_from_floors(measurements: Iterable[Measurement], floors: FloorsFile, confidence: float = CONFIDENCE,
                         looks: int = MAX_LOOKS) -> dict[Key, Verdict]:  # fmt: skip
    """The floor verdicts a live run would have recorded for these measurements, from the floors file it would have
    read: for a run's JSON written before verdicts were kept in it. Each floor is judged at the run's confidence
    shared by every floor and look (stats.family_wise), as the live run judged it."""
    ms = list(measurements)
    by_key = {(m.spec.key, m.spec.gpu_uuid): m for m in ms}
    found = []
    for m in ms:
        s = m.spec
        floor = floors.find(gpu=s.device, backend=s.backend, version=s.backend_version or "", model=s.model,
                            batch=s.batch, precision=s.precision)  # fmt: skip
        ref = by_key.get(((s.model, reference_of(s.precision), s.batch, s.backend), s.gpu_uuid))
        if floor is not None and ref is not None and s.precision != REFERENCE:
            found.append((ref, m, floor))
    level = family_wise(confidence, max(1, len(found)) * looks)
    return {m.spec.key: Verdict.by(ref, m, f, level, confidence) for ref, m, f in found}
