"""The torch backend: eager or CUDA-graph replay on a GPU, eager on a CPU, optional torch.compile.

FP8 and INT8 come from torchao's dynamic quantization of every Linear (weights quantized once, activations per
call, per-tensor FP8 E4M3 / per-token INT8), in a BF16 model: the torch-side low precision a team would try
before exporting to TensorRT. Without --vitperf-compile the activation quantization runs as separate eager
kernels, so compile it for a fair number."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_vitperf.backends.base import VitperfError
from pytest_vitperf.env import version_of
from pytest_vitperf.models import input_size
from pytest_vitperf.timing import Clock, PerfCounterClock, TorchCudaEventClock

if TYPE_CHECKING:
    import torch

    from pytest_vitperf.env import Device
    from pytest_vitperf.kernels import Breakdown
    from pytest_vitperf.options import Settings

_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "bfloat16", "int8": "bfloat16"}
_TORCHAO = {"fp8": "Float8DynamicActivationFloat8WeightConfig", "int8": "Int8DynamicActivationInt8WeightConfig"}
INPUT_SEED = 1234
# Inductor's own CUDA graphs would hide inside our replay; we capture the graph ourselves.
_COMPILE_MODES = {"default": None, "max-autotune": "max-autotune-no-cudagraphs"}


@dataclass
class TorchEngine:
    model: Any
    model_name: str
    inputs: Any
    precision: str
    batch: int
    clock: Clock
    mode: str
    stream: Any = None
    graph: Any = None
    static_out: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    backend: str = "torch"

    def launch(self) -> None:
        import torch

        if self.graph is not None:
            self.graph.replay()
            return
        with torch.inference_mode():
            if self.stream is None:
                self.model(self.inputs)
            else:
                with torch.cuda.stream(self.stream):
                    self.static_out = self.model(self.inputs)

    def output(self) -> torch.Tensor:
        import torch

        if self.stream is None:
            with torch.inference_mode():
                return self.model(self.inputs).float()
        with torch.cuda.stream(self.stream):
            self.launch()
        self.stream.synchronize()
        return self.static_out.float().cpu()

    def describe(self) -> dict[str, Any]:
        return dict(self.info)

    def kernel_breakdown(self) -> Breakdown:
        from pytest_vitperf.kernels import profile

        return profile(self.model, self.inputs, self.stream)


class TorchBackend:
    name = "torch"

    def version(self) -> str | None:
        return version_of("torch")

    def unavailable_reason(self, device: Device) -> str | None:
        return None  # torch is a core dependency and runs on CPU and CUDA

    def precision_reason(self, precision: str) -> str | None:
        if precision in _TORCHAO and importlib.util.find_spec("torchao") is None:
            return (
                f"the torch backend builds {precision} with torchao, which is not installed: "
                "pip install 'pytest-vitperf[torchao]'"
            )
        return None

    def prepare(
        self,
        model: torch.nn.Module,
        *,
        model_name: str,
        precision: str,
        batch: int,
        device: Device,
        settings: Settings,
    ) -> TorchEngine:
        import torch

        if precision not in _DTYPES:
            raise VitperfError(f"the torch backend builds {', '.join(_DTYPES)}, not {precision}")
        if precision in _TORCHAO and device.sm is None:
            raise VitperfError(f"torchao's {precision} kernels need a CUDA GPU; none here ({device.name})")
        if (why := self.precision_reason(precision)) is not None:
            raise VitperfError(why)
        dtype = getattr(torch, _DTYPES[precision])
        dev = torch.device(device.torch_device)
        gen = torch.Generator().manual_seed(INPUT_SEED)
        x = torch.randn(batch, *input_size(model), generator=gen).to(dev, dtype)
        model = model.to(dev, dtype).eval()
        quantized = _torchao_quantize(model, precision) if precision in _TORCHAO else None
        info: dict[str, Any] = {
            "backend": "torch",
            "dtype": str(dtype).removeprefix("torch."),
            "device": str(dev),
            "parameters": sum(p.numel() for p in model.parameters()),
            "weight_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
            "compile": settings.compile,
        }
        if quantized is not None:
            info["quantization"] = quantized
        if settings.compile != "off":
            if settings.cache_dir is not None:
                # Keep compiled kernels across sessions instead of recompiling (minutes for max-autotune).
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(settings.cache_dir / "inductor")
            model = torch.compile(model, mode=_COMPILE_MODES[settings.compile])  # type: ignore[assignment]

        if device.sm is None:
            info["mode"] = "eager"
            return TorchEngine(model, model_name, x, precision, batch, PerfCounterClock(), "eager", info=info)

        stream = torch.cuda.Stream(dev)
        engine = TorchEngine(
            model, model_name, x, precision, batch, TorchCudaEventClock(stream), "eager", stream=stream
        )
        try:
            with torch.inference_mode(), torch.cuda.stream(stream):
                for _ in range(3):  # lazy init, cuBLAS handles and autotuning happen outside capture
                    engine.static_out = model(x)
                stream.synchronize()
                if settings.cuda_graph:
                    graph = torch.cuda.CUDAGraph()
                    try:
                        with torch.cuda.graph(graph, stream=stream):
                            engine.static_out = model(x)
                    except torch.cuda.OutOfMemoryError:
                        raise
                    except RuntimeError as exc:  # e.g. torchao's eager INT8 path, which capture refuses
                        reason = str(exc).splitlines()[0]
                        info["cuda_graph"] = f"capture refused ({reason}); timed as stream launches"
                        with torch.inference_mode():
                            engine.static_out = model(x)
                    else:
                        engine.graph = graph
                        engine.mode = "cuda-graph"
            stream.synchronize()
        except torch.cuda.OutOfMemoryError as exc:
            raise VitperfError(
                f"out of GPU memory preparing {precision} batch {batch} on {device.name}: {exc}. "
                "Lower the batch: --vitperf-batch-sizes 1,8"
            ) from None
        info["mode"] = engine.mode
        engine.info = info
        return engine


def _torchao_quantize(model: torch.nn.Module, precision: str) -> str:
    """Quantize every Linear of `model` in place with torchao; returns what was applied."""
    import torchao
    import torchao.quantization as tq

    name = _TORCHAO[precision]
    config = getattr(tq, name)(granularity=tq.PerTensor()) if precision == "fp8" else getattr(tq, name)()
    tq.quantize_(model, config)
    return f"torchao {torchao.__version__} {name}"
