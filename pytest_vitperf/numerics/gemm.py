"""The NVFP4 GEMM check: a kernel's product of two NVFP4 operands against the matmul of their dequantized
values, with a derived bound on the output error.

For out = A' B'^T computed with FP32 accumulation (A', B' the dequantized operands, both blocked along K),
the standard forward error bound is |out - A' B'^T| <= gamma_K |A'| |B'|^T + u |A' B'^T|, with
u = 2^-24 and gamma_K = K u / (1 - K u). The reference is computed in float64, whose own error is far below it.

Against the unquantized product, |A B^T - A' B'^T| <= |A - A'| |B|^T + |A'| |B - B'|^T, elementwise, and
per-element quantization bounds give |A - A'| and |B - B'|.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_vitperf.numerics.formats import F64
from pytest_vitperf.numerics.nvfp4 import NVFP4Tensor

FP32_UNIT_ROUNDOFF = 2.0**-24


@dataclass(frozen=True)
class GemmCheck:
    max_error: float
    max_bound: float
    worst_index: tuple[int, ...]
    violations: int  # elements whose error exceeds their bound

    @property
    def ok(self) -> bool:
        return self.violations == 0


def accumulation_bound(a: F64, b: F64, unit_roundoff: float = FP32_UNIT_ROUNDOFF) -> F64:
    k = a.shape[-1]
    gamma = k * unit_roundoff / (1 - k * unit_roundoff)
    return gamma * (np.abs(a) @ np.abs(b).T) + unit_roundoff * np.abs(a @ b.T)


def check_nvfp4_gemm(
    a: NVFP4Tensor, b: NVFP4Tensor, out: npt.ArrayLike, *, unit_roundoff: float = FP32_UNIT_ROUNDOFF
) -> GemmCheck:
    """Hold `out` ([M, N], from any kernel) against A' B'^T for A [M, K] and B [N, K] quantized along K."""
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must be [M, K] and [N, K] with the same K, got {a.shape} and {b.shape}")
    out_arr = np.asarray(out, dtype=np.float64)
    if out_arr.shape != (a.shape[0], b.shape[0]):
        raise ValueError(f"out must be [{a.shape[0]}, {b.shape[0]}], got {list(out_arr.shape)}")
    da, db = a.dequantize(), b.dequantize()
    err = np.abs(out_arr - da @ db.T)
    bound = accumulation_bound(da, db, unit_roundoff)
    err = np.where(np.isfinite(out_arr), err, np.inf)
    worst = np.unravel_index(int(np.argmax(err - bound)), err.shape)
    return GemmCheck(float(err.max()), float(bound.max()), tuple(int(i) for i in worst), int((err > bound).sum()))


def assert_nvfp4_gemm(a: NVFP4Tensor, b: NVFP4Tensor, out: Any) -> GemmCheck:
    __tracebackhide__ = True
    check = check_nvfp4_gemm(a, b, out)
    if not check.ok:
        raise AssertionError(
            f"NVFP4 GEMM output exceeds the FP32-accumulation bound at {check.violations} element(s); "
            f"worst at {check.worst_index}: max error {check.max_error:.3g}, max bound {check.max_bound:.3g}"
        )
    return check


def quantization_output_bound(a: F64, b: F64, a_err: F64, b_err: F64, da: F64) -> F64:
    """Bound on |A B^T - A' B'^T| from elementwise bounds |A - A'| <= a_err and |B - B'| <= b_err."""
    return a_err @ np.abs(b).T + np.abs(da) @ b_err.T
