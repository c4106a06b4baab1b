"""The baseline gate: the one function that decides what a measurement means against its baseline, and the one
that writes baselines. Both return plain data (`Outcome`, `Write`); report.py words them, the session collects
them, fixtures fail a test on `Outcome.failure`, and the run's exit status follows `Write.error`.

Outcomes are distinct: compared (regression, improvement or unchanged), missing (reported, or a failure
under --vitperf-strict), elsewhere (baselines exist only for other GPUs: never compared silently), and
unreadable (a malformed baseline file fails the tests that need it, naming the file).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from datetime import date
from typing import Any

from pytest_vitperf.measure.clocks import compare_clocks
from pytest_vitperf.measure.measurement import Measurement
from pytest_vitperf.verdicts.baselines.compare import CLOCK, REGRESSION, Comparison, compare_to
from pytest_vitperf.verdicts.baselines.store import Baseline, BaselineFileError, BaselineKey, JsonDirStorage

COMPARED = "compared"
MISSING = "missing"
ELSEWHERE = "elsewhere"
UNREADABLE = "unreadable"
# Environment facts that change performance without changing the baseline's key.
_FINGERPRINT = ("driver", "cuda_runtime", "torch", "modelopt", "tensorrt", "tensorrt-rtx", "power_limit_w")


@dataclass(frozen=True)
class Outcome:
    """What the gate decided for one measurement."""

    key: BaselineKey
    kind: str  # COMPARED, MISSING, ELSEWHERE or UNREADABLE
    current_ms: float
    comparison: Comparison | None = None
    baseline_from: str = ""  # where the baseline came from and when, for the failure message
    note: str = ""
    env_changes: tuple[str, ...] = ()
    failure: str | None = None  # None: the test passes the gate; else UNREADABLE, MISSING or REGRESSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        c = d.get("comparison")
        return cls(
            **{
                **d,
                "key": BaselineKey(**d["key"]),
                "comparison": Comparison(**c) if c is not None else None,
                "env_changes": tuple(d.get("env_changes", ())),
            }
        )


@dataclass(frozen=True)
class Write:
    """One baseline written (or not) by --vitperf-update-baselines."""

    key: BaselineKey
    path: str
    new_ms: float
    old_ms: float | None = None
    old_statistic: str = ""
    error: str | None = None  # why it was not written; the run fails

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Write:
        return cls(**{**d, "key": BaselineKey(**d["key"])})


def key_for(m: Measurement) -> BaselineKey:
    s = m.spec
    return BaselineKey(
        s.backend, s.backend_version or "unknown", s.device, s.model, s.precision, s.batch, bool(s.options.get("cold"))
    )


def _source(b: Baseline) -> str:
    p = b.provenance
    return f"{p.get('source') or p.get('test') or 'unknown'} ({p.get('date') or p.get('note') or p.get('kind', '')})"


def judge(
    storage: JsonDirStorage,
    m: Measurement,
    *,
    threshold: float,
    environment: dict[str, Any],
    strict: bool = False,
    updating: bool = False,
) -> Outcome:
    """Compare `m` with its baseline and decide: a regression, an unreadable baseline file, or (strict) a missing
    baseline or a slowdown that only the clock explains fails; while baselines are being updated only an unreadable
    file does."""
    key = key_for(m)
    try:
        baseline = storage.get(key)
        others = storage.others(key) if baseline is None else []
    except BaselineFileError as exc:
        return Outcome(key, UNREADABLE, m.median, note=str(exc), failure=UNREADABLE)
    if baseline is None and others:
        gpus = ", ".join(sorted({o.gpu for o in others}))
        return Outcome(key, ELSEWHERE, m.median, note=f"baselines exist only for {gpus}; not compared with {key.gpu}")
    if baseline is None:
        note = f"no baseline at {storage.path(key)} [{key.entry}]"
        return Outcome(key, MISSING, m.median, note=note, failure=MISSING if strict and not updating else None)
    current = m.median if baseline.statistic == "median" else m.mean
    timed = compare_to(baseline, current, m.samples_ms, threshold)
    c, note = clock_aware(timed, baseline.stats.get("sm_mhz"), m.sm_mhz)
    changes = tuple(
        f"{k} {baseline.environment.get(k)} -> {environment.get(k)}"
        for k in _FINGERPRINT
        if k in baseline.environment and baseline.environment.get(k) != environment.get(k)
    )
    fails = c.change == REGRESSION or (c.change == CLOCK and strict)
    failure = REGRESSION if fails and not updating else None
    return Outcome(key, COMPARED, current, c, _source(baseline), note, changes, failure)


def clock_aware(c: Comparison, baseline_mhz: float | None, current_mhz: float | None) -> tuple[Comparison, str]:
    """A regression in time that is none in cycles (time x median SM clock) is the clock's doing: CLOCK, with a
    note. Without a clock on both sides the comparison stands."""
    clocks = compare_clocks(c.baseline_ms, c.current_ms, baseline_mhz, current_mhz)
    if c.change != REGRESSION or clocks is None:
        return c, ""
    cycles = 1 / clocks.cycle_speedup - 1  # the change in time x clock
    if cycles > c.threshold:
        return c, ""
    note = f"slower in time, not in cycles ({cycles:+.1%}): SM clock {baseline_mhz:.0f} -> {current_mhz:.0f} MHz"
    return replace(c, change=CLOCK), note


def to_baseline(m: Measurement, environment: dict[str, Any], provenance: dict[str, Any]) -> Baseline:
    """A measurement as the baseline it becomes: its median and raw samples, with where it came from and, on a GPU,
    the clock readings taken under those samples."""
    if m.clocks:
        environment = {**environment, "clock_readings": [r.to_dict() for r in m.clocks]}
    return Baseline(
        key=key_for(m),
        statistic="median",
        value=m.median,
        stats=m.stats(),
        samples=m.samples_ms,
        environment=environment,
        provenance={"date": str(date.today()), **provenance},
    )


def measured_provenance(m: Measurement, nodeid: str) -> dict[str, Any]:
    from pytest_vitperf.measure.env import version_of

    tool = f"pytest-vitperf {version_of('pytest-vitperf') or ''}".strip()
    return {"kind": "measured", "tool": tool, "test": nodeid, "timer": m.spec.timer}


def write(storage: JsonDirStorage, baseline: Baseline) -> Write:
    """Write or refresh one baseline. A file that cannot be read (never overwritten) or written is a `Write` with
    its error, not an exception: the run goes on and fails at its end."""
    path = storage.path(baseline.key)
    try:
        old = storage.get(baseline.key)
        storage.put([baseline])
    except (BaselineFileError, OSError) as exc:
        return Write(baseline.key, str(path), baseline.value, error=str(exc) or type(exc).__name__)
    if old is None:
        return Write(baseline.key, str(path), baseline.value)
    return Write(baseline.key, str(path), baseline.value, old.value, old.statistic)
