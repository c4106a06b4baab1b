"""OCP Microscaling formats: MXFP8 (E4M3 or E5M2 elements) and MXFP4 (E2M1), blocks of 32 along the last axis
sharing one E8M0 power-of-two scale X.

Scale rules:
- "rceil" (NVIDIA: cuBLAS, TransformerEngine, Model Optimizer): X = 2^ceil(log2(amax / max_elem)), the
  smallest power of two with amax <= X * max_elem; nothing clips.
- "floor" (OCP): X = 2^(floor(log2 amax) - emax_elem); the block's top values may clip.
The exponent is exact (integer arithmetic on frexp), clamped to E8M0's [-127, 127].

Policies: an all-zero block gets exponent -127 (code 0), as Model Optimizer does; a block holding NaN or Inf
gets the NaN scale 0xFF and decodes to NaN (OCP); finite input never yields 0xFF.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_vitperf.numerics.blocks import as_float64, block_amax, check_block, pad_blocks, unpad
from pytest_vitperf.numerics.formats import (
    E8M0_NAN,
    F64,
    U8,
    ElementFormat,
    e8m0_decode,
    e8m0_encode_exponent,
    element_format,
)

BLOCK = 32
RULES = ("rceil", "floor")


@dataclass(frozen=True)
class MXTensor:
    codes: U8  # [..., padded_n]
    scales: U8  # [..., padded_n / block]: E8M0 codes
    shape: tuple[int, ...]
    element: ElementFormat
    block: int = BLOCK

    def scale_values(self) -> F64:
        return e8m0_decode(self.scales)

    def dequantize(self) -> F64:
        q = self.element.decode(self.codes).reshape(*self.codes.shape[:-1], -1, self.block)
        return unpad(q * self.scale_values()[..., None], self.shape)


def scale_exponent(amax: F64, element: ElementFormat, rule: str) -> np.ndarray:
    """Integer exponent k of X = 2^k for each block amax (> 0)."""
    _, e = np.frexp(amax)  # amax = f * 2^e, f in [0.5, 1)
    if rule == "floor":
        return (e - 1) - element.emax
    # rceil: smallest k with amax <= 2^k * max_elem; start from an estimate and correct it exactly.
    k = np.ceil(np.log2(amax / element.max)).astype(np.int64)
    k = np.where(np.ldexp(element.max, k - 1) >= amax, k - 1, k)
    return np.where(np.ldexp(element.max, k) < amax, k + 1, k)


def quantize_mx(x: Any, element: str = "e4m3", *, block: int = BLOCK, scale_rule: str = "rceil") -> MXTensor:
    fmt = element_format(element)
    if scale_rule not in RULES:
        raise ValueError(f"scale_rule must be one of {', '.join(RULES)}, got {scale_rule!r}")
    arr = as_float64(x)
    block = check_block(block, even=fmt.name == "e2m1")
    blocks = pad_blocks(arr, block)
    bad = np.asarray(~np.isfinite(blocks).all(axis=-1))
    amax = np.where(bad, 1.0, block_amax(np.where(np.isfinite(blocks), blocks, 0.0)))
    positive = amax > 0
    k = np.where(positive, scale_exponent(np.where(positive, amax, 1.0), fmt, scale_rule), -127)
    scales = e8m0_encode_exponent(k)
    x_scaled = np.ldexp(np.where(bad[..., None], 0.0, blocks), -np.clip(k, -127, 127)[..., None])
    codes = fmt.encode(x_scaled)
    scales = np.where(bad, E8M0_NAN, scales).astype(np.uint8)
    return MXTensor(codes.reshape(*codes.shape[:-2], -1), scales, tuple(arr.shape), fmt, block)
