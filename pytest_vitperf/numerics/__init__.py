"""Reference quantizers for the low-precision formats, exact in float64, to hold the libraries against.

Element formats (formats.py), NVFP4 (nvfp4.py), MXFP8 / MXFP4 (mx.py), per-tensor FP8 (per_tensor.py),
error bounds and metrics (bounds.py), and the NVFP4 GEMM check (gemm.py). Definitions and bounds follow
docs/numerics.md.
"""

from pytest_vitperf.numerics.bounds import cosine, max_abs_error, relative_l2, sqnr_db
from pytest_vitperf.numerics.formats import E2M1, E4M3, E5M2, pack_fp4, unpack_fp4
from pytest_vitperf.numerics.gemm import assert_nvfp4_gemm, check_gemm, check_nvfp4_gemm
from pytest_vitperf.numerics.mx import MXTensor, quantize_mx
from pytest_vitperf.numerics.nvfp4 import NVFP4Tensor, quantize_nvfp4
from pytest_vitperf.numerics.per_tensor import PerTensor, quantize_fp8, quantize_per_tensor

__all__ = [
    "E2M1",
    "E4M3",
    "E5M2",
    "MXTensor",
    "NVFP4Tensor",
    "PerTensor",
    "assert_nvfp4_gemm",
    "check_gemm",
    "check_nvfp4_gemm",
    "cosine",
    "max_abs_error",
    "pack_fp4",
    "quantize_fp8",
    "quantize_mx",
    "quantize_nvfp4",
    "quantize_per_tensor",
    "relative_l2",
    "sqnr_db",
    "unpack_fp4",
]
