"""The CUDA runtime calls a TensorRT engine makes (streams, device and pinned host buffers, copies, graph capture), in
one place: cuda-python's runtime on a GPU, a host stand-in where TensorRT's runtime path is tested without one.

Every copy is asynchronous on the engine's own stream and from pinned memory, followed by a wait on that stream: a
pageable `cudaMemcpy` may return before its transfer lands, and a non-blocking stream does not wait for the legacy
stream it would run on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pytest_vitperf.measure.timing import check_cuda

if TYPE_CHECKING:
    import torch

# TensorRT's DataType member names -> torch dtypes: TensorRT's own `nptype` has no BF16 or FP8 (numpy has neither).
TORCH_DTYPES = {"FLOAT": "float32", "HALF": "float16", "BF16": "bfloat16", "FP8": "float8_e4m3fn", "INT8": "int8",
                "UINT8": "uint8", "INT32": "int32", "INT64": "int64", "BOOL": "bool"}  # fmt: skip


def torch_dtype(trt_type: Any, name: str) -> torch.dtype:
    """The torch dtype of a TensorRT I/O tensor's DataType."""
    import torch

    from pytest_vitperf.core.errors import VitperfError

    dtype = TORCH_DTYPES.get(getattr(trt_type, "name", str(trt_type)))
    if dtype is None:
        raise VitperfError(f"tensor {name!r} is of TensorRT type {trt_type}, which the TensorRT backend cannot feed "
                           f"(it feeds {', '.join(TORCH_DTYPES)})")  # fmt: skip
    dtype_of: torch.dtype = getattr(torch, dtype)
    return dtype_of


class CudaRuntime(Protocol):
    """Addresses are ints, as TensorRT's bindings take them."""

    def stream(self) -> Any: ...
    def destroy_stream(self, stream: Any) -> None: ...
    def malloc(self, nbytes: int) -> int: ...
    def free(self, ptr: int) -> None: ...
    def pinned(self, nbytes: int) -> int: ...
    def free_pinned(self, ptr: int) -> None: ...
    def to_device(self, dst: int, src: int, nbytes: int, stream: Any) -> None: ...
    def to_host(self, dst: int, src: int, nbytes: int, stream: Any) -> None: ...
    def synchronize(self, stream: Any) -> None: ...
    def begin_capture(self, stream: Any) -> None: ...
    def end_capture(self, stream: Any) -> Any: ...
    def instantiate(self, graph: Any) -> Any: ...
    def launch_graph(self, graph_exec: Any, stream: Any) -> None: ...
    def destroy_graph(self, graph: Any, graph_exec: Any) -> None: ...


class CudaPython:
    """cuda-python's runtime API."""

    def __init__(self) -> None:
        from cuda.bindings import runtime

        self.rt = runtime

    def stream(self) -> Any:
        return check_cuda(self.rt.cudaStreamCreateWithFlags(self.rt.cudaStreamNonBlocking))

    def destroy_stream(self, stream: Any) -> None:
        check_cuda(self.rt.cudaStreamDestroy(stream))

    def malloc(self, nbytes: int) -> int:
        return int(check_cuda(self.rt.cudaMalloc(nbytes)))

    def free(self, ptr: int) -> None:
        check_cuda(self.rt.cudaFree(ptr))

    def pinned(self, nbytes: int) -> int:
        return int(check_cuda(self.rt.cudaMallocHost(nbytes)))

    def free_pinned(self, ptr: int) -> None:
        check_cuda(self.rt.cudaFreeHost(ptr))

    def to_device(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        kind = self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice
        check_cuda(self.rt.cudaMemcpyAsync(dst, src, nbytes, kind, stream))

    def to_host(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        kind = self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        check_cuda(self.rt.cudaMemcpyAsync(dst, src, nbytes, kind, stream))

    def synchronize(self, stream: Any) -> None:
        check_cuda(self.rt.cudaStreamSynchronize(stream))

    def begin_capture(self, stream: Any) -> None:
        mode = self.rt.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal
        check_cuda(self.rt.cudaStreamBeginCapture(stream, mode))

    def end_capture(self, stream: Any) -> Any:
        return check_cuda(self.rt.cudaStreamEndCapture(stream))

    def instantiate(self, graph: Any) -> Any:
        return check_cuda(self.rt.cudaGraphInstantiate(graph, 0))

    def launch_graph(self, graph_exec: Any, stream: Any) -> None:
        check_cuda(self.rt.cudaGraphLaunch(graph_exec, stream))

    def destroy_graph(self, graph: Any, graph_exec: Any) -> None:
        check_cuda(self.rt.cudaGraphExecDestroy(graph_exec))
        check_cuda(self.rt.cudaGraphDestroy(graph))


@dataclass
class IOTensor:
    """One I/O tensor: its device buffer, bound to the context, and a pinned host buffer to stage its copies."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    device: int
    host: int
    is_input: bool

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def staged(self) -> torch.Tensor:
        """The pinned host buffer, seen as a tensor of this one's type and shape."""
        import ctypes

        import torch

        raw = (ctypes.c_char * self.nbytes).from_address(self.host)
        return torch.frombuffer(raw, dtype=self.dtype, count=math.prod(self.shape)).reshape(self.shape)
