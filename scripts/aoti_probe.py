"""Can an AOTInductor package stand in for torch.compile in a warm run? vit_base in FP16 at one batch, in two steps,
each in its own process as a warm run would be:

    python scripts/aoti_probe.py build vb64.pt2 64   # torch.export, then aoti_compile_and_package: times each
    python scripts/aoti_probe.py load vb64.pt2 64    # aoti_load_package, first calls, CUDA graph capture, replay

Needs a CUDA GPU. On an H100 with torch 2.11.0 the load crashed (docs/benchmarks.md); faulthandler prints where.
"""

import faulthandler
import sys
import time

import torch

from pytest_vitperf.models import build_model

faulthandler.enable()


def main(step: str, path: str, batch: int) -> None:
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.half)
    t = time.perf_counter()
    if step == "build":
        model = build_model("vit_base_patch16_224").cuda().half().eval()
        print(f"model built in {time.perf_counter() - t:.1f} s", flush=True)
        t = time.perf_counter()
        with torch.inference_mode():
            exported = torch.export.export(model, (x,))
        print(f"torch.export in {time.perf_counter() - t:.1f} s", flush=True)
        t = time.perf_counter()
        torch._inductor.aoti_compile_and_package(exported, package_path=path)
        print(f"aoti_compile_and_package in {time.perf_counter() - t:.1f} s: {path}", flush=True)
        return
    runner = torch._inductor.aoti_load_package(path)
    print(f"aoti_load_package in {time.perf_counter() - t:.2f} s", flush=True)
    stream = torch.cuda.Stream()
    with torch.inference_mode(), torch.cuda.stream(stream):
        for _ in range(3):
            runner(x)
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            out = runner(x)
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


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("build", "load"):
        sys.exit("usage: python scripts/aoti_probe.py build|load PACKAGE.pt2 BATCH")
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
