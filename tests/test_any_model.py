"""Any model a user deploys (engines/models/zoo.py, hookspec.pytest_vitperf_models, --vitperf-weights): timm names with
the closest names for a typo, a conftest-registered model through the latency suite, weights from a file, and one
line for weights that do not fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_vitperf.engines.models.zoo import build_model, canonical_model_name, unknown_model_reason
from pytest_vitperf.measure.measurement import read_benchmark_json
from pytest_vitperf.workers import family_of
from tests.conftest import FAST

REGISTERED = Path(__file__).resolve().parents[1] / "examples" / "own-model" / "conftest.py"  # the docs' example


def test_names_are_taken_as_given_and_checked_against_timm_with_the_closest_names() -> None:
    assert canonical_model_name("vit_base") == "vit_base_patch16_224"  # the zoo's aliases still hold
    assert canonical_model_name(" DeiT_Small_Patch16_224 ") == "deit_small_patch16_224"
    assert canonical_model_name("vit_base_patch14_dinov2.lvd142m") == "vit_base_patch14_dinov2.lvd142m"
    assert canonical_model_name("vit-base") is None  # '-' joins a test id's parameters
    assert unknown_model_reason("eva02_base_patch14_224.mim_in22k") is None
    assert unknown_model_reason("vit_so400m_patch14_siglip_224") is None
    assert unknown_model_reason("patchify_s8", registered=["patchify_s8"]) is None
    reason = unknown_model_reason("deit_smal_patch16_224")
    assert reason is not None and "closest: deit_small_patch16_224" in reason
    hub = unknown_model_reason("dinov2_vitb14")  # torch.hub's name for timm's vit_base_patch14_dinov2
    assert hub is not None and "vit_base_patch14_dinov2" in hub
    in_1k = "deit_small_patch16_224.fb_in1k"
    assert family_of(f"x.py::test_latency[{in_1k}-b8-fp16]") == f"{in_1k}-b8"
    assert family_of("x.py::test_gemm_speed[gemm-m128-n4096-k4096-bf16]") is None


def test_random_layer_scale_gains_are_set_as_a_trained_model_s_and_the_header_says_so(
    suite: pytest.Pytester, tmp_path: Path
) -> None:
    """timm starts DeiT-3's LayerScale at 1e-6, subnormal in FP16: with random weights its FP16 engine failed the
    accuracy bound (cosine 0.99901 against 0.9999 on a CPU). With the gains as a trained model's, FP16 has its rows;
    weights from a file keep their own gains."""
    import torch

    from pytest_vitperf.engines.models.zoo import TRAINED_LAYER_SCALE, weights_note

    gains = [p for n, p in build_model("deit3_small_patch16_224").named_parameters() if n.endswith("gamma")]
    assert len(gains) == 24 and all(bool((g == TRAINED_LAYER_SCALE).all()) for g in gains)
    own = build_model("deit3_small_patch16_224")
    for name, p in own.named_parameters():
        if name.endswith("gamma"):
            p.data.fill_(0.37)
    path = tmp_path / "deit3.pt"
    torch.save(own.state_dict(), path)
    loaded = build_model("deit3_small_patch16_224", weights=path)
    assert all(bool((p == 0.37).all()) for n, p in loaded.named_parameters() if n.endswith("gamma"))
    assert weights_note(["deit3_small_patch16_224", "vit_small_patch16_224"], [], []) == (
        "deit3_small_patch16_224 (random weights, seed 0, LayerScale 0.1 as trained), vit_small_patch16_224 (random "
        "weights, seed 0)")
    out = suite.path / "run.json"
    result = suite.runpytest(*FAST, "--vitperf-models=deit3_small_patch16_224", "--vitperf-precisions=fp32,fp16",
                             f"--benchmark-json={out}")  # fmt: skip
    result.assert_outcomes(passed=2)
    assert {m.spec.precision for m in read_benchmark_json(out)} == {"fp32", "fp16"}


def test_a_typo_is_one_line_with_the_closest_names(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*FAST, "--vitperf-models=deit_smal_patch16_224")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in result.stderr.lines if "deit_smal_patch16_224" in x]
    assert "closest: deit_small_patch16_224" in line and line.endswith("pytest --gpu-bench --vitperf-models NAME")


def test_a_timm_model_and_a_registered_one_run_through_the_latency_suite(suite: pytest.Pytester) -> None:
    suite.makeconftest(REGISTERED.read_text())
    out = suite.path / "run.json"
    result = suite.runpytest(
        *FAST, "--vitperf-models=patchify_s8,deit_tiny_patch16_224", "--vitperf-precisions=fp32,fp16",
        f"--benchmark-json={out}", "-rs",
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    header = "\n".join(result.outlines[:8])
    assert "patchify_s8 (registered by a conftest.py)" in header
    assert "deit_tiny_patch16_224 (random weights, seed 0)" in header
    rows = {(m.spec.model, m.spec.precision) for m in read_benchmark_json(out)}
    assert rows == {(m, p) for m in ("patchify_s8", "deit_tiny_patch16_224") for p in ("fp32", "fp16")}


def test_the_run_models_get_attention_verdicts_and_a_model_without_patches_is_not_a_vit(suite: pytest.Pytester) -> None:
    suite.makeconftest(REGISTERED.read_text())
    attention = Path(__file__).resolve().parents[1] / "suites" / "test_attention_shapes.py"
    suite.makepyfile(test_attention_shapes=attention.read_text())
    result = suite.runpytest(
        *FAST, "test_attention_shapes.py", "-k", "run_models", "--vitperf-precisions=fp16,int8", "-rsx",
        "--vitperf-models=vit_small_patch14_dinov2,patchify_s8",
    )  # fmt: skip
    result.assert_outcomes(passed=1, xfailed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]2] *: not a ViT: Patchify has no patch_embed with a patch_size*",
            "XFAIL *[[]vit_small_patch14_dinov2-int8] - int8_mha_seq: sequence length 1370; needs <= 512*",
        ]
    )


def test_weights_from_a_file_and_one_line_for_weights_that_do_not_fit(suite: pytest.Pytester) -> None:
    from safetensors.torch import save_file

    fitting = build_model("vit_tiny", seed=7)
    save_file(fitting.state_dict(), str(suite.path / "tiny.safetensors"))
    other = build_model("vit_tiny", num_classes=10)
    save_file(other.state_dict(), str(suite.path / "ten.safetensors"))

    run = (*FAST, "--vitperf-models=vit_tiny", "--vitperf-precisions=fp32")
    ok = suite.runpytest(*run, "--vitperf-weights=vit_tiny=tiny.safetensors")
    ok.assert_outcomes(passed=1)
    assert f"vit_tiny_patch16_224 ({suite.path / 'tiny.safetensors'})" in "\n".join(ok.outlines[:8])

    bad = suite.runpytest(*run, "--vitperf-weights=vit_tiny=ten.safetensors")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in bad.stderr.lines if "do not fit" in x]
    assert "'head.weight' is [10, 192] in the file, [1000, 192] in the model" in line
    assert line.endswith("--vitperf-weights NAME=" + str(suite.path / "ten.safetensors"))


def test_a_registered_model_takes_weights_from_a_file(suite: pytest.Pytester) -> None:
    import runpy

    import torch
    from safetensors.torch import save_file

    suite.makeconftest(REGISTERED.read_text())
    module = runpy.run_path(str(REGISTERED))["Patchify"]()
    with torch.no_grad():
        for p in module.parameters():
            p.fill_(0.5)  # weights no seed draws: the run reads them or the checksum below differs
    save_file(module.state_dict(), str(suite.path / "own.safetensors"))
    suite.makepyfile(test_weights="""
def test_loaded(vitperf_session):
    import torch
    model = vitperf_session.model("patchify_s8")
    assert all(torch.all(p == 0.5) for p in model.parameters())
""")
    run = (*FAST, "test_weights.py", "--vitperf-models=patchify_s8")
    ok = suite.runpytest(*run, "--vitperf-weights=patchify_s8=own.safetensors")
    ok.assert_outcomes(passed=1)
    weights = suite.path / "own.safetensors"
    assert f"patchify_s8 (registered by a conftest.py, weights {weights})" in "\n".join(ok.outlines[:8])
    pretrained = suite.runpytest(*run, "--vitperf-weights=patchify_s8=pretrained")
    assert pretrained.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in pretrained.stderr.lines if "timm has no pretrained weights" in x]
    assert line.endswith("--vitperf-weights patchify_s8=FILE")


def test_pretrained_weights_come_from_the_local_cache_only(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(suite.path / "empty-hub-cache"))
    result = suite.runpytest(*FAST, "--vitperf-models=vit_tiny", "--vitperf-weights=vit_tiny=pretrained")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in result.stderr.lines if "pretrained weights" in x]
    assert "not in the local cache" in line and "timm.create_model('vit_tiny_patch16_224', pretrained=True)" in line


@pytest.mark.parametrize(
    ("value", "message"),
    [("vit_tiny", "is not MODEL=FILE or MODEL=pretrained"), ("vit-tiny=w.pth", "is not a model name")],
)
def test_malformed_weights_are_usage_errors(suite: pytest.Pytester, value: str, message: str) -> None:
    result = suite.runpytest(*FAST, f"--vitperf-weights={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


def test_a_missing_weights_file_is_one_line(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*FAST, "--vitperf-models=vit_tiny", f"--vitperf-weights=vit_tiny={Path('nowhere.pth')}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0].endswith("nowhere.pth: does not exist")


HUGE = """
import torch

def pytest_vitperf_models(config):
    # 3 x 200000 x 200000 FP32 is 480 GB an image: no host or GPU of today holds it
    return {"giant_input": lambda: (torch.nn.Conv2d(3, 8, 16, 16), (3, 200_000, 200_000))}
"""


def test_an_engine_that_cannot_fit_skips_with_the_numbers(suite: pytest.Pytester) -> None:
    suite.makeconftest(HUGE)
    result = suite.runpytest(*FAST, "--vitperf-models=giant_input", "--vitperf-precisions=fp32", "-rs")
    result.assert_outcomes(skipped=1)
    (line,) = [x for x in result.outlines if "SKIPPED" in x]
    assert "giant_input fp32 b1 needs about" in line and "GiB free on" in line
    assert line.endswith("lower the batch: --vitperf-batch-sizes 1,8")


PARTLY_LINEAR = """
import torch

class PartlyLinear(torch.nn.Module):
    # patches, an MLP of nn.Linear, and a GEMM on a bare parameter that no recipe sees as a layer
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Conv2d(3, 64, kernel_size=8, stride=8)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64))
        self.mix = torch.nn.Parameter(torch.randn(64, 256) / 8)
        self.head = torch.nn.Linear(256, 10)

    def forward(self, x):
        t = self.embed(x).flatten(2).transpose(1, 2)
        return self.head((self.mlp(t) @ self.mix).mean(1))

def pytest_vitperf_models(config):
    return {"partly_linear": lambda: (PartlyLinear(), (3, 32, 32))}
"""


def test_coverage_names_per_model_what_a_recipe_left_in_high_precision(suite: pytest.Pytester) -> None:
    import shutil

    suite.makeconftest(PARTLY_LINEAR)
    suite.makepyfile(own_model=REGISTERED.read_text())  # the docs' example: torch's fused encoder layer
    suite.syspathinsert()
    shutil.copy(Path(__file__).resolve().parents[1] / "suites" / "test_quantization_coverage.py", suite.path)
    result = suite.runpytest(
        *FAST, "test_quantization_coverage.py", "-p", "own_model", "-k", "fp8 and not mxfp8",
        "--vitperf-models=partly_linear,patchify_s8",
    )  # fmt: skip
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    # the bare-parameter GEMM holds 2 x 16 x 64 x 256 of the FLOPs: fp8 leaves it, and says so, for this model
    assert "fp8 on partly_linear: GEMM FLOPs" in text and "in high precision: MatMul /MatMul (" in text
    assert "patchify_s8 does not export to ONNX with the fp8 recipe (UnsupportedOperatorError: " in text


NO_LIEF = """
import sys


class NoLief:  # a machine where lief was never installed
    def find_spec(self, name, path=None, target=None):
        if name == "lief":
            raise ModuleNotFoundError("No module named 'lief'", name="lief")


sys.modules.pop("lief", None)
sys.meta_path.insert(0, NoLief())
"""


def test_a_missing_dependency_of_the_export_is_named_with_the_install_that_brings_it(suite: pytest.Pytester) -> None:
    """Model Optimizer's ONNX export imports lief, which it does not declare: a machine without it is a broken
    install, not a model that cannot export, and the failure says which."""
    import shutil

    suite.makeconftest(NO_LIEF)
    shutil.copy(Path(__file__).resolve().parents[1] / "suites" / "test_quantization_coverage.py", suite.path)
    result = suite.runpytest_subprocess(*FAST, "test_quantization_coverage.py", "-k", "fp8 and not mxfp8")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "the fp8 recipe's ONNX export imports lief, which is not installed here; install pytest-vitperf" in text
    assert "pip install -e . && pytest --gpu-bench suites/test_quantization_coverage.py --vitperf-models test_vit" in (
        text
    )
    assert "make the model export with torch.onnx.export" not in text


def test_a_model_whose_fused_attention_does_not_export_is_exported_unfused() -> None:
    import io

    import torch
    from timm.models.eva import Eva

    from pytest_vitperf.core.precision import get_precision
    from pytest_vitperf.engines.models.zoo import retry_unfused
    from pytest_vitperf.engines.quant.recipes import export

    # EVA-02's attention (rotary embeddings, one fused SDPA call), small
    torch.manual_seed(0)
    eva = Eva(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, use_rot_pos_emb=True, num_classes=3).eval()
    example = torch.randn(1, 3, 32, 32)
    assert eva.blocks[0].attn.fused_attn is True
    with pytest.raises(TypeError, match="is_causal"):  # what the TorchScript exporter makes of it, fused
        torch.onnx.export(eva, (example,), io.BytesIO(), dynamo=False, opset_version=17)
    proto = export(get_precision("fp32"), eva, example)
    assert {"MatMul", "Softmax"} <= {n.op_type for n in proto.graph.node}
    assert eva.blocks[0].attn.fused_attn is True  # given back as it was

    def fails() -> None:
        raise RuntimeError("not about attention")

    with pytest.raises(RuntimeError, match="not about attention"):  # nothing fused to turn off: the first error
        retry_unfused(fails, torch.nn.Linear(2, 2))



def test_the_nightly_set_collects_its_seven_vits_with_every_precision_and_batch(suite: pytest.Pytester) -> None:
    """`--vitperf-models nightly` stands for its models, each a name timm knows (checked as the run collects)."""
    from pytest_vitperf.engines.models.zoo import NIGHTLY

    args = ("--gpu-bench", "--vitperf-models=nightly,vit_tiny", "--vitperf-precisions=fp8,int8",
            "--vitperf-batch-sizes=1,64", "--collect-only", "-q", "-p", "no:cacheprovider")  # fmt: skip
    result = suite.runpytest(*args)
    assert result.ret == pytest.ExitCode.OK and len(NIGHTLY) == 7
    ids = [line for line in result.outlines if "::test_latency[" in line]
    assert len(ids) == (len(NIGHTLY) + 1) * 2 * 2
    assert {m for m in NIGHTLY if any(f"[{m}-b64-fp8]" in line for line in ids)} == set(NIGHTLY)


def test_on_a_cpu_each_model_of_the_nightly_set_skips_what_it_cannot_run_with_its_reason(
    suite: pytest.Pytester,
) -> None:
    """FP8 and INT8 need tensor cores: each of the 32 tests skips saying so, and the FP16 reference they would be
    compared with is not measured for nothing (no model is even built: seconds, not the ten minutes it took)."""
    import torch

    from pytest_vitperf.engines.models.zoo import NIGHTLY

    if torch.cuda.is_available():
        pytest.skip("on a GPU these precisions build; this is the CPU's side of the nightly set")
    args = ("--gpu-bench", "--vitperf-models=nightly", "--vitperf-precisions=fp8,int8", "--vitperf-batch-sizes=1,64",
            "-p", "no:cacheprovider")  # fmt: skip
    skips = [r for r in suite.inline_run(*args).getreports("pytest_runtest_logreport") if r.skipped]
    assert len(skips) == len(NIGHTLY) * 2 * 2
    for r in skips:
        precision = r.nodeid.rsplit("-", 1)[1].rstrip("]")
        assert f"{precision} needs an NVIDIA GPU with {precision.upper()} tensor cores" in str(r.longrepr), r.nodeid
    assert {(family_of(r.nodeid) or "").rsplit("-b", 1)[0] for r in skips} == set(NIGHTLY)
