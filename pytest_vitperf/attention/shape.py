"""What the attention rules read: one `AttentionShape` per target, and the config reader (`ViTConfig.shape`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


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


def pair(v: int | tuple[int, int] | Iterable[int]) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    a, b = tuple(v)
    return (int(a), int(b))


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
        if min(pair(self.image_size) + pair(self.patch_size)) < 1:
            raise ValueError("ViTConfig.image_size and patch_size must be >= 1")

    def shape(self) -> AttentionShape:
        (ih, iw), (ph, pw) = pair(self.image_size), pair(self.patch_size)
        patches = (ih // ph) * (iw // pw)
        prefix = int(self.class_token) + self.reg_tokens
        head_dim = self.embed_dim // self.num_heads if self.embed_dim % self.num_heads == 0 else None
        block = AttentionBlock(where="config", seq_len=patches + prefix, head_dim=head_dim, rank=None)
        return AttentionShape("config", (ih, iw), (ph, pw), patches, (block,))
