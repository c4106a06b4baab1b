"""Precisions and the capability matrix: what each one needs from the GPU and which backends build it.

A combination that cannot run is refused up front with a reason naming the device, its SM and
what is needed, instead of being attempted (an NVFP4 kernel launched on Ada dies with an internal
CUTLASS error, not a readable message).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_vitperf.env import Device

# Blackwell: B200 (10.0), B300 (10.3), Thor (11.0), RTX PRO 6000 / RTX 50xx (12.0), GB10 (12.1).
BLACKWELL_SMS = frozenset({100, 103, 110, 120, 121})
ALL_BACKENDS = frozenset({"torch", "tensorrt", "tensorrt-rtx"})
TRT_FAMILY = frozenset({"tensorrt", "tensorrt-rtx"})


@dataclass(frozen=True)
class Precision:
    name: str
    title: str
    needs: str  # the hardware feature, for skip reasons
    min_sm: int = 0
    only_sms: frozenset[int] | None = None  # when set, the SM must be one of these
    backends: frozenset[str] = ALL_BACKENDS  # backends that build it in this version
    cpu: bool = False  # runs on the torch CPU path
    block: int | None = None  # quantization block along the reduction axis
    sparse: bool = False

    def runs_on_sm(self, sm: int) -> bool:
        if self.only_sms is not None:
            return sm in self.only_sms
        return sm >= self.min_sm

    def sm_requirement(self) -> str:
        if self.only_sms is not None:
            return "Blackwell sm_" + "/sm_".join(str(s) for s in sorted(self.only_sms))
        return f"sm_{self.min_sm}+"


_TABLE = (
    Precision("fp32", "FP32", "FP32 CUDA cores", min_sm=70, cpu=True),
    Precision("fp16", "FP16", "FP16 tensor cores", min_sm=80, cpu=True),
    Precision("bf16", "BF16", "BF16 tensor cores", min_sm=80, cpu=True),
    Precision("int8", "INT8", "INT8 tensor cores", min_sm=75),  # torch: realquant (torch._int_mm)
    Precision("fp8", "FP8 E4M3", "FP8 tensor cores", min_sm=89),  # torch: realquant (torch._scaled_mm)
    Precision(
        "mxfp8",
        "MXFP8",
        "MXFP8 block-scaled tensor cores",
        only_sms=BLACKWELL_SMS,
        backends=TRT_FAMILY,
        block=32,
    ),
    Precision(
        "nvfp4",
        "NVFP4",
        "NVFP4 block-scaled tensor cores",
        only_sms=BLACKWELL_SMS,
        backends=TRT_FAMILY,
        block=16,
    ),
    Precision(
        "fp16-sparse24",
        "FP16 2:4 sparse",
        "2:4 sparse tensor cores",
        min_sm=80,
        backends=TRT_FAMILY,
        sparse=True,
    ),
)

PRECISIONS: dict[str, Precision] = {p.name: p for p in _TABLE}
REFERENCE = "fp16"  # speedups are reported against this precision


def get_precision(name: str) -> Precision:
    try:
        return PRECISIONS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown precision {name!r}; valid: {', '.join(PRECISIONS)}") from None


def unsupported_reason(precision: str, device: Device, backend: str) -> str | None:
    """Why `precision` cannot run on `device` through `backend`, or None if it can."""
    p = get_precision(precision)
    if device.sm is None:
        if not p.cpu:
            return (
                f"{p.name} needs an NVIDIA GPU with {p.needs} ({p.sm_requirement()}); no CUDA GPU here ({device.name})"
            )
    elif not p.runs_on_sm(device.sm):
        return f"{device.name} is sm_{device.sm}; {p.name} needs {p.needs}, on {p.sm_requirement()}"
    if backend not in p.backends:
        return (
            f"{p.name} is not built by the {backend} backend in this version; "
            f"backends that build it: {', '.join(sorted(p.backends))} (select with --vitperf-backend)"
        )
    return None


def matrix_rows() -> list[tuple[str, str, str, str]]:
    """(precision, SM requirement, hardware feature, backends) for docs and `vitperf capabilities`."""
    return [(p.name, p.sm_requirement(), p.needs, ", ".join(sorted(p.backends))) for p in _TABLE]
