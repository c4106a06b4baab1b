"""History across runs and the steps in it: the store, PELT on series like this project's, the CLI and the option."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_vitperf.cli import main
from pytest_vitperf.measure.measurement import Measurement, Spec
from pytest_vitperf.store.history import HistoryFileError, append, find_steps, series, steps
from tests.conftest import FAST

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=timezone.utc)


def two_steps(seed: int, n: int = 60) -> list[float]:
    """+3% at run 20, -5% at run 40, CoV 1%: the issue's series."""
    level = np.ones(n)
    level[20:40], level[40:] = 1.03, 1.03 * 0.95
    return list(5.0 * level * (1 + 0.01 * np.random.default_rng(seed).standard_normal(n)))


@pytest.mark.parametrize("seed", range(20))
def test_both_injected_steps_are_found_and_no_false_one(seed: int) -> None:
    cuts = find_steps(two_steps(seed))
    assert len(cuts) == 2 and abs(cuts[0] - 20) <= 2 and abs(cuts[1] - 40) <= 2, cuts


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.01, 100.0))
def test_a_step_is_a_ratio_whatever_the_latency(seed: int, scale: float) -> None:
    values = two_steps(seed)
    assert find_steps([v * scale for v in values]) == find_steps(values)


def test_a_series_too_short_or_without_noise_has_no_false_step() -> None:
    assert find_steps([5.0] * 5) == []
    assert find_steps([5.0] * 30) == []
    assert find_steps([5.0] * 15 + [5.5] * 15) == [15]


def measured(precision: str, ms: float, version: str = "2.11.0", batch: int = 64) -> Measurement:
    spec = Spec("vit_base_patch16_224", precision, batch, "torch", version, "NVIDIA H100 80GB HBM3", 90, "cuda-event")
    return Measurement(spec, (ms * 0.99, ms, ms * 1.01))


def test_runs_append_to_one_file_per_version_and_read_back_in_time_order(tmp_path: Path) -> None:
    for day, (version, fp16) in enumerate([("2.11.0", 6.5), ("2.11.0", 6.6), ("2.12.0", 6.1)]):
        append(tmp_path, [measured("fp16", fp16, version), measured("fp8", 5.2, version)], T0 + timedelta(days=day))
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.json"))
    assert files == [f"torch/{v}/nvidia-h100-80gb-hbm3/vit_base_patch16_224.json" for v in ("2.11.0", "2.12.0")]
    assert len(json.loads((tmp_path / files[0]).read_text())["runs"]) == 2
    fp16 = series(tmp_path)[("torch", "NVIDIA H100 80GB HBM3", "vit_base_patch16_224", "fp16/b64")]
    assert [(p.backend_version, p.median) for p in fp16] == [("2.11.0", 6.5), ("2.11.0", 6.6), ("2.12.0", 6.1)]


def test_a_damaged_history_file_is_named_and_never_overwritten(tmp_path: Path) -> None:
    (path,) = append(tmp_path, [measured("fp16", 6.5)], T0)
    path.write_text(path.read_text()[:40])  # truncated
    with pytest.raises(HistoryFileError, match=rf"history file {path}: is not valid JSON"):
        append(tmp_path, [measured("fp16", 6.4)], T0)
    assert len(path.read_text()) == 40


def nightly(root: Path, values: list[float]) -> None:
    for i, v in enumerate(values):
        append(root, [measured("fp16", v, "10.16" if i < 40 else "11.4")], T0 + timedelta(days=i))


def test_cli_reports_each_step_with_its_run_and_version_and_plots_it(tmp_path: Path, capsys) -> None:
    nightly(tmp_path / "h", two_steps(0))
    found = steps(series(tmp_path / "h")[("torch", "NVIDIA H100 80GB HBM3", "vit_base_patch16_224", "fp16/b64")])
    assert [round(s.change, 2) for s in found] == [0.03, -0.05]
    assert main(["history", str(tmp_path / "h"), "--plots", str(tmp_path / "png"), "--fail-on-slowdown"]) == 1
    out = capsys.readouterr().out
    assert "run 41 (2026-12-11T02:00:00+00:00, torch 11.4)" in out  # the upgrade's step, named
    assert all(f"{s.change:+.1%}" in out for s in found)
    (png,) = (tmp_path / "png").glob("*.png")
    assert png.name == "history-torch-nvidia-h100-80gb-hbm3-vit-base-patch16-224-fp16-b64.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_without_history_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--vitperf-history"):
        main(["history", str(tmp_path)])


def test_the_option_appends_each_run_and_a_failed_write_fails_the_run(suite: pytest.Pytester) -> None:
    for _ in range(2):
        r = suite.runpytest(*FAST, "--vitperf-precisions=fp32", "--vitperf-history=hist")
        r.assert_outcomes(passed=1)
        r.stdout.fnmatch_lines(["appended this run to 1 file(s); find steps with: vitperf history */hist"])
    (f,) = (suite.path / "hist").rglob("*.json")
    assert len(json.loads(f.read_text())["runs"]) == 2
    (suite.path / "bad").write_text("a file where the history folder must go\n")
    r = suite.runpytest(*FAST, "--vitperf-precisions=fp32", "--vitperf-history=bad")
    assert r.ret == pytest.ExitCode.USAGE_ERROR  # seen as the plugin configures: nothing is measured in vain
    r.stderr.fnmatch_lines(["ERROR: --vitperf-history */bad: */bad is not a folder; give a folder that can be written"])
    (suite.path / "late").mkdir()
    (suite.path / "late" / "torch").write_text("a file where the backend's folder must go\n")  # found only on writing
    r = suite.runpytest(*FAST, "--vitperf-precisions=fp32", "--vitperf-history=late")
    r.assert_outcomes(passed=1)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["NOT WRITTEN: *; the run fails: fix that, then run again"])
