"""Per-tensor scaled formats: FP8 E4M3 as TensorRT's Q/DQ computes it, and E2M1 per tensor (a reference point).

    s  = amax / max_elem            (FP32; 448 for E4M3)
    q  = E(clip(x / s, -max, max))
    x' = q * s

Policies: an all-zero tensor gets s = 1.0; NaN or Inf input is a ValueError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_vitperf.numerics.blocks import as_float64, check_finite
from pytest_vitperf.numerics.formats import F64, U8, ElementFormat, element_format


@dataclass(frozen=True)
class PerTensor:
    codes: U8
    scale: float
    element: ElementFormat

    def dequantize(self) -> F64:
        return self.element.decode(self.codes) * self.scale


def quantize_per_tensor(x: Any, element: str = "e4m3") -> PerTensor:
    fmt = element_format(element)
    arr = as_float64(x)
    check_finite(arr, f"{fmt.name} per tensor")
    amax = float(np.abs(arr).max()) if arr.size else 0.0
    scale = float(np.float32(amax) / np.float32(fmt.max)) if amax > 0 else 1.0
    return PerTensor(fmt.encode(np.clip(arr / scale, -fmt.max, fmt.max)), scale, fmt)


def quantize_fp8(x: Any) -> PerTensor:
    """FP8 E4M3 per tensor, scale = amax / 448."""
    return quantize_per_tensor(x, "e4m3")
