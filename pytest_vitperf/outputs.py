"""What a run writes when it ends: baselines (--vitperf-update-baselines), the history, CI exports and the report.
A write that fails is kept for the summary, which says what was not written, and fails the run: a nightly job must
not believe it refreshed them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_vitperf.session import VitperfSession


def finish(session: pytest.Session, vs: VitperfSession) -> None:
    """pytest_sessionfinish: each process writes the baselines it measured (the store's lock merges them); a worker
    hands its results to the controller; the controller, holding every worker's, writes the rest. A run ended by a
    signal writes nothing of its own: it exits 128 + the signal, as a shell reports it."""
    if vs.signal is not None:
        session.exitstatus = 128 + vs.signal
        return
    if vs.settings.update_baselines or vs.settings.record_run:
        write_baselines(vs)
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["vitperf"] = vs.export(session.config.workerinput["workerid"])  # type: ignore[attr-defined]
        return
    if vs.settings.cache_dir is not None and vs.placement.test_s:
        from pytest_vitperf.workers import DURATIONS, write_durations

        try:
            write_durations(vs.settings.cache_dir, vs.placement.test_s)
        except OSError as exc:
            vs.export_errors.append(f"{vs.settings.cache_dir / DURATIONS}: {exc.strerror or exc} (the next -n run "
                                    "deals its units by the model instead)")  # fmt: skip
    write_history(vs)
    write_exports(vs)
    if vs.settings.report is not None and vs.measurements:
        write_report(vs)
    if settle(vs) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    failed_write = bool(vs.history_error or vs.export_errors or vs.lost_workers)
    failed_write |= any(w.error is not None for w in vs.writes)
    if failed_write and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def interrupted(vs: VitperfSession, config: pytest.Config) -> str:
    """The line a run ended by a signal prints: what it did, what it did not, and the command that finishes it."""
    import shlex
    import signal

    from pytest_vitperf.options import CACHE_DIR

    cache = vs.settings.cache_dir
    kept = (f"the engines it built are kept in {cache}, so a new run starts warm" if cache is not None else
            f"nothing was cached (with {CACHE_DIR} a new run would start from the engines built)")  # fmt: skip
    again = " ".join(["pytest", *map(shlex.quote, config.invocation_params.args)])
    name = signal.Signals(vs.signal or signal.SIGINT).name
    return (f"vitperf: {name} ended the run after {len(vs.measurements)} measurement(s); no baseline, history, "
            f"export or report was written; {kept}. Run again: {again}")  # fmt: skip


def settle(vs: VitperfSession) -> bool:
    """The baseline verdicts over the whole matrix (gate.settle_outcomes); True when a regression fails the run."""
    from pytest_vitperf.verdicts.baselines.gate import REGRESSION, settle_outcomes

    s = vs.settings
    vs.outcomes = settle_outcomes(vs.outcomes, s.false_alarm, updating=s.update_baselines or s.record_run)
    return any(o.failure == REGRESSION for o in vs.outcomes)


def write_baselines(vs: VitperfSession) -> None:
    """Write or refresh the baselines of what this process measured, or (--vitperf-record-run) add it as a run."""
    from pytest_vitperf.verdicts.baselines.gate import measured_provenance, to_baseline, write

    if vs.baselines is None:
        return
    for key, m in vs.measurements.items():
        nodeid = vs.measured_by(key)
        if nodeid is not None:
            baseline = to_baseline(m, vs.environment, measured_provenance(m, nodeid))
            vs.writes.append(write(vs.baselines, baseline, keep_value=vs.settings.record_run))


def write_history(vs: VitperfSession) -> None:
    """Append the run's medians to --vitperf-history's folder and --vitperf-store's database."""
    from filelock import Timeout

    from pytest_vitperf.verdicts.baselines.history import open_history
    from pytest_vitperf.verdicts.baselines.sql import url_of

    for where in (vs.settings.history, vs.settings.store and url_of(vs.settings.store)):
        if where is None or not vs.measurements:
            continue
        try:
            history = open_history(where)
            vs.history_written[str(where)] = history.append(vs.measurements.values(), verdicts=vs.verdicts.values())
        except (OSError, ValueError, Timeout) as exc:  # a history file or store that cannot be read: a ValueError
            vs.history_error.append(str(exc))


def write_exports(vs: VitperfSession) -> None:
    """Write --vitperf-export's files."""
    from pytest_vitperf.core.files import write_atomic
    from pytest_vitperf.report.exports import FORMATS

    for fmt, path in vs.settings.export:
        try:
            write_atomic(path, json.dumps(FORMATS[fmt](vs.measurements.values()), indent=1) + "\n")
            vs.exported.append(f"{fmt}: {path}")
        except OSError as exc:
            vs.export_errors.append(f"{fmt} {path}: {exc.strerror or exc}")


def write_report(vs: VitperfSession) -> None:
    """--vitperf-report: report.md, the figures and data.json."""
    from pytest_vitperf.report.pictures import write

    out = vs.settings.report
    assert out is not None
    floors = {k: v.floor for k, v in vs.verdicts.items() if v.floor is not None}
    try:
        vs.exported += [f"report: {p}" for p in write(out, vs.measurements.values(), floors, accuracies=vs.accuracies)]
    except OSError as exc:
        vs.export_errors.append(f"report {out}: {exc.strerror or exc}")


def files_written(tr: Any, session: VitperfSession) -> None:
    """The history and export files this run wrote, or why not (which fails the run)."""
    fix = "the run fails: fix that, then run again"
    for where, written in session.history_written.items():
        tr.write_sep("-", f"vitperf history ({where})")
        what = f"{len(written)} file(s)" if where == str(session.settings.history) else f"the store as {written[0]}"
        tr.write_line(f"appended this run to {what}; find steps with: vitperf history {where}")
    for error in session.history_error:
        tr.write_sep("-", "vitperf history")
        tr.write_line(f"NOT WRITTEN: {error}; {fix}")
    if session.exported or session.export_errors:
        tr.write_sep("-", "vitperf exports")
        for line in session.exported:
            tr.write_line(f"wrote {line}")
        for line in session.export_errors:
            tr.write_line(f"NOT WRITTEN {line}; {fix}")


