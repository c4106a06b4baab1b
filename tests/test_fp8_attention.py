"""fp8-attn on the torch backend: the FP8 attention op's arithmetic against a float64 reference, its registration
(what torch.compile and CUDA graphs rely on), the recipe's conversion, and the skips. cuDNN's kernel itself runs only
on a GPU (docs/measurements/2026-11-28-h200-fp8-attention-cudnn.md)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_vitperf.core.errors import NotBuilt
from pytest_vitperf.core.settings import Settings
from pytest_vitperf.engines.backends.torch import TorchBackend
from pytest_vitperf.engines.models.zoo import build_model
from pytest_vitperf.engines.quant import fp8_attention
from pytest_vitperf.engines.quant.fp8_attention import E4M3_MAX, sdpa_fp8
from pytest_vitperf.measure.env import Device
from pytest_vitperf.numerics import cosine


def _inputs(b: int, s: int, h: int, d: int, seed: int) -> tuple[Any, ...]:
    """Q (softmax scale applied), K, V quantized at their amax as the recipe's quantizers do, one [B, S, 3, H, D]
    tensor's views as the attention module passes them, and the float64 attention they stand for."""
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(b, s, 3, h, d, generator=g, dtype=torch.float64)
    qkv[:, :, 0] *= d**-0.5
    descale = qkv.abs().amax(dim=(0, 1, 3, 4)) / E4M3_MAX
    q, k, v = (qkv / descale.reshape(3, 1, 1)).to(torch.float8_e4m3fn).unbind(2)
    exact = torch.softmax(torch.einsum("bqhd,bkhd->bhqk", qkv[:, :, 0], qkv[:, :, 1]), -1)
    exact = torch.einsum("bhqk,bkhd->bqhd", exact, qkv[:, :, 2])
    scale_o = torch.tensor(E4M3_MAX / float(exact.abs().max()), dtype=torch.float32)
    descales = tuple(t.float() for t in descale.unbind())
    return (q, k, v, *descales, scale_o), exact


@settings(max_examples=12, deadline=None)
@given(b=st.integers(1, 3), s=st.integers(1, 80), h=st.integers(1, 4), d=st.sampled_from([16, 32, 64]),
       seed=st.integers(0, 2**16))  # fmt: skip
def test_the_op_is_attention_within_what_fp8_operands_allow(b: int, s: int, h: int, d: int, seed: int) -> None:
    """Against float64 attention of the unquantized operands: E4M3's 3 mantissa bits on Q, K, V, P and O keep the
    output's cosine above 0.99 (0.998 measured at ViT-B's shapes, on the H200's cuDNN kernel too)."""
    args, exact = _inputs(b, s, h, d, seed)
    out = sdpa_fp8(*args)
    assert out.dtype == torch.float8_e4m3fn and out.shape == (b, s, h, d) and out.is_contiguous()
    got = out.double() / float(args[-1])
    assert cosine(exact, got) > 0.99, cosine(exact, got)


def test_the_probabilities_are_quantized_to_e4m3() -> None:
    """P goes through E4M3 at 448 (its largest value, 1): a single key gets P = 1 exactly, and two keys whose scores
    differ by ln 3 get P = (1, 1/3), which E4M3 holds only as 149/448 or 150/448. The output, a mix of V's rows,
    shows which."""
    one = torch.tensor(1.0)
    v = torch.tensor([[[[448.0]]], [[[0.0]]]]).reshape(1, 2, 1, 1)  # V: key 0 is 1.0 (at descale 1/448), key 1 is 0
    q = torch.tensor([math.log(3.0)]).reshape(1, 1, 1, 1)
    k = torch.tensor([1.0, 0.0]).reshape(1, 2, 1, 1)
    out = sdpa_fp8(q.to(torch.float8_e4m3fn), k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn), one, one,
                   one / E4M3_MAX, one * E4M3_MAX)  # fmt: skip
    # exact: 1 / (1 + 1/3) = 0.75; the scores themselves are E4M3 (ln 3 -> 1.125), so P's second entry is e^-1.125
    p2 = math.exp(-float(torch.tensor(math.log(3.0)).to(torch.float8_e4m3fn)))
    expected = 1 / (1 + p2)
    assert float(out.float()) / E4M3_MAX == pytest.approx(expected, rel=1 / 16)  # O's own E4M3 rounding


def test_the_op_is_registered_for_compile_and_fake_tensors() -> None:
    """What torch.compile (fake tensors, AOT dispatch) needs of the op; CUDA graphs need only that it allocates no
    host memory, which its CUDA kernel's workspace (a torch allocation) keeps."""
    args, _ = _inputs(2, 17, 3, 32, seed=1)
    for check in ("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic"):
        torch.library.opcheck(sdpa_fp8, args, test_utils=(check,))
    compiled = torch.compile(lambda *a: sdpa_fp8(*a).float(), fullgraph=True)
    assert torch.equal(compiled(*args), sdpa_fp8(*args).float())


def small_vit() -> Any:
    """A ViT of 12 blocks as narrow and short as the recipes take (64 wide, 17 tokens): on a CPU, torch's FP8 GEMM
    took 1.85 s a call at vit_tiny's shapes (torch 2.14), and vit_tiny's 48 Linears 88 s a forward pass."""
    from pytest_vitperf.engines.models.zoo import build_vit

    return build_vit(img_size=64, patch_size=16, embed_dim=64, depth=12, num_heads=2, num_classes=16)


def prepare_on_cpu(precision: str, model: Any = None, name: str = "small_vit", **settings: Any) -> Any:
    """The torch backend's engine of `precision` for `model` (small_vit) on the CPU, batch 2."""
    return TorchBackend().prepare(model or small_vit(), model_name=name, precision=precision, batch=2,
                                  device=Device("test CPU"), settings=Settings(**settings))  # fmt: skip


def computes_the_model_unlike_fp8(precision: str, note: str) -> Any:
    """A 12-block ViT's engine of `precision` (small_vit), once its summary says `note`, its output is the FP32
    model's within 0.99 of cosine, and it is not exactly fp8's: a recipe variant that changed what runs, not what is
    computed."""
    fp32 = small_vit()
    fp8, engine = prepare_on_cpu("fp8"), prepare_on_cpu(precision)
    assert note in engine.describe()["quantization"]
    with torch.no_grad():
        reference = fp32(engine.inputs.float())
    out = engine.output()
    assert cosine(reference, out) > 0.99
    assert not torch.equal(out, fp8.output())
    return engine


def test_fp8_attn_runs_attention_in_fp8_on_the_torch_backend() -> None:
    """Every block's attention takes E4M3 Q, K, V with Model Optimizer's calibrated scales, and feeds the
    output projection in E4M3. It computes what the model computes, and not what fp8 (attention in FP16) does."""
    attn = computes_the_model_unlike_fp8("fp8-attn", "; attention in FP8 in 12 blocks (cuDNN)")
    blocks = [m for m in attn.model.modules() if type(m).__name__ == "Fp8Attention"]
    assert len(blocks) == 12 and all(float(b.descale_q) > 0 and float(b.scale_o) > 0 for b in blocks)


def test_an_attention_with_norms_between_stays_in_fp16() -> None:
    """timm's q/k norms sit between qkv and the product: FP8 attention would skip them, so that block is kept."""
    from pytest_vitperf.engines.models.zoo import build_vit

    model = build_vit(img_size=32, patch_size=8, embed_dim=64, depth=1, num_heads=2, num_classes=16, qk_norm=True)
    summary = prepare_on_cpu("fp8-attn", model, "qk_norm_vit").describe()["quantization"]
    assert "attention in FP8" not in summary
    assert "blocks.0.attn (attention kept in FP16: FP8 attention takes Q, K and V straight from qkv; it has " \
           "q_norm, k_norm)" in summary  # fmt: skip


@pytest.mark.parametrize(
    ("precision", "module", "says"),
    [
        ("fp8-attn", "cudnn", r"nvidia-cudnn-frontend, which is not installed; .*pytest-vitperf\[cudnn\]'$"),
        ("fp8-fused", "nvmath", r"nvmath-python, which is not installed; .*pytest-vitperf\[cublaslt\]'$"),
    ],
)
def test_a_gpu_without_the_extra_skips_its_precision_with_the_install_line(
    monkeypatch: pytest.MonkeyPatch, precision: str, module: str, says: str
) -> None:
    """cuDNN's frontend and nvmath-python are extras: where one is missing, its precision is skipped (NotBuilt)
    before anything is calibrated."""
    import importlib.util

    from pytest_vitperf.engines.quant import fp8_mlp

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    h100 = Device("NVIDIA H100 80GB HBM3", sm=90)
    with pytest.raises(NotBuilt, match=says):
        TorchBackend().prepare(build_model("vit_tiny"), model_name="vit_tiny_patch16_224", precision=precision,
                               batch=1, device=h100, settings=Settings())  # fmt: skip
    assert (fp8_attention if module == "cudnn" else fp8_mlp).missing() is not None
