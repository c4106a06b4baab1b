"""Fixtures: vit_model, engine, vitperf_plan, bench, bench_gemm, speedup_floor, assert_speedup."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_vitperf.errors import VitperfError
from pytest_vitperf.floor import Floor, FloorsFileError
from pytest_vitperf.measurement import Measurement, Spec
from pytest_vitperf.models import MODEL_NAMES, canonical_model_name
from pytest_vitperf.plan import PlanRecord
from pytest_vitperf.precision import get_precision
from pytest_vitperf.session import Verdict, VitperfSession

if TYPE_CHECKING:
    import torch

    from pytest_vitperf.accuracy import OutputError, TaskAccuracy
    from pytest_vitperf.backends import Engine, SelfTimed
    from pytest_vitperf.clocks import ClockReading
    from pytest_vitperf.gemms import GemmOperands
    from pytest_vitperf.kernels import Breakdown
    from pytest_vitperf.precision import TaskBound
    from pytest_vitperf.timing import Clock

SESSION_KEY = pytest.StashKey[VitperfSession]()
GEMM_WARMUP_MS = 250.0
GEMM_DURATION_MS = 500.0


def get_session(config: pytest.Config) -> VitperfSession:
    return config.stash[SESSION_KEY]


@pytest.fixture(scope="session")
def vitperf_session(pytestconfig: pytest.Config) -> VitperfSession:
    return get_session(pytestconfig)


@pytest.fixture(scope="session")
def vitperf_cache_dir(vitperf_session: VitperfSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where exports, engines and compiled kernels go: --vitperf-cache-dir, resolved, or else a folder of this
    run's temporary directory (kept across tests, not across runs)."""
    return vitperf_session.settings.cache_dir or tmp_path_factory.mktemp("vitperf-cache")


@pytest.fixture
def vit_model() -> Callable[..., torch.nn.Module]:
    """Factory: `vit_model(name, weights=None, **timm_kwargs)` -> a timm ViT in eval mode,
    random weights from a fixed seed unless `weights` names a local state-dict file."""
    from pytest_vitperf.models import build_model

    return build_model


def check_output(engine: Engine, reference: torch.Tensor | None = None) -> OutputError | None:
    """Refuse an engine whose output is not finite, or (given the FP32 model's output on the same input) further
    from FP32 than its precision's bound; return that distance."""
    import torch

    from pytest_vitperf.accuracy import accuracy_failure, output_error

    out = engine.output()
    what = f"{engine.model_name} {engine.precision} batch {engine.batch} on {engine.backend}"
    bad = int((~torch.isfinite(out)).sum())
    if bad:
        raise VitperfError(
            f"{what} produced {bad} non-finite outputs of {out.numel()}; timing it would be meaningless. "
            f"Check the precision recipe, or compare with: --vitperf-precisions fp32,{engine.precision}"
        )
    if reference is None:
        return None
    err = output_error(reference, out)
    why = accuracy_failure(engine.precision, err)
    if why is not None:
        compare = ",".join(dict.fromkeys(("fp32", "fp16", engine.precision)))
        raise VitperfError(
            f"{what}: {why}; a fast engine that computes something else is not a speedup. Check the recipe and "
            f"its calibration, or compare with: --vitperf-precisions {compare}"
        )
    return err


def _model_name(request: pytest.FixtureRequest, session: VitperfSession, model: str | None) -> str:
    """The zoo name of `model`, else of the test's vitperf_model parameter, else of the run's first model."""
    if model is None:
        params = getattr(request.node, "callspec", None)
        model = (params.params.get("vitperf_model") if params else None) or session.models[0]
    canonical = canonical_model_name(model)
    if canonical is None:
        raise ValueError(f"unknown model {model!r}; valid: {', '.join(MODEL_NAMES)}")
    return canonical


@pytest.fixture
def engine(vitperf_session: VitperfSession, request: pytest.FixtureRequest) -> Callable[..., Engine]:
    """Factory: `engine(precision, batch, model=None, backend=None)` -> an Engine built by the selected backend (or
    the one named), cached for the session. Skips, with the reason, a combination that cannot run here."""

    def make(precision: str, batch: int, model: str | None = None, backend: str | None = None) -> Engine:
        name = get_precision(precision).name  # ValueError naming the valid ones
        model = _model_name(request, vitperf_session, model)
        reason = vitperf_session.skip_reason(name, backend)
        if reason is not None:
            pytest.skip(reason)
        try:
            built = vitperf_session.engine(model, name, batch, backend)
            if not vitperf_session.output_checked(built):  # once per engine; a failed check fails each request
                vitperf_session.record_output_error(built, check_output(built, vitperf_session.reference(built)))
        except VitperfError as exc:
            pytest.fail(str(exc), pytrace=False)
        return built

    return make


ENGINE, FAKE_QUANT = "engine", "fake-quant"


@pytest.fixture
def digits_accuracy(vitperf_session: VitperfSession, request: pytest.FixtureRequest) -> Callable[..., TaskAccuracy]:
    """`digits_accuracy(precision, via="engine")` -> TaskAccuracy of `precision` on the trained digits ViT's test
    split (digits.py), against its FP32 model, recorded for the summary.
    - `via="engine"`: an engine of the selected backend, built for the whole split; skips, with the reason, where the
      backend cannot build the precision here.
    - `via="fake-quant"`: Model Optimizer's fake quantization of the precision's recipe, calibrated on training
      images, run on the CPU (block formats through cpu_quant); skips a precision without a quantization recipe.
    Logits with NaN or Inf fail the test, naming the first module that produced them where that can be told."""
    import torch

    from pytest_vitperf.accuracy import task_accuracy
    from pytest_vitperf.digits import load_split
    from pytest_vitperf.models import DIGITS_MODEL

    def measure(precision: str, via: str = ENGINE) -> TaskAccuracy:
        name = get_precision(precision).name
        split = load_split()
        model = vitperf_session.model(DIGITS_MODEL)
        try:
            if via == ENGINE:
                logits, module, how = _engine_logits(vitperf_session, name, split.x_test)
            elif via == FAKE_QUANT:
                logits, module, how = _fake_quant_logits(vitperf_session, name, model, split.x_test)
            else:
                raise ValueError(f"via must be {ENGINE!r} or {FAKE_QUANT!r}, not {via!r}")
        except VitperfError as exc:
            pytest.fail(str(exc), pytrace=False)
        if not torch.isfinite(logits).all():
            _fail_nonfinite(name, how, logits, module, split.x_test)
        with torch.inference_mode():
            reference = model(split.x_test)
        acc = task_accuracy(name, how, logits, reference, split.y_test)
        vitperf_session.accuracies.append(acc)
        request.node.user_properties.append(("accuracy", acc.to_dict()))
        return acc

    return measure


def _engine_logits(session: VitperfSession, precision: str, x: torch.Tensor) -> tuple[torch.Tensor, Any, str]:
    from pytest_vitperf.models import DIGITS_MODEL

    reason = session.skip_reason(precision)
    if reason is not None:
        pytest.skip(reason)
    engine = session.engine(DIGITS_MODEL, precision, len(x))
    module = getattr(engine, "model", None)
    module = getattr(module, "_orig_mod", module)  # torch.compile's wrapper: hooks go on the module it runs
    return engine.run(x), module, f"{engine.backend} engine ({session.device.kind})"


def _fake_quant_logits(
    session: VitperfSession, precision: str, model: torch.nn.Module, x: torch.Tensor
) -> tuple[torch.Tensor, Any, str]:
    import copy

    import torch

    from pytest_vitperf.cpu_quant import cpu_block_quant
    from pytest_vitperf.recipes import apply

    recipe = get_precision(precision).recipe
    if recipe.config is None and not recipe.sparse24:
        pytest.skip(f"{precision} has no Model Optimizer recipe to fake-quantize: its engine is its measurement")
    with cpu_block_quant():
        quantized = apply(recipe, copy.deepcopy(model).float(), cache_dir=session.settings.cache_dir)
        with torch.inference_mode():
            return quantized(x), quantized, "Model Optimizer fake quant (cpu)"


def _fail_nonfinite(precision: str, how: str, logits: torch.Tensor, module: Any, x: torch.Tensor) -> None:
    import torch

    from pytest_vitperf.accuracy import first_nonfinite

    bad = int((~torch.isfinite(logits)).sum())
    where = "the backend cannot tell which layer"
    if isinstance(module, torch.nn.Module):
        from pytest_vitperf.cpu_quant import cpu_block_quant

        with cpu_block_quant():
            first = first_nonfinite(module, x.to(next(module.parameters()).device))
        where = f"first module with NaN/Inf: {first}" if first else "no module's output had NaN/Inf when run again"
    pytest.fail(
        f"{precision} ({how}) gave {bad} non-finite logits of {logits.numel()} on the digits test split; {where}. "
        "Compare with FP32: pytest --gpu-bench suites/test_accuracy.py --vitperf-precisions "
        + ",".join(dict.fromkeys(("fp32", precision))),
        pytrace=False,
    )


@pytest.fixture
def accuracy_bound(vitperf_session: VitperfSession, request: pytest.FixtureRequest) -> Callable[[str], TaskBound]:
    """`accuracy_bound(precision)` -> the TaskBound the accuracy suite holds it to: the registry's entry, then the
    test's `vitperf_accuracy(...)` marker, then --vitperf-accuracy-bound (the command line has the last word)."""
    from pytest_vitperf.options import TASK_BOUND_KEYS

    def bound(precision: str) -> TaskBound:
        marker = request.node.get_closest_marker("vitperf_accuracy")
        over = {**(marker.kwargs if marker else {}), **(vitperf_session.settings.accuracy_bound or {})}
        unknown = sorted(set(over) - set(TASK_BOUND_KEYS))
        if unknown:
            valid = ", ".join(TASK_BOUND_KEYS)
            pytest.fail(f"vitperf_accuracy: unknown bound {', '.join(unknown)}; valid: {valid}", pytrace=False)
        return replace(get_precision(precision).task, **over)

    return bound


@pytest.fixture
def vitperf_plan(
    vitperf_session: VitperfSession, vitperf_cache_dir: Path, request: pytest.FixtureRequest
) -> Callable[..., PlanRecord]:
    """Factory: `vitperf_plan(precision, batch=1, model=None, target="SM120")` -> the TensorRT-RTX plan of that
    precision, built ahead of time for an RTX Blackwell GPU on any machine (a CPU is enough), cached in the
    cache folder, and listed in the summary. Skips, with the reason, when TensorRT-RTX is not installed or does not
    build the precision."""
    from pytest_vitperf.backends.tensorrt import TensorRTRTXBackend
    from pytest_vitperf.models import build_model

    rtx = TensorRTRTXBackend()

    def make(precision: str, batch: int = 1, model: str | None = None, target: str = "SM120") -> PlanRecord:
        name = get_precision(precision).name
        model = _model_name(request, vitperf_session, model)
        reason = rtx.missing() or rtx.precision_reason(name)
        if reason is not None:
            pytest.skip(reason)
        try:
            _, info, _ = rtx.build(build_model(model), model_name=model, precision=name, batch=batch, target=target,
                                cache=vitperf_cache_dir)  # fmt: skip
        except VitperfError as exc:
            pytest.fail(str(exc), pytrace=False)
        record = PlanRecord(model, name, batch, rtx.name, rtx.version() or "?", info)
        vitperf_session.plans.append(record)
        return record

    return make


@pytest.fixture
def bench(vitperf_session: VitperfSession, request: pytest.FixtureRequest) -> Callable[[Engine], Measurement]:
    """`bench(engine)` -> Measurement: warm-up, then samples until duration and iteration minimums
    are met. Measured once per session for each (model, precision, batch, backend)."""

    from pytest_vitperf.backends import SelfTimed

    def run(engine: Engine) -> Measurement:
        s = vitperf_session
        spec = s.spec(engine)
        if spec.key in s.measurements:
            return s.measurements[spec.key]
        breakdown = engine.kernel_breakdown if s.settings.kernels else None
        timing = s.timing()
        if isinstance(engine, SelfTimed):
            return _measure(s, request, spec, lambda: _self_timed(s, engine, timing), breakdown)
        return _measure(s, request, spec, lambda: _sample(s, engine.launch, engine.clock, timing), breakdown)

    return run


@pytest.fixture
def bench_gemm(
    vitperf_session: VitperfSession, request: pytest.FixtureRequest
) -> Callable[[GemmOperands], Measurement]:
    """`bench_gemm(operands)` -> Measurement of one GEMM (gemms.py) on the GPU, with the timer and clock readings of
    `bench`, recorded as model `gemm-...` with the kind as its precision: it joins the baselines, the history and
    pytest-benchmark's JSON, and the summary shows it in its own table."""
    import torch

    from pytest_vitperf.gemms import describe
    from pytest_vitperf.timing import TorchCudaEventClock, in_graph

    def run(g: GemmOperands) -> Measurement:
        s = vitperf_session
        # A GEMM takes microseconds to a millisecond: half a second of samples is hundreds to thousands of them, and
        # the suite runs them back to back, so the GPU comes in hot. 78 timed products must leave room in a 10-minute
        # main job; docs/benchmarks.md compares this setting with 1 s of warm-up and 1 s of samples.
        timing = {**s.timing(), "warmup_ms": GEMM_WARMUP_MS, "duration_ms": GEMM_DURATION_MS}
        stream = torch.cuda.Stream(device=s.device.torch_device)
        clock = TorchCudaEventClock(stream)
        torch.cuda.synchronize()  # the operands' copies, queued on the default stream, are done before the timing
        # Each sample is a CUDA graph of n launches, divided by n; cold, a flush must precede every launch.
        graphed = not timing.get("cold")
        launch, n = in_graph(g.launch, stream) if graphed else (g.launch, 1)
        spec = Spec(
            model=g.shape.name,
            precision=g.kind,
            batch=1,
            backend="torch",  # cuBLAS through torch, whichever backend runs the ViTs
            backend_version=str(torch.__version__),  # a str subclass, which execnet cannot send
            device=s.device.name,
            sm=s.device.sm,
            timer=clock.name,
            gpu_index=s.gpu_index,
            gpu_uuid=s.device.uuid,
            options={
                **timing,
                **describe(g.shape, g.kind),
                "mode": "cuda-graph" if graphed else "launches",
                "launches_per_sample": n,
                "cuda": torch.version.cuda,
            },
        )

        def take() -> tuple[list[float], list[ClockReading], int]:
            samples, readings, dropped = _sample(s, launch, clock, timing)
            return [t / n for t in samples], readings, dropped

        return _measure(s, request, spec, take, None)

    return run


def _measure(
    session: VitperfSession,
    request: pytest.FixtureRequest,
    spec: Spec,
    take: Callable[[], tuple[list[float], list[ClockReading], int]],
    breakdown: Callable[[], Breakdown] | None,
) -> Measurement:
    """Take the samples (`take`: samples, clock readings, samples dropped), record the Measurement (session,
    pytest-benchmark) and judge it against its baseline."""
    from pytest_vitperf.timing import median_noise

    samples, clocks, dropped = take()
    noise = median_noise(samples)  # inf below 8 samples: recorded as None
    extra: dict[str, Any] = {"median_noise": noise if math.isfinite(noise) else None}
    if clocks:
        extra["clocks"] = {**session.clock_facts, "throttled_samples_dropped": dropped}
    if breakdown is not None:
        extra["kernels"] = breakdown().as_dict()
    m = Measurement(replace(spec, options={**spec.options, **extra}), tuple(samples), tuple(clocks))
    session.record(m, request.node.nodeid)
    add_to_pytest_benchmark(request.config, m, request.node.nodeid)
    _gate(session, request, m)
    return m


def _sample(
    session: VitperfSession, launch: Callable[[], Any], clock: Clock, timing: dict[str, Any]
) -> tuple[list[float], list[ClockReading], int]:
    """The samples, with an NVML reading after each timed chunk where NVML is there; chunks taken below 75% of the
    default SM clock are dropped (NVBench's rule). Returns (samples, readings, samples dropped)."""
    from pytest_vitperf.clocks import unthrottled
    from pytest_vitperf.timing import sample

    probe = session.clock_probe
    if probe is None:
        return sample(launch, clock, **timing), [], 0
    chunks: list[list[float]] = []
    readings: list[ClockReading] = []

    def read(timed: list[float]) -> None:
        chunks.append(timed)
        readings.append(probe.read(len(timed)))

    sample(launch, clock, **timing, on_chunk=read)
    facts = session.clock_facts
    return unthrottled(chunks, readings, facts.get("default_sm_mhz") or facts.get("max_sm_mhz"))


def _self_timed(
    session: VitperfSession, engine: SelfTimed, timing: dict[str, Any]
) -> tuple[list[float], list[ClockReading], int]:
    """The samples of an engine that times itself in another process, with NVML read every 100 ms meanwhile
    (clocks.last_busy keeps the readings of the timed part). None is dropped: the samples come without chunks."""
    import threading
    import time

    from pytest_vitperf.clocks import last_busy

    probe = session.clock_probe
    if probe is None:
        return engine.time_itself(**timing), [], 0
    readings: list[tuple[float, ClockReading]] = []
    done = threading.Event()

    def poll() -> None:
        while not done.wait(0.1):
            readings.append((time.perf_counter(), probe.read(0)))

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        samples = engine.time_itself(**timing)
    finally:
        done.set()
        poller.join()
    return samples, last_busy(readings, time.perf_counter(), timing["duration_ms"] / 1e3, len(samples)), 0


@pytest.fixture
def speedup_floor(vitperf_session: VitperfSession, request: pytest.FixtureRequest) -> Callable[..., Floor | None]:
    """`speedup_floor(model, precision, batch)` -> the Floor for this GPU and backend version, or None.
    Read from --vitperf-floors, else floors.json beside the test module."""

    def find(model: str, precision: str, batch: int) -> Floor | None:
        try:
            return vitperf_session.floor_for(Path(request.path).parent, model, precision, batch)
        except FloorsFileError as exc:
            pytest.fail(
                f"{exc}\nFix that file (format in pytest_vitperf/floor.py), then run again:\n"
                f"  pytest --gpu-bench {request.node.nodeid!r}",
                pytrace=False,
            )

    return find


@pytest.fixture
def assert_speedup(vitperf_session: VitperfSession, request: pytest.FixtureRequest) -> Callable[..., Verdict]:
    """`assert_speedup(baseline, candidate, floor)`: fail unless candidate is at least `floor` times
    faster than baseline by median. `floor` may be a number, a Floor, or None (record only)."""

    def check(baseline: Measurement, candidate: Measurement, floor: float | Floor | None) -> Verdict:
        if isinstance(floor, Floor):
            verdict = Verdict(baseline, candidate, floor.min_speedup, floor.source)
        else:
            verdict = Verdict(baseline, candidate, floor)
        source = verdict.source
        vitperf_session.record_verdict(verdict)
        if not verdict.passed:
            b, c = baseline.spec, candidate.spec
            pytest.fail(
                f"{c.precision} is {verdict.speedup:.3f}x faster than {b.precision}, below the floor "
                f"{verdict.floor:.2f}x{f' ({source})' if source else ''}\n"
                f"  {b.precision:>12} median {baseline.median:.3f} ms (n={baseline.n}, CoV {baseline.cov:.1%})\n"
                f"  {c.precision:>12} median {candidate.median:.3f} ms (n={candidate.n}, CoV {candidate.cov:.1%})\n"
                f"  {c.model} batch {c.batch}, {c.backend} {c.backend_version}, {c.device}\n"
                f"If the new speedup is expected, lower the floor in the floors file; to re-measure run:\n"
                f"  pytest --gpu-bench {request.node.nodeid!r}",
                pytrace=False,
            )
        return verdict

    return check


def _gate(session: VitperfSession, request: pytest.FixtureRequest, m: Measurement) -> None:
    """Judge `m` against its baseline (baselines/gate.py decides), collect the outcome, fail the test if it fails."""
    from pytest_vitperf.baselines.gate import judge
    from pytest_vitperf.report import failure_message

    if session.baselines is None:
        return
    marker = request.node.get_closest_marker("vitperf_threshold")
    threshold = float(marker.args[0]) if marker and marker.args else session.settings.regression_threshold
    s = session.settings
    o = judge(
        session.baselines,
        m,
        threshold=threshold,
        environment=session.environment,
        strict=s.strict,
        updating=s.update_baselines,
    )
    session.outcomes.append(o)
    if o.failure is not None:
        pytest.fail(failure_message(o, request.node.nodeid), pytrace=False)


def add_to_pytest_benchmark(config: pytest.Config, m: Measurement, nodeid: str) -> None:
    """Report a measurement as a pytest-benchmark benchmark, with our samples as its data, so it
    shows in --benchmark-json, --benchmark-save and --benchmark-compare. pytest-benchmark's own
    calibration never runs: it would time host wall-clock around asynchronous GPU work.
    Under xdist pytest-benchmark turns itself off everywhere; the controller adds what the workers measured, so one
    run writes one JSON."""
    # No public API fits: the `benchmark` fixture (pedantic too) times with its own host timer, and the JSON hooks
    # fire only when its session's list is non-empty; so our samples join that list, as pytest-benchmark's
    # Metadata built from a stand-in for its fixture (tests/test_plugin.py checks the JSON it writes).
    bs = getattr(config, "_benchmarksession", None)
    if bs is None or hasattr(config, "workerinput"):
        return
    off = config.getoption("benchmark_disable") and not config.getoption("benchmark_enable")
    if off or (bs.disabled and config.getvalue("dist") == "no"):  # asked off, or off for want of `statistics`
        return
    from types import SimpleNamespace

    from pytest_benchmark.stats import Metadata

    spec = m.spec
    params = {"model": spec.model, "precision": spec.precision, "batch": spec.batch}
    info: dict[str, Any] = {
        "vitperf": {
            "unit": "ms",
            "timer": spec.timer,
            "backend": spec.backend,
            "backend_version": spec.backend_version,
            "device": spec.device,
            "sm": spec.sm,
            "gpu_index": spec.gpu_index,
            "gpu_uuid": spec.gpu_uuid,
            **{k: v for k, v in m.stats().items()},
            "clocks": [r.to_dict() for r in m.clocks],  # NVML readings, one per timed chunk
        }
    }
    name = nodeid.rsplit("::", 1)[-1]
    fixture = SimpleNamespace(
        name=name if "[" in name else f"{name}[{spec.label}]",
        fullname=nodeid,
        group=f"vitperf {spec.model} b{spec.batch}",
        param=spec.label,
        params=params,
        extra_info=info,
        cprofile_stats=None,
        has_error=False,
    )
    meta = Metadata(fixture, iterations=1, options={"timer": spec.timer, **spec.options})
    for s in m.samples_ms:
        meta.update(s / 1e3)  # pytest-benchmark stores seconds
    bs.benchmarks.append(meta)
