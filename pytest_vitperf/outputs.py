"""What a run writes when it ends: baselines (--vitperf-update-baselines), the history, CI exports and the report.
A write that fails is kept for the summary, which says what was not written, and fails the run: a nightly job must
not believe it refreshed them."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_vitperf import options as o
from pytest_vitperf.results import decided
from pytest_vitperf.session import VitperfSession


def sign_cache(session: pytest.Session, vs: VitperfSession) -> None:
    """The controller signs its cache folder's compiled parts as the run ends, interrupted or not (core/signing.py).
    A signature that cannot be written fails the run: the next run would build every part again."""
    config = session.config
    if not vs.settings.enabled or vs.settings.cache_dir is None or hasattr(config, "workerinput"):
        return
    if config.option.collectonly:  # checked nothing, built nothing
        return
    from pytest_vitperf.core.signing import cache_key, checked_by_caller, sign

    if checked_by_caller(vs.settings.cache_dir):
        return
    try:
        sign(vs.settings.cache_dir, cache_key())
    except OSError as exc:
        vs.export_errors.append(f"{vs.settings.cache_dir}: its compiled parts not signed ({exc.strerror or exc}); the "
                                "next run builds them again")  # fmt: skip


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
        from pytest_vitperf.results import export

        workeroutput["vitperf"] = export(vs, session.config.workerinput["workerid"])  # type: ignore[attr-defined]
        return
    if vs.settings.cache_dir is not None and vs.placement.test_s:
        from pytest_vitperf.workers import DURATIONS, write_durations

        try:
            write_durations(vs.settings.cache_dir, vs.placement.test_s)
        except OSError as exc:
            vs.export_errors.append(f"{vs.settings.cache_dir / DURATIONS}: {exc.strerror or exc} (the next -n run "
                                    "deals its units by the model instead)")  # fmt: skip
    regressed = settle(vs)  # before the history: a row only the matrix flags is kept out of a store's baselines
    write_history(vs)
    write_exports(vs)
    if vs.settings.report is not None and vs.measurements:
        write_report(vs)
    if regressed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    failed_write = bool(vs.history_error or vs.export_errors or vs.lost_workers)
    failed_write |= any(w.error is not None for w in vs.writes)
    if failed_write and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def end_at_once(session: pytest.Session, vs: VitperfSession) -> None:
    """A process that hands its turn on (--vitperf-turn-done: vitperf ab's) ends as soon as pytest returns, with its
    exit status, skipping the exit handlers of what it imported and Python's teardown: from its results to its end
    took 4.7-5.4 s a process on an H200, and the first round's turn and the run's end waited for it. What it started
    is its process group's, which vitperf ab ends. A run inside another (pytester's, pytest.main's in a test) does
    not: it must not end its host. Nor does a run ended by a signal."""
    import atexit

    asked = vs.settings.enabled and vs.settings.turn_done is not None and vs.signal is None
    if asked and not hasattr(session.config, "workerinput") and not _inside_another():
        atexit.register(_end, session)  # after every handler registered so far, so it runs before them


def _inside_another() -> bool:
    """Whether this pytest run runs inside another in this process: a second session's frame below this one's."""
    import traceback

    return sum(f.f_code.co_name == "wrap_session" and f.f_globals.get("__name__") == "_pytest.main"
               for f, _ in traceback.walk_stack(None)) > 1  # fmt: skip


def _end(session: pytest.Session) -> None:
    import contextlib
    import logging
    import os
    import sys

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed: nothing left to lose
            stream.flush()
    os._exit(int(session.exitstatus))


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
    from pytest_vitperf.store.baselines import JsonDirStorage
    from pytest_vitperf.verdicts.baselines.gate import measured_provenance, to_baseline, write

    if not isinstance(vs.baselines, JsonDirStorage):  # none, or a store: its rows are written with the run's
        return
    for key, m in vs.measurements.items():
        nodeid = vs.measured_by(key)
        if nodeid is not None:
            baseline = to_baseline(m, vs.environment, measured_provenance(m, nodeid))
            vs.writes.append(write(vs.baselines, baseline, keep_value=vs.settings.record_run))


def write_history(vs: VitperfSession) -> None:
    """Append the run's medians to --vitperf-history's folder and --vitperf-store's database."""
    from filelock import Timeout

    from pytest_vitperf.store.sql import open_history, url_of
    from pytest_vitperf.verdicts.baselines.gate import roles

    s = vs.settings
    if s.inject_delay:  # slower on purpose: not a run of these engines, in no series and no baseline
        return
    found = roles(vs.measurements.values(), vs.outcomes, update=s.update_baselines, record=s.record_run)
    judged = [r.to_dict() for r in decided(vs)]  # the store keeps the rows as data
    for where in (s.history, s.store and url_of(s.store)):
        if where is None or not vs.measurements:
            continue
        try:
            history = open_history(where)
            vs.history_written[str(where)] = history.append(
                vs.measurements.values(), rows=judged, roles=found, environment=vs.environment
            )
        except (OSError, ValueError, Timeout) as exc:  # a history file or store that cannot be read: a ValueError
            vs.history_error.append(str(exc))


def write_exports(vs: VitperfSession) -> None:
    """Write --vitperf-export's files."""
    from pytest_vitperf.core.files import write_atomic
    from pytest_vitperf.report.exports import FORMATS

    for fmt, path in vs.settings.export:
        try:
            write_atomic(path, json.dumps(FORMATS[fmt](vs.measurements.values(), decided(vs)), indent=1) + "\n")
            vs.exported.append(f"{fmt}: {path}")
        except OSError as exc:
            vs.export_errors.append(f"{fmt} {path}: {exc.strerror or exc}")


def write_report(vs: VitperfSession) -> None:
    """--vitperf-report: report.md, the figures and data.json."""
    from pytest_vitperf.report.pictures import write

    out = vs.settings.report
    assert out is not None
    try:
        vs.exported += [f"report: {p}" for p in write(out, vs.measurements.values(), decided(vs),
                                                      accuracies=vs.accuracies)]  # fmt: skip
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


# -- the terminal summary ---------------------------------------------------------------------------------
def summary(tr: Any, session: VitperfSession) -> None:
    """The summary table, its warnings and notes, and the GEMMs' table: on the terminal (`tr`), or what
    `vitperf merge` prints."""
    if not session.measurements:
        return
    from pytest_vitperf.report.memory import memory_summary
    from pytest_vitperf.report.tables import clock_notes, gemm_summary, interval_notes, measurement_notes, summary

    max_cov, confidence, rows = session.settings.noise_threshold, session.settings.confidence, decided(session)
    tr.write_sep("=", "vitperf summary")
    for device in session.devices or [session.device.describe()]:
        tr.write_line(f"device: {device}")
    for line in delay_banner(session):
        tr.write_line(line)
    for line in summary(session.measurements.values(), rows):
        tr.write_line(line)
    for line in interval_notes(session.measurements.values(), rows, confidence):
        tr.write_line(line)
    noisy = [m for m in session.measurements.values() if m.cov > max_cov and not m.rounds]
    if noisy:
        tr.write_line(
            f"warning: {len(noisy)} measurement(s) with CoV above {max_cov:.1%}; the GPU or host was busy or "
            "clocks moved. Re-run on an idle machine, or lengthen --vitperf-duration-ms."
        )
    for line in [*clock_notes(session.measurements.values()), *measurement_notes(session.measurements)]:
        tr.write_line(line)
    if not session.workers:  # in one process; under xdist each worker's line says it
        from pytest_vitperf.workers import time_account

        tr.write_line("time: " + time_account(session.worker_record("this process")))
    memory = memory_summary(session.measurements.values())
    if memory:
        tr.write_sep("-", "vitperf memory (weights, and what one call needs on the GPU; against FP16 at the batch)")
        for line in memory:
            tr.write_line(line)
    gemms = gemm_summary(session.measurements.values())
    if gemms:
        tr.write_sep("-", "vitperf GEMMs (cuBLAS through torch; TFLOPS of the product, TOPS for int8)")
        for line in gemms:
            tr.write_line(line)


def delay_banner(session: VitperfSession) -> list[str]:
    """--vitperf-inject-delay, said loudly: the engines it names are slower on purpose."""
    lines = []
    for name, rel in session.settings.inject_delay:
        model, _, precision = name.rpartition(":")  # [MODEL:]PRECISION
        lines.append(f"!!! SENSITIVITY SELF-TEST: every {precision} engine{f' of {model}' if model else ''} runs "
                     f"{rel:.1%} of its own time slower on purpose (--vitperf-inject-delay); its speedups and verdicts "
                     "say what this run can detect, not how fast it is !!!")  # fmt: skip
    return lines


def header(config: pytest.Config, session: VitperfSession) -> list[str]:
    """The header's lines but the delay banner: the device, backend and versions, the models, why the backend cannot
    run, the command that makes floors where none holds for this GPU, and the cache's parts moved aside."""
    from pytest_vitperf.engines.backends import never_timed
    from pytest_vitperf.engines.models.zoo import weights_note
    from pytest_vitperf.hookspec import registered_models
    from pytest_vitperf.measure.env import header_line

    backend = session.backend
    lines = [header_line(session.device, backend.name, backend.version()),
             f"vitperf: models: {weights_note(session.models, session.settings.weights, registered_models(config))}"]
    if why := session.backend_why or (never_timed(backend.name) if session.settings.backend != "auto" else None):
        lines.append(f"vitperf: backend: {why}")
    if session.backend_reason:
        lines.append(f"vitperf: backend {backend.name} cannot run here: {session.backend_reason}")
    if (missing := floors_missing(session, [_folder(a) for a in config.args] or [Path()])):
        suite = selection(config)
        out = _near(config, str(missing))
        command = " ".join(["vitperf floors make --out", shlex.quote(out), "--", *map(shlex.quote, suite)])
        lines.append(f"vitperf: no speedup floors for {session.device.name} with {backend.name} {backend.version()} "
                     f"in {out}, so no row can fail one; make them on this GPU in 3 fresh runs: {command}")
    return [*lines, *(f"vitperf: {note}" for note in session.cache_notes)]


def floors_missing(session: VitperfSession, test_dirs: list[Path]) -> Path | None:
    """The floors file a run of tests in `test_dirs` reads where none holds a floor for this GPU, backend and
    version; None on a CPU, where one holds, or where a file cannot be read (the tests that ask say so)."""
    from pytest_vitperf.verdicts.floors import FLOORS_FILE, FloorsFileError

    if session.device.sm is None:
        return None
    version = session.backend.version() or ""
    for folder in test_dirs:
        try:
            floors = session.floors_file(folder)
        except FloorsFileError:
            return None
        if floors is not None and floors.covers(gpu=session.device.name, backend=session.floors_backend,
                                                version=version):  # fmt: skip
            return None
    return session.settings.floors or test_dirs[0] / FLOORS_FILE


# The options that choose what a run measures, and over how many rounds and builds: `vitperf floors make`, named in
# the header, measures the same.
_CHOOSING = (o.MODELS, o.BATCH_SIZES, o.PRECISIONS_OPT, o.BACKEND, o.WEIGHTS, o.COMPILE, o.FLOORS, o.ROUNDS, o.BUILDS)


def selection(config: pytest.Config) -> list[str]:
    """The run's test paths (a folder that holds the latency suite stands for it: floors judge its rows alone), then
    the options it was given that chose what it measures."""
    paths = [_near(config, str(Path(a) / o.LATENCY_SUITE) if (Path(a) / o.LATENCY_SUITE).is_file() else a)
             for a in config.args]  # fmt: skip
    words, chosen = list(config.invocation_params.args), []
    for i, word in enumerate(words):
        if word.split("=", 1)[0] in _CHOOSING:
            chosen += [word] if "=" in word else words[i : i + 2]
    return [*paths, *chosen]


def _near(config: pytest.Config, path: str) -> str:
    """A path as the user would type it where the run was started: relative to that folder where it lies inside."""
    p, here = Path(path), config.invocation_params.dir
    return str(p.relative_to(here)) if p.is_absolute() and p.is_relative_to(here) else path


def _folder(arg: str) -> Path:
    path = Path(arg.split("::")[0])
    return path if path.is_dir() else path.parent


def tail(tr: Any, session: VitperfSession) -> None:
    """What follows the summary table: workers, plans, accuracy, the files written and the baselines."""
    if getattr(tr, "config", None) is not None and tr.config.get_verbosity() < 0:
        # -q (vitperf ab's processes) hides the header: their logs would not say what ran, or that a cache was
        # moved aside; the summary has said the delay banner
        for line in header(tr.config, session):
            tr.write_line(line)
    _workers(tr, session)
    if session.plans:
        from pytest_vitperf.report.tables import plan_summary

        tr.write_sep("-", "vitperf plans (built ahead of time, not timed)")
        for line in plan_summary(session.plans):
            tr.write_line(line)
    if session.accuracies:
        from pytest_vitperf.report.tables import accuracy_summary

        tr.write_sep("-", f"vitperf accuracy ({session.accuracies[0].task}, against its FP32 model)")
        for line in accuracy_summary(session.accuracies, session.measurements.values()):
            tr.write_line(line)
    files_written(tr, session)
    if session.outcomes or session.writes:
        from pytest_vitperf.report.baselines import baseline_summary

        s = session.settings
        if s.store_baselines and s.store:
            from pytest_vitperf.store.sql import shown

            tr.write_sep("-", f"vitperf baselines (the runs in the store {shown(s.store)})")
        else:
            tr.write_sep("-", f"vitperf baselines ({s.baseline_dir})")
        for line in baseline_summary(session.outcomes, session.writes, session.settings.false_alarm):
            tr.write_line(line)


def _workers(tr: Any, session: VitperfSession) -> None:
    """Where each xdist worker ran, and any that went down (which fails the run)."""
    if session.workers:
        from pytest_vitperf.workers import busy_line, worker_summary

        where = "sharing the devices" if session.settings.share_devices else "one GPU each"
        unit = ("each test on the worker that took it" if session.settings.build_apart
                else "each family of a model and batch on one worker")  # fmt: skip
        tr.write_sep("-", f"vitperf workers ({where}; {unit})")
        for line in worker_summary(session.workers):
            tr.write_line(line)
        if session.placement.busy_s:
            tr.write_line(busy_line(session.placement.busy_s, time.perf_counter() - session.started))
    for lost in session.lost_workers:
        tr.write_line(
            f"vitperf: worker {lost}. What it measured is in no table or file and the run fails; run it again, "
            "or in one process to see the error: pytest -n 0"
        )
