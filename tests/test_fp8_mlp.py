"""fp8-fused on the CPU: the fused op's arithmetic against float64, its registration for compile, the MLP swap on a
real timm ViT, what stays unfused and why, and the converted cache (the skip where nvmath-python is missing is
tests/test_fp8_attention.py's, beside cuDNN's). The cuBLASLt path itself needs a GPU."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_vitperf.engines.quant.fp8_attention import E4M3_MAX
from pytest_vitperf.engines.quant.fp8_mlp import linear_gelu_fp8, unsupported
from pytest_vitperf.numerics import cosine
from tests.test_fp8_attention import computes_the_model_unlike_fp8, prepare_on_cpu


def _inputs(m: int, k: int, n: int, seed: int, bias: bool = True) -> tuple[tuple[Any, ...], torch.Tensor]:
    """x and w quantized at their amax as the recipe's quantizers do, a bias, the output's scale at the hidden
    activation's amax, and the float64 GELU(x·wᵀ + b) they stand for."""
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(m, k, generator=g, dtype=torch.float64), torch.randn(n, k, generator=g, dtype=torch.float64)
    b = torch.randn(n, generator=g, dtype=torch.float64) if bias else None
    sx, sw = x.abs().max() / E4M3_MAX, w.abs().max() / E4M3_MAX
    exact = torch.nn.functional.gelu(x @ w.t() + (b if b is not None else 0.0))
    scale_out = torch.tensor(E4M3_MAX / float(exact.abs().max()), dtype=torch.float32)
    x8, w8 = (x / sx).to(torch.float8_e4m3fn), (w / sw).to(torch.float8_e4m3fn)
    b16 = b.to(torch.float16) if b is not None else None
    return (x8, w8, sx.float(), sw.float(), b16, scale_out), exact


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 40), k=st.sampled_from([16, 32, 64]), n=st.sampled_from([16, 48]), seed=st.integers(0, 2**16),
       bias=st.booleans())  # fmt: skip
def test_the_op_is_gelu_of_the_gemm_within_what_fp8_allows(m: int, k: int, n: int, seed: int, bias: bool) -> None:
    """Against float64 GELU of the unquantized GEMM: E4M3 on x, w and the output keeps the cosine above 0.99."""
    args, exact = _inputs(m, k, n, seed, bias)
    out = linear_gelu_fp8(*args)
    assert out.dtype == torch.float8_e4m3fn and out.shape == (m, n) and out.is_contiguous()
    assert cosine(exact, out.double() / float(args[-1])) > 0.99


def test_the_epilogues_tanh_gelu_is_within_half_a_thousandth_of_timms_exact_one() -> None:
    """cuBLASLt's GELU is the tanh approximation; timm's MLP computes erf's. E4M3's step at 1 is 1/8."""
    y = torch.linspace(-8, 8, 100_001, dtype=torch.float64)
    gap = (torch.nn.functional.gelu(y) - torch.nn.functional.gelu(y, approximate="tanh")).abs().max()
    assert 1e-4 < float(gap) < 5e-4


def test_values_past_448_saturate() -> None:
    """An output scale too small for the activations gives 448, as cuBLASLt's saturating conversion does, not NaN."""
    args, _ = _inputs(4, 16, 16, seed=3)
    out = linear_gelu_fp8(*args[:-1], args[-1] * 1000).float()
    assert out.isfinite().all() and float(out.abs().max()) == E4M3_MAX


def test_a_shape_that_fp8_gemms_refuse_is_named_before_cublaslt_is_asked() -> None:
    """ViT-B's fc1 at batch 64 (64 x 197 tokens) is planned; at batch 1, its 197 tokens are the reason it skips."""
    assert unsupported(64 * 197, 3072, 768) is None
    assert unsupported(197, 3072, 768) == (
        "nvmath-python's FP8 matmul needs M, N and K divisible by 16, and M=197 is not"
    )
    assert (unsupported(197, 3072, 770) or "").endswith("and M=197 and K=770 are not")


def test_the_op_is_registered_for_compile_and_fake_tensors() -> None:
    args, _ = _inputs(8, 32, 16, seed=1)
    for check in ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic"):
        torch.library.opcheck(linear_gelu_fp8, args, test_utils=(check,))
    compiled = torch.compile(lambda *a: linear_gelu_fp8(*a).float(), fullgraph=True)
    assert torch.equal(compiled(*args), linear_gelu_fp8(*args).float())


def test_fp8_fused_runs_each_mlps_gelu_in_its_first_gemm_on_the_torch_backend() -> None:
    """Every block's MLP feeds fc2 straight from fc1's fused op at fc2's input scale. It computes what the
    model computes, and not exactly what fp8 (GELU in its own kernel, exact erf) does."""
    fused = computes_the_model_unlike_fp8("fp8-fused", "; GELU and fc2's quantize in fc1's GEMM in 12 MLPs (cuBLASLt)")
    mlps = [m for m in fused.model.modules() if type(m).__name__ == "Fp8GeluMlp"]
    assert len(mlps) == 12 and all(float(m.scale_out) == pytest.approx(1 / float(m.fc2.x_scale)) for m in mlps)


def test_a_converted_fused_model_is_restored_from_the_cache(tmp_path: Any) -> None:
    """The swap is structural: the converted cache records the fused MLPs and restores them bit for bit."""
    first = prepare_on_cpu("fp8-fused", cache_dir=tmp_path)
    again = prepare_on_cpu("fp8-fused", cache_dir=tmp_path)
    assert list((tmp_path / "converted").glob("fp8-fused-*.pt"))
    assert again.describe()["quantization"] == first.describe()["quantization"]
    assert torch.equal(again.output(), first.output())


def test_an_mlp_that_is_not_plain_gelu_stays_unfused() -> None:
    """A SiLU MLP (cuBLASLt's epilogue applies GELU) and one with a norm between GELU and fc2 stay as in fp8, and the
    summary says why."""
    from pytest_vitperf.engines.models.zoo import build_vit

    model = build_vit(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=2, num_classes=16,
                      act_layer=torch.nn.SiLU)  # fmt: skip
    summary = prepare_on_cpu("fp8-fused", model, "silu_vit").describe()["quantization"]
    assert "in fc1's GEMM" not in summary
    assert "blocks.0.mlp (MLP not fused: cuBLASLt's epilogue applies GELU, and its activation is SiLU)" in summary
    model = build_vit(img_size=32, patch_size=8, embed_dim=64, depth=1, num_heads=2, num_classes=16,
                      scale_mlp_norm=True)  # fmt: skip
    summary = prepare_on_cpu("fp8-fused", model, "mlp_norm_vit").describe()["quantization"]
    assert "blocks.0.mlp (MLP not fused: a LayerNorm sits between its activation and fc2)" in summary

