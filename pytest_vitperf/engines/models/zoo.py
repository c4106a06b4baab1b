"""The models: the zoo's six names, any model that timm can create (DeiT, DINOv2, EVA-02, CLIP and SigLIP towers,
any vit_*), and models a conftest.py registers (hookspec.pytest_vitperf_models). Each is built with random weights
from a fixed seed (no hub downloads), with weights from a local file, or with timm's pretrained weights where they
are already in the local cache (--vitperf-weights).

Module import stays light (names only); torch and timm load when a model is built or a name is checked.
"""

from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    import torch

    # A registered model's factory (hookspec.pytest_vitperf_models): the module and the (C, H, W) of one input.
    ModelFactory = Callable[[], tuple[torch.nn.Module, tuple[int, int, int]]]

T = TypeVar("T")

MODEL_NAMES = (
    "vit_tiny_patch16_224",
    "vit_small_patch16_224",
    "vit_base_patch16_224",
    "vit_large_patch16_224",
    "vit_qf_base_patch16_256",
    "vit_digits_patch4_32",
)
_ALIASES = {name.split("_patch")[0]: name for name in MODEL_NAMES}  # "vit_base" -> full name
# `--vitperf-models nightly`: the ViTs teams deploy, each at the resolution it is deployed at, with random weights
# (enough for time). docs/options.md says why each is in it. Not DeiT-B: with random weights its engines are ViT-B's
# (one build, the same hash), so it cost an eighth of a nightly's turns and timed no other kernel (H200, 2026-12-02).
NIGHTLY = ("vit_small_patch16_224", "vit_base_patch16_224", "vit_large_patch16_224", "vit_base_patch14_dinov2",
           "eva02_base_patch14_224", "vit_base_patch16_siglip_224", "vit_large_patch14_clip_224")  # fmt: skip
MODEL_SETS = {"nightly": NIGHTLY}
# A name the options take before timm is imported: timm's (with an optional .tag) or a registered one. Never "-":
# test ids join the parameters with it (workers.family_of reads a model back from one).
NAME = re.compile(r"[a-z0-9][\w.]*")
PRETRAINED = "pretrained"  # --vitperf-weights NAME=pretrained: timm's own weights, from the local cache only
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
    """The zoo's full name for a zoo name or alias, any other well-formed name as it is (timm or a conftest.py
    decides later whether it exists: unknown_model_reason), None for a malformed one."""
    name = name.strip().lower()
    if name in MODEL_NAMES:
        return name
    return _ALIASES.get(name) or (name if NAME.fullmatch(name) else None)


def unknown_model_reason(name: str, registered: Iterable[str] = ()) -> str | None:
    """None when `name` is the zoo's, registered, or one timm can create; else one line with the closest names."""
    if name in MODEL_NAMES or name in registered:
        return None
    import timm

    if timm.is_model(name):
        return None
    arch = name.split(".")[0]
    known = list(dict.fromkeys([*MODEL_NAMES, *registered, *timm.list_models()]))
    close = difflib.get_close_matches(arch, known, n=5)
    longest = max(arch.split("_"), key=len)
    if not close and len(longest) >= 4:  # dinov2_vitb14 (torch.hub's name): timm's names holding "dinov2"
        close = [k for k in known if longest in k][:5]
    hint = f"closest: {', '.join(close)}" if close else f"the zoo: {', '.join(MODEL_NAMES)}"
    return f"unknown model {name!r}: not the zoo's, not registered, and timm cannot create it; {hint}"


def build_model(name: str, *, weights: str | Path | None = None, seed: int = SEED, **cfg: Any) -> torch.nn.Module:
    """A zoo or timm model in eval mode. Random init from `seed` unless `weights` names a local state dict
    (.safetensors, or a torch checkpoint holding one) or is PRETRAINED (timm's weights, from the local cache)."""
    canonical = canonical_model_name(name)
    if canonical is None:
        raise ValueError(f"unknown model {name!r}; valid: {', '.join(MODEL_NAMES)} or a timm model name")
    reason = unknown_model_reason(canonical)
    if reason is not None:
        raise ValueError(reason)
    import timm
    import torch

    torch.manual_seed(seed)
    built_on_rules = {QF_VIT: QF_VIT_CONFIG, DIGITS_MODEL: DIGITS_CONFIG}
    if canonical in built_on_rules:
        model = build_vit(seed, bmm=True, **{**built_on_rules[canonical], **cfg})
    elif weights == PRETRAINED:
        model = _pretrained(canonical, cfg)
    else:
        model = timm.create_model(canonical, pretrained=False, **cfg)
        if weights is None:
            like_trained(model)
    if weights is not None and weights != PRETRAINED:
        load_weights(model, canonical, Path(weights))
    return model.eval()


# LayerScale's gain in random weights: CaiT's initial value for networks up to 18 blocks, where its residual branches
# carry signal from the first step. timm starts DeiT-3 at 1e-6 and DINOv2 at 1e-5, below FP16's smallest normal
# number (6.1e-5): with random weights the input's whole effect on the output rides on branches FP16 cannot hold, so an
# FP16 engine computes something else and fails its accuracy bound. Trained models do not keep such gains.
TRAINED_LAYER_SCALE = 0.1


def _layer_scales(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    import torch

    gains = (getattr(m, "gamma", None) for m in model.modules() if type(m).__name__.startswith("LayerScale"))
    return [g for g in gains if isinstance(g, torch.nn.Parameter)]


def like_trained(model: torch.nn.Module) -> int:
    """Set a randomly initialised model's LayerScale gains to TRAINED_LAYER_SCALE; how many were set."""
    import torch

    scales = _layer_scales(model)
    with torch.no_grad():
        for gamma in scales:
            gamma.fill_(TRAINED_LAYER_SCALE)
    return len(scales)


@functools.cache
def has_layer_scale(name: str) -> bool:
    """Whether timm's `name` has LayerScale gains (built on the meta device: no memory, a tenth of a second)."""
    import timm
    import torch

    try:
        with torch.device("meta"):
            return bool(_layer_scales(timm.create_model(name, pretrained=False)))
    except Exception:  # a name timm cannot build here says so where it is built, not in the header
        return False


def random_weights(name: str, weights: Iterable[tuple[str, str | Path]], registered: Iterable[str]) -> bool:
    """Whether `name` is built with seeded random weights: not registered, not the trained digits ViT, no weights."""
    return name not in set(registered) and name != DIGITS_MODEL and name not in dict(weights)


def weights_note(models: Iterable[str], weights: Iterable[tuple[str, str | Path]], registered: Iterable[str]) -> str:
    """Where each model's weights come from, for the header: random ones make no claim about accuracy."""
    given, own = dict(weights), set(registered)

    def one(name: str) -> str:
        w = given.get(name)
        if name in own:
            return f"{name} (registered by a conftest.py{'' if w is None else f', weights {w}'})"
        if name == DIGITS_MODEL:
            return f"{name} (trained on scikit-learn's digits)"
        if w is None:
            scaled = f", LayerScale {TRAINED_LAYER_SCALE:g} as trained" if has_layer_scale(name) else ""
            return f"{name} (random weights, seed {SEED}{scaled})"
        return f"{name} ({'pretrained' if w == PRETRAINED else w})"

    return ", ".join(one(m) for m in models)


def _pretrained(name: str, cfg: dict[str, Any]) -> torch.nn.Module:
    """timm's pretrained weights for `name`, from the local Hugging Face cache: a benchmark run never downloads."""
    import huggingface_hub.constants as hub
    import timm

    offline, hub.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE, True  # read at its import: the environment is too late
    try:
        return timm.create_model(name, pretrained=True, **cfg)
    except Exception as exc:  # timm and huggingface_hub raise many kinds for "not in the cache"
        raise ValueError(
            f"timm's pretrained weights for {name} are not in the local cache ({type(exc).__name__}); fetch them once "
            f"with: python -c \"import timm; timm.create_model('{name}', pretrained=True)\""
        ) from None
    finally:
        hub.HF_HUB_OFFLINE = offline


def load_weights(model: torch.nn.Module, name: str, path: Path) -> None:
    """Load `path` into `model`, or say in one line which key is the first that does not fit."""
    state = _load_state_dict(path)
    own = model.state_dict()
    if not own.keys() & state.keys() and all(k.startswith("module.") for k in state):
        state = {k.removeprefix("module."): v for k, v in state.items()}  # saved from DataParallel / DDP
    for key, tensor in own.items():
        theirs = state.get(key)
        if theirs is None:
            problem = f"{key!r} is missing from the file"
        elif tuple(theirs.shape) != tuple(tensor.shape):
            problem = f"{key!r} is {list(theirs.shape)} in the file, {list(tensor.shape)} in the model"
        else:
            continue
        break
    else:
        extra = sorted(state.keys() - own.keys())
        if not extra:
            model.load_state_dict(state)
            return
        problem = f"{extra[0]!r} is in the file, not in the model"
    raise ValueError(
        f"weights {path} do not fit {name}: {problem}; give the checkpoint of this model, or the model of this "
        f"checkpoint: --vitperf-models NAME --vitperf-weights NAME={path}"
    )


def make_model(name: str, factory: ModelFactory | None, weights: str | Path | None) -> torch.nn.Module:
    """A registered model from its factory (marked with the input size it gave; `weights`, a file, loaded into it),
    else build_model's."""
    if factory is None:
        return build_model(name, weights=weights)
    if weights == PRETRAINED:
        raise ValueError(f"{name} is registered by a conftest.py, and timm has no pretrained weights for it; give a "
                         f"file: --vitperf-weights {name}=FILE")  # fmt: skip
    model, size = factory()
    model.vitperf_input_size = tuple(int(v) for v in size)  # type: ignore[assignment]  # input_size reads it
    if weights is not None:
        load_weights(model, name, Path(weights))
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


def retry_unfused(run: Callable[[], T], model: torch.nn.Module) -> T:
    """`run()`, and when it fails while some of `model`'s attention is fused (timm's `fused_attn`: one
    scaled_dot_product_attention call), `run()` again with it unfused, the same arithmetic as explicit matmuls and a
    softmax. timm's EVA-02 exports only so: the TorchScript exporter traces its SDPA's `is_causal` as a tensor."""
    try:
        return run()
    except Exception:
        fused = [m for m in model.modules() if getattr(m, "fused_attn", None) is True]
        if not fused:
            raise
    for m in fused:
        setattr(m, "fused_attn", False)  # noqa: B010  # a plain attribute of timm's, not a submodule
    try:
        return run()
    finally:
        for m in fused:
            setattr(m, "fused_attn", True)  # noqa: B010


def weights_problem(path: Path) -> str | None:
    """What makes `path` no weights file, found without loading it (safetensors' header; torch.save's archive, or an
    old pickle's first byte), or None. Cheap: the options are checked with it before anything is built."""
    if not path.is_file():
        return "does not exist" if not path.exists() else "is a folder, not a weights file"
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(path), framework="numpy"):
                return None
        except (SafetensorError, OSError, ValueError) as exc:
            return f"is not a safetensors file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    import zipfile

    try:
        archive = zipfile.is_zipfile(path)
    except zipfile.BadZipFile as exc:  # is_zipfile raises, where an end record claims a multi-disk archive
        return f"is a damaged zip archive ({exc})"
    if archive or head[:1] == b"\x80":
        return None
    return "is neither .safetensors nor a torch.save file (a zip archive); save the state dict with either"


def _load_state_dict(path: Path) -> dict[str, Any]:
    """The tensors of a weights file, never unpickling more than tensors and plain containers; ValueError, one line
    naming the file, for a file that does not load or holds no state dict."""
    problem = weights_problem(path)
    if problem is not None:
        raise ValueError(f"weights file {path} {problem}")
    import torch

    state: Any
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # safetensors', torch's zip reader's and the weights-only unpickler's many errors
        why = (str(exc) or type(exc).__name__).splitlines()[0]
        raise ValueError(f"weights file {path} does not load ({why})") from None
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(t, torch.Tensor) for t in state.values()):
        raise ValueError(f"weights file {path} does not hold a state dict (names to tensors)")
    return state


def fixed_input(shape: tuple[int, ...]) -> torch.Tensor:
    """The input every engine runs (FP32, on the host): normal samples from INPUT_SEED, the same for every backend,
    so that an engine's output can be compared with the FP32 model's on it."""
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(INPUT_SEED))


def input_size(model: torch.nn.Module) -> tuple[int, int, int]:
    """(channels, height, width) the model expects: as registered (input_size_of), else from its patch embedding
    where it has one, else from timm's pretrained config."""
    registered = getattr(model, "vitperf_input_size", None)
    if registered is not None:
        return (int(registered[0]), int(registered[1]), int(registered[2]))
    cfg = getattr(model, "pretrained_cfg", None) or {}
    size = cfg.get("input_size", (3, 224, 224))
    patch_embed = getattr(model, "patch_embed", None)
    img = getattr(patch_embed, "img_size", None)
    channels = getattr(getattr(patch_embed, "proj", None), "in_channels", size[0])
    if img is not None:
        size = (channels, int(img[0]), int(img[1]))
    return (int(size[0]), int(size[1]), int(size[2]))
