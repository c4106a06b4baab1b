"""trtexec's command lines and the reading of what it writes (times, profile, layer information, outputs), on documents
in its formats: tests/data/trtexec_times.json and test_layers' inspector and profile documents; and the trtexec
backend's engine driven through those commands by a stand-in tool that writes those same documents (no trtexec runs
here: what is checked is the wiring, never a number)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.core.files import FileError
from pytest_vitperf.engines.backends.trtexec import TrtexecBackend, TrtexecEngine, TrtexecRTXBackend
from pytest_vitperf.engines.tensorrt.trtexec import (
    OUTPUT,
    build_command,
    missing_reason,
    output_command,
    parse_version,
    profile_command,
    read_output,
    time_command,
)
from tests.test_layers import LAYER_INFO_11
from tests.test_layers import PROFILE as PROFILE_DOC

DATA = Path(__file__).parent / "data"


def test_the_build_command() -> None:
    assert build_command("trtexec", Path("m.onnx"), Path("e.plan"), Path("t.cache")) == [
        "trtexec", "--onnx=m.onnx", "--stronglyTyped", "--saveEngine=e.plan", "--profilingVerbosity=detailed",
        "--timingCacheFile=t.cache"]  # fmt: skip
    assert "--timingCacheFile" not in " ".join(build_command("trtexec", Path("m.onnx"), Path("e.plan")))
    rtx = build_command("tensorrt_rtx", Path("m.onnx"), Path("e.plan"), strongly_typed=False)
    assert rtx == ["tensorrt_rtx", "--onnx=m.onnx", "--saveEngine=e.plan", "--profilingVerbosity=detailed"]


def test_the_timing_command_follows_the_plugin_s_timing() -> None:
    cmd = time_command("/opt/trt/bin/trtexec", Path("e.plan"), Path("out"), warmup_ms=2000, duration_ms=3000,
                       min_iterations=10, inputs={"x": Path("in.bin")})  # fmt: skip
    assert cmd == [
        "/opt/trt/bin/trtexec", "--loadEngine=e.plan", "--useCudaGraph", "--loadInputs='x':in.bin",
        "--noDataTransfers", "--warmUp=2000", "--duration=3", "--iterations=10",
        "--exportTimes=out/times.json"]  # fmt: skip
    short = time_command("trtexec", Path("e"), Path("o"), warmup_ms=200, duration_ms=400, min_iterations=5,
                         cuda_graph=False)  # fmt: skip
    assert "--duration=1" in short and "--useCudaGraph" not in short  # trtexec takes whole seconds
    assert "--duration=2" in time_command("t", Path("e"), Path("o"), warmup_ms=0, duration_ms=1500, min_iterations=1)


def test_profiling_and_the_output_run_are_separate_runs() -> None:
    prof = profile_command("trtexec", Path("e"), Path("o"), iterations=20, inputs={"x": Path("i")})
    assert "--exportProfile=o/profile.json" in prof and "--exportLayerInfo=o/layers.json" in prof
    assert "--iterations=20" in prof and "--exportTimes" not in " ".join(prof) and "--useCudaGraph" not in prof
    out = output_command("trtexec", Path("e"), Path("o"), {"x": Path("i")})
    assert "--exportOutput=o/output.json" in out and "--iterations=1" in out and "--loadInputs='x':i" in out
    assert "--noDataTransfers" not in out  # the output has to come back to the host


def test_the_version_is_read_from_the_banner() -> None:
    assert parse_version("&&&& RUNNING TensorRT.trtexec [TensorRT v101600] [b23] # trtexec --help") == "10.16.0"
    assert parse_version("&&&& RUNNING TensorRT.trtexec [TensorRT v110400] [b6] # trtexec") == "11.4.0"
    assert parse_version("[TensorRT-RTX v10701]") == "v10701"  # not decoded: written as it came
    assert parse_version("usage: trtexec") is None


def test_the_output_file_becomes_tensors_and_nan_stays_a_value(tmp_path: Path) -> None:
    path = tmp_path / OUTPUT
    # as trtexec writes it: C++ stream floats, nan and inf unquoted
    path.write_text('[\n  { "name" : "logits"\n  , "dimensions" : "2x3"\n'
                    '  , "values" : [ 1, -2.5, nan, inf, -inf, 3e-2 ]\n  }\n]\n')  # fmt: skip
    (name, (shape, values)), = read_output(path).items()
    assert name == "logits" and shape == (2, 3)
    assert values[:2] == [1.0, -2.5] and values[2] != values[2] and values[3:5] == [float("inf"), float("-inf")]
    path.write_text('[ { "name" : "logits", "dimensions" : "2x3", "values" : [ 1, 2 ] } ]')
    with pytest.raises(FileError, match=r"^trtexec output file .*: logits: 2 values for dimensions 2x3$"):
        read_output(path)
    path.write_text('[ { "name" : "logits", "dimensions" : "2x3", "values" : [ 1, 2, 3,')  # an interrupted write
    with pytest.raises(FileError, match=r"^trtexec output file .*: is not valid JSON"):
        read_output(path)


def test_without_the_tool_on_path_the_reason_says_where_to_get_it(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:  # fmt: skip
    monkeypatch.setenv("PATH", str(tmp_path))
    assert missing_reason() == (
        "trtexec is not on PATH: run in an NGC TensorRT container, or add TensorRT's bin folder to PATH"
    )
    assert missing_reason("tensorrt_rtx").startswith("tensorrt_rtx is not on PATH: install TensorRT-RTX from")
    fake = tmp_path / "trtexec"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert missing_reason() is None
    assert TrtexecBackend().missing() is None and TrtexecRTXBackend().missing() is not None


# A stand-in for trtexec: it writes, for the flags it is given, the documents in trtexec's formats the tests above
# read, and for --exportOutput the mean of each image of the raw FP16 input it was told to load, so that the input
# file and the output file are checked end to end.
STAND_IN = """\
import json, shutil, sys
import numpy as np
args = dict(a[2:].partition("=")[::2] for a in sys.argv[1:])
print("&&&& RUNNING TensorRT.trtexec [TensorRT v101600] [b23] # trtexec")
if "fail" in args.get("loadEngine", ""):
    print("[E] Error[1]: engine file is not a TensorRT engine"); sys.exit(1)
if "exportTimes" in args:
    shutil.copy(sys.argv[0] + ".times.json", args["exportTimes"])
if "exportProfile" in args:
    shutil.copy(sys.argv[0] + ".profile.json", args["exportProfile"])
if "exportLayerInfo" in args:
    shutil.copy(sys.argv[0] + ".layers.json", args["exportLayerInfo"])
if "exportOutput" in args:
    name, path = args["loadInputs"].split(":")
    x = np.fromfile(path, dtype=np.float16).reshape(2, -1).astype(np.float32)
    values = ", ".join(repr(float(v)) for v in x.mean(axis=1))
    open(args["exportOutput"], "w").write('[ { "name" : "logits", "dimensions" : "2x1", "values" : [ %s ] } ]' % values)
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> str:
    tool = tmp_path / "trtexec"
    tool.write_text(f"#!{sys.executable}\n{STAND_IN}")
    tool.chmod(0o755)
    shutil.copy(DATA / "trtexec_times.json", f"{tool}.times.json")
    Path(f"{tool}.profile.json").write_text(json.dumps(PROFILE_DOC))
    Path(f"{tool}.layers.json").write_text(json.dumps(LAYER_INFO_11))
    return str(tool)


def _engine(tool: str, plan: Path) -> TrtexecEngine:
    return TrtexecEngine("trtexec", "vit_tiny_patch16_224", "fp16", 2, tool, plan, "input", (2, 3, 4, 4), "float16",
                         cuda_graph=True)  # fmt: skip


def test_the_engine_takes_its_samples_layers_profile_and_output_from_the_tool(stand_in: str, tmp_path: Path) -> None:
    import torch

    from pytest_vitperf.engines.backends import SelfTimed
    from pytest_vitperf.engines.models.zoo import fixed_input

    e = _engine(stand_in, tmp_path / "model.engine")
    assert isinstance(e, SelfTimed)
    times = json.loads((DATA / "trtexec_times.json").read_text())
    assert e.time_itself(warmup_ms=200, duration_ms=1000, min_iterations=10) == [t["computeMs"] for t in times
                                                                                  if "computeMs" in t]  # fmt: skip
    assert "layers" not in e.describe()  # nothing is known of the layers before a run
    out = e.output()
    expected = fixed_input((2, 3, 4, 4)).half().float().reshape(2, -1).mean(dim=1, keepdim=True)
    assert out.shape == (2, 1) and torch.allclose(out, expected, atol=1e-3)
    x = torch.full((2, 3, 4, 4), 0.5)
    assert torch.allclose(e.run(x), torch.full((2, 1), 0.5))
    d = e.describe()
    assert d["inspector_schema"] == "TensorRT 11.x" and d["layers"] == 4 and d["mode"] == "trtexec, cuda-graph"
    b = e.kernel_breakdown()
    assert b.per_run_ms == pytest.approx(sum(p["averageMs"] for p in PROFILE_DOC if "averageMs" in p))
    with pytest.raises(VitperfError, match=r"takes \(2, 3, 4, 4\), not \(1, 3, 4, 4\)"):
        e.run(torch.zeros(1, 3, 4, 4))


def test_what_the_tool_cannot_do_and_a_failing_run_are_one_line_with_the_command(stand_in: str,
                                                                                 tmp_path: Path) -> None:  # fmt: skip
    e = _engine(stand_in, tmp_path / "model.engine")
    with pytest.raises(VitperfError, match=r"cannot flush the L2 before each one; drop --vitperf-cold"):
        e.time_itself(warmup_ms=0, duration_ms=1000, min_iterations=1, cold=True)
    with pytest.raises(VitperfError, match=r"has no noise target; drop --vitperf-max-noise"):
        e.time_itself(warmup_ms=0, duration_ms=1000, min_iterations=1, max_noise=0.005)
    with pytest.raises(VitperfError, match=r"measure it with bench\(engine\)"):
        e.launch()
    broken = _engine(stand_in, tmp_path / "fail.engine")
    with pytest.raises(VitperfError) as info:
        broken.time_itself(warmup_ms=0, duration_ms=1000, min_iterations=1)
    message = str(info.value)
    assert "\n" not in message and "failed (exit 1): [E] Error[1]: engine file is not a TensorRT engine" in message
    hand = r"; run it by hand: \S+/trtexec --loadEngine=\S+/fail.engine .* --exportTimes=\S+/times.json$"
    assert re.search(hand, message)


def test_a_file_the_tool_did_not_write_is_one_line_naming_it(stand_in: str, tmp_path: Path) -> None:
    Path(f"{stand_in}.layers.json").write_text("[ {")  # as an interrupted write leaves it
    with pytest.raises(VitperfError, match=r"^TensorRT layer file \S+/layers.json: is not valid JSON"):
        _engine(stand_in, tmp_path / "model.engine").output()


AGREEMENT = Path(__file__).resolve().parents[1] / "suites" / "test_backend_agreement.py"


def test_the_agreement_suite_says_why_it_does_not_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                      stand_in: str) -> None:  # fmt: skip
    pytester.makepyfile(test_backend_agreement=AGREEMENT.read_text())
    args = ("--gpu-bench", "--vitperf-precisions=fp16", "--vitperf-batch-sizes=1", "-rs", "-p", "no:cacheprovider")
    result = pytester.runpytest(*args)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*cross-check runs with --vitperf-backend trtexec (this run: torch)"])
    monkeypatch.setenv("PATH", str(Path(stand_in).parent))  # a trtexec on PATH, no GPU
    result = pytester.runpytest(*args, "--vitperf-backend=trtexec")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*the trtexec backend needs an NVIDIA GPU to run engines; no CUDA GPU here*"])
