"""State for one pytest run: settings, device, backend, engines and what the run collects; verdicts/ decides."""

from __future__ import annotations

import copy
import math
import secrets
import time
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.ahead import Turn
from pytest_vitperf.core.precision import PRECISIONS, unsupported_reason
from pytest_vitperf.core.relay import Relay
from pytest_vitperf.engines.models.reference import same_weights
from pytest_vitperf.engines.tensorrt.plan import PlanRecord
from pytest_vitperf.hookspec import model_hooks, registered_models
from pytest_vitperf.measure.clocks import NvmlProbe
from pytest_vitperf.measure.measurement import Measurement, Spec
from pytest_vitperf.measure.rounds import CPU_WARMUP_MS, GPU_WARMUP_MS, MAX_LOOKS, FamilyRun, RoundPlan
from pytest_vitperf.measure.timing import Laps
from pytest_vitperf.options.resolve import run_defaults
from pytest_vitperf.verdicts.baselines.gate import Outcome, Write
from pytest_vitperf.verdicts.floors import FLOORS_FILE, Floor, FloorsFile, Verdict
from pytest_vitperf.verdicts.stats import family_wise
from pytest_vitperf.workers import Placement, WorkerRecord, pin_gpu, visible_gpus, worker_index

if TYPE_CHECKING:
    import torch

    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.engines.backends import Backend, Choice, Engine
    from pytest_vitperf.measure.env import Device
    from pytest_vitperf.store.baselines import BaselineKey, BaselineStorage
    from pytest_vitperf.verdicts.accuracy import OutputError, TaskAccuracy
    from pytest_vitperf.verdicts.rows import RowVerdict
    from pytest_vitperf.verdicts.spreads import Prior


class VitperfSession:
    def __init__(self, settings: Settings, config: Any = None) -> None:
        self.settings = settings
        self.config = config  # the pytest config, for the hooks (backends, pytest_vitperf_model_built)
        self.measurements: dict[tuple[str, str, int, str], Measurement] = {}
        self.verdicts: dict[tuple[str, str, int, str], Verdict] = {}
        self.rows: list[RowVerdict] | None = None  # each row's record, judged once (results.decided)
        self.handed: dict[tuple[Any, str | None], RowVerdict] = {}  # rows a worker or shard judged (results.merge)
        self.outcomes: list[Outcome] = []
        self.not_passed: dict[str, dict[str, str]] = {}  # node id -> how a test did not pass, in a line (results.py)
        self.writes: list[Write] = []
        self.plans: list[PlanRecord] = []
        self.accuracies: list[TaskAccuracy] = []
        self._measured_here: dict[tuple[str, str, int, str], str] = {}  # key -> nodeid
        self.workers: list[WorkerRecord] = []  # on the xdist controller: where each worker ran, and its start-up
        self.devices: list[str] = []  # what the merged workers or shards ran on (results.merge)
        self._startup_s: dict[str, float] = {}  # "device" (torch import + CUDA probe) and each model's build
        self.started = time.perf_counter()
        self.measure_s = 0.0  # wall time spent warming up and timing engines and GEMMs
        self.checks_s = 0.0  # checking engines' outputs against the FP32 model's (fixtures.engines.check_once)
        self.prepare_steps = Laps()  # where preparing engines went: copying the model, then the backend's steps
        self._priors: dict[tuple[str, str, str, str], Prior | None] = {}
        self._engines: dict[tuple[str, str, int, str, int], Engine] = {}  # (model, precision, batch, backend, build)
        self._other_backends: dict[str, Choice] = {}
        self._models: dict[str, tuple[Any, tuple[object, ...]]] = {}  # name -> (model, the hooks it was built with)
        self._prepare_s: dict[tuple[str, str, int, str], float] = {}  # model build + backend prepare (compile included)
        self._references: dict[tuple[str, int], torch.Tensor] = {}  # (model, batch) -> FP32 output, on the host
        self._output_errors: dict[tuple[str, str, int, str], OutputError] = {}
        self._floors: dict[Path, FloorsFile | None] = {}
        self.history_written: dict[str, list[str]] = {}  # --vitperf-history's folder or --vitperf-store's URL -> what
        self.history_error: list[str] = []
        self.exported: list[str] = []
        self.export_errors: list[str] = []
        self.cache_notes: list[str] = []  # compiled parts of the cache folder moved aside, said in the header
        self.lost_workers: list[str] = []  # on the controller: workers that went down, taking their results along
        self.gpu_index = 0  # among the GPUs the run was started with; a pinned worker sees its own as cuda:0
        self.families: dict[tuple[str, int, str, str], FamilyRun] = {}  # (model, batch, backend, own if apart)
        self.members_of: dict[tuple[str, int], dict[str, str]] = {}  # (model, batch) -> precision -> test node id
        self.floors_judged = 0  # floors the collected tests will judge: they share the run's confidence
        self.machine_info: dict[str, Any] | None = None  # pytest-benchmark's, gathered before the turn
        self.turn = Turn(began=self.started)  # vitperf ab's: its wait, how late it was, how long it held the device
        self.rows_gated = 0  # benchmark tests collected: the baseline gate's rows share its false-alarm rate
        self.whole_run: list[Any] = []  # a shard's tests before it kept its share: what the counts above count
        self.seed = settings.seed if settings.seed is not None else secrets.randbelow(2**31)
        self.signal: int | None = None  # the SIGINT or SIGTERM that ended the run (plugin, outputs.finish)
        self.threads = 0  # this process's thread budget (workers.share_host)
        self.placement = Placement()  # on the controller, or in one process: what each test and worker took
        self.relay = Relay(settings.relay) if settings.relay is not None else None  # vitperf ab's (core/relay.py)

    # -- where we run ---------------------------------------------------------------------------
    @cached_property
    def gpus(self) -> list[str]:
        return visible_gpus()

    def pin(self, gpus: list[str]) -> None:
        """In xdist worker k (before CUDA starts): see only GPU k mod len(gpus). Every process then compiles for
        cuda:0, so compiled kernels cached by one worker serve the others, and a one-process run, whichever GPU they
        ran on (Inductor's cache keys include the device index)."""
        self.gpu_index = pin_gpu(gpus, worker_index())

    @cached_property
    def device(self) -> Device:
        """This process's GPU, cuda:0 (a pinned worker sees only its own), else the CPU."""
        start = time.perf_counter()
        from pytest_vitperf.measure.env import probe_device

        device = probe_device(0)
        self._startup_s["device"] = round(time.perf_counter() - start, 1)
        return device

    @cached_property
    def _backend(self) -> Choice:
        from pytest_vitperf.engines.backends import select_backend
        from pytest_vitperf.hookspec import hook_maker

        if self.config is None:
            return select_backend(self.settings.backend, self.device)
        make, names = hook_maker(self.config)
        return select_backend(self.settings.backend, self.device, make, names)

    @cached_property
    def clock_probe(self) -> NvmlProbe | None:
        """NVML on the measured GPU, or None (a CPU, no driver, or --no-vitperf-clocks)."""
        if not self.settings.clocks or self.device.sm is None:
            return None
        return NvmlProbe.open(self.device.index)

    @cached_property
    def clock_facts(self) -> dict[str, Any]:
        return self.clock_probe.facts() if self.clock_probe is not None else {}

    @property
    def backend(self) -> Backend:
        return self._backend[0]

    @property
    def backend_reason(self) -> str | None:
        return self._backend.reason

    @property
    def backend_why(self) -> str:
        """Why auto took the run's backend; "" where one was named."""
        return self._backend.why

    def other_backend(self, name: str) -> Choice:
        """A backend besides the run's own, by name, and why it cannot run here: for a test that holds two paths to
        one number against each other (suites/test_backend_agreement.py)."""
        if name == self.backend.name:
            return self._backend
        if name not in self._other_backends:
            from pytest_vitperf.engines.backends import get_backend, select_backend
            from pytest_vitperf.hookspec import hook_maker

            make = get_backend if self.config is None else hook_maker(self.config)[0]
            self._other_backends[name] = select_backend(name, self.device, make)
        return self._other_backends[name]

    def _backend_of(self, engine: Engine) -> Backend:
        """The backend that built `engine`: another one only where a test asked for it by name."""
        other = self._other_backends.get(engine.backend)
        return other[0] if other is not None else self.backend

    # -- what we run ----------------------------------------------------------------------------
    @property
    def models(self) -> tuple[str, ...]:
        return self.settings.models or run_defaults(self.device.sm is not None)[0]

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        return self.settings.batch_sizes or run_defaults(self.device.sm is not None)[1]

    @property
    def precisions(self) -> tuple[str, ...]:
        return self.settings.precisions or tuple(PRECISIONS)

    def timing(self) -> dict[str, Any]:
        s = self.settings
        warmup = s.warmup_ms
        if warmup is None:
            warmup = CPU_WARMUP_MS if self.device.sm is None else GPU_WARMUP_MS
        out = {"warmup_ms": warmup, "duration_ms": s.duration_ms, "min_iterations": s.min_iterations}
        if s.max_noise is not None:
            out |= {"max_noise": s.max_noise, "timeout_ms": s.timeout_ms}
        if s.cold:
            out["cold"] = True
        return out

    def skip_reason(self, precision: str, backend: str | None = None) -> str | None:
        """Why `precision` cannot be measured here (by `backend`, else the run's), or None; nothing is built."""
        chosen, reason, _ = self.other_backend(backend) if backend is not None else self._backend
        if reason is not None:
            return reason
        return unsupported_reason(precision, self.device) or chosen.precision_reason(precision)

    def model(self, model_name: str) -> torch.nn.Module:
        """The FP32 model of `model_name`'s engines, built once: registered, trained (digits), timm's or the zoo's;
        again where a conftest.py collected since (after a build ahead of the turn) adds a model hook."""
        hooks = model_hooks(self.config)
        built = self._models.get(model_name)
        if built is None or built[1] != hooks:
            start = time.perf_counter()
            from pytest_vitperf.engines.models.digits import trained_model
            from pytest_vitperf.engines.models.folder import calibrate_on
            from pytest_vitperf.engines.models.zoo import DIGITS_MODEL, make_model
            factory = registered_models(self.config).get(model_name) if self.config is not None else None
            if model_name == DIGITS_MODEL and factory is None:
                model = trained_model()
            else:
                model = make_model(model_name, factory, weights=dict(self.settings.weights).get(model_name))
            if self.config is not None:
                hook = self.config.hook.pytest_vitperf_model_built
                model = hook(config=self.config, name=model_name, model=model) or model
            if self.settings.accuracy_data is not None and model_name == self.models[0]:  # the accuracy suite's model
                calibrate_on(model, self.settings.accuracy_data, model_name)
            self._models[model_name] = (model, hooks)
            self._startup_s[model_name] = round(time.perf_counter() - start, 1)
        return self._models[model_name][0]

    def engine(self, model_name: str, precision: str, batch: int, backend: str | None = None, build: int = 0) -> Engine:
        """The engine of `precision`, prepared once; `build` > 0 asks for another build (builds are measured apart)."""
        chosen = self.other_backend(backend)[0] if backend is not None else self.backend
        key = (model_name, precision, batch, chosen.name)
        built = (model_name, precision, batch, chosen.name, build)
        if built not in self._engines:
            start = time.perf_counter()
            model = source = self.model(model_name)
            if not getattr(chosen, "keeps_model", False):  # a backend may cast or move what it is given
                with self.prepare_steps("copy"):
                    model = copy.deepcopy(source)
                    same_weights(source, model)
            engine = chosen.prepare(model, model_name=model_name, precision=precision, batch=batch, device=self.device,
                                    settings=self.settings)  # fmt: skip
            self.prepare_steps.add(engine.describe().get("prepare_steps", {}))
            self._prepare_s[key] = round(self._prepare_s.get(key, 0.0) + time.perf_counter() - start, 1)
            delays = dict(self.settings.inject_delay)  # one model's delay before its precision's
            delay = delays.get(f"{model_name}:{precision}", delays.get(precision))
            if delay is not None:  # the sensitivity self-test: a known slowdown, loud in the header and the summary
                from pytest_vitperf.engines.delay import inject

                engine = inject(engine, delay)
            self._engines[built] = engine
        return self._engines[built]

    def release(self, model_name: str, precision: str, batch: int, build: int = 0) -> None:
        """Drop an engine and give its device memory back (a family whose engines do not fit together)."""
        dropped = self._engines.pop((model_name, precision, batch, self.backend.name, build), None)
        getattr(dropped, "close", lambda: None)()  # buffers of its own (TensorRT), which empty_cache cannot free
        if dropped is not None and self.device.sm:
            import torch

            torch.cuda.empty_cache()

    def reference(self, engine: Engine) -> torch.Tensor:
        """The FP32 model's output on the engine's fixed input, once per (model, batch) (engines/models/reference)."""
        key = (engine.model_name, engine.batch)
        if key not in self._references:
            from pytest_vitperf.engines.models.reference import fp32_reference

            model, on = self.model(engine.model_name), self.device.torch_device  # where the engines run
            self._references[key] = fp32_reference(model, engine.model_name, engine.batch, self.settings.cache_dir, on)
        return self._references[key]

    def output_checked(self, engine: Engine) -> bool:
        return _key(engine) in self._output_errors

    def record_output_error(self, engine: Engine, err: OutputError | None) -> None:
        if err is not None:
            self._output_errors[_key(engine)] = err

    def spec(self, engine: Engine) -> Spec:
        key = _key(engine)
        backend = self._backend_of(engine)
        return Spec(
            model=engine.model_name,
            precision=engine.precision,
            batch=engine.batch,
            backend=backend.name,
            backend_version=backend.version(),
            device=self.device.name,
            sm=self.device.sm,
            timer=engine.clock.name,
            gpu_index=None if self.device.sm is None else self.gpu_index,
            gpu_uuid=self.device.uuid,
            options={
                **self.timing(),
                **engine.describe(),
                "prepare_s": self._prepare_s.get(key),
                **({"output_error": self._output_errors[key].to_dict()} if key in self._output_errors else {}),
            },
        )

    # -- families: the latency suite's interleaved rounds --------------------------------------------
    def members(self, model: str, batch: int) -> list[str]:
        return list(self.members_of.get((model, batch), {}))

    def member_nodeid(self, run: FamilyRun, precision: str, request: Any) -> str:
        """The test that owns a family member's measurement: its own, or (a reference not selected) the family's."""
        return self.members_of.get((run.model, run.batch), {}).get(precision) or request.node.nodeid

    def measured_by(self, key: tuple[str, str, int, str]) -> str | None:
        return self._measured_here.get(key)

    def round_plan(self) -> RoundPlan:
        s = self.settings
        warmup = s.warmup_ms if s.warmup_ms is not None else CPU_WARMUP_MS if self.device.sm is None else GPU_WARMUP_MS
        return RoundPlan(rounds=s.rounds, agree=s.rounds_agree, first_look=s.first_look, slice_ms=s.slice_ms,
                         warmup_ms=warmup, budget_s=s.round_budget_s, seed=self.seed, builds=s.builds)  # fmt: skip

    @property
    def verdict_confidence(self) -> float:
        """The level each floor is judged at: the run's confidence shared by every floor and every look at it."""
        return family_wise(self.settings.confidence, max(1, self.floors_judged) * MAX_LOOKS)

    # -- floors ---------------------------------------------------------------------------------
    def floors_file(self, test_dir: Path) -> FloorsFile | None:
        path = self.settings.floors or (test_dir / FLOORS_FILE)
        if path not in self._floors:  # a file given but missing, or malformed, raises FloorsFileError naming it
            missing = self.settings.floors is None and not path.exists()
            self._floors[path] = None if missing else FloorsFile.load(path)
        return self._floors[path]

    def floor_for(self, test_dir: Path, model: str, precision: str, batch: int) -> Floor | None:
        floors = self.floors_file(test_dir)
        if floors is None:
            return None
        return floors.find(gpu=self.device.name, backend=self.floors_backend, version=self.backend.version() or "",
                           model=model, batch=batch, precision=precision)  # fmt: skip

    @property
    def floors_backend(self) -> str:
        return getattr(self.backend, "floors_as", self.backend.name)  # trtexec times TensorRT's engines

    # -- baselines ------------------------------------------------------------------------------
    @cached_property
    def baselines(self) -> BaselineStorage | None:
        """Where the gate reads: the store's runs (--vitperf-store-baselines), or --vitperf-baseline-dir's files."""
        from pytest_vitperf.store.baselines import JsonDirStorage

        s = self.settings
        if s.store_baselines and s.store:
            from pytest_vitperf.store.sql import SqlStore

            return SqlStore(s.store)
        return JsonDirStorage(s.baseline_dir) if s.baseline_dir is not None else None

    def spread_prior(self, key: BaselineKey, gpu_uuid: str) -> Prior | None:
        """The spread prior of the stored rows beside `key` (baselines/gate.prior_for), read once per GPU model."""
        from pytest_vitperf.verdicts.baselines.gate import prior_for

        where = (key.backend, key.backend_version, key.gpu, gpu_uuid)
        if where not in self._priors:
            self._priors[where] = None if self.baselines is None else prior_for(self.baselines, key, gpu_uuid)
        return self._priors[where]

    @cached_property
    def environment(self) -> dict[str, Any]:
        from pytest_vitperf.measure.env import fingerprint

        return fingerprint(self.device)

    # -- results --------------------------------------------------------------------------------
    def record(self, m: Measurement, nodeid: str = "") -> None:
        self.measurements[m.spec.key] = m
        self.rows = None  # judged anew with it
        if nodeid:
            self._measured_here[m.spec.key] = nodeid

    def record_verdict(self, v: Verdict) -> None:
        self.verdicts[v.candidate.spec.key] = v
        self.rows = None

    def take_gpu(self, family: str) -> str:
        """With vitperf ab's relay, give the GPU up and wait for it back to run `family`: what it ran until then."""
        return "" if self.relay is None else self.relay.take(family)

    def worker_record(self, worker: str) -> WorkerRecord:
        d = self.device if "device" in self.__dict__ else None  # a worker that measured nothing probed nothing
        return WorkerRecord(
            worker=worker,
            gpu_index=self.gpu_index if d is not None and d.sm is not None else None,
            gpu_uuid=d.uuid if d is not None else None,
            startup_s=dict(self._startup_s),
            prepare_s=round(sum(self._prepare_s.values()), 1),
            measured=[m.spec.label for k, m in self.measurements.items() if k in self._measured_here],
            engines=len(self._engines),
            measure_s=round(self.measure_s, 1),
            checks_s=round(self.checks_s, 1),
            prepare_steps={k: round(v, 1) for k, v in self.prepare_steps.items()},
            timed_s=round(math.fsum(m.timed_s for k, m in self.measurements.items() if k in self._measured_here), 1),
            wall_s=round(time.perf_counter() - self.started, 1),
            waited_s=self.turn.waited_s,
            late_s=self.turn.late_s,
            turn_s=self.turn.held_s,
            threads=self.threads,
            relayed_s=round(self.relay.waited_s, 1) if self.relay is not None else 0.0,
        )


def _key(engine: Engine) -> tuple[str, str, int, str]:
    return (engine.model_name, engine.precision, engine.batch, engine.backend)
