"""Latency of each precision and its speedup over its reference (FP16), judged against floors.json.

Run with `pytest --gpu-bench suites/`; narrow with --vitperf-models / -precisions / -batch-sizes.
"""

import pytest

from pytest_vitperf.precision import get_precision

pytestmark = pytest.mark.gpu_bench


def test_latency(vitperf_model, vitperf_precision, vitperf_batch, engine, bench, speedup_floor, assert_speedup):
    measured = bench(engine(vitperf_precision, vitperf_batch))
    reference_name = get_precision(vitperf_precision).reference  # FP16 for every built-in precision
    if vitperf_precision == reference_name:
        return
    reference = bench(engine(reference_name, vitperf_batch))
    assert_speedup(reference, measured, speedup_floor(vitperf_model, vitperf_precision, vitperf_batch))
