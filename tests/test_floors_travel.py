"""Floors that travel: a floor set on a backend version holds for every later version until floors of that version
exist, the newest set wins, and every output of a verdict says which version set its floor: the summary, report.md,
the run's JSON and the store."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_vitperf.verdicts.floors import Floor, FloorsFile, release
from tests.conftest import FAST
from tests.test_baselines_workflow import CONFTEST

ROW = {"gpu": "NVIDIA H100 80GB HBM3", "backend": "torch", "model": "vit_base_patch16_224", "batch": 64,
       "precision": "fp8"}  # fmt: skip


def _file(tmp_path: Path, *entries: dict) -> FloorsFile:
    path = tmp_path / "floors.json"
    path.write_text(json.dumps({"schema": 1, "floors": list(entries)}))
    return FloorsFile.load(path)


def _entry(version: str, min_speedup: float, **other: object) -> dict:
    return {**ROW, "version": version, "min_speedup": min_speedup, **other}


def test_a_floor_set_on_an_earlier_version_judges_a_later_one(tmp_path: Path) -> None:
    floors = _file(tmp_path, _entry("2.11.*", 1.12))
    found = floors.find(**ROW, version="2.14.1+cu130")
    assert found is not None and found.min_speedup == 1.12 and found.set_on == "torch 2.11"
    assert floors.find(**ROW, version="2.11.0") == found
    assert floors.find(**ROW, version="2.10.2") is None  # set on a later version: it says nothing of an earlier one
    assert floors.find(**ROW, version="?") is None and floors.find(**ROW, version="") is None
    assert floors.covers(gpu=ROW["gpu"], backend="torch", version="2.14.1")
    assert not floors.covers(gpu="NVIDIA A100-SXM4-80GB", backend="torch", version="2.14.1")
    assert not floors.covers(gpu=ROW["gpu"], backend="tensorrt", version="10.16.0")


def test_the_floor_of_the_newest_version_that_has_one_takes_precedence(tmp_path: Path) -> None:
    floors = _file(tmp_path, _entry("2.11.*", 1.12), _entry("2.13.*", 1.15), _entry("2.16.*", 1.2),
                   {**_entry("*", 1.01), "model": "*"})  # fmt: skip
    on = {v: floors.find(**ROW, version=v) for v in ("2.10.0", "2.11.3", "2.12.0", "2.13.0", "2.14.1", "2.16.0")}
    assert {v: f.set_on if f else None for v, f in on.items()} == {
        "2.10.0": "", "2.11.3": "torch 2.11", "2.12.0": "torch 2.11", "2.13.0": "torch 2.13",
        "2.14.1": "torch 2.13", "2.16.0": "torch 2.16"}  # fmt: skip


def test_the_releases_of_versions_and_globs() -> None:
    assert release("2.11.*") == (2, 11) and release("2.14.1+cu130") == (2, 14, 1)
    assert release("10.16.0.72") == (10, 16, 0, 72) and release("2.6.0a0+ecf3bae") == (2, 6, 0)
    assert release("*") is None and release("?") is None and release("") is None
    assert Floor("*", "tensorrt", "fp8", 1.1, version="10.14.1").set_on == "tensorrt 10.14.1"


_VERSIONS = st.tuples(st.integers(1, 3), st.integers(0, 20))


@settings(max_examples=200, deadline=None)
@given(set_on=st.lists(_VERSIONS, min_size=1, max_size=6, unique=True), run=_VERSIONS, patch=st.integers(0, 9))
def test_the_floor_that_judges_is_set_on_the_newest_version_not_after_the_run(
    tmp_path_factory: pytest.TempPathFactory, set_on: list[tuple[int, int]], run: tuple[int, int], patch: int
) -> None:
    floors = _file(tmp_path_factory.mktemp("f"), *(_entry(f"{a}.{b}.*", 1 + (a * 100 + b) / 1e4) for a, b in set_on))
    found = floors.find(**ROW, version=f"{run[0]}.{run[1]}.{patch}")
    earlier = [v for v in set_on if v <= run]
    assert (found is None) == (not earlier)
    if found is not None:
        assert found.set_on == "torch {}.{}".format(*max(earlier))


def _earlier(version: str) -> str:
    """A minor version three before the one running: 2.11.* where torch 2.14.1 runs."""
    major, minor = release(version)[:2]  # type: ignore[index]
    return f"{major}.{max(0, minor - 3)}.*"


def test_a_run_on_a_later_version_applies_the_earlier_floors_and_every_output_names_them(
    suite: pytest.Pytester,
) -> None:
    """A run on today's torch against a file that holds only an earlier torch's floors: each floor applies, and its
    verdict names the version that set it in the summary, report.md, the run's JSON and the store."""
    import torch

    suite.makeconftest(CONFTEST)  # every engine's cost a sleep: the flow is tested here, not the host's free CPU
    earlier = _earlier(torch.__version__)
    on = f"torch {earlier.removesuffix('.*')}"
    entry = {"gpu": "*", "backend": "torch", "version": earlier, "precision": "fp32", "min_speedup": 0.01}
    floors = suite.path / "floors.json"
    floors.write_text(json.dumps({"schema": 1, "floors": [entry]}))
    run, store, report = suite.path / "run.json", suite.path / "store.db", suite.path / "report"
    outputs = (f"--benchmark-json={run}", f"--vitperf-store={store}", f"--vitperf-report={report}")
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32,fp16", f"--vitperf-floors={floors}", *outputs)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"test_vit * fp32 * pass (floor 0.01x, set on {on})*"])
    assert f"pass (floor 0.01x, set on {on})" in (report / "report.md").read_text()
    rows = json.loads(run.read_text())["machine_info"]["vitperf"]["results"]["rows"]
    assert {r["precision"]: r["set_on"] for r in rows} == {"fp16": "", "fp32": on}
    with sqlite3.connect(store) as db:
        stored = dict(db.execute("SELECT precision, floor_set_on FROM rows"))
    assert stored == {"fp16": None, "fp32": on}

    # Floors of a later version than the earlier one, still not after the run's: they take precedence.
    later = _earlier(torch.__version__).replace(".*", "")
    major, minor = release(later)  # type: ignore[misc]
    newer = f"{major}.{minor + 1}.*"
    floors.write_text(json.dumps({"schema": 1, "floors": [entry, {**entry, "version": newer, "min_speedup": 0.02}]}))
    again = suite.runpytest(*FAST, "--vitperf-precisions=fp32,fp16", f"--vitperf-floors={floors}")
    again.stdout.fnmatch_lines([f"test_vit * fp32 * pass (floor 0.02x, set on torch {newer.removesuffix('.*')})*"])


def test_floors_make_runs_fresh_processes_and_the_next_run_applies_their_floors(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """`vitperf floors make`: three fresh runs, each in an empty cache folder of its own, into the floors file the
    suite reads (floors.json beside it); the next plain run judges with them and passes."""
    from pytest_vitperf.cli import main

    suite.makeconftest(CONFTEST)
    selection = ["test_vit_latency.py", *FAST, "--vitperf-precisions=fp32,fp16", "--vitperf-rounds=4"]
    work = suite.path / "work"
    assert main(["floors", "make", "--runs", "3", "--false-alarm", "1%", "--work-dir", str(work), "--quiet", "--",
                 *selection]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.count("== run ") == 3 and "--vitperf-first-look=0" in out
    assert sorted(p.name for p in work.iterdir()) == ["cache1", "cache2", "cache3", "run1.json", "run2.json",
                                                      "run3.json"]  # fmt: skip
    assert "wrote 1 floor(s) to floors.json" in out
    assert "the next run reads them from floors.json: pytest --gpu-bench test_vit_latency.py" in out
    (entry,) = json.loads((suite.path / "floors.json").read_text())["floors"]
    assert entry["precision"] == "fp32" and len(entry["provenance"]["intervals"]) == 3
    assert entry["min_speedup"] <= min(low for low, _ in entry["provenance"]["intervals"])
    assert entry["provenance"]["command"].startswith("vitperf floors make --runs 3 --false-alarm 0.01 -- ")
    result = suite.runpytest(*selection)
    result.assert_outcomes(passed=2)
    # The floor is one an unchanged run misses (inconclusive or FAIL) 1% of the time.
    floor = re.escape(f"{entry['min_speedup']:.2f}x")
    result.stdout.re_match_lines([rf"test_vit .* fp32 .* pass \(floor {floor}, set on torch .*\).*"])


def test_floors_make_refuses_too_few_runs_and_a_broken_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_vitperf.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["floors", "make", "--runs", "2"]) == 2
    assert "needs 3 runs or more: vitperf floors make --runs 3 -- suites/test_vit_latency.py" in capsys.readouterr().err
    broken = tmp_path / "floors.json"
    broken.write_text('{"schema": 1, "floors": [')
    assert main(["floors", "make", "--out", str(broken)]) == 2
    assert "floors.json: is not valid JSON" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["floors", "make", "--false-alarm", "60%"])
    assert "is not a rate between 0 and 50%" in capsys.readouterr().err
    # A run that stops before its tests writes no results; a work folder not yet there is made (on an H100 the
    # first run could not open its JSON in one).
    broken.unlink()
    work = tmp_path / "not" / "yet"
    assert main(["floors", "make", "--work-dir", str(work), "--quiet", "--", "--gpu-bench", "-p", "no:cacheprovider",
                 "--vitperf-precisions=fp9"]) == 1  # fmt: skip
    assert work.is_dir() and not (work / "run1.json").exists()
    assert "run 1 exited 4 and wrote no results; fix it, then run again: vitperf floors make" in (
        capsys.readouterr().err)


A100 = """
import pytest
from pytest_vitperf.fixtures import get_session
from pytest_vitperf.measure.env import Device

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # The header's floors line names this GPU: no test here touches it.
    get_session(config).__dict__["device"] = Device("NVIDIA A100-SXM4-80GB", sm=80)
"""


def test_a_gpu_without_floors_is_told_the_command_that_makes_them(suite: pytest.Pytester) -> None:
    suite.makeconftest(A100)
    result = suite.runpytest("--gpu-bench", "--collect-only", "--vitperf-models=vit_tiny_patch16_224", "-p",
                             "no:cacheprovider")  # fmt: skip
    result.stdout.fnmatch_lines(["vitperf: backend: auto took torch, the first backend here that this project has "
                                 "timed engines with on a GPU*",
                                 "vitperf: no speedup floors for NVIDIA A100-SXM4-80GB with torch * in "
                                 "*floors.json, so no row can fail one; make them on this GPU in 3 fresh runs: "
                                 "vitperf floors make --out *floors.json -- * --vitperf-models=vit_tiny_patch16_224"])
    floors = suite.path / "floors.json"
    floors.write_text(json.dumps({"schema": 1, "floors": [{"gpu": "NVIDIA A100*", "backend": "torch",
                                                           "version": "1.0.*", "precision": "fp8",
                                                           "min_speedup": 1.1}]}))  # fmt: skip
    covered = suite.runpytest("--gpu-bench", "--collect-only", "-p", "no:cacheprovider")
    assert "no speedup floors" not in covered.stdout.str()


@pytest.mark.parametrize(("spread", "half"), [(0.003, 0.005), (0.01, 0.003), (0.001, 0.01)])
def test_an_unchanged_run_passes_a_made_floor_at_the_rate_asked_and_all_but_never_fails_it(
    spread: float, half: float
) -> None:
    """Simulated: 3 fresh processes (log estimates spread by `spread`, each with a 95% interval of half-width `half`
    over 8 rounds) make a floor at a 5% false-alarm rate, judged as a next run with 2 floors judges it; a next
    unchanged run then passes about 95% of the time, and fails at most 5%. The rule without the half-width passed
    62%, 91% and 0% of such runs (4000 each)."""
    import numpy as np
    from scipy.stats import t

    from pytest_vitperf.measure.rounds import MAX_LOOKS
    from pytest_vitperf.verdicts.floor_rules import at_false_alarm
    from pytest_vitperf.verdicts.stats import Interval, family_wise

    rng = np.random.default_rng(0)
    judged = family_wise(0.95, 2 * MAX_LOOKS)
    judged_half = half * float(t.ppf(1 - (1 - judged) / 2, 7) / t.ppf(0.975, 7))

    def interval(log_estimate: float) -> Interval:
        e = math.exp(log_estimate)
        return Interval(e, e * math.exp(-half), e * math.exp(half), 0.95, 8, half, 0.5, df=7)

    passed = failed = 0
    trials = 2000
    for _ in range(trials):
        made = at_false_alarm([interval(x) for x in rng.normal(0.26, spread, 3)], 0.05, judged)
        assert made.floor is not None
        x = rng.normal(0.26, spread)  # the next, unchanged run
        passed += x - judged_half >= math.log(made.floor)
        failed += x + judged_half < math.log(made.floor)
    assert passed / trials >= 0.93 and failed / trials <= 0.05
