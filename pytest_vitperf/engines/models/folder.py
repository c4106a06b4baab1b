"""A user's own labelled images for the accuracy suite (--vitperf-accuracy-data): a folder with one sub-folder of
images per class, torchvision's ImageFolder layout. The classes are the sub-folders in sorted order, which must be
the order of the model's head (ImageNet's synset folders, n01440764 ..., sort into it).

Each image is prepared as timm's data config for the model says (resize, centre crop, mean and std, from the
model's pretrained config), at the input size the model's engines take, so that a checkpoint is judged on the
inputs it was trained on. A seeded sample of the images is set apart for calibration: every quantized engine of the
model calibrates on it, as a deployment calibrates on data it is not scored on. The rest are judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.engines.models.zoo import CALIBRATION_ATTR, input_size

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

CALIBRATION_IMAGES = 128  # at most; a quarter of a smaller folder
SPLIT_SEED = 0
FIX = "give a folder with one sub-folder of images per class: --vitperf-accuracy-data DIR"


@dataclass(frozen=True)
class Labelled:
    """The judged images of a folder, prepared for its model, and their labels."""

    x: torch.Tensor  # [N, C, H, W] float32
    y: torch.Tensor  # [N] int64
    task: str  # what the summary calls it


def judged_images(root: Path, model: torch.nn.Module, name: str) -> Labelled:
    """The images of `root` that are not set apart for calibration, prepared for `model` (called `name`)."""
    import torch

    dataset = _dataset(root, model, name)
    judged = _split(len(dataset))[1]
    x = torch.stack([dataset[i][0] for i in judged])
    y = torch.tensor([dataset.targets[i] for i in judged], dtype=torch.int64)
    return Labelled(x, y, f"{root.name} folder, {name}")


def calibrate_on(model: torch.nn.Module, root: Path, name: str, batch: int = 32) -> None:
    """Have every recipe calibrate `model` on the sample of `root` set apart for it (recipes.calibration_batches)."""
    import torch

    dataset = _dataset(root, model, name)
    held = _split(len(dataset))[0]
    if held:  # a folder of fewer than 4 images sets none apart: the recipes' synthetic inputs calibrate
        setattr(model, CALIBRATION_ATTR, list(torch.stack([dataset[i][0] for i in held]).split(batch)))


def in_batches(run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, batch: int) -> torch.Tensor:
    """`run` over `x` in batches of exactly `batch` (an engine's static shape): the last one is padded with copies of
    its first image, whose outputs are dropped."""
    import torch

    outs = []
    for start in range(0, len(x), batch):
        chunk = x[start : start + batch]
        pad = batch - len(chunk)
        if pad:
            chunk = torch.cat([chunk, chunk[:1].expand(pad, *chunk.shape[1:])])
        outs.append(run(chunk)[: batch - pad].float().cpu())
    return torch.cat(outs)


def _split(n: int) -> tuple[list[int], list[int]]:
    """(calibration, judged) indices: a seeded permutation's first images, then the rest in folder order."""
    import torch

    order = torch.randperm(n, generator=torch.Generator().manual_seed(SPLIT_SEED)).tolist()
    held = set(order[: min(CALIBRATION_IMAGES, n // 4)])
    return sorted(held), [i for i in range(n) if i not in held]


@cache
def _dataset_of(root: Path, config: tuple[tuple[str, Any], ...], mode: str) -> Any:
    import timm.data
    from torchvision.datasets import ImageFolder

    def load(path: str) -> Any:
        from PIL import Image

        try:
            with Image.open(path) as image:
                return image.convert(mode)
        except (OSError, ValueError) as exc:  # PIL's UnidentifiedImageError is an OSError
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise VitperfError(f"{path} is not an image that can be read ({why}); remove or replace it, then run "
                               "again: pytest --gpu-bench suites/test_accuracy.py") from None  # fmt: skip

    if not root.is_dir():
        raise VitperfError(f"accuracy data {root} is not a folder; {FIX}")
    try:
        return ImageFolder(str(root), transform=timm.data.create_transform(**dict(config)), loader=load)
    except FileNotFoundError as exc:  # no class folders, or a class folder without images
        raise VitperfError(f"accuracy data {root}: {str(exc).splitlines()[0]}; {FIX}") from None


def _dataset(root: Path, model: torch.nn.Module, name: str) -> Any:
    """The folder as a dataset prepared for `model`; a head that does not match its classes is refused."""
    import timm.data

    size = input_size(model)
    config = timm.data.resolve_data_config({"input_size": size}, model=model)
    dataset = _dataset_of(root, tuple(sorted(config.items())), "L" if size[0] == 1 else "RGB")
    head = getattr(model, "num_classes", None)
    if isinstance(head, int) and head != len(dataset.classes):
        raise VitperfError(
            f"accuracy data {root} has {len(dataset.classes)} class folders, and {name}'s head has {head} classes; "
            "give one sub-folder per class of the model, named to sort in the head's order: --vitperf-accuracy-data DIR"
        )
    return dataset
