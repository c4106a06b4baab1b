"""The baseline workflow end to end on the CPU: no baseline, update, rerun, a slowdown caught, accept."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_vitperf.store.baselines import Baseline, BaselineKey, JsonDirStorage

ARGS = (
    "--gpu-bench",
    "--vitperf-warmup-ms=50",
    "--vitperf-duration-ms=0",
    "--vitperf-min-iterations=15",
    "--vitperf-baseline-dir=bl",
    # The injected slowdown is 5x (SLOWDOWN, in CONFTEST's sleep).
    "--vitperf-regression-threshold=100%",
    "-p",
    "no:cacheprovider",
    "--benchmark-disable",
)
TEST = """
import pytest

@pytest.mark.gpu_bench
def test_tiny(engine, bench):
    bench(engine("fp32", 1, model="test_vit"))  # timm's own test ViT, its cost a sleep (CONFTEST)
"""
# The model's cost is a sleep the test sets (SLEEP_MS, 20 by default; SLOWDOWN=5 makes it five times longer): a
# busy machine delays a sleep by a millisecond or two, where it slowed the model itself up to 36-fold (7.3 ms against
# 266 ms), and a verdict's logic is tested here, not the host's free CPU. The output is a cheap function of the input.
CONFTEST = """
import os
import time
import torch

class Sleep(torch.nn.Module):
    def __init__(self, model, seconds):
        super().__init__()
        self.model, self.seconds = model, seconds
        self.pretrained_cfg, self.patch_embed = model.pretrained_cfg, model.patch_embed

    def forward(self, x):
        time.sleep(self.seconds)
        return x.flatten(1)[:, :10] * 2

def pytest_vitperf_model_built(config, name, model):
    ms = float(os.environ.get("SLEEP_MS", "20")) * float(os.environ.get("SLOWDOWN", "1"))
    return Sleep(model, ms / 1000)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_tiny=TEST)
    pytester.makeconftest(CONFTEST)
    return pytester


def entries(pytester: pytest.Pytester) -> dict:
    (f,) = (pytester.path / "bl").glob("torch/*/*/test_vit.json")
    return json.loads(f.read_text())["entries"]


def calibrate(project: pytest.Pytester, runs: int = 3) -> None:
    """What `vitperf calibrate` does: one run writes the baseline, the others add their medians as runs."""
    project.runpytest(*ARGS, "--vitperf-update-baselines").assert_outcomes(passed=1)
    for _ in range(runs - 1):
        project.runpytest(*ARGS, "--vitperf-record-run").assert_outcomes(passed=1)


def test_full_workflow(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # 1. No baseline: reported, not failed.
    r = project.runpytest(*ARGS)
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(
        ["*vitperf baselines*", "test_vit * fp32 * 1 * - * missing", "*no baseline at *"]
    )
    assert not (project.path / "bl").exists()

    # 2. Update: written, with raw samples, provenance and its first run; the summary says what changed.
    r = project.runpytest(*ARGS, "--vitperf-update-baselines")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["added */bl/torch/*/test_vit.json [[]fp32/b1[]] median * ms"])
    e = entries(project)["fp32/b1"]
    assert len(e["samples"]) == 15 and e["provenance"]["kind"] == "measured" and e["statistic"] == "median"
    assert e["environment"]["torch"] and e["provenance"]["test"] == "test_tiny.py::test_tiny"
    assert [run["median_ms"] for run in e["runs"]] == [e["value"]]

    # 3. Rerun: one run gives no spread, and the verdict says so rather than guess.
    r = project.runpytest(*ARGS)
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["test_vit * fp32 * 1 * unknown: 1 run(s) * unknown",
                            "spread unknown: *vitperf calibrate*"])  # fmt: skip

    # 4. Two more runs recorded: the value stays, the spread is known.
    for k in (2, 3):
        r = project.runpytest(*ARGS, "--vitperf-record-run")
        r.stdout.fnmatch_lines([f"recorded a run in */test_vit.json [[]fp32/b1[]]: * ms, {k} run(s) now"])
    assert entries(project)["fp32/b1"]["value"] == e["value"] and len(entries(project)["fp32/b1"]["runs"]) == 3
    r = project.runpytest(*ARGS)
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["test_vit * fp32 * 1 * (3 runs) * within noise", "verdicts: *"])
    assert r.ret == 0

    # 5. Extra work in forward: caught, with the table and the command to accept.
    monkeypatch.setenv("SLOWDOWN", "5")
    r = project.runpytest(*ARGS)
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(
        [
            "*latency regression: test_vit fp32 batch 1 on torch *(threshold 100%, t on 3 runs, in time*",
            "*baseline * current * Δ * spread * p-value * verdict",
            "* ms * ms * +* REGRESSION",
            "*If the change is intended, accept it:",
            "*pytest --gpu-bench 'test_tiny.py::test_tiny' --vitperf-update-baselines",
        ]
    )

    # 6. Accept: refreshed as a new group of runs; the slow model is the new normal.
    r = project.runpytest(*ARGS, "--vitperf-update-baselines")
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["refreshed */test_vit.json [[]fp32/b1[]] * ms (median) -> * ms (+*%)"])
    assert [run.get("group", 0) for run in entries(project)["fp32/b1"]["runs"]] == [0, 0, 0, 1]
    project.runpytest(*ARGS).assert_outcomes(passed=1)


def test_calibrate_stores_runs_beside_the_baselines_and_an_identical_rerun_flags_nothing(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_vitperf.cli import main

    monkeypatch.chdir(project.path)
    gate = [a for a in ARGS if not a.startswith("--vitperf-baseline-dir") and a != "--gpu-bench"]
    gate = [a for a in gate if a not in ("-p", "no:cacheprovider")]
    assert main(["calibrate", "--runs", "3", "--baseline-dir", "bl", "--quiet", "--", *gate]) == 0
    out = capsys.readouterr().out
    assert out.count("--vitperf-record-run") == 3
    assert re.search(r"test_vit +fp32 +1 +3 +\d+\.\d+% +\d+\.\d+% +- +\d{4}-\d\d-\d\d", out), out
    e = entries(project)["fp32/b1"]
    assert len(e["runs"]) == 3 and all(r["date"] and r.get("group", 0) == 0 for r in e["runs"])
    r = project.runpytest(*ARGS)
    r.stdout.fnmatch_lines(["test_vit * fp32 * 1 * (3 runs) * within noise"])
    assert r.ret == 0
    assert main(["calibrate", "--runs", "2", "--", *gate]) == 2
    assert "a spread needs 3 runs or more" in capsys.readouterr().err


def test_record_run_and_inject_delay_refuse_each_other_and_update(project: pytest.Pytester) -> None:
    r = project.runpytest(*ARGS, "--vitperf-record-run", "--vitperf-update-baselines")
    r.stderr.fnmatch_lines(["*--vitperf-update-baselines writes new baselines, --vitperf-record-run adds runs*"])
    r = project.runpytest(*ARGS, "--vitperf-record-run", "--vitperf-inject-delay=fp32=10%")
    r.stderr.fnmatch_lines(["*Drop one of --vitperf-inject-delay and --vitperf-record-run"])
    r = project.runpytest(*ARGS, "--vitperf-false-alarm=0")
    assert r.ret == pytest.ExitCode.USAGE_ERROR


def test_strict_fails_a_missing_baseline(project: pytest.Pytester) -> None:
    r = project.runpytest(*ARGS, "--vitperf-strict")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*no baseline at * (--vitperf-strict)", "*Create it with:", "*--vitperf-update-baselines"])


def test_per_test_threshold_marker(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    calibrate(project)
    project.makepyfile(
        test_tiny=TEST.replace("@pytest.mark.gpu_bench", "@pytest.mark.gpu_bench\n@pytest.mark.vitperf_threshold(50.0)")
    )
    monkeypatch.setenv("SLOWDOWN", "5")
    project.runpytest(*ARGS).assert_outcomes(passed=1)  # 5x slower, but the test allows 5000%
    project.makepyfile(test_tiny=TEST)
    project.runpytest(*ARGS, "--vitperf-regression-threshold=900%").assert_outcomes(passed=1)
    project.runpytest(*ARGS).assert_outcomes(failed=1)  # the global 100% applies again


def test_baselines_of_another_gpu_are_never_compared(project: pytest.Pytester) -> None:
    from pytest_vitperf.measure.env import version_of

    key = BaselineKey("torch", version_of("torch") or "", "NVIDIA H100 80GB HBM3", "test_vit", "fp32", 1)
    JsonDirStorage(project.path / "bl").put([Baseline(key, "median", 0.5, samples=(0.5, 0.5))])
    r = project.runpytest(*ARGS)
    r.assert_outcomes(passed=1)
    r.stdout.fnmatch_lines(["* elsewhere", "*baselines exist only for NVIDIA H100 80GB HBM3; not compared with *"])


def test_a_corrupt_baseline_file_fails_its_tests_and_is_kept(project: pytest.Pytester) -> None:
    project.runpytest(*ARGS, "--vitperf-update-baselines").assert_outcomes(passed=1)
    (f,) = (project.path / "bl").glob("torch/*/*/test_vit.json")
    f.write_text(f.read_text()[:200])
    project.makepyfile(
        other="import pytest\n\n@pytest.mark.gpu_bench\ndef test_other(engine, bench):\n"
        "    bench(engine('bf16', 1, model='test_vit'))\n"
    )
    project.makepyfile(test_tiny=TEST)
    before = f.read_text()
    r = project.runpytest(*ARGS, "--vitperf-update-baselines", "test_tiny.py")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(
        ["*baseline file */test_vit.json: is not valid JSON*", "*Fix or remove that file*"]
    )
    assert f.read_text() == before


@pytest.mark.parametrize("workers", [0, 2], ids=["one-process", "xdist"])
def test_a_baseline_that_cannot_be_written_fails_the_run(project: pytest.Pytester, workers: int) -> None:
    if workers:
        pytest.importorskip("xdist")
    (project.path / "bl").mkdir()
    (project.path / "bl" / "torch").write_text("a file where the backend's folder must go\n")
    xdist = ["-n", str(workers), "--vitperf-share-devices"] if workers else []
    r = project.runpytest(*ARGS, "--vitperf-update-baselines", *xdist)
    r.assert_outcomes(passed=1)  # the test itself passed; the run did not do what it was asked
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["NOT WRITTEN */bl/torch/*/test_vit.json [[]fp32/b1[]]: *; the run fails*"])
    assert (project.path / "bl" / "torch").read_text().startswith("a file")  # nothing lost


def test_xdist_workers_merge_their_updates(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    project.makepyfile(
        test_many="""
        import pytest

        @pytest.mark.gpu_bench
        @pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
        def test_p(engine, bench, precision):
            bench(engine(precision, 1, model="test_vit"))
        """
    )
    r = project.runpytest(*ARGS, "--vitperf-update-baselines", "-n", "2", "--vitperf-share-devices", "test_many.py")
    r.assert_outcomes(passed=3)
    assert sorted(entries(project)) == ["bf16/b1", "fp16/b1", "fp32/b1"]
    r.stdout.fnmatch_lines_random(["added *[[]fp32/b1[]]*", "added *[[]bf16/b1[]]*", "added *[[]fp16/b1[]]*"])


def test_seed_baselines_gate_a_user_on_that_gpu_from_the_first_run() -> None:
    """The published RTX PRO 6000 numbers load as baselines keyed by that GPU and TensorRT version."""
    from tests.conftest import REPO

    store = JsonDirStorage(REPO / "baselines")
    key = BaselineKey(
        "tensorrt", "10.16.0", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "vit_base_patch16_224", "nvfp4", 64
    )
    b = store.get(key)
    assert b is not None and b.value == 5.16 and b.statistic == "mean" and not b.has_samples
    assert Path(store.path(key)).name == "vit_base_patch16_224.json"


def test_cold_runs_keep_baselines_of_their_own(project: pytest.Pytester) -> None:
    project.runpytest(*ARGS, "--vitperf-update-baselines").assert_outcomes(passed=1)
    r = project.runpytest(*ARGS, "--vitperf-cold")
    r.assert_outcomes(passed=1)  # never compared with the warm entry
    r.stdout.fnmatch_lines(["test_vit * fp32 * 1 (cold) * - * missing", "*[[]fp32/b1/cold[]]*"])
    r = project.runpytest(*ARGS, "--vitperf-cold", "--vitperf-update-baselines")
    r.stdout.fnmatch_lines(["added */test_vit.json [[]fp32/b1/cold[]] median * ms"])
    e = entries(project)
    assert e["fp32/b1/cold"]["cold"] is True and "cold" not in e["fp32/b1"]
    assert e["fp32/b1/cold"]["samples"] != e["fp32/b1"]["samples"]
    project.runpytest(*ARGS, "--vitperf-cold").stdout.fnmatch_lines(
        ["test_vit * fp32 * 1 (cold) * unknown: 1 run(s) * unknown"]
    )


def test_a_store_is_the_baseline_of_the_nights_after_it(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--vitperf-store-baselines: `vitperf calibrate --store` makes the first runs, every night adds one, a night the
    gate flags stays out of the reference, and an accepted change starts a new baseline; an injected delay is caught
    and lands nowhere."""
    import sqlalchemy as sa

    from pytest_vitperf.cli import main

    monkeypatch.chdir(project.path)
    store = [a for a in ARGS if not a.startswith("--vitperf-baseline-dir")] + ["--vitperf-store=fleet.db",
                                                                                 "--vitperf-store-baselines"]
    gate = [a for a in ARGS if a not in ("--gpu-bench", "-p", "no:cacheprovider") and "baseline-dir" not in a]
    assert main(["calibrate", "--store", "fleet.db", "--runs", "3", "--quiet", "--", *gate]) == 0
    assert re.search(r"test_vit +fp32 +1 +3 +\d+\.\d+% +\d+\.\d+% +- +\d{4}-\d\d-\d\d", capsys.readouterr().out)

    def roles() -> list[str]:
        with sa.create_engine(f"sqlite:///{project.path / 'fleet.db'}").connect() as c:
            return list(c.exec_driver_sql("SELECT role FROM rows ORDER BY id").scalars())

    r = project.runpytest(*store)  # a night like the others
    r.stdout.fnmatch_lines(["*vitperf baselines (the runs in the store sqlite:///*fleet.db)*",
                            "test_vit * fp32 * 1 * (3 runs) * within noise"])  # fmt: skip
    assert r.ret == 0 and roles() == ["run"] * 4
    monkeypatch.setenv("SLOWDOWN", "5")
    r = project.runpytest(*store)
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*latency regression: test_vit fp32 batch 1 *t on 4 runs*", "* REGRESSION"])
    assert roles()[-1] == "flagged"
    r = project.runpytest(*store)  # the slowdown again: still judged against the four nights before it
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*t on 4 runs*"])
    project.runpytest(*store, "--vitperf-update-baselines").assert_outcomes(passed=1)  # accepted: the new normal
    assert roles()[-3:] == ["flagged", "flagged", "start"]
    r = project.runpytest(*store)
    r.stdout.fnmatch_lines(["test_vit * fp32 * 1 * (5 runs) * within noise"])  # pooled with the old group's spread
    r = project.runpytest(*store, "--vitperf-inject-delay=fp32=90%", "--vitperf-regression-threshold=20%")
    r.assert_outcomes(failed=1)
    assert len(roles()) == 8  # caught, and in no series and no baseline
    r = project.runpytest(*[a for a in store if not a.startswith("--vitperf-store=")])
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["ERROR: --vitperf-store-baselines: reads --vitperf-store's; give both"])
    (project.path / "text.db").write_text("not a database\n")  # a store that cannot be read: refused at the start
    r = project.runpytest(*[a.replace("fleet.db", "text.db") for a in store])
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["ERROR: --vitperf-store *text.db: file is not a database; give a store this run can *"])
    assert (project.path / "text.db").read_text() == "not a database\n"
