"""FP8 attention for the torch backend's fp8-attn: `torch.ops.vitperf.sdpa_fp8`, a torch custom op that runs cuDNN's
FP8 scaled-dot-product attention (nvidia-cudnn-frontend's `sdpa_fp8`) on a GPU and the same arithmetic in torch on
a CPU.

What the op computes, for E4M3 Q, K, V of [B, S, H, D] (any strides with a unit last one) and their dequantizing
scales: S = (Q·Kᵀ)·dq·dk (Q comes multiplied by the softmax scale, as Model Optimizer calibrated it), P = exp(S −
rowmax) quantized to E4M3 at 448 (its largest value is 1), O = (P·V)·dv / rowsum(exp(S − rowmax)), returned in E4M3
as O·scale_o, [B, S, H, D] contiguous. On Hopper cuDNN writes FP8 attention output in FP8 only (FP16 output needs
Blackwell), so O goes straight into the output projection's FP8 GEMM at that GEMM's input scale: no quantize
between them. The kernel quantizes P block by block against a running maximum; the CPU path quantizes it against
the row's maximum, what one block does. The two agree within what P's quantization moves (tests/test_fp8_attention.py).

This module imports torch when it is imported (quant_linears imports it, so that a ready engine that calls the op
loads). cuDNN is imported at the first call on a GPU.
"""

from __future__ import annotations

import atexit
import importlib.util
from dataclasses import dataclass
from typing import Any

import torch

from pytest_vitperf.core.errors import NotBuilt

E4M3_MAX = 448.0
_P_SCALE = E4M3_MAX  # P's largest value is exp(0) = 1


def not_installed(module: str, package: str, extra: str, what: str) -> str | None:
    """Why `what` cannot run here, or None: `module`, from `package` (this project's extra `extra`), is missing."""
    if importlib.util.find_spec(module) is None:
        return f"{what} through {package}, which is not installed; install it: pip install 'pytest-vitperf[{extra}]'"
    return None


def missing() -> str | None:
    """Why cuDNN's FP8 attention cannot be called here, or None: the frontend package is not installed."""
    return not_installed("cudnn", "nvidia-cudnn-frontend", "cudnn", "fp8-attn runs attention in cuDNN's FP8 attention")


def quantize_e4m3(t: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """E4M3 of t·scale, saturated: a value past 448 becomes 448, as the kernels write it, not NaN."""
    return (t.float() * scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, descale_q: torch.Tensor, descale_k: torch.Tensor,
    descale_v: torch.Tensor, scale_o: torch.Tensor,
) -> torch.Tensor:  # fmt: skip
    """The op's arithmetic in torch, FP32 accumulation: the CPU path, and what the GPU path is checked against."""
    qf, kf, vf = q.float() * descale_q.float(), k.float() * descale_k.float(), v.float() * descale_v.float()
    s = torch.einsum("bqhd,bkhd->bhqk", qf, kf)
    p = torch.exp(s - s.amax(-1, keepdim=True))
    total = p.sum(-1, keepdim=True)
    p8 = quantize_e4m3(p, _P_SCALE).float() / _P_SCALE
    o = torch.einsum("bhqk,bkhd->bhqd", p8, vf) / total
    return quantize_e4m3(o.transpose(1, 2), scale_o.float()).contiguous()


@torch.library.custom_op("vitperf::sdpa_fp8", mutates_args=())
def sdpa_fp8(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, descale_q: torch.Tensor, descale_k: torch.Tensor,
    descale_v: torch.Tensor, scale_o: torch.Tensor,
) -> torch.Tensor:  # fmt: skip
    """FP8 attention (the module's docstring says what it computes); CPU: `reference`."""
    return reference(q, k, v, descale_q, descale_k, descale_v, scale_o)


@sdpa_fp8.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *scales: torch.Tensor) -> torch.Tensor:
    return q.new_empty(q.shape, dtype=torch.float8_e4m3fn)


@dataclass
class _Plan:
    """One built cuDNN graph: a shape, its strides and a device. The constant scales and the amax outputs (which
    nothing reads) are allocated with it, before any CUDA graph captures the op."""

    graph: Any
    handle: Any
    workspace: int
    constants: dict[int, torch.Tensor]


_PLANS: dict[tuple[Any, ...], _Plan] = {}
# Freed before the interpreter's teardown: nanobind reports each cuDNN graph (and its tensors, types and functions)
# still alive then as a leak, about 40 lines that read like a failure at the end of a run.
atexit.register(_PLANS.clear)
# The graph's tensor ids.
_Q, _K, _V, _O, _DQ, _DK, _DV, _DS, _SS, _SO, _AMAX_S, _AMAX_O = range(1, 13)


def _cudnn_dims(t: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """[B, S, H, D] as cuDNN's [B, H, S, D] dimensions and strides."""
    b, s, h, d = t.shape
    st = t.stride()
    return (b, h, s, d), (st[0], st[2], st[1], st[3])


def _build(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> _Plan:
    import cudnn

    fp8, f32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
    handle = cudnn.create_handle()
    graph = cudnn.pygraph(io_data_type=fp8, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
    qkv = [graph.tensor(uid=uid, dim=dims, stride=strides, data_type=fp8)
           for uid, (dims, strides) in ((_Q, _cudnn_dims(q)), (_K, _cudnn_dims(k)), (_V, _cudnn_dims(v)))]  # fmt: skip
    one = {"dim": (1, 1, 1, 1), "stride": (1, 1, 1, 1), "data_type": f32}
    dq, dk, dv, ds, ss, so = (graph.tensor(uid=uid, **one) for uid in (_DQ, _DK, _DV, _DS, _SS, _SO))
    o, _, amax_s, amax_o = graph.sdpa_fp8(q=qkv[0], k=qkv[1], v=qkv[2], descale_q=dq, descale_k=dk, descale_v=dv,
                                          descale_s=ds, scale_s=ss, scale_o=so, attn_scale=1.0,
                                          generate_stats=False)  # fmt: skip
    dims, strides = _cudnn_dims(out)
    o.set_uid(_O).set_output(True).set_dim(dims).set_stride(strides).set_data_type(fp8)
    for uid, amax in ((_AMAX_S, amax_s), (_AMAX_O, amax_o)):
        amax.set_uid(uid).set_output(True).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1)).set_data_type(f32)
    try:
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
    except cudnn.cudnnGraphNotSupportedError as exc:
        b, h, s, d = _cudnn_dims(q)[0]
        why = (str(exc) or type(exc).__name__).splitlines()[0]
        raise NotBuilt(f"cuDNN {cudnn.backend_version_string()} has no FP8 attention kernel for B={b} H={h} S={s} "
                       f"D={d} on {torch.cuda.get_device_name(q.device)} ({why}); measure attention in FP16 with "
                       "FP8 GEMMs instead: --vitperf-precisions fp8") from None  # fmt: skip
    dev = q.device
    constants = {uid: torch.full((1, 1, 1, 1), value, dtype=torch.float32, device=dev)
                 for uid, value in ((_DS, 1 / _P_SCALE), (_SS, _P_SCALE), (_AMAX_S, 0.0), (_AMAX_O, 0.0))}  # fmt: skip
    return _Plan(graph, handle, graph.get_workspace_size(), constants)


@sdpa_fp8.register_kernel("cuda")
def _cuda(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, descale_q: torch.Tensor, descale_k: torch.Tensor,
    descale_v: torch.Tensor, scale_o: torch.Tensor,
) -> torch.Tensor:  # fmt: skip
    import cudnn

    out = torch.empty(q.shape, dtype=torch.float8_e4m3fn, device=q.device)
    key = (q.device, *(tuple(t.shape) + t.stride() for t in (q, k, v)))
    plan = _PLANS.get(key)
    if plan is None:
        with torch.cuda.device(q.device):
            plan = _PLANS[key] = _build(q, k, v, out)
    workspace = torch.empty(plan.workspace, dtype=torch.uint8, device=q.device)
    pack = {_Q: q, _K: k, _V: v, _O: out, _DQ: descale_q, _DK: descale_k, _DV: descale_v, _SO: scale_o,
            **plan.constants}  # fmt: skip
    cudnn.set_stream(handle=plan.handle, stream=torch.cuda.current_stream(q.device).cuda_stream)
    plan.graph.execute(pack, workspace, handle=plan.handle)
    return out
