"""Memory beside time (report/memory.py): each engine's weights and what one call needs, against FP16's, on a stored
H100 run and in a CPU run of the latency suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_vitperf.measure.measurement import read_benchmark_json
from pytest_vitperf.report.memory import memory_summary
from tests.conftest import FAST

STORED = Path(__file__).parent / "data" / "h100-vit_base-rounds-benchmark.json"


def test_fp8_and_int8_weights_are_half_of_fp16s_on_a_stored_h100_run() -> None:
    """The stored run recorded each engine's weight bytes, and no peak (it predates the peak): "-" there."""
    lines = memory_summary(read_benchmark_json(STORED))
    assert lines[0].split() == ["model", "precision", "batch", "backend", "weight", "MB", "vs", "fp16", "peak", "MB",
                                "vs", "fp16"]  # fmt: skip
    rows = {(r.split()[1], r.split()[2]): r.split()[4:] for r in lines[2:]}
    assert rows[("fp16", "64")] == ["173.1", "1.00x", "-", "-"]
    assert rows[("fp8", "64")] == ["88.2", "0.51x", "-", "-"]  # FP8 weights and their scales, FP16 for the rest
    assert rows[("int8", "1")][:2] == ["87.9", "0.51x"]
    assert memory_summary([]) == []


def test_the_summary_gives_each_engines_weights_beside_fp16s(suite: pytest.Pytester) -> None:
    """On a CPU the torch backend records its weights; what one call needs is measured on a GPU only."""
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32,fp16")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*vitperf memory (weights, and what one call needs on the GPU; against FP16 at the batch)*",
        "model * precision * batch * backend * weight MB * vs fp16 * peak MB * vs fp16",
        "test_vit * fp32 * 1 * torch * 2.00x * - * -",  # FP32 weights are twice FP16's
        "test_vit * fp16 * 1 * torch * 1.00x * - * -",
    ])  # fmt: skip
