"""Attention-shape rules: can TensorRT quantize this ViT's attention at a given precision?

The rules come from field measurements: block-scaled formats (MXFP8 blocks of 32, NVFP4 blocks of 16) need
the sequence and head dimension to be multiples of the block, attention tensors in 3D, and no stray class
token (224 px / patch 16 gives 196 + 1 = 197 tokens); TensorRT fuses FP8 MHA only with head_dim % 16 == 0
and Q/DQ before both batched matmuls and after the softmax; its INT8 fused MHA takes sequences up to 512.

A target is read into one `AttentionShape` (from a config, a torch module, or an ONNX graph), and the rules
judge that. `check_attention_shapes` returns the violations; `assert_quantization_friendly` fails a test
with one line per violation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.onnx_graph import SHAPE_OPS, consumers, infer_shapes, is_dq, is_q, load, producers
from pytest_vitperf.precision import get_precision

if TYPE_CHECKING:
    import onnx
    import torch


@dataclass(frozen=True)
class Rule:
    id: str
    reason: str
    fix: str


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule(
            "image_patch",
            "the patch grid must tile the image; otherwise the edge pixels are dropped",
            "use an image size that is a multiple of the patch size (e.g. 256 px with patch 16)",
        ),
        Rule(
            "seq_len",
            "block quantization of the attention GEMMs runs in blocks of {block} along the sequence",
            "make patches + class/register tokens a multiple of {block} (256 px / patch 16 gives 256 tokens)",
        ),
        Rule(
            "head_dim",
            "{head_reason}",
            "choose embed_dim / num_heads as a multiple of {block} (64 for ViT-B: 768 / 12)",
        ),
        Rule(
            "attention_3d",
            "TensorRT's block quantizers take 2D or 3D tensors; 4D [B, H, S, D] attention stays unquantized",
            "reshape q, k, v to [B*H, S, D] and use torch.bmm (models.bmm_attention)",
        ),
        Rule(
            "class_token",
            "class and register tokens are added to the patches and break the sequence's divisibility",
            "drop the class token and pool by average (timm: class_token=False, global_pool='avg'), "
            "or add register tokens (reg_tokens) to pad the sequence to a multiple of {block}",
        ),
        Rule(
            "int8_mha_seq",
            "TensorRT's INT8 fused multi-head attention kernels take sequences of at most 512",
            "keep patches + class/register tokens <= 512 (e.g. 352 px / patch 16 gives 484)",
        ),
        Rule(
            "qdq_attention",
            "TensorRT quantizes attention only with Q/DQ before both batched matmuls and on the softmax "
            "output; without them attention stays in FP16",
            "enable Model Optimizer's attention (bmm and softmax) quantizers and export again",
        ),
    )
}

_BLOCK_RULES = ("image_patch", "seq_len", "head_dim", "attention_3d", "class_token", "qdq_attention")


@dataclass(frozen=True)
class PrecisionRules:
    block: int | None  # seq_len / head_dim / class_token divisor
    rules: tuple[str, ...]
    head_reason: str = ""


# Which rules apply to which precision: the one place this mapping lives.
PRECISION_RULES: dict[str, PrecisionRules] = {
    "fp32": PrecisionRules(None, ()),
    "fp16": PrecisionRules(None, ()),
    "bf16": PrecisionRules(None, ()),
    "fp16-sparse24": PrecisionRules(None, ()),
    "int8": PrecisionRules(None, ("int8_mha_seq",)),
    "fp8": PrecisionRules(16, ("head_dim", "qdq_attention"), "TensorRT fuses FP8 MHA only when head_dim % 16 == 0"),
    "mxfp8": PrecisionRules(32, _BLOCK_RULES, "MXFP8 block scales (32 elements) run along the head dimension in Q·Kᵀ"),
    "nvfp4": PrecisionRules(16, _BLOCK_RULES, "NVFP4 block scales (16 elements) run along the head dimension in Q·Kᵀ"),
}
INT8_MHA_MAX_SEQ = 512


@dataclass(frozen=True)
class Violation:
    rule: str
    observed: str
    required: str
    where: str
    fix: str
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.rule}: {self.observed}; needs {self.required} [at {self.where}] -> fix: {self.fix}"


@dataclass(frozen=True)
class ViTConfig:
    """The shape facts of a ViT that the rules read."""

    image_size: int | tuple[int, int] = 224
    patch_size: int | tuple[int, int] = 16
    embed_dim: int = 768
    num_heads: int = 12
    class_token: bool = True
    reg_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("embed_dim", "num_heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"ViTConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.reg_tokens < 0:
            raise ValueError(f"ViTConfig.reg_tokens must be >= 0, got {self.reg_tokens}")
        if min(_pair(self.image_size) + _pair(self.patch_size)) < 1:
            raise ValueError("ViTConfig.image_size and patch_size must be >= 1")

    def shape(self) -> AttentionShape:
        (ih, iw), (ph, pw) = _pair(self.image_size), _pair(self.patch_size)
        patches = (ih // ph) * (iw // pw)
        prefix = int(self.class_token) + self.reg_tokens
        return AttentionShape(
            where="config",
            image_size=(ih, iw),
            patch_size=(ph, pw),
            patches=patches,
            blocks=(
                AttentionBlock(
                    where="config",
                    seq_len=patches + prefix,
                    head_dim=self.embed_dim // self.num_heads if self.embed_dim % self.num_heads == 0 else None,
                    rank=None,
                ),
            ),
        )


@dataclass(frozen=True)
class AttentionBlock:
    where: str
    seq_len: int | None
    head_dim: int | None
    rank: int | None  # rank of Q/K/V at the batched matmuls; None where the target cannot tell
    quantized: bool | None = None  # Q/DQ on both bmm inputs and the softmax output; None: not known


@dataclass(frozen=True)
class AttentionShape:
    where: str
    image_size: tuple[int, int] | None
    patch_size: tuple[int, int] | None
    patches: int | None
    blocks: tuple[AttentionBlock, ...]
    quantized_graph: bool = False  # the graph holds Q/DQ at all (an export from a quantizer)
    notes: tuple[str, ...] = field(default=())


def _pair(v: int | tuple[int, int] | Iterable[int]) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    a, b = tuple(v)
    return (int(a), int(b))


# -- the rules --------------------------------------------------------------------------------------
def judge(shape: AttentionShape, precision: str) -> list[Violation]:
    name = get_precision(precision).name
    spec = PRECISION_RULES[name]
    block = spec.block
    fmt = {"block": block, "head_reason": spec.head_reason}
    out: list[Violation] = []

    def add(rule: str, observed: str, required: str, where: str) -> None:
        r = RULES[rule]
        out.append(Violation(rule, observed, required, where, r.fix.format(**fmt), r.reason.format(**fmt)))

    def first_and_more(blocks: list[AttentionBlock]) -> str:
        more = f" (+{len(blocks) - 1} more)" if len(blocks) > 1 else ""
        return blocks[0].where + more

    rules = spec.rules
    if "image_patch" in rules and shape.image_size and shape.patch_size:
        (ih, iw), (ph, pw) = shape.image_size, shape.patch_size
        if ih % ph or iw % pw:
            add(
                "image_patch",
                f"image {ih}x{iw} with patch {ph}x{pw} leaves {ih % ph}x{iw % pw} px",
                "no remainder",
                shape.where,
            )

    def per_block(rule: str, bad: list[AttentionBlock], observed: str, required: str) -> None:
        if bad:
            add(rule, observed, required, first_and_more(bad))

    blocks = list(shape.blocks)
    if "seq_len" in rules and block:
        bad = [b for b in blocks if b.seq_len is not None and b.seq_len % block]
        if bad:
            s = bad[0].seq_len or 0
            per_block("seq_len", bad, f"sequence length {s} % {block} = {s % block}", f"a multiple of {block}")
    if "head_dim" in rules and block:
        bad = [b for b in blocks if b.head_dim is None or b.head_dim % block]
        if bad:
            d = bad[0].head_dim
            observed = (
                "head dim is not whole (embed_dim % num_heads != 0)"
                if d is None
                else f"head dim {d} % {block} = {d % block}"
            )
            per_block("head_dim", bad, observed, f"a multiple of {block}")
    if "attention_3d" in rules:
        bad = [b for b in blocks if b.rank is not None and b.rank != 3]
        if bad:
            per_block("attention_3d", bad, f"attention tensors are {bad[0].rank}D", "3D [B*H, S, D]")
    if "class_token" in rules and block and shape.patches is not None:
        bad = [b for b in blocks if b.seq_len is not None and b.seq_len > shape.patches and b.seq_len % block]
        if bad:
            s = bad[0].seq_len or 0
            extra = s - shape.patches
            per_block(
                "class_token",
                bad,
                f"{shape.patches} patches + {extra} class/register token(s) = {s}",
                f"no prefix tokens, or a sequence padded to a multiple of {block} ({-(-s // block) * block})",
            )
    if "int8_mha_seq" in rules:
        bad = [b for b in blocks if b.seq_len is not None and b.seq_len > INT8_MHA_MAX_SEQ]
        if bad:
            per_block("int8_mha_seq", bad, f"sequence length {bad[0].seq_len}", f"<= {INT8_MHA_MAX_SEQ}")
    # Q/DQ placement is the quantizer's job: judged on quantized exports only, where attention left in
    # high precision is exactly the partial-coverage failure (an "NVFP4" engine with FP16 attention).
    if "qdq_attention" in rules and shape.quantized_graph:
        bad = [b for b in blocks if b.quantized is False]
        if bad:
            per_block(
                "qdq_attention", bad, "attention batched matmuls without Q/DQ", "Q/DQ on both inputs and softmax output"
            )
    return out


def check_attention_shapes(target: Any, precision: str) -> list[Violation]:
    """Violations of the attention-shape rules for `precision`.

    `target` is a ViTConfig (or a mapping of its fields), a torch module (a timm-style ViT with a
    `patch_embed`), an `onnx.ModelProto`, or a path to an ONNX file.
    """
    get_precision(precision)  # unknown precision: ValueError naming the valid ones, before any work
    return judge(read_shape(target), precision)


def assert_quantization_friendly(target: Any, precision: str) -> None:
    """Fail with one line per violated rule."""
    __tracebackhide__ = True
    violations = check_attention_shapes(target, precision)
    if violations:
        lines = "\n".join(f"  {v}" for v in violations)
        raise AssertionError(f"not quantization-friendly for {precision}: {len(violations)} rule(s) broken\n{lines}")


def read_shape(target: Any) -> AttentionShape:
    if isinstance(target, ViTConfig):
        return target.shape()
    if isinstance(target, Mapping):
        return ViTConfig(**target).shape()
    if isinstance(target, (str, Path)):
        return onnx_shape(load(Path(target)))
    mod = type(target).__module__
    if mod.startswith("onnx"):
        return onnx_shape(target)
    if mod.startswith(("torch", "timm")) or hasattr(target, "named_modules"):
        return module_shape(target)
    raise TypeError(
        f"cannot read attention shapes from a {type(target).__name__}; "
        "expected a ViTConfig, a mapping, a torch module, an onnx.ModelProto or an ONNX file path"
    )


# -- torch modules ----------------------------------------------------------------------------------
def module_shape(model: torch.nn.Module) -> AttentionShape:
    """Run one image through `model` and record the batched matmuls between activations: their rank,
    sequence length and head dim are read from the tensors themselves, not from attributes."""
    import torch
    from torch.overrides import TorchFunctionMode

    pe = getattr(model, "patch_embed", None)
    if pe is None or not hasattr(pe, "patch_size"):
        raise ValueError(f"{type(model).__name__} has no patch_embed with a patch_size; expected a timm-style ViT")
    patch = _pair(pe.patch_size)
    image = _pair(getattr(pe, "img_size", None) or (224, 224))
    grid = getattr(pe, "grid_size", None)
    patches = int(grid[0]) * int(grid[1]) if grid else (image[0] // patch[0]) * (image[1] // patch[1])

    names: list[str] = []  # the stack of modules running now, for naming where attention was found

    def leave(_m: Any, _a: Any, _o: Any) -> None:
        names.pop()  # a forward hook must return None, or it replaces the module's output

    hooks = []
    for name, sub in model.named_modules():
        hooks.append(sub.register_forward_pre_hook(lambda _m, _a, n=name: names.append(n)))
        hooks.append(sub.register_forward_hook(leave))

    sdpa = torch.nn.functional.scaled_dot_product_attention
    bmm_like = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm, torch.Tensor.bmm}
    seen: list[AttentionBlock] = []

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            where = names[-1] if names else type(model).__name__
            if func is sdpa:
                q = args[0]
                seen.append(AttentionBlock(where, int(q.shape[-2]), int(q.shape[-1]), q.dim()))
            elif func in bmm_like and len(args) >= 2:
                a, b = args[0], args[1]
                # Q·Kᵀ: two activations of rank >= 3 whose product is square in its last two dims.
                activations = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and min(a.dim(), b.dim()) >= 3
                if activations and a.shape[-2] == b.shape[-1] and not seen_at(where):
                    seen.append(AttentionBlock(where, int(a.shape[-2]), int(a.shape[-1]), a.dim()))
            return func(*args, **kwargs)

    def seen_at(where: str) -> bool:
        return any(b.where == where for b in seen)  # the second bmm (attn·V) of the same module

    was_training = model.training
    try:
        param = next(model.parameters(), None)
        dtype = param.dtype if param is not None else torch.float32
        device = param.device if param is not None else torch.device("cpu")
        x = torch.zeros(1, 3, *image, dtype=dtype, device=device)
        model.eval()
        with torch.inference_mode(), Recorder():
            model(x)
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    if not seen:
        raise ValueError(f"no attention found in {type(model).__name__}: no batched matmul between activations ran")
    return AttentionShape(type(model).__name__, image, patch, patches, tuple(seen))


# -- ONNX graphs ------------------------------------------------------------------------------------
_SCALE_OPS = {"Mul", "Div", "Add", "Where", "Cast"}


def onnx_shape(model: onnx.ModelProto) -> AttentionShape:
    """Find attention by pattern (MatMul -> Softmax -> MatMul, or an ONNX Attention node) and read ranks
    and sizes with shape inference."""
    g = model.graph
    shapes = infer_shapes(model)
    producer = producers(g)
    users = consumers(g)

    image = patch = None
    patches = None
    initializers = {i.name for i in g.initializer}
    for inp in g.input:
        s = shapes.get(inp.name)
        if inp.name not in initializers and s and len(s) == 4 and s[2] and s[3]:
            image = (int(s[2]), int(s[3]))
            break
    conv = next((n for n in g.node if n.op_type == "Conv"), None)
    if conv is not None:
        attrs = {a.name: list(a.ints) for a in conv.attribute}
        k: list[Any] = attrs.get("kernel_shape") or (shapes.get(conv.input[1]) or [None] * 4)[2:]
        if len(k) == 2 and all(k):
            patch = (int(k[0]), int(k[1]))
        out = shapes.get(conv.output[0])
        if out and len(out) == 4 and out[2] and out[3]:
            patches = int(out[2]) * int(out[3])
        elif image and patch:
            patches = (image[0] // patch[0]) * (image[1] // patch[1])

    def upstream(name: str, skip: set[str]) -> Any:
        node = producer.get(name)
        while node is not None and node.op_type in skip and node.input:
            node = producer.get(node.input[0])
        return node

    def downstream(name: str, skip: Any) -> list[Any]:
        """Consumers of `name`, looking through nodes for which skip(op_type) holds."""
        out, todo = [], list(users.get(name, []))
        while todo:
            n = todo.pop()
            if skip(n.op_type):
                for o in n.output:
                    todo.extend(users.get(o, []))
            else:
                out.append(n)
        return out

    def dq_fed(name: str) -> bool:
        node = upstream(name, SHAPE_OPS)
        return node is not None and is_dq(node.op_type)

    blocks = []
    for sm in (n for n in g.node if n.op_type == "Softmax"):
        mm1 = upstream(sm.input[0], _SCALE_OPS | SHAPE_OPS)
        if mm1 is None or mm1.op_type != "MatMul":
            continue
        q_after = [n for n in downstream(sm.output[0], lambda op: op in {"Cast", "Identity"}) if is_q(n.op_type)]
        through_qdq = downstream(sm.output[0], lambda op: op in SHAPE_OPS or is_q(op) or is_dq(op))
        mm2 = next((n for n in through_qdq if n.op_type == "MatMul"), None)
        q = shapes.get(mm1.input[0])
        s = shapes.get(sm.input[0])
        seq = int(s[-1]) if s and s[-1] else (int(q[-2]) if q and q[-2] else None)
        head = int(q[-1]) if q and q[-1] else None
        quantized = bool(q_after) and dq_fed(mm1.input[0]) and dq_fed(mm1.input[1])
        if mm2 is not None:
            quantized = quantized and all(dq_fed(i) for i in mm2.input)
        blocks.append(AttentionBlock(mm1.name or sm.name, seq, head, len(q) if q else None, quantized))
    for att in (n for n in g.node if n.op_type == "Attention"):
        q = shapes.get(att.input[0])
        rank = len(q) if q else None
        seq = int(q[-2]) if q and rank == 4 and q[-2] else None
        head = int(q[-1]) if q and rank == 4 and q[-1] else None
        blocks.append(AttentionBlock(att.name, seq, head, rank, None))
    if not blocks:
        raise ValueError(
            f"no attention found in ONNX graph {g.name or '(unnamed)'}: no MatMul -> Softmax -> MatMul pattern "
            "and no Attention node"
        )
    quantized_graph = any(is_q(n.op_type) or is_dq(n.op_type) for n in g.node)
    return AttentionShape(g.name or "onnx", image, patch, patches, tuple(blocks), quantized_graph)
