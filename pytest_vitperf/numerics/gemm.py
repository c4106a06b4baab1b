"""The GEMM check: a kernel's product of two quantized operands (NVFP4, FP8, or plain FP16/BF16) against the
matmul of their dequantized values, with a derived bound on the output error.

For out = A' B'^T computed with FP32 accumulation (A', B' the dequantized operands, both blocked along K),
the standard forward error bound is |out - A' B'^T| <= gamma_K |A'| |B'|^T + u |A' B'^T|, with
u = 2^-24 and gamma_K = K u / (1 - K u). The reference is computed in float64, whose own error is far below it.

Against the unquantized product, |A B^T - A' B'^T| <= |A - A'| |B|^T + |A'| |B - B'|^T, elementwise, and
per-element quantization bounds give |A - A'| and |B - B'|.

An output stored in a narrower type (BF16, FP16) is one more rounding of the FP32 result y: |fl(y) - y| <= u_out |y|
<= u_out (|A' B'^T| + the accumulation bound). A scaled GEMM multiplies y by the two FP32 scales in its epilogue:
a few more FP32 roundings, covered by adding 3 u to u_out.
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
    return check_gemm(a.dequantize(), b.dequantize(), out, unit_roundoff=unit_roundoff)


def check_gemm(
    da: npt.ArrayLike,
    db: npt.ArrayLike,
    out: npt.ArrayLike,
    *,
    unit_roundoff: float = FP32_UNIT_ROUNDOFF,
    output_roundoff: float = 0.0,
) -> GemmCheck:
    """Hold `out` ([M, N]) against da db^T, da [M, K] and db [N, K] being the dequantized operands exactly as the
    kernel read them. `output_roundoff` is the unit roundoff of the type `out` was stored in, if narrower than FP32
    (2^-8 for BF16), plus the epilogue's roundings for a scaled GEMM."""
    da, db = np.asarray(da, dtype=np.float64), np.asarray(db, dtype=np.float64)
    if da.ndim != 2 or db.ndim != 2 or da.shape[1] != db.shape[1]:
        raise ValueError(f"operands must be [M, K] and [N, K] with the same K, got {da.shape} and {db.shape}")
    out_arr = np.asarray(out, dtype=np.float64)
    if out_arr.shape != (da.shape[0], db.shape[0]):
        raise ValueError(f"out must be [{da.shape[0]}, {db.shape[0]}], got {list(out_arr.shape)}")
    ref = da @ db.T
    err = np.abs(out_arr - ref)
    bound = accumulation_bound(da, db, unit_roundoff)
    bound = bound + output_roundoff * (np.abs(ref) + bound)
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
