from __future__ import annotations

import pytest

from pytest_vitperf.backends import select_backend
from pytest_vitperf.env import Device
from pytest_vitperf.precision import PRECISIONS, get_precision, unsupported_reason

H100 = Device("NVIDIA H100 80GB HBM3", sm=90)
ADA = Device("NVIDIA RTX 6000 Ada Generation", sm=89)
A100 = Device("NVIDIA A100-SXM4-80GB", sm=80)
RTX_PRO = Device("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", sm=120)
THOR = Device("NVIDIA Thor", sm=110)
CPU = Device("AMD EPYC")


@pytest.mark.parametrize("precision", ["nvfp4", "mxfp8"])
@pytest.mark.parametrize("device", [H100, ADA, A100], ids=lambda d: f"sm{d.sm}")
def test_block_scaled_formats_are_refused_before_blackwell(precision: str, device: Device) -> None:
    reason = unsupported_reason(precision, device, "tensorrt")
    assert reason is not None
    assert device.name in reason and f"sm_{device.sm}" in reason
    assert "Blackwell" in reason and "sm_120" in reason


@pytest.mark.parametrize("device", [RTX_PRO, THOR, Device("NVIDIA B200", sm=100)], ids=lambda d: f"sm{d.sm}")
def test_block_scaled_formats_run_on_blackwell(device: Device) -> None:
    assert unsupported_reason("nvfp4", device, "tensorrt") is None
    assert unsupported_reason("mxfp8", device, "tensorrt-rtx") is None


def test_fp8_needs_ada_or_later() -> None:
    assert "sm_89+" in (unsupported_reason("fp8", A100, "tensorrt") or "")
    assert unsupported_reason("fp8", ADA, "tensorrt") is None
    assert unsupported_reason("fp8", H100, "tensorrt") is None


def test_cpu_runs_only_the_float_formats() -> None:
    for name, p in PRECISIONS.items():
        reason = unsupported_reason(name, CPU, "torch")
        if p.cpu:
            assert reason is None
        else:
            assert reason is not None and "no CUDA GPU here (AMD EPYC)" in reason


def test_precision_the_backend_does_not_build_names_the_ones_that_do() -> None:
    reason = unsupported_reason("mxfp8", RTX_PRO, "torch")
    assert reason is not None
    assert "torch backend" in reason and "tensorrt, tensorrt-rtx" in reason and "--vitperf-backend" in reason
    assert unsupported_reason("fp8", H100, "torch") is None  # realquant: torch._scaled_mm


def test_unknown_precision_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown precision 'fp6'; valid: fp32, fp16"):
        get_precision("fp6")
    with pytest.raises(ValueError, match="unknown precision"):
        unsupported_reason("int4", H100, "torch")


def test_auto_backend_falls_back_to_torch_and_explicit_ones_say_why() -> None:
    backend, reason = select_backend("auto", CPU)
    assert backend.name == "torch" and reason is None
    _, reason = select_backend("tensorrt-rtx", H100)
    assert reason is not None and ("sm_90" in reason or "not installed" in reason)
    _, reason = select_backend("tensorrt", CPU)
    assert reason is not None
