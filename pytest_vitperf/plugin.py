"""pytest entry point: options, markers, the --gpu-bench gate, parametrization, header and summary.

Heavy modules (torch, timm, modelopt, tensorrt) are imported by fixtures and backends only, so
`pytest --help` and collection stay fast on any machine.
"""

from __future__ import annotations

import functools
import itertools
import sys
from collections.abc import Callable, Generator
from dataclasses import asdict
from typing import Any, cast

import pytest

from pytest_vitperf.core import processes
from pytest_vitperf.fixtures import (  # noqa: F401  (fixtures are registered by import)
    SESSION_KEY,
    accuracy_bound,
    accuracy_of,
    accuracy_task,
    add_to_pytest_benchmark,
    assert_speedup,
    bench,
    bench_family,
    bench_gemm,
    engine,
    get_session,
    speedup_floor,
    vit_model,
    vitperf_cache_dir,
    vitperf_plan,
    vitperf_session,
)
from pytest_vitperf.options import GPU_BENCH, UNITS
from pytest_vitperf.options.checks import check_cache, check_paths, check_store, units_problem
from pytest_vitperf.options.resolve import settings_from_config
from pytest_vitperf.options.table import add_options
from pytest_vitperf.session import VitperfSession
from pytest_vitperf.workers import BALANCING, case_id, share_host, too_many_workers

MARKER = "gpu_bench"
_RESTORE_SIGNALS = pytest.StashKey[Callable[[], None]]()
_RESTORE_THREADS = pytest.StashKey[Callable[[], None]]()
PARAMS = ("vitperf_model", "vitperf_precision", "vitperf_batch")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: a ViT benchmark; skipped unless {GPU_BENCH} is given (pytest-vitperf)"
    )
    config.addinivalue_line(
        "markers", "vitperf_threshold(rel): this test's latency-regression threshold, e.g. 0.10 (pytest-vitperf)"
    )
    config.addinivalue_line(
        "markers",
        "vitperf_accuracy(max_drop=None, min_agreement=None, min_cosine=None): this test's accuracy bounds, over the "
        "precision's registry entry (pytest-vitperf)",
    )
    config.stash[SESSION_KEY] = session = VitperfSession(settings_from_config(config), config)
    if not session.settings.enabled:
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        processes.die_with_parent()  # a controller killed outright takes its workers along, off the GPUs
        gpus = workerinput.get("vitperf_gpus", [])
        session.pin(gpus)
        session.threads, config.stash[_RESTORE_THREADS] = share_host(session.settings.threads, len(gpus))
        return
    check_paths(session.settings)
    if not config.option.collectonly:  # a run that will write its rows; collecting opens nothing
        check_store(session.settings)
        if session.settings.cache_dir is not None:  # before Inductor or a loader is pointed at it
            session.cache_notes = check_cache(session.settings.cache_dir)
    workers = getattr(config.option, "numprocesses", None)  # xdist's -n, made a number before pytest_configure
    if workers:
        why = too_many_workers(workers, len(session.gpus), session.settings.share_devices,
                               session.settings.relay is not None)  # fmt: skip
        if why is not None:
            raise pytest.UsageError(why)
    else:  # the process that runs the tests: a controller's workers take theirs
        session.threads, config.stash[_RESTORE_THREADS] = share_host(session.settings.threads, None)
    config.pluginmanager.register(_Durations(session), "vitperf-durations")
    config.stash[_RESTORE_SIGNALS] = processes.on_first_signal(functools.partial(_interrupted, session))


class _Durations:
    """Each test's seconds (setup, call and teardown) and its worker's busy time, as the reports arrive."""

    def __init__(self, session: VitperfSession) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # xdist's worker on the controller
        self.session.placement.ran(report.nodeid, report.duration, node.gateway.id if node else "this process")
        from pytest_vitperf.results import not_passed

        how = not_passed(report)
        if how is not None:
            self.session.not_passed.setdefault(report.nodeid, how)


def _interrupted(session: VitperfSession, signum: int) -> KeyboardInterrupt:
    """The first SIGINT or SIGTERM: pytest ends the run on KeyboardInterrupt, and outputs.finish exits with it."""
    session.signal = signum
    return KeyboardInterrupt()


def pytest_unconfigure(config: pytest.Config) -> None:
    for restore in (_RESTORE_SIGNALS, _RESTORE_THREADS):
        config.stash.get(restore, lambda: None)()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_vitperf import hookspec

    pluginmanager.add_hookspecs(hookspec)
    pluginmanager.register(hookspec.BuiltinBackends(), "vitperf-builtin-backends")


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = get_session(config)
    if not session.settings.enabled:
        return [f"vitperf: benchmarks off (enable with {GPU_BENCH})"]
    from pytest_vitperf.outputs import delay_banner, header

    return [*header(config, session), *(f"vitperf: {banner}" for banner in delay_banner(session))]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize vitperf_model / vitperf_precision / vitperf_batch from the options, reference
    precision first so its measurement is taken before the ones compared with it."""
    wanted = [p for p in PARAMS if p in metafunc.fixturenames]
    session = get_session(metafunc.config)
    if not wanted or not session.settings.enabled:
        return  # without --gpu-bench the test is skipped whole; probing the device would cost seconds
    from pytest_vitperf.core.precision import REFERENCE

    precisions = sorted(session.precisions, key=lambda p: p != REFERENCE)
    axes = {
        "vitperf_model": session.models,
        "vitperf_batch": session.batch_sizes,
        "vitperf_precision": precisions,
    }
    order = [p for p in ("vitperf_model", "vitperf_batch", "vitperf_precision") if p in wanted]
    cases = list(itertools.product(*(axes[p] for p in order)))
    if "vitperf_batch" in order:  # largest batch first: under xdist the costliest families start first
        batch = order.index("vitperf_batch")
        cases.sort(key=lambda case: -cast(int, case[batch]))
    metafunc.parametrize(order, cases, ids=[case_id(case) for case in cases])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    session = get_session(config)
    s = session.settings
    gate = pytest.mark.skip(reason=f"benchmark test: run with {GPU_BENCH}")
    for item in items:
        if item.get_closest_marker(MARKER) is None:
            continue
        if not session.settings.enabled:
            item.add_marker(gate)
            continue
        callspec = getattr(item, "callspec", None)
        precision = callspec.params.get("vitperf_precision") if callspec else None
        # Only a test that runs an engine here needs this device (vitperf_plan builds for another GPU).
        if precision is not None and "engine" in getattr(item, "fixturenames", ()):
            reason = session.skip_reason(precision)
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
    if s.enabled and (s.units is not None or s.shard is not None):  # a share of the run: vitperf ab --gpus, a host
        from pytest_vitperf.workers import kept_units, scope_of

        session.whole_run = list(items)  # floors and gated rows are counted over the whole run: one confidence
        units = kept_units([i.nodeid for i in items], s.units, s.shard)
        kept = [scope_of(i.nodeid) in units or i.nodeid in units for i in items]
        config.hook.pytest_deselected(items=[i for i, k in zip(items, kept, strict=True) if not k])
        items[:] = [i for i, k in zip(items, kept, strict=True) if k]


def pytest_collection_finish(session: pytest.Session) -> None:
    vs = get_session(session.config)
    workerinput = getattr(session.config, "workerinput", None)
    if workerinput is not None and not session.items:  # the controller then says only that collections differ
        from pytest_vitperf.workers import nothing_collected

        print(nothing_collected(workerinput, session.config.args, vs.settings.enabled, session.testsfailed),
              file=sys.stderr, flush=True)  # fmt: skip
    whole = vs.whole_run or session.items
    vs.rows_gated = sum(1 for item in whole if item.get_closest_marker(MARKER) is not None)
    if vs.settings.enabled:
        from pytest_vitperf.fixtures.engines import check_models
        from pytest_vitperf.fixtures.family import collected

        check_models(vs, session.items)
        collected(vs, session.items, whole)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """With --vitperf-wait-for, wait for its file before anything touches the GPU: the header and collection probe
    the device (vitperf ab's turns; ahead.wait_for_turn). What needs only the CPU is done first
    (ahead.ahead_of_turn)."""
    vs = get_session(session.config)
    if vs.settings.enabled and vs.settings.wait_for is not None and not hasattr(session.config, "workerinput"):
        from pytest_vitperf.ahead import ahead_of_turn

        try:
            vs.turn, vs.machine_info = ahead_of_turn(vs.settings.wait_for, session.config, vs.settings.models,
                                                     vs.model, vs.settings.units)  # fmt: skip
        except (TimeoutError, OSError) as exc:  # waited too long, or cannot say it is ready
            pytest.exit(f"vitperf: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
        if vs.settings.units is not None and (problem := units_problem(vs.settings.units, waits=False)):
            pytest.exit(f"vitperf: {UNITS} {vs.settings.units}: {problem}", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    """With --vitperf-relay, load every family's engines first, then wait for the GPU (fixtures.family.preload).
    With --vitperf-turn-done, touch its file once the last test has run (its fixtures torn down): vitperf ab
    gives the GPU to the next process while this one writes its results and exits."""
    vs = get_session(session.config)
    try:
        if vs.relay is not None and vs.settings.enabled and session.items and not session.config.option.collectonly:
            from pytest_vitperf.fixtures.family import preload

            preload(vs)
            vs.take_gpu("")
        return (yield)
    finally:
        if vs.settings.enabled and vs.settings.turn_done is not None and not hasattr(session.config, "workerinput"):
            vs.export_errors += vs.turn.hand_on(vs.settings.turn_done)  # a file not written fails the run


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    from pytest_vitperf.outputs import interrupted, summary, tail

    session = get_session(config)
    summary(terminalreporter, session)
    if session.signal is not None:
        terminalreporter.write_line(interrupted(session, config))
    tail(terminalreporter, session)


# -- xdist: one worker per GPU, a family per worker, results handed to the controller ----------
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` with benchmarks on: one worker per visible GPU, one on a CPU (workers must not share a device)."""
    settings = settings_from_config(config)  # called before pytest_configure: no session yet
    if not settings.enabled:
        return None
    from pytest_vitperf.workers import visible_gpus

    return len(visible_gpus()) or 1


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each worker the GPUs this run sees, by UUID, so that it pins its own before CUDA starts."""
    session = get_session(node.config)
    if session.settings.enabled:
        node.workerinput["vitperf_gpus"] = session.gpus


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if not get_session(config).settings.enabled or config.getvalue("dist") not in BALANCING:
        return None
    from pytest_vitperf.workers import make_scheduler, read_durations

    settings = get_session(config).settings
    return make_scheduler(config, log, read_durations(settings.cache_dir), settings.build_apart)


def pytest_sessionfinish(session: pytest.Session) -> None:
    from pytest_vitperf import outputs

    vs = get_session(session.config)
    outputs.sign_cache(session, vs)
    outputs.finish(session, vs)
    outputs.end_at_once(session, vs)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    if error is not None:
        get_session(node.config).lost_workers.append(f"{node.gateway.id}: {str(error).strip().splitlines()[-1]}")
    data = getattr(node, "workeroutput", {}).get("vitperf")
    if data:
        from pytest_vitperf.results import merge

        for m, nodeid in merge(get_session(node.config), data):
            if nodeid:
                add_to_pytest_benchmark(node.config, m, nodeid)  # one JSON: pytest-benchmark keeps none on workers


# -- pytest-benchmark: machine facts ----------------------------------------------------------
@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_benchmark_generate_machine_info(config: pytest.Config) -> dict[str, Any] | None:
    """pytest-benchmark's machine facts where they were gathered before the turn; else None: it gathers them."""
    return get_session(config).machine_info


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    session = get_session(config)
    if not session.settings.enabled:
        return
    from pytest_vitperf.measure.env import software_versions
    from pytest_vitperf.results import export, label

    backend = session.backend
    machine_info["vitperf"] = {
        "device": session.device.to_dict(),
        "backend": backend.name,
        "backend_version": backend.version(),
        "versions": software_versions(),
        "process": asdict(session.worker_record("this process")),  # where its time went: vitperf ab's time line
        "results": export(session, label(session)),  # what vitperf merge joins: every shard's, judged as one run
    }
