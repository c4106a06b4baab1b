"""The baseline gate: the one function that decides what a measurement means against its baseline (`judge`, then
`settle` over the run's matrix), and the ones that write baselines and runs. They return plain data (`Outcome`,
`Write`); report/baselines.py words them, the session collects them, fixtures fail a test on `Outcome.failure`, and
the run's exit status follows `Write.error` and the settled regressions.

Outcomes are distinct: compared (regression, improvement, within noise, or unknown while the spread is), missing
(reported, or a failure under --vitperf-strict), elsewhere (baselines exist only for other GPUs: never compared
silently), and unreadable (a malformed baseline file fails the tests that need it, naming the file).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from datetime import date
from typing import Any

from pytest_vitperf.core.files import FileError
from pytest_vitperf.measure.measurement import Measurement
from pytest_vitperf.store.baselines import (
    FLAGGED,
    MAX_RUNS,
    RUN,
    START,
    Baseline,
    BaselineFileError,
    BaselineKey,
    BaselineStorage,
    JsonDirStorage,
    Run,
    key_for,
    tool,
)
from pytest_vitperf.verdicts.baselines.compare import (
    BOARD_SPREAD,
    FALSE_ALARM,
    IMPROVEMENT,
    REGRESSION,
    Comparison,
    compare,
    matrix_prior,
    settle,
)
from pytest_vitperf.verdicts.spreads import Prior

COMPARED = "compared"
MISSING = "missing"
ELSEWHERE = "elsewhere"
UNREADABLE = "unreadable"
# What a run's row is to its row's baseline in a store (sql.baseline_runs reads them back).
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
    runs: int = 0  # the row's runs after the write
    recorded: bool = False  # --vitperf-record-run: a run added, the baseline's value kept

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Write:
        return cls(**{**d, "key": BaselineKey(**d["key"])})


def _source(b: Baseline) -> str:
    p = b.provenance
    return f"{p.get('source') or p.get('test') or 'unknown'} ({p.get('date') or p.get('note') or p.get('kind', '')})"


def judge(
    storage: BaselineStorage,
    m: Measurement,
    *,
    threshold: float,
    environment: dict[str, Any],
    strict: bool = False,
    updating: bool = False,
    level: float = FALSE_ALARM,
    board_spread: float = BOARD_SPREAD,
    prior: Prior | None = None,
) -> Outcome:
    """Compare `m` with its baseline's runs at the row's `level` (the run's false-alarm rate over its rows) and
    decide: a regression, an unreadable baseline file, or (strict) a missing baseline fails; while baselines are
    being updated only an unreadable file does. `settle` takes the final verdicts over the whole matrix."""
    key = key_for(m)
    try:
        baseline = storage.get(key)
        others = storage.others(key) if baseline is None else []
    except FileError as exc:  # a malformed baseline file, or a store that cannot be read
        return unreadable(m, exc)
    if baseline is None and others:
        gpus = ", ".join(sorted({o.gpu for o in others}))
        return Outcome(key, ELSEWHERE, m.median, note=f"baselines exist only for {gpus}; not compared with {key.gpu}")
    if baseline is None:
        note = f"no baseline at {storage.where(key)}"
        return Outcome(key, MISSING, m.median, note=note, failure=MISSING if strict and not updating else None)
    current = m.mean if baseline.statistic == "mean" and not baseline.runs else m.median  # as a published mean
    c = compare(baseline, current, current_mhz=m.sm_mhz, gpu_uuid=m.spec.gpu_uuid or "", threshold=threshold,
                level=level, board_spread=board_spread, prior=prior)  # fmt: skip
    changes = tuple(
        f"{k} {baseline.environment.get(k)} -> {environment.get(k)}"
        for k in _FINGERPRINT
        if k in baseline.environment and baseline.environment.get(k) != environment.get(k)
    )
    failure = REGRESSION if c.change == REGRESSION and not updating else None
    return Outcome(key, COMPARED, current, c, _source(baseline), "", changes, failure)


def unreadable(m: Measurement, exc: FileError) -> Outcome:
    return Outcome(key_for(m), UNREADABLE, m.median, note=str(exc), failure=UNREADABLE)


def prior_for(storage: BaselineStorage, key: BaselineKey, gpu_uuid: str) -> Prior | None:
    """The spread prior of every row stored for the key's backend version and GPU model (compare.matrix_prior), so
    that a row's verdict does not hang on which other tests a run selects. What cannot be read lends nothing: each
    row's own judgement reports it."""
    try:
        return matrix_prior(storage.beside(key), gpu_uuid)
    except FileError:
        return None


def roles(
    measured: Iterable[Measurement], outcomes: Iterable[Outcome], *, update: bool, record: bool
) -> dict[BaselineKey, str]:
    """What each row of this run is to its baseline in a store: the start of a new one (--vitperf-update-baselines),
    one more run of it (--vitperf-record-run, or judged within noise), or FLAGGED where the gate found a change, so
    that a regression does not become the reference of the nights after it until a baseline is started anew."""
    keys = [key_for(m) for m in measured]
    if update or record:
        return dict.fromkeys(keys, START if update else RUN)
    changed = {o.key for o in outcomes if o.comparison is not None and o.comparison.change in (REGRESSION, IMPROVEMENT)}
    return {k: FLAGGED if k in changed else RUN for k in keys}


def settle_outcomes(outcomes: list[Outcome], rate: float, *, updating: bool = False) -> list[Outcome]:
    """The run's final verdicts: Benjamini-Hochberg over every compared row (compare.settle). A row already failed
    at once keeps its failure; a row only the matrix finds becomes a regression that fails the run (unless baselines
    are being written)."""
    settled = settle([o.comparison for o in outcomes], rate)
    out = []
    for o, c in zip(outcomes, settled, strict=True):
        if c is not None and c is not o.comparison:
            found = c.change == REGRESSION and not updating
            failure = o.failure or (REGRESSION if found else None)
            o = replace(o, comparison=c, failure=failure)
        out.append(o)
    return out


def run_of(m: Measurement) -> Run:
    """The measurement as one run of its row: its median, the board and the clock it ran at (`write` sets its
    group)."""
    return Run(m.median, str(date.today()), m.spec.gpu_uuid or "", m.sm_mhz)


def to_baseline(m: Measurement, environment: dict[str, Any], provenance: dict[str, Any]) -> Baseline:
    """A measurement as the baseline it becomes: its median and raw samples (and itself as the first run of the
    row), with where it came from and, on a GPU, the clock readings taken under those samples."""
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
        runs=(run_of(m),),
    )


def measured_provenance(m: Measurement, nodeid: str) -> dict[str, Any]:
    return {"kind": "measured", "tool": tool(), "test": nodeid, "timer": m.spec.timer}


def write(storage: JsonDirStorage, baseline: Baseline, *, keep_value: bool = False) -> Write:
    """Write or refresh one baseline, keeping the row's earlier runs: a refresh starts a new group of runs (the new
    normal), and `keep_value` (--vitperf-record-run) only adds the run to the current group. A file that cannot be
    read (never overwritten) or written is a `Write` with its error, not an exception: the run goes on and fails at
    its end."""
    path = storage.path(baseline.key)
    try:
        old = storage.get(baseline.key)
        if old is not None:
            group = old.group if keep_value else old.group + 1
            kept = (*old.runs, *(replace(r, group=group) for r in baseline.runs))[-MAX_RUNS:]
            baseline = replace(old if keep_value else baseline, runs=kept)
        storage.put([baseline])
    except (BaselineFileError, OSError) as exc:
        return Write(baseline.key, str(path), baseline.value, error=str(exc) or type(exc).__name__)
    if old is None:
        return Write(baseline.key, str(path), baseline.value, runs=len(baseline.runs))
    n = len(baseline.runs)
    if keep_value:
        return Write(baseline.key, str(path), baseline.runs[-1].median_ms, runs=n, recorded=True)
    return Write(baseline.key, str(path), baseline.value, old.value, old.statistic, runs=n)
