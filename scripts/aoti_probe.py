"""Can a compiled artifact stand in for torch.compile in a warm run? vit_base in FP16 at one batch, each step in its
own process as a warm run would be. Two formats:

    python scripts/aoti_probe.py build vb64.pt2 64          # AOTInductor: torch.export, aoti_compile_and_package
    python scripts/aoti_probe.py load vb64.pt2 64           # aoti_load_package, first calls, capture, replay
    python scripts/aoti_probe.py dynamo-build vb64.dyn 64   # dynamo's AOT precompile (experimental, private API)
    python scripts/aoti_probe.py dynamo-load vb64.dyn 64    # its load, without tracing, then the same
    python scripts/aoti_probe.py jit - 64                   # what a warm run does now: torch.compile, first calls

Needs a CUDA GPU; set TORCHINDUCTOR_CACHE_DIR to one folder for every step. On an H100 with torch 2.11.0 the AOTInductor
load crashed (docs/benchmarks.md); faulthandler prints where.
"""

import faulthandler
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torchao_static_probe import graph_engine  # this folder is on sys.path when run as a script

from pytest_vitperf.models import build_model

faulthandler.enable()
STEPS = ("build", "load", "dynamo-build", "dynamo-load", "jit")


def ready(run: Any, x: torch.Tensor, t: float, mode: Any = torch.inference_mode) -> None:
    """First calls, CUDA graph capture, then the replay's time; `t` is when the step started."""
    stream = torch.cuda.Stream()
    graph, out = graph_engine(run, x, stream, mode)
    with torch.cuda.stream(stream):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(50):
            graph.replay()
        start.record(stream)
        for _ in range(200):
            graph.replay()
        end.record(stream)
        end.synchronize()
    finite = bool(torch.isfinite(out).all())
    print(f"ready in {time.perf_counter() - t:.2f} s; replay {start.elapsed_time(end) / 200:.3f} ms; finite {finite}")


def main(step: str, path: str, batch: int) -> None:
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.half)
    t = time.perf_counter()
    if step == "load":
        runner = torch._inductor.aoti_load_package(path)
        print(f"aoti_load_package in {time.perf_counter() - t:.2f} s", flush=True)
        ready(runner, x, t)
        return
    model = build_model("vit_base_patch16_224").cuda().half().eval()
    print(f"model built in {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    if step == "build":
        with torch.inference_mode():
            exported = torch.export.export(model, (x,))
        print(f"torch.export in {time.perf_counter() - t:.1f} s", flush=True)
        t = time.perf_counter()
        torch._inductor.aoti_compile_and_package(exported, package_path=path)
        print(f"aoti_compile_and_package in {time.perf_counter() - t:.1f} s: {path}", flush=True)
        return
    if step == "jit":
        ready(torch.compile(model, dynamic=False), x, t)
        return
    torch._dynamo.config.enable_aot_compile = True
    compiled: Any = torch.compile(model, fullgraph=True, dynamic=False)
    if step == "dynamo-build":
        from torch._dynamo.aot_compile import ModelInput

        with torch.no_grad():  # its guards check the input's dispatch keys, which inference mode changes
            compiled._aot_compile([ModelInput((x,), {}, [])])
        compiled._save_aot_compiled_module(path)
        print(f"aot_compile and save in {time.perf_counter() - t:.1f} s: {Path(path).stat().st_size} bytes", flush=True)
        return
    compiled._load_aot_compiled_module(Path(path).read_bytes())
    print(f"loaded in {time.perf_counter() - t:.2f} s", flush=True)
    ready(compiled, x, t, torch.no_grad)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in STEPS:
        sys.exit(f"usage: python scripts/aoti_probe.py {'|'.join(STEPS)} PATH BATCH")
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
