"""Export a zoo model through a precision recipe to ONNX, and report time, size and quantization coverage.

    python scripts/export_onnx.py --model vit_tiny_patch16_224 --recipe nvfp4 --out tests/data
    python scripts/export_onnx.py --model vit_base_patch16_224 --recipe nvfp4 --out exports --split-mb 15

Every recipe runs on a CPU or a GPU (the model goes to CUDA when there is one; on a CPU the block formats use
pytest_vitperf.cpu_quant's kernels, which reproduce Model Optimizer's GPU exports bit for bit). The file is
named <model>-<recipe>-b<batch>.onnx. `--split-mb` also writes the file in numbered parts no larger than that,
for transports with a per-file limit; `cat <name>.part* > <name>` joins them.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--recipe", required=True, action="append", help="repeatable")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--split-mb", type=float, default=0)
    args = ap.parse_args()

    import onnx
    import torch

    from pytest_vitperf.coverage import quantization_coverage
    from pytest_vitperf.models import build_model
    from pytest_vitperf.recipes import export_onnx

    args.out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build_model(args.model).to(device)
    for recipe in args.recipe:
        t0 = time.perf_counter()
        data = export_onnx(recipe, model, args.batch)
        seconds = time.perf_counter() - t0
        path = args.out / f"{args.model}-{recipe}-b{args.batch}.onnx"
        path.write_bytes(data)
        cov = quantization_coverage(onnx.load_from_string(data))
        record = {
            "model": args.model,
            "recipe": recipe,
            "batch": args.batch,
            "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "seconds": round(seconds, 1),
            "bytes": len(data),
            "coverage": cov.summary(),
            "fraction_quantized": round(cov.fraction, 4),
        }
        print(json.dumps(record), flush=True)
        if args.split_mb:
            step = int(args.split_mb * 1e6)
            for i in range(0, len(data), step):
                (args.out / f"{path.name}.part{i // step:02d}").write_bytes(data[i : i + step])
            path.unlink()


if __name__ == "__main__":
    main()
