"""TensorRT backends (tensorrt for data-centre GPUs, tensorrt_rtx for RTX GPUs).

Engine building through Model Optimizer ONNX exports is not in this version; the backends exist so
that selection, skip reasons and the capability matrix already name them.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from pytest_vitperf.backends.base import VitperfError
from pytest_vitperf.env import version_of

if TYPE_CHECKING:
    from pytest_vitperf.env import Device


class _TensorRTFamily:
    name = ""
    module = ""
    dists: tuple[str, ...] = ()
    install_hint = ""
    runs_on: frozenset[int] | None = None  # SMs the runtime supports; None: any CUDA GPU

    def version(self) -> str | None:
        return version_of(*self.dists)

    def unavailable_reason(self, device: Device) -> str | None:
        if importlib.util.find_spec(self.module) is None:
            return f"{self.module} is not installed ({self.install_hint})"
        if device.sm is None:
            return f"the {self.name} backend needs an NVIDIA GPU to run engines; no CUDA GPU here ({device.name})"
        if self.runs_on is not None and device.sm not in self.runs_on:
            sms = ", ".join(f"sm_{s}" for s in sorted(self.runs_on))
            return f"{self.name} does not run on {device.name} (sm_{device.sm}); it runs on {sms}"
        return f"the {self.name} backend cannot build engines in this version of pytest-vitperf"

    def prepare(self, model: Any, **kwargs: Any) -> Any:
        raise VitperfError(f"the {self.name} backend cannot build engines in this version of pytest-vitperf")


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
