"""Each selected precision built ahead of time as a TensorRT-RTX plan for an RTX Blackwell GPU (SM120), on any
machine, a CPU included: the precision's export builds into an engine, and the summary lists its size, build time
and quantization coverage. Nothing is timed (TensorRT-RTX does not run on every GPU, and a plan for another GPU
cannot run here)."""

import pytest

pytestmark = pytest.mark.gpu_bench


def test_plan_builds(vitperf_model, vitperf_precision, vitperf_plan):
    record = vitperf_plan(vitperf_precision)
    assert record.info["engine_bytes"] > 0
