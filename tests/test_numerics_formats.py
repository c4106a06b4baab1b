"""Element formats, E8M0 and FP4 packing: properties, and agreement with torch, ONNX and each other."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytest_vitperf.numerics.bounds import element_error_bound
from pytest_vitperf.numerics.formats import (
    E2M1,
    E4M3,
    E5M2,
    E8M0_NAN,
    ElementFormat,
    e8m0_decode,
    e8m0_encode_exponent,
    element_format,
    pack_fp4,
    unpack_fp4,
)

FORMATS = [E2M1, E4M3, E5M2]
fmt_ids = [f.name for f in FORMATS]


def values(fmt: ElementFormat, over: float = 1.25):
    return hnp.arrays(
        np.float64,
        st.integers(1, 64),
        elements=st.floats(-fmt.max * over, fmt.max * over, allow_nan=False, allow_infinity=False),
    )


@pytest.mark.parametrize("fmt", FORMATS, ids=fmt_ids)
def test_grids_match_the_definitions(fmt: ElementFormat) -> None:
    g = fmt.grid()
    assert g[0] == 0 and g[-1] == fmt.max
    assert g[1] == fmt.min_subnormal
    if fmt is E2M1:
        assert list(g) == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert len(g) == {"e2m1": 8, "e4m3fn": 127, "e5m2": 124}[fmt.name]


def test_e2m1_ties_go_to_even() -> None:
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    assert list(E2M1.round(ties)) == [0, 1, 1, 2, 2, 4, 4]


@pytest.mark.parametrize("fmt", FORMATS, ids=fmt_ids)
@given(data=st.data())
def test_nearest_point_with_ties_to_even(fmt: ElementFormat, data: st.DataObject) -> None:
    y = data.draw(values(fmt))
    q = fmt.round(y)
    grid = np.concatenate([-fmt.grid()[::-1], fmt.grid()])
    dist = np.abs(y[:, None] - grid[None, :])
    best = dist.min(axis=1)
    inside = np.abs(y) <= fmt.max
    assert np.all(np.abs(y - q)[inside] == best[inside])  # nearest
    assert np.all(np.abs(q[~inside]) == fmt.max)  # saturating
    codes = fmt.encode(y)
    for i in np.flatnonzero(inside & ((dist == best[:, None]).sum(axis=1) == 2)):
        assert codes[i] % 2 == 0, f"tie {y[i]} went to odd code {codes[i]}"


@pytest.mark.parametrize("fmt", FORMATS, ids=fmt_ids)
@given(data=st.data())
def test_closed_form_and_binary_search_agree(fmt: ElementFormat, data: st.DataObject) -> None:
    y = data.draw(values(fmt, over=4))
    np.testing.assert_array_equal(fmt.decode(fmt.encode(y)), fmt.round(y))


@pytest.mark.parametrize("fmt", FORMATS, ids=fmt_ids)
def test_exact_on_every_representable_value(fmt: ElementFormat) -> None:
    codes = np.arange(1 << fmt.bits)
    v = fmt.decode(codes)
    finite = np.isfinite(v)
    np.testing.assert_array_equal(fmt.encode(v[finite]), codes[finite])
    np.testing.assert_array_equal(fmt.round(v[finite]), v[finite])


@pytest.mark.parametrize("fmt", FORMATS, ids=fmt_ids)
@given(data=st.data())
def test_sign_symmetry(fmt: ElementFormat, data: st.DataObject) -> None:
    y = data.draw(values(fmt))
    np.testing.assert_array_equal(fmt.round(-y), -fmt.round(y))
    np.testing.assert_array_equal(fmt.encode(-y), fmt.encode(y) ^ fmt.sign_mask)  # -0.0 keeps its sign bit


@pytest.mark.parametrize("fmt", FORMATS, ids=fmt_ids)
@given(data=st.data())
def test_monotonic(fmt: ElementFormat, data: st.DataObject) -> None:
    y = np.sort(data.draw(values(fmt, over=2)))
    assert np.all(np.diff(fmt.round(y)) >= 0)


@pytest.mark.parametrize("fmt", FORMATS, ids=fmt_ids)
@given(data=st.data(), k=st.integers(-3, 3))
def test_power_of_two_scale_invariance_in_the_normal_range(fmt: ElementFormat, data: st.DataObject, k: int) -> None:
    lo, hi = fmt.min_normal * 2.0 ** max(0, -k), fmt.max * 2.0 ** min(0, -k)
    assume(lo <= hi)  # E2M1 has too few binades for |k| = 3
    mag = data.draw(hnp.arrays(np.float64, st.integers(1, 32), elements=st.floats(lo, hi)))
    y = mag * data.draw(st.sampled_from([1.0, -1.0]))
    np.testing.assert_array_equal(fmt.round(y * 2.0**k), fmt.round(y) * 2.0**k)


@pytest.mark.parametrize("fmt", FORMATS, ids=fmt_ids)
@given(data=st.data())
def test_element_error_bound(fmt: ElementFormat, data: st.DataObject) -> None:
    y = data.draw(values(fmt, over=1.5))
    assert np.all(np.abs(y - fmt.round(y)) <= element_error_bound(fmt, y))


@pytest.mark.parametrize(("fmt", "dtype"), [(E4M3, torch.float8_e4m3fn), (E5M2, torch.float8_e5m2)], ids=fmt_ids[1:])
@pytest.mark.parametrize("source", [np.float16, "bfloat16"])
def test_fp8_codes_equal_torch_casts_on_every_16_bit_input(fmt: ElementFormat, dtype: torch.dtype, source) -> None:
    """Every float16 and bfloat16 bit pattern, clamped to +-MAX first: older casts do not saturate."""
    bits = torch.arange(65536, dtype=torch.int32).to(torch.uint16)
    x = bits.view(torch.float16 if source is np.float16 else torch.bfloat16).float()
    x = x.clamp(-fmt.max, fmt.max)  # NaN stays NaN
    theirs = x.to(dtype).view(torch.uint8).numpy()
    ours = fmt.encode(x.numpy())
    finite = np.isfinite(x.numpy())
    np.testing.assert_array_equal(ours[finite], theirs[finite])
    assert np.all(np.isnan(fmt.decode(ours[~finite])))
    decoded = torch.arange(256, dtype=torch.uint8).view(dtype).double().numpy()
    np.testing.assert_array_equal(fmt.decode(np.arange(256)), decoded)


def test_non_finite_policy() -> None:
    assert list(E4M3.encode([np.inf, -np.inf, 500.0])) == [0x7E, 0xFE, 0x7E]  # no Inf in E4M3FN: saturate
    assert list(E5M2.encode([np.inf, -np.inf])) == [0x7C, 0xFC]
    assert np.isnan(E4M3.decode(E4M3.encode([np.nan]))).all() and np.isnan(E5M2.decode(E5M2.encode([np.nan]))).all()
    assert list(E2M1.encode([np.inf, 100.0])) == [7, 7]
    with pytest.raises(ValueError, match="y holds NaN, which e2m1 cannot encode"):
        E2M1.encode([1.0, np.nan])
    with pytest.raises(ValueError, match="codes must lie in"):
        E2M1.decode([16])
    with pytest.raises(ValueError, match="element must be one of"):
        element_format("e3m4")


def test_e8m0() -> None:
    assert np.isnan(e8m0_decode([E8M0_NAN])).all()
    k = np.arange(-127, 128)
    np.testing.assert_array_equal(e8m0_decode(e8m0_encode_exponent(k)), np.ldexp(1.0, k))
    assert e8m0_encode_exponent([-500, 500]).tolist() == [0, 254]  # clamped, never the NaN code


def test_pack_unpack_is_a_bijection_over_all_bytes() -> None:
    every = np.arange(256, dtype=np.uint8)
    codes = unpack_fp4(every)
    assert codes.shape == (512,) and codes.max() == 15
    np.testing.assert_array_equal(pack_fp4(codes), every)
    assert len({tuple(p) for p in codes.reshape(256, 2)}) == 256


def test_nibble_order_matches_onnx_and_torch() -> None:
    """Even element in the low nibble: ONNX FLOAT4E2M1 unpacks our bytes to the same values."""
    from onnx import TensorProto, helper, numpy_helper

    codes = np.array([1, 2, 7, 15, 0, 9], dtype=np.uint8)
    packed = pack_fp4(codes)
    assert packed.tolist() == [0x21, 0xF7, 0x90]
    t = helper.make_tensor("w", TensorProto.FLOAT4E2M1, [6], packed.tobytes(), raw=True)
    np.testing.assert_array_equal(numpy_helper.to_array(t).astype(np.float64), E2M1.decode(codes))
    if hasattr(torch, "float4_e2m1fn_x2"):
        as_fp4 = torch.from_numpy(packed).view(torch.float4_e2m1fn_x2)
        np.testing.assert_array_equal(as_fp4.view(torch.uint8).numpy(), packed)


def test_packing_refuses_odd_lengths_and_wide_codes() -> None:
    with pytest.raises(ValueError, match="even last axis"):
        pack_fp4([1, 2, 3])
    with pytest.raises(ValueError, match="4-bit"):
        pack_fp4([1, 16])
