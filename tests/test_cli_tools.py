"""The `vitperf` commands that round 3 added, on the CPU: `floors suggest` from real runs of the latency suite to a
floors file that the next run judges with, `selfcheck`, `export`; and the floors file's `judged_in` and
`provenance` fields."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_vitperf.cli import main
from pytest_vitperf.cli.floors import _merge
from pytest_vitperf.verdicts.floor_rules import suggest
from pytest_vitperf.verdicts.floors import FloorsFile, FloorsFileError
from pytest_vitperf.verdicts.stats import Interval
from tests.conftest import FAST, with_ready_engines
from tests.test_baselines_workflow import CONFTEST

H100_FP8_B64 = [(1.1452, 1.1625), (1.194, 1.2103), (1.1979, 1.2137)]  # docs/measurements, 2026-11-25


def _intervals(pairs: list[tuple[float, float]]) -> list[Interval]:
    return [Interval((lo * hi) ** 0.5, lo, hi, 0.95, 20, 0.01, 0.0) for lo, hi in pairs]


def test_a_floor_lies_between_the_runs_and_a_slower_candidate() -> None:
    """The H100's FP8 batch-64 runs: a 5% slowdown hides in the spread between the boards, a 10% one does not; the
    10% floor is the geometric midpoint of the lowest lower bound and the highest upper bound / 1.10."""
    five = suggest(_intervals(H100_FP8_B64), 0.05)
    assert five.floor is None and "cannot tell them apart" in five.why and "--regression 0.1" in five.why
    ten = suggest(_intervals(H100_FP8_B64), 0.10)
    assert ten.floor == pytest.approx((1.1452 * 1.2137 / 1.10) ** 0.5) and round(ten.floor, 3) == 1.124
    assert ten.floor < ten.lowest and ten.floor > ten.highest / 1.10


def test_floors_suggest_turns_runs_into_floors_the_next_run_judges_with(suite: pytest.Pytester) -> None:
    suite.makeconftest(CONFTEST)  # every engine's cost a sleep: the flow is tested here, not the host's free CPU
    runs = [suite.path / f"run{k}.json" for k in (1, 2)]
    for run in runs:
        # 6 rounds: with 3, Student's t has 2 degrees of freedom.
        args = ("--vitperf-precisions=fp32,fp16,bf16", "--vitperf-rounds=6", f"--benchmark-json={run}")
        suite.runpytest(*FAST, *args).assert_outcomes(passed=3)
    out = suite.path / "floors.json"
    # A candidate 4 times slower: the point here is the flow.
    args = ["floors", "suggest", *map(str, runs), "--regression", "3", "--unit", "time", "--out", str(out)]
    assert main(args) == 0
    entries = {e["precision"]: e for e in json.loads(out.read_text())["floors"]}
    assert set(entries) == {"fp32", "bf16"}  # every precision but the reference
    bf16 = entries["bf16"]
    assert bf16["judged_in"] == "time" and bf16["backend"] == "torch" and bf16["batch"] == 1
    assert len(bf16["provenance"]["runs"]) == 2 and len(bf16["provenance"]["intervals"]) == 2
    assert all(lo >= bf16["min_speedup"] for lo, _ in bf16["provenance"]["intervals"])
    assert bf16["provenance"]["command"].startswith("vitperf floors suggest --regression 3 --unit time")
    FloorsFile.load(out)
    # Only the precisions asked for; the others keep their entries.
    assert main([*args[:2], *map(str, runs), "--regression", "3", "--precisions", "fp32", "--out", str(out)]) == 0
    entries = {e["precision"]: e for e in json.loads(out.read_text())["floors"]}
    assert "--precisions fp32 " in entries["fp32"]["provenance"]["command"]
    assert entries["bf16"]["provenance"] == bf16["provenance"]
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32,fp16,bf16", f"--vitperf-floors={out}")
    result.stdout.fnmatch_lines(["test_vit * bf16 * *x [[]*, *] * pass (floor *x, set on torch *)*"])


def test_merging_floors_keeps_the_other_entries_as_they_were_written(tmp_path: Path) -> None:
    """suites/floors.json keeps seed entries on three lines by hand; a merge replaces only its own entries' text."""
    seed = ('{"gpu": "NVIDIA RTX PRO 6000 Blackwell*", "backend": "tensorrt", "version": "10.14.*",\n'
            '     "model": "vit_base_patch16_224", "batch": 64, "precision": "nvfp4", "min_speedup": 1.55,\n'
            '     "source": "seed 001"}')  # fmt: skip
    old = {"gpu": "NVIDIA H200", "backend": "torch", "version": "2.11.*", "model": "vit_base_patch16_224",
           "batch": 64, "precision": "fp8", "min_speedup": 1.111, "judged_in": "time", "source": "3 runs"}  # fmt: skip
    path = tmp_path / "floors.json"
    path.write_text('{\n  "schema": 1,\n  "floors": [\n    ' + seed + ",\n    " + json.dumps(old) + "\n  ]\n}\n")
    new = [{**old, "min_speedup": 1.2}, {**old, "precision": "fp8-fused", "min_speedup": 1.246}]
    _merge(path, new)
    text = path.read_text()
    assert text.startswith('{\n  "schema": 1,\n  "floors": [\n    ' + seed + ",\n    {\n")
    assert text.endswith("\n  ]\n}\n")
    assert json.loads(text)["floors"][1:] == new and '"min_speedup": 1.111' not in text
    FloorsFile.load(path)
    _merge(path, [])  # nothing to add: the file is as it was
    assert path.read_text() == text
    # A key given twice: JSON readers keep the last, and so does the merge.
    path.write_text('{"schema": 1, "floors": [' + seed + '], "floors": [' + json.dumps(old) + "]}")
    _merge(path, new[1:])
    assert json.loads(path.read_text())["floors"] == [old, new[1]]


_ENTRY = {"gpu": "NVIDIA H200", "backend": "torch", "version": "2.11.*", "model": "vit_base_patch16_224", "batch": 64,
          "precision": "fp8", "min_speedup": 1.1, "judged_in": "time", "source": "3 runs"}  # fmt: skip
_ENTRIES = st.lists(st.tuples(st.sampled_from(["fp8", "fp8-fused", "int8", "bf16"]), st.sampled_from([1, 64]),
                              st.floats(1.0, 2.0)), max_size=5)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(old=_ENTRIES, new=_ENTRIES, indent=st.sampled_from([None, 1, 2, 4]))
def test_a_merge_keeps_the_entries_it_does_not_replace_in_order(
    tmp_path_factory: pytest.TempPathFactory, old: list, new: list, indent: int | None
) -> None:
    def entries(specs: list) -> list[dict]:
        unique = {(p, b): {**_ENTRY, "precision": p, "batch": b, "min_speedup": round(f, 3)} for p, b, f in specs}
        return list(unique.values())

    before, added = entries(old), entries(new)
    path = tmp_path_factory.mktemp("floors") / "floors.json"
    path.write_text(json.dumps({"schema": 1, "floors": before}, indent=indent))
    _merge(path, added)
    replaced = {(e["precision"], e["batch"]) for e in added}
    kept = [e for e in before if (e["precision"], e["batch"]) not in replaced]
    assert json.loads(path.read_text())["floors"] == kept + added
    FloorsFile.load(path)


def test_floors_suggest_wants_intervals_and_never_overwrites_a_broken_file(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    run = suite.path / "blocks.json"
    suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16", "--vitperf-rounds=0", f"--benchmark-json={run}")
    assert main(["floors", "suggest", str(run)]) == 1
    assert "no speedup with an interval in these runs" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["floors", "suggest", str(run), "--precisions", "fp8,fp9"])
    assert "'fp9'" in capsys.readouterr().err

    measured = suite.path / "rounds.json"
    suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16", f"--benchmark-json={measured}")
    broken = suite.path / "broken.json"
    broken.write_text('{"schema": 1, "floors": [')
    assert main(["floors", "suggest", str(measured), "--regression", "0.9", "--out", str(broken)]) == 2
    assert "broken.json" in capsys.readouterr().err and broken.read_text() == '{"schema": 1, "floors": ['


def test_floors_suggest_says_which_families_ended_at_their_early_look(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Families that ended at the early look have wider intervals than all their rounds would give, and a floor
    between them catches only a larger change: the suggestion says so, and how to measure all the rounds."""
    suite.makeconftest(CONFTEST)
    entry = {"gpu": "*", "backend": "torch", "precision": "fp32", "min_speedup": 0.01, "judged_in": "time"}
    floors = suite.path / "floors.json"
    floors.write_text(json.dumps({"schema": 1, "floors": [entry]}))
    for first_look, said in ((3, True), (0, False)):
        run = suite.path / f"look{first_look}.json"
        args = ("--vitperf-precisions=fp32,fp16", "--vitperf-rounds=6", f"--vitperf-first-look={first_look}",
                f"--vitperf-floors={floors}", f"--benchmark-json={run}")  # fmt: skip
        suite.runpytest(*FAST, *args).assert_outcomes(passed=2)
        assert main(["floors", "suggest", str(run), "--regression", "3"]) == 0
        err = capsys.readouterr().err
        assert ("test_vit b1 in look3.json ended at the early look" in err) == said, err
        assert ("--vitperf-first-look 0" in err) == said


def test_floors_suggest_says_which_rows_ran_one_compile_in_every_run(
    suite: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs that all ran the same compiled engines (a shared cache) hold no compile draw in their spread; the
    suggestion says so, and how to give each run its own. Runs whose engines differ, or that ran none, say nothing."""
    run = suite.path / "run.json"
    suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16", f"--benchmark-json={run}").assert_outcomes(passed=2)

    def with_engines(name: str, hashes: dict[str, str]) -> str:
        return str(with_ready_engines(run, suite.path / name, hashes))

    shared = [with_engines(f"r{i}.json", {"fp16": "aa01", "bf16": "bb01"}) for i in (1, 2)]
    other = with_engines("r3.json", {"fp16": "aa01", "bf16": "bb02"})  # another compile of bf16
    for runs, said in ((shared, True), ([shared[0], other], False), ([str(run), str(run)], False)):
        assert main(["floors", "suggest", *runs, "--regression", "3"]) == 0
        err = capsys.readouterr().err
        assert ("test_vit bf16 b1 ran the same compiled engines in every run" in err) == said, err
        assert ("--vitperf-cache-dir c1" in err) == said


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"judged_in": "watts"}, "judged_in must be 'time' or 'cycles'"),
        ({"provenance": ["a run"]}, "provenance must be an object"),
    ],
)
def test_a_floor_entry_says_its_unit_and_provenance_or_is_refused(tmp_path: Path, extra: dict, message: str) -> None:
    entry = {"gpu": "*", "backend": "torch", "precision": "fp8", "min_speedup": 1.1}
    path = tmp_path / "floors.json"
    good = {**entry, "judged_in": "cycles", "provenance": {"command": "vitperf floors suggest a.json"}}
    path.write_text(json.dumps({"schema": 1, "floors": [good]}))
    (floor,) = FloorsFile.load(path).floors
    assert floor.judged_in == "cycles" and floor.provenance == {"command": "vitperf floors suggest a.json"}
    path.write_text(json.dumps({"schema": 1, "floors": [{**entry, **extra}]}))
    with pytest.raises(FloorsFileError, match=message):
        FloorsFile.load(path)


def test_selfcheck_compares_the_plugins_timer_with_a_plain_loop(capsys: pytest.CaptureFixture[str]) -> None:
    """On the CPU both time the host clock around the same engine: with a loose tolerance they agree (a loaded
    2-core CI host once timed one round of the plain loop 35% faster, and 4 rounds reached 1.59x); with fewer than 3
    rounds there is no interval, and the command says how to get one."""
    assert main(["selfcheck", "--rounds", "6", "--slice-ms", "30", "--tolerance", "0.9"]) == 0
    out = capsys.readouterr().out
    assert "vitperf selfcheck: vit_tiny_patch16_224 fp32 batch 1" in out and "6 rounds ABBA" in out
    assert "plugin / plain loop: " in out and "the timers agree within 90.0%" in out
    assert main(["selfcheck", "--rounds", "2", "--slice-ms", "10"]) == 2
    assert "run with --rounds 6 or more" in capsys.readouterr().out


@pytest.mark.parametrize("backend", ["tensorrt", "trtexec"])
def test_a_backend_selfcheck_says_what_it_would_do_where_it_cannot_run(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["selfcheck", "--backend", backend]) == 2
    out = capsys.readouterr().out
    assert f"vitperf selfcheck --backend {backend}: builds each precision's engine" in out
    assert re.search(rf"\$ pytest --gpu-bench suites/test_vit_latency.py --vitperf-backend={backend} "
                     r"--vitperf-models=vit_base_patch16_224 --vitperf-batch-sizes=8 "
                     r"--vitperf-precisions=fp32,fp16,bf16,fp8,int8 --vitperf-rounds=3 --vitperf-floors=\S+", out)
    assert re.search(rf"it cannot run here: {backend} is not (installed|on PATH)", out)


def test_export_writes_a_recipes_onnx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "exports"
    assert main(["export", "--model", "vit_tiny_patch16_224", "--precision", "fp16", "--out", str(out)]) == 0
    (onnx_file,) = out.glob("*.onnx")
    assert onnx_file.name == "vit_tiny_patch16_224-fp16-b1.onnx" and onnx_file.stat().st_size > 1_000_000
    assert "vit_tiny_patch16_224-fp16-b1.onnx" in capsys.readouterr().out
