"""Two paths to one TensorRT number: trtexec (the tool the seed reports timed with by hand) against the Python API.

Run with `pytest --gpu-bench suites/ --vitperf-backend trtexec` where both TensorRT's Python module and trtexec are
there (an NGC TensorRT container). Each precision is built, timed and checked by both backends, from the same export,
and their medians must agree within the regression threshold (--vitperf-regression-threshold): one process gives
one observation of each, so there is no spread to test against, and the threshold alone decides. With any other
backend, or without one of the two, it skips and says why.
"""

import pytest

from pytest_vitperf.report.tables import clock_comparison

pytestmark = pytest.mark.gpu_bench
PAIRS = {"trtexec": "tensorrt", "trtexec-rtx": "tensorrt-rtx"}  # the tool, and the Python API it must agree with


def test_trtexec_agrees_with_the_python_api(
    vitperf_model, vitperf_precision, vitperf_batch, vitperf_session, engine, bench
):
    tool = vitperf_session.backend.name
    if tool not in PAIRS:
        pytest.skip(f"the trtexec/Python API cross-check runs with --vitperf-backend trtexec (this run: {tool})")
    by_tool = bench(engine(vitperf_precision, vitperf_batch))
    by_api = bench(engine(vitperf_precision, vitperf_batch, backend=PAIRS[tool]))
    delta = by_tool.median / by_api.median - 1
    threshold = vitperf_session.settings.regression_threshold
    clocks = clock_comparison(by_api, by_tool)
    assert abs(delta) <= threshold, (
        f"{tool} and {PAIRS[tool]} disagree on {vitperf_model} {vitperf_precision} b{vitperf_batch}: "
        f"{by_tool.median:.3f} ms against {by_api.median:.3f} ms ({delta:+.1%}, beyond {threshold:.0%}); "
        f"SM clock {by_tool.sm_mhz} vs {by_api.sm_mhz} MHz"
        + (f", {clocks.cycle_speedup:.3f}x in cycles" if clocks else "")
        + f". Re-run: pytest --gpu-bench suites/test_backend_agreement.py --vitperf-backend {tool} "
        f"--vitperf-precisions {vitperf_precision} --vitperf-batch-sizes {vitperf_batch}"
    )
