"""The TensorRT API the backend calls, held against TensorRT's real bindings (10.16 and 11.4, downloaded from the
package index and cached; skipped with the reason where the index cannot be reached) and against tensorrt_rtx by
introspection. A renamed or removed API fails here, though TensorRT itself cannot run on this machine. What this proves
and what it does not: docs/backends.md, "The TensorRT path without TensorRT"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import pytest_vitperf
from pytest_vitperf.engines.tensorrt.api import (
    Usage,
    binding_names,
    mismatched_in_api,
    mismatched_in_module,
    missing_from_bindings,
    returns_of,
    usages,
)

PACKAGE = Path(pytest_vitperf.__file__).parent
SOURCES = (PACKAGE / "engines" / "backends" / "tensorrt.py", PACKAGE / "engines" / "tensorrt" / "plan.py")
BINDINGS = ("10.16.1.11", "11.4.0.106")  # the oldest and newest TensorRT with CUDA 13 bindings on the index
CACHE = Path(os.environ.get("VITPERF_WHEEL_CACHE", Path.home() / ".cache" / "pytest-vitperf" / "wheels"))
# The Python API of TensorRT releases as their pybind11 sources define it (tools/trt_signatures.py): the oldest 10.x
# this project declares, the newest 10.x and the newest 11.x with sources published.
API_VERSIONS = ("10.8", "10.16", "11.1")
API = Path(__file__).parent / "data" / "tensorrt-api"


def api(version: str) -> dict[str, object]:
    classes: dict[str, object] = json.loads((API / f"{version}.json").read_text())["classes"]
    return classes


def typed(paths: tuple[Path, ...] = SOURCES) -> list[Usage]:
    """The usages with the class each is looked up on, told from what TensorRT-RTX's methods return."""
    rtx = pytest.importorskip("tensorrt_rtx")
    return [u for path in paths for u in usages(path, returns_of(rtx))]


def used() -> list[Usage]:
    return [u for path in SOURCES for u in usages(path)]


def bindings(version: str) -> set[str]:
    """The names a TensorRT's bindings wheel holds (its library's C strings and its Python files)."""
    wheels = sorted(CACHE.glob(f"tensorrt_cu13_bindings-{version}-*.whl"))
    if not wheels:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(CACHE),
               f"tensorrt-cu13-bindings=={version}"]  # fmt: skip
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.skip(f"the package index did not answer within 300 s: {' '.join(cmd[2:])}")
        wheels = sorted(CACHE.glob(f"tensorrt_cu13_bindings-{version}-*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"tensorrt-cu13-bindings {version} could not be downloaded ({last}): {' '.join(cmd[2:])}")
    with zipfile.ZipFile(wheels[-1]) as z:
        library = z.read("tensorrt_bindings/tensorrt.so")
        python = [z.read(n).decode() for n in z.namelist() if n.endswith(".py")]
    return binding_names(library, python)


def test_the_walker_finds_what_the_backend_calls() -> None:
    names = {u.name for u in used()}
    expected = {"Runtime", "deserialize_cuda_engine", "create_execution_context", "set_tensor_address",
                "execute_async_v3", "create_engine_inspector", "get_engine_information", "report_layer_time",
                "Builder", "create_network", "OnnxParser", "build_serialized_network", "set_timing_cache"}  # fmt: skip
    assert expected <= names
    assert {"lookup", "store", "root"}.isdisjoint(names)  # the plan cache's methods: ours, not TensorRT's
    calls = {u.name: u for u in used() if u.positional is not None}
    assert calls["set_tensor_address"].positional == 2 and calls["set_timing_cache"].keywords == ("ignore_mismatch",)
    assert {u.name for u in used() if u.rtx_only} == {"ComputeCapability", "num_compute_capabilities",
                                                      "set_compute_capability", "REQUIRE_USER_ALLOCATION",
                                                      "BuilderFlag", "set_flag"}  # fmt: skip
    # A TensorRT object handed to one of the module's own functions is followed into it (TrtEngine._bind).
    assert {u.where.split(":")[0] for u in used() if u.name in ("set_tensor_address", "execute_async_v3")} == {
        "tensorrt.py"}
    assert {u.name for u in used() if u.guarded} == {"create_timing_cache"}


@pytest.mark.parametrize("version", BINDINGS)
def test_every_name_the_backend_uses_is_in_tensorrt_s_bindings(version: str) -> None:
    assert missing_from_bindings(used(), bindings(version)) == []


def test_every_call_fits_tensorrt_rtx_s_signatures() -> None:
    rtx = pytest.importorskip("tensorrt_rtx")
    assert mismatched_in_module(used(), rtx) == []


def test_a_misspelt_or_misused_api_fails(tmp_path: Path) -> None:
    source = SOURCES[0].read_text(encoding="utf-8")
    typo = tmp_path / "tensorrt.py"
    typo.write_text(source.replace("execute_async_v3(self.stream)", "execute_asnyc_v3(self.stream)", 1))
    wrong = [u for u in usages(typo) if u.name == "execute_asnyc_v3"]
    assert len(wrong) == 1
    assert missing_from_bindings(wrong, bindings(BINDINGS[-1])) == [f"{wrong[0].where}: execute_asnyc_v3"]
    rtx = pytest.importorskip("tensorrt_rtx")
    assert mismatched_in_module(wrong, rtx) == [f"{wrong[0].where}: execute_asnyc_v3 is not in tensorrt_rtx"]
    extra = tmp_path / "extra.py"
    extra.write_text(source.replace("execute_async_v3(self.stream)", "execute_async_v3(self.stream, 0)", 1))
    lines = mismatched_in_module([u for u in usages(extra) if u.positional == 2 and u.name == "execute_async_v3"], rtx)
    assert len(lines) == 1 and "execute_async_v3 called with 2 argument(s) [], signatures take 1-1" in lines[0]


@pytest.mark.parametrize("version", API_VERSIONS)
def test_every_call_is_on_its_class_with_arguments_tensorrt_takes(version: str) -> None:
    used = typed()
    owners = {u.name: u.owner for u in used}
    assert owners["execute_async_v3"] == owners["set_tensor_address"] == "IExecutionContext"  # through _bind, _enqueue
    assert owners["deserialize_cuda_engine"] == "Runtime" and owners["TF32"] == "BuilderFlag"
    assert owners["get_engine_information"] == "EngineInspector" and owners["report_layer_time"] == "IProfiler"
    assert sum(u.owner is None for u in used) <= 1  # ParserError.desc: RTX names its C++ type
    assert mismatched_in_api(used, api(version), version) == []


def test_a_call_on_another_class_or_with_another_count_fails_on_every_version(tmp_path: Path) -> None:
    source = SOURCES[0].read_text(encoding="utf-8")
    wrong = tmp_path / "tensorrt.py"
    wrong.write_text(source.replace("self._context.execute_async_v3(self.stream)", "self._engine.execute_async_v3("
                                    "self.stream)").replace("set_tensor_address(t.name, t.device)",
                                                            "set_tensor_address(t.name)"))  # fmt: skip
    for version in API_VERSIONS:
        lines = mismatched_in_api(typed((wrong,)), api(version), version)
        assert len(lines) == 2, lines
        assert f"ICudaEngine.execute_async_v3 is not in TensorRT {version}" in lines[0] + lines[1]
        assert (f"IExecutionContext.set_tensor_address called with 1 argument(s) []; TensorRT {version} takes "
                "(name, memory)") in lines[0] + lines[1]


def test_the_api_files_are_what_the_tool_reads_from_tensorrt_s_sources() -> None:
    """A few facts of the sources, so that a broken reader cannot write files that pass everything."""
    for version in API_VERSIONS:
        a = api(version)
        assert a["IExecutionContext"]["members"]["execute_async_v3"] == [["stream_handle"]]  # type: ignore[index]
        assert ["serialized_engine"] in a["Runtime"]["members"]["deserialize_cuda_engine"]  # type: ignore[index]
        assert "WARNING" in a["ILogger"]["members"] and a["Logger"]["bases"] == ["ILogger"]  # type: ignore[index]
    assert "is_stream_capturable" not in api("11.1")["IExecutionContext"]["members"]  # type: ignore[index]
