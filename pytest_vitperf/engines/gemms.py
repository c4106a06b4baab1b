"""The GEMM micro-suite's facts: its shapes, the kinds of product (cuBLAS through torch), the dense tensor-core peak
of each GPU it knows, and each kind's operands, launch and correctness check.

Shapes are seed 002's (4096^3; M = 1, 8, 32, 128 against 4096x4096 and 4096x11008 weights) and ViT-B/16's four Linears
at batch 64 (M = 64 x 197 tokens). A product is out[M, N] = A[M, K] B[N, K]^T, B stored as nn.Linear stores it.

By default a timed product rotates over copies of its operands that together hold more than twice the GPU's L2, so
that every launch reads them from HBM as a deployed layer does: launched back to back on one set, a 128x4096x4096
FP16 product read 10.2 us from L2 against 15.1 us rotated on an H100. `hot` keeps one set, for the in-cache number.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from pytest_vitperf.numerics.gemm import GemmCheck

FP32_U = 2.0**-24
BF16_U = 2.0**-8
FP16_U = 2.0**-11
# Hopper's FP8 "fast accumulation" keeps fewer bits than FP32 and is not documented; DeepSeek-V3's report (section
# 3.3.2) measured about 14 bits on H800s. The bound takes 13.
FAST_ACCUM_U = 2.0**-13
INT_MM_MIN_ROWS = 32  # _int_mm wants more than 16 rows and a multiple of 8: smaller M is padded with zeros
CHECKED_ROWS = 64  # rows of the product held against float64 (every row for smaller M)


@dataclass(frozen=True)
class GemmShape:
    m: int
    n: int
    k: int
    layer: str = ""  # the ViT Linear it comes from, if any

    @property
    def name(self) -> str:
        return f"gemm-{self.layer + '-' if self.layer else ''}m{self.m}-n{self.n}-k{self.k}"

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


VIT_B16_B64_TOKENS = 64 * 197
SHAPES = (
    GemmShape(4096, 4096, 4096),
    *(GemmShape(m, n, 4096) for n in (4096, 11008) for m in (1, 8, 32, 128)),
    GemmShape(VIT_B16_B64_TOKENS, 2304, 768, "vitb16-qkv"),
    GemmShape(VIT_B16_B64_TOKENS, 768, 768, "vitb16-proj"),
    GemmShape(VIT_B16_B64_TOKENS, 3072, 768, "vitb16-fc1"),
    GemmShape(VIT_B16_B64_TOKENS, 768, 3072, "vitb16-fc2"),
)


@dataclass(frozen=True)
class GemmKind:
    name: str
    peak: str  # which dense peak it is held to: "fp16" (FP16 and BF16), "fp8", "int8" or "fp4"
    how: str  # the call, for the summary and the docs
    min_sm: int | None = None  # the first SM with these tensor cores
    blackwell: bool = False  # block-scaled formats: Blackwell's tensor cores only


KINDS = {
    k.name: k
    for k in (
        GemmKind("fp16", "fp16", "torch.matmul, FP16"),
        GemmKind("bf16", "fp16", "torch.matmul, BF16"),
        GemmKind("fp8-tensor", "fp8", "torch._scaled_mm, per-tensor scales, FP32 accumulation", min_sm=89),
        GemmKind("fp8-tensor-fast", "fp8", "torch._scaled_mm, per-tensor scales, fast accumulation", min_sm=89),
        GemmKind("fp8-row", "fp8", "torch._scaled_mm, per-row scales, FP32 accumulation", min_sm=89),
        GemmKind("int8", "int8", "torch._int_mm, int32 out (scales not applied)", min_sm=75),
        GemmKind("mxfp8", "fp8", "block-scaled FP8 (E8M0 per 32)", blackwell=True),
        GemmKind("nvfp4", "fp4", "block-scaled FP4 (E4M3 per 16)", blackwell=True),
    )
}


@dataclass(frozen=True)
class Peak:
    gpu: str
    names: tuple[str, ...]  # substrings of the device name, first match wins (NVL and PCIe before the SXM default)
    tflops: dict[str, float]  # dense: no 2:4 sparsity
    source: str
    hbm_tbps: float  # the datasheet's memory bandwidth, TB/s


_H100 = "NVIDIA H100 Tensor Core GPU datasheet (the with-sparsity figures, halved)"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet (the with-sparsity figures, halved)"
# At the datasheets' boost clock; a GPU held at its power cap runs lower, and its percentage with it.
PEAKS = (
    Peak("H100 NVL", ("H100 NVL",), {"fp16": 835.5, "fp8": 1670.5, "int8": 1670.5}, _H100, 3.9),
    Peak("H100 PCIe", ("H100 PCIe",), {"fp16": 756.5, "fp8": 1513.0, "int8": 1513.0}, _H100, 2.0),
    Peak("H100 SXM", ("H100",), {"fp16": 989.5, "fp8": 1979.0, "int8": 1979.0}, _H100, 3.35),
    Peak("H200 NVL", ("H200 NVL",), {"fp16": 835.5, "fp8": 1670.5, "int8": 1670.5}, _H200, 4.8),
    Peak("H200 SXM", ("H200",), {"fp16": 989.5, "fp8": 1979.0, "int8": 1979.0}, _H200, 4.8),
)
# Bytes per element of A and B, and of the output, as each kind's call reads and writes them.
_BYTES = {"fp16": (2, 2), "bf16": (2, 2), "fp8": (1, 2), "int8": (1, 4), "fp4": (0.5, 2)}


def gpu_peak(device_name: str) -> Peak | None:
    return next((p for p in PEAKS if any(n in device_name for n in p.names)), None)


def dense_peak(device_name: str, kind: str) -> tuple[float, Peak] | None:
    """The GPU's dense peak for `kind` in TFLOPS (TOPS for INT8), and the entry it came from; None if unknown."""
    k = KINDS.get(kind)
    p = gpu_peak(device_name)
    if k is None or p is None:  # not a GEMM kind (a ViT measurement's precision), or a GPU without a datasheet here
        return None
    peak = p.tflops.get(k.peak)
    return None if peak is None else (peak, p)


def tflops(shape: GemmShape, median_ms: float) -> float:
    return shape.flops / (median_ms * 1e-3) / 1e12


def operand_bytes(shape: GemmShape, kind: str) -> float:
    """What one product must read: A and B once each (the scales are a few bytes)."""
    return (shape.m + shape.n) * shape.k * _BYTES[KINDS[kind].peak][0]


def bytes_moved(shape: GemmShape, kind: str) -> float:
    """The least traffic to memory one product needs: its operands read once, its output written once."""
    return operand_bytes(shape, kind) + shape.m * shape.n * _BYTES[KINDS[kind].peak][1]


@dataclass(frozen=True)
class Roofline:
    """Where one timed product sits against its GPU's two roofs: compute (dense peak) and memory (HBM bandwidth)."""

    tflops: float
    gbps: float  # bytes_moved over the time
    intensity: float  # FLOP per byte moved
    peak_tflops: float | None = None
    hbm_tbps: float | None = None

    @property
    def ridge(self) -> float | None:
        """The intensity where the roofs meet: below it the bandwidth bounds the product, above it the tensor cores."""
        return None if self.peak_tflops is None or self.hbm_tbps is None else self.peak_tflops / self.hbm_tbps

    @property
    def bound(self) -> str | None:
        return None if self.ridge is None else "memory" if self.intensity < self.ridge else "compute"

    @property
    def of_peak(self) -> float | None:
        return None if self.peak_tflops is None else self.tflops / self.peak_tflops

    @property
    def of_hbm(self) -> float | None:
        return None if self.hbm_tbps is None else self.gbps / (self.hbm_tbps * 1e3)


def roofline(shape: GemmShape, kind: str, median_ms: float, device_name: str) -> Roofline:
    moved = bytes_moved(shape, kind)
    peak = dense_peak(device_name, kind)
    return Roofline(tflops(shape, median_ms), moved / (median_ms * 1e-3) / 1e9, shape.flops / moved,
                    None if peak is None else peak[0], None if peak is None else peak[1].hbm_tbps)  # fmt: skip


def rotation(shape: GemmShape, kind: str, l2_bytes: int) -> int:
    """How many copies of the operands hold more than twice the L2 together: launches that cycle through them find
    none of theirs still in the cache."""
    return max(2, math.floor(2 * l2_bytes / operand_bytes(shape, kind)) + 1)


def shape_of(options: dict[str, Any]) -> GemmShape | None:
    """The shape a measurement's spec options record (`describe`), None for a measurement that is no GEMM."""
    g = options.get("gemm")
    return None if g is None else GemmShape(g["m"], g["n"], g["k"], g.get("layer") or "")


def unsupported_reason(kind: str, sm: int | None, timed: bool = True) -> str | None:
    """Why `kind` cannot run here (sm None: a CPU, which checks products but times none), or None."""
    k = KINDS[kind]
    where = "a CPU" if sm is None else f"sm_{sm}"
    if k.blackwell:
        if sm is None or sm < 100:
            return f"{kind} needs Blackwell's block-scaled tensor cores (sm_100 or later); this is {where}"
        return f"{kind} is not written yet: its block-scale layouts for torch._scaled_mm were never run here"
    if sm is None:
        return "GEMM throughput is measured on a GPU: a CPU has no tensor-core peak to hold it to" if timed else None
    if k.min_sm is not None and sm < k.min_sm:
        return f"{kind} needs sm_{k.min_sm} or later; this GPU is {where}"
    return None


@dataclass
class GemmOperands:
    """Operands resident on the device and the product to time. `check(out)` holds `out`'s first CHECKED_ROWS rows
    against the float64 product of the dequantized operands exactly as the kernel read them."""

    shape: GemmShape
    kind: str
    launch: Callable[[], torch.Tensor]
    dequantized: Callable[[], tuple[torch.Tensor, torch.Tensor]]  # the checked rows of A, and B, as the kernel read
    unit_roundoff: float  # of the accumulation
    output_roundoff: float  # of the output's type and the epilogue
    copies: int = 1  # sets of operands the launches rotate over

    def check(self, out: torch.Tensor) -> GemmCheck:
        from pytest_vitperf.numerics.gemm import check_gemm

        a, b = (x.double().cpu().numpy() for x in self.dequantized())
        rows = out[: a.shape[0]].double().cpu().numpy()
        return check_gemm(a, b, rows, unit_roundoff=self.unit_roundoff, output_roundoff=self.output_roundoff)


@functools.lru_cache(maxsize=2)  # the same B for every kind of a shape; callers make new tensors from it
def _random(rows: int, cols: int, seed: int, device: str) -> torch.Tensor:
    import torch

    return torch.randn(rows, cols, generator=torch.Generator(device).manual_seed(seed), device=device)


def _fp8(x: torch.Tensor, per_row: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """E4M3 codes and their FP32 scales (amax / 448, per tensor or per row), as a static-scale recipe computes."""
    import torch

    amax = x.abs().amax(dim=1, keepdim=True) if per_row else x.abs().amax()
    scale = (amax.float() / 448.0).clamp(min=torch.finfo(torch.float32).tiny)
    return (x / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), scale


def operands(shape: GemmShape, kind: str, device: str, rows: int | None = None, copies: int = 1) -> GemmOperands:
    """Random normal operands of `shape` (seeded), quantized as `kind` reads them, on `device`. `rows` builds only
    that many rows of A: the CPU's check, where the full product would take minutes and prove nothing more.
    `copies` > 1 makes that many sets of the same values in their own memory, and each launch takes the next set
    (`rotation` says how many leave the L2 behind); the check reads the first."""
    m = shape.m if rows is None else min(rows, shape.m)
    a, b = _random(m, shape.k, 0, device), _random(shape.n, shape.k, 1, device)
    c = min(CHECKED_ROWS, m)
    sets = [_one_set(a, b, kind, c, device) for _ in range(copies)]
    launch, dequantized, u_acc, u_out = sets[0]
    if copies > 1:
        turn = itertools.cycle([s[0] for s in sets])

        def launch() -> torch.Tensor:
            return next(turn)()

    return GemmOperands(shape, kind, launch, dequantized, u_acc, u_out, copies)


def _one_set(
    a: torch.Tensor, b: torch.Tensor, kind: str, c: int, device: str
) -> tuple[Callable[[], torch.Tensor], Callable[[], tuple[torch.Tensor, torch.Tensor]], float, float]:
    """`kind`'s operands made from A and B in new memory: (launch, the checked rows as read, the accumulation's and the
    output's unit roundoff)."""
    import torch

    m, k = a.shape
    if kind in ("fp16", "bf16"):
        dt = torch.float16 if kind == "fp16" else torch.bfloat16
        a16, b16 = a.to(dt), b.to(dt)
        u_out = FP16_U if kind == "fp16" else BF16_U
        return lambda: a16 @ b16.t(), lambda: (a16[:c], b16), FP32_U, u_out
    if kind.startswith("fp8-"):
        per_row = kind == "fp8-row"
        (qa, sa), (qb, sb) = _fp8(a, per_row), _fp8(b, per_row)
        scale_b = sb.t() if per_row else sb  # per row of B is per column of out: [1, N]
        fast = kind == "fp8-tensor-fast"

        def fp8() -> torch.Tensor:
            return torch._scaled_mm(qa, qb.t(), sa, scale_b, out_dtype=torch.bfloat16, use_fast_accum=fast)

        def fp8_dequantized() -> tuple[torch.Tensor, torch.Tensor]:
            return qa[:c].double() * (sa[:c] if per_row else sa).double(), qb.double() * sb.double()

        return fp8, fp8_dequantized, FAST_ACCUM_U if fast else FP32_U, BF16_U + 3 * FP32_U
    if kind == "int8":
        qa = (a / (a.abs().amax() / 127)).round().clamp(-127, 127).to(torch.int8)
        qb = (b / (b.abs().amax() / 127)).round().clamp(-127, 127).to(torch.int8)
        padded = torch.zeros(max(m, INT_MM_MIN_ROWS), k, dtype=torch.int8, device=device)
        padded[:m] = qa
        # int32 accumulation of int8 products is exact at these K: the bound is zero
        return lambda: torch._int_mm(padded, qb.t()), lambda: (qa[:c], qb), 0.0, 0.0
    raise ValueError(f"no operands for GEMM kind {kind!r}; known: {', '.join(KINDS)}")


def describe(shape: GemmShape, kind: str, copies: int = 1) -> dict[str, Any]:
    """What a GEMM measurement records about itself (a Measurement's spec options)."""
    d: dict[str, Any] = {"gemm": {"m": shape.m, "n": shape.n, "k": shape.k, "layer": shape.layer or None}}
    d["call"] = KINDS[kind].how
    mib = round(copies * operand_bytes(shape, kind) / 2**20, 1)
    d["operands"] = {"copies": copies, "mib": mib} if copies > 1 else {"copies": 1, "hot": True, "mib": mib}
    if kind == "int8" and shape.m < INT_MM_MIN_ROWS:
        d["padded_m"] = INT_MM_MIN_ROWS
    return d
