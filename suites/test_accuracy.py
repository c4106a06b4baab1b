"""What each precision costs on a task: by default a ViT trained here on scikit-learn's digits (digits.py) and its
test split; with --vitperf-accuracy-data DIR, the user's labelled images and the run's first model (its trained
weights from --vitperf-weights). Each precision's logits are judged against the FP32 model's by the precision's
bounds (the registry's `task`, a test's `vitperf_accuracy` marker, --vitperf-accuracy-bound).

Two ways in, each its own test:
- `engine`: the selected backend's engine (torch on the CPU: fp32, fp16, bf16; on a GPU also its real FP8/INT8
  GEMMs and 2:4; TensorRT engines where TensorRT is installed);
- `fake-quant`: Model Optimizer's fake quantization of the precision's recipe on the CPU, on any machine, which is
  how NVFP4 and MXFP8 are judged without a Blackwell GPU.
"""

import pytest

from pytest_vitperf.verdicts.accuracy import task_failures

pytestmark = pytest.mark.gpu_bench


@pytest.mark.parametrize("via", ["engine", "fake-quant"])
def test_accuracy(vitperf_precision, via, accuracy_of, accuracy_bound):
    acc = accuracy_of(vitperf_precision, via)
    failures = task_failures(acc, accuracy_bound(vitperf_precision))
    assert not failures, (
        f"{vitperf_precision} via {acc.via} on the {acc.task} ({acc.images} images): " + "; ".join(failures)
        + ". Check the recipe and its calibration; loosen this run only with --vitperf-accuracy-bound (e.g. max_drop=2)"
    )


def test_nvfp4_weight_errors_stay_within_the_provable_bound(vitperf_session, record_property):
    """Every weight the nvfp4 recipe quantizes in the trained model, fake-quantized the way Model Optimizer does it
    (on the CPU, cpu_quant's kernel), against the float64 worst case of numerics.bounds for its 16-element block;
    each tensor's SQNR is recorded (and printed with -s)."""
    import copy

    import numpy as np
    import torch

    from pytest_vitperf.core.precision import get_precision
    from pytest_vitperf.engines.models.zoo import DIGITS_MODEL
    from pytest_vitperf.engines.quant.cpu import cpu_block_quant
    from pytest_vitperf.engines.quant.recipes import apply
    from pytest_vitperf.numerics import sqnr_db
    from pytest_vitperf.numerics.bounds import nvfp4_block_bound

    p = get_precision("nvfp4")
    model = copy.deepcopy(vitperf_session.model(DIGITS_MODEL))
    with cpu_block_quant(), torch.no_grad():
        quantized = apply(p.recipe, model, cache_dir=vitperf_session.settings.cache_dir)
        weights = {
            name: (m.weight.detach().double().numpy(), m.weight_quantizer(m.weight).detach().double().numpy())
            for name, m in quantized.named_modules()
            if isinstance(m, torch.nn.Linear) and getattr(m, "weight_quantizer", None) is not None
            and m.weight_quantizer.is_enabled
        }  # fmt: skip
    assert len(weights) >= 8, sorted(weights)  # qkv, proj, fc1, fc2 of both blocks at least
    report = {}
    for name, (w, wq) in weights.items():
        blocks = w.reshape(w.shape[0], -1, p.block)
        bound = nvfp4_block_bound(np.abs(blocks).max(-1), float(np.abs(w).max()))[..., None]
        worst = float((np.abs(blocks - wq.reshape(blocks.shape)) / bound).max())
        report[name] = {"worst_of_bound": round(worst, 4), "sqnr_db": round(sqnr_db(w, wq), 2)}
        assert worst <= 1 + 1e-9, f"{name}: an element's error is {worst:.4f} times the provable NVFP4 bound"
    record_property("nvfp4_weights", report)
    print(
        "\n".join(
            f"{n}: SQNR {r['sqnr_db']} dB, worst error {r['worst_of_bound']:.0%} of the bound"
            for n, r in report.items()
        )
    )
