"""A stand-in for TensorRT's Python module, as strict as TensorRT where this project calls it, for the machines where
the real library cannot be installed (its builder's libraries are not on the package index).

Its classes, method names, parameter names and return values are TensorRT's, read from the pybind11 sources of
NVIDIA/TensorRT (python/src/infer/pyCore.cpp, pyGraph.cpp, parsers/pyOnnx.cpp; release/10.8 to release/11.1):
`set_tensor_address(name, memory) -> bool`, `execute_async_v3(stream_handle) -> bool`,
`deserialize_cuda_engine(serialized_engine) -> ICudaEngine` (None when TensorRT refuses the plan), and so on;
tests/test_tensorrt_runtime.py holds these names against the real bindings. What it keeps of TensorRT's behaviour:
- the builder allows TF32 unless `clear_flag(BuilderFlag.TF32)`, as TensorRT's does;
- a plan names the TensorRT build and the SM it was built for; another runtime build or GPU refuses it;
- enqueue and binding calls return False when TensorRT's would (an address not set, a name the engine lacks) and
  when told to (`FAIL`); nothing raises;
- the work of an enqueue runs on the stream, asynchronously (HostCuda below), so an output read before its stream
  is synchronised is stale, and a capture records the work an enqueue made, or nothing.
Each layer of the plan is one ONNX node; the output of every image is the mean of its input, which a test can check.
"""

from __future__ import annotations

import ctypes
import enum
import json
import math
from collections.abc import Callable
from typing import Any

import onnx
import torch

VERSION = "10.16.1.11"
__version__ = VERSION  # what the backend reads; a test may take it away
BUILD = "b11"  # the build of the runtime: a plan of another build is refused, as TensorRT refuses one
SM = 90  # the GPU this stand-in runs on
FAIL: set[str] = set()  # calls that answer False: "set_tensor_address", "execute_async_v3", "capture", "profiled"
LOGGERS: list[Logger] = []
_MAGIC = b"STAND-IN TENSORRT PLAN\n"


class HostCuda:
    """The CUDA runtime calls of engines/tensorrt/cuda.CudaRuntime, in host memory. A stream is a queue that runs at
    `synchronize`; copies take pinned host memory only (`pinned`), as cudaMemcpyAsync needs to be asynchronous; a
    capture records what is queued on its stream. `live()` is what has not been given back."""

    def __init__(self) -> None:
        self.memory: dict[int, Any] = {}
        self.pinned_at: set[int] = set()
        self.queues: dict[int, list[Callable[[], None]]] = {}
        self.capturing: dict[int, list[Callable[[], None]]] = {}
        self.graphs: dict[int, tuple[Callable[[], None], ...]] = {}

    def live(self) -> dict[str, int]:
        return {"buffers": len(self.memory), "streams": len(self.queues), "graphs": len(self.graphs)}

    def stream(self) -> int:
        handle = len(self.queues) + 1000 * (1 + max(self.queues, default=0) // 1000)
        self.queues[handle] = []
        return handle

    def destroy_stream(self, stream: int) -> None:
        if self.queues.pop(stream):
            raise RuntimeError("CUDA call failed: a stream destroyed with work queued")

    def malloc(self, nbytes: int) -> int:
        buffer = ctypes.create_string_buffer(nbytes)
        self.memory[ctypes.addressof(buffer)] = buffer
        return ctypes.addressof(buffer)

    def free(self, ptr: int) -> None:
        if self.memory.pop(ptr, None) is None:
            raise RuntimeError(f"CUDA call failed: cudaErrorInvalidValue (free of {ptr:#x})")

    def pinned(self, nbytes: int) -> int:
        ptr = self.malloc(nbytes)
        self.pinned_at.add(ptr)
        return ptr

    def free_pinned(self, ptr: int) -> None:
        self.pinned_at.discard(ptr)
        self.free(ptr)

    def _copy(self, dst: int, src: int, nbytes: int, stream: int, host: int) -> None:
        if host not in self.pinned_at:
            raise RuntimeError("CUDA call failed: an asynchronous copy from pageable host memory")
        self.enqueue(stream, lambda: ctypes.memmove(dst, src, nbytes))

    def to_device(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._copy(dst, src, nbytes, stream, src)

    def to_host(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._copy(dst, src, nbytes, stream, dst)

    def enqueue(self, stream: int, work: Callable[[], None]) -> None:
        if stream not in self.queues:
            raise RuntimeError(f"CUDA call failed: cudaErrorInvalidResourceHandle (stream {stream})")
        (self.capturing[stream] if stream in self.capturing else self.queues[stream]).append(work)

    def synchronize(self, stream: int) -> None:
        queue = self.queues[stream]
        while queue:
            queue.pop(0)()

    def begin_capture(self, stream: int) -> None:
        self.capturing[stream] = []

    def end_capture(self, stream: int) -> tuple[Callable[[], None], ...]:
        return tuple(self.capturing.pop(stream))

    def instantiate(self, graph: tuple[Callable[[], None], ...]) -> int:
        handle = len(self.graphs) + 1
        self.graphs[handle] = graph
        return handle

    def launch_graph(self, graph_exec: int, stream: int) -> None:
        for work in self.graphs[graph_exec]:
            self.enqueue(stream, work)

    def destroy_graph(self, graph: Any, graph_exec: int) -> None:
        del self.graphs[graph_exec]


CUDA = HostCuda()


def reset(**state: Any) -> None:
    """A fresh runtime: no failures, this build and SM unless given."""
    global CUDA, BUILD, SM
    CUDA, BUILD, SM = HostCuda(), state.get("build", "b11"), state.get("sm", 90)
    FAIL.clear()
    FAIL.update(state.get("fail", ()))


class Logger:
    INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = range(5)

    def __init__(self, min_severity: int = WARNING) -> None:
        LOGGERS.append(self)
        self.min_severity = min_severity


class DataType(enum.Enum):
    FLOAT, HALF, INT8, INT32, BOOL, UINT8, FP8, BF16, INT64 = range(9)


class TensorIOMode(enum.Enum):
    NONE, INPUT, OUTPUT = range(3)


class BuilderFlag(enum.IntEnum):
    SPARSE_WEIGHTS, TF32, REQUIRE_USER_ALLOCATION = range(3)


class NetworkDefinitionCreationFlag(enum.IntEnum):
    STRONGLY_TYPED = 5


class ProfilingVerbosity(enum.Enum):
    LAYER_NAMES_ONLY, NONE, DETAILED = range(3)


class LayerInformationFormat(enum.Enum):
    ONELINE, JSON = range(2)


_ONNX_TYPES = {onnx.TensorProto.FLOAT: DataType.FLOAT, onnx.TensorProto.FLOAT16: DataType.HALF,
               onnx.TensorProto.BFLOAT16: DataType.BF16, onnx.TensorProto.FLOAT8E4M3FN: DataType.FP8}  # fmt: skip
_TORCH = {DataType.FLOAT: torch.float32, DataType.HALF: torch.float16, DataType.BF16: torch.bfloat16,
          DataType.FP8: torch.float8_e4m3fn}  # fmt: skip
_PRECISION = {onnx.TensorProto.FLOAT8E4M3FN: "FP8", onnx.TensorProto.INT8: "Int8"}


class INetworkDefinition:
    def __init__(self, flags: int) -> None:
        self.flags = flags
        self.graph: onnx.GraphProto | None = None


class _Error:
    def __init__(self, text: str) -> None:
        self.text = text

    def desc(self) -> str:
        return self.text


class OnnxParser:
    def __init__(self, network: INetworkDefinition, logger: Logger) -> None:
        self.network, self.errors = network, [] if isinstance(logger, Logger) else ["the logger is not a Logger"]

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    def get_error(self, index: int) -> _Error:
        return _Error(self.errors[index])

    def parse(self, model: bytes, path: str | None = None) -> bool:
        try:
            self.network.graph = onnx.load_from_string(model).graph
        except Exception as exc:  # the real parser reports every failure as an error, never raises
            self.errors.append(f"ModelImporter.cpp: failed to parse the ONNX model: {exc}")
        return not self.errors


class IBuilderConfig:
    def __init__(self) -> None:
        self.flags = {BuilderFlag.TF32}  # TensorRT allows TF32 unless told not to
        self.profiling_verbosity = ProfilingVerbosity.LAYER_NAMES_ONLY
        self.builder_optimization_level = 3

    def set_flag(self, flag: BuilderFlag) -> None:
        self.flags.add(flag)

    def clear_flag(self, flag: BuilderFlag) -> None:
        self.flags.discard(flag)

    def get_flag(self, flag: BuilderFlag) -> bool:
        return flag in self.flags


class Builder:
    def __init__(self, logger: Logger) -> None:
        self.logger = logger

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        return INetworkDefinition(flags)

    def create_builder_config(self) -> IBuilderConfig:
        return IBuilderConfig()

    def build_serialized_network(self, network: INetworkDefinition, config: IBuilderConfig) -> bytes | None:
        graph = network.graph
        if graph is None:
            return None
        io = [_tensor(v, "INPUT") for v in graph.input] + [_tensor(v, "OUTPUT") for v in graph.output]
        layers = []
        for i, node in enumerate(graph.node):
            types = [a.t.data_type for a in node.attribute if a.name == "output_dtype"]
            zero = [init.data_type for init in graph.initializer if init.name in node.input[2:]]
            precision = next((_PRECISION[t] for t in zero + types if t in _PRECISION), io[0]["dtype"])
            layers.append({"name": node.name or f"{node.op_type}_{i}", "precision": precision})
        plan = {"version": VERSION, "build": BUILD, "sm": SM, "io": io, "layers": layers,
                "flags": sorted(f.name for f in config.flags)}  # fmt: skip
        return _MAGIC + json.dumps(plan).encode()


def _tensor(value: onnx.ValueInfoProto, mode: str) -> dict[str, Any]:
    t = value.type.tensor_type
    return {"name": value.name, "shape": [d.dim_value for d in t.shape.dim], "dtype": _ONNX_TYPES[t.elem_type].name,
            "mode": mode}  # fmt: skip


class Runtime:
    def __init__(self, logger: Logger) -> None:
        self.logger = logger

    def deserialize_cuda_engine(self, serialized_engine: bytes) -> ICudaEngine | None:
        if not serialized_engine.startswith(_MAGIC):
            return None
        plan = json.loads(serialized_engine[len(_MAGIC) :])
        if (plan["version"], plan["build"], plan["sm"]) != (VERSION, BUILD, SM):
            return None  # TensorRT logs "The engine plan file is not compatible with this version of TensorRT"
        return ICudaEngine(plan)


class ICudaEngine:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.io = {t["name"]: t for t in plan["io"]}

    @property
    def num_io_tensors(self) -> int:
        return len(self.io)

    @property
    def device_memory_size_v2(self) -> int:
        return 1 << 20

    def get_tensor_name(self, index: int) -> str:
        return str(self.plan["io"][index]["name"])

    def get_tensor_dtype(self, name: str) -> DataType:
        return DataType[self.io[name]["dtype"]]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return TensorIOMode[self.io[name]["mode"]] if name in self.io else TensorIOMode.NONE

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.io[name]["shape"])

    def create_execution_context(self) -> IExecutionContext:
        return IExecutionContext(self)

    def create_engine_inspector(self) -> EngineInspector:
        return EngineInspector(self)


class EngineInspector:
    def __init__(self, engine: ICudaEngine) -> None:
        self.engine = engine

    def get_engine_information(self, format: LayerInformationFormat) -> str:
        def tensor(precision: str) -> dict[str, Any]:
            return {"Name": "t", "Location": "Device", "Dimensions": [1], "Format": "Row major linear",
                    "Datatype": precision}  # fmt: skip

        layers = [{"Name": x["name"], "LayerType": "CaskGemmMatrixMultiply", "Inputs": [tensor(x["precision"])],
                   "Outputs": [tensor("FP16")]} for x in self.engine.plan["layers"]]  # fmt: skip
        return json.dumps({"Layers": layers})


class IProfiler:
    def __init__(self) -> None:
        self.initialised = True

    def report_layer_time(self, layer_name: str, ms: float) -> None:
        raise NotImplementedError


class IExecutionContext:
    def __init__(self, engine: ICudaEngine) -> None:
        self.engine = engine
        self.addresses: dict[str, int] = {}
        self.profiler: IProfiler | None = None

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return self.engine.get_tensor_shape(name)

    def set_tensor_address(self, name: str, memory: int) -> bool:
        if "set_tensor_address" in FAIL or name not in self.engine.io:
            return False
        self.addresses[name] = memory
        return True

    def execute_async_v3(self, stream_handle: int) -> bool:
        capturing = stream_handle in CUDA.capturing
        told = {"execute_async_v3"} | ({"capture"} if capturing else set()) | ({"profiled"} if self.profiler else set())
        if told & FAIL or set(self.addresses) != set(self.engine.io):
            return False  # TensorRT: "Error Code 3: API Usage Error (... address is not set)", and no work queued
        if self.profiler is not None and not getattr(self.profiler, "initialised", False):
            return False  # a Python IProfiler whose base class was never initialised cannot be called
        CUDA.enqueue(stream_handle, self._compute)
        return True

    def _compute(self) -> None:
        def view(name: str) -> torch.Tensor:
            t = self.engine.io[name]
            dtype = _TORCH[DataType[t["dtype"]]]
            count = math.prod(t["shape"])
            raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(self.addresses[name])
            return torch.frombuffer(raw, dtype=dtype, count=count).reshape(t["shape"])

        (x,) = (view(n) for n, t in self.engine.io.items() if t["mode"] == "INPUT")
        (y,) = (view(n) for n, t in self.engine.io.items() if t["mode"] == "OUTPUT")
        y.copy_(x.float().reshape(x.shape[0], -1).mean(dim=1, keepdim=True).expand(y.shape).to(y.dtype))
        if self.profiler is not None:
            for i, layer in enumerate(self.engine.plan["layers"]):
                self.profiler.report_layer_time(layer["name"], 0.01 * (i + 1))
