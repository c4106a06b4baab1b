"""Kernel breakdown: grouping by kernel name, and a real profiled run of a tiny ViT on the CPU."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_vitperf.engines.models.zoo import build_model
from pytest_vitperf.measure.kernels import (
    Breakdown,
    amdahl_ceiling,
    breakdown,
    category,
    epilogue_ms,
    explain,
    of_profiles,
    profile,
)

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("name", "cat"),
    [
        ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f16_tn_n_tilesize128x128x128", "gemm"),  # cuBLASLt FP8 GEMM
        ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn", "gemm"),
        ("nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT", "gemm"),  # cuBLAS on Hopper
        ("aten::addmm", "gemm"),
        ("aten::mkldnn_convolution", "gemm"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>", "attention"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("triton_red_fused_abs_amax_0", "quantize"),
        # Inductor's static-scale quantize fused into GELU / LayerNorm, from a compiled FP8 / INT8 ViT-B on an H100
        ("triton_poi_fused__scaled_mm__to_copy_clamp_div_gelu_t_view_3", "quantize"),
        ("triton_per_fused__scaled_mm__to_copy_add_clamp_div_native_layer_norm_t_view_7", "quantize"),
        ("triton_poi_fused__to_copy_add_clamp_div_gelu_mul_round_view_6", "quantize"),
        ("triton_poi_fused__to_copy_clamp_mul_sdpa_fp8_unbind_view_1", "quantize"),  # fp8-attn's Q, K, V (H200)
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f8_knob_32_64x256x128_4x1x1_cga1x1x1_kernel0_0",
         "attention"),  # cuDNN's FP8 attention (H200)
        ("nvjet_sm90_qqhsh_192x192_128x4_1x2_h_bz_coopB_bias_TNN", "gemm"),  # its FP8 GEMM
        ("cutlass_80_tensorop_i16832gemm_s8_128x64_128x3_tn_align16", "gemm"),  # its INT8 GEMM
        ("triton_poi_fused_gelu_view_2", "elementwise"),
        ("triton_per_fused_add_native_layer_norm_view_6", "norm"),
        ("blocks.0.mlp.fc1.input_quantizer/QuantizeLinear", "quantize"),
        ("triton_per_fused_native_layer_norm_1", "norm"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "elementwise"),
        ("aten::gelu", "elementwise"),
        ("Memset (Device)", "other"),
        # The first LayerNorm fused with the patch embedding's conv output (FP16), and with its quantize (fp8-fused),
        # and fp8-fused's fc1: an H200's profile (tests/data/h200-vit_base-b64-fp8-fused-kernels.json)
        ("triton_red_fused_add_cat_convolution_expand_native_layer_norm_transpose_view_1", "norm"),
        ("triton_red_fused__to_copy_add_cat_clamp_convolution_div_expand_linear_gelu_fp8_native_layer_norm_view_2",
         "quantize"),
        ("nvjet_sm90_qqhsq_128x128_128x6_2x1_v_bz_coopA_algo2_gelubias_TNT", "gemm"),
    ],
)
def test_kernel_names_fall_into_categories(name: str, cat: str) -> None:
    assert category(name) == cat


@given(st.dictionaries(st.sampled_from(["aten::addmm", "aten::gelu", "flash_fwd", "x"]), st.floats(0, 1e3)))
def test_categories_add_up_to_the_total(times: dict[str, float]) -> None:
    b = breakdown(times, runs=4)
    assert sum(b.by_category.values()) == pytest.approx(b.per_run_ms)
    assert list(b.by_category.values()) == sorted(b.by_category.values(), reverse=True)


def test_profile_of_a_tiny_vit_on_the_cpu() -> None:
    import torch

    model = build_model("vit_tiny").eval()
    b = profile(model, torch.randn(1, 3, 224, 224), runs=3)
    assert b.device == "cpu" and b.per_run_ms > 0
    assert max(b.by_category, key=lambda c: b.by_category[c]) == "gemm"  # the Linears dominate a ViT
    assert {"attention", "norm"} <= set(b.by_category)
    assert b.line().startswith(f"{b.per_run_ms:.3f} ms op self time: gemm ")


def test_explain_reads_a_breakdown_pair_the_amdahl_way() -> None:
    """FP16: 6 ms of GEMMs in 10 ms. FP8: GEMMs 3 ms, plus 1 ms of new quantize kernels, the rest unchanged."""
    fp16 = Breakdown(10.0, {"gemm": 6.0, "norm": 4.0})
    fp8 = Breakdown(8.0, {"gemm": 3.0, "norm": 4.0, "quantize": 1.0})
    assert explain(fp16, fp8) == (
        "GEMMs 2.00x faster and 60% of the reference's time: 1.43x if nothing else changed; "
        "time outside GEMMs +1.000 ms (quantize +1.000); profiled 1.25x"
    )
    assert explain(fp16, Breakdown(5.0, {"other": 5.0})).startswith("no GEMM time recognised")


def test_explain_names_what_moved_outside_the_gemms_in_a_real_profile() -> None:
    """ViT-B at batch 64 on an H200 (docs/measurements/2026-11-28-h200-fp8-attention-cudnn.md), kernel ms per call:
    fp8's quantize kernels absorb GELU and LayerNorm and cost 0.49 ms more than they did; fp8-attn adds slower
    FP8 attention. Categories that moved by less than 1% of FP16's time (fp8's attention, -0.017 ms) are left out."""
    fp16 = Breakdown(5.617, {"gemm": 3.656, "elementwise": 0.685, "attention": 0.559, "norm": 0.496, "other": 0.220})
    fp8 = Breakdown(4.780, {"gemm": 2.328, "quantize": 1.671, "attention": 0.542, "other": 0.218, "norm": 0.022})
    attn = Breakdown(5.209, {"gemm": 2.332, "quantize": 1.912, "attention": 0.714, "other": 0.230, "norm": 0.022})
    assert explain(fp16, fp8) == (
        "GEMMs 1.57x faster and 65% of the reference's time: 1.31x if nothing else changed; time outside GEMMs "
        "+0.491 ms (quantize +1.671, elementwise -0.685, norm -0.474); profiled 1.18x"
    )
    assert "(quantize +1.912, elementwise -0.685, norm -0.474, attention +0.155)" in explain(fp16, attn)


def test_explain_reads_a_stored_h200_profile_with_a_gelu_epilogue() -> None:
    """ViT-B at batch 64 on an H200, five profiles an engine (docs/measurements/2026-11-29-h200-fp8-fused-cublaslt.md):
    fp8-fused's fc1 is one cuBLASLt kernel with the GELU in its epilogue, so its GEMM time includes work that FP16
    spends in an elementwise kernel, and the line says how much. Inductor's kernels that name the op
    (`..._linear_gelu_fp8_native_layer_norm_...`) are LayerNorm + quantize, not GEMMs."""
    stored = json.loads((DATA / "h200-vit_base-b64-fp8-fused-kernels.json").read_text())["breakdowns"]
    # Grouped again from the kernel times: the stored groups are those of the classifier that ran on the GPU.
    fp16, fp8, fused = (of_profiles(stored[p]["profiles"], "cuda") for p in ("fp16", "fp8", "fp8-fused"))
    assert explain(fp16, fp8) == (
        "GEMMs 1.53x faster and 63% of the reference's time: 1.28x if nothing else changed; time outside GEMMs "
        "+0.386 ms (quantize +1.658, elementwise -0.680, norm -0.573); profiled 1.18x"
    )
    assert explain(fp16, fused) == (
        "GEMMs 1.35x faster (0.965 ms of them with GELU in their epilogue) and 63% of the reference's time: 1.20x if "
        "nothing else changed; time outside GEMMs -0.473 ms (quantize +0.797, elementwise -0.680, norm -0.571); "
        "profiled 1.33x"
    )
    assert epilogue_ms(replace(fused, profiles=[])) == pytest.approx(0.965, abs=0.001)  # from the slowest kernels
    assert "epilogue" not in explain(fp16, replace(fused, profiles=[], top=fused.top[:1]))


@given(st.floats(0, 1), st.floats(0.01, 100))
def test_amdahl_ceiling_is_bounded_by_its_parts(fraction: float, speedup: float) -> None:
    c = amdahl_ceiling(fraction, speedup)
    assert min(1.0, speedup) - 1e-9 <= c <= max(1.0, speedup) + 1e-9
    if fraction < 1 and speedup >= 1:
        assert c <= 1 / (1 - fraction) + 1e-9  # the untouched part caps the gain


def test_amdahl_ceiling_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="need 0 <= fraction <= 1 and speedup > 0"):
        amdahl_ceiling(1.5, 2.0)
