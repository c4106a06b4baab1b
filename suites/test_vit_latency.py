"""Latency of each precision and its speedup over FP16, judged against floors.json.

Run with `pytest --gpu-bench suites/`; narrow with --vitperf-models / -precisions / -batch-sizes.
"""

import pytest

from pytest_vitperf.precision import REFERENCE

pytestmark = pytest.mark.gpu_bench


def test_latency(vitperf_model, vitperf_precision, vitperf_batch, engine, bench, speedup_floor, assert_speedup):
    measured = bench(engine(vitperf_precision, vitperf_batch))
    if vitperf_precision == REFERENCE:
        return
    reference = bench(engine(REFERENCE, vitperf_batch))
    assert_speedup(reference, measured, speedup_floor(vitperf_model, vitperf_precision, vitperf_batch))
