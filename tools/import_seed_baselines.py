"""Write the seed reports' published RTX PRO 6000 Blackwell numbers into baselines/ (ViT-Base/16, batch 64,
GPU compute time, CUDA graphs on, no host transfers). Published figures have no raw samples, so the gate
on them is the threshold alone.

    python tools/import_seed_baselines.py [--root baselines]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_vitperf.store.baselines import Baseline, BaselineKey, JsonDirStorage

GPU = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
MODEL = "vit_base_patch16_224"
NOTE = "published, no raw samples"

# (version, precision, mean ms, seed file, what the report says about the figure, environment)
PUBLISHED = [
    (
        "10.11.0",
        "fp16",
        10.4,
        "000_78db64abb6654fff.txt",
        "mean latency, GPU-only timing, CUDA graph; kernel sum 7.6 ms",
        {"container": "nvcr.io/nvidia/pytorch:25.06-py3"},
    ),
    (
        "10.11.0",
        "nvfp4",
        7.3,
        "000_78db64abb6654fff.txt",
        "mean latency, GPU-only timing, CUDA graph; kernel sum 5.5 ms",
        {"container": "nvcr.io/nvidia/pytorch:25.06-py3"},
    ),
    (
        "10.14.1",
        "fp16",
        8.23,
        "001_ef281259ed03c116.txt",
        "GPU compute",
        {"container": "nvcr.io/nvidia/tensorrt:25.11-py3"},
    ),
    (
        "10.14.1",
        "mxfp8",
        6.55,
        "001_ef281259ed03c116.txt",
        "GPU compute",
        {"container": "nvcr.io/nvidia/tensorrt:25.11-py3"},
    ),
    (
        "10.14.1",
        "nvfp4",
        5.14,
        "001_ef281259ed03c116.txt",
        "GPU compute",
        {"container": "nvcr.io/nvidia/tensorrt:25.11-py3"},
    ),
    (
        "10.14.1",
        "fp16-sparse24",
        6.84,
        "001_ef281259ed03c116.txt",
        "GPU compute; the dense FP16 engine of the same sparsity experiment took 8.51 ms (1.24x)",
        {"container": "nvcr.io/nvidia/tensorrt:25.11-py3"},
    ),
    (
        "10.16.0",
        "fp16",
        7.90,
        "001_ef281259ed03c116.txt",
        "GPU compute",
        {"container": "custom, TensorRT 10.16.0.12, CUDA 13.1"},
    ),
    (
        "10.16.0",
        "mxfp8",
        6.52,
        "001_ef281259ed03c116.txt",
        "GPU compute",
        {"container": "custom, TensorRT 10.16.0.12, CUDA 13.1"},
    ),
    (
        "10.16.0",
        "nvfp4",
        5.16,
        "001_ef281259ed03c116.txt",
        "GPU compute",
        {"container": "custom, TensorRT 10.16.0.12, CUDA 13.1"},
    ),
]


def baselines() -> list[Baseline]:
    out = []
    for version, precision, ms, seed, what, environment in PUBLISHED:
        out.append(
            Baseline(
                key=BaselineKey("tensorrt", version, GPU, MODEL, precision, 64),
                statistic="mean",
                value=ms,
                stats={"mean": ms},
                environment=environment,
                provenance={"kind": "imported", "source": f"seed {seed}", "note": NOTE, "figure": what},
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1] / "baselines")
    args = ap.parse_args()
    JsonDirStorage(args.root).put(baselines())
    print(f"wrote {len(PUBLISHED)} baselines under {args.root}")


if __name__ == "__main__":
    main()
