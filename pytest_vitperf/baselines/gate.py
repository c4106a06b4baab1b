"""The baseline gate inside a test run: find a measurement's baseline, compare, and say what happened.

Outcomes are distinct: compared (regression, improvement or unchanged), missing (reported, or a failure
under --vitperf-strict), elsewhere (baselines exist only for other GPUs: never compared silently), and
unreadable (a malformed baseline file fails the tests that need it, naming the file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from pytest_vitperf.baselines.compare import Comparison, compare
from pytest_vitperf.baselines.store import Baseline, BaselineFileError, BaselineKey, JsonDirStorage
from pytest_vitperf.measurement import Measurement

COMPARED = "compared"
MISSING = "missing"
ELSEWHERE = "elsewhere"
UNREADABLE = "unreadable"
# Environment facts that change performance without changing the baseline's key.
_FINGERPRINT = ("driver", "cuda_runtime", "torch", "modelopt", "tensorrt", "tensorrt-rtx")


@dataclass(frozen=True)
class Outcome:
    key: BaselineKey
    kind: str
    comparison: Comparison | None = None
    baseline: Baseline | None = None
    note: str = ""
    env_changes: tuple[str, ...] = field(default=())


def key_for(m: Measurement) -> BaselineKey:
    s = m.spec
    return BaselineKey(s.backend, s.backend_version or "unknown", s.device, s.model, s.precision, s.batch)


def judge(storage: JsonDirStorage, m: Measurement, threshold: float, environment: dict[str, Any]) -> Outcome:
    key = key_for(m)
    try:
        baseline = storage.get(key)
        if baseline is None:
            others = storage.others(key)
            if others:
                gpus = ", ".join(sorted({o.gpu for o in others}))
                return Outcome(key, ELSEWHERE, note=f"baselines exist only for {gpus}; not compared with {key.gpu}")
            return Outcome(key, MISSING, note=f"no baseline at {storage.path(key)} [{key.entry}]")
    except BaselineFileError as exc:
        return Outcome(key, UNREADABLE, note=str(exc))
    current = m.median if baseline.statistic == "median" else m.mean
    c = compare(
        baseline.value,
        current,
        statistic=baseline.statistic,
        baseline_samples=baseline.samples,
        current_samples=m.samples_ms,
        threshold=threshold,
    )
    changes = tuple(
        f"{k} {baseline.environment.get(k)} -> {environment.get(k)}"
        for k in _FINGERPRINT
        if k in baseline.environment and baseline.environment.get(k) != environment.get(k)
    )
    return Outcome(key, COMPARED, c, baseline, env_changes=changes)


def to_baseline(m: Measurement, environment: dict[str, Any], nodeid: str) -> Baseline:
    from pytest_vitperf.env import version_of

    return Baseline(
        key=key_for(m),
        statistic="median",
        value=m.median,
        stats=m.stats(),
        samples=m.samples_ms,
        environment=environment,
        provenance={
            "kind": "measured",
            "tool": f"pytest-vitperf {version_of('pytest-vitperf') or ''}".strip(),
            "test": nodeid,
            "date": str(date.today()),
            "timer": m.spec.timer,
        },
    )


def regression_message(o: Outcome, nodeid: str) -> str:
    from pytest_vitperf.report import table

    c, b = o.comparison, o.baseline
    assert c is not None and b is not None
    p = "-" if c.p_value is None else f"{c.p_value:.2g}"
    rows = [(f"{c.baseline_ms:.3f} ms", f"{c.current_ms:.3f} ms", f"{c.delta:+.1%}", p, c.verdict.upper())]
    lines = [
        f"latency regression: {o.key.model} {o.key.precision} batch {o.key.batch} on {o.key.backend} "
        f"{o.key.backend_version}, {o.key.gpu} ({c.statistic}, threshold {c.threshold:.0%}, {c.method})",
        *("  " + line for line in table(("baseline", "current", "Δ", "p-value", "verdict"), rows)),
        f"baseline from {b.provenance.get('source') or b.provenance.get('test') or 'unknown'}"
        f" ({b.provenance.get('date') or b.provenance.get('note') or b.provenance.get('kind', '')})",
    ]
    if o.env_changes:
        lines.append("environment changed since the baseline: " + "; ".join(o.env_changes))
    lines += ["If the change is intended, accept it:", f"  pytest --gpu-bench {nodeid!r} --vitperf-update-baselines"]
    return "\n".join(lines)
