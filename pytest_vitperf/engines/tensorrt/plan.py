"""TensorRT-family plans (serialized engines) built from ONNX, and an on-disk plan cache that never trusts a bad
entry. The backend deserializes a plan into the engine it times (backends/tensorrt.py).

One strongly typed build path serves TensorRT 10 (STRONGLY_TYPED network flag), TensorRT 11 (the only mode)
and TensorRT-RTX (which targets compute capabilities explicitly and builds ahead of time without a GPU):
precision lives in the ONNX graph (casts, Q/DQ from Model Optimizer), not in builder flags.

Cache entries are `<key>.engine` plus `<key>.json`, the key a hash of the ONNX bytes, backend, its version,
the target SM and the build flags. An entry is used only when its metadata parses, names the same ONNX hash,
backend, version, target and flags, and the plan's size and SHA-256 match what was recorded: a truncated,
corrupt or foreign entry is rebuilt and replaced, never deserialized blindly. A plan TensorRT still refuses (built
by another build of the same version) is discarded and rebuilt by the backend, which says so in one line.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_vitperf.core.files import write_atomic

CACHE_SCHEMA = 1


class EngineBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class BuildOptions:
    # "sm_90": TensorRT (or trtexec) builds for the GPU at hand, and its plan runs on that SM only; "SM120" etc.:
    # TensorRT-RTX's ahead-of-time builds; "native": the GPU at hand, unnamed
    target: str = "native"
    optimization_level: int | None = None  # builder optimization level 0-5; None: the builder's default
    sparse_weights: bool = False  # SPARSE_WEIGHTS, for 2:4 sparse engines
    timing_cache: str | None = None  # path of a timing cache file, kept between builds (TensorRT)
    detailed_profiling: bool = True  # ProfilingVerbosity.DETAILED, for the engine inspector

    def flags(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("timing_cache")  # where the cache lives does not change the engine
        return d


@dataclass(frozen=True)
class PlanRecord:
    """A plan built ahead of time by the `vitperf_plan` fixture, for the summary (plain data: xdist hands it over)."""

    model: str
    precision: str
    batch: int
    backend: str
    version: str
    info: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BuildResult:
    plan: bytes
    cache: str  # "hit", "miss", "rebuilt: <why>", or "off"
    seconds: float
    path: Path | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def size_bytes(self) -> int:
        return len(self.plan)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.cache
def logger(trt: ModuleType) -> Any:
    """The one logger of a TensorRT module: TensorRT keeps one per process and warns when given another."""
    return trt.Logger(trt.Logger.WARNING)


def build_plan(trt: ModuleType, onnx_bytes: bytes, options: BuildOptions, *, rtx: bool) -> bytes:
    """Parse `onnx_bytes` into a strongly typed network and build a serialized engine with `trt` (the
    `tensorrt` or `tensorrt_rtx` module)."""
    builder = trt.Builder(logger(trt))
    flags = 0
    strongly = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    if strongly is not None and not rtx:  # TensorRT 10; TensorRT 11 and RTX are always strongly typed
        flags |= 1 << int(strongly)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger(trt))
    if not parser.parse(onnx_bytes):
        errors = "; ".join(str(parser.get_error(i).desc()) for i in range(parser.num_errors))
        raise EngineBuildError(f"the ONNX parser refused the graph: {errors}")
    config = builder.create_builder_config()
    # TensorRT lets FP32 layers run as TF32 unless told not to; the FP32 reference and the export's FP32 ops are FP32.
    config.clear_flag(trt.BuilderFlag.TF32)
    if rtx:  # TensorRT-RTX captures a context in a CUDA graph only when it allocates nothing at run time
        config.set_flag(trt.BuilderFlag.REQUIRE_USER_ALLOCATION)
    if rtx and options.target != "native":
        config.num_compute_capabilities = 1
        config.set_compute_capability(getattr(trt.ComputeCapability, options.target), 0)
    if options.optimization_level is not None:
        config.builder_optimization_level = options.optimization_level
    if options.sparse_weights:
        config.set_flag(trt.BuilderFlag.SPARSE_WEIGHTS)
    if options.detailed_profiling:
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    cache = None
    if options.timing_cache and hasattr(config, "create_timing_cache"):
        path = Path(options.timing_cache)
        cache = config.create_timing_cache(path.read_bytes() if path.exists() else b"")
        config.set_timing_cache(cache, ignore_mismatch=False)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise EngineBuildError("the builder returned no engine; its log above says why")
    if cache is not None:
        write_atomic(Path(options.timing_cache or ""), bytes(cache.serialize()))
    return bytes(plan)


class PlanCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @staticmethod
    def key_fields(onnx_hash: str, backend: str, version: str, options: BuildOptions) -> dict[str, Any]:
        return {"onnx_sha256": onnx_hash, "backend": backend, "version": version, **options.flags()}

    def discard(self, fields: dict[str, Any]) -> None:
        """Drop an entry that TensorRT refused, so that the next lookup misses and the plan is built again."""
        k = self.key(fields)
        for path in (self.root / f"{k}.json", self.root / f"{k}.engine"):  # the metadata first: no half-valid entry
            path.unlink(missing_ok=True)

    def key(self, fields: dict[str, Any]) -> str:
        return sha256(json.dumps(fields, sort_keys=True).encode())[:24]

    def lookup(self, fields: dict[str, Any]) -> tuple[bytes | None, str]:
        """The cached plan, or None and why it cannot be used."""
        k = self.key(fields)
        plan_path, meta_path = self.root / f"{k}.engine", self.root / f"{k}.json"
        if not plan_path.exists() and not meta_path.exists():
            return None, "miss"
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None, "rebuilt: metadata missing or unreadable"
        if not isinstance(meta, dict) or meta.get("schema") != CACHE_SCHEMA or meta.get("key") != fields:
            return None, "rebuilt: entry belongs to another build (foreign key)"
        try:
            plan = plan_path.read_bytes()
        except OSError:
            return None, "rebuilt: engine file missing"
        if len(plan) != meta.get("size") or sha256(plan) != meta.get("sha256"):
            return None, f"rebuilt: engine file corrupt or truncated ({len(plan)} of {meta.get('size')} bytes)"
        return plan, "hit"

    def store(self, fields: dict[str, Any], plan: bytes, seconds: float) -> Path:
        k = self.key(fields)
        self.root.mkdir(parents=True, exist_ok=True)
        plan_path = self.root / f"{k}.engine"
        write_atomic(plan_path, plan)  # the metadata, written last, is what makes the entry valid
        meta = {"schema": CACHE_SCHEMA, "key": fields, "size": len(plan), "sha256": sha256(plan), "build_s": seconds}
        write_atomic(self.root / f"{k}.json", json.dumps(meta, indent=1, sort_keys=True))
        return plan_path


def build_cached(
    trt: ModuleType | None,
    backend: str,
    version: str,
    onnx_bytes: bytes,
    options: BuildOptions,
    *,
    cache: PlanCache | None = None,
    progress: Callable[[str], None] | None = None,
    builder: Callable[[bytes, BuildOptions], bytes] | None = None,
) -> BuildResult:
    """Build (or fetch from `cache`) the plan of `onnx_bytes`; `progress` gets one line per build. The build is
    `builder(onnx_bytes, options)` where given (trtexec), else `build_plan` with the Python module `trt`."""
    fields = PlanCache.key_fields(sha256(onnx_bytes), backend, version, options)
    status = "off"
    if cache is not None:
        plan, status = cache.lookup(fields)
        if plan is not None:
            return BuildResult(plan, "hit", 0.0, cache.root / f"{cache.key(fields)}.engine", fields)
    t0 = time.perf_counter()
    if builder is not None:
        plan = builder(onnx_bytes, options)
    elif trt is not None:
        plan = build_plan(trt, onnx_bytes, options, rtx=backend == "tensorrt-rtx")
    else:
        raise ValueError("build_cached needs the TensorRT module or a builder")
    seconds = time.perf_counter() - t0
    path = cache.store(fields, plan, seconds) if cache is not None else None
    if progress is not None:
        progress(
            f"built {backend} {version} engine for {options.target} in {seconds:.1f} s, "
            f"{len(plan) / 1e6:.1f} MB (cache: {status})"
        )
    return BuildResult(plan, status, seconds, path, fields)
