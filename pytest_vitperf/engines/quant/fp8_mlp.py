"""An MLP's first FP8 GEMM with its GELU and the second GEMM's input quantize in the GEMM's epilogue, for the torch
backend's fp8-fused: `torch.ops.vitperf.linear_gelu_fp8`, a torch custom op that runs cuBLASLt's FP8 GEMM with its
GELU_BIAS epilogue and an E4M3 output (nvmath-python's `Matmul`) on a GPU, and the same arithmetic in torch on a CPU.

What the op computes, for an E4M3 x [M, K] and an E4M3 weight [N, K], their dequantizing scales, a bias [N] and the
output's quantizing scale: E4M3 of gelu(x·wᵀ·sx·sw + bias)·scale_out, saturated at 448, [M, N] contiguous. fp8 does
this in two kernels: the GEMM writes FP16, and a GELU + quantize kernel reads it and writes E4M3 (0.876 of 4.78 ms
at batch 64 on an H200, 2026-11-28). cuBLASLt's GELU is the tanh approximation; timm's MLP uses the exact one. They
differ by under 0.0005 (tests/test_fp8_mlp.py), a hundredth of E4M3's step at the hidden activations' scale.

cuBLASLt adds a bias per row of its column-major output, so the op asks for the transposed product, wᵀ's [N, M] in
column-major order, which is [M, N] in row-major order: what the second GEMM takes.

This module imports torch when it is imported (quant_linears imports it, so that a ready engine that calls the op
loads). nvmath-python is imported at the first call on a GPU.
"""

from __future__ import annotations

from typing import Any

import torch

from pytest_vitperf.core.errors import NotBuilt
from pytest_vitperf.engines.quant.fp8_attention import not_installed, quantize_e4m3


def missing() -> str | None:
    """Why cuBLASLt's fused FP8 GEMM cannot be called here, or None: nvmath-python is not installed."""
    what = "fp8-fused runs each MLP's first GEMM, GELU and quantize as one cuBLASLt call"
    return not_installed("nvmath", "nvmath-python", "cublaslt", what)


def reference(
    x: torch.Tensor, w: torch.Tensor, scale_x: torch.Tensor, scale_w: torch.Tensor, bias: torch.Tensor | None,
    scale_out: torch.Tensor,
) -> torch.Tensor:  # fmt: skip
    """The op's arithmetic in torch, FP32 accumulation: the CPU path, and what the GPU path is checked against."""
    y = (x.float() @ w.float().t()) * (scale_x.float() * scale_w.float())
    if bias is not None:
        y = y + bias.float()
    return quantize_e4m3(torch.nn.functional.gelu(y, approximate="tanh"), scale_out.float()).contiguous()


@torch.library.custom_op("vitperf::linear_gelu_fp8", mutates_args=())
def linear_gelu_fp8(
    x: torch.Tensor, w: torch.Tensor, scale_x: torch.Tensor, scale_w: torch.Tensor, bias: torch.Tensor | None,
    scale_out: torch.Tensor,
) -> torch.Tensor:  # fmt: skip
    """The fused GEMM (the module's docstring says what it computes); CPU: `reference`."""
    return reference(x, w, scale_x, scale_w, bias, scale_out)


@linear_gelu_fp8.register_fake
def _(x: torch.Tensor, w: torch.Tensor, *rest: Any) -> torch.Tensor:
    return x.new_empty((x.shape[0], w.shape[0]), dtype=torch.float8_e4m3fn)


_PLANS: dict[tuple[Any, ...], Any] = {}  # planned nvmath Matmuls by device, shapes and strides


def unsupported(m: int, n: int, k: int) -> str | None:
    """Why nvmath-python's FP8 matmul refuses an [m, k] by [k, n] product, or None: it needs every dimension divisible
    by 16 (a ViT's tokens times its batch, 197 at batch 1, is not), where torch's `_scaled_mm` takes any M."""
    odd = [f"{name}={size}" for name, size in (("M", m), ("N", n), ("K", k)) if size % 16]
    verb = "is" if len(odd) == 1 else "are"
    why = f"nvmath-python's FP8 matmul needs M, N and K divisible by 16, and {' and '.join(odd)} {verb} not"
    return why if odd else None


@linear_gelu_fp8.register_kernel("cuda")
def _cuda(
    x: torch.Tensor, w: torch.Tensor, scale_x: torch.Tensor, scale_w: torch.Tensor, bias: torch.Tensor | None,
    scale_out: torch.Tensor,
) -> torch.Tensor:  # fmt: skip
    from nvmath import CudaDataType
    from nvmath.linalg.advanced import Matmul, MatmulEpilog

    stream = torch.cuda.current_stream(x.device)
    a, b = w, x.t()  # [N, K] row-major and [K, M] column-major, as cuBLASLt's FP8 GEMM wants them
    scales = {"a": scale_w, "b": scale_x, "d": scale_out}
    inputs = {"bias": bias} if bias is not None else None
    key = (x.device, tuple(x.shape), x.stride(), tuple(w.shape), w.stride(), bias is None)
    mm = _PLANS.get(key)
    if mm is None:  # planned on the first call, which the backend makes before anything compiles or captures
        (m, k), n = x.shape, w.shape[0]
        try:
            if why := unsupported(m, n, k):
                raise ValueError(why)
            mm = Matmul(a, b, quantization_scales=scales, options={"result_type": CudaDataType.CUDA_R_8F_E4M3},
                        stream=stream)  # fmt: skip
            mm.plan(epilog=MatmulEpilog.GELU_BIAS if bias is not None else MatmulEpilog.GELU, epilog_inputs=inputs,
                    stream=stream)  # fmt: skip
        except Exception as exc:  # nvmath's and cuBLASLt's errors alike: no such kernel here
            why = (str(exc) or type(exc).__name__).splitlines()[0]
            raise NotBuilt(f"cuBLASLt has no FP8 GEMM with a GELU epilogue that writes E4M3 for M={m} N={n} K={k} "
                           f"on {torch.cuda.get_device_name(x.device)} ({why}); measure the MLP's GELU in its own "
                           "kernel instead: --vitperf-precisions fp8") from None  # fmt: skip
        _PLANS[key] = mm
    else:
        mm.reset_operands(a=a, b=b, quantization_scales=scales, epilog_inputs=inputs, stream=stream)
    return mm.execute(stream=stream).t().contiguous()  # a no-op copy where the result came column-major
