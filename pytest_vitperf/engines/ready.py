"""Ready-to-load compiled engines: a compiled engine is saved once in the cache folder, and a later process loads it
without Dynamo tracing the model again or Inductor looking up its kernels (the 2-5 s a warm engine took to prepare).

The artifact is torch.compile's own serialised precompile (`_aot_compile`, then `_save_aot_compiled_module`):
Dynamo's graph and guards and Inductor's compiled code, the weights staying in the module that loads it. It is
experimental and private in torch 2.11. AOTInductor packages, the public way, were tried first: on the GPU image's
torch 2.11 every package, even a two-layer one, ends in a segmentation fault when a fresh process loads it
(docs/measurements/2026-11-28-h100-h200-ab-explain.md). Anything that fails here falls back to compiling the
usual way, said once in a warning: a missing speed-up, never a wrong engine.

The key is what the compiled code depends on: the model's structure (module types, tensor names, shapes and dtypes,
not their values), the precision, batch, dtype, device, compile mode, and the versions of torch and timm and of
this project's real-quant Linears. An artifact is one compile's kernels, as Inductor's cache is: `vitperf ab`'s
rounds borrow it only where compiles make no timed choice (engines.REPRODUCIBLE_PARTS).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def key(model: torch.nn.Module, *facts: object) -> str:
    """The artifact's name for `model` compiled under `facts` (mode, precision, batch, dtype, device)."""
    import torch

    from pytest_vitperf.engines.quant.realquant import code_hash
    from pytest_vitperf.measure.env import version_of

    structure = [[name, f"{type(m).__module__}.{type(m).__qualname__}"] for name, m in model.named_modules()]
    tensors = [[name, list(t.shape), str(t.dtype)] for name, t in model.state_dict().items()]
    versions = [torch.__version__, version_of("timm"), code_hash()]
    text = json.dumps([structure, tensors, versions, [str(f) for f in facts]])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def compiled(
    model: torch.nn.Module, x: torch.Tensor, how: dict[str, Any], cache_dir: Path | None, facts: tuple[object, ...],
    compiling: Callable[[], contextlib.AbstractContextManager[object]], label: str = "",
) -> tuple[Any, dict[str, Any]]:  # fmt: skip
    """`model` compiled with torch.compile's arguments `how` (mode, options) for input `x` (static shapes, inference
    mode): loaded from the cache folder where an earlier process saved it, else compiled now and saved there, each
    inside a fresh `compiling()` (the cache folder's Inductor part). Also what happened, for the engine's facts: the
    artifact's hash (the same in every process that loads it) and the seconds it took. `label` names the engine in
    what is said (its model, precision and batch)."""
    import torch

    from pytest_vitperf.engines import READY_PART

    start = time.perf_counter()
    what = label or type(model).__name__
    name = f"{key(model, json.dumps(how, sort_keys=True), *facts)}.bin"
    path = None if cache_dir is None else cache_dir / READY_PART / name
    if path is not None and path.exists():
        data = path.read_bytes()
        try:
            # Loading writes the compiled code out and loads its kernels through Inductor's cache: the folder's, where
            # the compile left them. Elsewhere (Inductor's default folder) a fresh machine compiled them again: 8.4 s
            # an engine instead of 1.4 s, in a CPU process.
            with compiling():
                engine = _fresh(model, how)
                engine._load_aot_compiled_module(data)
            return _unchecked(engine, model), _facts("loaded", data, start)
        except torch.cuda.OutOfMemoryError:
            raise  # the backend says it in one line; compiling instead would only run out again
        except Exception as exc:  # an artifact of another torch, or truncated: compiled again and written over
            _say(f"the ready engine {path.name} of {what} did not load ({_reason(exc)}); compiling it again")
    try:
        from torch._dynamo.aot_compile import ModelInput

        # Static sizes, whatever other sizes this code was compiled for before (torch.compile's dynamic=False does
        # not reach the precompile). Inductor's settings go through `how`: the precompile does not see a patch of
        # them made around it.
        with compiling(), torch._dynamo.config.patch(automatic_dynamic_shapes=False):
            engine = _fresh(model, how)
            engine._aot_compile([ModelInput((x,), {}, [torch.inference_mode()])])
            data = engine._save_aot_compiled_module()
    except torch.cuda.OutOfMemoryError:
        raise
    except Exception as exc:  # a model with a graph break, or a torch without the precompile: the usual compile
        _say(f"no ready engine for {what} ({_reason(exc)}); compiled the usual way")
        return torch.compile(model, dynamic=False, **how), {"ready": {"how": "not made", "why": _reason(exc)}}
    if path is not None:
        from pytest_vitperf.core.files import write_atomic

        write_atomic(path, data)  # a failed write fails the run
    return _unchecked(engine, model), _facts("compiled and saved" if path is not None else "compiled", data, start)


def hash_ahead() -> None:
    """Compute now, once a process, the hashes a first load computes: of Triton's compiler and library, and of
    Inductor's own code. In an H200 round process they were 0.44 s and 0.22 s of its first load's 0.6-0.8 s, where
    the others took about 0.1 s (profiled). Only the CPU works, so a process waiting for its turn does it."""
    with contextlib.suppress(Exception):  # no Triton, or a torch without these private functions: the load does it
        from torch._inductor.runtime.triton_compat import triton_key  # Triton's own, through torch

        triton_key()
    with contextlib.suppress(Exception):
        from torch._inductor.codecache import torch_key

        torch_key()


def compiled_hash(options: Mapping[str, Any]) -> str | None:
    """The hash of the compiled engine that a measurement ran (its options' `ready`), or None where it ran none."""
    ready = options.get("ready")
    return str(ready["sha256"]) if isinstance(ready, dict) and ready.get("sha256") else None


def _fresh(model: torch.nn.Module, how: dict[str, Any]) -> Any:
    """torch.compile's precompiling wrapper of `model`, saving no guard: the loaded graph is called unchecked
    (`_unchecked`), and loading vit_base's guards, one per tensor, took 0.33 s an engine (H100, profiled)."""
    import torch

    torch._dynamo.config.enable_aot_compile = True
    options = {**how.get("options", {}), "guard_filter_fn": _no_guards}  # torch.compile takes it out of options
    return torch.compile(model, dynamic=False, fullgraph=True, **{**how, "options": options})


def _no_guards(entries: Sequence[Any]) -> list[bool]:
    return [False] * len(entries)


def _unchecked(engine: Any, model: torch.nn.Module) -> Any:
    """The engine's one compiled graph, called with no guard check: its input has one shape and dtype, fixed when it
    is prepared, and a check per call is host time that a batch-1 engine outside a CUDA graph would be timed with."""
    (result,) = engine.forward.compiled_results  # one input, one graph
    result.disable_guard_check()
    return functools.partial(result, model)


def _facts(how: str, data: bytes, start: float) -> dict[str, Any]:
    seconds = round(time.perf_counter() - start, 3)
    return {"ready": {"how": how, "sha256": hashlib.sha256(data).hexdigest()[:16], "seconds": seconds}}


def _reason(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _say(text: str) -> None:
    warnings.warn(text, stacklevel=3)
