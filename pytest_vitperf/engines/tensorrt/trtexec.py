"""trtexec as a second, independent path to a TensorRT number: the command lines that build, time, profile and run an
engine, and the reading of what trtexec writes.

The seed reports timed their engines with trtexec by hand; these are those commands, written once:
- build: `--onnx --stronglyTyped --noTF32 --saveEngine --timingCacheFile --profilingVerbosity=detailed`.
  `--stronglyTyped` is what TensorRT 10 needs for the exported Q/DQ graphs to keep their types; TensorRT 11 always
  types strongly, and its trtexec migration guide calls the flag no longer needed. `--noTF32`: trtexec lets FP32
  layers run as TF32 unless told not to, and the FP32 reference is FP32.
- time: `--loadEngine --warmUp --duration --iterations --exportTimes`, on the plugin's fixed input (`--loadInputs`),
  with the CUDA graph and transfer flags of the tool's version: trtexec 10.x captures a graph only with
  `--useCudaGraph` and skips transfers only with `--noDataTransfers`; trtexec 11 does both by default, takes
  `--noCudaGraph` to enqueue, and calls the two 10.x flags deprecated.
- profile, a separate run (per-layer profiling serialises layers, so it never shares a run with the timing):
  `--exportProfile --exportLayerInfo --profilingVerbosity=detailed`.
- output: one inference of a given input, `--exportOutput`, for the accuracy check and the accuracy suite.

TensorRT-RTX ships the same tool as `tensorrt_rtx` (with its manual installation, not its pip wheels). Its networks
are always strongly typed, so its build command has no `--stronglyTyped`.

What trtexec writes is read by the parsers the rest of the project already has: the times by
`read_compute_ms` below (GPU compute time per inference), the layer information and the profile by
`layers.py`. None of this has run against a real trtexec: none of this project's machines has TensorRT. The tests
hold the command lines and feed the readers documents in trtexec's formats.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

from pytest_vitperf.core.files import FileError, read_json

TIMES, PROFILE, LAYERS, OUTPUT = "times.json", "profile.json", "layers.json", "output.json"  # the files it writes
TRTEXEC, TENSORRT_RTX = "trtexec", "tensorrt_rtx"
WHERE = {
    TRTEXEC: "run in an NGC TensorRT container, or add TensorRT's bin folder to PATH",
    TENSORRT_RTX: "install TensorRT-RTX from NVIDIA's archive (its pip wheels do not ship the tool) and add its bin "
    "folder to PATH",
}


class OutputFileError(FileError):
    kind = "trtexec output file"


def find(tool: str = TRTEXEC) -> str | None:
    """The tool on PATH (NGC's TensorRT containers ship trtexec), or None."""
    return shutil.which(tool)


def missing_reason(tool: str = TRTEXEC) -> str | None:
    if find(tool) is None:
        return f"{tool} is not on PATH: {WHERE[tool]}"
    return None


_BANNER = re.compile(r"\[TensorRT[-\w]* v(\d+)\]")


def parse_version(banner: str) -> str | None:
    """The version in trtexec's first line, `&&&& RUNNING TensorRT.trtexec [TensorRT v101600] ...`: 10.16.0 (TensorRT
    10 and 11 write major*10000 + minor*100 + patch). Another number is returned as written, `v...`."""
    m = _BANNER.search(banner)
    if m is None:
        return None
    n = int(m.group(1))
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}" if n >= 100000 else f"v{n}"


def major(version: str | None) -> int:
    """The major version of a tool's banner version; 10 where it cannot be read (TensorRT-RTX's, written `v...`)."""
    head = (version or "").split(".")[0]
    return int(head) if head.isdigit() else 10


def graph_flags(cuda_graph: bool, version: str | None) -> list[str]:
    """What asks trtexec of `version` for a CUDA graph, or for none: 11 captures unless told not to."""
    if major(version) >= 11:
        return [] if cuda_graph else ["--noCudaGraph"]
    return ["--useCudaGraph"] if cuda_graph else []


def transfer_flags(version: str | None) -> list[str]:
    """What keeps host-device copies out of the timed loop: the default from trtexec 11 on."""
    return [] if major(version) >= 11 else ["--noDataTransfers"]


def build_command(
    tool: str, onnx: Path, engine: Path, timing_cache: Path | None = None, *, strongly_typed: bool = True
) -> list[str]:
    cmd = [tool, f"--onnx={onnx}", "--noTF32", f"--saveEngine={engine}", "--profilingVerbosity=detailed"]
    if strongly_typed:
        cmd.insert(2, "--stronglyTyped")
    if timing_cache is not None:
        cmd.append(f"--timingCacheFile={timing_cache}")
    return cmd


def _inputs(inputs: dict[str, Path]) -> list[str]:
    if not inputs:
        return []
    return ["--loadInputs=" + ",".join(f"'{name}':{path}" for name, path in inputs.items())]


def time_command(
    tool: str,
    engine: Path,
    out: Path,
    *,
    warmup_ms: float,
    duration_ms: float,
    min_iterations: int,
    cuda_graph: bool = True,
    inputs: dict[str, Path] | None = None,
    version: str | None = None,
) -> list[str]:
    """Time `engine` as the plugin's own timer does (warm-up, then a duration and an iteration minimum; trtexec takes
    the duration in whole seconds), writing TIMES under `out`; `version` is the tool's (tool_version)."""
    return [
        tool,
        f"--loadEngine={engine}",
        *graph_flags(cuda_graph, version),
        *_inputs(inputs or {}),
        *transfer_flags(version),
        f"--warmUp={round(warmup_ms)}",
        f"--duration={max(1, math.ceil(duration_ms / 1000))}",
        f"--iterations={min_iterations}",
        f"--exportTimes={out / TIMES}",
    ]


def profile_command(
    tool: str,
    engine: Path,
    out: Path,
    *,
    iterations: int = 50,
    inputs: dict[str, Path] | None = None,
    version: str | None = None,
) -> list[str]:
    """Per-layer times over `iterations` enqueued inferences (no graph: profiling serialises the layers) and the
    engine's layer information, writing PROFILE and LAYERS."""
    return [
        tool,
        f"--loadEngine={engine}",
        *graph_flags(False, version),
        *_inputs(inputs or {}),
        *transfer_flags(version),
        "--warmUp=0",
        "--duration=0",
        f"--iterations={iterations}",
        f"--exportProfile={out / PROFILE}",
        f"--exportLayerInfo={out / LAYERS}",
        "--profilingVerbosity=detailed",
    ]


def output_command(
    tool: str, engine: Path, out: Path, inputs: dict[str, Path], version: str | None = None
) -> list[str]:
    """One enqueued inference of `inputs` (raw binary files), its outputs written to OUTPUT and the layer information
    to LAYERS."""
    return [
        tool,
        f"--loadEngine={engine}",
        *graph_flags(False, version),
        *_inputs(inputs),
        "--warmUp=0",
        "--duration=0",
        "--iterations=1",
        f"--exportOutput={out / OUTPUT}",
        f"--exportLayerInfo={out / LAYERS}",
        "--profilingVerbosity=detailed",
    ]


_NONFINITE = re.compile(r"(?<=[\[,\s])(-?)(nan|inf)(?=[\],\s])", re.IGNORECASE)  # a value, never inside a name


def _json_nonfinite(text: str) -> str:
    """trtexec prints a float as C++ streams do (nan, -nan, inf); JSON, as Python reads it, spells them NaN and
    Infinity. A NaN output is the engine's problem to report, not a malformed file."""
    return _NONFINITE.sub(lambda m: "NaN" if m[2].lower() == "nan" else f"{m[1]}Infinity", text)


def read_output(path: Path) -> dict[str, tuple[tuple[int, ...], list[float]]]:
    """`--exportOutput`'s list of `{"name", "dimensions": "64x1000", "values": [...]}`: name -> (shape, values)."""
    data = read_json(path, OutputFileError, _json_nonfinite)
    if not isinstance(data, list) or not data:
        raise OutputFileError(path, "expected a non-empty JSON list of output tensors (trtexec --exportOutput)")
    out = {}
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not {"name", "dimensions", "values"} <= set(item):
            raise OutputFileError(path, f"entry {i} lacks name, dimensions or values")
        try:
            shape = tuple(int(d) for d in str(item["dimensions"]).split("x"))
        except ValueError:
            raise OutputFileError(path, f"entry {i} has dimensions {item['dimensions']!r}, not like 64x1000") from None
        values = item["values"]
        if not isinstance(values, list) or len(values) != math.prod(shape):
            count = len(values) if isinstance(values, list) else "no list of"
            raise OutputFileError(path, f"{item['name']}: {count} values for dimensions {item['dimensions']}")
        out[str(item["name"])] = (shape, [float(v) for v in values])
    return out


# -- the times: trtexec's --exportTimes trace ------------------------------------------------------------
class TraceFileError(FileError):
    kind = "trtexec times file"


def read_compute_ms(path: Path) -> list[float]:
    """Reading trtexec's `--exportTimes` trace: a JSON list with one object per timed inference, holding
    startEnqMs, endEnqMs, startH2dMs, endH2dMs, startComputeMs, endComputeMs, startD2hMs, endD2hMs, h2dMs,
    computeMs, d2hMs and latencyMs (sampleReporting.cpp's exportJSONTrace, unchanged from 7.1 to 11.x). A
    `{"count": N}` object first is taken as a count. The samples are the per-query computeMs: GPU compute time, the
    figure trtexec summarises as "GPU Compute Time"."""
    data = read_json(path, TraceFileError)
    if not isinstance(data, list):
        raise TraceFileError(path, "expected a JSON list of per-inference objects (trtexec --exportTimes)")
    count = None
    if data and isinstance(data[0], dict) and set(data[0]) == {"count"}:
        count = data[0]["count"]
        data = data[1:]
    samples = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or "computeMs" not in item:
            raise TraceFileError(path, f"entry {i} has no computeMs; is this an --exportTimes file?")
        v = item["computeMs"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise TraceFileError(path, f"entry {i} computeMs is {v!r}, expected a non-negative number")
        samples.append(float(v))
    if not samples:
        raise TraceFileError(path, "holds no inferences")
    if count is not None and count != len(samples):
        raise TraceFileError(path, f"says count {count} but holds {len(samples)} inferences (truncated?)")
    return samples
