"""Where an engine's time goes, by kind of kernel: the torch profiler's per-kernel device time (GPU) or per-op
self time (CPU), grouped into GEMM, attention, quantize, normalisation and elementwise.

This is the first question when a precision is not faster: if FP8 GEMMs got quicker but quantize kernels
appeared around them, the GEMM share shrinks and the quantize share eats the gain. Grouping is by kernel name
(cuBLAS/CUTLASS, flash attention, Triton kernels fused by Inductor, aten ops on a CPU), so it is a reading
aid with an "other" bucket, not an exact accounting. The profiled run is separate from the timed one and runs
the model without CUDA graph replay, so kernels are visible one by one.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

# First match wins. Quantize first: its names (QuantizeLinear, an Inductor kernel fusing abs/amax/cast) may also
# say "linear"; GEMM kernel names carry element types (e4m3, i8) but never quantiz/amax. Inductor names a
# pointwise or reduction kernel after the ops it fused, so the static-scale quantize that feeds an FP8 GEMM reads
# `triton_poi_fused__scaled_mm__to_copy_clamp_div_gelu_...`: a quantize (fused into GELU or LayerNorm), never a GEMM;
# fp8-attn's Q, K, V quantize multiplies by its scale (`..._clamp_mul_...`). The ops are listed in alphabetical
# order, so another op may stand between clamp and div (`..._clamp_convolution_div_...`, the first LayerNorm's
# quantize fused with the patch embedding). A Triton pointwise or reduction kernel is never a GEMM, whatever it fused.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("quantize", r"quantiz|amax|float8|^triton_(poi|per|red)_fused\w*(_scaled_mm|_int_mm|clamp\w*_(div|mul)_|round)"),
    ("attention", r"flash|fmha|attention|sdpa|softmax"),
    ("gemm", r"^(?!triton_(poi|per|red)_).*(gemm|matmul|_mm\b|_mm_|mm$|addmm|bmm|linear|cutlass|xmma|cublas|nvjet|"
             r"conv)"),
    ("norm", r"norm"),
    ("elementwise", r"elementwise|vectorized|triton_poi|triton_per|triton_red|gelu|add|mul|copy|cat|clone"),
)


EPILOGUE = re.compile(r"gelu")  # a GEMM kernel that names its fused epilogue: cuBLASLt's `..._gelubias_TNT`
PROFILES = 5  # repeats of a profile: the spread that kernel_diff's intervals take
MODULE_LABEL = "vitperf.module::"  # the profiler range around each module's forward (labelled_modules)
OUTSIDE = "(outside any module)"  # time of kernels launched outside every labelled module
OWN = "vitperf::"  # the project's own labelled regions (an injected delay on a CPU)
HOST_OPS = ("aten::", OWN)  # what a CPU profile counts: aten ops' and the project's regions' self time


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
    # Each repeat's ms per module (or TensorRT layer's module), where the backend can say which launched what.
    modules: list[dict[str, float]] = field(default_factory=list)

    def line(self) -> str:
        total = self.per_run_ms or 1.0
        parts = ", ".join(f"{c} {ms / total:.0%}" for c, ms in self.by_category.items())
        what = "kernel time" if self.device == "cuda" else "op self time"
        slowest = f"; slowest {self.top[0][0][:70]} ({self.top[0][1]:.3f} ms)" if self.top else ""
        return f"{self.per_run_ms:.3f} ms {what}: {parts}{slowest}"

    def as_dict(self) -> dict[str, Any]:
        return {"per_run_ms": self.per_run_ms, "by_category": self.by_category, "top": self.top, "device": self.device,
                "profiles": self.profiles, "modules": self.modules}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Breakdown:
        top = [(str(name), float(ms)) for name, ms in d.get("top", [])]
        profiles = [{str(k): float(v) for k, v in p.items()} for p in d.get("profiles", [])]
        modules = [{str(k): float(v) for k, v in p.items()} for p in d.get("modules", [])]
        return cls(float(d["per_run_ms"]), dict(d["by_category"]), top, str(d.get("device", "cuda")), profiles, modules)


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


def _profiled(run: Callable[[], Any], stream: Any, runs: int, ops: bool = False) -> Any:
    """The torch profiler's record of `runs` calls of `run`: on `stream`, a GPU's kernels (with `ops`, the host's
    ops and ranges too, which say what launched each kernel); else a CPU's ops."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] if stream is None or ops else []
    activities += [ProfilerActivity.CUDA] if stream is not None else []
    with torch.inference_mode():
        run()  # anything lazy happens before the profiled runs
        with torch_profile(activities=activities) as prof:
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                for _ in range(runs):
                    run()
            if stream is not None:
                stream.synchronize()
    return prof


def _own_ms(event: Any, cuda: bool) -> float:
    """Milliseconds that one profiled event stands for itself: a GPU's kernels it launched, or an aten op's (or the
    project's labelled region's) self time on a CPU."""
    if cuda:
        return math.fsum(float(k.duration) for k in getattr(event, "kernels", [])) / 1000.0
    if event.name.startswith(HOST_OPS):
        return float(event.self_cpu_time_total) / 1000.0
    return 0.0


def _times(prof: Any, cuda: bool, runs: int) -> dict[str, float]:
    """Milliseconds per call in each kernel (GPU) or each op's self time (CPU), by the profiler's name."""
    import torch

    times: dict[str, float] = {}
    for e in prof.key_averages():
        if cuda:
            us = float(getattr(e, "self_device_time_total", 0.0))
            if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
                continue
            if getattr(e, "is_user_annotation", False) or e.key.startswith(MODULE_LABEL):
                continue  # a range's span on the GPU (a module's, with the host's ops on), not a kernel
        else:
            if not e.key.startswith(HOST_OPS):
                continue
            us = float(e.self_cpu_time_total)
        if us > 0:
            times[e.key] = times.get(e.key, 0.0) + us / 1000.0 / runs
    return times


def _module_times(prof: Any, cuda: bool, runs: int) -> dict[str, float]:
    """Milliseconds per call by the innermost labelled module whose forward launched the kernel (or ran the op)."""
    times: dict[str, float] = {}
    for e in prof.events():
        ms = _own_ms(e, cuda)
        if ms <= 0:
            continue
        owner, parent = OUTSIDE, e
        while parent is not None:
            if parent.name.startswith(MODULE_LABEL):
                owner = parent.name.removeprefix(MODULE_LABEL)
                break
            if parent.name.startswith(OWN):
                owner = parent.name
                break
            parent = parent.cpu_parent
        times[owner] = times.get(owner, 0.0) + ms / runs
    return times


def kernel_times(run: Callable[[], Any], stream: Any = None, runs: int = 10) -> dict[str, float]:
    """Milliseconds per call of `run` in each kernel (on `stream`, a GPU) or each op's self time (no stream, a CPU:
    aten ops and the project's own labelled regions, such as an injected delay), by the profiler's name."""
    return _times(_profiled(run, stream, runs), stream is not None, runs)


@contextlib.contextmanager
def labelled_modules(model: Any) -> Iterator[None]:
    """Each submodule's forward inside a profiler range named after its path (`blocks.0.attn.qkv`), so that a
    profile can say which module launched each kernel. Only for a model that runs eagerly: a compiled one has fused
    kernels across modules, and a range in its forward would change what it compiles."""
    from torch.autograd.profiler import record_function

    open_: list[Any] = []

    def enter(name: str) -> Callable[..., None]:
        def pre(module: Any, args: Any) -> None:
            open_.append(record_function(MODULE_LABEL + name).__enter__())

        return pre

    def leave(module: Any, args: Any, out: Any) -> None:
        open_.pop().__exit__(None, None, None)

    handles = []
    for name, module in model.named_modules():
        if name:
            handles += [module.register_forward_pre_hook(enter(name)), module.register_forward_hook(leave)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def of_profiles(profiles: list[dict[str, float]], device: str, top: int = 5) -> Breakdown:
    """The breakdown of the mean of several profiles (ms per inference by kernel), which it keeps."""
    names = {n for p in profiles for n in p}
    mean = {n: math.fsum(p.get(n, 0.0) for p in profiles) / len(profiles) for n in names}
    return replace(breakdown(mean, 1, device, top), profiles=profiles)


def profile(
    model: Any, inputs: Any, stream: Any = None, runs: int = 10, top: int = 5, repeats: int = PROFILES,
    modules: bool = False,
) -> Breakdown:  # fmt: skip
    """Profile `repeats` times `runs` forward passes of `model` (on `stream` when given) and group the time; with
    `modules` (an eager model), each profile's time by module too."""
    cuda = stream is not None
    profiles, by_module = [], []
    with labelled_modules(model) if modules else contextlib.nullcontext():
        for _ in range(repeats):
            prof = _profiled(lambda: model(inputs), stream, runs, ops=modules)
            profiles.append(_times(prof, cuda, runs))
            if modules:
                by_module.append(_module_times(prof, cuda, runs))
    return replace(of_profiles(profiles, "cuda" if cuda else "cpu", top), modules=by_module)


def amdahl_ceiling(fraction: float, speedup: float) -> float:
    """Whole-run speedup when `fraction` of the time gets `speedup` times faster and the rest stays."""
    if not 0 <= fraction <= 1 or speedup <= 0:
        raise ValueError(f"need 0 <= fraction <= 1 and speedup > 0, got {fraction}, {speedup}")
    return 1.0 / ((1.0 - fraction) + fraction / speedup)


def epilogue_ms(b: Breakdown) -> float:
    """Milliseconds per inference in GEMM kernels that also run a GELU in their epilogue (fp8-fused's fc1): GEMM time
    that includes work another precision spends in elementwise kernels. From the profiles, else the slowest kernels."""
    kernels = b.profiles or [dict(b.top)]
    return math.fsum(ms for p in kernels for name, ms in p.items()
                     if category(name) == "gemm" and EPILOGUE.search(name.lower())) / len(kernels)  # fmt: skip


def explain(reference: Breakdown, candidate: Breakdown) -> str:
    """Why the candidate is (not) faster than the reference: how much faster its GEMMs got, what that alone
    would give (Amdahl), and how much the time outside GEMMs moved, by category: what stands between the
    ceiling and the profiled speedup."""
    ref_gemm = reference.by_category.get("gemm", 0.0)
    cand_gemm = candidate.by_category.get("gemm", 0.0)
    if ref_gemm <= 0 or cand_gemm <= 0 or reference.per_run_ms <= 0:
        return "no GEMM time recognised in both profiles; see the slowest kernels"
    gemm_speedup = ref_gemm / cand_gemm
    share = ref_gemm / reference.per_run_ms
    other = (candidate.per_run_ms - cand_gemm) - (reference.per_run_ms - ref_gemm)
    # Categories that moved by 1% of the reference or more; FP8's quantize kernels absorb GELU and LayerNorm, so
    # the pair (quantize up, elementwise and norm down) is the fusion's net cost.
    moved = {c: candidate.by_category.get(c, 0.0) - reference.by_category.get(c, 0.0)
             for c in {*reference.by_category, *candidate.by_category} - {"gemm"}}  # fmt: skip
    parts = [f"{c} {d:+.3f}" for c, d in sorted(moved.items(), key=lambda i: -abs(i[1]))
             if abs(d) >= 0.01 * reference.per_run_ms]  # fmt: skip
    by = f" ({', '.join(parts)})" if parts else ""
    fused = epilogue_ms(candidate)
    with_gelu = f" ({fused:.3f} ms of them with GELU in their epilogue)" if fused > 0 else ""
    return (
        f"GEMMs {gemm_speedup:.2f}x faster{with_gelu} and {share:.0%} of the reference's time: "
        f"{amdahl_ceiling(share, gemm_speedup):.2f}x if nothing else changed; "
        f"time outside GEMMs {other:+.3f} ms{by}; profiled {reference.per_run_ms / candidate.per_run_ms:.2f}x"
    )
