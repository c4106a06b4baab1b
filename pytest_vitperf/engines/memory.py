"""Will an engine fit? Estimated before it is built, from its weights and its activations at the batch size, so that
a model too large for the device (a ViT-H at batch 64 in FP32 on a smaller GPU) skips with the numbers instead of
failing with an out-of-memory error in the middle of a family.

An upper estimate, not a measurement: it errs towards skipping only where the margin is thin."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pytest_vitperf.core.precision import get_precision
from pytest_vitperf.engines.models.zoo import input_size

if TYPE_CHECKING:
    import torch

    from pytest_vitperf.measure.env import Device

# Bytes a weight takes while an engine is prepared: FP8 and INT8 are calibrated from an FP32 copy before they shrink.
_PREPARE_BYTES = {"fp16": 2, "bf16": 2}
# Live [tokens, width] tensors of one transformer block at a time (the MLP's 4x included), in 2-byte elements; the
# input itself is FP32. Generous on purpose.
BLOCK_TENSORS = 12
HEADROOM = 0.9  # of what is free: the allocator, the CUDA context and a captured graph's pool take the rest


def estimate_bytes(model: torch.nn.Module, precision: str, batch: int) -> tuple[int, int]:
    """(weights, activations) in bytes for an engine of `model` at `precision` and `batch`."""
    params = sum(p.numel() for p in model.parameters())
    weights = params * _PREPARE_BYTES.get(get_precision(precision).weights, 4)
    c, h, w = input_size(model)
    image = c * h * w
    patch_embed = getattr(model, "patch_embed", None)
    tokens = getattr(patch_embed, "num_patches", None)
    width = getattr(model, "embed_dim", None)
    blocks = list(getattr(model, "blocks", ()))
    heads = getattr(getattr(blocks[0], "attn", None), "num_heads", 1) if blocks else 1
    if tokens and width:  # a ViT: a block's tensors, and attention scores where they are materialized
        tokens += getattr(model, "num_prefix_tokens", 0)
        per_image = BLOCK_TENSORS * tokens * width * 2 + heads * tokens * tokens * 2
    else:  # anything else: a few copies of its input at each layer's width we cannot see
        per_image = BLOCK_TENSORS * image * 2
    return weights, batch * (image * 4 + per_image)


def free_bytes(device: Device) -> int:
    """Memory free for a new engine now: the GPU's, else the host's available pages."""
    if device.sm is not None:
        import torch

        return int(torch.cuda.mem_get_info(device.index)[0])
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def does_not_fit(model: torch.nn.Module, name: str, precision: str, batch: int, device: Device) -> str | None:
    """Why the engine would not fit in what is free, or None."""
    weights, activations = estimate_bytes(model, precision, batch)
    free = free_bytes(device)
    if weights + activations <= HEADROOM * free:
        return None
    gib = 2**30
    return (
        f"{name} {precision} b{batch} needs about {(weights + activations) / gib:.1f} GiB (weights "
        f"{weights / gib:.1f}, activations {activations / gib:.1f}), {free / gib:.1f} GiB free on {device.name}; "
        "lower the batch: --vitperf-batch-sizes 1,8"
    )
