"""Signal-to-quantization-noise of each format on 2^20 Gaussian samples, within 1 dB of the reference table
(docs/numerics.md; computed there from 2^22 samples in a float64 simulation)."""

import numpy as np
import pytest

from pytest_vitperf.numerics import quantize_mx, quantize_nvfp4, quantize_per_tensor, sqnr_db

pytestmark = pytest.mark.gpu_bench

TABLE_DB = {
    "fp8-e4m3-per-tensor": (31.5, lambda x: quantize_per_tensor(x, "e4m3")),
    "mxfp8-e4m3-rceil": (31.5, lambda x: quantize_mx(x, "e4m3", scale_rule="rceil")),
    "mxfp8-e4m3-floor": (30.7, lambda x: quantize_mx(x, "e4m3", scale_rule="floor")),
    "nvfp4": (20.4, quantize_nvfp4),
    "mxfp4-rceil": (18.8, lambda x: quantize_mx(x, "e2m1", scale_rule="rceil")),
    "e2m1-per-tensor": (17.0, lambda x: quantize_per_tensor(x, "e2m1")),
}


@pytest.fixture(scope="module")
def gaussian():
    return np.random.default_rng(20).standard_normal(2**20)


@pytest.mark.parametrize("fmt", list(TABLE_DB))
def test_sqnr_matches_table(gaussian, fmt, record_property):
    expected, quantize = TABLE_DB[fmt]
    measured = sqnr_db(gaussian, quantize(gaussian).dequantize())
    record_property("sqnr_db", round(measured, 2))
    assert abs(measured - expected) <= 1.0, f"{fmt}: {measured:.2f} dB, table {expected} dB"
