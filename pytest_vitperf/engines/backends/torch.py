"""The torch backend: eager or CUDA-graph replay on a GPU, eager on a CPU, optional torch.compile.

FP8 and INT8 run what a TensorRT deployment runs: the precision's recipe (the same Model Optimizer config and
calibration data as the ONNX export) calibrates static scales, and `realquant` swaps each quantized Linear for a
real FP8 (`torch._scaled_mm`) or INT8 (`torch._int_mm`) one, the rest of the model in FP16. Without
--vitperf-compile the activation quantization runs as its own small kernels before each GEMM; compiled, it fuses
into the kernel that produces the activation, as TensorRT fuses it
(docs/measurements/2026-11-22-h100-static-scale-fp8-int8.md has both).

torchao's dynamic quantization (activation scales computed on every call), which this backend ran before, is not
what a deployment runs: on an H100 it measured 0.41x (FP8) and 0.05x (INT8) against FP16, eager.
"""

from __future__ import annotations

import contextlib
import copy
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_vitperf.core.errors import NotBuilt, OutOfMemory, VitperfError
from pytest_vitperf.core.precision import builtin_backend_reason, get_precision
from pytest_vitperf.engines import INDUCTOR_PART
from pytest_vitperf.engines.models.zoo import fixed_input, input_size
from pytest_vitperf.measure.env import environ, version_of
from pytest_vitperf.measure.timing import Clock, Laps, PerfCounterClock, TorchCudaEventClock

if TYPE_CHECKING:
    import torch

    from pytest_vitperf.core.precision import Precision
    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.measure.env import Device
    from pytest_vitperf.measure.kernels import Breakdown

# The dtype of a precision's GEMMs, and for FP8/INT8 (realquant) of everything that is not a quantized GEMM:
# FP16, as in the FP16 reference and the TensorRT export.
_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float16", "int8": "float16"}
_REAL_QUANT = ("fp8", "int8")
# torch.compile's arguments per --vitperf-compile mode. Inductor's own CUDA graphs would hide inside our replay; we
# capture the graph ourselves. `deterministic` turns off every choice Inductor makes by timing candidates as it
# compiles: cold compiles of one FP16 or BF16 engine at batch 1 came out up to 7.5% apart in the default mode (H200).
# Inductor's own deterministic flag still times the configs of pointwise kernels (a 2.0% draw once, H100); without
# that, a compile times nothing and every cold compile of an engine chooses the same kernels.
_COMPILE_ARGS: dict[str, dict[str, Any]] = {
    "default": {},
    "deterministic": {"options": {"deterministic": True, "triton.autotune_pointwise": False}},
    "max-autotune": {"mode": "max-autotune-no-cudagraphs"},
}


@dataclass
class TorchEngine:
    model: Any
    model_name: str
    inputs: Any
    precision: str
    batch: int
    clock: Clock
    mode: str
    stream: Any = None
    graph: Any = None
    static_out: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    backend: str = "torch"

    def launch(self) -> None:
        import torch

        if self.graph is not None:
            self.graph.replay()
            return
        with torch.inference_mode():
            if self.stream is None:
                self.model(self.inputs)
            else:
                with torch.cuda.stream(self.stream):
                    self.static_out = self.model(self.inputs)

    def output(self) -> torch.Tensor:
        import torch

        if self.stream is None:
            with torch.inference_mode():
                return self.model(self.inputs).float()
        with torch.cuda.stream(self.stream):
            self.launch()
        self.stream.synchronize()
        return self.static_out.float().cpu()

    def run(self, x: torch.Tensor) -> torch.Tensor:
        import torch

        if tuple(x.shape) != tuple(self.inputs.shape):
            raise VitperfError(f"this {self.precision} engine takes {tuple(self.inputs.shape)}, not {tuple(x.shape)}")

        def put(t: torch.Tensor) -> None:
            with torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext():
                self.inputs.copy_(t)  # in place: a captured CUDA graph reads this very buffer

        resident = self.inputs.clone()
        put(x)
        try:
            return self.output()
        finally:
            put(resident)

    def describe(self) -> dict[str, Any]:
        return dict(self.info)

    def kernel_breakdown(self) -> Breakdown:
        from pytest_vitperf.measure.kernels import profile

        # Module times only where the model runs eagerly: Inductor's kernels are fused across modules.
        return profile(self.model, self.inputs, self.stream, modules=self.info.get("compile") == "off")


def _recompile_budget() -> contextlib.AbstractContextManager[object]:
    """Every engine of a run compiles the same timm code objects. Past dynamo's recompile limit (8) the frame is
    silently left to run eagerly: on an H100 the 9th and 10th engines of the default main job (int8 and fp8 at
    batch 64) ran eagerly while labelled compiled, FP8 at 13.9 ms instead of 5.2 ms. Raised while an engine is
    prepared, which is when it compiles."""
    import torch

    config: Any = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    return config.patch(**{name: 4096})


@contextlib.contextmanager
def _compiling(settings: Settings) -> Iterator[None]:
    """While an engine compiles: dynamo's raised recompile limit and, with --vitperf-cache-dir, Inductor's cache
    there (compiled kernels kept across runs instead of recompiled: minutes for max-autotune)."""
    inductor = str(settings.cache_dir / INDUCTOR_PART) if settings.cache_dir is not None else None
    with environ("TORCHINDUCTOR_CACHE_DIR", inductor), _recompile_budget():
        yield


def _nbytes(t: torch.Tensor) -> int:
    """Bytes a tensor occupies; a 2:4 sparse weight counts its compressed values and metadata, not its dense shape."""
    packed = getattr(t, "packed", None)  # torch.sparse.SparseSemiStructuredTensor
    if packed is not None:
        meta = getattr(t, "meta", None)
        return sum(x.numel() * x.element_size() for x in (packed, meta) if x is not None)
    return t.numel() * t.element_size()


def _copied(source: torch.nn.Module, dev: torch.device, dtype: torch.dtype | None) -> torch.nn.Module:
    """A deep copy of `source` (in eval mode) whose tensors are made on `dev`, floating ones in `dtype` (None: as
    they are). A deep copy on the host and then `.to()` copied the 344 MB of ViT-B's FP32 weights in host memory
    first: 1.4 s of four precisions' preparing, and 3.4 s beside a process that was exiting (H200). Each tensor is
    cast where it lands: `.to(dev, dtype)` casts on the host before copying, 0.45 s for ViT-B in FP16, where its FP32
    weights copied in 0.10 s (H200)."""
    import torch

    memo: dict[int, Any] = {}
    for t in (*source.parameters(), *source.buffers()):
        new = t.detach().to(dev, copy=True).to(dtype if t.is_floating_point() else None)
        memo[id(t)] = torch.nn.Parameter(new, t.requires_grad) if isinstance(t, torch.nn.Parameter) else new
    return copy.deepcopy(source, memo).eval()


def _quantized(
    source: torch.nn.Module, p: Precision, dtype: torch.dtype, dev: torch.device, settings: Settings, laps: Laps
) -> tuple[torch.nn.Module, str]:
    """`source` copied to `dev` with its precision's real quantized (or 2:4 sparse) Linears, and what was converted.
    With a cache directory a converted model is kept there and restored without Model Optimizer
    (`ConvertedCache`), onto a copy in `dtype`: the restore loads every tensor over it, and a copy in FP32, which
    calibration takes, moved twice the bytes."""
    import torch

    from pytest_vitperf.engines.models.reference import same_weights
    from pytest_vitperf.engines.quant.realquant import ConvertedCache, convert, sparse24
    from pytest_vitperf.engines.quant.recipes import apply

    cache = None
    if settings.cache_dir is not None and not p.recipe.sparse24:  # a 2:4 weight is a tensor subclass
        cache = ConvertedCache(settings.cache_dir / "converted", p.name, source, dtype, dev.type)
    if cache is not None and cache.path.exists():
        with laps("copy"):
            model = _copied(source, dev, dtype)
        with laps("convert"):
            done = cache.restore(model, dtype, dev)
        if done is not None:
            return model, done.note_others(model).summary()
    with laps("copy"):
        model = _copied(source, dev, torch.float32)  # calibration takes FP32 weights
        same_weights(source, model)
    with laps("convert"):
        model = apply(p.recipe, model, cache_dir=settings.cache_dir)  # our own copy
        # Both cast what they keep to `dtype`.
        r = p.recipe
        done = sparse24(model, dtype) if r.sparse24 else convert(model, p.weights, dtype, r.mha_fp8, r.mlp_fused)
        if cache is not None:
            cache.save(model, done)
    return model.eval(), done.note_others(model).summary()  # converted or sparse alike


def resolve_compile(mode: str, device: Device) -> str:
    """`auto`: compiled on a GPU, where eager launches of the quantize and elementwise ops around each GEMM would
    cost more than the GEMM saves (FP8 0.49x eager, 1.23x compiled on an H100); eager on a CPU, where the path
    exists to check the flow and a compile costs more than the run."""
    if mode == "auto":
        return "off" if device.sm is None else "default"
    return mode


def _refuse(p: Precision, device: Device) -> None:
    """Raise for what this backend cannot build from a registered entry on `device`: NotBuilt where a missing
    optional package is the reason (a skip), VitperfError for the rest."""
    sparse_quantized = p.recipe.sparse24 and p.recipe.config is not None
    fused = p.recipe.mha_fp8 or p.recipe.mlp_fused
    if p.weights not in _DTYPES or sparse_quantized or (fused and p.weights != "fp8"):
        raise VitperfError(  # a registered entry asking too much
            f"the torch backend builds weights in {', '.join(_DTYPES)}, 2:4 sparse in FP16 only, attention in FP8 "
            f"and fused MLPs with FP8 weights only, not {p.name}; build it with: --vitperf-backend tensorrt"
        )
    if fused and device.sm is not None:  # on a CPU the ops are plain torch
        from pytest_vitperf.engines.quant import fp8_attention, fp8_mlp

        why = (fp8_attention if p.recipe.mha_fp8 else fp8_mlp).missing()
        if why is not None:
            raise NotBuilt(why)
    if p.recipe.sparse24 and device.sm is None:
        raise VitperfError(f"{p.name} runs its GEMMs in cuSPARSELt, which needs a CUDA GPU; this is a CPU")


class TorchBackend:
    name = "torch"
    # prepare() leaves the model it is given as it was: it copies and converts each precision's weights once, and
    # the engines of every batch share them (converting is batch-free). Each was copied and converted apart, 7.3 s of
    # an H200 round's 21.7 s turn for 4 precisions at 2 batches. The builds of one batch get copies of their own.
    keeps_model = True

    def __init__(self) -> None:
        self._converted: weakref.WeakValueDictionary[tuple[object, ...], torch.nn.Module] = (
            weakref.WeakValueDictionary()
        )  # alive while an engine runs it
        self._notes: dict[tuple[object, ...], str | None] = {}
        self._batches: dict[tuple[object, ...], set[int]] = {}  # the batches whose engine shares it

    def version(self) -> str | None:
        return version_of("torch")

    def unavailable_reason(self, device: Device) -> str | None:
        return None  # torch is a core dependency and runs on CPU and CUDA

    def precision_reason(self, precision: str) -> str | None:
        return builtin_backend_reason(precision, self.name)  # Model Optimizer, which calibrates, is a core dependency

    def prepare(
        self,
        model: torch.nn.Module,
        *,
        model_name: str,
        precision: str,
        batch: int,
        device: Device,
        settings: Settings,
    ) -> TorchEngine:
        import torch

        try:
            return self._prepare(model, model_name, precision, batch, device, settings)
        except torch.cuda.OutOfMemoryError as exc:
            torch.cuda.empty_cache()  # what the failed engine held goes back before anything else is tried
            raise OutOfMemory(
                f"out of GPU memory preparing {precision} batch {batch} on {device.name}: {str(exc).splitlines()[0]} "
                "Lower the batch: --vitperf-batch-sizes 1,8"
            ) from None

    def _converted_once(
        self, source: torch.nn.Module, model_name: str, p: Precision, batch: int, dtype: torch.dtype,
        dev: torch.device, settings: Settings, laps: Laps,
    ) -> tuple[torch.nn.Module, str | None]:  # fmt: skip
        """`source` copied and converted to `p` on `dev` (its real-quant or 2:4 Linears, else cast), with what was
        converted; once per source, precision and device while an engine runs it, its batches sharing it."""
        from pytest_vitperf.engines.models.reference import weights_digest

        key = (model_name, weights_digest(source), p.name, str(dtype), str(dev))
        shared = self._converted.get(key)
        if shared is not None and batch not in self._batches[key]:
            self._batches[key].add(batch)
            return shared, self._notes[key]
        quantized = None
        if p.recipe.sparse24 or (p.weights in _REAL_QUANT and p.recipe.config is not None):
            model, quantized = _quantized(source, p, dtype, dev, settings, laps)
        else:
            with laps("copy"):
                model = _copied(source, dev, dtype)
        if shared is None:  # another build of a batch that shares it gets its own
            self._converted[key], self._notes[key], self._batches[key] = model, quantized, {batch}
        return model, quantized

    def _prepare(
        self, model: torch.nn.Module, model_name: str, precision: str, batch: int, device: Device, settings: Settings
    ) -> TorchEngine:
        import torch

        p = get_precision(precision)
        reason = self.precision_reason(precision)
        if reason is not None:
            raise VitperfError(reason)
        _refuse(p, device)
        dtype = getattr(torch, _DTYPES[p.weights])
        dev = torch.device(device.torch_device)
        compile_mode = resolve_compile(settings.compile, device)
        x = fixed_input((batch, *input_size(model))).to(dev, dtype)
        parameters = sum(p.numel() for p in model.parameters())  # before FP8/INT8 weights become buffers
        laps = Laps()
        model, quantized = self._converted_once(model, model_name, p, batch, dtype, dev, settings, laps)
        tensors = [*model.parameters(), *model.buffers()]
        info: dict[str, Any] = {
            "backend": "torch",
            "dtype": str(dtype).removeprefix("torch."),
            "device": str(dev),
            "parameters": parameters,
            "weight_bytes": sum(_nbytes(t) for t in tensors),
            "compile": compile_mode,
        }
        if quantized is not None:
            info["quantization"] = quantized
        if (p.recipe.mha_fp8 or p.recipe.mlp_fused) and device.sm is not None:
            with torch.inference_mode():
                model(x)  # cuDNN and cuBLASLt plan their ops, or say they cannot (NotBuilt), before anything compiles
        if compile_mode != "off":
            # Static shapes, as a TensorRT engine built for one batch has. By default dynamo marks a dimension dynamic
            # once a second engine of the same code (any timm ViT) arrives with another size: in the main job the
            # accuracy suite's 32x32 ViT made every latency engine compile for symbolic batch, channels and image
            # size, so an engine's kernels depended on what the process had compiled before it.
            from pytest_vitperf.engines.ready import compiled

            facts = (precision, batch, dtype, dev.type, device.name, compile_mode)
            how, label = _COMPILE_ARGS[compile_mode], f"{model_name} {precision} b{batch}"
            with laps("compile"):
                model, made = compiled(model, x, how, settings.cache_dir, facts, lambda: _compiling(settings), label)
            info.update(made)
        # What is left to compile (a model that no ready engine could be made of) happens on the first calls below.
        budget = _compiling(settings) if compile_mode != "off" else contextlib.nullcontext()
        info["prepare_steps"] = laps  # filled in as the steps below run
        if device.sm is None:
            if compile_mode != "off":
                with laps("warm-up"), budget, torch.inference_mode():
                    model(x)  # compile now, within the budget, not inside the first timed call
            info["mode"] = "eager"
            return TorchEngine(model, model_name, x, precision, batch, PerfCounterClock(), "eager", info=info)

        stream = torch.cuda.Stream(dev)
        engine = TorchEngine(
            model, model_name, x, precision, batch, TorchCudaEventClock(stream), "eager", stream=stream
        )
        with budget, torch.inference_mode(), torch.cuda.stream(stream):
            with laps("warm-up"):
                for _ in range(2):  # lazy init, cuBLAS handles and autotuning happen outside capture
                    engine.static_out = model(x)
                stream.synchronize()
                held = torch.cuda.memory_allocated(dev)
                torch.cuda.reset_peak_memory_stats(dev)
                engine.static_out = model(x)  # the third: what one call needs beyond what the process holds
                stream.synchronize()
            # What this engine needs on the GPU: its weights and input, and one call's activations, workspace and
            # output (a CUDA graph keeps them in its pool); the summary's memory table sets it beside FP16's.
            call = torch.cuda.max_memory_allocated(dev) - held
            info["peak_bytes"] = info["weight_bytes"] + _nbytes(x) + call
            if settings.cuda_graph:
                graph = torch.cuda.CUDAGraph()
                try:
                    with laps("capture"), torch.cuda.graph(graph, stream=stream):
                        engine.static_out = model(x)
                except torch.cuda.OutOfMemoryError:
                    raise
                except RuntimeError as exc:  # an op that syncs with the host, which capture refuses
                    reason = str(exc).splitlines()[0]
                    info["cuda_graph"] = f"capture refused ({reason}); timed as stream launches"
                    with torch.inference_mode():
                        engine.static_out = model(x)
                else:
                    engine.graph = graph
                    engine.mode = "cuda-graph"
        stream.synchronize()
        info["mode"] = engine.mode
        # Where the timed launches read and write: one of the facts set beside a process's state (ab/states.py).
        info["addresses"] = {"input": x.data_ptr(), "output": getattr(engine.static_out, "data_ptr", lambda: None)()}
        engine.info = info
        return engine
