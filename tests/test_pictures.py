"""The report's figures from a stored H200 run (`vitperf report`, no GPU) and from a run on the CPU
(`--vitperf-report`); every figure is a PNG that a person can look at (docs/figures keeps one of each)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_vitperf.cli import main
from pytest_vitperf.measure.measurement import BenchmarkJsonError, Measurement, read_benchmark_json
from pytest_vitperf.report.pictures import speedup_figure, tradeoff_figure, tradeoff_points, write
from pytest_vitperf.verdicts.accuracy import task_accuracy
from pytest_vitperf.verdicts.floors import Verdict, speedup_interval
from pytest_vitperf.verdicts.rows import RowVerdict, judge_rows
from tests.conftest import FAST
from tests.test_rounds import measured

STORED = Path(__file__).parent / "data" / "h200-vit_base-b64-benchmark.json"  # -n 2 run on 2x H200, 2026-11-23
STORED_H100 = STORED.with_name("h100-main-job-benchmark.json")  # main job on an H100, 2026-11-23, part of it
# one `vitperf ab` process on an H100, 2026-11-26: vit_base fp16/bf16/fp8/int8 at b1 and b64 in 3 interleaved rounds
ROUNDS_H100 = STORED.with_name("h100-vit_base-rounds-benchmark.json")
PNG = b"\x89PNG\r\n\x1a\n"


def judged(ms: list[Measurement], floors: dict[str, float] | None = None) -> list[RowVerdict]:
    """The rows as a run judges them, with `floors` (precision -> floor) against FP16."""
    ref = {(m.spec.model, m.spec.batch): m for m in ms if m.spec.precision == "fp16"}
    verdicts = {m.spec.key: Verdict(ref[(m.spec.model, m.spec.batch)], m, floor) for m in ms
                if (floor := (floors or {}).get(m.spec.precision)) is not None}  # fmt: skip
    return judge_rows(ms, verdicts)


def by_row(rows: list[RowVerdict]) -> dict:
    return {(r.key, r.gpu_uuid): r for r in rows}


def test_a_stored_benchmark_json_becomes_measurements_with_their_samples() -> None:
    ms = {m.spec.precision: m for m in read_benchmark_json(STORED)}
    assert sorted(ms) == sorted(["fp16", "fp32", "bf16", "int8", "int8-smoothquant", "fp8", "fp16-sparse24"])
    fp8 = ms["fp8"]
    assert fp8.spec.device == "NVIDIA H200" and fp8.spec.gpu_uuid and fp8.spec.options["output_error"]["cosine"] > 0.99
    assert ms["fp16"].median / fp8.median == pytest.approx(1.253, abs=0.002)  # docs/measurements, 2×H200
    assert fp8.clocks and fp8.n == len(fp8.samples_ms)


def test_vitperf_report_writes_every_figure_from_a_stored_run(tmp_path: Path) -> None:
    assert main(["report", str(STORED), "--out", str(tmp_path)]) == 0
    names = sorted(p.name.split("-")[0] for p in tmp_path.glob("*.png"))
    assert names == ["latency", "speedup", "tradeoff"]  # no kernel figure: that run did not profile kernels
    assert all(p.read_bytes()[:8] == PNG for p in tmp_path.glob("*.png"))
    report = (tmp_path / "report.md").read_text()
    assert "](speedup-vit-base-patch16-224-b64-torch-gpu-38c6df5e.png)" in report
    assert any(line.startswith("| vit_base_patch16_224 | fp8 | 64 |") for line in report.splitlines())
    assert len(json.loads((tmp_path / "data.json").read_text())["measurements"]) == 7


def test_a_run_with_vits_and_gemms_on_one_gpu_reports_both(tmp_path: Path) -> None:
    """The H100 main job at 5840ed7 (3 ViT and 4 GEMM measurements of it): the GEMM figure once took the ViTs' fp32
    for a GEMM kind and the report stopped with KeyError: 'fp32'."""
    assert main(["report", str(STORED_H100), "--out", str(tmp_path)]) == 0
    assert sorted(p.name.split("-")[0] for p in tmp_path.glob("*.png")) == ["gemm", "latency", "speedup", "tradeoff"]
    report = (tmp_path / "report.md").read_text()
    gemms = report[report.index("## GEMMs") :]
    assert "| vitb16-proj | fp8-tensor-fast | 0.0168 |" in gemms and "vit_base" not in gemms
    assert "one CUDA graph of 37-161 back-to-back launches" in gemms


def test_kernel_figure_and_floors_appear_when_the_run_has_them(tmp_path: Path) -> None:
    ms = read_benchmark_json(STORED)
    split = {"gemm": 3.1, "attention": 0.9, "quantize": 0.4, "norm": 0.3, "elementwise": 0.5}
    profiled = [replace(m, spec=replace(m.spec, options={**m.spec.options, "kernels": {"by_category": split}}))
                for m in ms]  # fmt: skip
    fp8 = next(m for m in profiled if m.spec.precision == "fp8")
    files = write(tmp_path, profiled, judged(profiled, {fp8.spec.precision: 1.15}))
    assert sorted(p.name.split("-")[0] for p in files if p.suffix == ".png") == [
        "kernels", "latency", "speedup", "tradeoff"]  # fmt: skip
    rows = json.loads((tmp_path / "data.json").read_text())["rows"]
    assert [(r["precision"], r["floor"], r["outcome"]) for r in rows if r["floor"]] == [("fp8", 1.15, "pass")]


def test_a_file_without_measurements_is_named(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text('{"benchmarks": [{"name": "test_x", "extra_info": {}}]}')
    with pytest.raises(BenchmarkJsonError, match=r"holds no pytest-vitperf measurement; write one with: pytest"):
        read_benchmark_json(tmp_path / "other.json")


def test_the_option_writes_a_report_at_the_end_of_a_run(suite: pytest.Pytester) -> None:
    r = suite.runpytest(*FAST, "--vitperf-precisions=fp16,fp32", "--vitperf-report=rep")
    r.assert_outcomes(passed=2)
    r.stdout.fnmatch_lines(["wrote report: */rep/report.md", "wrote report: */rep/speedup-*.png"])
    assert (suite.path / "rep" / "report.md").read_text().startswith("# pytest-vitperf report (this run, written ")
    data = json.loads((suite.path / "rep" / "data.json").read_text())
    assert {Measurement.from_dict(m).spec.precision for m in data["measurements"]} == {"fp16", "fp32"}


def test_the_trade_off_puts_each_precision_at_its_speedup_and_task_drop_with_intervals(tmp_path: Path) -> None:
    import torch

    ms = [m for m in read_benchmark_json(ROUNDS_H100) if m.spec.batch == 64]
    reference, labels = torch.eye(4) * 5, torch.tensor([0, 1, 2, 3])
    wrong = reference.clone()
    wrong[0] = torch.tensor([0.0, 9.0, 0.0, 0.0])  # one of four images lost
    accs = [task_accuracy("fp8", "torch engine (cuda)", wrong, reference, labels),
            task_accuracy("fp8", "Model Optimizer fake quant (cpu)", reference, reference, labels),
            task_accuracy("int8", "Model Optimizer fake quant (cpu)", reference, reference, labels)]  # fmt: skip
    rows = judged(ms)
    points, by_task = tradeoff_points(ms, by_row(rows), accs)
    got = {name: (xs, ys) for name, xs, ys in points}
    assert by_task and sorted(got) == ["fp8", "int8"]  # precisions without a task result are left out
    (x, x_low, x_high), (y, y_low, y_high) = got["fp8"]
    assert x_low < x < x_high and x == pytest.approx(1.1385, abs=0.001)  # the rounds' interval
    assert y == pytest.approx(25.0) and y_low < 0 < y_high  # the engine's drop, not fake quantization's 0
    assert any(p.name.startswith("tradeoff") for p in write(tmp_path, ms, rows, accuracies=accs))
    # without a task, the output's distance from FP32, one point per precision that recorded it
    cosines, by_task = tradeoff_points(ms, by_row(rows))
    assert not by_task and {name for name, _, _ in cosines} == {"fp16", "bf16", "fp8", "int8"}



def test_a_speedup_whose_medians_ratio_lies_outside_its_interval_is_drawn(tmp_path: Path) -> None:
    """The interval pairs the rounds; the bar is the ratio of the pooled medians, which uneven rounds (a busy CPU)
    can put outside it. Drawn as error bars about the bar, such an interval once failed the whole report."""
    ref = measured("fp16", [[1.0] * 5, [3.0], [3.02]])  # pooled median 1.0
    fp8 = measured("fp8", [[2.0], [6.0], [6.02] * 5])  # pooled median 6.02; every round half as fast as FP16
    interval = speedup_interval(ref, fp8)
    assert interval is not None and not interval.low <= ref.median / fp8.median <= interval.high
    family = ("vit_base_patch16_224", 64, "torch", None)
    rows = by_row(judged([ref, fp8]))
    path = speedup_figure(family, [ref, fp8], rows, tmp_path / "s.png")
    assert path is not None and path.read_bytes()[:8] == PNG
    # the trade-off's point too (matplotlib's error bars refuse a negative length)
    off = replace(fp8, spec=replace(fp8.spec, options={**fp8.spec.options, "output_error": {"cosine": 0.99}}))
    path = tradeoff_figure(family, [ref, off], by_row(judged([ref, off])), tmp_path / "t.png")
    assert path is not None and path.read_bytes()[:8] == PNG
