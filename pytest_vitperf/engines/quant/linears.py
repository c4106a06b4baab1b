"""The torch backend's real FP8 and INT8 Linears and its FP8 attention (made by `realquant`), as classes of a module
of their own.

They live at a module's top level, not inside the functions that make them, so that a compiled model holding them
can be saved and loaded by name (torch.compile's serialised artifacts refuse a class defined in a local scope).
This module imports torch when it is imported; `realquant` imports it only when it converts a model.
"""

from __future__ import annotations

import torch

# Imported here so that the ops are registered wherever a model holding these classes is loaded.
from pytest_vitperf.engines.quant.fp8_attention import E4M3_MAX, sdpa_fp8
from pytest_vitperf.engines.quant.fp8_mlp import linear_gelu_fp8

INT8_MAX = 127.0


class QuantizedLinear(torch.nn.Module):
    """Shared shape handling: [..., K] in, [..., N] out, one 2D GEMM."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        return self.gemm(x.reshape(-1, x.shape[-1])).reshape(*lead, -1)

    def gemm(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - overridden
        raise NotImplementedError


class Fp8Linear(QuantizedLinear):
    """E4M3 weight and static activation scale from Model Optimizer's per-tensor amax; `torch._scaled_mm`."""

    weight: torch.Tensor  # buffers, named for the type checker
    bias: torch.Tensor | None
    w_scale: torch.Tensor
    x_scale: torch.Tensor

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, w_amax: float, x_amax: float) -> None:
        super().__init__()
        w_scale = max(w_amax, 1e-12) / E4M3_MAX
        x_scale = max(x_amax, 1e-12) / E4M3_MAX
        self.out_dtype = weight.dtype
        q = (weight.float() / w_scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
        self.register_buffer("weight", q)  # [N, K]; `.t()` is the column-major operand _scaled_mm wants
        self.register_buffer("bias", None if bias is None else bias.detach().to(weight.dtype))
        self.register_buffer("w_scale", torch.tensor(w_scale, dtype=torch.float32, device=weight.device))
        self.register_buffer("x_scale", torch.tensor(x_scale, dtype=torch.float32, device=weight.device))

    def gemm(self, x: torch.Tensor) -> torch.Tensor:
        return self.gemm_fp8(self.quantize(x))

    def quantize(self, x: torch.Tensor) -> torch.Tensor:
        """An input in E4M3 at this Linear's input scale."""
        return (x.float() / self.x_scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)

    def gemm_fp8(self, xq: torch.Tensor) -> torch.Tensor:
        """The GEMM of an input already in E4M3 at this Linear's input scale."""
        return torch._scaled_mm(
            xq,
            self.weight.t(),
            scale_a=self.x_scale,
            scale_b=self.w_scale,
            bias=self.bias,
            out_dtype=self.out_dtype,
            use_fast_accum=True,
        )


class Fp8Attention(torch.nn.Module):
    """timm attention with its Linears in FP8 and Q, K, V in E4M3 at Model Optimizer's static scales (the fp8-attn
    recipe's bmm quantizers), through cuDNN's FP8 attention (`fp8_attention.sdpa_fp8`). Its output comes in E4M3 at
    the output projection's input scale and goes straight into that projection's FP8 GEMM. The softmax output's
    calibrated amax is not used: the kernel quantizes unnormalised probabilities, whose largest is 1."""

    qkv_scale: torch.Tensor  # buffers, named for the type checker
    descale_q: torch.Tensor
    descale_k: torch.Tensor
    descale_v: torch.Tensor
    scale_o: torch.Tensor

    def __init__(self, qkv: Fp8Linear, proj: Fp8Linear, num_heads: int, amax: tuple[float, float, float],
                 softmax_scale: float) -> None:  # fmt: skip
        super().__init__()
        self.qkv, self.proj, self.num_heads = qkv, proj, num_heads
        device = qkv.weight.device
        descale = [max(a, 1e-12) / E4M3_MAX for a in amax]
        # What multiplies q, k and v into E4M3: q takes the softmax scale first, as it did when it was calibrated.
        scale = [softmax_scale / descale[0], 1 / descale[1], 1 / descale[2]]
        self.register_buffer("qkv_scale", torch.tensor(scale, dtype=torch.float32, device=device).reshape(3, 1, 1))
        for name, value in zip(("descale_q", "descale_k", "descale_v"), descale, strict=True):
            self.register_buffer(name, torch.tensor(value, dtype=torch.float32, device=device))
        self.register_buffer("scale_o", proj.x_scale.detach().reciprocal())

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, is_causal: bool = False) -> torch.Tensor:
        if attn_mask is not None or is_causal:  # a ViT passes neither; the kernel is built without masks
            raise ValueError("FP8 attention runs without a mask")
        b, n, _ = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, -1)
        q, k, v = (qkv.float() * self.qkv_scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).unbind(2)
        o = sdpa_fp8(q, k, v, self.descale_q, self.descale_k, self.descale_v, self.scale_o)
        return self.proj.gemm_fp8(o.reshape(b * n, -1)).reshape(b, n, -1)


class Fp8GeluMlp(torch.nn.Module):
    """timm's MLP with both Linears in FP8, and GELU and fc2's input quantize in fc1's GEMM epilogue
    (`fp8_mlp.linear_gelu_fp8`): the hidden activation is written once, in E4M3 at fc2's input scale, where fp8 writes
    it in FP16 and a second kernel reads it back to apply GELU and quantize it. The GELU is cuBLASLt's tanh one."""

    scale_out: torch.Tensor  # a buffer, named for the type checker

    def __init__(self, fc1: Fp8Linear, fc2: Fp8Linear) -> None:
        super().__init__()
        self.fc1, self.fc2 = fc1, fc2
        self.register_buffer("scale_out", fc2.x_scale.detach().reciprocal())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead, fc1 = x.shape[:-1], self.fc1
        x8 = fc1.quantize(x.reshape(-1, x.shape[-1]))
        h8 = linear_gelu_fp8(x8, fc1.weight, fc1.x_scale, fc1.w_scale, fc1.bias, self.scale_out)
        return self.fc2.gemm_fp8(h8).reshape(*lead, -1)


class Int8Linear(QuantizedLinear):
    """Per-output-channel weight scales and a static per-tensor activation scale; `torch._int_mm`. With SmoothQuant's
    per-input-channel `pre_scale` the activation is multiplied by it before quantizing (the weight already holds the
    inverse): compiled, Inductor fuses that multiply into the quantize, which it fuses into the kernel that produces
    the activation, so the pre-scale costs what folding it into the previous op would (nothing)."""

    weight: torch.Tensor  # buffers, named for the type checker
    bias: torch.Tensor | None
    out_scale: torch.Tensor
    x_scale: torch.Tensor
    pre_scale: torch.Tensor | None

    def __init__(
        self,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        w_amax: torch.Tensor,
        x_amax: float,
        pre_scale: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        w_scale = w_amax.detach().float().reshape(-1).clamp_min(1e-12) / INT8_MAX  # [N]
        x_scale = max(x_amax, 1e-12) / INT8_MAX
        self.out_dtype = weight.dtype
        q = torch.round(weight.float() / w_scale[:, None]).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
        self.register_buffer("weight", q)  # [N, K]; `.t()` is the column-major operand cuBLASLt's INT8 GEMM wants
        self.register_buffer("bias", None if bias is None else bias.detach().float())
        self.register_buffer("out_scale", (w_scale * x_scale).to(weight.device))  # [N]
        self.register_buffer("x_scale", torch.tensor(x_scale, dtype=torch.float32, device=weight.device))
        pre = None if pre_scale is None else pre_scale.detach().float().reshape(-1).to(weight.device)
        self.register_buffer("pre_scale", pre)  # [K] or None

    def gemm(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float() if self.pre_scale is None else x.float() * self.pre_scale
        xq = torch.round(xf / self.x_scale).clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
        rows = xq.shape[0]
        if rows <= 16:  # _int_mm wants more than 16 rows (the head at batch 1 has one): pad with zeros
            xq = torch.nn.functional.pad(xq, (0, 0, 0, 17 - rows))
        y = torch._int_mm(xq, self.weight.t())[:rows].float() * self.out_scale
        if self.bias is not None:
            y = y + self.bias
        return y.to(self.out_dtype)
