"""What --vitperf-cold changes, and whether its flush is big enough, in one process on one GPU.

    python scripts/cold_check.py --out-dir DIR [--rounds 5] [pytest args...]

Runs `pytest --gpu-bench suites/test_vit_latency.py` in-process (default: fp16 and fp8 of vit_base_patch16_224 at
batch 1, plus the pytest arguments given), then times each engine of that run again in alternating rounds: warm
(no flush), and cold with a flush of 1x (the default), 2x and 4x the L2 size, on the torch clock; then warm and cold
(2x) on the cuda-python clock (the one the TensorRT backends time with), on the same stream. If 2x and 4x agree with
1x, a flush of the L2's size evicts what there is to evict; if the two clocks agree, either times the same work.
Writes DIR/cold.json and prints it.
Needs a CUDA GPU.
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

from clock_check import run_latency_suite  # this folder is on sys.path when run as a script


def rounds_of(engine: Any, timing: dict[str, Any], rounds: int) -> dict[str, Any]:
    import torch

    from pytest_vitperf import timing as t

    cuda_python = t.CudaPythonEventClock(engine.stream.cuda_stream)
    modes: dict[str, tuple[Any, int | None]] = {
        "warm": (engine.clock, None),
        "cold 1x L2": (engine.clock, 1),
        "cold 2x L2": (engine.clock, 2),
        "cold 4x L2": (engine.clock, 4),
        "warm, cuda-python clock": (cuda_python, None),
        "cold 2x L2, cuda-python clock": (cuda_python, 2),
    }
    medians: dict[str, list[float]] = {m: [] for m in modes}
    default = t.FLUSH_TIMES
    try:
        for _ in range(rounds):
            for mode, (clock, times) in modes.items():
                t.FLUSH_TIMES = times or default
                with torch.cuda.stream(engine.stream):  # a graph replays on torch's current stream
                    samples = t.sample(engine.launch, clock, **timing, cold=times is not None)
                medians[mode].append(statistics.median(samples))
    finally:
        t.FLUSH_TIMES = default
    return {
        "engine": f"{engine.model_name} {engine.precision} b{engine.batch}",
        "median_ms": {m: statistics.median(v) for m, v in medians.items()},
        "round_medians_ms": medians,
    }


def main() -> int:
    args, code, vs = run_latency_suite(__doc__, 5, "1")
    if vs is None or vs.device.sm is None:
        print("cold_check: needs a CUDA GPU", file=sys.stderr)
        return 2
    timing = {k: v for k, v in vs.timing().items() if k != "cold"}
    result = {
        "device": vs.device.name,
        "timing": timing,
        "engines": [rounds_of(e, timing, args.rounds) for e in vs._engines.values()],
    }
    (args.out_dir / "cold.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps([{e["engine"]: e["median_ms"]} for e in result["engines"]], indent=1))
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
