"""Where does the batch-1 flip come from? vit_base FP16 at batch 1 has read 0.58 ms in some rounds and 0.62 ms in
others, on one engine in one process at one clock ("Cold mode" in
docs/measurements/2026-11-22-h100-clocks-under-the-samples.md).

    python tools/flip_probe.py --out-dir DIR [--rounds 40] [pytest args...]

Runs the latency suite in-process for fp16 at batch 1, then times the engine in short rounds (0.1 s warm-up, 0.3 s
of samples) with an NVML reading per round. Then it times the engine again in a second set of rounds: without the
other engines, where the run built others (--vitperf-batch-sizes=64,1); after building and running a batch-64
engine, where it built the batch-1 engine alone. Last, it profiles rounds until it has profiled one of each level
of the first set (the torch profiler over 50 graph replays; one round where there is one level): per kernel, mean
device time, and the span from the first kernel's start to the last kernel's end per replay. If the kernels sum to
the same time at both levels and only the span differs, the time goes between kernels (launch scheduling), not into
them.
Writes DIR/flip.json and prints a summary. Needs a CUDA GPU.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from collections import defaultdict
from typing import Any

from clock_check import run_latency_suite  # this folder is on sys.path when run as a script

REPLAYS = 50


def profile(engine: Any) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch.cuda.stream(engine.stream), torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPLAYS):
            engine.launch()
        engine.stream.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and e.device_time > 0]
    kernels.sort(key=lambda e: e.time_range.start)
    per_kernel: dict[str, float] = defaultdict(float)
    for e in kernels:
        per_kernel[e.name] += e.device_time / 1e3 / REPLAYS  # us -> ms per replay
    per_replay = len(kernels) // REPLAYS
    spans, gaps = [], []
    for r in range(REPLAYS):
        run = kernels[r * per_replay : (r + 1) * per_replay]
        if not run:
            continue
        spans.append((run[-1].time_range.end - run[0].time_range.start) / 1e3)
        gaps.append(sum(max(0, b.time_range.start - a.time_range.end) for a, b in itertools.pairwise(run)) / 1e3)
    return {
        "kernels_per_replay": per_replay,
        "kernel_sum_ms": sum(per_kernel.values()),
        "span_ms": statistics.median(spans) if spans else None,
        "gaps_ms": statistics.median(gaps) if gaps else None,
        "per_kernel_ms": dict(sorted(per_kernel.items(), key=lambda kv: -kv[1])),
    }


def main() -> int:
    from pytest_vitperf.measure import timing as t

    args, code, vs = run_latency_suite(__doc__, 40, "1")
    if vs is None or vs.device.sm is None:
        print("flip_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    (engine,) = [e for e in vs._engines.values() if e.precision == "fp16" and e.batch == 1]
    timing: dict[str, Any] = {"warmup_ms": 100.0, "duration_ms": 300.0, "min_iterations": 10}

    def round_median() -> float:
        return statistics.median(t.sample(engine.launch, engine.clock, **timing))

    def timed_rounds() -> list[dict[str, Any]]:
        out = []
        for _ in range(args.rounds):
            median = round_median()
            clocks = vs.clock_probe.read(1).to_dict() if vs.clock_probe is not None else None
            out.append({"median_ms": median, "clocks": clocks})
        return out

    rounds = timed_rounds()
    alone: list[dict[str, Any]] = []
    if len(vs._engines) > 1:  # other engines built before it (e.g. --vitperf-batch-sizes=64,1): time it without them
        import gc

        import torch

        vs._engines = {k: e for k, e in vs._engines.items() if e is engine}
        gc.collect()
        torch.cuda.empty_cache()
        alone = timed_rounds()
        print("round medians without the other engines (ms):", " ".join(f"{r['median_ms']:.4f}" for r in alone))
    else:  # built alone: does building and running a batch-64 engine now slow this one, captured before it?
        other = vs.engine(engine.model_name, "fp16", 64)
        t.sample(other.launch, other.clock, warmup_ms=0.0, duration_ms=2000.0, min_iterations=1)
        alone = timed_rounds()
        print("round medians after a batch-64 engine (ms):", " ".join(f"{r['median_ms']:.4f}" for r in alone))
    medians = [r["median_ms"] for r in rounds]
    cut = (min(medians) + max(medians)) / 2
    two_levels = max(medians) - min(medians) >= 0.01 * min(medians)
    profiled: dict[str, dict[str, Any]] = {}
    for _ in range(4 * args.rounds if two_levels else 0):
        if len(profiled) == 2:
            break
        median = round_median()
        level = "slow" if median > cut else "fast"
        if level not in profiled:
            profiled[level] = {"round_median_ms": median, **profile(engine)}
    if not profiled:  # one level: profile it anyway, to compare with another process's engine
        profiled["only"] = {"round_median_ms": round_median(), **profile(engine)}
    result = {"device": vs.device.name, "engine": "vit_base fp16 b1", "rounds": rounds, "rounds_alone": alone,
              "profiled": profiled}  # fmt: skip
    (args.out_dir / "flip.json").write_text(json.dumps(result, indent=1) + "\n")
    print("round medians (ms):", " ".join(f"{m:.4f}" for m in medians))
    for level, p in profiled.items():
        print(
            f"{level}: round {p['round_median_ms']:.4f} ms; {p['kernels_per_replay']} kernels summing to "
            f"{p['kernel_sum_ms']:.4f} ms; span {p['span_ms']:.4f} ms; gaps {p['gaps_ms']:.4f} ms"
        )
    if len(profiled) == 2:
        slow, fast = profiled["slow"]["per_kernel_ms"], profiled["fast"]["per_kernel_ms"]
        diffs = sorted(((slow.get(k, 0.0) - fast.get(k, 0.0), k) for k in set(slow) | set(fast)), reverse=True)
        for d, k in diffs[:8]:
            print(f"  {d * 1e3:+8.2f} us  {k[:110]}")
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
