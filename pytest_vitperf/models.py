"""The model zoo: timm ViTs built with random weights from a fixed seed (no hub downloads), or with
local weights from a file.

Module import stays light (names only); torch and timm load when a model is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

MODEL_NAMES = (
    "vit_tiny_patch16_224",
    "vit_small_patch16_224",
    "vit_base_patch16_224",
    "vit_large_patch16_224",
)
_ALIASES = {name.split("_patch")[0]: name for name in MODEL_NAMES}  # "vit_base" -> full name
SEED = 0


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
    model = timm.create_model(canonical, pretrained=False, **cfg)
    if weights is not None:
        model.load_state_dict(_load_state_dict(Path(weights)))
    return model.eval()


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


def input_size(model: torch.nn.Module) -> tuple[int, int, int]:
    """(channels, height, width) the model expects, read from timm's pretrained config."""
    cfg = getattr(model, "pretrained_cfg", None) or {}
    size = cfg.get("input_size", (3, 224, 224))
    patch_embed = getattr(model, "patch_embed", None)
    img = getattr(patch_embed, "img_size", None)
    if img is not None:
        size = (size[0], int(img[0]), int(img[1]))
    return (int(size[0]), int(size[1]), int(size[2]))
