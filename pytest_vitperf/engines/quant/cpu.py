"""CPU kernels for Model Optimizer's dynamic block fake quantization (NVFP4, MXFP8).

Model Optimizer fake-quantizes the block formats with a Triton kernel (NVFP4 on sm_89+) or its CUDA extension
(MXFP8) and asserts that the tensors live on a GPU, so NVFP4/MXFP8 recipes could not calibrate or export on a
machine without one. `cpu_block_quant()` substitutes, for CPU tensors only, the same arithmetic written with the
project's reference element formats; CUDA tensors still go to Model Optimizer's kernels. The ONNX symbolic
(TRT_FP4DynamicQuantize, TRT_MXFP8DynamicQuantize) and the weight packing at export are Model Optimizer's own
and unchanged: only the calibration forward and the export trace run through these kernels.

What the GPU kernels compute, reproduced here in FP32:
- NVFP4 (Triton `fp4_fake_quant_block`): g = amax * FP32(1 / 2688); per block of 16,
  s = E4M3(min(amax_b / (6 g), 448)) * g, 1.0 where s < 1e-5; x' = sign(x) * E2M1(|x| / s) * s.
- MXFP8 (`tensor_quant_mx.cu`, E8M0 "NV" rule): per block of 32, X = 2^ceil(log2(FP32(amax_b / 448))), 1 for an
  all-zero block; x' = E4M3(x / X) * X.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_vitperf.numerics.formats import E2M1, E4M3

if TYPE_CHECKING:
    import torch

# torch computes `cuda_tensor / 2688.0` as a product with the FP32 reciprocal, one ulp off a true division
# for some amax; the Triton kernel's global scale is made that way.
_INV_2688 = float(np.float32(1.0) / np.float32(6.0 * 448.0))
NVFP4 = ((2, 1), (4, 3))  # (element (E, M), scale (E, M))
MXFP8 = ((4, 3), (8, 0))


def _round(fmt_round: Callable[[Any], Any], t: torch.Tensor) -> torch.Tensor:
    import torch

    # FP32 values are exact in float64, so the reference rounding gives the FP32 kernel's result.
    return torch.from_numpy(np.asarray(fmt_round(t.double().numpy()), dtype=np.float32))


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    if x.shape[-1] % block:
        raise ValueError(f"the last dimension ({x.shape[-1]}) is not a multiple of the block size {block}")
    return x.float().reshape(-1, x.shape[-1] // block, block)


def nvfp4_fake_quant(x: torch.Tensor, global_amax: torch.Tensor, block: int = 16) -> torch.Tensor:
    import torch

    b = _blocks(x, block)
    g = global_amax.float().reshape(()) * _INV_2688  # as torch divides a CUDA tensor by a Python float
    g = torch.where(g > 0, g, torch.tensor(1e-12))
    amax_b = b.abs().amax(dim=-1, keepdim=True)
    scale = _round(E4M3.round, torch.clamp(amax_b / (6.0 * g), max=448.0)) * g
    scale = torch.where(scale >= 1e-5, scale, torch.tensor(1.0))
    q = _round(E2M1.round, b.abs() / scale) * scale
    return torch.where(b >= 0, q, -q).reshape(x.shape).to(x.dtype)


def mxfp8_fake_quant(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    import torch

    b = _blocks(x, block)
    ratio = b.abs().amax(dim=-1, keepdim=True) / 448.0  # FP32, as the CUDA kernel divides
    mantissa, exponent = torch.frexp(ratio)  # ratio = m * 2^e, m in [0.5, 1)
    k = torch.where(mantissa == 0.5, exponent - 1, exponent).clamp(-127, 127)  # ceil(log2(ratio))
    unit = torch.where(ratio > 0, torch.ldexp(torch.ones_like(ratio), k), torch.ones_like(ratio))
    q = _round(E4M3.round, torch.clamp(b / unit, -448.0, 448.0)) * unit
    return q.reshape(x.shape).to(x.dtype)


def block_fake_quant(
    inputs: torch.Tensor,
    block_size: int,
    amax: torch.Tensor | None,
    num_bits: int,
    exponent_bits: int,
    scale_num_bits: int,
    scale_exponent_bits: int,
) -> torch.Tensor:
    """Model Optimizer's `dynamic_block_quantize_op` signature, for CPU tensors."""
    element = (exponent_bits, num_bits - exponent_bits - 1)
    fmt = (element, (scale_exponent_bits, scale_num_bits - scale_exponent_bits - 1))
    if fmt == NVFP4 and amax is not None:
        return nvfp4_fake_quant(inputs, amax, block_size)
    if fmt == MXFP8:
        return mxfp8_fake_quant(inputs, block_size)
    raise NotImplementedError(f"no CPU kernel for block format {fmt} (elements, scale as (E, M) bits)")


@contextlib.contextmanager
def cpu_block_quant() -> Iterator[None]:
    """Within the block, Model Optimizer's block fake quantization of CPU tensors runs on the CPU kernels."""
    from modelopt.torch.quantization import tensor_quant

    gpu_op = tensor_quant.dynamic_block_quantize_op

    def op(inputs: torch.Tensor, block_size: int, amax: torch.Tensor | None, *bits: int) -> torch.Tensor:
        if inputs.is_cuda:
            return gpu_op(inputs, block_size, amax, *bits)
        return block_fake_quant(inputs, block_size, amax, *bits)

    tensor_quant.dynamic_block_quantize_op = op
    try:
        yield
    finally:
        tensor_quant.dynamic_block_quantize_op = gpu_op
