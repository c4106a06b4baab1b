"""Latency of each precision and its speedup over its reference (FP16), judged against floors.json.

A family (one model and batch) is measured once: every engine built first, then all timed in interleaved rounds, so
each speedup carries an interval. Run with `pytest --gpu-bench suites/`; narrow with --vitperf-models / -precisions /
-batch-sizes.
"""

import pytest

from pytest_vitperf import get_precision

pytestmark = pytest.mark.gpu_bench


def test_latency(vitperf_model, vitperf_precision, vitperf_batch, bench_family, speedup_floor, assert_speedup):
    family = bench_family(vitperf_model, vitperf_batch)
    measured = family.measurement(vitperf_precision)
    reference_name = get_precision(vitperf_precision).reference  # FP16 for every built-in precision
    if vitperf_precision == reference_name:
        return
    reference = family.measurement(reference_name)
    assert_speedup(reference, measured, speedup_floor(vitperf_model, vitperf_precision, vitperf_batch))
