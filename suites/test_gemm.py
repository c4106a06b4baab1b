"""The GEMM micro-suite (seed 002): seed 002's shapes and ViT-B/16's four Linears at batch 64, in FP16, BF16, FP8
(torch._scaled_mm: per-tensor and per-row scales, FP32 and fast accumulation) and INT8 (torch._int_mm).

Each product is timed with the plugin's timer on a GPU, its operands rotated over more than twice the L2 (or, with
--vitperf-gemm-hot, one set that stays in L2); the summary's GEMM table gives its TFLOPS and GB/s against the GPU's
two roofs (dense peak, HBM bandwidth), which of them bounds it, and its speedup over FP16. Each is also held against
the float64 product of its dequantized operands within the bound of numerics/gemm.py (a CPU checks a few rows of
each; its timings would say nothing about a GPU).
"""

import pytest

from pytest_vitperf.engines.gemms import KINDS, SHAPES, operands, unsupported_reason

pytestmark = pytest.mark.gpu_bench
CASES = [pytest.param(shape, kind, id=f"{shape.name}-{kind}") for shape in SHAPES for kind in KINDS]
CPU_ROWS = 8


@pytest.mark.parametrize(("shape", "kind"), CASES)
def test_gemm_correct(shape, kind, vitperf_session):
    device = vitperf_session.device
    reason = unsupported_reason(kind, device.sm, timed=False)
    if reason is not None:
        pytest.skip(reason)
    g = operands(shape, kind, device.torch_device, rows=None if device.sm is not None else CPU_ROWS)
    check = g.check(g.launch())
    assert check.ok, (
        f"{kind} {shape.m}x{shape.n}x{shape.k}: {check.violations} element(s) beyond the bound; worst at "
        f"{check.worst_index}: error {check.max_error:.4g}, largest bound {check.max_bound:.4g}"
    )


@pytest.mark.parametrize(("shape", "kind"), CASES)
def test_gemm_speed(shape, kind, vitperf_session, bench_gemm):
    reason = unsupported_reason(kind, vitperf_session.device.sm)
    if reason is not None:
        pytest.skip(reason)
    m = bench_gemm(shape, kind)
    assert m.median > 0
