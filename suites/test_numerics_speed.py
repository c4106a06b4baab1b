"""Speed of the reference NVFP4 quantizer on the CPU: a 4096 x 4096 float32 tensor. A benchmark, not a timed
assert: read the figure in pytest-benchmark's table (docs/numerics.md records one)."""

import numpy as np
import pytest

from pytest_vitperf.numerics import quantize_nvfp4

pytestmark = pytest.mark.gpu_bench


def test_nvfp4_quantize_4096x4096(benchmark):
    x = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)
    t = benchmark.pedantic(quantize_nvfp4, args=(x,), rounds=5, warmup_rounds=1)
    assert t.codes.shape == (4096, 4096) and t.block_scales.shape == (4096, 256)
