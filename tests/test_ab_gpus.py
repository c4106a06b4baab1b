"""`vitperf ab --gpus`: a suite's units dealt over GPUs alike for both sides (workers.deal), a process of each side
running only its GPU's units (--vitperf-units), and every GPU's rows judged together in one table and JSON. On the
CPU the GPUs are only names (CUDA_VISIBLE_DEVICES): the dealing, the processes and the merged verdicts are real."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_vitperf.cli import main
from pytest_vitperf.verdicts.ab import EXIT_SLOWER, SLOWER
from pytest_vitperf.workers import deal, modelled_s, scope_of
from tests.test_baselines_workflow import CONFTEST, TEST

MODELS = st.sampled_from(["vit_tiny_patch16_224", "vit_small_patch16_224", "vit_base_patch16_224"])


@given(st.lists(st.tuples(MODELS, st.sampled_from([1, 8, 64]), st.sampled_from(["fp16", "fp8", "int8"]))),
       st.lists(st.sampled_from(["s/t_gemm.py::test_g", "s/t_acc.py::test_a"])), st.integers(1, 4))  # fmt: skip
def test_every_unit_goes_to_one_gpu_and_no_gpu_waits_long(
    family: list[tuple[str, int, str]], others: list[str], gpus: int
) -> None:
    nodeids = [f"s/t_lat.py::test[{m}-b{b}-{p}]" for m, b, p in family] + [f"{o}[{i}]" for i, o in enumerate(others)]
    assert all(scope_of(n) == f"{m}-b{b}" for n, (m, b, _) in zip(nodeids, family, strict=False))  # families
    shares = deal(nodeids, gpus)
    units = [u for share in shares for u in share]
    assert len(shares) == gpus and sorted(units) == sorted({scope_of(n) for n in nodeids})
    assert deal(list(reversed(nodeids)), gpus) == shares  # the same deal, whatever order a side collects in
    cost = {u: sum(modelled_s(u) for n in nodeids if scope_of(n) == u) for u in units}
    loads = sorted(sum(cost[u] for u in share) for share in shares)
    assert loads[-1] - loads[0] <= max(cost.values(), default=0) + 1e-9  # greedy, longest first: within one unit


FAMILY = """
import pytest

@pytest.mark.gpu_bench
def test_where(vitperf_model, vitperf_batch, vitperf_precision):
    pass
"""


def test_vitperf_units_runs_only_the_units_named(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_where=FAMILY, test_other="def test_other():\n    pass\n")
    units = pytester.path / "units.txt"
    units.write_text("vit_tiny_patch16_224-b2\ntest_other.py\n")
    args = ("--gpu-bench", "-p", "no:cacheprovider", "--vitperf-models=vit_tiny", "--vitperf-batch-sizes=1,2",
            "--vitperf-precisions=fp16,fp32")  # fmt: skip
    result = pytester.runpytest(*args, f"--vitperf-units={units}", "-v")
    result.assert_outcomes(passed=3, deselected=2)
    result.stdout.fnmatch_lines(["*test_where?vit_tiny_patch16_224-b2-fp16? PASSED*"])
    missing = pytester.runpytest(*args, f"--vitperf-units={pytester.path / 'none.txt'}")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--vitperf-units */none.txt: is not a file; give the units to run, one a line"])


def test_a_process_that_waits_for_its_turn_reads_its_units_file_when_the_turn_comes(pytester: pytest.Pytester) -> None:
    """vitperf ab starts a block's processes before the look that writes their --vitperf-units file: with
    --vitperf-wait-for, a file not there yet is no usage error until the turn comes; then it is read, or refused in
    one line where it is still missing."""
    import threading

    pytester.makepyfile(test_where=FAMILY, test_other="def test_other():\n    pass\n")
    units, turn = pytester.path / "units.txt", pytester.path / "turn"

    def look() -> None:  # the look writes the units, then gives the turn
        units.write_text("vit_tiny_patch16_224-b2\n")
        turn.touch()

    timer = threading.Timer(2.0, look)
    timer.start()
    args = ("--gpu-bench", "-p", "no:cacheprovider", "--vitperf-models=vit_tiny", "--vitperf-batch-sizes=1,2",
            "--vitperf-precisions=fp16,fp32", f"--vitperf-units={units}", f"--vitperf-wait-for={turn}")  # fmt: skip
    result = pytester.runpytest(*args)
    timer.join()
    result.assert_outcomes(passed=2, deselected=3)
    units.unlink()
    missing = pytester.runpytest(*args)
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stdout.fnmatch_lines(["*vitperf: --vitperf-units */units.txt: is not a file; give the units to run, one a "
                                  "line*"])  # fmt: skip


@pytest.mark.slow(87)  # 16 processes; the split and the units files are tested apart above and below
def test_vitperf_ab_splits_the_units_over_gpus_and_judges_them_together(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two modules, two GPUs: each GPU's process pair runs its own module's rows; the candidate, five times slower
    (a sleep, CONFTEST), is SLOWER on both, judged in one pass, each row naming its GPU."""
    pytester.makepyfile(test_one=TEST, test_two=TEST.replace('engine("fp32", 1,', 'engine("fp32", 2,'))
    pytester.makeconftest(CONFTEST)
    monkeypatch.chdir(pytester.path)
    work, out = pytester.path / "ab", pytester.path / "ab.json"
    suite = ["test_one.py", "test_two.py", "--vitperf-warmup-ms=50", "--vitperf-duration-ms=0",
             "--vitperf-min-iterations=15", "--vitperf-compile", "off"]  # fmt: skip
    code = main(["ab", "--a", sys.executable, "--b", f"env SLOWDOWN=5 {sys.executable}", "--rounds", "3", "--gpus",
                 "0,1", "--threshold", "100%", "--work-dir", str(work), "--json", str(out), "--", *suite])  # fmt: skip
    captured = capsys.readouterr()
    assert code == EXIT_SLOWER, captured.err
    assert [(work / f"units-gpu{g}.txt").read_text() for g in "01"] == ["test_one.py\n", "test_two.py\n"]
    data = json.loads(out.read_text())
    assert data["device"] == "GPUs 0, 1" and data["rounds"] == 3
    rows = {(r["name"], r["gpu"]): r["verdict"] for r in data["rows"]}
    assert rows == {("test_vit fp32 b1", "0"): SLOWER, ("test_vit fp32 b2", "1"): SLOWER}
    assert "| row | what | GPU | B/A, time |" in captured.out and "| test_vit fp32 b2 | latency | 1 |" in captured.out


def test_shards_cover_every_test_once_and_keep_families_whole(pytester: pytest.Pytester) -> None:
    """`--vitperf-shard K/N` on each of N hosts: together every test once, each family on one shard."""
    pytester.makepyfile(test_where=FAMILY, test_other="def test_other():\n    pass\n")
    args = ("--gpu-bench", "-p", "no:cacheprovider", "--vitperf-models=vit_tiny,vit_small", "--vitperf-batch-sizes=1,8",
            "--vitperf-precisions=fp16,fp32", "--collect-only", "-q")  # fmt: skip
    shards = []
    for k in (1, 2, 3):
        result = pytester.runpytest(*args, f"--vitperf-shard={k}/3")
        shards.append({line for line in result.outlines if "::" in line})
    every = {line for line in pytester.runpytest(*args).outlines if "::" in line}
    assert sum(len(s) for s in shards) == len(every) == 9 and set().union(*shards) == every
    families = [{scope_of(n) for n in s} for s in shards]
    assert all(a.isdisjoint(b) for i, a in enumerate(families) for b in families[i + 1 :])
    bad = pytester.runpytest(*args, "--vitperf-shard=3/2")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--vitperf-shard*'3/2' is not K/N with 1 <= K <= N, e.g. 1/2*"])
