"""The torch module reader: one image through the model, recording the batched matmuls between activations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_vitperf.attention.shape import AttentionBlock, AttentionShape, pair

if TYPE_CHECKING:
    import torch


def module_shape(model: torch.nn.Module) -> AttentionShape:
    """Run one image through `model` and record the batched matmuls between activations: their rank,
    sequence length and head dim are read from the tensors themselves, not from attributes."""
    import torch
    from torch.overrides import TorchFunctionMode

    pe = getattr(model, "patch_embed", None)
    if pe is None or not hasattr(pe, "patch_size"):
        raise ValueError(f"{type(model).__name__} has no patch_embed with a patch_size; expected a timm-style ViT")
    patch = pair(pe.patch_size)
    image = pair(getattr(pe, "img_size", None) or (224, 224))
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
        channels = getattr(getattr(pe, "proj", None), "in_channels", 3)
        x = torch.zeros(1, channels, *image, dtype=dtype, device=device)
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
