"""The FP32 reference: the FP32 model's output on the fixed input every engine runs, that an engine's output is
compared with (`cos vs fp32`). Computed eagerly, on the run's GPU where there is one, with TF32 off for the
convolution and the matmuls and attention in its plain form, so that FP32 is FP32; else on the CPU. ViT-B/16 at
batch 64 is about 1.1 TFLOP: 15 s of a `vitperf ab` prepare's 101 s on its 2 CPU threads (H200 host, 2026-12-03).
Once per cache folder: it is a reproducible part (`references/`), keyed by the weights, the input's shape and torch's
version, that every later process (each of `vitperf ab`'s rounds) loads.
"""

from __future__ import annotations

import hashlib
import json
import warnings
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PART = "references"


def tensor_bytes(t: torch.Tensor) -> bytes:
    """A tensor's raw bytes, whatever its dtype (numpy has no bfloat16 or float8)."""
    import torch

    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


# A model's weights digest, with what it was taken of. A process keys its FP32 references, calibrations and
# conversions by the same weights: hashing vit_base's 344 MB six times took 2.2 s of a round process (H100).
_DIGESTS: weakref.WeakKeyDictionary[torch.nn.Module, tuple[list[tuple[Any, ...]], bytes]] = weakref.WeakKeyDictionary()


def _marks(model: torch.nn.Module) -> list[tuple[Any, ...]]:
    """What the digest of `model` stays true for: each state tensor by name, the same object (held weakly) with the
    same version (an in-place change bumps it), memory, dtype, device and shape (a cast or move replaces them). A
    write through `.data` bumps no version; nothing here writes so into a model it has hashed."""
    found = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    return [(name, weakref.ref(t), t._version, t.data_ptr(), t.dtype, t.device, tuple(t.shape)) for name, t in found]


def _same(marks: list[tuple[Any, ...]], now: list[tuple[Any, ...]]) -> bool:
    return len(marks) == len(now) and all(
        a[0] == b[0] and a[1]() is b[1]() is not None and a[2:] == b[2:] for a, b in zip(marks, now, strict=True)
    )


def weights_digest(model: torch.nn.Module) -> bytes:
    """sha256 of every tensor of the model's state, by name; taken once while the weights stay as they were."""
    now = _marks(model)
    known = _DIGESTS.get(model)
    if known is not None and _same(known[0], now):
        return known[1]
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor_bytes(t))
    _DIGESTS[model] = (now, h.digest())
    return h.digest()


def same_weights(source: torch.nn.Module, copy: torch.nn.Module) -> None:
    """`copy` (a deep copy of `source`, unchanged since) has `source`'s digest, without hashing it again."""
    known = _DIGESTS.get(source)
    if known is not None and _same(known[0], _marks(source)):
        _DIGESTS[copy] = (_marks(copy), known[1])


def hash_weights(h: Any, model: torch.nn.Module) -> None:
    """Feed the model's weights digest to the hash `h`."""
    h.update(weights_digest(model))


def fp32_reference(
    model: torch.nn.Module, model_name: str, batch: int, cache_dir: Path | None, device: str | None = None
) -> torch.Tensor:
    """The FP32 model's output at `batch` on the fixed input, on the host: from the cache folder where an earlier
    process put it, else computed now (on `device` where it is a GPU: `on_device`) and put there. A file that cannot
    be read is said in one warning and written over."""
    import torch

    from pytest_vitperf.engines.models.zoo import fixed_input, input_size

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
    out = on_device(model, x, device) if device not in (None, "cpu") else None  # eager on the CPU, as it always was
    if out is None:
        with torch.inference_mode():
            out = model(x).float()
    if path is not None:
        from safetensors.torch import save

        from pytest_vitperf.core.files import write_atomic

        write_atomic(path, save({"output": out.contiguous()}))
    return out


def on_device(model: torch.nn.Module, x: torch.Tensor, device: str) -> torch.Tensor | None:
    """`model(x)` in FP32 on `device`, its weights copied there and the model left where it is, returned on the host;
    None (said in one warning) where it cannot run there: out of memory, or a model that keeps a tensor outside its
    parameters and buffers."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cudnn: Any = torch.backends.cudnn  # conv and rnn together: torch refuses to read cuDNN's flag where they differ
    flags = (cudnn.conv, cudnn.rnn, torch.backends.cuda.matmul)
    before = [f.fp32_precision for f in flags]
    try:
        for f in flags:
            f.fp32_precision = "ieee"  # the convolution's default is TF32
        state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        with torch.inference_mode(), sdpa_kernel(SDPBackend.MATH):
            weights = {k: v.to(device) for k, v in state.items()}
            return torch.func.functional_call(model, weights, (x.to(device),)).float().cpu()
    except (RuntimeError, torch.OutOfMemoryError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        warnings.warn(f"FP32 reference computed on the CPU: on {device} it failed ({reason})", stacklevel=3)
        return None
    finally:
        for f, was in zip(flags, before, strict=True):
            f.fp32_precision = was
        torch.cuda.empty_cache()


def _load(path: Path) -> torch.Tensor | None:
    from safetensors.torch import load_file

    try:
        return load_file(str(path))["output"]
    except Exception as exc:  # truncated or foreign: computed again and written over
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        warnings.warn(f"FP32 reference {path} is unusable ({reason}); computing it again", stacklevel=3)
        return None
