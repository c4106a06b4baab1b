"""The CPU kernels for Model Optimizer's block fake quantization: against the reference quantizers, against
the provable error bounds, and (on a CUDA machine) bit for bit against Model Optimizer's own GPU kernels."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytest_vitperf.engines.quant.cpu import block_fake_quant, cpu_block_quant, mxfp8_fake_quant, nvfp4_fake_quant
from pytest_vitperf.numerics.bounds import mx_block_bound, nvfp4_block_bound
from pytest_vitperf.numerics.formats import E4M3
from pytest_vitperf.numerics.mx import quantize_mx
from pytest_vitperf.numerics.nvfp4 import quantize_nvfp4

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    tensor_quant = pytest.importorskip("modelopt.torch.quantization.tensor_quant")


def samples() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    outlier = rng.standard_normal((16, 64)).astype(np.float32)
    outlier[3, 5] = 2000.0
    return {
        "gaussian": rng.standard_normal((64, 256)).astype(np.float32),
        "activations": (rng.standard_normal((2, 197, 192)) * 3).astype(np.float32),
        "outlier": outlier,
        "heavy-tail": rng.standard_t(2, (8, 512)).astype(np.float32),
    }


def amax(x: np.ndarray) -> torch.Tensor:
    return torch.tensor(float(np.abs(x).max()))


@pytest.mark.parametrize("name", list(samples()))
def test_nvfp4_kernel_matches_the_reference_quantizer(name: str) -> None:
    """Same codes and scales as the float64 reference given the kernel's global scale (amax times the FP32
    reciprocal of 2688, one ulp off amax / 2688 for some amax, as on the GPU); the kernel multiplies back in
    FP32, so values agree to FP32 rounding of e_b * g."""
    x = samples()[name]
    g = float(np.float32(np.abs(x).max()) * (np.float32(1) / np.float32(2688)))
    got = nvfp4_fake_quant(torch.from_numpy(x), amax(x)).numpy()
    np.testing.assert_allclose(got, quantize_nvfp4(x, global_scale_value=g).dequantize(), rtol=2**-23, atol=0)


@pytest.mark.parametrize("name", list(samples()))
def test_mxfp8_kernel_matches_the_reference_quantizer(name: str) -> None:
    x = samples()[name]
    got = mxfp8_fake_quant(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(got, quantize_mx(x, "e4m3", scale_rule="rceil").dequantize())


def test_nvfp4_blocks_with_a_scale_below_1e_5_flush_to_zero() -> None:
    """As Model Optimizer's Triton kernel does: a block whose decoded scale e_b * g is under 1e-5 (block amax
    under about 6e-5) becomes all zero, where the reference quantizer keeps a 2^-9 scale floor."""
    x = np.ones((1, 32), np.float32)
    x[0, 16:] = 5e-5
    got = nvfp4_fake_quant(torch.from_numpy(x), amax(x)).numpy()
    assert (got[0, :16] == 1.0).all() and (got[0, 16:] == 0).all()
    assert (quantize_nvfp4(x).dequantize()[0, 16:] != 0).all()


finite = st.floats(-1e4, 1e4, width=32, allow_subnormal=False)


@given(hnp.arrays(np.float32, st.tuples(st.integers(1, 4), st.sampled_from([16, 32, 64])), elements=finite))
def test_nvfp4_kernel_error_is_within_the_block_bound(x: np.ndarray) -> None:
    """The reference's bound, except that a flushed block (amax under about 6e-5) loses all of it."""
    got = nvfp4_fake_quant(torch.from_numpy(x), amax(x)).numpy().astype(np.float64)
    amax_b = np.abs(x.astype(np.float64)).reshape(x.shape[0], -1, 16).max(axis=-1)
    bound = np.where(amax_b < 1e-4, amax_b, nvfp4_block_bound(amax_b, float(np.abs(x).max())))
    bound = np.repeat(bound, 16, axis=-1)
    assert (np.abs(got - x) <= bound * (1 + 2**-20)).all()


@given(hnp.arrays(np.float32, st.tuples(st.integers(1, 4), st.sampled_from([32, 64])), elements=finite))
def test_mxfp8_kernel_error_is_within_the_block_bound(x: np.ndarray) -> None:
    got = mxfp8_fake_quant(torch.from_numpy(x)).numpy().astype(np.float64)
    amax_b = np.abs(x.astype(np.float64)).reshape(x.shape[0], -1, 32).max(axis=-1)
    bound = np.repeat(mx_block_bound(amax_b, E4M3, "rceil"), 32, axis=-1)
    assert (np.abs(got - x) <= bound).all()


def test_other_formats_and_ragged_blocks_are_refused() -> None:
    x = torch.ones(4, 32)
    with pytest.raises(NotImplementedError, match=r"no CPU kernel for block format \(\(2, 1\), \(8, 0\)\)"):
        block_fake_quant(x, 32, None, 4, 2, 9, 8)  # MXFP4
    with pytest.raises(ValueError, match="last dimension \\(24\\) is not a multiple of the block size 16"):
        nvfp4_fake_quant(torch.ones(2, 24), torch.tensor(1.0))


def test_the_context_substitutes_the_op_and_restores_it_on_error() -> None:
    original = tensor_quant.dynamic_block_quantize_op
    with pytest.raises(RuntimeError, match="boom"), cpu_block_quant():
        assert tensor_quant.dynamic_block_quantize_op is not original
        x = torch.from_numpy(samples()["gaussian"])
        out = tensor_quant.dynamic_block_quantize_op(x, 16, amax(x.numpy()), 4, 2, 8, 4)
        assert torch.equal(out, nvfp4_fake_quant(x, amax(x.numpy())))
        raise RuntimeError("boom")
    assert tensor_quant.dynamic_block_quantize_op is original


@pytest.mark.skipif(not torch.cuda.is_available(), reason="compares with Model Optimizer's GPU kernels: needs CUDA")
@pytest.mark.parametrize("name", list(samples()))
def test_cpu_kernels_agree_bitwise_with_model_optimizers_gpu_kernels(name: str) -> None:
    x = samples()[name]
    x[0, :16] = 5e-5  # a flushed NVFP4 block
    x[1, :32] = 0  # an all-zero block
    cpu, gpu = torch.from_numpy(x), torch.from_numpy(x).cuda()
    nvfp4 = tensor_quant.dynamic_block_quantize_op(gpu, 16, amax(x).cuda(), 4, 2, 8, 4).cpu()
    assert torch.equal(nvfp4_fake_quant(cpu, amax(x)), nvfp4)
    mxfp8 = tensor_quant.dynamic_block_quantize_op(gpu, 32, None, 8, 4, 9, 8).cpu()
    assert torch.equal(mxfp8_fake_quant(cpu), mxfp8)
