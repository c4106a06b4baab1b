from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_vitperf.core.precision import (
    ALL_BACKENDS,
    PRECISIONS,
    get_precision,
    register,
    sort_key,
    unregister,
    unsupported_reason,
)
from pytest_vitperf.engines.backends import get_backend, select_backend
from pytest_vitperf.measure.env import Device

H100 = Device("NVIDIA H100 80GB HBM3", sm=90)
ADA = Device("NVIDIA RTX 6000 Ada Generation", sm=89)
A100 = Device("NVIDIA A100-SXM4-80GB", sm=80)
RTX_PRO = Device("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", sm=120)
THOR = Device("NVIDIA Thor", sm=110)
CPU = Device("AMD EPYC")


@pytest.mark.parametrize("precision", ["nvfp4", "mxfp8"])
@pytest.mark.parametrize("device", [H100, ADA, A100], ids=lambda d: f"sm{d.sm}")
def test_block_scaled_formats_are_refused_before_blackwell(precision: str, device: Device) -> None:
    reason = unsupported_reason(precision, device)
    assert reason is not None
    assert device.name in reason and f"sm_{device.sm}" in reason
    assert "Blackwell" in reason and "sm_120" in reason


@pytest.mark.parametrize("device", [RTX_PRO, THOR, Device("NVIDIA B200", sm=100)], ids=lambda d: f"sm{d.sm}")
def test_block_scaled_formats_run_on_blackwell(device: Device) -> None:
    assert unsupported_reason("nvfp4", device) is None
    assert unsupported_reason("mxfp8", device) is None


def test_fp8_needs_ada_or_later() -> None:
    assert "sm_89+" in (unsupported_reason("fp8", A100) or "")
    assert unsupported_reason("fp8", ADA) is None
    assert unsupported_reason("fp8", H100) is None


def test_cpu_runs_only_the_float_formats() -> None:
    for name, p in PRECISIONS.items():
        reason = unsupported_reason(name, CPU)
        if p.cpu:
            assert reason is None
        else:
            assert reason is not None and "no CUDA GPU here (AMD EPYC)" in reason


def test_precision_the_backend_does_not_build_names_the_ones_that_do() -> None:
    torch_backend = get_backend("torch")
    assert unsupported_reason("mxfp8", RTX_PRO) is None  # the GPU can; the backend cannot
    reason = torch_backend.precision_reason("mxfp8")
    assert reason is not None
    assert "torch backend" in reason and "tensorrt, tensorrt-rtx" in reason and "--vitperf-backend" in reason
    assert torch_backend.precision_reason("fp8") is None  # realquant: torch._scaled_mm
    assert torch_backend.precision_reason("fp8-attn") is None  # FP8 attention: cuDNN on a GPU, torch on a CPU
    assert get_backend("tensorrt-rtx").precision_reason("nvfp4-mlp-only") is None


def test_variants_share_their_base_precisions_hardware_and_sort_after_it() -> None:
    for name, base in [("fp8-attn", "fp8"), ("int8-smoothquant", "int8"), ("nvfp4-mlp-only", "nvfp4")]:
        v, b = get_precision(name), get_precision(base)
        assert v.root == base and b.root == base
        assert (v.weights, v.activations, v.needs, v.min_sm, v.only_sms) == (
            b.weights,
            b.activations,
            b.needs,
            b.min_sm,
            b.only_sms,
        )
        assert v.recipe != b.recipe and sort_key(base) < sort_key(name)
        for device in (A100, H100, RTX_PRO, CPU):  # refused exactly where its base is
            assert (unsupported_reason(name, device) is None) == (unsupported_reason(base, device) is None)
    assert sort_key("fp16") < sort_key("not-registered")  # old baseline files sort last, not crash


def test_register_adds_a_variant_once_and_refuses_a_clash() -> None:
    fp16 = get_precision("fp16")
    entry = fp16.variant("fp16-registered-in-test", "FP16 again", fp16.recipe, backends=ALL_BACKENDS)
    try:
        assert register(entry) is entry and register(entry) is entry  # the same entry twice: a no-op
        assert get_precision("fp16-registered-in-test").root == "fp16"
        order = list(PRECISIONS)
        assert order.index("fp16-registered-in-test") == order.index("fp16") + 1
        with pytest.raises(ValueError, match="already registered"):
            register(replace(entry, title="other"))
        with pytest.raises(ValueError, match="unknown precision 'fp5'"):
            register(replace(entry, name="x", reference="fp5"))
    finally:
        unregister("fp16-registered-in-test")


def test_unknown_precision_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown precision 'fp6'; valid: fp32, fp16"):
        get_precision("fp6")
    with pytest.raises(ValueError, match="unknown precision"):
        unsupported_reason("int4", H100)


def test_auto_backend_falls_back_to_torch_and_explicit_ones_say_why() -> None:
    backend, reason, _ = select_backend("auto", CPU)
    assert backend.name == "torch" and reason is None
    _, reason, _ = select_backend("tensorrt-rtx", H100)
    assert reason is not None and ("sm_90" in reason or "not installed" in reason)
    _, reason, _ = select_backend("tensorrt", CPU)
    assert reason is not None


def test_auto_passes_by_a_backend_never_seen_to_time_an_engine_and_says_so() -> None:
    """tensorrt-rtx imports here (the dev extra) and, on an sm_120 board, could run: auto still takes torch, the one
    backend this project's records saw time engines on a GPU, and names what it passed by."""
    from pytest_vitperf.engines.backends import TIMED_ON_GPU, never_timed

    blackwell = Device("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", sm=120)
    rtx_runs = select_backend("tensorrt-rtx", blackwell).reason is None
    backend, reason, why = select_backend("auto", blackwell)
    assert backend.name == "torch" and reason is None and why.startswith("auto took torch")
    assert ("passed by tensorrt-rtx" in why) == rtx_runs and ("--vitperf-backend tensorrt-rtx" in why) == rtx_runs
    assert set(TIMED_ON_GPU) == {"torch"} and never_timed("torch") is None
    assert never_timed("tensorrt") == ("tensorrt has never timed an engine on a GPU in this project's records "
                                       "(docs/backends.md)")  # fmt: skip
    assert never_timed("my-backend") is None  # a conftest.py's own backend is its author's to vouch for
    for record in TIMED_ON_GPU.values():
        assert (Path(__file__).parents[1] / record).is_file()
