"""What each precision costs on a task: a ViT trained here on scikit-learn's digits (digits.py), its test split run
through each precision, judged against the FP32 model by the precision's bounds (the registry's `task`, a test's
`vitperf_accuracy` marker, --vitperf-accuracy-bound).

Two ways in, each its own test:
- `engine`: the selected backend's engine (torch on the CPU: fp32, fp16, bf16; on a GPU also its real FP8/INT8
  GEMMs and 2:4; TensorRT engines where TensorRT is installed);
- `fake-quant`: Model Optimizer's fake quantization of the precision's recipe on the CPU, on any machine, which is
  how NVFP4 and MXFP8 are judged without a Blackwell GPU.
"""

import pytest

from pytest_vitperf.accuracy import task_failures

pytestmark = pytest.mark.gpu_bench


@pytest.mark.parametrize("via", ["engine", "fake-quant"])
def test_accuracy(vitperf_precision, via, digits_accuracy, accuracy_bound):
    acc = digits_accuracy(vitperf_precision, via)
    failures = task_failures(acc, accuracy_bound(vitperf_precision))
    assert not failures, (
        f"{vitperf_precision} via {acc.via} on {acc.images} digits: " + "; ".join(failures) + ". Check the recipe and "
        "its calibration; loosen this run only with --vitperf-accuracy-bound (e.g. max_drop=2)"
    )
