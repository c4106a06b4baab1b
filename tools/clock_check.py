"""Clocks under the samples, and what reading them costs, in one process on one GPU.

    python tools/clock_check.py --out-dir DIR [--rounds 6] [pytest args...]

1. Runs `pytest --gpu-bench suites/test_vit_latency.py` in-process (default: fp16 and fp8 of vit_base_patch16_224
   at batch 1 and 64, plus the pytest arguments given) and writes every measurement, with its NVML readings, to
   DIR/measurements.json (the format of Measurement.to_dict: the traces tests/data/clocks/ holds come from here).
2. Times the FP16 batch-64 engine of that run again, alternating rounds with and without an NVML reading after each
   chunk, and writes the medians and the overhead to DIR/overhead.json.
Needs a CUDA GPU and nvidia-ml-py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest


class Keep:
    """Keeps the run's vitperf session (and its engines) after pytest.main returns."""

    session: Any = None

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from pytest_vitperf.fixtures import get_session

        self.session = get_session(session.config)


def overhead(vs: Any, rounds: int) -> dict[str, Any]:
    from pytest_vitperf.measure.timing import sample

    engine = next(e for (_, p, b), e in vs._engines.items() if p == "fp16" and b == 64)
    probe = vs.clock_probe
    timing = {**vs.timing(), "warmup_ms": 500.0}
    medians: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(rounds):
        for mode in ("without", "with"):
            reads = [] if mode == "with" else None

            def on_chunk(timed: list[float], reads: list[Any] | None = reads) -> None:
                if reads is not None:
                    reads.append(probe.read(len(timed)))

            samples = sample(engine.launch, engine.clock, **timing, on_chunk=on_chunk)
            medians[mode].append(statistics.median(samples))
    with_, without = statistics.median(medians["with"]), statistics.median(medians["without"])
    return {
        "engine": "vit_base_patch16_224 fp16 b64",
        "rounds": rounds,
        "round_medians_ms": medians,
        "median_with_ms": with_,
        "median_without_ms": without,
        "overhead": with_ / without - 1,
    }


def run_latency_suite(doc: str | None, rounds: int, batch_sizes: str) -> tuple[argparse.Namespace, int, Any]:
    """Parse `--out-dir` and `--rounds`, then run the latency suite in-process for fp16 and fp8 at `batch_sizes`
    with the remaining arguments; returns (arguments, pytest's exit code, the vitperf session or None)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=rounds)
    args, rest = parser.parse_known_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    keep = Keep()
    defaults = ["--vitperf-precisions=fp16,fp8", f"--vitperf-batch-sizes={batch_sizes}", "-p", "no:cacheprovider"]
    code = pytest.main(["--gpu-bench", "suites/test_vit_latency.py", *defaults, *rest], plugins=[keep])
    return args, int(code), keep.session


def main() -> int:
    args, code, vs = run_latency_suite(__doc__, 6, "1,64")
    if vs is None or vs.clock_probe is None:
        print("clock_check: no NVML readings (no NVIDIA GPU or nvidia-ml-py missing)", file=sys.stderr)
        return 2
    measurements = [m.to_dict() for m in vs.measurements.values()]
    (args.out_dir / "measurements.json").write_text(json.dumps(measurements, indent=1) + "\n")
    result = {"facts": vs.clock_facts, **overhead(vs, args.rounds)}
    (args.out_dir / "overhead.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "round_medians_ms"}, indent=1))
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
