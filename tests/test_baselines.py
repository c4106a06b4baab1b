"""Baselines: the store, the comparison, trtexec imports, the upgrade report and the vitperf commands."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_vitperf.cli import main
from pytest_vitperf.engines.tensorrt.trtexec import TraceFileError, read_compute_ms
from pytest_vitperf.store.baselines import (
    Baseline,
    BaselineFileError,
    BaselineKey,
    JsonDirStorage,
    Run,
    read_file,
)
from pytest_vitperf.verdicts.baselines.compare import (
    IMPROVEMENT,
    OTHER_BOARD,
    REGRESSION,
    SAME_BOARD,
    UNKNOWN,
    WITHIN_NOISE,
    Comparison,
    compare,
    matrix_prior,
    settle,
)
from pytest_vitperf.verdicts.baselines.gate import prior_for
from pytest_vitperf.verdicts.baselines.upgrade import UpgradeError, build_report
from pytest_vitperf.verdicts.spreads import Prior
from tests.conftest import REPO

SEED_BASELINES = REPO / "baselines"
DATA = Path(__file__).parent / "data"
KEY = BaselineKey("torch", "2.14.1", "NVIDIA H100 80GB HBM3", "vit_tiny_patch16_224", "fp16", 8)


def baseline(value: float = 5.0, samples: tuple[float, ...] = (), precision: str = "fp16", **key) -> Baseline:
    k = BaselineKey(**{**KEY.__dict__, "precision": precision, **key})
    return Baseline(k, "median", value, {"median": value}, samples, {"driver": "580.1"}, {"kind": "measured"})


# -- store ------------------------------------------------------------------------------------------
def test_layout_and_round_trip(tmp_path: Path) -> None:
    store = JsonDirStorage(tmp_path)
    b = baseline(5.0, (4.9, 5.0, 5.1))
    store.put([b])
    path = tmp_path / "torch" / "2.14.1" / "nvidia-h100-80gb-hbm3" / "vit_tiny_patch16_224.json"
    assert store.path(b.key) == path and path.is_file()
    data = json.loads(path.read_text())
    assert data["schema"] == 1 and list(data["entries"]) == ["fp16/b8"]
    assert JsonDirStorage(tmp_path).get(b.key) == b
    store.put([baseline(3.0, precision="bf16"), baseline(9.0, cold=True)])
    assert sorted(read_file(path)) == ["bf16/b8", "fp16/b8", "fp16/b8/cold"]  # merged, not replaced
    assert store.get(b.key) == b and JsonDirStorage(tmp_path).get(baseline(cold=True).key).value == 9.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"schema": 1, "entries": {', "is not valid JSON"),
        ("[]", "top level must be an object"),
        ('{"schema": 9}', "schema is 9"),
        ('{"schema": 1, "backend": "torch", "backend_version": "2", "gpu": "g", "model": "m"}', "'entries' must be"),
        (
            '{"schema": 1, "backend": "torch", "backend_version": "2", "gpu": "g", "model": "m", '
            '"entries": {"fp16/b8": {"precision": "fp16", "batch": 8, "statistic": "mean", "value": -1}}}',
            "value must be a positive number",
        ),
        (
            '{"schema": 1, "backend": "torch", "backend_version": "2", "gpu": "g", "model": "m", '
            '"entries": {"fp16/b1": {"precision": "fp16", "batch": 8, "statistic": "mean", "value": 1}}}',
            "the entry name must match",
        ),
        (
            '{"schema": 1, "backend": "torch", "backend_version": "2", "gpu": "g", "model": "m", "entries": '
            '{"fp16/b8/cold": {"precision": "fp16", "batch": 8, "cold": "yes", "statistic": "mean", "value": 1}}}',
            "cold must be true or false",
        ),
        (
            '{"schema": 1, "backend": "torch", "backend_version": "2", "gpu": "g", "model": "m", '
            '"entries": {"fp16/b8": {"precision": "fp16", "batch": 8, "cold": true, "statistic": "mean", "value": 1}}}',
            "holds 'fp16/b8/cold'; the entry name must match",
        ),
    ],
)
def test_corrupt_files_are_named_and_never_overwritten(tmp_path: Path, text: str, message: str) -> None:
    store = JsonDirStorage(tmp_path)
    path = store.path(KEY)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(BaselineFileError) as info:
        store.get(KEY)
    assert str(path) in str(info.value) and message in str(info.value)
    with pytest.raises(BaselineFileError):
        JsonDirStorage(tmp_path).put([baseline()])
    assert path.read_text() == text


WRITER = """
import sys, random
from pathlib import Path
from pytest_vitperf.store.baselines import Baseline, BaselineKey, JsonDirStorage
root, tag, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
store = JsonDirStorage(root)
for i in range(n):
    k = BaselineKey("torch", "1", "gpu", "m", "fp16", 1 + i + (1000 if tag == "b" else 0))
    store.put([Baseline(k, "median", 1.0 + i, samples=tuple(random.random() for _ in range(int(sys.argv[4]))))])
print("done", flush=True)
"""


def test_two_writer_processes_lose_nothing(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), tag, "25", "50"], cwd=REPO) for tag in "ab"]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    (f,) = tmp_path.glob("torch/1/gpu/m.json")
    assert len(read_file(f)) == 50


def test_kill_9_mid_write_leaves_a_whole_file(tmp_path: Path) -> None:
    """A writer rewriting a growing file of large entries is killed at varied moments; every time, the file
    on disk parses whole, and only hidden temp files can be left behind."""
    for delay in (0.6, 0.8, 1.0, 1.3, 1.6):
        p = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), "a", "400", "20000"], cwd=REPO)
        time.sleep(delay)  # interpreter start-up, then somewhere inside the write loop
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        for f in tmp_path.glob("torch/1/gpu/*.json"):
            read_file(f)  # raises BaselineFileError on a torn file
    assert list(tmp_path.glob("torch/1/gpu/m.json")), "no write completed before the kills; lengthen the delays"
    assert all(f.name.startswith(".") for f in tmp_path.rglob("*.tmp"))


# -- compare: a run against the runs before it -----------------------------------------------------------------
UUID = "GPU-1111"


def runs(*ms: float, uuid: str = UUID, mhz: float | None = None, group: int = 0) -> tuple[Run, ...]:
    return tuple(Run(m, "2026-11-25", uuid, mhz, group) for m in ms)


def with_runs(rs: tuple[Run, ...]) -> Baseline:
    return replace(baseline(rs[-1].median_ms if rs else 10.0), runs=rs)


STEADY = runs(10.0, 10.05, 9.96, 10.02, 9.98)  # a spread of about 0.4% between processes


def test_a_change_must_pass_the_threshold_and_stand_out_from_the_runs() -> None:
    b = with_runs(STEADY)
    slow = compare(b, 10.8, gpu_uuid=UUID)
    assert slow.change == REGRESSION and slow.board == SAME_BOARD and slow.runs == 5 and slow.p_value < 1e-4
    # 2% slower stands out from a 0.4% spread, but is under the 3% threshold.
    small = compare(b, 10.2, gpu_uuid=UUID)
    assert small.change == WITHIN_NOISE and small.p_value < 0.05
    assert compare(b, 9.0, gpu_uuid=UUID).change == IMPROVEMENT
    # Runs 5% apart: an 8% change does not stand out.
    assert compare(with_runs(runs(10.0, 10.6, 9.5, 10.3, 9.8)), 10.8, gpu_uuid=UUID).change == WITHIN_NOISE
    # Two runs: the spread is unknown, and the verdict says so instead of guessing.
    two = compare(with_runs(runs(10.0, 10.05)), 20.0, gpu_uuid=UUID)
    assert two.change == UNKNOWN and two.sd_log is None and two.method == "spread unknown: 2 run(s)"
    # No runs at all (published numbers): unknown, or the threshold alone where asked (the upgrade report).
    assert compare(baseline(10.0), 10.8).change == UNKNOWN
    assert compare(baseline(10.0), 10.8, threshold_only=True).change == REGRESSION


def test_the_test_is_a_prediction_interval_checked_against_scipy() -> None:
    from scipy import stats

    b = with_runs(STEADY)
    logs = np.log([r.median_ms for r in STEADY])
    t = (np.log(10.1) - logs.mean()) / (logs.std(ddof=1) * np.sqrt(1 + 1 / 5))
    c = compare(b, 10.1, gpu_uuid=UUID, threshold=0.0)
    assert c.p_value == pytest.approx(2 * stats.t.sf(abs(t), 4), rel=1e-9)
    # A change exactly at the noise bound has p = the level.
    edge = compare(b, float(np.exp(logs.mean())) * (1 + c.noise), gpu_uuid=UUID, threshold=0.0)
    assert edge.p_value == pytest.approx(c.level, rel=1e-6)


def test_another_board_adds_the_boards_spread_and_judges_in_cycles() -> None:
    clocked = with_runs(runs(10.0, 10.05, 9.96, 10.02, 9.98, mhz=1830.0))
    same = compare(clocked, 10.5, current_mhz=1830.0, gpu_uuid=UUID)
    other = compare(clocked, 10.5, current_mhz=1830.0, gpu_uuid="GPU-2222")
    assert same.unit == "time" and other.unit == "cycles" and other.board == OTHER_BOARD
    assert other.p_value > same.p_value and other.detectable > same.detectable
    # 10% slower in time at a 10% lower clock: the same number of cycles.
    slow_clock = compare(clocked, 11.0, current_mhz=1830.0 / 1.1, gpu_uuid="GPU-2222")
    assert abs(slow_clock.delta) < 0.01 and slow_clock.change == WITHIN_NOISE
    # Runs without a recorded board: the machine is taken as the same one.
    assert compare(with_runs(runs(*[r.median_ms for r in STEADY], uuid="")), 10.8).board == ""


def test_a_refreshed_baseline_is_the_reference_and_the_spread_is_pooled_within_groups() -> None:
    old = runs(10.0, 10.05, 9.96, group=0)
    new = runs(12.0, 12.06, 11.95, group=1)
    c = compare(with_runs(old + new), 12.0, gpu_uuid=UUID)
    assert c.baseline_ms == pytest.approx(12.0, rel=0.01) and c.change == WITHIN_NOISE
    assert c.sd_log < 0.01  # the 20% step between the groups is not spread


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1.0, 100.0), min_size=3, max_size=10), st.floats(1.0, 100.0),
       st.integers(-7, 7).map(lambda k: 2.0**k))  # fmt: skip
def test_a_verdict_does_not_depend_on_the_unit(ms: list[float], current: float, scale: float) -> None:
    x = compare(with_runs(runs(*ms)), current, gpu_uuid=UUID)
    y = compare(with_runs(runs(*[v * scale for v in ms])), current * scale, gpu_uuid=UUID)
    assert x.change == y.change
    assert (x.p_value is None and y.p_value is None) or x.p_value == pytest.approx(y.p_value, rel=1e-6, abs=1e-12)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1.0, 2.0), min_size=3, max_size=10), st.floats(0.5, 4.0), st.floats(0, 0.5),
       st.floats(0, 0.5))  # fmt: skip
def test_a_row_flagged_at_a_threshold_is_flagged_at_every_lower_one(
    ms: list[float], current: float, t1: float, t2: float
) -> None:
    lo, hi = sorted((t1, t2))
    b = with_runs(runs(*ms))
    at_hi, at_lo = (compare(b, current, gpu_uuid=UUID, threshold=t).change for t in (hi, lo))
    if at_hi not in (WITHIN_NOISE, UNKNOWN):
        assert at_lo == at_hi
    if at_lo == WITHIN_NOISE:
        assert at_hi == WITHIN_NOISE


def test_identical_runs_flag_a_matrix_at_most_at_the_false_alarm_rate_and_a_detectable_change_is_seen() -> None:
    """Simulated A/A: 400 gated runs of 30 rows, each row calibrated by 5 runs, no practical threshold. The share of
    runs that flag anything must stay at Benjamini-Hochberg's 5% (within sampling error); a row slowed by its own
    'can see' figure must be flagged about 4 times in 5."""
    rng = np.random.default_rng(7)
    rate, rows, sd = 0.05, 30, 0.01
    flagged = 0
    for _ in range(400):
        cs = []
        for _ in range(rows):
            b = with_runs(runs(*np.exp(rng.normal(0, sd, 5))))
            cs.append(compare(b, float(np.exp(rng.normal(0, sd))), gpu_uuid=UUID, threshold=0.0, level=rate / rows))
        flagged += any(c is not None and c.change != WITHIN_NOISE for c in settle(cs, rate))
    assert flagged / 400 <= rate + 3 * (rate * (1 - rate) / 400) ** 0.5
    seen = 0
    for _ in range(400):
        b = with_runs(runs(*np.exp(rng.normal(0, sd, 5))))
        shift = compare(b, 1.0, gpu_uuid=UUID, threshold=0.0, level=rate / rows).detectable
        c = compare(b, float(np.exp(rng.normal(0, sd))) * (1 + shift), gpu_uuid=UUID, threshold=0.0, level=rate / rows)
        seen += c.change == REGRESSION
    assert 0.65 <= seen / 400 <= 0.95, seen


def test_reruns_of_one_real_measurement_are_flagged_at_most_at_the_false_alarm_rate() -> None:
    """A real measurement dealt into 21 runs of 12 samples: the medians of the first 5 calibrate the row, the other
    16 are gated at 5% for the matrix. Each block of 21 consecutive samples gives one to every run, in an order
    shuffled per block, so the machine's drift (the 2-core CI machine drifts by tens of percent between processes:
    docs/measurements/2026-11-21-cpu-run-to-run-drift.md) falls on every run alike and the runs are draws from one
    distribution. One deal flags now and then by design (a 5% false-alarm rate), so the test deals each measurement
    100 ways and bounds the share that flag. The deals of one measurement share its samples, and measurements differ:
    30 measurements of this machine (2026-11-29) flagged 0-15 of 100 deals each, 2.8% in all with test_vit and 6.4%
    with vit_tiny, and one of vit_tiny in CI flagged 16. So the bound holds for the mean over four measurements, not
    for one. (Dealt in a fixed order, a drift within each block made the later runs slower than the calibrating
    ones, and a loaded CI run flagged two rows.)"""
    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.engines.backends.torch import TorchBackend
    from pytest_vitperf.engines.models.zoo import build_model
    from pytest_vitperf.measure.env import Device
    from pytest_vitperf.measure.timing import sample

    engine = TorchBackend().prepare(
        build_model("test_vit"),
        model_name="test_vit",
        precision="fp32",
        batch=1,
        device=Device("cpu"),
        settings=Settings(),
    )
    rates = []
    for _ in range(4):
        samples = sample(engine.launch, engine.clock, warmup_ms=100, duration_ms=0, min_iterations=21 * 12)
        flagged = 0
        for seed in range(100):
            rng = random.Random(seed)
            dealt: list[list[float]] = [[] for _ in range(21)]
            for k in range(12):
                for run, x in zip(rng.sample(range(21), 21), samples[21 * k : 21 * (k + 1)], strict=True):
                    dealt[run].append(x)
            medians = [float(np.median(d)) for d in dealt]
            b = with_runs(runs(*medians[:5]))
            cs = [compare(b, m, gpu_uuid=UUID, level=0.05 / 16) for m in medians[5:]]
            flagged += REGRESSION in [c.change for c in settle(cs) if c is not None]
        rates.append(flagged / 100)
    assert float(np.mean(rates)) <= 0.10, f"deals of identical runs flagged a regression at rates {rates}"


def test_a_prior_from_the_matrix_lets_a_row_of_three_runs_see_what_its_own_spread_cannot() -> None:
    b = with_runs(runs(10.0, 10.1, 9.9))  # 1% with 2 degrees of freedom of its own
    level = 0.05 / 80
    own = compare(b, 12.0, gpu_uuid=UUID, level=level)
    moderated = compare(b, 12.0, gpu_uuid=UUID, level=level, prior=Prior(0.015**2, 20))
    assert own.change == WITHIN_NOISE and own.own_sd_log is None
    assert moderated.change == REGRESSION and moderated.detectable < own.detectable
    assert moderated.own_sd_log == pytest.approx(own.sd_log) and moderated.sd_log > own.sd_log
    assert moderated.method == f"t on 3 runs, same board, moderated from {own.sd_log:.2%}, in time"
    # Two runs give no spread of their own to moderate: still unknown.
    assert compare(with_runs(runs(10.0, 10.1)), 20.0, gpu_uuid=UUID, prior=Prior(1e-4, 20)).change == UNKNOWN


def test_the_summary_shows_the_moderated_spread_beside_the_rows_own_and_says_what_moderated_it() -> None:
    from pytest_vitperf.report.baselines import baseline_summary
    from pytest_vitperf.verdicts.baselines.gate import COMPARED, Outcome

    b = with_runs(runs(10.0, 10.1, 9.9))
    c = compare(b, 10.05, gpu_uuid=UUID, prior=Prior(0.005**2, 20))
    lines = baseline_summary([Outcome(b.key, COMPARED, 10.05, c)], [], 0.05)
    assert re.search(r"\d\.\d% \(3 runs, same board, own 1\.0%\) +\d+\.\d% +within noise", lines[2]), lines
    assert any(line.startswith("spread: moderated toward the other stored rows") for line in lines)
    plain = baseline_summary([Outcome(b.key, COMPARED, 10.05, compare(b, 10.05, gpu_uuid=UUID))], [], 0.05)
    assert not any(line.startswith("spread: moderated") for line in plain) and "own" not in plain[2]


@pytest.mark.parametrize("matrix", ["inverse chi-square", "two clusters by latency"])
def test_moderated_matrices_flag_identical_runs_at_most_at_the_false_alarm_rate(matrix: str) -> None:
    """Simulated A/A with the matrix's prior: 300 gated runs of 40 rows, each row calibrated by 4 runs. The rows'
    true spreads are drawn from a scaled inverse chi-square (s0 = 1%, d0 = 5), or are 0.5% for half the rows (5 ms)
    and 2% for the others (20 us), as the stored H100 matrix's ViT and GEMM rows were. The share of runs that
    flag anything stays at Benjamini-Hochberg's 5%, and a row slowed by its 'can see' figure is flagged about 4
    times in 5."""
    rng = np.random.default_rng(5)
    rate, rows = 0.05, 40
    flagged = seen = 0
    for _ in range(300):
        if matrix == "two clusters by latency":
            ms, sds = np.repeat([5.0, 0.02], rows // 2), np.repeat([0.005, 0.02], rows // 2)
        else:
            ms, sds = np.full(rows, 1.0), 0.01 * np.sqrt(5 / rng.chisquare(5, rows))
        matrix_rows = [with_runs(runs(*(m * np.exp(rng.normal(0, sd, 4))))) for m, sd in zip(ms, sds, strict=True)]
        prior = matrix_prior(matrix_rows, UUID)
        assert prior is not None

        def judge(i: int, now: float) -> Comparison:
            return compare(matrix_rows[i], now, gpu_uuid=UUID, threshold=0.0, level=rate / rows, prior=prior)  # noqa: B023

        cs = [judge(i, float(m)) for i, m in enumerate(ms * np.exp(rng.normal(0, sds)))]
        flagged += any(c is not None and c.change != WITHIN_NOISE for c in settle(cs, rate))
        i = int(rng.integers(rows))
        seen += judge(i, float(ms[i] * np.exp(rng.normal(0, sds[i]))) * (1 + cs[i].detectable)).change == REGRESSION
    assert flagged / 300 <= rate + 3 * (rate * (1 - rate) / 300) ** 0.5
    assert 0.65 <= seen / 300 <= 0.95, seen


def test_the_gates_prior_reads_every_row_of_the_gpu_model_and_skips_an_unreadable_file(tmp_path: Path) -> None:
    store = JsonDirStorage(tmp_path)
    rows = [replace(baseline(10.0, model=f"m{i}"), runs=runs(10.0, 10.0 + 0.1 * i, 9.95, 10.02)) for i in range(1, 5)]
    store.put(rows)
    (store.path(rows[0].key).parent / "broken.json").write_text("{")
    # Another GPU model's rows are not this matrix's.
    store.put([replace(baseline(10.0, model="m9", gpu="NVIDIA H200"), runs=runs(10.0, 13.0, 7.0))])
    assert prior_for(store, rows[0].key, UUID) == matrix_prior(rows, UUID)


def test_calibrate_shows_the_moderated_spread_beside_the_rows_own(tmp_path: Path) -> None:
    from pytest_vitperf.cli.calibrate import spread_rows

    store = JsonDirStorage(tmp_path)
    store.put([replace(baseline(10.0, model=f"m{i}"), runs=runs(10.0, 10.0 + 0.1 * i, 9.95, 10.02)) for i in range(4)])
    priors: dict = {}
    shown = spread_rows(JsonDirStorage(tmp_path), 0.05, priors)
    assert len(shown) == 4 and all(re.fullmatch(r"\d+\.\d\d% \(own \d+\.\d\d%\)", r[4]) for r in shown), shown
    ((_, board), prior), = priors.items()
    assert board == UUID and prior == matrix_prior(list(JsonDirStorage(tmp_path).all()), UUID)
    assert re.fullmatch(r"sd \d\.\d\d%, worth \d+\.\d df", prior.text()), prior.text()


# -- trtexec ----------------------------------------------------------------------------------------
def test_trtexec_export_times_are_read_as_compute_samples() -> None:
    samples = read_compute_ms(DATA / "trtexec_times.json")
    assert len(samples) == 12 and samples[0] == 8.2101 and min(samples) > 8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[", "is not valid JSON"),
        ('{"computeMs": 1}', "expected a JSON list"),
        ('[{"latencyMs": 1}]', "entry 0 has no computeMs"),
        ('[{"computeMs": -1}]', "entry 0 computeMs is -1"),
        ('[{"count": 3}, {"computeMs": 1}]', "says count 3 but holds 1 inferences"),
        ("[]", "holds no inferences"),
    ],
)
def test_bad_trtexec_files(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "t.json"
    f.write_text(text)
    with pytest.raises(TraceFileError, match=message):
        read_compute_ms(f)


def test_import_trtexec_command_writes_a_baseline_with_samples(tmp_path: Path) -> None:
    args = [
        "import-trtexec",
        str(DATA / "trtexec_times.json"),
        "--version",
        "10.14.1",
        "--gpu-model",
        "NVIDIA H100 80GB HBM3",
    ]
    args += ["--model", "vit_base_patch16_224", "--precision", "fp8", "--batch", "64", "--baseline-dir", str(tmp_path)]
    assert main(args) == 0
    (b,) = JsonDirStorage(tmp_path).all()
    assert b.key == BaselineKey("tensorrt", "10.14.1", "NVIDIA H100 80GB HBM3", "vit_base_patch16_224", "fp8", 64)
    assert len(b.samples) == 12 and b.statistic == "median" and b.provenance["tool"] == "trtexec --exportTimes"


def test_import_trtexec_refuses_a_truncated_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "cut.json"
    f.write_text((DATA / "trtexec_times.json").read_text()[:300])
    args = ["import-trtexec", str(f), "--version", "1", "--gpu-model", "g", "--model", "m", "--precision", "fp16"]
    assert main([*args, "--baseline-dir", str(tmp_path / "bl")]) == 2
    assert "is not valid JSON" in capsys.readouterr().err and not (tmp_path / "bl").exists()


# -- the upgrade report on the seed baselines ---------------------------------------------------------
def test_seed_baselines_are_published_numbers_without_samples() -> None:
    items = list(JsonDirStorage(SEED_BASELINES).all())
    assert {b.key.backend_version for b in items} == {"10.11.0", "10.14.1", "10.16.0"}
    assert len(items) == 9
    for b in items:
        assert b.provenance["note"] == "published, no raw samples" and b.provenance["source"].startswith("seed 00")
        assert not b.samples and b.key.batch == 64


def test_upgrade_report_keeps_latency_and_speedup_apart(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        ["compare", "--from", "tensorrt/10.14.1", "--to", "tensorrt/10.16.0", "--baseline-dir", str(SEED_BASELINES)]
    )
    out = capsys.readouterr().out
    assert rc == 0
    unknown = "threshold only (spread unknown: 0 run(s))"
    assert f"| fp16 | 8.23 ms | 7.90 ms | -4.0% | improvement (within 5%) | {unknown} |" in out
    assert "| nvfp4 | 1.60x | 1.53x | -0.07x |" in out
    assert out.rstrip().endswith("**Gate: PASS**")


def test_upgrade_report_fails_a_floor_and_says_why(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ["compare", "--from", "tensorrt/10.14.1", "--to", "tensorrt/10.16.0", "--baseline-dir", str(SEED_BASELINES)]
    rc = main([*args, "--floor", "nvfp4=1.55", "--fail-on-regression", "--out", str(tmp_path / "r.md")])
    out = capsys.readouterr().out
    assert rc == 1
    assert (
        "| nvfp4 | 1.60x | 1.53x | -0.07x | 1.55x | FAIL: 1.53x < 1.55x (--floor); "
        "fp16 latency -4.0%, nvfp4 latency +0.4% |"
    ) in out
    assert "**Gate: FAIL** — 1 speedup floor(s) failed." in out
    assert (tmp_path / "r.md").read_text() == out


def test_upgrade_verdict_as_json_for_a_machine(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = ["compare", "--from", "tensorrt/10.14.1", "--to", "tensorrt/10.16.0", "--baseline-dir", str(SEED_BASELINES)]
    rc = main(
        [*args, "--floor", "nvfp4=1.55", "--fail-on-regression", "--format", "json", "--out", str(tmp_path / "v")]
    )
    verdict = json.loads(capsys.readouterr().out)
    assert rc == 1 and verdict["passed"] is False and verdict["floor_failures"] == 1 and verdict["regressions"] == 0
    nvfp4 = next(r for r in verdict["rows"] if r["precision"] == "nvfp4")
    assert nvfp4["floor"] == 1.55 and nvfp4["floor_failed"] and nvfp4["new_speedup"] == pytest.approx(1.53, abs=0.005)
    assert json.loads((tmp_path / "v").read_text()) == verdict


def test_upgrade_report_errors() -> None:
    store = JsonDirStorage(SEED_BASELINES)
    with pytest.raises(UpgradeError, match=r"no baselines for tensorrt/9\.0"):
        build_report(store, "tensorrt", "9.0", "10.16.0")
    with pytest.raises(UpgradeError, match="no baselines for GPU 'NVIDIA B200'"):
        build_report(store, "tensorrt", "10.14.1", "10.16.0", gpu="NVIDIA B200")


def test_show_lists_baselines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(SEED_BASELINES)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["backend", "version", "gpu"] and len(lines) == 2 + 9
    assert any("10.14.1" in line and "nvfp4" in line and "5.140 ms (mean)" in line for line in lines)


def test_latencies_below_a_tenth_of_a_ms_keep_three_significant_digits() -> None:
    from pytest_vitperf.report.tables import ms_text

    assert [ms_text(x) for x in (58.4961, 0.6572, 0.1, 0.02871, 0.005912)] == [
        "58.496", "0.657", "0.100", "0.0287", "0.00591"]  # fmt: skip
    assert ms_text(0.0059) != ms_text(0.0064)  # a GEMM 8% slower than its baseline shows as such
