"""Attention-shape rules: can TensorRT quantize this ViT's attention at a given precision?

The rules come from field measurements: block-scaled formats (MXFP8 blocks of 32, NVFP4 blocks of 16) need
the sequence and head dimension to be multiples of the block, attention tensors in 3D, and no stray class
token (224 px / patch 16 gives 196 + 1 = 197 tokens); TensorRT fuses FP8 MHA only with head_dim % 16 == 0
and Q/DQ before both batched matmuls and after the softmax; its INT8 fused MHA takes sequences up to 512.

A target is read into one `AttentionShape` by its reader (shape.py for a config, module_reader.py for a torch
module, onnx_reader.py for an ONNX graph), and the rules (rules.py, one object each) judge that.
`check_attention_shapes` returns the violations; `assert_quantization_friendly` fails a test with one line per
violation.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_vitperf.attention.rules import INT8_MHA_MAX_SEQ, RULES, Rule, Violation, judge, rules_for
from pytest_vitperf.attention.shape import AttentionBlock, AttentionShape, ViTConfig
from pytest_vitperf.core.precision import get_precision

__all__ = [
    "INT8_MHA_MAX_SEQ",
    "RULES",
    "AttentionBlock",
    "AttentionShape",
    "Rule",
    "ViTConfig",
    "Violation",
    "assert_quantization_friendly",
    "check_attention_shapes",
    "judge",
    "read_shape",
    "rules_for",
]


def read_shape(target: Any) -> AttentionShape:
    """A ViTConfig or a mapping of its fields, a torch module, an `onnx.ModelProto` or an ONNX file path."""
    if isinstance(target, ViTConfig):
        return target.shape()
    if isinstance(target, Mapping):
        return ViTConfig(**target).shape()
    from pytest_vitperf.attention.module_reader import module_shape
    from pytest_vitperf.attention.onnx_reader import onnx_shape
    from pytest_vitperf.engines.onnx.graph import load

    if isinstance(target, (str, Path)):
        return onnx_shape(load(Path(target)))
    mod = type(target).__module__
    if mod.startswith("onnx"):
        return onnx_shape(target)
    if mod.startswith(("torch", "timm")) or hasattr(target, "named_modules"):
        return module_shape(target)
    raise TypeError(
        f"cannot read attention shapes from a {type(target).__name__}; "
        "expected a ViTConfig, a mapping, a torch module, an onnx.ModelProto or an ONNX file path"
    )


def check_attention_shapes(target: Any, precision: str) -> list[Violation]:
    """Violations of the attention-shape rules for `precision`; `target` as for `read_shape`."""
    get_precision(precision)  # unknown precision: ValueError naming the valid ones, before any work
    return judge(read_shape(target), precision)


def assert_quantization_friendly(target: Any, precision: str) -> None:
    """Fail with one line per violated rule."""
    __tracebackhide__ = True
    violations = check_attention_shapes(target, precision)
    if violations:
        lines = "\n".join(f"  {v}" for v in violations)
        raise AssertionError(f"not quantization-friendly for {precision}: {len(violations)} rule(s) broken\n{lines}")
