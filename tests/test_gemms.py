"""The GEMM micro-suite's parts on the CPU: real torch products held to numerics/gemm.py's bound (and a product off by
one unit failing it), the peak table, the skip reasons, the summary's arithmetic and figure, and the suite run
end to end."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from pytest_vitperf.engines.gemms import (
    KINDS,
    SHAPES,
    GemmShape,
    bytes_moved,
    dense_peak,
    describe,
    operand_bytes,
    operands,
    roofline,
    rotation,
    shape_of,
    tflops,
    unsupported_reason,
)
from pytest_vitperf.measure.measurement import Measurement, Spec
from pytest_vitperf.numerics import check_gemm
from pytest_vitperf.report.pictures import write
from pytest_vitperf.report.tables import gemm_summary
from pytest_vitperf.verdicts.rows import judge_rows

SMALL = GemmShape(48, 64, 256)
SUITES = Path(__file__).parent.parent / "suites"


def test_shapes_are_seed_002s_and_vit_b16s_linears_at_batch_64() -> None:
    dims = {(s.m, s.n, s.k) for s in SHAPES}
    assert (4096, 4096, 4096) in dims
    assert {(m, n, 4096) for m in (1, 8, 32, 128) for n in (4096, 11008)} <= dims
    vit = {s.layer: (s.m, s.n, s.k) for s in SHAPES if s.layer}
    assert vit == {
        "vitb16-qkv": (12608, 2304, 768),
        "vitb16-proj": (12608, 768, 768),
        "vitb16-fc1": (12608, 3072, 768),
        "vitb16-fc2": (12608, 768, 3072),
    }
    assert len({s.name for s in SHAPES}) == len(SHAPES)


@pytest.mark.parametrize("kind", [k for k in KINDS if not KINDS[k].blackwell])
def test_each_kind_s_cpu_product_is_within_its_bound(kind: str) -> None:
    g = operands(SMALL, kind, "cpu")
    out = g.launch()
    assert out.shape[1] == SMALL.n and out.shape[0] >= SMALL.m
    check = g.check(out)
    assert check.ok, check
    # one element moved past its bound (INT8's bound is zero: one unit is enough) fails the check
    wrong = out.double()
    wrong[3, 5] += max(2 * check.max_bound, 1.0) + abs(float(wrong[3, 5])) * 0.02
    assert g.check(wrong).violations >= 1


def test_a_narrower_output_widens_the_bound_by_its_rounding() -> None:
    a = np.random.default_rng(0).standard_normal((4, 32))
    b = np.random.default_rng(1).standard_normal((8, 32))
    exact = a @ b.T
    bf16 = torch.from_numpy(exact).to(torch.bfloat16).double().numpy()
    assert not check_gemm(a, b, bf16).ok  # BF16 rounding is far beyond FP32 accumulation
    assert check_gemm(a, b, bf16, output_roundoff=2.0**-8).ok


def test_int8_is_padded_to_the_rows_int_mm_accepts() -> None:
    g = operands(GemmShape(1, 64, 128), "int8", "cpu")
    assert g.launch().shape == (32, 64)
    assert g.check(g.launch()).ok
    assert describe(GemmShape(1, 64, 128), "int8")["padded_m"] == 32
    assert "padded_m" not in describe(GemmShape(64, 64, 128), "int8")


@pytest.mark.parametrize(
    ("device", "kind", "peak", "gpu"),
    [
        ("NVIDIA H100 80GB HBM3", "fp16", 989.5, "H100 SXM"),
        ("NVIDIA H100 80GB HBM3", "fp8-row", 1979.0, "H100 SXM"),
        ("NVIDIA H100 PCIe", "bf16", 756.5, "H100 PCIe"),
        ("NVIDIA H100 NVL", "int8", 1670.5, "H100 NVL"),
        ("NVIDIA H200", "fp8-tensor-fast", 1979.0, "H200 SXM"),
        ("NVIDIA H200 NVL", "fp16", 835.5, "H200 NVL"),
    ],
)
def test_dense_peaks_per_gpu(device: str, kind: str, peak: float, gpu: str) -> None:
    found = dense_peak(device, kind)
    assert found is not None and found[0] == peak and found[1].gpu == gpu
    assert "datasheet" in found[1].source


def test_unknown_gpus_and_fp4_have_no_peak() -> None:
    assert dense_peak("NVIDIA L4", "fp16") is None
    assert dense_peak("NVIDIA H100 80GB HBM3", "nvfp4") is None
    assert dense_peak("NVIDIA H100 80GB HBM3", "fp32") is None  # a ViT's precision, not a GEMM kind


def test_skip_reasons_name_what_is_missing() -> None:
    assert unsupported_reason("fp8-row", 90) is None
    assert "sm_100 or later); this is sm_90" in (unsupported_reason("nvfp4", 90) or "")
    assert "not written yet" in (unsupported_reason("mxfp8", 100) or "")
    assert "needs sm_89" in (unsupported_reason("fp8-tensor", 80) or "")
    assert "measured on a GPU" in (unsupported_reason("fp16", None) or "")
    assert unsupported_reason("fp16", None, timed=False) is None
    assert "this is a CPU" in (unsupported_reason("nvfp4", None, timed=False) or "")


def _measured(
    shape: GemmShape, kind: str, median_ms: float, device: str = "NVIDIA H200", copies: int = 4
) -> Measurement:
    spec = Spec(shape.name, kind, 1, "torch", "2.11.0", device, sm=90, timer="cuda-event", gpu_index=0,
                gpu_uuid="GPU-1", options=describe(shape, kind, copies))  # fmt: skip
    return Measurement(spec, (median_ms,) * 9)


def test_the_summary_gives_tflops_share_of_peak_and_speedup() -> None:
    shape = SHAPES[0]  # 4096^3: 137.4 GFLOP
    ms = [_measured(shape, "fp16", 0.2), _measured(shape, "fp8-tensor", 0.125), _measured(SMALL, "int8", 0.01)]
    assert tflops(shape, 0.2) == pytest.approx(687.2, abs=0.1)
    lines = gemm_summary(ms)
    rows = {line.split()[2]: line for line in lines[2:5]}
    assert "687.2" in rows["fp16"] and "69% of 990" in rows["fp16"]
    assert (
        "1099.5" in rows["fp8-tensor"] and "56% of 1979" in rows["fp8-tensor"] and rows["fp8-tensor"].endswith("1.60x")
    )
    assert rows["int8"].endswith("-")  # no FP16 of that shape to compare with
    assert lines[5].startswith("roofs (dense, at the datasheet's boost clock; HBM bandwidth): H200 SXM: NVIDIA H200")
    assert lines[5].endswith("4.8 TB/s")
    assert lines[-1] == (
        "operands rotated over 4 copies holding more than twice the L2, so each launch reads them from HBM"
    )
    assert shape_of(ms[0].spec.options) == shape and shape_of({}) is None


def test_the_roofline_columns_and_the_bound() -> None:
    """4096^3 in FP16 moves 96 MiB for 137 GFLOP: 1365 FLOP/B, above the H100 SXM's ridge of 989.5 / 3.35 = 295, so
    compute bound; a decode GEMM (M = 1) does 1 FLOP per byte, memory bound, and at 3.35 TB/s it reads 32 MiB in
    10 us."""
    big, decode = SHAPES[0], GemmShape(1, 4096, 4096)
    assert bytes_moved(big, "fp16") == 3 * 4096 * 4096 * 2
    assert bytes_moved(decode, "fp8-row") == 4097 * 4096 + 4096 * 2  # FP8 operands, a BF16 output
    assert bytes_moved(SMALL, "int8") == (48 + 64) * 256 + 48 * 64 * 4  # int32 out
    r = roofline(big, "fp16", 0.2, "NVIDIA H100 80GB HBM3")
    assert r.intensity == pytest.approx(1365.3, abs=0.1) and r.ridge == pytest.approx(295.4, abs=0.1)
    assert r.bound == "compute" and r.of_peak == pytest.approx(687.2 / 989.5, rel=1e-3)
    d = roofline(decode, "fp16", 0.0101, "NVIDIA H100 80GB HBM3")
    assert d.bound == "memory" and d.intensity == pytest.approx(1.0, abs=0.01)
    assert d.gbps == pytest.approx(bytes_moved(decode, "fp16") / 0.0101e-3 / 1e9) and 0.95 < (d.of_hbm or 0) < 1.0
    unknown = roofline(big, "fp16", 0.2, "NVIDIA L4")
    assert unknown.bound is None and unknown.of_hbm is None and unknown.tflops == pytest.approx(687.2, abs=0.1)


def test_rotation_holds_more_than_twice_the_l2_and_every_copy_gives_the_same_product() -> None:
    l2 = 50 * 2**20  # an H100's
    for shape in SHAPES:
        for kind in ("fp16", "fp8-row", "int8"):
            n = rotation(shape, kind, l2)
            assert n >= 2 and n * operand_bytes(shape, kind) > 2 * l2
            assert (n - 1) * operand_bytes(shape, kind) <= 2 * l2 or n == 2  # no more copies than that needs
    g = operands(SMALL, "fp16", "cpu", copies=3)
    outs = [g.launch() for _ in range(4)]  # the 4th launch is the first copy's again
    assert g.copies == 3 and all(torch.equal(outs[0], o) for o in outs)
    assert g.check(outs[2]).ok
    assert describe(SMALL, "fp16", 3)["operands"] == {"copies": 3, "mib": 0.2}
    assert describe(SMALL, "fp16")["operands"]["hot"] is True


def test_hot_rows_say_so_in_the_table() -> None:
    hot = _measured(SHAPES[0], "fp16", 0.2, copies=1)
    lines = gemm_summary([hot])
    assert lines[2].startswith("4096x4096x4096 hot")
    assert lines[-1].startswith("hot: one set of operands launched back to back (--vitperf-gemm-hot)")


def test_the_summary_says_how_many_launches_a_graphed_sample_holds() -> None:
    shape = SHAPES[0]
    graphed = [
        replace(m, spec=replace(m.spec, options={**m.spec.options, "launches_per_sample": n}))
        for m, n in ((_measured(shape, "fp16", 0.2), 5), (_measured(SMALL, "fp16", 0.01), 100))
    ]
    assert gemm_summary(graphed)[-1] == (
        "each sample: one CUDA graph of 5-100 back-to-back launches, divided by their number (launches_per_sample "
        "in the JSON)"
    )
    assert not any("CUDA graph" in line for line in gemm_summary([_measured(shape, "fp16", 0.2)]))


def test_the_report_draws_gemms_apart_from_the_vit_families(tmp_path: Path) -> None:
    ms = [_measured(s, k, 0.1 + i / 100) for i, s in enumerate(SHAPES[:3]) for k in ("fp16", "bf16", "fp8-row")]
    files = write(tmp_path, ms, judge_rows(ms, {}))
    pngs = [p.name for p in files if p.suffix == ".png"]
    assert pngs == ["gemm-nvidia-h200-GPU-1.png"]  # one figure of the GEMMs, none per shape
    assert (tmp_path / pngs[0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (tmp_path / "report.md").read_text()
    assert "## GEMMs" in report and "% of 990" in report


def test_the_suite_checks_on_a_cpu_and_skips_its_timings_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.copy_example(str(SUITES / "test_gemm.py"))
    r = pytester.runpytest("--gpu-bench", "-p", "no:cacheprovider", "-rs", "-k", "m8-n4096-k4096 and not fp16")
    r.assert_outcomes(passed=5, skipped=9)  # bf16, three FP8 and INT8 checked; mxfp8 and nvfp4 skip too
    r.stdout.fnmatch_lines(["*GEMM throughput is measured on a GPU: a CPU has no tensor-core peak*"])
    r.stdout.fnmatch_lines(["*nvfp4 needs Blackwell's block-scaled tensor cores (sm_100 or later); this is a CPU*"])
