"""The FP32 reference: the FP32 model's output on the fixed input every engine runs, that an engine's output is
compared with (`cos vs fp32`). Computed eagerly on the CPU, where FP32 is FP32 (a GPU would run the patch embedding's
convolution in TF32 by default), once per cache folder: ViT-B/16 at batch 64 is about 1.1 TFLOP, which every fresh
process (each of `vitperf ab`'s rounds) paid again on the share of the host's cores it holds. It is a reproducible
part (`references/`), keyed by the weights, the input's shape and torch's version.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PART = "references"


def tensor_bytes(t: torch.Tensor) -> bytes:
    """A tensor's raw bytes, whatever its dtype (numpy has no bfloat16 or float8)."""
    import torch

    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def hash_weights(h: Any, model: torch.nn.Module) -> None:
    """Feed every tensor of the model's state, by name, to the hash `h`."""
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor_bytes(t))


def fp32_reference(model: torch.nn.Module, model_name: str, batch: int, cache_dir: Path | None) -> torch.Tensor:
    """The FP32 model's output at `batch` on the fixed input: from the cache folder where an earlier process put it,
    else computed now (and put there). A file that cannot be read is said in one warning and written over."""
    import torch

    from pytest_vitperf.engines.models import fixed_input, input_size

    x = fixed_input((batch, *input_size(model)))
    path = None
    if cache_dir is not None:
        h = hashlib.sha256(json.dumps([model_name, list(x.shape), torch.__version__]).encode())
        hash_weights(h, model)
        path = cache_dir / PART / f"{model_name}-b{batch}-{h.hexdigest()[:24]}.safetensors"
        if path.exists():
            stored = _load(path)
            if stored is not None:
                return stored
    with torch.inference_mode():
        out = model(x).float()
    if path is not None:
        from safetensors.torch import save

        from pytest_vitperf.core.files import write_atomic

        write_atomic(path, save({"output": out.contiguous()}))
    return out


def _load(path: Path) -> torch.Tensor | None:
    from safetensors.torch import load_file

    try:
        return load_file(str(path))["output"]
    except Exception as exc:  # truncated or foreign: computed again and written over
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        warnings.warn(f"FP32 reference {path} is unusable ({reason}); computing it again", stacklevel=3)
        return None
