"""List the slowest GPU kernels of one eager forward pass with the category `--vitperf-kernels` gives each,
to see what a breakdown's buckets hold (and to extend pytest_vitperf/kernels.py when a new library's kernel
names land in "other").

    python scripts/kernel_top.py --model vit_base_patch16_224 --precision fp8 --batch 64
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
    args = ap.parse_args()
    warnings.simplefilter("ignore")

    import torch

    from pytest_vitperf.backends.torch import _DTYPES, _TORCHAO, _torchao_quantize
    from pytest_vitperf.kernels import category, profile
    from pytest_vitperf.models import build_model, input_size

    dtype = getattr(torch, _DTYPES[args.precision])
    model = build_model(args.model).cuda().to(dtype).eval()
    if args.precision in _TORCHAO:
        _torchao_quantize(model, args.precision)
    x = torch.randn(args.batch, *input_size(model), device="cuda", dtype=dtype)
    b = profile(model, x, torch.cuda.Stream(), runs=3, top=args.top)
    print(f"{args.model} {args.precision} b{args.batch} on {torch.cuda.get_device_name()}")
    print(b.line())
    for name, ms in b.top:
        print(f"  {ms:7.3f} ms  {category(name):11s} {name[:150]}")


if __name__ == "__main__":
    main()
