"""trtexec's command lines and the reading of what it writes (times, profile, layer information), on documents in
its formats: tests/data/trtexec_times.json and test_layers' inspector and profile documents. No trtexec runs here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_vitperf.jsonfile import FileError
from pytest_vitperf.trtexec import LAYERS, PROFILE, TIMES, build_command, missing_reason, read_run, time_command
from tests.test_layers import LAYER_INFO_11
from tests.test_layers import PROFILE as PROFILE_DOC

DATA = Path(__file__).parent / "data"


def test_the_build_command() -> None:
    assert build_command("trtexec", Path("m.onnx"), Path("e.plan"), Path("t.cache")) == [
        "trtexec", "--onnx=m.onnx", "--stronglyTyped", "--saveEngine=e.plan", "--profilingVerbosity=detailed",
        "--timingCacheFile=t.cache"]  # fmt: skip
    assert "--timingCacheFile" not in " ".join(build_command("trtexec", Path("m.onnx"), Path("e.plan")))


def test_the_timing_command_follows_the_plugin_s_timing() -> None:
    cmd = time_command("/opt/trt/bin/trtexec", Path("e.plan"), Path("out"), warmup_ms=2000, duration_ms=3000,
                       min_iterations=10)  # fmt: skip
    assert cmd == [
        "/opt/trt/bin/trtexec", "--loadEngine=e.plan", "--useCudaGraph", "--noDataTransfers", "--warmUp=2000",
        "--duration=3", "--iterations=10", "--exportTimes=out/times.json", "--exportProfile=out/profile.json",
        "--exportLayerInfo=out/layers.json", "--profilingVerbosity=detailed", "--separateProfileRun"]  # fmt: skip
    short = time_command("trtexec", Path("e"), Path("o"), warmup_ms=200, duration_ms=400, min_iterations=5,
                         cuda_graph=False)  # fmt: skip
    assert "--duration=1" in short and "--useCudaGraph" not in short  # trtexec takes whole seconds


def test_a_run_s_files_become_samples_layers_and_a_breakdown(tmp_path: Path) -> None:
    shutil.copy(DATA / "trtexec_times.json", tmp_path / TIMES)
    (tmp_path / PROFILE).write_text(json.dumps(PROFILE_DOC))
    (tmp_path / LAYERS).write_text(json.dumps(LAYER_INFO_11))
    run = read_run(tmp_path)
    times = json.loads((DATA / "trtexec_times.json").read_text())
    assert run.samples_ms == [t["computeMs"] for t in times if "computeMs" in t]
    assert run.inspector_schema == "TensorRT 11.x"
    assert [x.precision for x in run.layers] == ["fp16", "fp8", "int8", "bf16"]
    b = run.kernel_breakdown()
    assert b.per_run_ms == pytest.approx(sum(e["averageMs"] for e in PROFILE_DOC if "averageMs" in e))
    assert b.top[0][0] == "blocks.0.mlp.fc1"


def test_a_missing_file_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / LAYERS).write_text(json.dumps(LAYER_INFO_11))
    shutil.copy(DATA / "trtexec_times.json", tmp_path / TIMES)
    with pytest.raises(FileError, match=rf"^TensorRT layer file .*{PROFILE}: cannot be read \(No such file"):
        read_run(tmp_path)


def test_without_trtexec_on_path_the_reason_says_where_to_get_it(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:  # fmt: skip
    monkeypatch.setenv("PATH", str(tmp_path))
    assert missing_reason() == (
        "trtexec is not on PATH: run in an NGC TensorRT container, or add TensorRT's bin folder to PATH"
    )
    fake = tmp_path / "trtexec"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert missing_reason() is None
