"""Which step of building a second engine slows the replay of a first one? vit_base FP16 at batch 1, compiled and
captured alone, reads about 0.583 ms on an H100; once the same process has built and run a batch-64 engine, the
same graph replays at about 0.62 ms, with the same kernels and the time between them grown (docs/benchmarks.md).
This times the batch-1 replay after each step of that build, in the order a second engine takes them:

    python scripts/gap_probe.py

Steps: 20 GB allocated and written, then freed; a graph of 2000 small kernels captured and replayed; the batch-64
model compiled and run eagerly; its graph captured and replayed. Needs a CUDA GPU. On one H100 it read 0.638-0.647 ms
from the first step to the last: there, plain torch replays at the slow level from the start.
"""

import copy
import statistics

import torch
from torchao_static_probe import graph_engine  # this folder is on sys.path when run as a script

from pytest_vitperf.models import build_model


def replay_ms(graph: torch.cuda.CUDAGraph, stream: torch.cuda.Stream, n: int = 400) -> float:
    """The median of n back-to-back replays, each between two events on `stream`, as the suite times them."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    with torch.cuda.stream(stream):
        for _ in range(50):
            graph.replay()
        for start, end in events:
            start.record(stream)
            graph.replay()
            end.record(stream)
    stream.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def main() -> None:
    torch.set_grad_enabled(False)
    fp32 = build_model("vit_base_patch16_224")
    stream = torch.cuda.Stream()
    b1 = torch.compile(copy.deepcopy(fp32).cuda().half().eval(), dynamic=False)
    x1 = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half)
    g1, _ = graph_engine(b1, x1, stream, torch.no_grad)

    def show(step: str) -> None:
        print(f"{step:<42} b1 replay {replay_ms(g1, stream):.4f} ms", flush=True)

    show("alone")
    show("alone, again")
    big = torch.empty(20 << 30, dtype=torch.uint8, device="cuda").fill_(1)
    show("20 GB allocated and written")
    del big
    torch.cuda.empty_cache()
    show("20 GB freed")
    y = torch.zeros(16, device="cuda")
    small, _ = graph_engine(lambda t: [t.add_(1) for _ in range(2000)], y, stream, torch.no_grad)
    small.replay()
    show("a graph of 2000 small kernels")
    b64 = torch.compile(copy.deepcopy(fp32).cuda().half().eval(), dynamic=False)
    x64 = torch.randn(64, 3, 224, 224, device="cuda", dtype=torch.half)
    with torch.cuda.stream(stream):
        for _ in range(3):
            b64(x64)
    stream.synchronize()
    show("batch 64 compiled and run eagerly")
    g64, _ = graph_engine(b64, x64, stream, torch.no_grad)
    show("batch 64 captured")
    replay_ms(g64, stream, 200)
    show("batch 64 replayed")
    del g64
    torch.cuda.empty_cache()
    show("batch 64 graph freed")


if __name__ == "__main__":
    main()
