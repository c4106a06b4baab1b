"""Precision recipes: what a precision quantizes and how it calibrates, built with Model Optimizer, and the
ONNX export that carries the precision into a strongly typed TensorRT engine.

| recipe | what |
|---|---|
| fp32 | the plain export |
| fp16, bf16 | the FP32 export cast by Model Optimizer's ONNX autocast (`convert_to_f16`), I/O kept FP32 |
| fp8 | E4M3 per tensor on every Linear (FP8_DEFAULT_CFG); the exporter adds Q/DQ on softmax outputs |
| fp8-attn | fp8, plus FP8 Q/DQ before both attention batched matmuls and on the softmax output (TensorRT's FP8 |
| | MHA fusion pattern): timm attention becomes the zoo's 3D-bmm attention, whose operands pass through quantizers |
| int8 | INT8_DEFAULT_CFG (per-channel weights, per-tensor activations) |
| int8-smoothquant | INT8_SMOOTHQUANT_CFG: smoothing scales (a Linear's `_pre_quant_scale`) move outliers into weights |
| mxfp8 | MXFP8_DEFAULT_CFG, Conv2d in FP8 (TensorRT's dynamic block quantize takes 2D/3D inputs only) |
| nvfp4 | NVFP4_DEFAULT_CFG on every Linear, Conv2d in FP8 |
| nvfp4-mlp-only | NVFP4_MLP_ONLY_CFG: only the MLP Linears, the partial coverage of seed 000 |
| fp16-sparse24 | 2:4 magnitude sparsity (`sparsify(mode="sparse_magnitude")`), then fp16 |
| fp8-sparse24 | 2:4 magnitude sparsity, then fp8 |

Calibration runs deterministic synthetic images (a fixed seed) unless the caller passes an iterable of
batches. Model Optimizer fake-quantizes the block formats (MXFP8, NVFP4) with GPU kernels only; on CPU tensors
`cpu_quant.cpu_block_quant` supplies the same arithmetic, so every recipe calibrates and exports on a CPU (the
vit_tiny exports made on a CPU and on an H200 are identical; tests/test_engines.py holds them to it).
Exports are cached by content hash (the model's weights, the recipe, the input shape, the opset), and so are
calibrations (`CalibrationCache`), which the torch backend and the export share.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import io
import json
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.core.precision import Precision, Recipe, get_precision
from pytest_vitperf.engines.models.reference import hash_weights, tensor_bytes

if TYPE_CHECKING:
    import onnx
    import torch

FP4_OPSET = 23  # FLOAT4E2M1 initializers need opset 23
DEFAULT_OPSET = 20


_FP8 = {"num_bits": (4, 3), "axis": None}
_CONV_FP8 = [
    {"parent_class": "nn.Conv2d", "quantizer_name": "*weight_quantizer", "cfg": dict(_FP8)},
    {"parent_class": "nn.Conv2d", "quantizer_name": "*input_quantizer", "cfg": dict(_FP8)},
]
# FP8 Q/DQ on both attention batched matmuls' inputs and on the softmax output (QuantBmmAttention).
_MHA_FP8 = [
    {"quantizer_name": "*bmm_quantizer", "cfg": dict(_FP8)},
    {"quantizer_name": "*softmax_quantizer", "cfg": dict(_FP8)},
]


def opset(p: Precision) -> int:
    return FP4_OPSET if p.weights == "nvfp4" else DEFAULT_OPSET


def synthetic_calibration(shape: tuple[int, ...], batches: int = 4, seed: int = 0) -> list[torch.Tensor]:
    """Deterministic calibration images: standard normal, like normalised ImageNet inputs."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=gen) for _ in range(batches)]


def calibration_batches(model: torch.nn.Module) -> list[torch.Tensor]:
    """What a recipe calibrates `model` on unless told otherwise: its own images (the digits ViT's training split)
    or the synthetic ones."""
    from pytest_vitperf.engines.models.zoo import CALIBRATION_ATTR, input_size

    return list(getattr(model, CALIBRATION_ATTR, None) or synthetic_calibration((2, *input_size(model))))


def calibration_key(recipe: Recipe, model: torch.nn.Module, batches: list[torch.Tensor], *facts: str | None) -> str:
    """What decides a calibration's result: the recipe, Model Optimizer's version, the calibration images and the
    weights, with the caller's `facts` (the device kind, what the result is cast to)."""
    from pytest_vitperf.measure.env import version_of

    fields = [repr(recipe), version_of("nvidia-modelopt"), *facts, [list(b.shape) for b in batches]]
    h = hashlib.sha256(json.dumps(fields).encode())
    for b in batches:
        h.update(tensor_bytes(b))
    hash_weights(h, model)
    return h.hexdigest()[:24]


def quant_config(recipe: Recipe) -> dict[str, Any]:
    import modelopt.torch.quantization as mtq

    assert recipe.config is not None
    cfg = copy.deepcopy(getattr(mtq, recipe.config))
    if recipe.conv_fp8:
        cfg["quant_cfg"] = [*cfg["quant_cfg"], *_CONV_FP8]
        cfg["algorithm"] = "max"
    if recipe.mha_fp8:
        cfg["quant_cfg"] = [*cfg["quant_cfg"], *_MHA_FP8]
    return cfg


def register_quant_attention() -> None:
    """Teach Model Optimizer to quantize the zoo's bmm attention: its `_q`, `_k`, `_v`, `_p` hooks become
    TensorQuantizers (disabled unless a config enables `*bmm_quantizer` / `*softmax_quantizer`). Once per class:
    Model Optimizer's registry refuses a second registration, and outlives a reload of this module."""
    import modelopt.torch.quantization as mtq
    from modelopt.torch.quantization.nn import QuantModuleRegistry, TensorQuantizer

    from pytest_vitperf.engines.models.zoo import bmm_attention

    base = bmm_attention()
    if base in QuantModuleRegistry:
        return

    class QuantBmmAttention(base):  # type: ignore[misc, valid-type]
        def _setup(self) -> None:
            self.q_bmm_quantizer = TensorQuantizer()
            self.k_bmm_quantizer = TensorQuantizer()
            self.v_bmm_quantizer = TensorQuantizer()
            self.softmax_quantizer = TensorQuantizer()

        def _q(self, t: torch.Tensor) -> torch.Tensor:
            return self.q_bmm_quantizer(t)

        def _k(self, t: torch.Tensor) -> torch.Tensor:
            return self.k_bmm_quantizer(t)

        def _v(self, t: torch.Tensor) -> torch.Tensor:
            return self.v_bmm_quantizer(t)

        def _p(self, t: torch.Tensor) -> torch.Tensor:
            return self.softmax_quantizer(t)

    mtq.register(original_cls=base, quantized_cls=QuantBmmAttention)


def to_bmm_attention(model: torch.nn.Module) -> torch.nn.Module:
    """Turn every timm Attention into the zoo's bmm attention, in place: same parameters, 3D layout."""
    from timm.layers.attention import Attention

    from pytest_vitperf.engines.models.zoo import bmm_attention

    cls: Any = bmm_attention()
    for module in model.modules():
        if type(module) is Attention:
            module.__class__ = cls
    return model


def model_optimizer_extensions(cache_dir: Path | None) -> contextlib.AbstractContextManager[None]:
    """Model Optimizer builds its CUDA fake-quantization extensions on first use with torch's C++ extension builder:
    57 s, 62 s and over 80 s for the three of them on an H100 machine
    (docs/measurements/2026-11-22-h100-main-job-cold-and-warm.md). With a cache folder they are built there, and
    kept with the other compiled artifacts, instead of under the home directory."""
    from pytest_vitperf.measure.env import environ

    return environ("TORCH_EXTENSIONS_DIR", str(cache_dir / "torch_extensions") if cache_dir is not None else None)


def apply(
    recipe: Recipe,
    model: torch.nn.Module,
    calibration: Iterable[torch.Tensor] | None = None,
    *,
    cache_dir: Path | None = None,
) -> torch.nn.Module:
    """The recipe applied to `model` (changed in place and returned): sparsified and/or fake-quantized.
    With `cache_dir`, a calibration is done once and restored after that (see `CalibrationCache`)."""
    import torch

    batches: list[torch.Tensor] = []
    cache = None
    if recipe.config is not None:
        batches = list(calibration) if calibration is not None else calibration_batches(model)
        if cache_dir is not None:
            cache = CalibrationCache(cache_dir / "calibration", recipe, model, batches)
            restored = cache.restore(model)
            if restored is not None:
                return restored.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()} if cache is not None else {}
    if recipe.sparse24:
        import modelopt.torch.sparsity as mts

        model = mts.sparsify(model, mode="sparse_magnitude")
    if recipe.mha_fp8:
        to_bmm_attention(model)
    if recipe.config is not None:
        import modelopt.torch.quantization as mtq

        # Always, not only for fp8-attn: the registration is process-wide, and a bmm-attention model (vit_qf_base,
        # vit_digits) quantized after it has attention quantizers (disabled unless the config enables them) that
        # one quantized before it lacks; a cached calibration would then fit or not by test order.
        register_quant_attention()

        device = next(model.parameters()).device

        def forward_loop(m: torch.nn.Module) -> None:
            with torch.no_grad():
                for b in batches:
                    m(b.to(device))

        with model_optimizer_extensions(cache_dir):
            model = mtq.quantize(model, quant_config(recipe), forward_loop)
    if cache is not None:
        cache.save(model, before)
    return model.eval()


class CalibrationCache:
    """One calibrated recipe on disk: Model Optimizer's mode state and the tensors that sparsifying and calibrating
    added or changed (amax, SmoothQuant's pre-scales and rescaled weights, 2:4 masks). Restoring it gives the same
    model, bit for bit, without the calibration passes, which cost 2-13 s of each quantized engine's preparation on
    an H100. The key covers the weights, the recipe, the calibration data, the device kind and Model Optimizer's
    version; an entry that cannot be read (weights-only: tensors and plain containers) is calibrated again."""

    def __init__(self, root: Path, recipe: Recipe, model: torch.nn.Module, batches: list[torch.Tensor]) -> None:
        device = next(model.parameters()).device.type
        self.path = root / f"{calibration_key(recipe, model, batches, device)}.pt"
        self.recipe = recipe

    def restore(self, model: torch.nn.Module) -> torch.nn.Module | None:
        import modelopt.torch.opt as mto
        import torch

        if not self.path.exists():
            return None
        try:
            # A cache folder may come from a CI cache another branch wrote: every recipe's state is plain data.
            saved = torch.load(io.BytesIO(self.path.read_bytes()), weights_only=True, map_location="cpu")
            state, tensors = saved["modelopt_state"], saved["tensors"]
        except Exception:  # a truncated, foreign or hostile file: calibrate again, and overwrite it
            return None
        if self.recipe.mha_fp8:  # the structural change that Model Optimizer's state does not record
            to_bmm_attention(model)
        register_quant_attention()  # as apply() does before quantizing
        try:
            model = mto.restore_from_modelopt_state(model, state)
            model.load_state_dict(tensors, strict=False)
        except Exception as exc:  # restoring has changed the model part way: it cannot be calibrated now
            why = f"{type(exc).__name__}: {(str(exc) or '-').splitlines()[0]}"
            raise VitperfError(f"calibration cache {self.path} does not fit this model ({why}); remove it to "
                               f"calibrate again: rm {self.path}") from None
        return model

    def save(self, model: torch.nn.Module, before: dict[str, torch.Tensor]) -> None:
        import modelopt.torch.opt as mto
        import torch

        from pytest_vitperf.core.files import write_atomic

        changed = {
            k: v.detach().cpu()
            for k, v in model.state_dict().items()
            if k not in before or v.shape != before[k].shape or not torch.equal(v, before[k])
        }
        buf = io.BytesIO()
        torch.save({"modelopt_state": mto.modelopt_state(model), "tensors": changed}, buf)
        write_atomic(self.path, buf.getvalue())


def export(p: Precision, model: torch.nn.Module, example: torch.Tensor) -> onnx.ModelProto:
    """ONNX of a model the precision's recipe was applied to, at the precision's opset (models.retry_unfused)."""
    from pytest_vitperf.engines.models.zoo import retry_unfused

    return retry_unfused(lambda: _export(p, model, example), model)


def _export(p: Precision, model: torch.nn.Module, example: torch.Tensor) -> onnx.ModelProto:
    import onnx

    recipe = p.recipe
    if recipe.config is not None:
        from modelopt.torch._deploy.utils import get_onnx_bytes_and_metadata

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raw, _ = get_onnx_bytes_and_metadata(model, example, weights_dtype="fp16", onnx_opset=opset(p))
        files = json.loads(raw)["onnx_model"]
        if len(files) != 1:
            raise VitperfError(f"expected one ONNX file from Model Optimizer's export, got {sorted(files)}")
        return onnx.load_from_string(base64.b64decode(next(iter(files.values()))))
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch

        torch.onnx.export(model, (example,), f, dynamo=False, opset_version=17)  # type: ignore[arg-type]
    proto = onnx.load_from_string(f.getvalue())
    if recipe.cast is not None:
        from modelopt.onnx.autocast.convert import convert_to_f16

        proto = convert_to_f16(proto, low_precision_type=recipe.cast, keep_io_types=True)
    return proto


def content_hash(p: Precision, model: torch.nn.Module, example_shape: tuple[int, ...]) -> str:
    """Hash of what determines an export: weights, precision (its registry entry), input shape, opset."""
    h = hashlib.sha256(json.dumps([p.name, opset(p), list(example_shape)]).encode())
    hash_weights(h, model)
    return h.hexdigest()[:24]


def export_onnx(
    precision: str,
    model: torch.nn.Module,
    batch: int,
    *,
    cache_dir: Path | None = None,
    calibration: Iterable[torch.Tensor] | None = None,
    progress: Callable[[str], None] | None = None,
) -> bytes:
    """Apply the recipe and export, or return the cached export of the same weights, recipe and shape."""
    import torch

    from pytest_vitperf.engines.models.zoo import input_size

    p = get_precision(precision)
    shape = (batch, *input_size(model))
    path = _export_path(precision, model, batch, cache_dir) if cache_dir is not None else None
    if path is not None and path.exists():
        data = path.read_bytes()
        try:
            import onnx

            onnx.load_from_string(data)
            return data
        except Exception:  # a truncated file from an interrupted run: export again
            pass
    from pytest_vitperf.engines.quant.cpu import cpu_block_quant

    example = torch.randn(*shape, generator=torch.Generator().manual_seed(1)).to(next(model.parameters()).device)
    with cpu_block_quant(), model_optimizer_extensions(cache_dir):
        applied = apply(p.recipe, copy.deepcopy(model), calibration, cache_dir=cache_dir)
        data = export(p, applied, example).SerializeToString()
    if path is not None:
        from pytest_vitperf.core.files import write_atomic

        write_atomic(path, data)
    if progress is not None:
        progress(f"exported {p.name} ONNX ({len(data) / 1e6:.1f} MB)")
    return data


def _export_path(precision: str, model: torch.nn.Module, batch: int, cache_dir: Path) -> Path:
    from pytest_vitperf.engines.models.zoo import input_size

    p = get_precision(precision)
    return cache_dir / "onnx" / f"{p.name}-{content_hash(p, model, (batch, *input_size(model)))}.onnx"


def export_ahead(precisions: Iterable[str], model: torch.nn.Module, batch: int, *, cache_dir: Path) -> None:
    """Export `model` for each precision not yet in `cache_dir`, each in its own process, so that `export_onnx` finds
    them there. An export keeps about two cores busy (Model Optimizer's graph passes, ONNX shape inference,
    protobuf): vit_base's six coverage exports took 133-181 s one after another on an H100 machine's 16 cores, and
    the same 25 s each on 2. Below 4 threads in this process's budget this does nothing. A failed export is left to
    `export_onnx`, which does it again in the caller and reports what went wrong."""
    import multiprocessing

    import torch

    from pytest_vitperf.core.processes import die_with_parent

    missing = [p for p in dict.fromkeys(precisions) if not _export_path(p, model, batch, cache_dir).exists()]
    cores = torch.get_num_threads()  # this process's share of the host (workers.share_host), not all of its cores
    workers = min(len(missing), cores // 2)
    if workers < 2:
        return
    threads = cores // workers
    # spawn, not fork (a child would inherit torch's thread pools and CUDA state); leaving the pool terminates it
    with multiprocessing.get_context("spawn").Pool(workers, initializer=die_with_parent) as pool:
        jobs = [pool.apply_async(_export_in_child, (p, model, batch, cache_dir, threads)) for p in missing]
        for job in jobs:
            with contextlib.suppress(Exception):
                job.get()


def _export_in_child(precision: str, model: torch.nn.Module, batch: int, cache_dir: Path, threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    export_onnx(precision, model, batch, cache_dir=cache_dir)
