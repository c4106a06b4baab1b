"""Input checks and block layout shared by the block quantizers."""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_vitperf.numerics.formats import F64


def as_float64(x: Any, name: str = "x") -> F64:
    """`x` (numpy array, torch tensor or nested list of floats) as a float64 numpy array.

    Refuses non-floating dtypes and non-contiguous tensors, naming the argument: a strided view quantized
    along its last axis would silently block the wrong elements together in code that trusts memory order.
    """
    if type(x).__module__.startswith("torch"):
        if not x.dtype.is_floating_point:
            raise ValueError(f"{name} must be a floating-point tensor, got {x.dtype}")
        if not x.is_contiguous():
            raise ValueError(f"{name} is not contiguous; pass {name}.contiguous()")
        return np.asarray(x.detach().cpu().double().numpy())
    arr = np.asarray(x)
    if arr.dtype.kind != "f":
        raise ValueError(f"{name} must be a floating-point array, got dtype {arr.dtype}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{name} is not contiguous; pass np.ascontiguousarray({name})")
    if arr.ndim == 0:
        raise ValueError(f"{name} must have at least one axis to block along")
    return arr.astype(np.float64, copy=False)


def check_block(block: int, name: str = "block", even: bool = False) -> int:
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"{name} must be a positive integer, got {block!r}")
    if even and block % 2:
        raise ValueError(f"{name} must be even so that FP4 codes pack two per byte, got {block}")
    return int(block)


def check_finite(arr: F64, fmt: str, name: str = "x") -> None:
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        raise ValueError(f"{name} holds {bad} NaN/Inf value(s); {fmt} has no encoding for them")


def pad_blocks(arr: F64, block: int) -> F64:
    """Zero-pad the last axis to a multiple of `block` and split it into blocks: [..., n_blocks, block].
    Zero padding never raises a block's amax."""
    n = arr.shape[-1]
    pad = (-n) % block
    if pad:
        arr = np.concatenate([arr, np.zeros((*arr.shape[:-1], pad))], axis=-1)
    return arr.reshape(*arr.shape[:-1], -1, block)


def unpad(blocks: F64, shape: tuple[int, ...]) -> F64:
    flat = blocks.reshape(*blocks.shape[:-2], -1)
    return np.ascontiguousarray(flat[..., : shape[-1]]).reshape(shape)


def block_amax(blocks: F64) -> F64:
    return np.abs(blocks).max(axis=-1)
