"""Kernel breakdown: grouping by kernel name, and a real profiled run of a tiny ViT on the CPU."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_vitperf.kernels import breakdown, category, profile
from pytest_vitperf.models import build_model


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
        ("blocks.0.mlp.fc1.input_quantizer/QuantizeLinear", "quantize"),
        ("triton_per_fused_native_layer_norm_1", "norm"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "elementwise"),
        ("aten::gelu", "elementwise"),
        ("Memset (Device)", "other"),
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
