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
from pytest_vitperf.measure.timing import Clock, CudaPythonEventClock, check_cuda

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.engines.backends.base import Engine
    from pytest_vitperf.engines.tensorrt.plan import BuildOptions, BuildResult
    from pytest_vitperf.measure.env import Device
    from pytest_vitperf.measure.kernels import Breakdown
    from pytest_vitperf.measure.layers import Layer, LayerTime


@dataclass
class TrtEngine:
    """A deserialized engine; `allocate()` creates its context, stream, device buffers and CUDA graph."""

    backend: str
    model_name: str
    precision: str
    batch: int
    trt: Any
    plan: bytes
    cuda_graph: bool
    info: dict[str, Any] = field(default_factory=dict)
    clock: Clock = field(init=False)

    def allocate(self) -> TrtEngine:
        """Deserialize, allocate device buffers with resident random inputs, run once and capture the graph."""
        from cuda.bindings import runtime as rt

        self._runtime = self.trt.Runtime(self.trt.Logger(self.trt.Logger.WARNING))
        self._engine = self._runtime.deserialize_cuda_engine(self.plan)
        if self._engine is None:
            raise VitperfError(f"{self.backend} could not deserialize the engine; the build log says why")
        self._context = self._engine.create_execution_context()
        self.stream = check_cuda(rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking))
        self.clock = CudaPythonEventClock(self.stream)
        self._buffers: dict[str, tuple[int, int, Any, tuple[int, ...]]] = {}
        import numpy as np

        from pytest_vitperf.engines.models.zoo import fixed_input

        for i in range(self._engine.num_io_tensors):
            name = self._engine.get_tensor_name(i)
            shape = tuple(self._context.get_tensor_shape(name))
            dtype = np.dtype(self.trt.nptype(self._engine.get_tensor_dtype(name)))
            nbytes = int(np.prod(shape)) * dtype.itemsize
            ptr = check_cuda(rt.cudaMalloc(nbytes))
            self._context.set_tensor_address(name, ptr)
            self._buffers[name] = (ptr, nbytes, dtype, shape)
            if self._engine.get_tensor_mode(name) == self.trt.TensorIOMode.INPUT:
                host = fixed_input(shape).numpy().astype(dtype)  # resident: no transfers timed
                check_cuda(rt.cudaMemcpy(ptr, host.ctypes.data, nbytes, rt.cudaMemcpyKind.cudaMemcpyHostToDevice))
        self._graph_exec = None
        self._context.execute_async_v3(self.stream)  # first run outside capture: lazy allocations
        check_cuda(rt.cudaStreamSynchronize(self.stream))
        if self.cuda_graph:
            mode = rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal
            check_cuda(rt.cudaStreamBeginCapture(self.stream, mode))
            self._context.execute_async_v3(self.stream)
            graph = check_cuda(rt.cudaStreamEndCapture(self.stream))
            self._graph_exec = check_cuda(rt.cudaGraphInstantiate(graph, 0))
        self.info["mode"] = "cuda-graph" if self._graph_exec is not None else "enqueue"
        # What one call needs on the GPU, as the torch backend counts it: the plan (its weights), the I/O buffers and
        # the context's activation memory (TensorRT 10.1+ and TensorRT-RTX call it device_memory_size_v2).
        activations = getattr(self._engine, "device_memory_size_v2", None)
        if activations is not None and "engine_bytes" in self.info:
            io = sum(nbytes for _, nbytes, _, _ in self._buffers.values())
            self.info["peak_bytes"] = int(self.info["engine_bytes"]) + io + int(activations)
        return self

    def launch(self) -> None:
        from cuda.bindings import runtime as rt

        if self._graph_exec is not None:
            check_cuda(rt.cudaGraphLaunch(self._graph_exec, self.stream))
        else:
            self._context.execute_async_v3(self.stream)

    def output(self) -> torch.Tensor:
        import numpy as np
        import torch
        from cuda.bindings import runtime as rt

        self.launch()
        check_cuda(rt.cudaStreamSynchronize(self.stream))
        name = next(n for n in self._buffers if self._engine.get_tensor_mode(n) == self.trt.TensorIOMode.OUTPUT)
        ptr, nbytes, dtype, shape = self._buffers[name]
        host = np.empty(shape, dtype=dtype)
        check_cuda(rt.cudaMemcpy(host.ctypes.data, ptr, nbytes, rt.cudaMemcpyKind.cudaMemcpyDeviceToHost))
        return torch.from_numpy(host.astype(np.float32))

    def run(self, x: torch.Tensor) -> torch.Tensor:
        import numpy as np
        from cuda.bindings import runtime as rt

        from pytest_vitperf.engines.models.zoo import fixed_input

        name = next(n for n in self._buffers if self._engine.get_tensor_mode(n) == self.trt.TensorIOMode.INPUT)
        ptr, nbytes, dtype, shape = self._buffers[name]
        if tuple(x.shape) != shape:
            raise VitperfError(f"this {self.precision} engine takes {shape}, not {tuple(x.shape)}")

        def put(host: Any) -> None:
            check_cuda(rt.cudaMemcpy(ptr, host.ctypes.data, nbytes, rt.cudaMemcpyKind.cudaMemcpyHostToDevice))

        put(np.ascontiguousarray(x.numpy().astype(dtype)))
        try:
            return self.output()
        finally:
            put(fixed_input(shape).numpy().astype(dtype))  # the resident input back, as allocate() left it

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
        from cuda.bindings import runtime as rt

        from pytest_vitperf.measure.layers import LayerTime

        totals: dict[str, float] = {}

        class Profiler(self.trt.IProfiler):  # type: ignore[name-defined]
            def __init__(self) -> None:
                super().__init__()  # the bindings need the base class initialised explicitly

            def report_layer_time(self, layer_name: str, ms: float) -> None:
                totals[layer_name] = totals.get(layer_name, 0.0) + ms

        context = self._engine.create_execution_context()  # its own context: the timed one stays unprofiled
        for name, (ptr, *_rest) in self._buffers.items():
            context.set_tensor_address(name, ptr)
        profiler = Profiler()  # referenced until the context is done with it
        context.profiler = profiler
        for _ in range(runs):
            context.execute_async_v3(self.stream)
            check_cuda(rt.cudaStreamSynchronize(self.stream))
        del context
        return [LayerTime(name, ms / runs) for name, ms in totals.items()]


class _TensorRTFamily:
    name = ""
    module = ""
    dists: tuple[str, ...] = ()
    install_hint = ""
    runs_on: frozenset[int] | None = None  # SMs the runtime supports; None: any CUDA GPU

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
        return "native"

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
        onnx = export_onnx(precision, model, batch, cache_dir=cache)
        options = BuildOptions(target=target, sparse_weights=get_precision(precision).recipe.sparse24)
        result = build_cached(
            importlib.import_module(self.module) if builder is None else None,
            self.name,
            self.version() or "?",
            onnx,
            options,
            cache=PlanCache(cache / "plans") if cache is not None else None,
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
        result, info, _ = self.build(
            model.to(device.torch_device),
            model_name=model_name,
            precision=precision,
            batch=batch,
            target=self.target(device),
            cache=settings.cache_dir,
        )
        trt = importlib.import_module(self.module)
        engine = TrtEngine(self.name, model_name, precision, batch, trt, result.plan, settings.cuda_graph, info)
        return engine.allocate()


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
