"""Recipes, ONNX exports, quantization coverage and TensorRT-RTX ahead-of-time builds on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
import torch

from pytest_vitperf.core.precision import PRECISIONS, get_precision
from pytest_vitperf.engines.models.zoo import build_model
from pytest_vitperf.engines.onnx.coverage import quantization_coverage
from pytest_vitperf.engines.quant import recipes
from pytest_vitperf.engines.quant.recipes import export_ahead, export_onnx, opset
from pytest_vitperf.engines.tensorrt.plan import BuildOptions, PlanCache, build_cached
from pytest_vitperf.workers import use_threads

DATA = Path(__file__).parent / "data"
trt = pytest.importorskip("tensorrt_rtx", reason="tensorrt_rtx is not installed: pip install 'pytest-vitperf[rtx]'")
TARGET = BuildOptions(target="SM120")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vitperf-cache")


@pytest.fixture(scope="module")
def tiny() -> torch.nn.Module:
    return build_model("vit_tiny")


@pytest.fixture(scope="module")
def exports(tiny: torch.nn.Module, cache: Path) -> dict[str, bytes]:
    """vit_tiny through the recipes, exported here on the CPU (block formats through cpu_quant's kernels)."""
    recipes = ("fp16", "fp8", "int8", "fp16-sparse24", "nvfp4", "mxfp8", "nvfp4-mlp-only")
    return {r: export_onnx(r, tiny, 1, cache_dir=cache) for r in recipes}


def test_every_registry_entry_has_a_recipe() -> None:
    assert set(PRECISIONS) >= {"fp16", "bf16", "fp8", "fp8-attn", "int8", "int8-smoothquant", "mxfp8", "nvfp4"}
    assert {"nvfp4-mlp-only", "fp16-sparse24", "fp8-sparse24"} <= set(PRECISIONS)
    quantized = {n for n, p in PRECISIONS.items() if p.recipe.config is not None}
    assert quantized == {n for n, p in PRECISIONS.items() if p.weights not in ("fp32", "fp16", "bf16")}
    assert opset(get_precision("nvfp4-mlp-only")) == 23 and opset(get_precision("fp8")) == 20  # FP4 needs 23
    with pytest.raises(ValueError, match="unknown precision 'fp6'; valid: fp32, fp16"):
        export_onnx("fp6", torch.nn.Linear(2, 2), 1)


@pytest.mark.parametrize("recipe", ["nvfp4", "mxfp8"])
def test_cpu_exports_of_block_formats_equal_the_gpu_made_ones(exports: dict[str, bytes], recipe: str) -> None:
    """tests/data holds the same exports made on an NVIDIA H200 with Model Optimizer's Triton/CUDA kernels
    (`vitperf export`): the CPU kernels must reproduce every node and every initializer bit for bit."""
    from onnx import numpy_helper

    ours = onnx.load_from_string(exports[recipe])
    gpu = onnx.load(DATA / f"vit_tiny_patch16_224-{recipe}-b1.onnx")
    assert [(n.op_type, list(n.input), list(n.output)) for n in ours.graph.node] == [
        (n.op_type, list(n.input), list(n.output)) for n in gpu.graph.node
    ]
    theirs = {i.name: i for i in gpu.graph.initializer}
    assert {i.name for i in ours.graph.initializer} == set(theirs)
    for init in ours.graph.initializer:
        a, b = numpy_helper.to_array(init), numpy_helper.to_array(theirs[init.name])
        assert init.data_type == theirs[init.name].data_type and a.tobytes() == b.tobytes(), init.name


@pytest.mark.parametrize(
    ("recipe", "precision", "share"),
    [
        ("fp8", "fp8", 0.857),  # every Linear; attention (14% of vit_tiny's GEMM FLOPs) stays FP16
        ("int8", "int8", 0.857),
        ("fp16", "high", 1.0),
        ("nvfp4", "nvfp4", 0.834),  # every Linear in NVFP4, the patch-embedding Conv in FP8 (2.3%)
        ("mxfp8", "mxfp8", 0.834),
        ("nvfp4-mlp-only", "nvfp4", 0.556),  # the partial coverage of seed 000
    ],
)
def test_coverage_per_recipe(exports: dict[str, bytes], recipe: str, precision: str, share: float) -> None:
    report = quantization_coverage(onnx.load_from_string(exports[recipe]))
    assert report.fraction_at(precision) == pytest.approx(share, abs=0.002), report.summary()
    assert report.attention_quantized is False
    if recipe in ("nvfp4", "mxfp8"):
        assert report.fraction_at("fp8") == pytest.approx(0.023, abs=0.002)  # Conv2d kept in FP8
    if recipe == "nvfp4-mlp-only":
        names = {x.name for x in report.high_precision}
        assert any("attn/qkv" in n for n in names) and any("attn/proj" in n for n in names)


def test_int8_smoothquant_scales_every_linear_input(exports: dict[str, bytes], tiny: torch.nn.Module) -> None:
    """SmoothQuant shows in the export as a Mul by each Linear's `_pre_quant_scale` ahead of its QuantizeLinear;
    the default INT8 recipe has none. Coverage is the same: it changes scales, not what is quantized."""
    smooth = onnx.load_from_string(export_onnx("int8-smoothquant", tiny, 1))
    default = onnx.load_from_string(exports["int8"])

    def smoothed(model: onnx.ModelProto) -> set[str]:
        scales = {i.name for i in model.graph.initializer if i.name.endswith("input_quantizer._pre_quant_scale")}
        return {x for n in model.graph.node if n.op_type == "Mul" for x in n.input if x in scales}

    assert len(smoothed(smooth)) == 49 and smoothed(default) == set()  # 12 blocks x 4 Linears + the head
    assert quantization_coverage(smooth).fraction_at("int8") == pytest.approx(0.857, abs=0.002)
    assert build_cached(trt, "tensorrt-rtx", trt.__version__, smooth.SerializeToString(), TARGET).size_bytes > 5e6


def test_fp16_sparse24_weights_are_two_of_four(exports: dict[str, bytes]) -> None:
    import numpy as np
    from onnx import numpy_helper

    model = onnx.load_from_string(exports["fp16-sparse24"])
    # The exported MatMul weights are [in, out]: 2:4 runs along the input (reduction) axis.
    weights = [numpy_helper.to_array(i).astype(np.float32) for i in model.graph.initializer if len(i.dims) == 2]
    linear = [w for w in weights if w.shape[0] in (192, 768)]
    assert len(linear) == 48  # qkv, proj, fc1, fc2 in 12 blocks
    for w in linear:
        assert np.all((w.T.reshape(-1, 4) != 0).sum(axis=1) <= 2)
        assert (w == 0).mean() == 0.5


def test_export_cache_hits_by_content_and_rebuilds_truncated_files(tiny: torch.nn.Module, cache: Path) -> None:
    first = export_onnx("fp8", tiny, 1, cache_dir=cache)
    (cached,) = (cache / "onnx").glob("fp8-*.onnx")
    assert export_onnx("fp8", tiny, 1, cache_dir=cache) == first
    cached.write_bytes(first[:1000])  # an interrupted write
    assert export_onnx("fp8", tiny, 1, cache_dir=cache) == first
    other = build_model("vit_tiny", seed=3)
    assert export_onnx("fp8", other, 1, cache_dir=cache) != first  # other weights, other file
    assert len(list((cache / "onnx").glob("fp8-*.onnx"))) == 2


def test_exports_made_ahead_in_other_processes_are_found_by_export_onnx(
    tiny: torch.nn.Module, exports: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    restore = use_threads(4)  # a budget of 4 threads: two processes, whatever this machine has
    try:
        export_ahead(["fp8", "int8", "fp8"], tiny, 1, cache_dir=tmp_path)
    finally:
        restore()
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "onnx").glob("*.onnx")) == ["fp8", "int8"]

    def no_export(*args: object) -> None:
        raise AssertionError("exported again")

    monkeypatch.setattr(recipes, "export", no_export)
    for recipe in ("fp8", "int8"):  # read from the cache, and the same bytes as an export in this process
        assert export_onnx(recipe, tiny, 1, cache_dir=tmp_path) == exports[recipe]


@pytest.mark.parametrize("recipe", ["fp16", "fp8", "int8", "nvfp4", "mxfp8"])
def test_tensorrt_rtx_builds_sm120_engines_on_the_cpu(
    exports: dict[str, bytes], cache: Path, recipe: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines: list[str] = []
    engines = PlanCache(cache / "plans")
    first = build_cached(
        trt, "tensorrt-rtx", trt.__version__, exports[recipe], TARGET, cache=engines, progress=lines.append
    )
    second = build_cached(trt, "tensorrt-rtx", trt.__version__, exports[recipe], TARGET, cache=engines)
    assert first.cache in ("miss", "hit") and second.cache == "hit" and second.plan == first.plan
    assert first.size_bytes > 5e6
    with capsys.disabled():  # so that a CI log shows the build and the hit
        print(f"\n  {recipe}: {lines[0] if lines else 'cache hit on the first build'}; second build: {second.cache}")


def test_engine_cache_never_trusts_a_bad_entry(exports: dict[str, bytes], tmp_path: Path) -> None:
    engines = PlanCache(tmp_path)
    data = exports["fp16"]
    good = build_cached(trt, "tensorrt-rtx", trt.__version__, data, TARGET, cache=engines)
    assert good.path is not None and good.cache == "miss"
    meta = good.path.with_suffix(".json")

    good.path.write_bytes(good.plan[: len(good.plan) // 2])
    r = build_cached(trt, "tensorrt-rtx", trt.__version__, data, TARGET, cache=engines)
    assert r.cache.startswith("rebuilt: engine file corrupt or truncated") and r.plan == good.plan

    doc = json.loads(meta.read_text())
    doc["key"]["version"] = "0.0"
    meta.write_text(json.dumps(doc))
    r = build_cached(trt, "tensorrt-rtx", trt.__version__, data, TARGET, cache=engines)
    assert r.cache == "rebuilt: entry belongs to another build (foreign key)"

    meta.write_text("{")
    r = build_cached(trt, "tensorrt-rtx", trt.__version__, data, TARGET, cache=engines)
    assert r.cache == "rebuilt: metadata missing or unreadable"
    assert build_cached(trt, "tensorrt-rtx", trt.__version__, data, TARGET, cache=engines).cache == "hit"


def test_parser_errors_are_reported() -> None:
    from pytest_vitperf.engines.tensorrt.plan import EngineBuildError

    with pytest.raises(EngineBuildError, match="the ONNX parser refused the graph"):
        build_cached(trt, "tensorrt-rtx", trt.__version__, b"not an onnx file", TARGET)


@pytest.fixture(scope="module")
def vit_base_engines(cache: Path) -> dict[str, tuple[int, float]]:
    """FP16, FP8 and NVFP4 engines of vit_base_patch16_224, exported and built here on the CPU."""
    base = build_model("vit_base")
    out = {}
    for recipe in ("fp16", "fp8", "nvfp4"):
        data = export_onnx(recipe, base, 1, cache_dir=cache)
        result = build_cached(trt, "tensorrt-rtx", trt.__version__, data, TARGET, cache=PlanCache(cache / "plans"))
        out[recipe] = (result.size_bytes, quantization_coverage(onnx.load_from_string(data)).fraction)
    return out


@pytest.mark.slow(104)  # the three exports and builds, shared by the vit_base tests
def test_vit_base_fp8_engine_is_at_most_0_60_of_fp16(vit_base_engines: dict[str, tuple[int, float]]) -> None:
    """FP8 engines carry about 10 MB of fixed overhead, so the ratio means something only at this size."""
    fp16, fp8 = vit_base_engines["fp16"][0], vit_base_engines["fp8"][0]
    assert fp8 / fp16 <= 0.60, f"FP8 {fp8 / 1e6:.1f} MB vs FP16 {fp16 / 1e6:.1f} MB"


@pytest.mark.slow(104)
def test_vit_base_nvfp4_engine_is_at_most_0_40_of_fp16(vit_base_engines: dict[str, tuple[int, float]]) -> None:
    fp16, nvfp4 = vit_base_engines["fp16"][0], vit_base_engines["nvfp4"][0]
    assert nvfp4 / fp16 <= 0.40, f"NVFP4 {nvfp4 / 1e6:.1f} MB vs FP16 {fp16 / 1e6:.1f} MB"


@pytest.mark.slow(104)
@pytest.mark.parametrize("recipe", ["fp8", "nvfp4"])
def test_vit_base_exports_cover_95_percent_of_gemm_flops(
    vit_base_engines: dict[str, tuple[int, float]], recipe: str
) -> None:
    assert vit_base_engines[recipe][1] >= 0.95


def test_fp8_attn_quantizes_attention_where_fp8_does_not(tiny: torch.nn.Module, cache: Path) -> None:
    from pytest_vitperf.attention import check_attention_shapes

    fp8 = onnx.load_from_string(export_onnx("fp8", tiny, 1, cache_dir=cache))
    attn = onnx.load_from_string(export_onnx("fp8-attn", tiny, 1, cache_dir=cache))
    assert [v.rule for v in check_attention_shapes(fp8, "fp8")] == ["qdq_attention"]
    assert check_attention_shapes(attn, "fp8") == []
    report = quantization_coverage(attn)
    assert report.attention_quantized is True and report.fraction_at("fp8") == 1.0
    engine = build_cached(trt, "tensorrt-rtx", trt.__version__, attn.SerializeToString(), TARGET)
    assert engine.size_bytes > 5e6


def test_tensorrt_backend_skips_without_tensorrt() -> None:
    import importlib.util

    from pytest_vitperf.engines.backends import get_backend
    from pytest_vitperf.measure.env import Device

    reason = get_backend("tensorrt").unavailable_reason(Device("NVIDIA H100 80GB HBM3", sm=90))
    if importlib.util.find_spec("tensorrt") is None:
        assert reason is not None and reason.startswith("tensorrt is not installed")
    else:
        assert reason is None


def test_coverage_says_how_many_gemms_it_could_not_count() -> None:
    from pytest_vitperf.engines.onnx.coverage import CoverageReport, Gemm

    counted = [Gemm("/fc1/MatMul", "MatMul", 300, "fp8"), Gemm("/attn/MatMul", "MatMul", 100, "high", attention=True)]
    report = CoverageReport(list(counted))
    assert report.summary() == "GEMM FLOPs 0.00 G: fp8 75.0%, high 25.0%; attention (25.0%) in high precision"
    assert report.weight_fraction == 1.0 and report.fraction == 0.75
    report.gemms.append(Gemm("/fc2/MatMul", "MatMul", 0, "high"))  # shape inference lost its inputs
    assert report.summary().endswith("; 1 of 3 GEMMs of unknown shape, not counted")
    assert report.left_out(most=1) == "in high precision: MatMul /attn/MatMul (25.0%) and 1 more"


def test_the_real_quant_code_hash_reads_this_module_and_its_linears() -> None:
    """The hash that keys kept conversions and ready engines reads its sibling's source by path: a move that left the
    path behind failed every GPU engine of the main job (FileNotFoundError), which no CPU run otherwise reaches."""
    from pytest_vitperf.engines.quant import linears, realquant

    realquant.code_hash.cache_clear()
    assert len(realquant.code_hash()) == 16 and Path(linears.__file__).parent == Path(realquant.__file__).parent
