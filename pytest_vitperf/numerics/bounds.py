"""Provable worst-case errors, and the error metrics the suites report.

Element rounding in the normal range: |y - Q(y)| <= |y| u / (1 + u) with u = 2^-(m+1) (1/5 for E2M1, 1/17 for
E4M3, 1/9 for E5M2); below the smallest normal, half the subnormal spacing; above MAX, the saturation |y| - MAX.
Block bounds (absolute, per element, as a multiple of the block's amax):

| format | bound |
|---|---|
| NVFP4, block scale normal (amax_block >= amax_tensor / 28672) | 3/17 amax_block |
| NVFP4, block scale subnormal but >= 2^-9 | 1/3 amax_block |
| NVFP4, smaller blocks (the scale floor flushes them) | amax_block |
| MXFP8 E4M3 rceil / floor | 1/17 / 1/8 amax_block |
| MXFP8 E5M2 rceil / floor | 1/9 / 1/8 amax_block |
| MXFP4 rceil / floor | 1/5 / 1/4 amax_block |
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from pytest_vitperf.numerics.formats import E2M1, F64, ElementFormat
from pytest_vitperf.numerics.nvfp4 import NVFP4Tensor

NVFP4_NORMAL_RATIO = 6 * 448 * 64 / 6  # amax_tensor / amax_block below which the E4M3 scale is subnormal


def element_error_bound(fmt: ElementFormat, y: npt.ArrayLike) -> F64:
    a = np.abs(np.asarray(y, dtype=np.float64))
    u = 2.0 ** -(fmt.mbits + 1)
    rel = a * u / (1 + u)
    out = np.where(a >= fmt.min_normal, rel, fmt.min_subnormal / 2)
    return np.where(a > fmt.max, a - fmt.max, out)


def scaled_error_bound(fmt: ElementFormat, x: npt.ArrayLike, scale: npt.ArrayLike) -> F64:
    """Bound on |x - scale * Q(x / scale)|. Saturation is computed in the units of x: x / scale - MAX would
    cancel and lose the bound's last digits."""
    x, scale = np.asarray(x, dtype=np.float64), np.asarray(scale, dtype=np.float64)
    y = x / scale
    return np.where(np.abs(y) > fmt.max, np.abs(x) - fmt.max * scale, scale * element_error_bound(fmt, y))


def nvfp4_block_bound(amax_block: npt.ArrayLike, amax_tensor: float) -> F64:
    """Worst-case |x - x'| for any element of a block, for the default variant (nearest, floor 2^-9)."""
    ab = np.asarray(amax_block, dtype=np.float64)
    normal = ab * NVFP4_NORMAL_RATIO >= amax_tensor
    sub = ab * NVFP4_NORMAL_RATIO * 8 >= amax_tensor  # s_b >= 2^-9: still a (subnormal) E4M3 value
    return np.where(normal, 3 / 17 * ab, np.where(sub, ab / 3, ab))


MX_BOUND = {
    ("e4m3fn", "rceil"): 1 / 17,
    ("e4m3fn", "floor"): 1 / 8,
    ("e5m2", "rceil"): 1 / 9,
    ("e5m2", "floor"): 1 / 8,
    ("e2m1", "rceil"): 1 / 5,
    ("e2m1", "floor"): 1 / 4,
}


def mx_block_bound(amax_block: npt.ArrayLike, element: ElementFormat, rule: str) -> F64:
    return MX_BOUND[(element.name, rule)] * np.asarray(amax_block, dtype=np.float64)


def nvfp4_element_bound(t: NVFP4Tensor, x: npt.ArrayLike) -> F64:
    """Per-element bound from the decoded scales in use: S * element_bound(E2M1, x / S)."""
    from pytest_vitperf.numerics.blocks import pad_blocks, unpad

    blocks = pad_blocks(np.asarray(x, dtype=np.float64), t.block)
    return unpad(scaled_error_bound(E2M1, blocks, t.scale_values()[..., None]), t.shape)


# -- metrics ----------------------------------------------------------------------------------------
def sqnr_db(x: npt.ArrayLike, xq: npt.ArrayLike) -> float:
    """Signal-to-quantization-noise ratio, 10 log10(sum x^2 / sum (x - x')^2); inf when exact."""
    x, xq = np.asarray(x, dtype=np.float64), np.asarray(xq, dtype=np.float64)
    noise = float(np.sum((x - xq) ** 2))
    return float("inf") if noise == 0 else float(10 * np.log10(np.sum(x**2) / noise))


def max_abs_error(x: npt.ArrayLike, xq: npt.ArrayLike) -> float:
    return float(np.max(np.abs(np.asarray(x, dtype=np.float64) - np.asarray(xq, dtype=np.float64))))


def relative_l2(x: npt.ArrayLike, xq: npt.ArrayLike) -> float:
    x, xq = np.asarray(x, dtype=np.float64), np.asarray(xq, dtype=np.float64)
    return float(np.linalg.norm(x - xq) / np.linalg.norm(x))


def cosine(x: npt.ArrayLike, xq: npt.ArrayLike) -> float:
    x, xq = np.asarray(x, dtype=np.float64).ravel(), np.asarray(xq, dtype=np.float64).ravel()
    return float(x @ xq / (np.linalg.norm(x) * np.linalg.norm(xq)))
