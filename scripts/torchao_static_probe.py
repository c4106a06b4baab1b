"""The documented comparison for the torch backend's FP8: the same Model Optimizer calibration executed by torchao's
static FP8 configuration (`Float8StaticActivationFloat8WeightConfig`, one per Linear, fed that Linear's calibrated
activation scale) against this project's own `realquant` FP8 Linears, and FP16; all compiled (default mode) and
replayed as one CUDA graph, timed with the plugin's sampler.

    python scripts/torchao_static_probe.py [--batch 64] [--cache-dir DIR]   # needs a CUDA GPU and torchao

Evidence for docs/benchmarks.md; not part of the suite.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from pytest_vitperf.accuracy import output_error
from pytest_vitperf.backends.torch import TorchBackend
from pytest_vitperf.env import probe_device
from pytest_vitperf.models import build_model, fixed_input, input_size
from pytest_vitperf.options import Settings
from pytest_vitperf.precision import get_precision
from pytest_vitperf.realquant import E4M3_MAX
from pytest_vitperf.recipes import apply
from pytest_vitperf.timing import TorchCudaEventClock, sample

MODEL = "vit_base_patch16_224"


def torchao_static(model: torch.nn.Module, cache_dir: Path | None) -> tuple[torch.nn.Module, int]:
    """FP16 `model` with every Linear that the FP8 recipe quantizes swapped by torchao for a static FP8 one."""
    from torchao.prototype.quantization.quant_api import Float8StaticActivationFloat8WeightConfig
    from torchao.quantization import PerTensor, quantize_

    calibrated = apply(get_precision("fp8").recipe, copy.deepcopy(model).cuda().float().eval(), cache_dir=cache_dir)
    scales = {}
    for name, m in calibrated.named_modules():
        xq, wq = getattr(m, "input_quantizer", None), getattr(m, "weight_quantizer", None)
        if isinstance(m, torch.nn.Linear) and xq is not None and wq is not None and xq.is_enabled and wq.is_enabled:
            n, k = m.weight.shape
            if n % 16 == 0 and k % 16 == 0:  # what _scaled_mm takes; the 1000-class head stays FP16, as in realquant
                scales[name] = float(xq.amax.float().max()) / E4M3_MAX
    out = copy.deepcopy(model).cuda().half().eval()
    for name, scale in scales.items():
        # One scale element per dimension of the Linear's [batch, tokens, features] input: torchao checks the rank.
        act_scale = torch.full((1, 1, 1), scale, device="cuda")
        config = Float8StaticActivationFloat8WeightConfig(act_quant_scale=act_scale, granularity=PerTensor())
        quantize_(out, config, filter_fn=lambda _m, fqn, target=name: fqn == target)
    return out, len(scales)


def graph_engine(
    model: Any, x: torch.Tensor, stream: torch.cuda.Stream, mode: Any = torch.inference_mode
) -> tuple[Any, torch.Tensor]:
    """Three calls of `model(x)` on `stream`, then one captured as a CUDA graph: (graph, its output)."""
    with mode(), torch.cuda.stream(stream):
        for _ in range(3):
            model(x)
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            out = model(x)
    stream.synchronize()
    return graph, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to measure")
        return 0
    device = probe_device(0)
    settings = Settings(cache_dir=args.cache_dir)
    base = build_model(MODEL)
    x = fixed_input((args.batch, *input_size(base)))
    with torch.inference_mode():
        reference = copy.deepcopy(base).cuda()(x.cuda()).float().cpu()
    print(f"{device.describe()}; torch {torch.__version__}; {MODEL} batch {args.batch}")
    rows = []
    for precision in ("fp16", "fp8"):
        t0 = time.perf_counter()
        engine = TorchBackend().prepare(copy.deepcopy(base), model_name=MODEL, precision=precision,
                                        batch=args.batch, device=device, settings=settings)  # fmt: skip
        prep = time.perf_counter() - t0
        rows.append((f"{precision} (torch backend)", engine.launch, engine.clock, engine.output(), prep))
    import torchao

    t0 = time.perf_counter()
    ao, n = torchao_static(base, args.cache_dir)
    stream = torch.cuda.Stream()
    graph, out = graph_engine(torch.compile(ao), x.cuda().half(), stream)
    graph.replay()  # capture only records: the output holds the result after a replay
    stream.synchronize()
    rows.append((f"fp8 (torchao {torchao.__version__} static, {n} Linears)", graph.replay, TorchCudaEventClock(stream),
                 out.float().cpu(), time.perf_counter() - t0))  # fmt: skip
    fp16_ms = None
    for name, launch, clock, output, prep in rows:
        ms = statistics.median(sample(launch, clock, warmup_ms=2000, duration_ms=3000, min_iterations=10))
        fp16_ms = fp16_ms or ms
        err = output_error(reference, output)
        print(f"{name}: median {ms:.3f} ms, {fp16_ms / ms:.2f}x fp16, cosine vs fp32 {err.cosine:.5f}, "
              f"prepare {prep:.1f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
