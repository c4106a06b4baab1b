"""NVFP4 as Model Optimizer computes it: E2M1 elements in blocks of 16 along the last axis, an E4M3 scale per
block and an FP32 scale per tensor.

    g   = amax_tensor / (6 * 448)                     (FP32)
    s_b = amax_block / (6 * g), 1.0 if zero            (FP32, as Model Optimizer does it)
    e_b = E4M3(clamp(s_b, scale_min, 448))             round to nearest even, or up (variant)
    q   = E2M1(x / (e_b * g))                           float64 from the decoded scales
    x'  = q * e_b * g

g and s_b follow Model Optimizer's FP32 arithmetic, so block scales agree with it bit for bit; the element
division is exact float64 from the decoded scale, so an FP32 implementation can differ only where x / (e_b g)
lies within 2^-22 relative of an E2M1 tie.

Policies and variants:
- all-zero tensor: g = 1.0 (not 0), every block scale 1.0, every code 0: nothing divides by zero, no NaN.
  (Model Optimizer computes 0 / 0 there and stores NaN scale bytes.) The same holds when amax is so small
  (below 2688 * 2^-149, FP32 subnormal territory) that g underflows: the tensor flushes to zero.
- zero block in a non-zero tensor: s_b = 1.0, as Model Optimizer does.
- `scale_rounding="up"` rounds the block scale up (cuDNN's choice) so no element clips; the default "nearest"
  can clip the block's largest values by up to 1/17.
- `scale_min` clamps the block scale from below: 2^-9 (the smallest E4M3 subnormal, Model Optimizer) or
  2^-6 (the smallest normal, which keeps every scale normal at the cost of flushing tiny blocks).
- NaN or Inf input: ValueError (NVFP4 has no encoding for it).
- -0.0 encodes as code 8 (sign bit set); Model Optimizer writes code 0 for an exact -0.0. Both decode to 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_vitperf.numerics.blocks import (
    as_float64,
    block_amax,
    check_block,
    check_finite,
    pad_blocks,
    unpad,
)
from pytest_vitperf.numerics.formats import E2M1, E4M3, F64, U8, pack_fp4

BLOCK = 16
SCALE_MIN = 2.0**-9
_F32 = np.float32


@dataclass(frozen=True)
class NVFP4Tensor:
    codes: U8  # [..., padded_n]: one E2M1 code per element, the tail zero-padded to a whole block
    block_scales: U8  # [..., padded_n / block]: E4M3 codes
    global_scale: float  # the FP32 per-tensor scale g
    shape: tuple[int, ...]
    block: int = BLOCK

    def scale_values(self) -> F64:
        """Decoded per-block scale e_b * g."""
        return E4M3.decode(self.block_scales) * self.global_scale

    def dequantize(self) -> F64:
        q = E2M1.decode(self.codes).reshape(*self.codes.shape[:-1], -1, self.block)
        return unpad(q * self.scale_values()[..., None], self.shape)

    def packed(self) -> U8:
        return pack_fp4(self.codes)


def global_scale(amax: float) -> float:
    """FP32 amax / (6 * 448); 1.0 for an all-zero tensor, or one so small (amax < 2688 * 2^-149) that the
    FP32 division underflows to zero: such a tensor quantizes to all-zero codes."""
    g = _F32(amax) / _F32(6.0 * 448.0)
    return float(g) if g > 0 else 1.0


def quantize_nvfp4(
    x: Any,
    *,
    block: int = BLOCK,
    scale_rounding: str = "nearest",
    scale_min: float = SCALE_MIN,
    global_scale_value: float | None = None,
) -> NVFP4Tensor:
    """Quantize along the last axis. `global_scale_value` overrides g (a calibrated activation scale)."""
    arr = as_float64(x)
    block = check_block(block, even=True)
    check_finite(arr, "NVFP4")
    if scale_rounding not in ("nearest", "up"):
        raise ValueError(f"scale_rounding must be 'nearest' or 'up', got {scale_rounding!r}")
    if not 0 < scale_min <= E4M3.max:
        raise ValueError(f"scale_min must lie in (0, 448], got {scale_min!r}")
    blocks = pad_blocks(arr, block)
    g = global_scale(float(np.abs(arr).max())) if global_scale_value is None else float(global_scale_value)
    if not (np.isfinite(g) and g > 0):
        raise ValueError(f"global_scale_value must be a positive finite number, got {global_scale_value!r}")

    amax_b = block_amax(blocks).astype(_F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        s_b = amax_b / (_F32(6.0) * _F32(g))  # FP32, as Model Optimizer computes it
    s_b = np.where(s_b == 0, _F32(1.0), s_b).astype(np.float64)
    s_b = np.clip(s_b, scale_min, E4M3.max)
    e_b = E4M3.round(s_b)
    if scale_rounding == "up":
        e_b = np.where(e_b < s_b, E4M3.decode(E4M3.encode(e_b).astype(np.int64) + 1), e_b)
    scale = e_b * g  # exact: both factors are FP32 values
    codes = E2M1.encode(blocks / scale[..., None])
    return NVFP4Tensor(
        codes=codes.reshape(*codes.shape[:-2], -1),
        block_scales=E4M3.encode(e_b),
        global_scale=g,
        shape=tuple(arr.shape),
        block=block,
    )
