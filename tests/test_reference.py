"""The FP32 reference (engines/models/reference.py): computed once per cache folder and loaded by every later process,
keyed by the weights, and a damaged file said in one warning and written over."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pytest_vitperf.engines import REPRODUCIBLE_PARTS
from pytest_vitperf.engines.models.reference import PART, fp32_reference
from pytest_vitperf.engines.models.zoo import build_model

NAME = "vit_tiny_patch16_224"


def counted(seed: int = 0) -> tuple[torch.nn.Module, list[int]]:
    model = build_model(NAME, seed=seed)
    calls: list[int] = []
    model.register_forward_hook(lambda *_: calls.append(1))
    return model, calls


def test_a_reference_is_computed_once_per_cache_folder_and_kept_for_vitperf_abs_rounds(tmp_path: Path) -> None:
    model, calls = counted()
    first = fp32_reference(model, NAME, 2, tmp_path)
    assert torch.equal(fp32_reference(model, NAME, 2, tmp_path), first) and len(calls) == 1  # the second: loaded
    assert torch.equal(fp32_reference(model, NAME, 2, None), first) and len(calls) == 2  # no cache: computed
    assert PART in REPRODUCIBLE_PARTS  # vitperf ab's round processes borrow the prepare's
    other, other_calls = counted(seed=1)
    assert not torch.equal(fp32_reference(other, NAME, 2, tmp_path), first) and len(other_calls) == 1  # other weights
    assert len(list((tmp_path / PART).iterdir())) == 2


def test_a_damaged_reference_is_said_once_and_written_over(tmp_path: Path) -> None:
    model, calls = counted()
    first = fp32_reference(model, NAME, 1, tmp_path)
    (path,) = (tmp_path / PART).iterdir()
    path.write_bytes(path.read_bytes()[:100])
    with pytest.warns(UserWarning, match=r"^FP32 reference .* is unusable \(.+\); computing it again$"):
        assert torch.equal(fp32_reference(model, NAME, 1, tmp_path), first)
    assert torch.equal(fp32_reference(model, NAME, 1, tmp_path), first) and len(calls) == 2  # rewritten whole


def test_a_weights_digest_is_taken_once_and_never_outlives_the_weights_it_was_taken_of() -> None:
    """References, calibrations and conversions of one process key on the same weights: hashed once, and again as
    soon as any tensor changes in place, is cast or moved, or is replaced."""
    import copy

    from pytest_vitperf.engines.models import reference
    from pytest_vitperf.engines.models.reference import same_weights, weights_digest

    model = build_model(NAME)
    digest = weights_digest(model)
    hashed: list[int] = []
    real = reference.tensor_bytes
    reference.tensor_bytes = lambda t: hashed.append(1) or real(t)  # type: ignore[assignment, func-returns-value]
    try:
        assert weights_digest(model) == digest and not hashed  # remembered
        twin = copy.deepcopy(model)
        same_weights(model, twin)
        assert weights_digest(twin) == digest and not hashed  # a deep copy carries it
        assert weights_digest(copy.deepcopy(model)) == digest and hashed  # one never told is hashed
        changes = [
            lambda m: m.head.bias.requires_grad_(False).add_(1),  # in place
            lambda m: m.half(),  # cast
            lambda m: setattr(m.head, "weight", torch.nn.Parameter(m.head.weight.detach() * 2)),  # replaced
            lambda m: setattr(m.head.weight, "data", m.head.weight.data * 2),  # its data replaced
        ]
        for change in changes:
            changed = copy.deepcopy(model)
            same_weights(model, changed)
            change(changed)
            assert weights_digest(changed) != digest
    finally:
        reference.tensor_bytes = real  # type: ignore[assignment]


def test_a_reference_on_a_device_is_the_models_fp32_output_and_leaves_tf32_as_it_was(tmp_path: Path) -> None:
    """The device path, run on the CPU's own device: the weights copied, the model left where it is, and torch's
    TF32 settings (the convolution's default is TF32) back as they were."""
    from pytest_vitperf.engines.models.reference import on_device
    from pytest_vitperf.engines.models.zoo import fixed_input

    model, calls = counted()
    x = fixed_input((2, 3, 224, 224))
    flags = (torch.backends.cudnn.conv, torch.backends.cuda.matmul)
    before = [f.fp32_precision for f in flags]
    with torch.inference_mode():
        eager = model(x).float()
    out = on_device(model, x, "cpu")
    assert out is not None and out.device.type == "cpu" and len(calls) == 2
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-5)  # attention in its plain form: not bit for bit
    assert [f.fp32_precision for f in flags] == before
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert torch.equal(fp32_reference(model, NAME, 2, tmp_path, "cpu"), eager)  # a CPU run's, eager as it was


def test_a_model_that_cannot_run_on_the_device_is_said_once_and_computed_on_the_host(tmp_path: Path) -> None:
    model, calls = counted()
    model.register_forward_hook(lambda _m, _i, out: out + torch.zeros(1))  # a tensor outside its weights
    flags = torch.backends.cuda.matmul.fp32_precision
    with pytest.warns(UserWarning, match=r"^FP32 reference computed on the CPU: on meta it failed \(.*device.*\)$"):
        out = fp32_reference(model, NAME, 2, tmp_path, "meta")
    assert torch.equal(out, fp32_reference(model, NAME, 2, None)) and len(calls) == 3  # meta, the host, again
    assert torch.backends.cuda.matmul.fp32_precision == flags


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU: the GPU's reference against the CPU's")
def test_on_a_gpu_the_reference_is_the_cpus_fp32_not_tf32() -> None:
    from pytest_vitperf.engines.models.reference import on_device
    from pytest_vitperf.engines.models.zoo import fixed_input

    model = build_model("vit_base_patch16_224")
    x = fixed_input((4, 3, 224, 224))
    with torch.inference_mode():
        cpu = model(x).float()
    gpu = on_device(model, x, "cuda")
    assert gpu is not None
    err = ((gpu - cpu).norm() / cpu.norm()).item()
    assert err < 1e-5, f"relative error {err:.2e} against the CPU's FP32: TF32 reads about 1e-3"
