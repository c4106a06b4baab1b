"""List the slowest kernels (GPU) or aten ops (CPU) of a forward pass with the category `--vitperf-kernels` gives each,
to see what a breakdown's buckets hold (and to extend pytest_vitperf/measure/kernels.py when a new library's kernel
names land in "other").

    python tools/kernel_top.py --model vit_base_patch16_224 --precision fp8 --batch 64
"""

from __future__ import annotations

import argparse
import warnings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="vit_base_patch16_224")
    ap.add_argument("--precision", default="fp16", choices=("fp32", "fp16", "bf16", "fp8", "int8"))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--compile", default="off", choices=("off", "default", "max-autotune"))
    args = ap.parse_args()
    warnings.simplefilter("ignore")

    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.engines.backends.torch import TorchBackend
    from pytest_vitperf.engines.models.zoo import build_model
    from pytest_vitperf.measure.env import probe_device
    from pytest_vitperf.measure.kernels import category, profile

    device = probe_device(0)
    engine = TorchBackend().prepare(
        build_model(args.model),
        model_name=args.model,
        precision=args.precision,
        batch=args.batch,
        device=device,
        settings=Settings(cuda_graph=False, compile=args.compile),
    )
    b = profile(engine.model, engine.inputs, engine.stream, runs=3, top=args.top)
    print(f"{args.model} {args.precision} b{args.batch} compile {args.compile} on {device.name}")
    print(b.line())
    for name, ms in b.top:
        print(f"  {ms:7.3f} ms  {category(name):11s} {name[:150]}")


if __name__ == "__main__":
    main()
