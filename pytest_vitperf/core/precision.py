"""The precision registry: one entry per precision or recipe variant, and everything derived from it.

An entry says what the precision stores (element formats), what it needs from the GPU, how Model Optimizer makes it
(its `Recipe`, applied by engines/quant/recipes.py), which built-in backends build it, where it sorts and what it is
compared with. Adding a precision is one `register(...)` call (or one line of `_TABLE`); options, parametrization, the
capability matrix, the summary's order, the TensorRT export and the torch backend all read it from here.

A combination that cannot run is refused up front with a reason naming the device, its SM and what is needed,
instead of being attempted (an NVFP4 kernel launched on Ada dies with an internal CUTLASS error, not a readable
message).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol


class Device(Protocol):
    """What the registry asks of a device (measure.env.Device is one): its name, and its SM, None on a CPU."""

    @property
    def name(self) -> str: ...

    @property
    def sm(self) -> int | None: ...

# Blackwell: B200 (10.0), B300 (10.3), Thor (11.0), RTX PRO 6000 / RTX 50xx (12.0), GB10 (12.1).
BLACKWELL_SMS = frozenset({100, 103, 110, 120, 121})
# Backends that build TensorRT engines from the precision's export, with the Python API or with trtexec.
TRT_FAMILY = frozenset({"tensorrt", "tensorrt-rtx", "trtexec", "trtexec-rtx"})
ALL_BACKENDS = TRT_FAMILY | {"torch"}
REFERENCE = "fp16"  # speedups are reported against this precision unless an entry names another


@dataclass(frozen=True)
class Recipe:
    """How Model Optimizer makes a precision (data only; recipes.py applies it and exports ONNX)."""

    config: str | None = None  # Model Optimizer quantize config name, None for no quantization
    conv_fp8: bool = False  # Conv2d quantized in FP8 instead of the recipe's format
    mha_fp8: bool = False  # FP8 Q/DQ on the attention bmm inputs and the softmax output
    mlp_fused: bool = False  # the torch backend runs each MLP's GELU and fc2's quantize in fc1's FP8 GEMM (cuBLASLt)
    sparse24: bool = False  # 2:4 magnitude sparsity before quantization
    cast: str | None = None  # "fp16"/"bf16": Model Optimizer ONNX autocast of the FP32 export


@dataclass(frozen=True)
class TaskBound:
    """What a precision may cost on a task: the trained digits ViT's test split against its FP32 model (the
    accuracy suite, accuracy.py). None: not bounded."""

    max_drop: float | None = None  # points of top-1 accuracy lost
    min_agreement: float | None = None  # share of test images whose top-1 class is the FP32 model's
    min_cosine: float | None = None  # cosine of the test split's logits against the FP32 model's


@dataclass(frozen=True)
class Precision:
    name: str
    title: str
    weights: str  # element format of the GEMM weights: fp32, fp16, bf16, fp8 (E4M3), int8, mxfp8, nvfp4
    activations: str  # element format of the GEMM inputs
    needs: str  # the hardware feature, for skip reasons
    recipe: Recipe
    min_sm: int = 0
    only_sms: frozenset[int] | None = None  # when set, the SM must be one of these
    backends: frozenset[str] = ALL_BACKENDS  # built-in backends that build it (a hook-made backend decides itself)
    cpu: bool = False  # runs on the torch CPU path
    block: int | None = None  # quantization block along the reduction axis
    sparse: bool = False
    base: str | None = None  # the precision a variant refines: it shares its hardware rules (attention, coverage)
    reference: str = REFERENCE  # what its speedup is judged against
    # The least cosine between an engine's output and the FP32 model's on the fixed input (accuracy.py); None: no
    # bound (2:4 pruning without fine-tuning changes the function itself).
    min_cosine: float | None = None
    task: TaskBound = TaskBound()

    @property
    def root(self) -> str:
        """The precision whose hardware and attention rules apply: `fp8` for `fp8-attn`."""
        return self.base or self.name

    def runs_on_sm(self, sm: int) -> bool:
        if self.only_sms is not None:
            return sm in self.only_sms
        return sm >= self.min_sm

    def sm_requirement(self) -> str:
        if self.only_sms is not None:
            return "Blackwell sm_" + "/sm_".join(str(s) for s in sorted(self.only_sms))
        return f"sm_{self.min_sm}+"

    def variant(
        self, name: str, title: str, recipe: Recipe, *, backends: frozenset[str] = TRT_FAMILY, **changes: Any
    ) -> Precision:
        """A recipe variant: same formats and hardware, another recipe, built by `backends`."""
        return replace(self, name=name, title=title, recipe=recipe, backends=backends, base=self.root, **changes)


# min_cosine: below what was measured on the random-weight ViTs ("Output error against FP32" in
# docs/measurements/2026-11-22-h100-main-job-cold-and-warm.md):
# vit_base b8 on a CPU gave FP16 0.999999, BF16 0.99992, FP8 0.9943, INT8 0.9987 (realquant, static scales).
# task: the starting points of seed 003's trade-off (half-precision floats keep the FP32 model's answers, 8-bit formats
# cost at most a point, FP4 three), checked against the digits ViT in docs/accuracy.md.
_HALF = TaskBound(min_agreement=0.995)
_EIGHT_BIT = TaskBound(max_drop=1.0, min_cosine=0.99)
_FP32 = Precision(
    "fp32", "FP32", "fp32", "fp32", "FP32 CUDA cores", Recipe(), min_sm=70, cpu=True, min_cosine=0.99999, task=_HALF
)
_FP16 = Precision("fp16", "FP16", "fp16", "fp16", "FP16 tensor cores", Recipe(cast="fp16"), min_sm=80, cpu=True,
                  min_cosine=0.9999, task=_HALF)  # fmt: skip
_BF16 = Precision("bf16", "BF16", "bf16", "bf16", "BF16 tensor cores", Recipe(cast="bf16"), min_sm=80, cpu=True,
                  min_cosine=0.999, task=_HALF)  # fmt: skip
# int8 and fp8 on torch: realquant.py (torch._int_mm, torch._scaled_mm) with the recipe's static scales.
_INT8 = Precision("int8", "INT8", "int8", "int8", "INT8 tensor cores", Recipe("INT8_DEFAULT_CFG"), min_sm=75,
                  min_cosine=0.99, task=_EIGHT_BIT)  # fmt: skip
_FP8 = Precision("fp8", "FP8 E4M3", "fp8", "fp8", "FP8 tensor cores", Recipe("FP8_DEFAULT_CFG"), min_sm=89,
                 min_cosine=0.99, task=_EIGHT_BIT)  # fmt: skip


def _block_scaled(name: str, title: str, block: int, config: str, min_cosine: float, task: TaskBound) -> Precision:
    # Conv2d in FP8: TensorRT's dynamic block quantize takes 2D/3D inputs only.
    needs = f"{title} block-scaled tensor cores"
    recipe = Recipe(config, conv_fp8=True)
    return Precision(name, title, name, name, needs, recipe, only_sms=BLACKWELL_SMS, backends=TRT_FAMILY, block=block,
                     min_cosine=min_cosine, task=task)  # fmt: skip


# Not measured here (Blackwell only): the starting points of the accuracy work, FP8's bound and a looser one for FP4.
_MXFP8 = _block_scaled("mxfp8", "MXFP8", 32, "MXFP8_DEFAULT_CFG", 0.99, _EIGHT_BIT)
_NVFP4 = _block_scaled("nvfp4", "NVFP4", 16, "NVFP4_DEFAULT_CFG", 0.95, TaskBound(max_drop=3.0, min_cosine=0.95))
_SPARSE24 = Precision(
    "fp16-sparse24",
    "FP16 2:4 sparse",
    "fp16",
    "fp16",
    "2:4 sparse tensor cores",
    Recipe(sparse24=True, cast="fp16"),
    min_sm=80,
    backends=TRT_FAMILY | {"torch"},
    sparse=True,
)

# The sort order of every table and summary is this order.
_TABLE: list[Precision] = [
    _FP32,
    _FP16,
    _BF16,
    _INT8,
    _INT8.variant(
        "int8-smoothquant",
        "INT8 SmoothQuant",
        # Per-channel smoothing scales move activation outliers into the weights.
        Recipe("INT8_SMOOTHQUANT_CFG"),
        backends=ALL_BACKENDS,
        # Random weights have no activation outliers to smooth: it measured 0.988 (b64) and 0.991 (b1) on an H100,
        # below plain INT8's 0.9987, and follows Model Optimizer's own fake quantization (tests/test_models_engine).
        min_cosine=0.98,
    ),
    _FP8,
    # FP8 Q/DQ before both attention batched matmuls and on the softmax output: the pattern TensorRT needs to
    # fuse FP8 MHA (seed 004 asks whether it pays); the torch backend runs cuDNN's FP8 attention (fp8_attention.py).
    _FP8.variant("fp8-attn", "FP8 E4M3, attention in FP8", Recipe("FP8_DEFAULT_CFG", mha_fp8=True),
                 backends=ALL_BACKENDS),
    # fp8 with each MLP's GELU and second quantize in its first GEMM's epilogue: what stood between FP8's 1.16x and
    # the 1.31x its GEMMs imply at batch 64 on an H200 (docs/measurements/2026-11-28-h200-fp8-attention-cudnn.md).
    _FP8.variant("fp8-fused", "FP8 E4M3, GELU fused into fc1's GEMM", Recipe("FP8_DEFAULT_CFG", mlp_fused=True),
                 backends=frozenset({"torch"})),
    _FP8.variant(
        "fp8-sparse24",
        "FP8 E4M3 2:4 sparse",
        Recipe("FP8_DEFAULT_CFG", sparse24=True),
        min_cosine=None,
        task=TaskBound(),
    ),
    _MXFP8,
    _NVFP4,
    # Only the MLP Linears in NVFP4: the partial coverage of seed 000.
    _NVFP4.variant("nvfp4-mlp-only", "NVFP4, MLPs only", Recipe("NVFP4_MLP_ONLY_CFG", conv_fp8=True)),
    _SPARSE24,
]
PRECISIONS: dict[str, Precision] = {p.name: p for p in _TABLE}


def register(p: Precision) -> Precision:
    """Add a precision or recipe variant (from a conftest.py or a plugin), sorted after its base precision's
    variants. Re-registering the same entry is a no-op; another entry under a taken name is refused."""
    old = PRECISIONS.get(p.name)
    if old is not None:
        if old == p:
            return p
        raise ValueError(f"precision {p.name!r} is already registered as {old}; pick another name")
    for name in (p.reference, p.base):
        if name is not None and name not in PRECISIONS:
            raise ValueError(f"precision {p.name!r} refers to unknown precision {name!r}")
    after = [i for i, q in enumerate(_TABLE) if q.root == p.root]
    _TABLE.insert(after[-1] + 1 if after else len(_TABLE), p)
    _reindex()
    return p


def unregister(name: str) -> None:
    """Remove a registered entry (a test that registered one cleans up after itself)."""
    _TABLE[:] = [q for q in _TABLE if q.name != name]
    _reindex()


def _reindex() -> None:
    PRECISIONS.clear()
    PRECISIONS.update((q.name, q) for q in _TABLE)


def get_precision(name: str) -> Precision:
    try:
        return PRECISIONS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown precision {name!r}; valid: {', '.join(PRECISIONS)}") from None


def sort_key(name: str) -> tuple[int, str]:
    """Registry order; names the registry does not know (old baseline files) sort last, by name."""
    order = list(PRECISIONS)
    return (order.index(name), "") if name in PRECISIONS else (len(order), name)


def unsupported_reason(precision: str, device: Device) -> str | None:
    """Why the GPU (or its absence) cannot run `precision`, or None. Which backend builds it is the backend's
    question (Backend.precision_reason)."""
    p = get_precision(precision)
    if device.sm is None:
        if not p.cpu:
            return (
                f"{p.name} needs an NVIDIA GPU with {p.needs} ({p.sm_requirement()}); no CUDA GPU here ({device.name})"
            )
    elif not p.runs_on_sm(device.sm):
        return f"{device.name} is sm_{device.sm}; {p.name} needs {p.needs}, on {p.sm_requirement()}"
    return None


def builtin_backend_reason(precision: str, backend: str) -> str | None:
    """Why the built-in `backend` does not build `precision`, or None: its `backends` field decides."""
    p = get_precision(precision)
    if backend in p.backends:
        return None
    return (
        f"{p.name} is not built by the {backend} backend in this version; "
        f"backends that build it: {', '.join(sorted(p.backends))} (select with --vitperf-backend)"
    )


def matrix_rows() -> list[tuple[str, str, str, str]]:
    """(precision, SM requirement, hardware feature, backends) for docs and `vitperf capabilities`."""
    return [(p.name, p.sm_requirement(), p.needs, ", ".join(sorted(p.backends))) for p in _TABLE]
