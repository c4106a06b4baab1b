"""Quantization coverage of each precision recipe on each of the run's models (ViT-B/16 by default on a GPU): which
share of the GEMM FLOPs each export runs in low precision. Full recipes must cover at least 95% of the FLOPs outside
attention (whose two batched matmuls they leave alone by design: 4% of ViT-B/16's FLOPs, 14% of ViT-Ti/16's; the
summary gives the share), and where one does not, the failure names the GEMMs it left in high precision;
nvfp4-mlp-only reports its partial figure (the situation of seed 000, whose "NVFP4" engine still spent a quarter of
its time in FP16 GEMMs)."""

import onnx
import pytest

from pytest_vitperf.engines.onnx.coverage import quantization_coverage
from pytest_vitperf.engines.quant.recipes import export_ahead, export_onnx

pytestmark = pytest.mark.gpu_bench
FULL = ["fp8", "int8", "int8-smoothquant", "mxfp8", "nvfp4"]
PARTIAL = ["nvfp4-mlp-only"]


@pytest.fixture(scope="module")
def exported(request, vitperf_session, vitperf_cache_dir):
    """`exported(name)`: the run's model `name` (FP32, its weights as the run gives them), exported ahead for this
    module's recipes. On the CPU, GPU or not: coverage is a property of the exported graph, and a GPU export first
    builds Model Optimizer's CUDA fake-quant extensions (about 3 minutes on a new machine, an H100's 16 cores)."""
    here = [item for item in request.session.items if getattr(item, "module", None) is request.module]
    models = {}

    def model(name):
        if name not in models:
            models[name] = vitperf_session.model(name)
            selected = [i.callspec.params["recipe"] for i in here if i.callspec.params["vitperf_model"] == name]
            export_ahead(selected, models[name], 1, cache_dir=vitperf_cache_dir)
        return models[name]

    return model


def missing_module(exc):
    """The module whose import failed under `exc`, else None: Model Optimizer raises its own ImportError over it."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            return exc.name
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def coverage_of(recipe, name, model, request, cache_dir):
    try:
        data = export_onnx(recipe, model, 1, cache_dir=cache_dir)
    except Exception as exc:  # the exporter's many kinds: an operator it cannot export, a dynamic shape, ...
        if (module := missing_module(exc)) is not None:  # a broken install, not a model that cannot export
            pytest.fail(f"the {recipe} recipe's ONNX export imports {module}, which is not installed here; install "
                        "pytest-vitperf with its dependencies, then run again: pip install -e . && pytest "
                        f"--gpu-bench suites/test_quantization_coverage.py --vitperf-models {name}",
                        pytrace=False)  # fmt: skip
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        pytest.fail(f"{name} does not export to ONNX with the {recipe} recipe ({type(exc).__name__}: {why}); TensorRT "
                    "builds from this export: make the model export with torch.onnx.export, then run again: pytest "
                    f"--gpu-bench suites/test_quantization_coverage.py --vitperf-models {name}",
                    pytrace=False)  # fmt: skip
    report = quantization_coverage(onnx.load_from_string(data))
    request.node.user_properties.append(("coverage", report.summary()))
    return report


@pytest.mark.parametrize("recipe", FULL)
def test_full_recipes_cover_95_percent(vitperf_model, recipe, exported, request, vitperf_cache_dir):
    report = coverage_of(recipe, vitperf_model, exported(vitperf_model), request, vitperf_cache_dir)
    assert report.weight_fraction >= 0.95, f"{recipe} on {vitperf_model}: {report.summary()}; {report.left_out()}"


@pytest.mark.parametrize("recipe", PARTIAL)
def test_partial_recipe_reports_its_coverage(vitperf_model, recipe, exported, request, vitperf_cache_dir):
    report = coverage_of(recipe, vitperf_model, exported(vitperf_model), request, vitperf_cache_dir)
    print(f"{recipe} on {vitperf_model}: {report.summary()}")
    assert 0.3 < report.fraction < 0.95, f"{recipe} on {vitperf_model}: {report.summary()}; {report.left_out()}"
    # what it leaves out is everything but the MLPs: no MLP Linear stays in high precision
    assert not [x.name for x in report.high_precision if "mlp" in x.name], report.left_out(most=10)
