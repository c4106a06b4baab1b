"""trtexec as a second, independent path to a TensorRT number: the command lines that build and time an engine, and
the reading of what trtexec writes into samples, layers and a kernel breakdown.

The seed reports timed their engines with trtexec by hand; these are those commands, written once:
- build: `--onnx --stronglyTyped --saveEngine --timingCacheFile --profilingVerbosity=detailed`. `--stronglyTyped` is
  what TensorRT 10 needs for the exported Q/DQ graphs to keep their types; TensorRT 11 always types strongly, and
  its trtexec migration guide calls the flag no longer needed.
- time: `--loadEngine --useCudaGraph --noDataTransfers --warmUp --duration --iterations`, then `--exportTimes`,
  `--exportProfile` and `--exportLayerInfo`. `--separateProfileRun` keeps the per-layer profiling, which serialises
  layers, out of the timed inferences.

What trtexec writes is read by the parsers the rest of the project already has: the times by
`baselines.trtexec.read_compute_ms` (GPU compute time per inference), the layer information and the profile by
`layers.py`. None of this has run against a real trtexec: none of this project's machines has TensorRT. The tests
hold the command lines and feed the readers documents in trtexec's formats.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from pytest_vitperf.baselines.trtexec import read_compute_ms
from pytest_vitperf.kernels import Breakdown, breakdown
from pytest_vitperf.layers import Layer, LayerTime, read_layer_info, read_profile

TIMES, PROFILE, LAYERS = "times.json", "profile.json", "layers.json"  # what `time_command` asks trtexec to write


def find() -> str | None:
    """The trtexec on PATH (NGC's TensorRT containers ship one), or None."""
    return shutil.which("trtexec")


def missing_reason() -> str | None:
    if find() is None:
        return "trtexec is not on PATH: run in an NGC TensorRT container, or add TensorRT's bin folder to PATH"
    return None


def build_command(trtexec: str, onnx: Path, engine: Path, timing_cache: Path | None = None) -> list[str]:
    cmd = [trtexec, f"--onnx={onnx}", "--stronglyTyped", f"--saveEngine={engine}", "--profilingVerbosity=detailed"]
    if timing_cache is not None:
        cmd.append(f"--timingCacheFile={timing_cache}")
    return cmd


def time_command(
    trtexec: str,
    engine: Path,
    out: Path,
    *,
    warmup_ms: float,
    duration_ms: float,
    min_iterations: int,
    cuda_graph: bool = True,
) -> list[str]:
    """Time `engine` as the plugin's own timer does (warm-up, then a duration and an iteration minimum; trtexec takes
    the duration in whole seconds), writing TIMES, PROFILE and LAYERS under `out`."""
    cmd = [
        trtexec,
        f"--loadEngine={engine}",
        "--noDataTransfers",
        f"--warmUp={round(warmup_ms)}",
        f"--duration={max(1, round(duration_ms / 1000))}",
        f"--iterations={min_iterations}",
        f"--exportTimes={out / TIMES}",
        f"--exportProfile={out / PROFILE}",
        f"--exportLayerInfo={out / LAYERS}",
        "--profilingVerbosity=detailed",
        "--separateProfileRun",
    ]
    if cuda_graph:
        cmd.insert(2, "--useCudaGraph")
    return cmd


@dataclass(frozen=True)
class TrtexecRun:
    samples_ms: list[float]  # GPU compute time per timed inference
    layers: list[Layer]
    layer_times: list[LayerTime]
    inspector_schema: str | None

    def kernel_breakdown(self) -> Breakdown:
        """The profile's layer times grouped like kernels (layers.py names them as TensorRT does)."""
        return breakdown({t.name: t.ms for t in self.layer_times}, runs=1)


def read_run(out: Path) -> TrtexecRun:
    """What one `time_command` left under `out`; a missing or malformed file raises its reader's one-line error."""
    layers, schema = read_layer_info(out / LAYERS)
    return TrtexecRun(read_compute_ms(out / TIMES), layers, read_profile(out / PROFILE), schema)
