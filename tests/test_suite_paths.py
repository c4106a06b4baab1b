"""Every suite file runs with the path options given relative, absolute, with `~` and from an ini file: suites and
fixtures take paths from the resolved settings only, never from the raw option strings.

Relative command-line paths are relative to the folder pytest was started in; relative ini paths to the ini
file's folder. Suites whose full run is slow on a CPU are narrowed with -k to one case: what is tested here is
where their files go, not their figures.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import FAST, REPO

PATHS = ("--vitperf-cache-dir=cache", "--vitperf-baseline-dir=bl", "--vitperf-floors=conf/floors.json")
# A floor no CPU can reach: proof that the floors file named on the command line was the one read.
UNREACHABLE = {"gpu": "*", "backend": "torch", "precision": "bf16", "min_speedup": 1000, "source": "test floor"}
NARROW = {
    "test_attention_shapes.py": ("-k", "vit_tiny"),
    "test_quantization_coverage.py": ("-k", "full_recipes and fp8 and not mxfp8"),  # one vit_base export (~30 s)
    "test_plans.py": ("-k", "fp8-attn"),  # one vit_tiny export and TensorRT-RTX build
    "test_gemm.py": ("-k", "m1-n4096-k4096"),  # one decode shape: 4096-cubed products take seconds on a CPU
}
# Nothing of it runs without trtexec and TensorRT: every case skips, and none may fail on the path options.
ALL_SKIP = {"test_backend_agreement.py"}
SUITES = sorted(p.name for p in (REPO / "suites").glob("test_*.py"))


def project(pytester: pytest.Pytester, floors: list[dict] | None = None) -> Path:
    """The real suites/ folder, and an empty floors file under conf/, in a pytester directory."""
    shutil.copytree(REPO / "suites", pytester.path / "suites")
    (pytester.path / "conf").mkdir()
    (pytester.path / "conf" / "floors.json").write_text(json.dumps({"schema": 1, "floors": floors or []}))
    return pytester.path / "suites"


def test_every_suite_file_is_covered_here() -> None:
    assert set(SUITES) >= {"test_vit_latency.py", "test_quantization_coverage.py", "test_attention_shapes.py"}


@pytest.mark.parametrize("suite", SUITES)
def test_each_suite_runs_with_relative_path_options(pytester: pytest.Pytester, suite: str) -> None:
    suites = project(pytester)
    result = pytester.runpytest(str(suites / suite), *FAST, *PATHS, *NARROW.get(suite, ()), "-rs")
    outcomes = result.parseoutcomes()
    ran = outcomes.get("skipped" if suite in ALL_SKIP else "passed", 0)
    assert ran >= 1 and not outcomes.get("failed") and not outcomes.get("errors"), result.stdout.str()[-3000:]


def test_coverage_suite_exports_into_the_cache_dir_relative_or_absolute(pytester: pytest.Pytester) -> None:
    """A relative and an absolute spelling of one folder are the same cache: the second run reuses the export."""
    suites = project(pytester)
    args = (str(suites / "test_quantization_coverage.py"), "--gpu-bench", *NARROW["test_quantization_coverage.py"])
    pytester.runpytest(*args, "--vitperf-cache-dir=cache").assert_outcomes(passed=1)
    (export,) = (pytester.path / "cache" / "onnx").glob("fp8-*.onnx")
    written = export.stat().st_mtime_ns
    pytester.runpytest(*args, f"--vitperf-cache-dir={pytester.path / 'cache'}").assert_outcomes(passed=1)
    assert export.stat().st_mtime_ns == written  # read from the cache, not exported again


def test_latency_suite_uses_relative_floors_baselines_and_cache(pytester: pytest.Pytester) -> None:
    suites = project(pytester, floors=[UNREACHABLE])
    result = pytester.runpytest(
        str(suites / "test_vit_latency.py"),
        *FAST,
        *PATHS,
        "--vitperf-precisions=fp16,bf16",
        "--vitperf-update-baselines",
        "--vitperf-compile=default",
        "-p",
        "no:xdist",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*bf16 is *x faster than fp16, below the floor 1000.00x (time, *) [[]test floor]*"])
    assert list((pytester.path / "bl").glob("torch/*/*/test_vit.json"))
    assert any((pytester.path / "cache" / "inductor").iterdir())


def test_tilde_expands_to_home(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    suites = project(pytester)
    monkeypatch.setenv("HOME", str(pytester.path / "home"))
    result = pytester.runpytest(
        str(suites / "test_vit_latency.py"),
        *FAST,
        "--vitperf-precisions=fp16",
        "--vitperf-baseline-dir=~/bl",
        "--vitperf-update-baselines",
    )
    result.assert_outcomes(passed=1)
    assert list((pytester.path / "home" / "bl").glob("torch/*/*/*.json"))
    assert not (pytester.path / "~").exists()


def test_ini_paths_are_relative_to_the_ini_file(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    suites = project(pytester, floors=[UNREACHABLE])
    pytester.makeini("[pytest]\nvitperf_baseline_dir = bl\nvitperf_floors = conf/floors.json\n")
    (pytester.path / "elsewhere").mkdir()
    monkeypatch.chdir(pytester.path / "elsewhere")
    result = pytester.runpytest(
        str(suites / "test_vit_latency.py"),
        "-c",
        str(pytester.path / "tox.ini"),
        *FAST,
        "--vitperf-precisions=fp16,bf16",
        "--vitperf-update-baselines",
    )
    result.assert_outcomes(passed=1, failed=1)  # the floor came from conf/ beside the ini file
    assert list((pytester.path / "bl").glob("torch/*/*/*.json"))
    assert not (pytester.path / "elsewhere" / "bl").exists()
