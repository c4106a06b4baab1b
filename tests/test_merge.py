"""Shards of one run (`--vitperf-shard K/N`, one a host) joined by `vitperf merge` into one report and one gate, end
to end on the CPU: real families measured in two shards, each judging its floors at the whole run's confidence, and
the files a merge must refuse."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import pytest

from pytest_vitperf.cli import main
from tests.conftest import AGAIN, FAST
from tests.test_baselines_workflow import CONFTEST
from tests.test_family import floors

ARGS = ("--vitperf-precisions=bf16,bf16-again", "--vitperf-batch-sizes=1,2", "--vitperf-inject-delay=bf16-again=30%")


def _judged_at(lines: list[str]) -> set[str]:
    return {m[1] for line in lines for m in re.finditer(r"\] at ([\d.]+%)\)", line)}


def test_two_shards_merge_into_the_report_of_one_run(
    aa: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two families, one a shard: each shard judges its floor at the confidence of the whole run's two floors (as
    one run does), and the merge prints both families' rows, GPU by GPU, and fails on their floors."""
    aa.makeconftest(AGAIN + CONFTEST)  # the engines' cost a sleep: a busy machine stretches the model's own time
    floors(aa.path / "floors.json", "bf16-again", 0.95)
    whole = aa.runpytest(*FAST, *ARGS)
    whole.assert_outcomes(passed=2, failed=2)
    paths = []
    for k in (1, 2):
        paths.append(aa.path / f"shard-{k}.json")
        shard = aa.runpytest(*FAST, *ARGS, f"--vitperf-shard={k}/2", f"--benchmark-json={paths[-1]}")
        shard.assert_outcomes(passed=1, failed=1, deselected=2)
        assert _judged_at(shard.outlines) == _judged_at(whole.outlines) != set()
    capsys.readouterr()
    assert main(["merge", *map(str, paths)]) == 1
    out = capsys.readouterr().out
    table, memory = out.split("vitperf memory")  # the summary's rows, then each engine's weights
    assert sum(line.startswith("test_vit ") for line in table.splitlines()) == 6 and "device: CPU" in out
    assert sum(line.startswith("test_vit ") for line in memory.splitlines()) == 6
    assert "vitperf GEMMs" not in out
    assert re.search(r"test_vit +bf16-again +2 .* FAIL \(floor 0.95x\)", out), out
    assert "shard 1/2 on " in out and "shard 2/2 on " in out
    assert out.rstrip().endswith("no regression") and "6 measurement(s), 4 speedup(s): 2 below their floor" in out


def test_a_merge_refuses_what_is_not_one_runs_shards(aa: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    one = aa.path / "one.json"
    aa.runpytest(*FAST, "--vitperf-precisions=bf16", "--vitperf-shard=1/2", f"--benchmark-json={one}")
    other = aa.path / "other.json"
    aa.runpytest(*FAST, "--vitperf-precisions=bf16", "--vitperf-confidence=0.9", f"--benchmark-json={other}")
    foreign = aa.path / "foreign.json"
    foreign.write_text(json.dumps({"machine_info": {}, "benchmarks": []}))
    cases = [
        ([one, one], "measured test_vit-fp16-b1, as * did: shards of one run never overlap*--vitperf-shard K/N)"),
        ([one, other], "was run with other confidence, shards than *one.json: shards of one run take the same*"),
        ([one, foreign], "holds no vitperf results*--vitperf-shard K/N --benchmark-json shard-K.json"),
        ([one, aa.path / "gone.json"], "*gone.json: cannot be read (No such file or directory)"),
        ([one], "*one.json: are shard(s) 1 of 2 (0: *), missing [[]2]: a gate over part of a run passes what it*"),
    ]
    for files, message in cases:
        capsys.readouterr()
        assert main(["merge", *map(str, files)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("vitperf merge: results ") and len(err.splitlines()) == 1, err
        assert fnmatch.fnmatch(err, "*" + message), err


def test_a_shard_leaves_its_results_in_its_benchmark_json(aa: pytest.Pytester) -> None:
    out: Path = aa.path / "bench.json"
    aa.runpytest(*FAST, "--vitperf-precisions=bf16", "--vitperf-shard=1/1", f"--benchmark-json={out}")
    results = json.loads(out.read_text())["machine_info"]["vitperf"]["results"]
    assert results["settings"]["shards"] == 1 and len(results["measurements"]) == 2  # bf16 and its fp16 reference
    assert results["worker"]["worker"].startswith("shard 1/1 on ")
