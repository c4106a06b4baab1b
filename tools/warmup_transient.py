"""How long does a load at the power cap take to settle, from a long idle and after short pauses?

One eager model at one batch, called back to back for a few seconds at a time: every call's CUDA-event time and the
SM clock NVML reads after it. Between phases the GPU idles for the pause named. Prints, per phase, each 0.25 s
window's median against the phase's second half, and the calls' spread from 2 to 4 s and from 4 s on; writes every
call to OUT/warmup.json. The answer sets GPU_WARMUP_MS (pytest_vitperf/session.py).

    python tools/warmup_transient.py --out-dir DIR [--model vit_large_patch16_224 --batch 64] [--phases cold,gap1]

--batch may list several (16,32,64): each runs the phases in turn, and its phases are named bBATCH-PHASE. What each
batch gave is printed and written as soon as it has run, with the median SM clock and board power of its phase's
second half: a batch whose clock holds at its top there never met the power cap.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

# (phase, pause before it in s, seconds of calls)
PHASES = (("cold", 20.0, 10.0), ("gap3", 3.0, 8.0), ("gap1", 1.0, 8.0), ("gap10", 10.0, 8.0), ("gap3b", 3.0, 8.0))


def spread(ms: list[float], start_s: float, end_s: float) -> float:
    """The CoV (%) of the calls that began between `start_s` and `end_s` into the phase."""
    t, kept = 0.0, []
    for y in ms:
        if start_s <= t / 1000 < end_s:
            kept.append(y)
        t += y
    return 100 * statistics.pstdev(kept) / statistics.fmean(kept)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--model", default="vit_large_patch16_224")
    ap.add_argument("--batch", default="64", help="a batch size, or several: 16,32,64")
    ap.add_argument("--phases", default=",".join(p[0] for p in PHASES), help="which of the phases, in their order")
    args = ap.parse_args()
    chosen = [p for p in PHASES if p[0] in args.phases.split(",")]
    import pynvml
    import timm
    import torch

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    model = timm.create_model(args.model).cuda().half().eval()
    out: dict[str, dict[str, list[float]]] = {}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for batch in (int(b) for b in args.batch.split(",")):
        x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.half)
        with torch.inference_mode():
            for _ in range(3):
                model(x)
            torch.cuda.synchronize()
            for name, pause_s, seconds in chosen:
                time.sleep(pause_s)
                ms: list[float] = []
                mhz: list[float] = []
                watts: list[float] = []
                began = time.perf_counter()
                while time.perf_counter() - began < seconds:
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    model(x)
                    b.record()
                    b.synchronize()
                    ms.append(a.elapsed_time(b))
                    mhz.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
                    watts.append(pynvml.nvmlDeviceGetPowerUsage(handle) / 1000)
                out[f"b{batch}-{name}"] = {"ms": ms, "mhz": mhz, "watts": watts}
                _tell(f"b{batch}-{name}", out[f"b{batch}-{name}"])
        (args.out_dir / "warmup.json").write_text(json.dumps(out))  # after each batch: a run cut short keeps it


def _tell(name: str, v: dict[str, list[float]]) -> None:
    ms, half = v["ms"], len(v["ms"]) // 2
    steady = statistics.median(ms[half:])
    windows, window, t = [], [], 0.0
    for y in ms:
        window.append(y)
        t += y
        if t >= 250:
            windows.append(f"{100 * (statistics.median(window) / steady - 1):+.1f}")
            window, t = [], 0.0
    print(f"{name}: {len(ms)} calls, {steady:.3f} ms, second half at {statistics.median(v['mhz'][half:]):.0f} MHz "
          f"and {statistics.median(v['watts'][half:]):.0f} W; CoV 2-4 s {spread(ms, 2, 4):.2f}%, from 4 s "
          f"{spread(ms, 4, 1e9):.2f}%; 0.25 s windows against the second half (%): {' '.join(windows[:20])}",
          flush=True)


if __name__ == "__main__":
    main()
