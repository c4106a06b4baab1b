"""trtexec's command lines and the reading of what it writes (times, profile, layer information, outputs), on documents
in its formats: tests/data/trtexec_times.json and test_layers' inspector and profile documents; and the trtexec
backend's engine driven through those commands by a stand-in tool that writes those same documents (no trtexec runs
here: what is checked is the wiring, never a number)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.core.files import FileError
from pytest_vitperf.engines.backends.trtexec import TrtexecBackend, TrtexecEngine, TrtexecRTXBackend, tool_version
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
from tests.test_layers import LAYER_INFO, LAYER_INFO_11

DATA = Path(__file__).parent / "data"


def test_the_build_command() -> None:
    assert build_command("trtexec", Path("m.onnx"), Path("e.plan"), Path("t.cache")) == [
        "trtexec", "--onnx=m.onnx", "--stronglyTyped", "--noTF32", "--saveEngine=e.plan",
        "--profilingVerbosity=detailed", "--timingCacheFile=t.cache"]  # fmt: skip
    assert "--timingCacheFile" not in " ".join(build_command("trtexec", Path("m.onnx"), Path("e.plan")))
    rtx = build_command("tensorrt_rtx", Path("m.onnx"), Path("e.plan"), strongly_typed=False)
    assert rtx == ["tensorrt_rtx", "--onnx=m.onnx", "--noTF32", "--saveEngine=e.plan", "--profilingVerbosity=detailed"]


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


STAND_IN = Path(__file__).parent / "standins" / "trtexec.py"
REAL_TIMES_KEYS = ["startEnqMs", "endEnqMs", "startH2dMs", "endH2dMs", "startComputeMs", "endComputeMs", "startD2hMs",
                   "endD2hMs", "h2dMs", "computeMs", "d2hMs", "latencyMs"]  # fmt: skip


def stand_in_tool(folder: Path, version: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """tests/standins/trtexec.py as a tool named trtexec, of `version` (the layer information of its major)."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "trtexec"
    tool.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(STAND_IN)!r}, run_name='__main__')\n")
    tool.chmod(0o755)
    layers = folder / "layers.json"
    layers.write_text(json.dumps(LAYER_INFO_11 if version.startswith("11") else LAYER_INFO))
    monkeypatch.setenv("STANDIN_TRTEXEC_VERSION", version)
    monkeypatch.setenv("STANDIN_TRTEXEC_LAYERS", str(layers))
    return str(tool)


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    return stand_in_tool(tmp_path / "bin", "11.1.0.106", monkeypatch)


def _engine(tool: str, plan: Path, cuda_graph: bool = True) -> TrtexecEngine:
    return TrtexecEngine("trtexec", "vit_tiny_patch16_224", "fp16", 2, tool, plan, "input", (2, 3, 4, 4), "float16",
                         cuda_graph=cuda_graph, version=tool_version(tool))  # fmt: skip


def test_the_engine_takes_its_samples_layers_profile_and_output_from_the_tool(stand_in: str, tmp_path: Path) -> None:
    import torch

    from pytest_vitperf.engines.backends import SelfTimed
    from pytest_vitperf.engines.models.zoo import fixed_input

    e = _engine(stand_in, tmp_path / "model.engine")
    assert isinstance(e, SelfTimed)
    assert e.time_itself(warmup_ms=200, duration_ms=1000, min_iterations=10) == pytest.approx([8.0] * 10, abs=0.003)
    assert "layers" not in e.describe()  # nothing is known of the layers before a run
    out = e.output()
    expected = fixed_input((2, 3, 4, 4)).half().float().reshape(2, -1).mean(dim=1, keepdim=True)
    assert out.shape == (2, 1) and torch.allclose(out, expected, atol=1e-3)
    x = torch.full((2, 3, 4, 4), 0.5)
    assert torch.allclose(e.run(x), torch.full((2, 1), 0.5))
    d = e.describe()
    assert d["inspector_schema"] == "TensorRT 11.x" and d["layers"] == 4 and d["mode"] == "trtexec, cuda-graph"
    b = e.kernel_breakdown()
    assert b.per_run_ms == pytest.approx(0.1 + 0.3 + 0.4)  # the stand-in's profile: three layers, per inference
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
    assert "\n" not in message and "failed (exit 1): [" in message
    assert "[E] Error[1]: IRuntime::deserializeCudaEngine: Error Code 1: Serialization" in message
    hand = r"; run it by hand: \S+/trtexec --loadEngine=\S+/fail.engine .* --exportTimes=\S+/times.json$"
    assert re.search(hand, message)


@pytest.mark.parametrize("version", ["10.8.0.43", "10.13.3.9", "11.1.0.106"])
def test_graph_and_enqueue_rows_differ_as_asked_on_each_trtexec(version: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """trtexec 10.x captures a graph only with --useCudaGraph; 11.x unless --noCudaGraph. The stand-in takes 8.0 ms
    an inference in a graph and 8.4 ms enqueued."""
    tool = stand_in_tool(tmp_path / "bin", version, monkeypatch)
    assert tool_version(tool) == ".".join(version.split(".")[:3])  # the banner of the version asked
    times = {graph: _engine(tool, tmp_path / "model.engine", graph).time_itself(warmup_ms=0, duration_ms=1000,
                                                                                min_iterations=5)
             for graph in (True, False)}  # fmt: skip
    assert max(times[True]) < 8.01 and min(times[False]) > 8.39


def test_each_command_speaks_its_trtexec_s_flags() -> None:
    ten = time_command("trtexec", Path("e"), Path("o"), warmup_ms=0, duration_ms=1000, min_iterations=1,
                       version="10.13.3")  # fmt: skip
    eleven = time_command("trtexec", Path("e"), Path("o"), warmup_ms=0, duration_ms=1000, min_iterations=1,
                          version="11.1.0")  # fmt: skip
    assert "--useCudaGraph" in ten and "--noDataTransfers" in ten
    assert "--useCudaGraph" not in eleven and "--noDataTransfers" not in eleven  # deprecated: 11 does both
    for cmd in (profile_command("t", Path("e"), Path("o"), version="11.1.0"),
                output_command("t", Path("e"), Path("o"), {}, "11.1.0")):  # fmt: skip
        assert "--noCudaGraph" in cmd  # the profile and the output are enqueued runs on every version
    assert "--noCudaGraph" not in " ".join(profile_command("t", Path("e"), Path("o"), version="10.16.0"))


def test_a_bad_option_reports_trtexec_s_error_line_not_its_help(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:  # fmt: skip
    tool = stand_in_tool(tmp_path / "bin", "10.13.3.9", monkeypatch)
    e = _engine(tool, tmp_path / "model.engine", cuda_graph=False)
    e.version = "11.1.0"  # told wrong: a 10.13 trtexec has no --noCudaGraph
    with pytest.raises(VitperfError) as info:
        e.output()
    unknown = r"failed \(exit 1\): \[[\d/:-]+\] \[E\] Unknown option: --noCudaGraph; run it by hand"
    assert re.search(unknown, str(info.value))


def test_the_build_keeps_fp32_fp32(stand_in: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_vitperf.engines.tensorrt.plan import BuildOptions

    monkeypatch.setenv("PATH", str(Path(stand_in).parent))
    plan = TrtexecBackend().builder(tmp_path)(b"onnx", BuildOptions())
    assert json.loads(plan) == {"tf32": False, "strongly_typed": True}  # trtexec allows TF32 unless --noTF32


def test_the_times_file_has_the_keys_trtexec_writes() -> None:
    for entry in json.loads((DATA / "trtexec_times.json").read_text()):
        assert list(entry) == REAL_TIMES_KEYS


def test_a_file_the_tool_did_not_write_is_one_line_naming_it(stand_in: str, tmp_path: Path) -> None:
    Path(stand_in).with_name("layers.json").write_text("[ {")  # as an interrupted write leaves it
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
