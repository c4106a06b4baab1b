"""trtexec backends: `trtexec` (TensorRT's own command-line tool, as NGC containers ship it) and `trtexec-rtx`
(TensorRT-RTX's equivalent, `tensorrt_rtx`).

They are a second, independent path to the number the `tensorrt` backend gives: the same recipe, export and plan
cache, but the engine is built, timed, profiled and run by NVIDIA's tool, in its own process, the way the seed reports
measured by hand. The samples are trtexec's per-inference GPU compute times (`--exportTimes`); the plugin's timer
never touches these engines (`bench` asks them for samples: base.SelfTimed). suites/test_backend_agreement.py holds
the two paths against each other where both run.

Never run: no machine of this project has TensorRT or an RTX GPU. The command lines and the reading of trtexec's files
are tested (tests/test_trtexec.py), the rest follows trtexec's documented flags.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.core.files import FileError
from pytest_vitperf.engines.backends.tensorrt import TensorRTRTXBackend, _TensorRTFamily
from pytest_vitperf.engines.tensorrt.trtexec import (
    LAYERS,
    OUTPUT,
    PROFILE,
    TENSORRT_RTX,
    TIMES,
    TRTEXEC,
    build_command,
    find,
    missing_reason,
    output_command,
    parse_version,
    profile_command,
    read_output,
    time_command,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import torch

    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.engines.tensorrt.plan import BuildOptions
    from pytest_vitperf.measure.env import Device
    from pytest_vitperf.measure.kernels import Breakdown
    from pytest_vitperf.measure.layers import Layer
    from pytest_vitperf.measure.timing import Clock, Launch

SELF_TIMED = "trtexec times its own inferences"
TOOL_TIMEOUT_S = 1800  # a build of a large model with a cold timing cache takes minutes, not hours
ONNX_TORCH_DTYPES = {1: "float32", 10: "float16", 16: "bfloat16"}  # onnx.TensorProto elem_type -> torch dtype


class SelfTimedClock:
    """The timer of a trtexec engine is trtexec: GPU compute time per inference, from its `--exportTimes`."""

    name = "trtexec"

    def time(self, launch: Launch, n: int, before: Launch | None = None) -> list[float]:
        raise VitperfError(f"{SELF_TIMED}: measure it with bench(engine), not with a Clock")

    def cache_flush(self) -> Launch:
        raise VitperfError(f"{SELF_TIMED}: it cannot flush the L2 before each one")


@contextlib.contextmanager
def files_of(cmd: list[str]) -> Iterator[None]:
    """Reading what `cmd` wrote: a missing or malformed file is one line, with the command that wrote it."""
    try:
        yield
    except FileError as exc:
        raise VitperfError(f"{exc}; written by: {shlex.join(cmd)}") from None


def run_tool(cmd: list[str], what: str) -> None:
    """Run one trtexec command; a failure is one line with its last words and the command to run by hand."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise VitperfError(f"{what} took over {TOOL_TIMEOUT_S} s; run it by hand: {shlex.join(cmd)}") from None
    if done.returncode != 0:
        # trtexec logs errors as `[E]` lines on stderr; on a bad option it also prints its help on stdout, whose
        # lines speak of errors too. The first `[E]` line is the cause (later ones follow from it).
        err = [x.strip() for x in done.stderr.splitlines() if x.strip()]
        out = [x.strip() for x in done.stdout.splitlines() if x.strip()]
        errors = [x for x in err + out if "[E]" in x]
        last = (errors[:1] or err[-1:] or [x for x in out if x.startswith("&&&& FAILED")] or ["no output"])[0]
        raise VitperfError(f"{what} failed (exit {done.returncode}): {last}; run it by hand: {shlex.join(cmd)}")


@functools.cache
def tool_version(path: str) -> str | None:
    """The version trtexec prints on its first line; None when it prints none."""
    try:
        done = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(done.stdout + done.stderr)


@dataclass
class TrtexecEngine:
    """A plan on disk, run by trtexec. Every run loads `input_shape` of the fixed input (models.fixed_input) unless
    told otherwise, so the times, the profile and the output check see the data the other backends see."""

    backend: str
    model_name: str
    precision: str
    batch: int
    tool: str
    plan: Path
    input_name: str
    input_shape: tuple[int, ...]
    input_dtype: str  # a torch dtype's name
    cuda_graph: bool
    info: dict[str, Any] = field(default_factory=dict)
    version: str | None = None  # the tool's (tool_version): trtexec 11 takes other graph and transfer flags
    clock: Clock = field(default_factory=SelfTimedClock)
    _layers: tuple[list[Layer], str | None] | None = field(default=None, repr=False)

    def _write_input(self, folder: Path, x: torch.Tensor | None = None) -> dict[str, Path]:
        import torch

        from pytest_vitperf.engines.models.zoo import fixed_input

        x = fixed_input(self.input_shape) if x is None else x
        path = folder / "input.bin"  # raw, row-major, in the engine's input type: what --loadInputs reads
        x.to(getattr(torch, self.input_dtype)).contiguous().view(torch.uint8).numpy().tofile(path)
        return {self.input_name: path}

    def launch(self) -> None:
        raise VitperfError(f"{SELF_TIMED}: measure it with bench(engine)")

    def time_itself(
        self, *, warmup_ms: float, duration_ms: float, min_iterations: int, **other: Any
    ) -> list[float]:
        from pytest_vitperf.engines.tensorrt.trtexec import read_compute_ms

        if other.get("cold"):
            raise VitperfError(f"{SELF_TIMED} and cannot flush the L2 before each one; drop --vitperf-cold, or "
                               "measure cold with: --vitperf-backend tensorrt --vitperf-cold")  # fmt: skip
        if other.get("max_noise") is not None:
            raise VitperfError(f"{SELF_TIMED} for a fixed duration and has no noise target; drop --vitperf-max-noise "
                               "and set --vitperf-duration-ms instead")  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="vitperf-trtexec-") as d:
            out = Path(d)
            cmd = time_command(self.tool, self.plan, out, warmup_ms=warmup_ms, duration_ms=duration_ms,
                               min_iterations=min_iterations, cuda_graph=self.cuda_graph,
                               inputs=self._write_input(out), version=self.version)  # fmt: skip
            run_tool(cmd, f"{self.tool}, timing {self.model_name} {self.precision} b{self.batch}")
            with files_of(cmd):
                return read_compute_ms(out / TIMES)

    def output(self) -> torch.Tensor:
        return self.run(None)

    def run(self, x: torch.Tensor | None) -> torch.Tensor:
        import torch

        from pytest_vitperf.measure.layers import read_layer_info

        if x is not None and tuple(x.shape) != self.input_shape:
            raise VitperfError(f"this {self.precision} engine takes {self.input_shape}, not {tuple(x.shape)}")
        with tempfile.TemporaryDirectory(prefix="vitperf-trtexec-") as d:
            out = Path(d)
            cmd = output_command(self.tool, self.plan, out, self._write_input(out, x), self.version)
            run_tool(cmd, f"{self.tool}, running {self.model_name} {self.precision} b{self.batch}")
            with files_of(cmd):
                outputs = read_output(out / OUTPUT)
                if self._layers is None:
                    self._layers = read_layer_info(out / LAYERS)
        shape, values = next(iter(outputs.values()))  # a ViT has one output, its logits
        return torch.tensor(values, dtype=torch.float32).reshape(shape)

    def describe(self) -> dict[str, Any]:
        from pytest_vitperf.measure.layers import precision_counts

        info = {**self.info, "mode": "trtexec, cuda-graph" if self.cuda_graph else "trtexec, enqueue"}
        if self._layers is None or not self._layers[0]:
            return info
        layers, schema = self._layers
        return {**info, "layers": len(layers), "layer_precisions": precision_counts(layers), "inspector_schema": schema}

    def kernel_breakdown(self) -> Breakdown:
        """trtexec's per-layer profile, grouped like kernels (a separate run: profiling serialises the layers)."""
        from pytest_vitperf.measure.kernels import breakdown
        from pytest_vitperf.measure.layers import read_profile

        with tempfile.TemporaryDirectory(prefix="vitperf-trtexec-") as d:
            out = Path(d)
            cmd = profile_command(self.tool, self.plan, out, inputs=self._write_input(out), version=self.version)
            run_tool(cmd, f"{self.tool}, profiling {self.model_name} {self.precision} b{self.batch}")
            with files_of(cmd):
                times = read_profile(out / PROFILE)
        return breakdown({t.name: t.ms for t in times}, runs=1)  # the profile's times are already per inference


class TrtexecBackend(_TensorRTFamily):
    name = "trtexec"
    tool = TRTEXEC
    strongly_typed = True  # TensorRT 10 needs the flag for Q/DQ graphs to keep their types; 11 accepts it
    floors_as = "tensorrt"  # it times TensorRT engines: TensorRT's floors apply

    def version(self) -> str | None:
        path = find(self.tool)
        return tool_version(path) if path is not None else None

    def missing(self) -> str | None:
        return missing_reason(self.tool)

    def builder(self, cache: Path | None) -> Callable[[bytes, BuildOptions], bytes]:
        tool = find(self.tool)
        if tool is None:
            raise VitperfError(missing_reason(self.tool) or self.tool)
        # One timing cache per process: trtexec rewrites it in place after each build, and xdist workers build at once.
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        timing_cache = cache / "trtexec" / f"{self.tool}-{worker}.timing-cache" if cache is not None else None
        if timing_cache is not None:
            timing_cache.parent.mkdir(parents=True, exist_ok=True)

        def build(onnx: bytes, options: BuildOptions) -> bytes:
            with tempfile.TemporaryDirectory(prefix="vitperf-trtexec-") as d:
                model, engine = Path(d) / "model.onnx", Path(d) / "model.engine"
                model.write_bytes(onnx)
                cmd = build_command(tool, model, engine, timing_cache, strongly_typed=self.strongly_typed)
                if options.sparse_weights:
                    cmd.append("--sparsity=enable")
                run_tool(cmd, f"{self.tool}, building an engine")
                return engine.read_bytes()

        return build

    def prepare(
        self,
        model: torch.nn.Module,
        *,
        model_name: str,
        precision: str,
        batch: int,
        device: Device,
        settings: Settings,
    ) -> TrtexecEngine:
        import onnx as onnx_lib

        result, info, onnx = self.build(model.to(device.torch_device), model_name=model_name, precision=precision,
                                        batch=batch, target=self.target(device), cache=settings.cache_dir)  # fmt: skip
        plan = result.path
        if plan is None:  # no cache folder: the plan goes to a file of its own for trtexec to load
            plan = Path(tempfile.mkdtemp(prefix="vitperf-trtexec-")) / "model.engine"
            plan.write_bytes(result.plan)
        graph_input = onnx_lib.load_from_string(onnx).graph.input[0]
        tensor = graph_input.type.tensor_type
        dtype = ONNX_TORCH_DTYPES.get(tensor.elem_type)
        if dtype is None:
            raise VitperfError(f"{precision} export takes ONNX element type {tensor.elem_type} as input; trtexec's "
                               f"raw input files are written for {', '.join(ONNX_TORCH_DTYPES.values())}")  # fmt: skip
        shape = tuple(d.dim_value for d in tensor.shape.dim)
        return TrtexecEngine(self.name, model_name, precision, batch, find(self.tool) or self.tool, plan,
                             graph_input.name, shape, dtype, settings.cuda_graph, info, self.version())  # fmt: skip


class TrtexecRTXBackend(TrtexecBackend):
    name = "trtexec-rtx"
    tool = TENSORRT_RTX
    strongly_typed = False  # TensorRT-RTX networks are always strongly typed; the tool has no such flag to pass
    floors_as = "tensorrt-rtx"
    runs_on = TensorRTRTXBackend.runs_on
