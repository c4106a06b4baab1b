"""Real low-precision and 2:4 sparse Linears for the torch backend, from a model that a precision recipe calibrated
or sparsified.

The scheme is the one TensorRT runs for an FP8 or INT8 ONNX export: static activation scales from calibration,
weights quantized once, the GEMM on the low-precision tensor cores. Model Optimizer decides what is quantized and
calibrates it (`recipes.apply`, the same recipe and calibration data as the ONNX export); its quantizers' amax are
the only source of scales. What runs is this module's, because Model Optimizer's own real-quant path
(`mtq.compress`, RealQuantLinear) recomputes scales per call and fails under `torch.compile` with Model Optimizer
0.47 (docs/measurements/2026-11-22-h100-static-scale-fp8-int8.md).

| precision | weights | activations | GEMM |
|---|---|---|---|
| fp8 | E4M3 per tensor (FP8_DEFAULT_CFG) | E4M3 per tensor, static | `torch._scaled_mm`, fast accumulation |
| int8 | INT8 per channel (INT8_DEFAULT_CFG) | INT8 per tensor, static | `torch._int_mm`, scales applied after |
| int8-smoothquant | INT8 per channel, rescaled (INT8_SMOOTHQUANT_CFG) | INT8 per tensor, static, pre-scaled | as int8 |
| fp16-sparse24 | FP16, 2:4 magnitude mask (`mts.sparsify`), compressed | FP16 | `_cslt_sparse_mm` (cuSPARSELt) |

Everything else (attention, norms, the patch-embedding convolution) stays in the model's FP16. A Linear whose
shape the kernels refuse (`_scaled_mm` needs both weight dimensions divisible by 16; the 1000-class head is not)
stays in FP16 too; `convert` returns how many Linears it converted and which it kept.
"""

from __future__ import annotations

import functools
import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

def fp8_linear(weight: torch.Tensor, bias: torch.Tensor | None, w_amax: float, x_amax: float) -> torch.nn.Module:
    """An FP8 Linear: E4M3 weight and static activation scale from Model Optimizer's per-tensor amax."""
    from pytest_vitperf.engines.quant.linears import Fp8Linear

    return Fp8Linear(weight, bias, w_amax, x_amax)


def int8_linear(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    w_amax: torch.Tensor,
    x_amax: float,
    pre_scale: torch.Tensor | None = None,
) -> torch.nn.Module:
    """An INT8 Linear: per-output-channel weight scales and a static per-tensor activation scale, with SmoothQuant's
    per-input-channel `pre_scale` where the recipe has one (quant_linears.Int8Linear)."""
    from pytest_vitperf.engines.quant.linears import Int8Linear

    return Int8Linear(weight, bias, w_amax, x_amax, pre_scale)


@dataclass
class Conversion:
    precision: str
    converted: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)  # module name -> why it stayed as it was
    how: str = "static scales from Model Optimizer calibration"
    kept_as: str = "high precision"
    others: dict[str, str] = field(default_factory=dict)  # module name -> layer type this backend never converts
    attention: list[str] = field(default_factory=list)  # attention modules whose Q, K, V run in FP8 (fp8-attn)
    mlps: list[str] = field(default_factory=list)  # MLPs whose GELU and second quantize run in fc1's GEMM (fp8-fused)

    def summary(self) -> str:
        kept = "; ".join(f"{n} ({why})" for n, why in self.kept.items())
        text = f"{len(self.converted)} Linears in {self.precision} ({self.how})"
        text += f"; attention in FP8 in {len(self.attention)} blocks (cuDNN)" if self.attention else ""
        text += f"; GELU and fc2's quantize in fc1's GEMM in {len(self.mlps)} MLPs (cuBLASLt)" if self.mlps else ""
        text += f"; kept in {self.kept_as}: {kept}" if kept else ""
        by_type: dict[str, list[str]] = {}
        for name, kind in self.others.items():
            by_type.setdefault(kind, []).append(name)
        others = ", ".join(
            f"{kind} x{len(names)} ({', '.join(names[:3])}{f' +{len(names) - 3} more' if len(names) > 3 else ''})"
            for kind, names in by_type.items()
        )
        return text + (f"; layer types it does not convert, kept in {self.kept_as}: {others}" if others else "")

    def note_others(self, model: torch.nn.Module) -> Conversion:
        """Record the layers with a weight matrix or kernel that are neither converted nor kept by name: the layer
        types (a convolution, a custom GEMM module) that this backend leaves in high precision, model by model."""
        import torch

        done = set(self.converted) | set(self.kept)
        for name, module in model.named_modules():
            weight = getattr(module, "weight", None)
            if name not in done and isinstance(weight, torch.Tensor) and weight.dim() >= 2:
                self.others[name] = type(module).__name__
        return self


def is_24_sparse(weight: torch.Tensor) -> bool:
    """At most two non-zeros in every group of four along the input dimension: what the 2:4 tensor cores take."""
    n, k = weight.shape
    return k % 4 == 0 and bool(((weight.reshape(n, k // 4, 4) != 0).sum(-1) <= 2).all())


def sparse24(model: torch.nn.Module, dtype: torch.dtype) -> Conversion:
    """Model Optimizer's 2:4 masks (`recipes.apply` sparsified the model) baked into plain weights (`mts.export`),
    cast to `dtype`; then every Linear whose shape cuSPARSELt takes gets its weight as a semi-structured sparse
    tensor, so that its GEMM runs on the 2:4 sparse tensor cores (`_cslt_sparse_mm`). Needs a CUDA GPU."""
    import modelopt.torch.sparsity as mts
    import torch
    from torch.sparse import to_sparse_semi_structured

    model = mts.export(model).to(dtype)
    done = Conversion("fp16 2:4 sparse", how="Model Optimizer's 2:4 magnitude mask, cuSPARSELt", kept_as="dense")
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        n, k = module.weight.shape
        if n % 16 or k % 16:
            done.kept[name] = f"{n}x{k}: cuSPARSELt needs FP16 dimensions divisible by 16"
        elif not is_24_sparse(module.weight):
            done.kept[name] = "not 2:4 sparse after the recipe"
        else:
            sparse = to_sparse_semi_structured(module.weight.detach())
            module.weight = torch.nn.Parameter(sparse, requires_grad=False)
            done.converted.append(name)
    return done


def _fits(precision: str, n: int, k: int) -> str | None:
    if precision == "fp8" and (n % 16 or k % 16):
        return f"{n}x{k}: _scaled_mm needs dimensions divisible by 16"
    if precision == "int8" and (n % 8 or k % 8):
        return f"{n}x{k}: _int_mm needs dimensions divisible by 8"
    return None


def convert(
    model: torch.nn.Module, precision: str, dtype: torch.dtype, attention: bool = False, mlp: bool = False
) -> Conversion:
    """Replace, in place, each Linear of a Model Optimizer-calibrated `model` whose input and weight quantizers are
    enabled by a real `precision` Linear; every other module is returned to plain torch in `dtype`. With
    `attention` (fp8-attn), each attention whose bmm quantizers were calibrated and whose two Linears became FP8
    runs its Q, K and V in FP8 too (`fp8_attention`). With `mlp` (fp8-fused), each timm MLP whose two Linears became
    FP8 runs its GELU and second quantize in its first GEMM (`fp8_mlp`)."""
    import torch

    if precision not in ("fp8", "int8"):
        raise ValueError(f"real quantized Linears exist for fp8 and int8, not {precision}")
    done = Conversion(precision)
    replacements: dict[str, torch.nn.Module] = {}
    for name, module in list(model.named_modules()):
        wq, xq = getattr(module, "weight_quantizer", None), getattr(module, "input_quantizer", None)
        if not isinstance(module, torch.nn.Linear) or wq is None or xq is None:
            continue
        n, k = module.weight.shape
        why = _fits(precision, n, k)
        if not (wq.is_enabled and xq.is_enabled and wq.amax is not None and xq.amax is not None):
            why = "not quantized by the recipe"
        elif why is None and precision == "fp8" and getattr(xq, "pre_quant_scale", None) is not None:
            why = "a pre-quantization scale, which the FP8 Linear does not apply"
        if why is not None:
            done.kept[name] = why + _fold_pre_scale(module, xq)
            continue
        weight = module.weight.detach().to(dtype)
        bias = module.bias.detach().to(dtype) if module.bias is not None else None
        x_amax = float(xq.amax.float().max())
        pre_scale = getattr(xq, "pre_quant_scale", None)  # SmoothQuant's, applied before the quantizer's amax
        if precision == "fp8":
            new = fp8_linear(weight, bias, float(wq.amax.float().max()), x_amax)
        else:
            new = int8_linear(weight, bias, wq.amax.detach().expand(n, 1), x_amax, pre_scale)
        replacements[name] = new
    amaxes = _attention_amax(model) if attention else {}
    _to_plain_torch(model)
    model.to(dtype)  # before the swap: `.to(dtype)` would cast the FP8 weights and FP32 scales too
    for name, new in replacements.items():
        _swap(model, name, new)
        done.converted.append(name)
    for name, amax in amaxes.items():
        why = _fp8_attention(model, name, amax)
        if why is None:
            done.attention.append(name)
        else:
            done.kept[name] = why
    for name in _mlps(model) if mlp else []:
        why = _fp8_mlp(model, name)
        if why is None:
            done.mlps.append(name)
        else:
            done.kept[name] = why
    return done


def _swap(model: torch.nn.Module, name: str, new: torch.nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, new)


def _attention_amax(model: torch.nn.Module) -> dict[str, tuple[float, float, float]]:
    """Q's, K's and V's calibrated amax per attention module (the fp8-attn recipe: recipes.register_quant_attention)."""
    found = {}
    for name, module in model.named_modules():
        qs: list[Any] = [getattr(module, f"{t}_bmm_quantizer", None) for t in "qkv"]
        if all(q is not None and q.is_enabled and q.amax is not None for q in qs):
            a, b, c = (float(q.amax.float().max()) for q in qs)
            found[name] = (a, b, c)
    return found


def _fp8_attention(model: torch.nn.Module, name: str, amax: tuple[float, float, float]) -> str | None:
    """Swap the attention `name` for an FP8 one, or say why it stays: its Linears must both be FP8 and nothing may
    sit between them and the attention product (timm's q/k norms, its output norm)."""
    import torch

    from pytest_vitperf.engines.quant.linears import Fp8Attention, Fp8Linear

    attn: Any = model.get_submodule(name)
    if not (isinstance(attn.qkv, Fp8Linear) and isinstance(attn.proj, Fp8Linear)):
        return "attention kept in FP16: its qkv and proj Linears are not both FP8"
    plain = torch.nn.Identity | None
    extra = [n for n in ("q_norm", "k_norm", "norm") if not isinstance(getattr(attn, n, None), plain)]
    if extra:
        return f"attention kept in FP16: FP8 attention takes Q, K and V straight from qkv; it has {', '.join(extra)}"
    _swap(model, name, Fp8Attention(attn.qkv, attn.proj, attn.num_heads, amax, float(attn.scale)))
    return None


def _mlps(model: torch.nn.Module) -> list[str]:
    """timm's plain MLPs (fc1, GELU or another activation, fc2), not its gated ones, whose fc1 output is split."""
    from timm.layers import Mlp

    return [name for name, module in model.named_modules() if type(module) is Mlp]


def _fp8_mlp(model: torch.nn.Module, name: str) -> str | None:
    """Swap the MLP `name` for one whose GELU and second quantize run in its first GEMM, or say why it stays: both
    Linears must be FP8, the activation GELU (cuBLASLt's epilogue has no other that a ViT uses), and nothing may sit
    between GELU and fc2 (timm's hidden norm)."""
    import torch

    from pytest_vitperf.engines.quant.linears import Fp8GeluMlp, Fp8Linear

    mlp: Any = model.get_submodule(name)
    if not (isinstance(mlp.fc1, Fp8Linear) and isinstance(mlp.fc2, Fp8Linear)):
        return "MLP not fused: its fc1 and fc2 Linears are not both FP8"
    if not isinstance(mlp.act, torch.nn.GELU):
        return f"MLP not fused: cuBLASLt's epilogue applies GELU, and its activation is {type(mlp.act).__name__}"
    if not isinstance(mlp.norm, torch.nn.Identity):
        return f"MLP not fused: a {type(mlp.norm).__name__} sits between its activation and fc2"
    _swap(model, name, Fp8GeluMlp(mlp.fc1, mlp.fc2))
    return None


def _fold_pre_scale(module: torch.nn.Module, input_quantizer: Any) -> str:
    """A Linear left in high precision runs without its input quantizer; SmoothQuant's per-input-channel pre-scale
    lives there while the weight holds its inverse, so it goes into the weight (W x p = (W diag p) x) or the layer
    computes something else (the digits ViT's 10-class head, kept for _int_mm's shapes: logits off by 30)."""
    import torch

    pre = getattr(input_quantizer, "pre_quant_scale", None)
    if pre is None:
        return ""
    weight: Any = module.weight
    with torch.no_grad():
        weight.mul_(pre.detach().reshape(1, -1).to(weight))
    return ", its pre-scale folded into the weight"


_PLAIN_MODULES = ("torch.nn.modules", "pytest_vitperf.engines.models.zoo")


def _to_plain_torch(model: torch.nn.Module) -> None:
    """Modules this file did not convert (kept Linears, the convolution) go back to their torch class, their fake
    quantizers dropped: what stays in high precision runs as plain high precision, as in a TensorRT engine, and
    nothing of Model Optimizer is left for `torch.compile` to trace."""
    import torch

    for module in model.modules():
        quantizers = [name for name in module._modules if name.endswith("quantizer")]
        if not quantizers:
            continue
        for name in quantizers:
            del module._modules[name]
        # The class Model Optimizer wrapped: torch's Linear/Conv2d, or the zoo's bmm attention (registered with it
        # by recipes.register_quant_attention); never a bare nn.Module, which has no forward.
        plain = next(
            (c for c in type(module).__mro__ if c.__module__.startswith(_PLAIN_MODULES) and c is not torch.nn.Module),
            None,
        )
        if plain is not None:
            module.__class__ = plain


@functools.cache
def code_hash() -> str:
    """This module's code and its Linears': a change to either makes a kept conversion stale."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update((Path(__file__).parent / "linears.py").read_bytes())
    return h.hexdigest()[:16]


class ConvertedCache:
    """A converted model on disk: its state (the FP8 or INT8 weights and scales, everything else in the engine's
    dtype) and which Linears became real quantized ones. Restoring it rebuilds the same modules and loads the same
    tensors, so the engine is bit for bit the one converted, without Model Optimizer: importing it, restoring the
    calibration and converting cost 8 s of a warm FP8 engine's 9.5 s on an H200, where a BF16 one took 1.3 s. The key
    is the calibration's (`recipes.calibration_key`) plus the precision, the dtype, the device, torch's version and
    this file's text; an entry that cannot be read is converted again and rewritten, one that does not fit the model
    is an error naming it."""

    def __init__(self, root: Path, precision: str, model: torch.nn.Module, dtype: torch.dtype, device: str) -> None:
        from pytest_vitperf.core.precision import get_precision
        from pytest_vitperf.engines.quant.recipes import calibration_batches, calibration_key
        from pytest_vitperf.measure.env import version_of

        recipe = get_precision(precision).recipe
        # This file's own text and torch's version: a changed conversion must not restore an old one.
        facts = (device, str(dtype), version_of("torch"), code_hash())
        key = calibration_key(recipe, model, calibration_batches(model), *facts)
        self.path = root / f"{precision}-{key}.pt"

    def restore(self, model: torch.nn.Module, dtype: torch.dtype, device: torch.device) -> Conversion | None:
        """Convert `model` (plain torch, as built) in place from the file; None where there is no usable entry."""
        import torch

        try:
            saved = torch.load(io.BytesIO(self.path.read_bytes()), weights_only=True, map_location=device)
            kind, converted, kept, state = saved["kind"], saved["converted"], saved["kept"], saved["state"]
            attention, mlps = list(saved.get("attention", [])), list(saved.get("mlps", []))
        except Exception:  # missing, truncated or foreign: convert again
            return None
        model.to(device, dtype)
        for name in converted:
            linear: Any = model.get_submodule(name)
            bias = linear.bias.detach() if linear.bias is not None else None
            weight = linear.weight.detach()
            if kind == "fp8":
                new = fp8_linear(weight, bias, 1.0, 1.0)  # scales and weights come from `state`
            else:
                ones = torch.ones(weight.shape[1], device=device) if f"{name}.pre_scale" in state else None
                new = int8_linear(weight, bias, torch.ones(weight.shape[0], device=device), 1.0, ones)
            _swap(model, name, new)
        for name in attention:  # its scales come from `state`; one that does not fit fails the strict load below
            _fp8_attention(model, name, (1.0, 1.0, 1.0))
        for name in mlps:
            _fp8_mlp(model, name)
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            from pytest_vitperf.core.errors import VitperfError

            lines = str(exc).splitlines()
            first = lines[1].strip() if len(lines) > 1 else str(exc)  # under torch's "Error(s) in loading" line
            raise VitperfError(
                f"converted model {self.path} does not fit this model ({first}); remove it to convert again: "
                f"rm {self.path}"
            ) from None
        return Conversion(kind, converted=list(converted), kept=dict(kept), attention=attention, mlps=mlps)

    def save(self, model: torch.nn.Module, done: Conversion) -> None:
        import torch

        from pytest_vitperf.core.files import write_atomic

        buf = io.BytesIO()
        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        torch.save({"kind": done.precision, "converted": done.converted, "kept": done.kept, "attention": done.attention,
                    "mlps": done.mlps, "state": state}, buf)  # fmt: skip
        write_atomic(self.path, buf.getvalue())
