from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_vitperf.measure.measurement import Measurement, Spec, speedup

SPEC = Spec(
    model="vit_tiny_patch16_224",
    precision="fp16",
    batch=8,
    backend="torch",
    backend_version="2.14.1",
    device="NVIDIA H100 80GB HBM3",
    sm=90,
    timer="cuda-event",
    options={"warmup_ms": 200.0},
)
samples = st.lists(st.floats(min_value=1e-3, max_value=1e4, allow_nan=False), min_size=1, max_size=300)


@given(samples)
def test_statistics_match_numpy(xs: list[float]) -> None:
    m = Measurement(SPEC, tuple(xs))
    a = np.asarray(xs)
    assert m.mean == pytest.approx(a.mean(), rel=1e-12)
    assert m.median == pytest.approx(np.median(a), rel=1e-12)
    for q in (90, 95, 99):
        assert m.percentile(q) == pytest.approx(np.percentile(a, q), rel=1e-12)
    assert m.min == a.min() and m.max == a.max()
    stdev = a.std(ddof=1) if len(xs) > 1 else 0.0
    assert m.stdev == pytest.approx(stdev, rel=1e-9, abs=1e-12)
    assert m.cov == pytest.approx(stdev / a.mean(), rel=1e-9, abs=1e-12)
    assert m.images_per_s == pytest.approx(8 * 1000 / np.median(a), rel=1e-12)


@given(samples)
def test_json_round_trip_keeps_spec_and_samples(xs: list[float]) -> None:
    m = Measurement(SPEC, tuple(xs))
    back = Measurement.from_json(m.to_json())
    assert back == m
    assert back.spec.options == SPEC.options
    assert json.loads(m.to_json())["stats"]["median"] == m.median


def test_noise_flag_follows_trtexec_threshold() -> None:
    steady = Measurement(SPEC, (10.0, 10.1, 9.9, 10.0))
    jumpy = Measurement(SPEC, (10.0, 11.0, 9.0, 10.0))
    assert not steady.noisy
    assert jumpy.noisy and jumpy.cov > 0.025


def test_speedup_is_ratio_of_medians() -> None:
    ref = Measurement(SPEC, (8.0, 8.2, 100.0))
    fast = Measurement(SPEC, (4.0, 4.1, 4.2))
    assert speedup(ref, fast) == pytest.approx(8.2 / 4.1)


@pytest.mark.parametrize("bad", [(), (1.0, math.nan), (1.0, math.inf), (-1.0,)])
def test_rejects_empty_and_non_finite_samples(bad: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="vit_tiny_patch16_224-fp16-b8"):
        Measurement(SPEC, bad)


def test_from_dict_rejects_other_schema_and_units() -> None:
    d = Measurement(SPEC, (1.0,)).to_dict()
    with pytest.raises(ValueError, match="schema"):
        Measurement.from_dict({**d, "schema": 99})
    with pytest.raises(ValueError, match="unit"):
        Measurement.from_dict({**d, "unit": "s"})
