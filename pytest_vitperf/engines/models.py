"""The model zoo: timm ViTs built with random weights from a fixed seed (no hub downloads), or with
local weights from a file.

Module import stays light (names only); torch and timm load when a model is built.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

MODEL_NAMES = (
    "vit_tiny_patch16_224",
    "vit_small_patch16_224",
    "vit_base_patch16_224",
    "vit_large_patch16_224",
    "vit_qf_base_patch16_256",
    "vit_digits_patch4_32",
)
_ALIASES = {name.split("_patch")[0]: name for name in MODEL_NAMES}  # "vit_base" -> full name
SEED = 0
INPUT_SEED = 1234  # the fixed input every engine is timed on and checked against FP32 with
# The quantization-friendly ViT-B of the attention-shape rules: 256 px / patch 16 = 256 tokens, no class
# token (global average pooling), head dim 64, attention as 3D batched matmuls. Built on timm options.
QF_VIT = "vit_qf_base_patch16_256"
QF_VIT_CONFIG: dict[str, Any] = {
    "img_size": 256,
    "patch_size": 16,
    "embed_dim": 768,
    "depth": 12,
    "num_heads": 12,
    "class_token": False,
    "global_pool": "avg",
}

# The ViT trained on scikit-learn's digits (digits.py), built on the same rules: 32 px / patch 4 = 64 tokens, one
# channel, no class token, head dim 32, attention as 3D bmm. Built by name, it has random weights; the session and
# the accuracy suite use its trained weights.
DIGITS_MODEL = "vit_digits_patch4_32"
DIGITS_CONFIG: dict[str, Any] = {
    "img_size": 32,
    "patch_size": 4,
    "in_chans": 1,
    "embed_dim": 64,
    "depth": 2,
    "num_heads": 2,
    "mlp_ratio": 4.0,
    "num_classes": 10,
    "class_token": False,
    "global_pool": "avg",
}

# A model may carry the data it is calibrated on under this attribute (the trained digits ViT: training images);
# recipes.apply calibrates every other model on synthetic inputs.
CALIBRATION_ATTR = "vitperf_calibration"


def canonical_model_name(name: str) -> str | None:
    name = name.strip().lower()
    if name in MODEL_NAMES:
        return name
    return _ALIASES.get(name)


def build_model(name: str, *, weights: str | Path | None = None, seed: int = SEED, **cfg: Any) -> torch.nn.Module:
    """A timm ViT in eval mode. Random init from `seed` unless `weights` names a local state dict
    (.safetensors, or a torch checkpoint holding a state dict)."""
    canonical = canonical_model_name(name)
    if canonical is None:
        raise ValueError(f"unknown model {name!r}; valid: {', '.join(MODEL_NAMES)}")
    import timm
    import torch

    torch.manual_seed(seed)
    built_on_rules = {QF_VIT: QF_VIT_CONFIG, DIGITS_MODEL: DIGITS_CONFIG}
    if canonical in built_on_rules:
        model = build_vit(seed, bmm=True, **{**built_on_rules[canonical], **cfg})
    else:
        model = timm.create_model(canonical, pretrained=False, **cfg)
    if weights is not None:
        model.load_state_dict(_load_state_dict(Path(weights)))
    return model.eval()


def build_vit(seed: int = SEED, bmm: bool = False, **cfg: Any) -> torch.nn.Module:
    """A timm VisionTransformer from explicit options (img_size, patch_size, embed_dim, depth, num_heads,
    class_token, reg_tokens, global_pool, ...), attention as 3D bmm when `bmm`. Random init from `seed`."""
    import torch
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(seed)
    if bmm:
        cfg["attn_layer"] = bmm_attention()
    return VisionTransformer(**cfg).eval()


@functools.cache
def bmm_attention() -> type[torch.nn.Module]:
    """timm's Attention with q, k, v as [B*H, S, D] and torch.bmm, so that the attention GEMMs export as
    3D MatMuls that TensorRT's block quantizers accept. Same parameters (qkv, proj) as timm's, so a timm
    Attention can become one in place. The bmm operands pass through `_q`, `_k`, `_v` and `_p` (the softmax
    output): identities here, quantizers in the fp8-attn recipe."""
    import torch
    from timm.layers.attention import Attention

    class BmmAttention(Attention):
        def _q(self, t: torch.Tensor) -> torch.Tensor:
            return t

        _k = _v = _p = _q

        def forward(self, x: torch.Tensor, attn_mask: Any = None, is_causal: bool = False) -> torch.Tensor:
            b, n, _ = x.shape
            h, d = self.num_heads, self.head_dim
            qkv = self.qkv(x).reshape(b, n, 3, h, d).permute(2, 0, 3, 1, 4).reshape(3, b * h, n, d)
            q, k, v = qkv.unbind(0)
            q, k = self.q_norm(q), self.k_norm(k)
            attn = torch.bmm(self._q(q * self.scale), self._k(k).transpose(1, 2)).softmax(dim=-1)
            out = torch.bmm(self._p(attn), self._v(v)).reshape(b, h, n, d).transpose(1, 2).reshape(b, n, h * d)
            return self.proj(self.norm(out))

    return BmmAttention


def _load_state_dict(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(f"weights file {path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    import torch

    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise ValueError(f"weights file {path} does not hold a state dict")
    return state


def fixed_input(shape: tuple[int, ...]) -> torch.Tensor:
    """The input every engine runs (FP32, on the host): normal samples from INPUT_SEED, the same for every backend,
    so that an engine's output can be compared with the FP32 model's on it."""
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(INPUT_SEED))


def input_size(model: torch.nn.Module) -> tuple[int, int, int]:
    """(channels, height, width) the model expects: from its patch embedding where it has one, else from timm's
    pretrained config."""
    cfg = getattr(model, "pretrained_cfg", None) or {}
    size = cfg.get("input_size", (3, 224, 224))
    patch_embed = getattr(model, "patch_embed", None)
    img = getattr(patch_embed, "img_size", None)
    channels = getattr(getattr(patch_embed, "proj", None), "in_channels", size[0])
    if img is not None:
        size = (channels, int(img[0]), int(img[1]))
    return (int(size[0]), int(size[1]), int(size[2]))
