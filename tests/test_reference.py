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
