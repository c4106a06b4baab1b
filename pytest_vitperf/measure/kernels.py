"""Where an engine's time goes, by kind of kernel: the torch profiler's per-kernel device time (GPU) or per-op
self time (CPU), grouped into GEMM, attention, quantize, normalisation and elementwise.

This is the first question when a precision is not faster: if FP8 GEMMs got quicker but quantize kernels
appeared around them, the GEMM share shrinks and the quantize share eats the gain. Grouping is by kernel name
(cuBLAS/CUTLASS, flash attention, Triton kernels fused by Inductor, aten ops on a CPU), so it is a reading
aid with an "other" bucket, not an exact accounting. The profiled run is separate from the timed one and runs
the model without CUDA graph replay, so kernels are visible one by one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

# First match wins. Quantize first: its names (QuantizeLinear, an Inductor kernel fusing abs/amax/cast) may also
# say "linear"; GEMM kernel names carry element types (e4m3, i8) but never quantiz/amax. Inductor names a
# pointwise or reduction kernel after the ops it fused, so the static-scale quantize that feeds an FP8 GEMM reads
# `triton_poi_fused__scaled_mm__to_copy_clamp_div_gelu_...`: a quantize (fused into GELU or LayerNorm), never a GEMM.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("quantize", r"quantiz|amax|float8|^triton_(poi|per|red)_fused\w*(_scaled_mm|_int_mm|clamp_div|round)"),
    ("attention", r"flash|fmha|attention|sdpa|softmax"),
    ("gemm", r"gemm|matmul|_mm\b|_mm_|mm$|addmm|bmm|linear|cutlass|xmma|cublas|nvjet|conv"),
    ("norm", r"norm"),
    ("elementwise", r"elementwise|vectorized|triton_poi|triton_per|triton_red|gelu|add|mul|copy|cat|clone"),
)


PROFILES = 5  # repeats of a profile: the spread that kernel_diff's intervals take


def category(name: str) -> str:
    lowered = name.lower()
    for cat, pattern in CATEGORIES:
        if re.search(pattern, lowered):
            return cat
    return "other"


@dataclass(frozen=True)
class Breakdown:
    per_run_ms: float  # summed kernel (or op) time per inference
    by_category: dict[str, float]  # ms per inference, largest first
    top: list[tuple[str, float]] = field(default_factory=list)  # (kernel, ms per inference), slowest first
    device: str = "cuda"
    profiles: list[dict[str, float]] = field(default_factory=list)  # each repeat's ms per kernel (kernel_diff)

    def line(self) -> str:
        total = self.per_run_ms or 1.0
        parts = ", ".join(f"{c} {ms / total:.0%}" for c, ms in self.by_category.items())
        what = "kernel time" if self.device == "cuda" else "op self time"
        slowest = f"; slowest {self.top[0][0][:70]} ({self.top[0][1]:.3f} ms)" if self.top else ""
        return f"{self.per_run_ms:.3f} ms {what}: {parts}{slowest}"

    def as_dict(self) -> dict[str, Any]:
        return {"per_run_ms": self.per_run_ms, "by_category": self.by_category, "top": self.top, "device": self.device,
                "profiles": self.profiles}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Breakdown:
        top = [(str(name), float(ms)) for name, ms in d.get("top", [])]
        profiles = [{str(k): float(v) for k, v in p.items()} for p in d.get("profiles", [])]
        return cls(float(d["per_run_ms"]), dict(d["by_category"]), top, str(d.get("device", "cuda")), profiles)


def breakdown(times_ms: dict[str, float], runs: int, device: str = "cuda", top: int = 5) -> Breakdown:
    """Group total milliseconds per kernel name over `runs` inferences."""
    by_cat: dict[str, float] = {}
    for name, ms in times_ms.items():
        by_cat[category(name)] = by_cat.get(category(name), 0.0) + ms / runs
    slowest = sorted(times_ms.items(), key=lambda kv: -kv[1])[:top]
    return Breakdown(
        per_run_ms=sum(times_ms.values()) / runs,
        by_category=dict(sorted(by_cat.items(), key=lambda kv: -kv[1])),
        top=[(name, ms / runs) for name, ms in slowest],
        device=device,
    )


def kernel_times(run: Callable[[], Any], stream: Any = None, runs: int = 10) -> dict[str, float]:
    """Milliseconds per call of `run` in each kernel (on `stream`, a GPU) or each op's self time (no stream, a CPU:
    aten ops and the project's own labelled regions, such as an injected delay), by the profiler's name."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    cuda = stream is not None
    activities = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with torch.inference_mode():
        run()  # anything lazy happens before the profiled runs
        with torch_profile(activities=activities) as prof:
            if cuda:
                with torch.cuda.stream(stream):
                    for _ in range(runs):
                        run()
                stream.synchronize()
            else:
                for _ in range(runs):
                    run()
    times: dict[str, float] = {}
    for e in prof.key_averages():
        if cuda:
            us = float(getattr(e, "self_device_time_total", 0.0))
            if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
                continue
        else:
            if not e.key.startswith(("aten::", "vitperf::")):
                continue
            us = float(e.self_cpu_time_total)
        if us > 0:
            times[e.key] = times.get(e.key, 0.0) + us / 1000.0 / runs
    return times


def of_profiles(profiles: list[dict[str, float]], device: str, top: int = 5) -> Breakdown:
    """The breakdown of the mean of several profiles (ms per inference by kernel), which it keeps."""
    names = {n for p in profiles for n in p}
    mean = {n: math.fsum(p.get(n, 0.0) for p in profiles) / len(profiles) for n in names}
    return replace(breakdown(mean, 1, device, top), profiles=profiles)


def profile(
    model: Any, inputs: Any, stream: Any = None, runs: int = 10, top: int = 5, repeats: int = PROFILES
) -> Breakdown:
    """Profile `repeats` times `runs` forward passes of `model` (on `stream` when given) and group the time."""
    profiles = [kernel_times(lambda: model(inputs), stream, runs) for _ in range(repeats)]
    return of_profiles(profiles, "cpu" if stream is None else "cuda", top)


def amdahl_ceiling(fraction: float, speedup: float) -> float:
    """Whole-run speedup when `fraction` of the time gets `speedup` times faster and the rest stays."""
    if not 0 <= fraction <= 1 or speedup <= 0:
        raise ValueError(f"need 0 <= fraction <= 1 and speedup > 0, got {fraction}, {speedup}")
    return 1.0 / ((1.0 - fraction) + fraction / speedup)


def explain(reference: Breakdown, candidate: Breakdown) -> str:
    """Why the candidate is (not) faster than the reference: how much faster its GEMMs got, what that alone
    would give (Amdahl), and how much the time outside GEMMs moved."""
    ref_gemm = reference.by_category.get("gemm", 0.0)
    cand_gemm = candidate.by_category.get("gemm", 0.0)
    if ref_gemm <= 0 or cand_gemm <= 0 or reference.per_run_ms <= 0:
        return "no GEMM time recognised in both profiles; see the slowest kernels"
    gemm_speedup = ref_gemm / cand_gemm
    share = ref_gemm / reference.per_run_ms
    other = (candidate.per_run_ms - cand_gemm) - (reference.per_run_ms - ref_gemm)
    return (
        f"GEMMs {gemm_speedup:.2f}x faster and {share:.0%} of the reference's time: "
        f"{amdahl_ceiling(share, gemm_speedup):.2f}x if nothing else changed; "
        f"time outside GEMMs {other:+.3f} ms; profiled {reference.per_run_ms / candidate.per_run_ms:.2f}x"
    )
