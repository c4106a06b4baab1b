"""Check the plugin's GPU timer against a plain CUDA-event loop over CUDA-graph replays, in one process.

    python scripts/timer_check.py [--out results.json] [pytest args...]

Runs `pytest --gpu-bench suites/ -k "fp16 or bf16"` for vit_base_patch16_224 batch 64 in-process,
then times the same model with a hand-written loop (torch only, none of the plugin's timing code),
and prints both medians, their ratio and the plugin's CoV. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import pytest


class Collect:
    """Tiny plugin that keeps the vitperf measurements after pytest.main returns."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pytest_vitperf.fixtures import get_session

        self.results = [m.to_dict() for m in get_session(session.config).measurements.values()]


def plain_loop(precision: str, batch: int, iterations: int = 1000) -> dict[str, float]:
    import timm
    import torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    torch.manual_seed(0)
    model = timm.create_model("vit_base_patch16_224", pretrained=False).eval().cuda().to(dtype)
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=dtype)
    stream = torch.cuda.Stream()
    with torch.inference_mode(), torch.cuda.stream(stream):
        for _ in range(3):
            model(x)
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            model(x)
    stream.synchronize()
    t0 = time.perf_counter()
    with torch.cuda.stream(stream):
        while time.perf_counter() - t0 < 0.5:
            graph.replay()
            stream.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
        for s, e in zip(starts, ends, strict=False):
            s.record(stream)
            graph.replay()
            e.record(stream)
        first, last = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        first.record(stream)
        for _ in range(iterations):
            graph.replay()
        last.record(stream)
    stream.synchronize()
    per = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=False)]
    return {
        "median_ms": statistics.median(per),
        "mean_ms": statistics.fmean(per),
        "mean_of_one_pair_ms": first.elapsed_time(last) / iterations,
        "iterations": iterations,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args, extra = ap.parse_known_args()
    collect = Collect()
    argv = [
        "--gpu-bench",
        "suites/",
        "-k",
        "fp16 or bf16",
        "--vitperf-models",
        "vit_base_patch16_224",
        "--vitperf-batch-sizes",
        "64",
        *extra,
    ]
    code = pytest.main(argv, plugins=[collect])
    report: dict[str, Any] = {"pytest_args": argv, "pytest_exit": int(code), "cases": []}
    for m in collect.results:
        spec, stats = m["spec"], m["stats"]
        ref = plain_loop(spec["precision"], spec["batch"])
        ratio = stats["median"] / ref["median_ms"]
        report["cases"].append(
            {
                "device": spec["device"],
                "precision": spec["precision"],
                "batch": spec["batch"],
                "plugin_median_ms": stats["median"],
                "plugin_cov": stats["cov"],
                "plugin_n": stats["n"],
                "plain_loop": ref,
                "ratio": ratio,
                "within_5pct": abs(ratio - 1) <= 0.05,
                "cov_le_2pct": stats["cov"] <= 0.02,
            }
        )
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    ok = report["cases"] and all(c["within_5pct"] and c["cov_le_2pct"] for c in report["cases"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
