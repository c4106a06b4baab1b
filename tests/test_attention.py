"""Attention-shape rules on configs, modules and ONNX graphs."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import onnx
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from pytest_vitperf.attention import (
    RULES,
    AttentionBlock,
    AttentionShape,
    ViTConfig,
    assert_quantization_friendly,
    check_attention_shapes,
    judge,
    read_shape,
)
from pytest_vitperf.core.precision import PRECISIONS
from pytest_vitperf.engines.models.zoo import build_model, build_vit


def export(model: torch.nn.Module, size: int | tuple[int, int]) -> onnx.ModelProto:
    h, w = (size, size) if isinstance(size, int) else size
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, 3, h, w),), f, dynamo=False, opset_version=17)
    return onnx.load_from_string(f.getvalue())


def rules(violations: list) -> list[str]:
    return [v.rule for v in violations]


def seq_shape(seq: int, head: int = 64) -> AttentionShape:
    return AttentionShape("test", None, None, None, (AttentionBlock("blk", seq, head, 3),))


# Seed 001's tables.
MXFP8_SEQ = [64, 128, 192, 256, 320, 384, 512]
NVFP4_SEQ = [64, 128, 192, 208, 256, 320, 384, 512]


@pytest.mark.parametrize("seq", MXFP8_SEQ)
def test_valid_mxfp8_sequence_lengths(seq: int) -> None:
    assert judge(seq_shape(seq), "mxfp8") == []


@pytest.mark.parametrize("seq", NVFP4_SEQ)
def test_valid_nvfp4_sequence_lengths(seq: int) -> None:
    assert judge(seq_shape(seq), "nvfp4") == []


@pytest.mark.parametrize(("seq", "precision", "rest"), [(197, "nvfp4", 5), (197, "mxfp8", 5), (208, "mxfp8", 16)])
def test_invalid_sequence_lengths_report_the_remainder(seq: int, precision: str, rest: int) -> None:
    (v,) = judge(seq_shape(seq), precision)
    assert v.rule == "seq_len" and f"{seq} % " in v.observed and f"= {rest}" in v.observed


@pytest.mark.parametrize(
    ("precision", "head", "ok"),
    [
        *[("mxfp8", d, True) for d in (32, 64, 96, 128)],
        *[("nvfp4", d, True) for d in (16, 32, 48, 64, 80, 96, 128)],
        ("mxfp8", 48, False),
        ("mxfp8", 80, False),
        ("nvfp4", 40, False),
        ("fp8", 64, True),
        ("fp8", 72, False),  # TensorRT fuses FP8 MHA only with head_dim % 16 == 0
    ],
)
def test_head_dims(precision: str, head: int, ok: bool) -> None:
    assert (judge(seq_shape(256, head), precision) == []) is ok


@pytest.mark.parametrize(
    ("image", "patch", "class_token", "mxfp8_rules"),
    [
        (224, 16, True, ["seq_len", "class_token"]),  # 196 + 1 = 197
        (224, 16, False, ["seq_len"]),  # 196
        (256, 16, False, []),  # 256
        (256, 16, True, ["seq_len", "class_token"]),  # 257
        (384, 24, False, []),  # 256
        (230, 16, False, ["image_patch", "seq_len"]),  # 14 x 14 = 196, 6 px dropped
    ],
)
def test_image_patch_pairs(image: int, patch: int, class_token: bool, mxfp8_rules: list[str]) -> None:
    cfg = ViTConfig(image_size=image, patch_size=patch, class_token=class_token)
    assert rules(check_attention_shapes(cfg, "mxfp8")) == mxfp8_rules


def test_register_tokens_can_pad_the_sequence() -> None:
    # 196 patches + 1 class token + 11 registers = 208, a multiple of 16: passes NVFP4, not MXFP8.
    cfg = ViTConfig(image_size=224, patch_size=16, class_token=True, reg_tokens=11)
    assert check_attention_shapes(cfg, "nvfp4") == []
    assert rules(check_attention_shapes(cfg, "mxfp8")) == ["seq_len", "class_token"]
    assert "(224)" in check_attention_shapes(cfg, "mxfp8")[1].required  # the next valid length


def test_int8_fused_mha_stops_at_512() -> None:
    assert check_attention_shapes(ViTConfig(image_size=352, patch_size=16, class_token=False), "int8") == []
    (v,) = check_attention_shapes(ViTConfig(image_size=384, patch_size=16), "int8")
    assert v.rule == "int8_mha_seq" and "577" in v.observed


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16", "fp16-sparse24"])
def test_high_precision_needs_no_divisibility(precision: str) -> None:
    cfg = ViTConfig(image_size=230, patch_size=16, embed_dim=100, num_heads=3, reg_tokens=5)
    assert check_attention_shapes(cfg, precision) == []


def test_rules_name_known_root_precisions_once() -> None:
    roots = {p.root for p in PRECISIONS.values()}
    assert all(r.precisions <= roots for r in RULES)  # every rule names precisions that exist
    assert len({r.name for r in RULES}) == len(RULES)


def test_timm_vit_base_breaks_the_sequence_and_class_token_rules_for_nvfp4() -> None:
    cfg = ViTConfig(image_size=224, patch_size=16, embed_dim=768, num_heads=12, class_token=True)
    assert rules(check_attention_shapes(cfg, "nvfp4")) == ["seq_len", "class_token"]
    # The module and its export also show timm's 4D attention (scaled_dot_product_attention on [B, H, S, D]).
    model = build_model("vit_base")
    with pytest.raises(AssertionError) as info:
        assert_quantization_friendly(model, "nvfp4")
    lines = str(info.value).splitlines()
    assert lines[0] == "not quantization-friendly for nvfp4: 3 rule(s) broken"
    assert lines[1].startswith("  seq_len: sequence length 197 % 16 = 5; needs a multiple of 16 [at blocks.0.attn")
    assert lines[2].startswith("  attention_3d: attention tensors are 4D")
    assert lines[3].startswith("  class_token: 196 patches + 1 class/register token(s) = 197")
    assert all("-> fix: " in line for line in lines[1:])
    reasons = {v.rule: v.reason for v in check_attention_shapes(model, "nvfp4")}
    assert reasons["seq_len"] == "block quantization of the attention GEMMs runs in blocks of 16 along the sequence"
    assert "2D or 3D" in reasons["attention_3d"]


def test_quantization_friendly_vit_passes_everything() -> None:
    model = build_model("vit_qf_base")
    graph = export(model, 256)
    assert_quantization_friendly(model, "nvfp4")
    assert_quantization_friendly(graph, "mxfp8")
    shapes = [read_shape(model), read_shape(graph), read_shape(ViTConfig(256, 16, 768, 12, False))]
    for precision in PRECISIONS:
        for shape in shapes:
            assert judge(shape, precision) == [], (shape.where, precision)


def test_bmm_attention_computes_what_timm_attention_computes() -> None:
    cfg = {"img_size": 64, "patch_size": 16, "embed_dim": 96, "depth": 2, "num_heads": 3}
    ours, timms = build_vit(bmm=True, **cfg), build_vit(**cfg)
    timms.load_state_dict(ours.state_dict())
    x = torch.randn(2, 3, 64, 64)
    torch.testing.assert_close(ours(x), timms(x), rtol=1e-4, atol=1e-5)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    grid=st.integers(2, 20),
    patch=st.sampled_from([4, 8, 14, 16]),
    extra_px=st.sampled_from([0, 0, 0, 3]),
    heads=st.integers(1, 4),
    head_dim=st.sampled_from([8, 16, 24, 32, 40, 48, 64]),
    class_token=st.booleans(),
    reg_tokens=st.integers(0, 12),
    precision=st.sampled_from(["nvfp4", "mxfp8", "fp8", "int8"]),
)
def test_config_verdict_equals_exported_graph_verdict(
    grid: int,
    patch: int,
    extra_px: int,
    heads: int,
    head_dim: int,
    class_token: bool,
    reg_tokens: int,
    precision: str,
) -> None:
    image = grid * patch + extra_px
    cfg = ViTConfig(image, patch, heads * head_dim, heads, class_token, reg_tokens)
    model = build_vit(
        bmm=True,
        img_size=image,
        patch_size=patch,
        embed_dim=heads * head_dim,
        depth=1,
        num_heads=heads,
        mlp_ratio=1.0,
        class_token=class_token,
        reg_tokens=reg_tokens,
        global_pool="token" if class_token else "avg",
        num_classes=4,
    )
    from_config = check_attention_shapes(cfg, precision)
    from_graph = check_attention_shapes(export(model, image), precision)
    assert [(v.rule, v.observed) for v in from_config] == [(v.rule, v.observed) for v in from_graph]


# -- quantized graphs: Q/DQ on attention --------------------------------------------------------------
def attention_graph(quantize_attention: bool) -> onnx.ModelProto:
    """x -> Q/DQ -> MatMul(W) (a quantized Linear) -> q, k, v -> MatMul -> Softmax -> MatMul, in 3D."""
    s, d = 256, 64
    f = TensorProto.FLOAT
    scale = helper.make_tensor("scale", f, [], [0.1])
    zp = helper.make_tensor("zp", TensorProto.INT8, [], [0])
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "scale", "zp"], ["xdq"]),
        helper.make_node("MatMul", ["xdq", "w"], ["q"], name="linear"),
        helper.make_node("Transpose", ["q"], ["kt"], perm=[0, 2, 1]),
    ]
    a, b, attn_in, v = "q", "kt", "probs", "q"
    if quantize_attention:
        for name in ("q", "kt"):
            nodes += [
                helper.make_node("QuantizeLinear", [name, "scale", "zp"], [f"{name}_q"]),
                helper.make_node("DequantizeLinear", [f"{name}_q", "scale", "zp"], [f"{name}_dq"]),
            ]
        a, b, v = "q_dq", "kt_dq", "q_dq"
    nodes += [
        helper.make_node("MatMul", [a, b], ["scores"], name="attn_bmm1"),
        helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
    ]
    if quantize_attention:
        nodes += [
            helper.make_node("QuantizeLinear", ["probs", "scale", "zp"], ["probs_q"]),
            helper.make_node("DequantizeLinear", ["probs_q", "scale", "zp"], ["probs_dq"]),
        ]
        attn_in = "probs_dq"
    nodes.append(helper.make_node("MatMul", [attn_in, v], ["y"], name="attn_bmm2"))
    w = helper.make_tensor("w", f, [d, d], [0.0] * d * d)
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info("x", f, [12, s, d])],
        [helper.make_tensor_value_info("y", f, [12, s, d])],
        [scale, zp, w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("precision", ["nvfp4", "mxfp8", "fp8"])
def test_quantized_graph_with_fp16_attention_breaks_qdq_rule(precision: str) -> None:
    (v,) = check_attention_shapes(attention_graph(quantize_attention=False), precision)
    assert v.rule == "qdq_attention" and v.where == "attn_bmm1"
    assert check_attention_shapes(attention_graph(quantize_attention=True), precision) == []


# -- bad input -------------------------------------------------------------------------------------
def test_unknown_precision_is_refused_before_reading() -> None:
    with pytest.raises(ValueError, match="unknown precision 'fp4'; valid: fp32"):
        check_attention_shapes(Path("does-not-matter.onnx"), "fp4")


def test_model_without_attention() -> None:
    headless = build_vit(img_size=32, patch_size=16, embed_dim=32, depth=0, num_heads=2)
    with pytest.raises(ValueError, match="no attention found in VisionTransformer"):
        check_attention_shapes(headless, "nvfp4")
    with pytest.raises(ValueError, match="no attention found in ONNX graph"):
        check_attention_shapes(export(headless, 32), "nvfp4")
    with pytest.raises(ValueError, match="has no patch_embed"):
        check_attention_shapes(torch.nn.Linear(4, 4), "nvfp4")


def test_onnx_file_that_does_not_load(tmp_path: Path) -> None:
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(
        export(build_vit(img_size=32, patch_size=16, embed_dim=32, depth=1, num_heads=2), 32).SerializeToString()[:100]
    )
    with pytest.raises(ValueError, match=r"ONNX file .*truncated.onnx does not load"):
        check_attention_shapes(bad, "nvfp4")
    with pytest.raises(ValueError, match="does not exist"):
        check_attention_shapes(tmp_path / "missing.onnx", "nvfp4")


def test_other_targets_and_bad_configs() -> None:
    with pytest.raises(TypeError, match="cannot read attention shapes from a int"):
        check_attention_shapes(3, "nvfp4")
    with pytest.raises(ValueError, match="num_heads must be >= 1"):
        check_attention_shapes({"num_heads": 0}, "nvfp4")
    assert rules(check_attention_shapes({"image_size": 224, "patch_size": 16}, "nvfp4")) == ["seq_len", "class_token"]
