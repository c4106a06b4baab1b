"""TensorRT backends: `tensorrt` (data-centre and workstation GPUs) and `tensorrt_rtx` (RTX GPUs).

Both follow one path: the precision recipe quantizes the timm model with Model Optimizer and exports ONNX; a
strongly typed network is built from it (plan.py, cached on disk); the runner keeps device buffers, a
non-default stream and CUDA events through cuda-python, and replays a CUDA graph captured around
`execute_async_v3`. TensorRT-RTX builds ahead of time for an explicit compute capability, so its engines can
be built on a machine without a GPU; running them needs one of the GPUs it supports.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.core.precision import builtin_backend_reason, get_precision
from pytest_vitperf.measure.env import version_of
from pytest_vitperf.measure.timing import Clock, CudaPythonEventClock

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.engines.backends.base import Engine
    from pytest_vitperf.engines.tensorrt.cuda import CudaRuntime, IOTensor
    from pytest_vitperf.engines.tensorrt.plan import BuildOptions, BuildResult
    from pytest_vitperf.measure.env import Device
    from pytest_vitperf.measure.kernels import Breakdown
    from pytest_vitperf.measure.layers import Layer, LayerTime


class PlanRefused(VitperfError):
    """TensorRT returned no engine for a plan: one built by another TensorRT build or for another GPU."""


@dataclass
class TrtEngine:
    """A deserialized engine; `allocate()` creates its context, stream, device buffers and CUDA graph, `close()` gives
    them back. Every call TensorRT answers with False (an enqueue, a binding) raises: an engine that did not run must
    not be timed as a fast one."""

    backend: str
    model_name: str
    precision: str
    batch: int
    trt: Any
    plan: bytes
    cuda_graph: bool
    info: dict[str, Any] = field(default_factory=dict)
    cuda: CudaRuntime | None = None  # cuda-python's runtime unless given another
    clock: Clock = field(init=False)

    def _failed(self, what: str) -> VitperfError:
        return VitperfError(f"{self.backend} {what} for {self.model_name} {self.precision} b{self.batch}; TensorRT's "
                            f"log above says why; check the backend with: vitperf selfcheck --backend {self.backend}")

    def _bind(self, context: Any, t: IOTensor) -> None:
        if not context.set_tensor_address(t.name, t.device):
            raise self._failed(f"refused the address of tensor {t.name!r}")

    def _enqueue(self, context: Any, when: str) -> None:
        if not context.execute_async_v3(self.stream):
            raise self._failed(f"could not enqueue {when}")

    def allocate(self) -> TrtEngine:
        """Deserialize, allocate device buffers with resident inputs, run once and capture the graph; on a failure,
        give back what was taken."""
        from pytest_vitperf.engines.tensorrt.cuda import CudaPython

        self._cuda: CudaRuntime = self.cuda or CudaPython()
        self._tensors: dict[str, IOTensor] = {}
        self._graph: Any = None
        self._graph_exec: Any = None
        self.stream: Any = None
        try:
            self._allocate(self._cuda)
        except BaseException:
            self.close()
            raise
        return self

    def _allocate(self, cuda: CudaRuntime) -> None:
        from pytest_vitperf.engines.models.zoo import fixed_input
        from pytest_vitperf.engines.tensorrt.cuda import IOTensor, torch_dtype
        from pytest_vitperf.engines.tensorrt.plan import logger

        self._runtime = self.trt.Runtime(logger(self.trt))
        self._engine = self._runtime.deserialize_cuda_engine(self.plan)
        if self._engine is None:
            raise PlanRefused(f"{self.backend} could not deserialize the plan of {self.model_name} {self.precision} "
                              f"b{self.batch} (built by another TensorRT build or for another GPU)")  # fmt: skip
        self._context = self._engine.create_execution_context()
        self.stream = cuda.stream()
        self.clock = CudaPythonEventClock(self.stream)
        for i in range(self._engine.num_io_tensors):
            name = self._engine.get_tensor_name(i)
            dtype = torch_dtype(self._engine.get_tensor_dtype(name), name)
            is_input = self._engine.get_tensor_mode(name) == self.trt.TensorIOMode.INPUT
            t = self._tensors[name] = IOTensor(name, tuple(self._context.get_tensor_shape(name)), dtype, 0, 0,
                                               is_input)  # fmt: skip
            t.device = cuda.malloc(t.nbytes)  # held as soon as taken: close() gives back what an OOM left
            t.host = cuda.pinned(t.nbytes)
            self._bind(self._context, t)
        for t in self._inputs():
            self._put(t, fixed_input(t.shape))  # resident: no transfers timed
        self._enqueue(self._context, "its first run")  # outside capture: lazy allocations
        cuda.synchronize(self.stream)
        if self.cuda_graph:
            self._capture()
        self.info.setdefault("mode", "cuda-graph" if self._graph_exec is not None else "enqueue")
        ends = {t.is_input: int(t.device) for t in self._tensors.values()}  # a ViT's one input and (last) output
        self.info["addresses"] = {"input": ends.get(True), "output": ends.get(False)}
        # What one call needs on the GPU, as the torch backend counts it: the plan (its weights), the I/O buffers and
        # the context's activation memory (TensorRT 10.1+ and TensorRT-RTX call it device_memory_size_v2).
        activations = getattr(self._engine, "device_memory_size_v2", None)
        if activations is not None and "engine_bytes" in self.info:
            io = sum(t.nbytes for t in self._tensors.values())
            self.info["peak_bytes"] = int(self.info["engine_bytes"]) + io + int(activations)

    def _capture(self) -> None:
        """One enqueue captured into a CUDA graph; a context TensorRT-RTX says it cannot capture stays on enqueue."""
        capturable = getattr(self._context, "is_stream_capturable", None)
        if capturable is not None and not capturable(self.stream):
            self.info["mode"] = "enqueue (TensorRT-RTX cannot capture this context in a CUDA graph)"
            return
        self._cuda.begin_capture(self.stream)
        try:
            done = self._context.execute_async_v3(self.stream)
        finally:
            graph = self._cuda.end_capture(self.stream)  # the stream leaves capture mode whatever happened
        if not done:
            raise self._failed("could not enqueue inside a CUDA graph capture")
        self._graph, self._graph_exec = graph, self._cuda.instantiate(graph)

    def _inputs(self) -> list[IOTensor]:
        return [t for t in self._tensors.values() if t.is_input]

    def _put(self, t: IOTensor, x: torch.Tensor) -> None:
        t.staged().copy_(x.reshape(t.shape).to(t.dtype))
        self._cuda.to_device(t.device, t.host, t.nbytes, self.stream)
        self._cuda.synchronize(self.stream)  # the staging buffer is reused by the next copy

    def launch(self) -> None:
        if self._graph_exec is not None:
            self._cuda.launch_graph(self._graph_exec, self.stream)
        else:
            self._enqueue(self._context, "a run")

    def output(self) -> torch.Tensor:
        if not self._tensors:
            raise VitperfError(f"this {self.precision} engine was released; prepare it again")
        self.launch()
        t = next(t for t in self._tensors.values() if not t.is_input)
        self._cuda.to_host(t.host, t.device, t.nbytes, self.stream)
        self._cuda.synchronize(self.stream)
        return t.staged().float().clone()

    def run(self, x: torch.Tensor) -> torch.Tensor:
        from pytest_vitperf.engines.models.zoo import fixed_input

        (t,) = self._inputs()  # a ViT takes one image batch
        if tuple(x.shape) != t.shape:
            raise VitperfError(f"this {self.precision} engine takes {t.shape}, not {tuple(x.shape)}")
        self._put(t, x)
        try:
            return self.output()
        finally:
            self._put(t, fixed_input(t.shape))  # the resident input back, as allocate() left it

    def close(self) -> None:
        """Give back what allocate() took: the graph, the buffers, the stream, then the context, engine and runtime
        (torch.cuda.empty_cache frees none of these)."""
        if not hasattr(self, "_tensors"):
            return
        cuda = self._cuda
        if self.stream is not None:
            cuda.synchronize(self.stream)
        if self._graph_exec is not None:
            cuda.destroy_graph(self._graph, self._graph_exec)
            self._graph = self._graph_exec = None
        for t in self._tensors.values():
            if t.device:
                cuda.free(t.device)
            if t.host:
                cuda.free_pinned(t.host)
        self._tensors = {}
        if self.stream is not None:
            cuda.destroy_stream(self.stream)
            self.stream = None
        self._context = self._engine = self._runtime = None  # in this order: each holds on to the next

    def describe(self) -> dict[str, Any]:
        from pytest_vitperf.measure.layers import precision_counts

        layers, schema = self._inspected()
        if not layers:
            return self.info
        return {
            **self.info,
            "layers": len(layers),
            "layer_precisions": precision_counts(layers),
            "inspector_schema": schema,  # which TensorRT's JSON the inspector wrote (10.x or 11.x)
        }

    def kernel_breakdown(self) -> Breakdown:
        """IProfiler layer times grouped like kernels (TensorRT layer names carry MatMul, Softmax, Quantize...),
        repeated for kernel_diff's intervals, and summed by the module each layer's ONNX name comes from."""
        from dataclasses import replace

        from pytest_vitperf.measure.kernels import PROFILES, of_profiles
        from pytest_vitperf.measure.layers import by_module

        profiles = [{t.name: t.ms for t in self.layer_times(50)} for _ in range(PROFILES)]
        return replace(of_profiles(profiles, "cuda"), modules=[by_module(p) for p in profiles])

    def layers(self) -> list[Layer]:
        """Per-layer precision and tactic from the engine inspector (detailed with DETAILED profiling)."""
        return self._inspected()[0]

    def _inspected(self) -> tuple[list[Layer], str | None]:
        """The engine inspector's layers and the schema of its JSON; nothing from a runtime whose inspector says
        nothing useful."""
        from pytest_vitperf.measure.layers import LayerInfoError, inspector_schema, parse_layer_info

        inspector = self._engine.create_engine_inspector()
        try:
            doc = json.loads(inspector.get_engine_information(self.trt.LayerInformationFormat.JSON))
            return parse_layer_info(doc), inspector_schema(doc)
        except (json.JSONDecodeError, LayerInfoError):
            return [], None

    def layer_times(self, runs: int = 50) -> list[LayerTime]:
        """Average milliseconds per layer over `runs` enqueues with an IProfiler attached: a separate run from
        the timed one, since profiling serialises layers and cannot sit inside a CUDA graph."""
        from pytest_vitperf.measure.layers import LayerTime

        totals: dict[str, float] = {}

        class Profiler(self.trt.IProfiler):  # type: ignore[name-defined]
            def __init__(self) -> None:
                super().__init__()  # the bindings need the base class initialised explicitly

            def report_layer_time(self, layer_name: str, ms: float) -> None:
                totals[layer_name] = totals.get(layer_name, 0.0) + ms

        context = self._engine.create_execution_context()  # its own context: the timed one stays unprofiled
        for t in self._tensors.values():
            self._bind(context, t)
        profiler = Profiler()  # referenced until the context is done with it
        context.profiler = profiler
        for _ in range(runs):
            self._enqueue(context, "a profiled run")
            self._cuda.synchronize(self.stream)
        del context
        return [LayerTime(name, ms / runs) for name, ms in totals.items()]


class _TensorRTFamily:
    name = ""
    module = ""
    dists: tuple[str, ...] = ()
    install_hint = ""
    runs_on: frozenset[int] | None = None  # SMs the runtime supports; None: any CUDA GPU
    cuda: CudaRuntime | None = None  # the CUDA runtime its engines call; None: cuda-python's

    def version(self) -> str | None:
        return version_of(*self.dists)

    def missing(self) -> str | None:
        """Why the Python module is missing, or None."""
        if importlib.util.find_spec(self.module) is None:
            return f"{self.module} is not installed ({self.install_hint})"
        return None

    def unavailable_reason(self, device: Device) -> str | None:
        missing = self.missing()
        if missing is not None:
            return missing
        if device.sm is None:
            return f"the {self.name} backend needs an NVIDIA GPU to run engines; no CUDA GPU here ({device.name})"
        if self.runs_on is not None and device.sm not in self.runs_on:
            sms = ", ".join(f"sm_{s}" for s in sorted(self.runs_on))
            return f"{self.name} does not run on {device.name} (sm_{device.sm}); it runs on {sms}"
        return None

    def precision_reason(self, precision: str) -> str | None:
        return builtin_backend_reason(precision, self.name)  # Model Optimizer, which exports, is a core dependency

    def target(self, device: Device) -> str:
        """What the plan is built for, part of its cache key: a TensorRT plan runs on the SM it was built on."""
        return f"sm_{device.sm}" if device.sm is not None else "native"

    def builder(self, cache: Path | None) -> Callable[[bytes, BuildOptions], bytes] | None:
        """How a plan is built from ONNX bytes; None: plan.build_plan with the Python module."""
        return None

    def build(
        self, model: torch.nn.Module, *, model_name: str, precision: str, batch: int, target: str, cache: Path | None
    ) -> tuple[BuildResult, dict[str, Any], bytes]:
        """The plan of `precision` for `target` ("native": the GPU at hand; "SM120" and the like: TensorRT-RTX's
        ahead-of-time build, which needs no GPU), from the precision's export; what to record about it; the export."""
        import onnx as onnx_lib

        from pytest_vitperf.engines.onnx.coverage import quantization_coverage
        from pytest_vitperf.engines.quant.recipes import export_onnx
        from pytest_vitperf.engines.tensorrt.plan import BuildOptions, PlanCache, build_cached

        reason = self.precision_reason(precision)
        if reason is not None:
            raise VitperfError(reason)
        builder = self.builder(cache)
        module = importlib.import_module(self.module) if builder is None else None
        onnx = export_onnx(precision, model, batch, cache_dir=cache)
        options = BuildOptions(target=target, sparse_weights=get_precision(precision).recipe.sparse24)
        # A plan is tied to the exact TensorRT that built it: where no version can be read, nothing is cached.
        version = self.version() or getattr(module, "__version__", None)
        result = build_cached(
            module,
            self.name,
            version or "?",
            onnx,
            options,
            cache=PlanCache(cache / "plans") if cache is not None and version else None,
            progress=lambda line: print(f"vitperf: {model_name} {precision} b{batch}: {line}", file=sys.stderr),
            builder=builder,
        )
        coverage = quantization_coverage(onnx_lib.load_from_string(onnx))
        info = {
            "backend": self.name,
            "target": target,
            "engine_bytes": result.size_bytes,
            "cache": result.cache,
            "build_s": round(result.seconds, 1),
            "coverage": coverage.summary(),
            "quantized_gemm_flops": round(coverage.fraction, 4),
        }
        return result, info, onnx

    def prepare(
        self,
        model: torch.nn.Module,
        *,
        model_name: str,
        precision: str,
        batch: int,
        device: Device,
        settings: Settings,
    ) -> Engine:
        from pytest_vitperf.engines.tensorrt.plan import PlanCache

        trt = importlib.import_module(self.module)
        model = model.to(device.torch_device)

        def built() -> tuple[BuildResult, TrtEngine]:
            result, info, _ = self.build(model, model_name=model_name, precision=precision, batch=batch,
                                         target=self.target(device), cache=settings.cache_dir)  # fmt: skip
            return result, TrtEngine(self.name, model_name, precision, batch, trt, result.plan, settings.cuda_graph,
                                     info, self.cuda)  # fmt: skip

        result, engine = built()
        try:
            return engine.allocate()
        except PlanRefused as refused:
            if result.cache != "hit" or settings.cache_dir is None:
                raise
            # The cache key names the version and SM, not the build: another build of one version, refused.
            PlanCache(settings.cache_dir / "plans").discard(result.meta)
            print(f"vitperf: {refused}; discarded the cached plan and built it again", file=sys.stderr)
        return built()[1].allocate()  # built afresh: a refusal now is not the cache's, and is raised


class TensorRTBackend(_TensorRTFamily):
    name = "tensorrt"
    module = "tensorrt"
    dists = ("tensorrt", "tensorrt-cu13", "tensorrt-cu12")
    install_hint = "run in an NGC TensorRT container, or pip install tensorrt from NVIDIA's index"


class TensorRTRTXBackend(_TensorRTFamily):
    name = "tensorrt-rtx"
    module = "tensorrt_rtx"
    dists = ("tensorrt-rtx-cu13", "tensorrt-rtx-cu12", "tensorrt_rtx")
    install_hint = 'pip install "pytest-vitperf[rtx]"'
    # TensorRT-RTX targets RTX-class GPUs: Turing, Ampere, Ada and consumer/workstation Blackwell.
    runs_on = frozenset({75, 80, 86, 89, 120, 121})

    def target(self, device: Device) -> str:
        return f"SM{device.sm}" if device.sm is not None else "SM120"
