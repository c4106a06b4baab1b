"""The plugin end to end through pytester: gate, skips, header, summary, JSON, disk, help, xdist."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAST, REPO

GOLDEN_HELP = Path(__file__).parent / "golden" / "help.txt"


def test_without_the_flag_benchmarks_skip_naming_it(suite: pytest.Pytester) -> None:
    result = suite.runpytest("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)  # not even parametrized: nothing is probed without the flag
    result.stdout.fnmatch_lines(
        ["vitperf: benchmarks off (enable with --gpu-bench)", "*benchmark test: run with --gpu-bench*"]
    )
    assert "vitperf summary" not in result.stdout.str()


def test_gpu_only_precisions_skip_with_device_and_need(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*FAST, "-rs", "--vitperf-precisions=fp16,fp8,nvfp4,fp16-sparse24,int8")
    result.assert_outcomes(passed=1, skipped=4)
    result.stdout.fnmatch_lines_random(
        [
            "SKIPPED*fp8 needs an NVIDIA GPU with FP8 tensor cores (sm_89+); no CUDA GPU here (*)",
            "SKIPPED*nvfp4 needs an NVIDIA GPU with NVFP4 block-scaled tensor cores (Blackwell sm_100*sm_120*",
            "SKIPPED*fp16-sparse24 needs an NVIDIA GPU with 2:4 sparse tensor cores (sm_80+)*",
            "SKIPPED*int8 needs an NVIDIA GPU with INT8 tensor cores (sm_75+)*",
        ]
    )


def test_header_names_device_backend_and_versions(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16")
    result.stdout.fnmatch_lines(["vitperf: CPU * (no CUDA GPU); backend torch 2.*; torch 2.*, modelopt *"])


def test_a_run_without_xdist_where_pytest_benchmark_is_off_still_measures(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started from a test under `pytest -n` inherits the worker's variable, and pytest-benchmark turns itself
    off there; with xdist not loaded (`-p no:xdist`), xdist's options are not there to ask either."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    result = suite.runpytest(*FAST, "-p", "no:xdist", "--vitperf-precisions=fp16")
    result.assert_outcomes(passed=1)


def test_summary_table_has_every_column_and_speedup(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16,fp32")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*= vitperf summary =*",
            "device: CPU *",
            "model * precision * batch * backend * median ms * p90 ms * p99 ms * CoV * img/s * cos vs fp32 * vs fp16 "
            "* verdict",
            "test_vit * fp32 * 1 * torch * 1.00000 * *x [[]*, *] * no floor*",
            "test_vit * fp16 * 1 * torch * [01].[09]???? * 1.00x * reference*",
            "test_vit * bf16 * 1 * torch * 0.999* * *x [[]*, *] * no floor*",
            "intervals: 95%, over 3 interleaved rounds per family and 1 build(s) per precision*",
        ]
    )


def floors(path: Path, precision: str, min_speedup: float) -> None:
    entry = {
        "gpu": "*",
        "backend": "torch",
        "precision": precision,
        "min_speedup": min_speedup,
        "source": "test",
    }
    path.write_text(json.dumps({"schema": 1, "floors": [entry]}))


def test_floor_below_the_speedup_passes_and_shows_in_summary(suite: pytest.Pytester) -> None:
    floors(suite.path / "floors.json", "bf16", 0.01)
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_vit * bf16 * pass (floor 0.01x)*"])


def test_floor_above_the_speedup_fails_with_both_medians_and_the_fix(suite: pytest.Pytester) -> None:
    floors(suite.path / "floors.json", "bf16", 1000.0)
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*bf16 is *x faster than fp16, below the floor 1000.00x (time, *x [[]*, *] at 98.33%) [[]test]",
            "*in time *x [[]*, *] at 95% over 3 rounds",
            "*fp16 median * ms (n=24, CoV *)",
            "*bf16 median * ms (n=24, CoV *)",  # 3 rounds of 8 turns
            "*test_vit batch 1, torch 2.*",
            "*lower the floor in the floors file; to re-measure run:",
            "*pytest --gpu-bench 'test_vit_latency.py::test_latency?test_vit-b1-bf16?'",
            "test_vit * bf16 * FAIL (floor 1000.00x)*",
        ]
    )


def test_floors_option_points_at_another_file(suite: pytest.Pytester) -> None:
    floors(suite.path / "strict.json", "fp32", 1000.0)
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16,fp32", "--vitperf-floors=strict.json")
    result.assert_outcomes(passed=1, failed=1)
    missing = suite.runpytest(*FAST, "--vitperf-precisions=fp16,fp32", "--vitperf-floors=nope.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR  # named on the command line: checked before anything runs
    missing.stderr.fnmatch_lines(["ERROR: --vitperf-floors *nope.json: cannot be read (*)*"])


def test_malformed_floors_file_fails_only_the_tests_that_need_it(suite: pytest.Pytester) -> None:
    bad = suite.path / "floors.json"
    bad.write_text('{"schema": 1, "floors": [')
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16")
    result.assert_outcomes(passed=1, failed=1)  # fp16 needs no floor
    # One line naming the file and the problem, then the command to re-run; no traceback through the plugin.
    result.stdout.fnmatch_lines(
        [
            f"floors file {bad}: is not valid JSON: *",
            "Fix that file*",
            "*pytest --gpu-bench *test_vit_latency.py::test_latency*bf16*",
        ]
    )
    assert "Traceback" not in result.stdout.str() and "session.py" not in result.stdout.str()
    assert bad.read_text() == '{"schema": 1, "floors": ['


def test_benchmark_json_holds_the_measured_samples(suite: pytest.Pytester) -> None:
    out = suite.path / "bench.json"
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16", "--vitperf-rounds=4", f"--benchmark-json={out}")
    result.assert_outcomes(passed=1)
    data = json.loads(out.read_text())
    (b,) = data["benchmarks"]
    assert b["params"] == {"model": "test_vit", "precision": "fp16", "batch": 1}
    assert b["group"] == "vitperf test_vit b1"
    stats, ours = b["stats"], b["extra_info"]["vitperf"]
    assert len(stats["data"]) == stats["rounds"] == ours["n"] == 4 * 8  # 4 rounds of 8 one-launch turns
    assert stats["median"] * 1e3 == pytest.approx(ours["median"])
    assert min(stats["data"]) * 1e3 == pytest.approx(ours["min"])
    assert ours["timer"] == "perf_counter" and ours["backend"] == "torch"
    assert data["machine_info"]["vitperf"]["backend"] == "torch"
    assert data["machine_info"]["vitperf"]["device"]["sm"] is None


def test_nothing_is_written_unless_asked(suite: pytest.Pytester) -> None:
    def files() -> list[Path]:
        return sorted(p.relative_to(suite.path) for p in suite.path.rglob("*") if "__pycache__" not in p.parts)

    before = files()
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16")
    result.assert_outcomes(passed=2)
    # pytest-benchmark makes its empty storage folder at start-up, with or without this plugin.
    assert [p for p in files() if p != Path(".benchmarks")] == before
    assert not any((suite.path / ".benchmarks").iterdir())


def test_help_section_matches_golden(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    result = pytester.runpytest("--help")
    lines = result.stdout.lines
    start = lines.index("ViT precision benchmarks (pytest-vitperf):")
    end = lines.index("", start)
    assert "\n".join(lines[start:end]) + "\n" == GOLDEN_HELP.read_text(), (
        "help text changed; if intended, regenerate: COLUMNS=100 pytest --help | "
        "awk '/^ViT precision benchmarks/{p=1} p&&/^$/{exit} p' > tests/golden/help.txt"
    )


def test_loading_the_plugin_imports_nothing_heavy() -> None:
    code = (
        "import sys, pytest_vitperf.plugin; "
        "heavy = ('torch', 'timm', 'numpy', 'onnx', 'modelopt', 'tensorrt', 'tensorrt_rtx'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_xdist_workers_report_to_one_summary(suite: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16,fp32", "-n", "2", "--vitperf-share-devices")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines_random(
        [
            "test_vit * fp16 * 1 * torch * reference*",
            "test_vit * bf16 * 1 * torch * no floor*",
            "test_vit * fp32 * 1 * torch * no floor*",
        ]
    )


def test_direct_fixture_use_engine_bench_assert_speedup(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.gpu_bench
        def test_mine(engine, bench, assert_speedup):
            with pytest.raises(ValueError, match="unknown precision 'fp6'"):
                engine("fp6", 1)
            fast = bench(engine("bf16", 2, model="vit_tiny"))
            slow = bench(engine("fp16", 2, model="vit_tiny"))
            assert bench(engine("bf16", 2, model="vit_tiny")) is fast  # once per session
            verdict = assert_speedup(slow, fast, None)
            assert verdict.passed and verdict.speedup == slow.median / fast.median
            assert_speedup(slow, fast, 1e6)

        @pytest.mark.gpu_bench
        def test_skips_unrunnable(engine):
            engine("nvfp4", 1)
        """
    )
    result = pytester.runpytest(*FAST, "-rs")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*bf16 is *x faster than fp16, below the floor 1000000.00x*", "SKIPPED*nvfp4 needs*"])


def test_kernels_option_prints_where_the_time_goes(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32", "--vitperf-kernels")
    result.assert_outcomes(passed=1)
    lines = [x for x in result.stdout.lines if x.startswith("kernels: ")]
    assert len(lines) == 2  # one per measurement: fp32 and its fp16 reference
    assert all(" ms op self time: gemm " in x for x in lines), lines  # GEMMs lead a ViT on the CPU
    (why,) = [x for x in result.stdout.lines if x.startswith("why: ")]
    assert why.startswith("why: test_vit fp32 b1 vs fp16: GEMMs ") and "if nothing else changed" in why
    without = suite.runpytest(*FAST, "--vitperf-precisions=fp32")
    assert not any(x.startswith("kernels: ") for x in without.stdout.lines)
