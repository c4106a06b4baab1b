"""A run's results as plain data, and back: what an xdist worker hands its controller, what a shard leaves in its
--benchmark-json for `vitperf merge`, and the merge of either into one session whose verdicts are judged together."""

from __future__ import annotations

import json
import socket
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_vitperf.core.files import FileError, read_json
from pytest_vitperf.engines.tensorrt.plan import PlanRecord
from pytest_vitperf.measure.measurement import NOISY_COV, Measurement
from pytest_vitperf.session import VitperfSession
from pytest_vitperf.verdicts.baselines.gate import Outcome, Write
from pytest_vitperf.verdicts.floors import Verdict
from pytest_vitperf.verdicts.rows import RowVerdict, judge_rows
from pytest_vitperf.verdicts.stats import CONFIDENCE
from pytest_vitperf.workers import WorkerRecord

# What must be alike in every shard for their verdicts to be one run's: a shard judged at another confidence, or
# gated at another false-alarm rate, is another run.
ALIKE = ("confidence", "false_alarm", "noise_threshold", "inject_delay", "shards")
SHAPE = {"settings": dict, "measurements": list, "verdicts": list}  # what a merge reads of a shard's results


def label(vs: VitperfSession) -> str:
    """How a shard names itself in a merged report: its share of the run and its host."""
    shard = vs.settings.shard
    return f"shard {shard[0]}/{shard[1]} on {socket.gethostname()}" if shard else socket.gethostname()


def export(vs: VitperfSession, worker: str) -> dict[str, Any]:
    """Results as plain data. Through JSON, since execnet sends built-in types only: a str subclass in one spec
    (torch's TorchVersion) once took a worker's results down."""
    s = vs.settings
    data = {
        "worker": asdict(vs.worker_record(worker)),
        "workers": [asdict(w) for w in vs.workers],  # an xdist controller's, or a merge's
        "devices": vs.devices or ([vs.device.describe()] if "device" in vs.__dict__ else []),
        "settings": {
            "confidence": s.confidence,
            "false_alarm": s.false_alarm,
            "noise_threshold": s.noise_threshold,
            "inject_delay": [list(d) for d in s.inject_delay],
            "shard": s.shard[0] if s.shard else None,
            "shards": s.shard[1] if s.shard else 1,
            "baseline_dir": str(s.baseline_dir) if s.baseline_dir else None,
            "store": s.store,
            "store_baselines": s.store_baselines,
        },
        "outcomes": [o.to_dict() for o in vs.outcomes],
        "not_passed": vs.not_passed,
        "writes": [w.to_dict() for w in vs.writes],
        "plans": [p.to_dict() for p in vs.plans],
        "accuracies": [a.to_dict() for a in vs.accuracies],
        "measurements": [{**m.to_dict(), "nodeid": vs.measured_by(k) or ""} for k, m in vs.measurements.items()],
        "verdicts": [{**v.to_dict(), "reference": _named(vs, v.reference), "candidate": _named(vs, v.candidate)}
                     for v in vs.verdicts.values()],
        "rows": [r.to_dict() for r in decided(vs)],  # what `vitperf report` and `vitperf merge` show as they were
    }
    return json.loads(json.dumps(data))


def decided(vs: VitperfSession) -> list[RowVerdict]:
    """Each row's record (verdicts/rows.py), judged once for every output of the run: in the process that measured
    it, and carried from a worker or a shard as it was judged there."""
    if vs.rows is None:
        s = vs.settings
        judged = judge_rows(vs.measurements.values(), vs.verdicts, s.noise_threshold, s.confidence)
        vs.rows = [vs.handed.get((r.key, r.gpu_uuid), r) for r in judged]
    return vs.rows


def _named(vs: VitperfSession, m: Measurement) -> Any:
    """A verdict's measurement by its key where "measurements" holds it (half of the file, else), or whole."""
    return list(m.spec.key) if vs.measurements.get(m.spec.key) is m else m.to_dict()


def merge(vs: VitperfSession, data: dict[str, Any]) -> list[tuple[Measurement, str]]:
    """Take a worker's or a shard's results; return its measurements with the node id of the test that took each."""
    workers = data.get("workers") or ([data["worker"]] if "worker" in data else [])
    vs.workers += [WorkerRecord(**w) for w in workers]
    vs.devices += [d for d in data.get("devices", []) if d not in vs.devices]
    vs.outcomes += [Outcome.from_dict(o) for o in data.get("outcomes", [])]
    vs.not_passed = {**data.get("not_passed", {}), **vs.not_passed}  # an xdist controller saw its workers' already
    vs.writes += [Write.from_dict(w) for w in data.get("writes", [])]
    vs.plans += [PlanRecord(**p) for p in data.get("plans", [])]
    from pytest_vitperf.verdicts.accuracy import TaskAccuracy  # numpy: not at plugin load

    vs.accuracies += [TaskAccuracy.from_dict(a) for a in data.get("accuracies", [])]
    merged = []
    for d in data.get("measurements", []):
        m = Measurement.from_dict(d)
        vs.record(m)
        merged.append((m, d.get("nodeid", "")))
    vs.handed.update({(r.key, r.gpu_uuid): r for r in map(RowVerdict.from_dict, data.get("rows", []))})
    mine = {m.spec.key: m for m, _ in merged}
    for v in data.get("verdicts", []):
        vs.record_verdict(Verdict.from_dict(v, mine))
    return merged


class ResultsError(FileError):
    """A file `vitperf merge` cannot take: not a run's --benchmark-json, or not of the same run as the others."""

    kind = "results"


def read_results(path: Path) -> dict[str, Any]:
    """The results a run left in its --benchmark-json (machine_info.vitperf.results)."""
    data = read_json(path, ResultsError)
    results = data.get("machine_info", {}).get("vitperf", {}).get("results") if isinstance(data, dict) else None
    if not isinstance(results, dict) or not all(isinstance(results.get(k), t) for k, t in SHAPE.items()):
        raise ResultsError(path, "holds no vitperf results: it is not the --benchmark-json of a pytest --gpu-bench "
                                 "run. Write one per shard: pytest --gpu-bench --vitperf-shard K/N --benchmark-json "
                                 "shard-K.json")  # fmt: skip
    return results


def stored_rows(path: Path, measurements: list[Measurement], floors: Path) -> tuple[list[RowVerdict], str]:
    """The rows a run's --benchmark-json carries, as the live run judged them. One written before runs kept them
    is judged now with `floors`, the file that run read, at that run's confidence; the second value says so."""
    from pytest_vitperf.verdicts.floors import FloorsFile
    from pytest_vitperf.verdicts.rows import verdicts_from_floors

    doc = read_json(path, ResultsError)
    results = doc.get("machine_info", {}).get("vitperf", {}).get("results") if isinstance(doc, dict) else None
    results = results if isinstance(results, dict) else {}
    if isinstance(results.get("rows"), list):
        try:
            return [RowVerdict.from_dict(r) for r in results["rows"]], ""
        except (KeyError, TypeError, ValueError) as exc:
            raise ResultsError(path, f"holds rows that are not this plugin's ({type(exc).__name__}: {exc})") from None
    settings = results.get("settings", {})
    confidence, max_cov = settings.get("confidence", CONFIDENCE), settings.get("noise_threshold", NOISY_COV)
    if not floors.exists():
        return judge_rows(measurements, {}, max_cov, confidence), (
            f"{path} carries no verdicts and {floors} does not exist: no row is judged against a floor; name the "
            f"floors file its run read: vitperf report {path} --floors FLOORS.json")  # fmt: skip
    verdicts = verdicts_from_floors(measurements, FloorsFile.load(floors), confidence)
    return judge_rows(measurements, verdicts, max_cov, confidence), (
        f"{path} carries no verdicts (written before runs kept them): judged now with {floors}, as its run would")


def merged(paths: list[Path]) -> VitperfSession:
    """One session holding every shard's results. Shards of one run are judged alike and never measure one row
    twice; anything else is refused, naming the file."""
    from pytest_vitperf.core.settings import Settings

    runs = [(p, read_results(p)) for p in paths]
    first = runs[0][1]["settings"]
    settings = Settings(enabled=True, confidence=first["confidence"], false_alarm=first["false_alarm"],
                        noise_threshold=first["noise_threshold"],
                        inject_delay=tuple((p, float(r)) for p, r in first["inject_delay"]),
                        baseline_dir=Path(first["baseline_dir"]) if first["baseline_dir"] else None,
                        store=first.get("store"), store_baselines=bool(first.get("store_baselines")))  # fmt: skip
    vs = VitperfSession(settings)
    owner: dict[tuple[str, str, int, str], Path] = {}
    for path, results in runs:
        differs = [k for k in ALIKE if results["settings"].get(k) != first.get(k)]
        if differs:
            raise ResultsError(path, f"was run with other {', '.join(differs)} than {runs[0][0]}: shards of one run "
                                     "take the same options but --vitperf-shard")  # fmt: skip
        for m, _ in merge(vs, results):
            if m.spec.key in owner:
                raise ResultsError(path, f"measured {m.spec.label}, as {owner[m.spec.key]} did: shards of one run "
                                         "never overlap; give each host its own K of one N (--vitperf-shard K/N)")
            owner[m.spec.key] = path
    n = first["shards"]
    shards = sorted(results["settings"].get("shard") or 0 for _, results in runs)
    # Every shard once, or one whole run: a gate over part of a run passes what nobody measured.
    if shards not in (list(range(1, n + 1)), [0]):
        missing = sorted(set(range(1, n + 1)) - set(shards))
        raise ResultsError(", ".join(map(str, paths)), f"are shard(s) {', '.join(map(str, shards))} of {n} (0: a run "
                           f"without --vitperf-shard), {'missing ' + str(missing) if missing else 'not each once'}: "
                           "a gate over part of a run passes what it never measured. Merge every shard's JSON once: "
                           "vitperf merge shard-*.json")  # fmt: skip
    return vs


def not_passed(report: Any) -> dict[str, str] | None:
    """How a test report did not pass, in one line (`vitperf ab` lists them beside its rows), or None: it passed."""
    if report.skipped and isinstance(report.longrepr, tuple):
        return {"outcome": "skipped", "line": str(report.longrepr[2]).removeprefix("Skipped: ")}
    if not report.failed:
        return None
    crash = getattr(report.longrepr, "reprcrash", None)  # the exception's line, where pytest has one
    lines = str(crash.message if crash else report.longrepr).strip().splitlines() or ["no message"]
    line = lines[0] if crash else lines[-1]
    return {"outcome": "failed" if report.when == "call" else f"error in {report.when}", "line": line[:300]}
