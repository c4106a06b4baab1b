"""A small ViT trained on scikit-learn's digits: the model whose task accuracy each precision is judged on. Random
weights say whether an engine computes the same function, not what a precision costs on a task; no pretrained
weights can be downloaded here, so the project ships its own.

The model follows the project's attention rules for block quantizers: 32x32 input, patch 4 (64 tokens, no class
token, global average pooling), head dim 32, attention as 3D bmm. Every GEMM dimension is a multiple of 32, so NVFP4
(block 16) and MXFP8 (block 32) quantize all of it. Its checkpoint ships with the package as safetensors (never
pickle; 0.4 MB): trained per run, it cost 26-29 s of CPU on the critical path of every cold job, stalled jobs side
by side, and its bits moved with torch's version and thread count. `python -m pytest_vitperf.engines.models.digits`
trains it again (deterministically, on the CPU: about a minute on 2 cores, 98% top-1 on the held-out fifth) and
writes the shipped file; tests/test_digits.py checks that retraining agrees with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.engines.models.zoo import CALIBRATION_ATTR, DIGITS_CONFIG, DIGITS_MODEL, build_vit

if TYPE_CHECKING:
    import torch

SPLIT_SEED = 0
TEST_FRACTION = 0.2
EPOCHS = 60  # 40 gave 97.5%, 60 gave 98.1% (2-core CPU, 2026-11-23)
BATCH = 64
LR = 3e-3
WEIGHT_DECAY = 0.01
TRAIN_SEED = 0
CALIBRATION_IMAGES = 128  # the first of the (shuffled) training split: what a deployment calibrates on


@dataclass(frozen=True)
class Split:
    """The digits at 32x32, normalised with the training split's mean and standard deviation."""

    x_train: torch.Tensor  # [N, 1, 32, 32] float32
    y_train: torch.Tensor  # [N] int64
    x_test: torch.Tensor
    y_test: torch.Tensor
    mean: float = 0.0  # of the training split's pixels (0-1), what x was normalised with
    std: float = 1.0

    def calibration(self, batch: int = 32) -> list[torch.Tensor]:
        return list(self.x_train[:CALIBRATION_IMAGES].split(batch))


@cache
def load_split() -> Split:
    """scikit-learn's 1,797 8x8 digits, upsampled (bilinear) to 32x32; a fixed stratified 80/20 split."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = F.interpolate(torch.tensor(data.images, dtype=torch.float32)[:, None] / 16.0, size=(32, 32), mode="bilinear")
    y = torch.tensor(data.target, dtype=torch.int64)
    train, test = train_test_split(
        np.arange(len(y)), test_size=TEST_FRACTION, random_state=SPLIT_SEED, stratify=data.target
    )
    train_t, test_t = torch.from_numpy(train), torch.from_numpy(test)
    mean, std = x[train_t].mean(), x[train_t].std()
    x = (x - mean) / std
    return Split(x[train_t], y[train_t], x[test_t], y[test_t], float(mean), float(std))


def train(split: Split, epochs: int = EPOCHS, seed: int = TRAIN_SEED) -> torch.nn.Module:
    """The model trained from `seed`: AdamW with a one-cycle schedule, shuffled batches from a seeded generator.
    The same seed, torch build and thread count give the same bits (tests/test_digits.py)."""
    import torch
    import torch.nn.functional as F

    model = build_vit(seed, bmm=True, **DIGITS_CONFIG).train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    steps_per_epoch = -(-len(split.y_train) // BATCH)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, LR, total_steps=epochs * steps_per_epoch, pct_start=0.1)
    order = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for idx in torch.randperm(len(split.y_train), generator=order).split(BATCH):
            loss = F.cross_entropy(model(split.x_train[idx]), split.y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            schedule.step()
    return model.eval()


def top1(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    import torch

    with torch.inference_mode():
        return float((model(x).argmax(-1) == y).float().mean())


CHECKPOINT = Path(__file__).parent / "data" / f"{DIGITS_MODEL}.safetensors"


def trained_model(path: Path = CHECKPOINT) -> torch.nn.Module:
    """The trained model, from the shipped checkpoint, ready for the accuracy suite: its calibration images and
    timm's data config attached."""
    from safetensors.torch import load_file

    split = load_split()
    model = build_vit(TRAIN_SEED, bmm=True, **DIGITS_CONFIG).eval()
    try:
        model.load_state_dict(load_file(str(path)), strict=True)
    except Exception as exc:  # truncated, foreign, or another architecture's tensors
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RuntimeError(f"the digits checkpoint {path} is unusable ({reason}); reinstall pytest-vitperf, or train "
                           "it again: python -m pytest_vitperf.engines.models.digits") from None  # fmt: skip
    setattr(model, CALIBRATION_ATTR, split.calibration())  # every recipe calibrates it on training images
    # timm's data config for it: a folder of digit images (--vitperf-accuracy-data) is prepared as the split is
    model.pretrained_cfg = {"input_size": (1, 32, 32), "mean": (split.mean,), "std": (split.std,), "crop_pct": 1.0,
                            "interpolation": "bilinear"}  # type: ignore[assignment]  # fmt: skip
    return model


def recipe_fingerprint() -> str:
    """A hash of what decides the trained bits, besides torch: the split's and training's code, the ViT's builder
    and the constants. The shipped checkpoint records it, so that a changed recipe without a retrained checkpoint
    fails a fast test (the retraining itself is a slow one)."""
    import hashlib
    import inspect

    constants = (SPLIT_SEED, TEST_FRACTION, EPOCHS, BATCH, LR, WEIGHT_DECAY, TRAIN_SEED, sorted(DIGITS_CONFIG.items()))
    code = "".join(inspect.getsource(f) for f in (load_split, train, build_vit))
    return hashlib.sha256(f"{constants!r}\n{code}".encode()).hexdigest()[:16]


def _save(model: torch.nn.Module, path: Path, metadata: dict[str, Any]) -> None:
    from safetensors.torch import save

    from pytest_vitperf.core.files import write_atomic

    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    write_atomic(path, save(state, metadata=metadata))


def main(argv: list[str] | None = None) -> int:
    """Train the model again and write it (the shipped checkpoint by default), with what it was trained by."""
    import argparse
    import platform

    import torch

    ap = argparse.ArgumentParser(prog="python -m pytest_vitperf.engines.models.digits", description=main.__doc__)
    ap.add_argument("out", nargs="?", type=Path, default=CHECKPOINT, help=f"default: {CHECKPOINT.name} in the package")
    args = ap.parse_args(argv)
    split = load_split()
    model = train(split)
    top = top1(model, split.x_test, split.y_test)
    _save(model, args.out, {"test_top1": f"{top:.4f}", "epochs": str(EPOCHS), "torch": torch.__version__,
                            "threads": str(torch.get_num_threads()), "machine": platform.machine(),
                            "recipe": recipe_fingerprint()})  # fmt: skip
    print(f"{args.out}: top-1 {top:.2%} on the {len(split.y_test)} held-out digits")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
