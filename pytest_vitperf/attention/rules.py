"""The attention-shape rules, one object each: its name, the precisions it applies to, its check over an
`AttentionShape`, and the reason and fix it prints. A new rule is one more entry in `RULES`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_vitperf.attention.shape import AttentionBlock, AttentionShape
from pytest_vitperf.core.precision import get_precision

INT8_MHA_MAX_SEQ = 512
BLOCK_SCALED = frozenset({"mxfp8", "nvfp4"})
# Per root precision: the multiple that sequence and head dimension need, and why the head dimension does.
MULTIPLE: dict[str, tuple[int, str]] = {
    "fp8": (16, "TensorRT fuses FP8 MHA only when head_dim % 16 == 0"),
    "mxfp8": (32, "MXFP8 block scales (32 elements) run along the head dimension in Q·Kᵀ"),
    "nvfp4": (16, "NVFP4 block scales (16 elements) run along the head dimension in Q·Kᵀ"),
}


@dataclass(frozen=True)
class Finding:
    observed: str
    required: str
    where: str


@dataclass(frozen=True)
class Rule:
    name: str
    precisions: frozenset[str]  # precision families (a recipe variant follows its base)
    check: Callable[[AttentionShape, int], Finding | None]  # the shape and the root precision's multiple
    reason: str  # may name {block} and {head_reason}
    fix: str


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


def _where(bad: list[AttentionBlock]) -> str:
    return bad[0].where + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else "")


def _image_patch(shape: AttentionShape, block: int) -> Finding | None:
    if not (shape.image_size and shape.patch_size):
        return None
    (ih, iw), (ph, pw) = shape.image_size, shape.patch_size
    if ih % ph == 0 and iw % pw == 0:
        return None
    return Finding(f"image {ih}x{iw} with patch {ph}x{pw} leaves {ih % ph}x{iw % pw} px", "no remainder", shape.where)


def _seq_len(shape: AttentionShape, block: int) -> Finding | None:
    bad = [b for b in shape.blocks if b.seq_len is not None and b.seq_len % block]
    if not bad:
        return None
    s = bad[0].seq_len or 0
    return Finding(f"sequence length {s} % {block} = {s % block}", f"a multiple of {block}", _where(bad))


def _head_dim(shape: AttentionShape, block: int) -> Finding | None:
    bad = [b for b in shape.blocks if b.head_dim is None or b.head_dim % block]
    if not bad:
        return None
    d = bad[0].head_dim
    whole = "head dim is not whole (embed_dim % num_heads != 0)"
    observed = whole if d is None else f"head dim {d} % {block} = {d % block}"
    return Finding(observed, f"a multiple of {block}", _where(bad))


def _attention_3d(shape: AttentionShape, block: int) -> Finding | None:
    bad = [b for b in shape.blocks if b.rank is not None and b.rank != 3]
    return Finding(f"attention tensors are {bad[0].rank}D", "3D [B*H, S, D]", _where(bad)) if bad else None


def _class_token(shape: AttentionShape, block: int) -> Finding | None:
    patches = shape.patches
    if patches is None:
        return None
    bad = [b for b in shape.blocks if b.seq_len is not None and b.seq_len > patches and b.seq_len % block]
    if not bad:
        return None
    s = bad[0].seq_len or 0
    padded = -(-s // block) * block
    return Finding(
        f"{patches} patches + {s - patches} class/register token(s) = {s}",
        f"no prefix tokens, or a sequence padded to a multiple of {block} ({padded})",
        _where(bad),
    )


def _int8_mha_seq(shape: AttentionShape, block: int) -> Finding | None:
    bad = [b for b in shape.blocks if b.seq_len is not None and b.seq_len > INT8_MHA_MAX_SEQ]
    return Finding(f"sequence length {bad[0].seq_len}", f"<= {INT8_MHA_MAX_SEQ}", _where(bad)) if bad else None


def _qdq_attention(shape: AttentionShape, block: int) -> Finding | None:
    # Q/DQ placement is the quantizer's job: judged on quantized exports only, where attention left in high
    # precision is exactly the partial-coverage failure (an "NVFP4" engine with FP16 attention).
    if not shape.quantized_graph:
        return None
    bad = [b for b in shape.blocks if b.quantized is False]
    required = "Q/DQ on both inputs and softmax output"
    return Finding("attention batched matmuls without Q/DQ", required, _where(bad)) if bad else None


# In the order violations are listed.
RULES: tuple[Rule, ...] = (
    Rule(
        "image_patch",
        BLOCK_SCALED,
        _image_patch,
        "the patch grid must tile the image; otherwise the edge pixels are dropped",
        "use an image size that is a multiple of the patch size (e.g. 256 px with patch 16)",
    ),
    Rule(
        "seq_len",
        BLOCK_SCALED,
        _seq_len,
        "block quantization of the attention GEMMs runs in blocks of {block} along the sequence",
        "make patches + class/register tokens a multiple of {block} (256 px / patch 16 gives 256 tokens)",
    ),
    Rule(
        "head_dim",
        BLOCK_SCALED | {"fp8"},
        _head_dim,
        "{head_reason}",
        "choose embed_dim / num_heads as a multiple of {block} (64 for ViT-B: 768 / 12)",
    ),
    Rule(
        "attention_3d",
        BLOCK_SCALED,
        _attention_3d,
        "TensorRT's block quantizers take 2D or 3D tensors; 4D [B, H, S, D] attention stays unquantized",
        "reshape q, k, v to [B*H, S, D] and use torch.bmm (models.bmm_attention)",
    ),
    Rule(
        "class_token",
        BLOCK_SCALED,
        _class_token,
        "class and register tokens are added to the patches and break the sequence's divisibility",
        "drop the class token and pool by average (timm: class_token=False, global_pool='avg'), "
        "or add register tokens (reg_tokens) to pad the sequence to a multiple of {block}",
    ),
    Rule(
        "int8_mha_seq",
        frozenset({"int8"}),
        _int8_mha_seq,
        "TensorRT's INT8 fused multi-head attention kernels take sequences of at most 512",
        "keep patches + class/register tokens <= 512 (e.g. 352 px / patch 16 gives 484)",
    ),
    Rule(
        "qdq_attention",
        BLOCK_SCALED | {"fp8"},
        _qdq_attention,
        "TensorRT quantizes attention only with Q/DQ before both batched matmuls and on the softmax "
        "output; without them attention stays in FP16",
        "enable Model Optimizer's attention (bmm and softmax) quantizers and export again",
    ),
)


def rules_for(precision: str) -> list[Rule]:
    root = get_precision(precision).root  # unknown precision: ValueError naming the valid ones
    return [r for r in RULES if root in r.precisions]


def judge(shape: AttentionShape, precision: str) -> list[Violation]:
    """The violations of `precision`'s rules by `shape`, in rule order."""
    block, head_reason = MULTIPLE.get(get_precision(precision).root, (0, ""))
    words = {"block": block, "head_reason": head_reason}
    out = []
    for rule in rules_for(precision):
        found = rule.check(shape, block)
        if found is not None:
            fix, reason = rule.fix.format(**words), rule.reason.format(**words)
            out.append(Violation(rule.name, found.observed, found.required, found.where, fix, reason))
    return out
