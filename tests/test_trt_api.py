"""The TensorRT API the backend calls, held against TensorRT's real bindings (10.16 and 11.4, downloaded from the
package index and cached; skipped with the reason where the index cannot be reached) and against tensorrt_rtx by
introspection. A renamed or removed API fails here, though TensorRT itself cannot run on this machine. What this proves
and what it does not: docs/backends.md, "The TensorRT path without TensorRT"."""

from __future__ import annotations

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
    mismatched_in_module,
    missing_from_bindings,
    usages,
)

PACKAGE = Path(pytest_vitperf.__file__).parent
SOURCES = (PACKAGE / "engines" / "backends" / "tensorrt.py", PACKAGE / "engines" / "tensorrt" / "plan.py")
BINDINGS = ("10.16.1.11", "11.4.0.106")  # the oldest and newest TensorRT with CUDA 13 bindings on the index
CACHE = Path(os.environ.get("VITPERF_WHEEL_CACHE", Path.home() / ".cache" / "pytest-vitperf" / "wheels"))


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
