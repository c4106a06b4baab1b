"""NVFP4, MX and per-tensor FP8: properties, bounds, policies, bad input, and known bugs elsewhere."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytest_vitperf.numerics.blocks import pad_blocks
from pytest_vitperf.numerics.bounds import (
    NVFP4_NORMAL_RATIO,
    cosine,
    max_abs_error,
    mx_block_bound,
    nvfp4_block_bound,
    nvfp4_element_bound,
    relative_l2,
    scaled_error_bound,
    sqnr_db,
)
from pytest_vitperf.numerics.formats import E2M1, E4M3, E8M0_NAN, element_format
from pytest_vitperf.numerics.gemm import assert_nvfp4_gemm, check_nvfp4_gemm, quantization_output_bound
from pytest_vitperf.numerics.mx import quantize_mx
from pytest_vitperf.numerics.nvfp4 import global_scale, quantize_nvfp4
from pytest_vitperf.numerics.per_tensor import quantize_fp8, quantize_per_tensor

# Values and row scales keep amax above 2688 * 2^-149, below which NVFP4's FP32 global scale underflows and
# the tensor flushes to zero (the documented policy, tested on its own).
finite32 = st.one_of(st.just(0.0), st.floats(2.0**-100, 3e4, width=32), st.floats(-3e4, -(2.0**-100), width=32))


@st.composite
def tensors(draw, max_rows: int = 4, max_cols: int = 80, zero_blocks: bool = True):
    """float32 2D arrays with mixed magnitudes per row, ragged lengths and some all-zero blocks."""
    rows, cols = draw(st.integers(1, max_rows)), draw(st.integers(1, max_cols))
    x = draw(hnp.arrays(np.float32, (rows, cols), elements=finite32))
    scale = draw(hnp.arrays(np.float32, (rows, 1), elements=st.sampled_from([1e-6, 1e-3, 1.0, 1e3])))
    x = (x * scale).astype(np.float32)
    if zero_blocks and draw(st.booleans()):
        x[:, :16] = 0
    return x


def blockwise(x: np.ndarray, block: int) -> np.ndarray:
    return np.abs(pad_blocks(x.astype(np.float64), block)).max(axis=-1)


# -- NVFP4 --------------------------------------------------------------------------------------------
@given(tensors())
def test_nvfp4_error_bounds(x: np.ndarray) -> None:
    t = quantize_nvfp4(x)
    err = np.abs(x - t.dequantize())
    assert np.all(err <= nvfp4_element_bound(t, x) * (1 + 1e-12))
    amax_b = blockwise(x, 16)
    bound = nvfp4_block_bound(amax_b, float(np.abs(x).max()))
    err_b = pad_blocks(err, 16).max(axis=-1)
    assert np.all(err_b <= bound * (1 + 1e-12))


@given(tensors())
def test_nvfp4_idempotent_on_normal_scale_blocks(x: np.ndarray) -> None:
    amax = float(np.abs(x).max())
    amax_b = blockwise(x, 16)
    assume(np.all((amax_b == 0) | (amax_b * NVFP4_NORMAL_RATIO >= amax)))
    once = quantize_nvfp4(x).dequantize()
    twice = quantize_nvfp4(once).dequantize()
    np.testing.assert_array_equal(once, twice)


def test_nvfp4_not_idempotent_with_a_subnormal_block_scale() -> None:
    """The documented exception. A normal E4M3 scale is within 1/17 of s_b, so the block's largest element
    lands in (5, 6.4] and rounds to 6: re-quantizing finds the same scale. A subnormal scale can be a third
    off: here s_b = 1.6 * 2^-9 rounds to 2 * 2^-9, the largest element becomes 4, and re-quantizing picks a
    smaller scale that moves it."""
    g = global_scale(1.0)
    x = np.zeros(32)
    x[0] = 1.0
    x[16], x[17] = 1.6 * 2**-9 * 6 * g, 0.8 * 2**-9 * 6 * g
    once = quantize_nvfp4(x).dequantize()
    assert E2M1.decode(quantize_nvfp4(x).codes[16]) == 4
    assert quantize_nvfp4(once).dequantize()[16] != once[16]


@given(tensors())
def test_nvfp4_sign_symmetry(x: np.ndarray) -> None:
    a, b = quantize_nvfp4(x), quantize_nvfp4(-x)
    np.testing.assert_array_equal(a.block_scales, b.block_scales)
    np.testing.assert_array_equal(b.dequantize(), -a.dequantize())
    nonzero = E2M1.decode(a.codes) != 0
    np.testing.assert_array_equal(b.codes[nonzero], a.codes[nonzero] ^ 0x8)


@given(tensors(), st.integers(-8, 8))
def test_nvfp4_power_of_two_scale_invariance(x: np.ndarray, k: int) -> None:
    amax = float(np.abs(x).max())
    assume(amax > 0 and 1e-30 < amax * 2.0**k / 2688 < 1e30)
    a, b = quantize_nvfp4(x), quantize_nvfp4(x * np.float32(2.0**k))
    np.testing.assert_array_equal(a.codes, b.codes)
    np.testing.assert_array_equal(a.block_scales, b.block_scales)
    assert b.global_scale == a.global_scale * 2.0**k


def test_nvfp4_underflowing_global_scale_flushes_to_zero() -> None:
    t = quantize_nvfp4(np.array([1e-44, -1e-45], np.float32))
    assert t.global_scale == 1.0 and np.all(t.dequantize() == 0)


def test_nvfp4_zero_blocks_and_all_zero_tensor() -> None:
    x = np.zeros((2, 40), np.float32)
    t = quantize_nvfp4(x)
    assert t.global_scale == 1.0 and np.all(t.codes == 0)
    assert np.all(E4M3.decode(t.block_scales) == 1.0)
    assert np.all(t.dequantize() == 0) and np.isfinite(t.dequantize()).all()
    x[1, 20] = 3.0
    t = quantize_nvfp4(x)
    assert E4M3.decode(t.block_scales)[0, 0] == 1.0  # a zero block in a non-zero tensor: scale 1.0
    assert np.isfinite(t.dequantize()).all() and t.dequantize()[1, 20] == pytest.approx(3.0, rel=2**-22)


@given(st.integers(1, 47))
def test_nvfp4_pads_ragged_tails_with_zeros(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    t = quantize_nvfp4(x)
    padded = -(-n // 16) * 16
    assert t.codes.shape == (3, padded) and t.block_scales.shape == (3, padded // 16)
    assert np.all(t.codes[:, n:] == 0)
    # Regression: stale padding once turned into NaN scales; padded blocks here are finite and decode to x.
    assert np.isfinite(E4M3.decode(t.block_scales)).all()
    assert t.dequantize().shape == (3, n) and np.isfinite(t.dequantize()).all()
    # Padding never raises a block's amax: the tail block's scale is the same as for its values alone.
    tail = x[:, (n - 1) // 16 * 16 :]
    alone = quantize_nvfp4(np.ascontiguousarray(tail), global_scale_value=t.global_scale)
    np.testing.assert_array_equal(alone.block_scales[:, -1], t.block_scales[:, -1])


@given(tensors(zero_blocks=False))
def test_nvfp4_scale_rounded_up_never_clips(x: np.ndarray) -> None:
    t = quantize_nvfp4(x, scale_rounding="up")
    y = pad_blocks(x.astype(np.float64), 16) / t.scale_values()[..., None]
    assert np.all(np.abs(y) <= 6 * (1 + 2**-20))
    assert np.all(np.abs(x - t.dequantize()) <= nvfp4_element_bound(t, x) * (1 + 1e-12))


@given(tensors())
def test_nvfp4_scale_floor_at_min_normal_keeps_every_scale_normal(x: np.ndarray) -> None:
    t = quantize_nvfp4(x, scale_min=2.0**-6)
    assert np.all(E4M3.decode(t.block_scales) >= 2.0**-6)


def test_nvfp4_divides_by_the_rounded_scale_it_stores() -> None:
    """Regression: exporters that divide by the unrounded block scale but store the rounded one decode
    values off the grid they meant. Here the two give different codes; ours decodes back exactly."""
    x = np.array([1.0] + [0.0] * 15 + [0.3, 0.1225] + [0.0] * 14, np.float32)
    t = quantize_nvfp4(x)
    g = t.global_scale
    e_b = E4M3.decode(t.block_scales)
    s_b = np.float32(np.float32(0.3) / np.float32(6 * np.float32(g)))
    assert e_b[1] != s_b  # the stored scale was rounded
    assert not np.array_equal(E2M1.encode(x[16:] / (s_b * g)), E2M1.encode(x[16:] / (e_b[1] * g)))
    np.testing.assert_array_equal(t.codes[16:], E2M1.encode(x[16:] / (e_b[1] * g)))


@given(tensors(max_cols=48))
def test_nvfp4_scale_bytes_are_never_nan(x: np.ndarray) -> None:
    """Regression: a zero-amax block whose scale was rescaled to >= 480 became the E4M3 NaN byte 0x7F."""
    for g in (None, 1e-12, 1e-3):
        t = quantize_nvfp4(x, global_scale_value=g)
        assert not np.any((t.block_scales & 0x7F) == 0x7F)


# -- MX -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("element", ["e4m3", "e5m2", "e2m1"])
@pytest.mark.parametrize("rule", ["rceil", "floor"])
@given(x=tensors(max_cols=96))
def test_mx_error_bounds(element: str, rule: str, x: np.ndarray) -> None:
    t = quantize_mx(x, element, scale_rule=rule)
    fmt = element_format(element)
    err = pad_blocks(np.abs(x - t.dequantize()), 32).max(axis=-1)
    amax_b = blockwise(x, 32)
    bound = np.maximum(mx_block_bound(amax_b, fmt, rule), t.scale_values() * fmt.min_subnormal / 2)
    assert np.all(err <= bound * (1 + 1e-12))
    assert not np.any(t.scales == E8M0_NAN)  # finite input never gives the NaN scale


@pytest.mark.parametrize("element", ["e4m3", "e5m2", "e2m1"])
@given(x=tensors(max_cols=96))
def test_mx_rceil_never_clips_and_is_idempotent(element: str, x: np.ndarray) -> None:
    t = quantize_mx(x, element)
    fmt = element_format(element)
    y = pad_blocks(x.astype(np.float64), 32) / t.scale_values()[..., None]
    assert np.all(np.abs(y) <= fmt.max)
    once = t.dequantize()
    np.testing.assert_array_equal(quantize_mx(once, element).dequantize(), once)


@given(x=tensors(max_cols=64), k=st.integers(-20, 20))
def test_mx_power_of_two_scale_invariance(x: np.ndarray, k: int) -> None:
    amax_b = blockwise(x, 32)
    assume(np.all((amax_b == 0) | ((amax_b * 2.0**k > 2.0**-100) & (amax_b * 2.0**k < 2.0**100))))
    a, b = quantize_mx(x), quantize_mx(x * 2.0**k)
    np.testing.assert_array_equal(a.codes, b.codes)
    nz = amax_b > 0
    np.testing.assert_array_equal(b.scales.astype(int)[nz], a.scales.astype(int)[nz] + k)


def test_mx_zero_and_non_finite_blocks() -> None:
    x = np.zeros((1, 96))
    x[0, 40] = np.nan
    x[0, 70] = 5.0
    t = quantize_mx(x)
    assert t.scales.tolist() == [[0, E8M0_NAN, 127 + int(np.ceil(np.log2(5 / 448)))]]
    d = t.dequantize()
    assert np.all(d[0, :32] == 0) and np.isnan(d[0, 32:64]).all() and d[0, 70] == 5.0


def test_mx_floor_rule_clips_top_values_by_at_most_one_eighth() -> None:
    x = np.full(32, 1.0)
    x[0] = 511.0 / 256  # amax just under 2: floor gives X = 2^(0 - 8), y = 511, clipped to 448
    t = quantize_mx(x, scale_rule="floor")
    assert t.dequantize()[0] == 448 / 256
    assert (x[0] - 448 / 256) / x[0] <= 1 / 8


# -- per tensor ---------------------------------------------------------------------------------------
@given(tensors())
def test_fp8_per_tensor_bound(x: np.ndarray) -> None:
    t = quantize_fp8(x)
    assert t.scale == float(np.float32(np.abs(x).max()) / np.float32(448)) or not np.abs(x).max()
    assert np.all(np.abs(x - t.dequantize()) <= scaled_error_bound(E4M3, x, t.scale) * (1 + 1e-12))
    assert quantize_per_tensor(np.zeros(4)).scale == 1.0


# -- bad input ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: quantize_nvfp4(np.arange(32)), "x must be a floating-point array, got dtype int64"),
        (lambda: quantize_nvfp4(torch.arange(32)), "x must be a floating-point tensor, got torch.int64"),
        (lambda: quantize_nvfp4(np.ones((32, 32))[:, ::2]), r"x is not contiguous; pass np.ascontiguousarray\(x\)"),
        (lambda: quantize_nvfp4(torch.ones(32, 32).t()), r"x is not contiguous; pass x.contiguous\(\)"),
        (lambda: quantize_nvfp4(np.ones(32), block=0), "block must be a positive integer"),
        (lambda: quantize_nvfp4(np.ones(32), block=15), "block must be even"),
        (lambda: quantize_mx(np.ones(32), "e2m1", block=31), "block must be even"),
        (lambda: quantize_nvfp4(np.array([1.0, np.nan])), "x holds 1 NaN/Inf value"),
        (lambda: quantize_fp8(np.array([np.inf])), "x holds 1 NaN/Inf value"),
        (lambda: quantize_nvfp4(np.ones(4), scale_rounding="down"), "scale_rounding must be"),
        (lambda: quantize_nvfp4(np.ones(4), scale_min=0), "scale_min must lie in"),
        (lambda: quantize_nvfp4(np.ones(4), global_scale_value=0.0), "global_scale_value must be"),
        (lambda: quantize_mx(np.ones(4), scale_rule="ceil"), "scale_rule must be one of rceil, floor"),
        (lambda: quantize_mx(np.ones(4), "int8"), "element must be one of"),
        (lambda: quantize_nvfp4(np.float32(1.0)), "x must have at least one axis"),
    ],
)
def test_bad_input_names_the_argument(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_torch_inputs_of_every_float_dtype() -> None:
    x = torch.randn(4, 32)
    ref = quantize_nvfp4(x.numpy())
    for dtype in (torch.float32, torch.float64):
        np.testing.assert_array_equal(quantize_nvfp4(x.to(dtype)).codes, ref.codes)
    assert quantize_nvfp4(x.to(torch.bfloat16)).codes.shape == (4, 32)


def test_metrics_against_hand_computed_values() -> None:
    x = np.array([3.0, 4.0])
    xq = np.array([3.0, 3.0])
    assert sqnr_db(x, xq) == pytest.approx(10 * np.log10(25 / 1))
    assert sqnr_db(x, x) == float("inf")
    assert max_abs_error(x, xq) == 1.0
    assert relative_l2(x, xq) == pytest.approx(1 / 5)
    assert cosine(x, xq) == pytest.approx(21 / (5 * np.sqrt(18)))


# -- the NVFP4 GEMM check (seed 002's correctness claim) ------------------------------------------
def test_fp32_matmul_of_dequantized_operands_passes_the_gemm_check() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((64, 256)), rng.standard_normal((48, 256))
    qa, qb = quantize_nvfp4(a), quantize_nvfp4(b)
    out = (torch.from_numpy(qa.dequantize()).float() @ torch.from_numpy(qb.dequantize()).float().T).numpy()
    check = assert_nvfp4_gemm(qa, qb, out)
    assert check.max_error <= check.max_bound
    bad = out.copy()
    bad[3, 7] *= 1.001
    with pytest.raises(
        AssertionError, match=r"exceeds the FP32-accumulation bound at 1 element\(s\); worst at \(3, 7\)"
    ):
        assert_nvfp4_gemm(qa, qb, bad)
    with pytest.raises(ValueError, match="out must be"):
        check_nvfp4_gemm(qa, qb, out[:, :3])


def test_quantized_gemm_stays_within_the_derived_output_bound() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((32, 128)), rng.standard_normal((16, 128))
    qa, qb = quantize_nvfp4(a), quantize_nvfp4(b)
    da, db = qa.dequantize(), qb.dequantize()
    bound = quantization_output_bound(a, b, nvfp4_element_bound(qa, a), nvfp4_element_bound(qb, b), da)
    assert np.all(np.abs(a @ b.T - da @ db.T) <= bound * (1 + 1e-12))
