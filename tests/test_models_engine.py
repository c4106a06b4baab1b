"""The model zoo and the torch backend on the CPU, for real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from pytest_vitperf.core.settings import Settings
from pytest_vitperf.engines.backends import VitperfError
from pytest_vitperf.engines.backends.torch import TorchBackend
from pytest_vitperf.engines.models.zoo import build_model, build_vit, input_size
from pytest_vitperf.fixtures import check_output
from pytest_vitperf.measure.env import Device

CPU = Device("test CPU")


def test_random_init_is_fixed_by_the_seed() -> None:
    a, b = build_model("vit_tiny"), build_model("vit_tiny_patch16_224")
    c = build_model("vit_tiny", seed=1)
    wa, wb, wc = (m.patch_embed.proj.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
    assert not a.training


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_local_weights_are_loaded(tmp_path: Path, suffix: str) -> None:
    source = build_model("vit_tiny", seed=7)
    path = tmp_path / f"weights{suffix}"
    if suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(source.state_dict(), str(path))
    else:
        torch.save({"state_dict": source.state_dict()}, path)
    loaded = build_model("vit_tiny", weights=path)
    assert torch.equal(loaded.head.weight, source.head.weight)


def test_bad_model_names_and_weights_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown model 'vit-huge'; valid: vit_tiny_patch16_224"):
        build_model("vit-huge")
    with pytest.raises(ValueError, match=r"unknown model 'vit_hug_patch14_224'.*closest: vit_huge_patch14_224"):
        build_model("vit_hug_patch14_224")
    with pytest.raises(ValueError, match="does not exist"):
        build_model("vit_tiny", weights=tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    torch.save([1, 2, 3], junk)
    with pytest.raises(ValueError, match="does not hold a state dict"):
        build_model("vit_tiny", weights=junk)


def test_input_size_follows_timm_config() -> None:
    assert input_size(build_model("vit_tiny")) == (3, 224, 224)
    assert input_size(build_model("vit_tiny", img_size=256)) == (3, 256, 256)


def prepare(model: torch.nn.Module, precision: str = "fp32", batch: int = 2):
    return TorchBackend().prepare(
        model,
        model_name="vit_tiny_patch16_224",
        precision=precision,
        batch=batch,
        device=CPU,
        settings=Settings(),
    )


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_each_precision_is_converted_once_and_its_batches_share_it(precision: str) -> None:
    """The torch backend keeps the FP32 model it is given (keeps_model): it copies and converts it once per precision,
    and the engines of every batch run that one conversion, each with its own outputs; another build of a batch gets
    a copy of its own. Once no engine runs a conversion it is freed."""
    import gc

    backend = TorchBackend()
    source = build_model("test_vit")
    before = {k: v.clone() for k, v in source.state_dict().items()}

    def engine(batch: int) -> Any:
        return backend.prepare(source, model_name="test_vit", precision=precision, batch=batch, device=CPU,
                               settings=Settings())  # fmt: skip

    b1, b3, b1_again = engine(1), engine(3), engine(1)
    assert b1.model is b3.model and b1_again.model is not b1.model
    assert b1.describe().get("prepare_steps", {}).get("copy") and not b3.describe().get("prepare_steps", {}).get("copy")
    assert b1.output().shape == (1, 1000) and b3.output().shape == (3, 1000)
    assert all(torch.equal(before[k], v) and v.dtype == torch.float32 for k, v in source.state_dict().items())
    assert b1.describe().get("quantization") == b3.describe().get("quantization")
    del b1, b3, b1_again
    gc.collect()
    assert len(backend._converted) == 0


@pytest.mark.parametrize("dtype", [torch.float16, None])
def test_a_copy_is_cast_as_to_casts_and_shares_no_memory_with_its_source(dtype: torch.dtype | None) -> None:
    """The backend copies a model straight into the engine's device and dtype: the same tensors `.to()` makes of a
    deep copy, tied weights still tied and integer buffers not cast, and nothing shared with the source, even where
    neither the device nor the dtype changes (calibration then writes into the copy)."""
    import copy

    from pytest_vitperf.engines.backends.torch import _copied

    source = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)).train()
    source[1].weight = source[0].weight
    source.register_buffer("steps", torch.arange(3))
    made = _copied(source, torch.device("cpu"), dtype)
    want = copy.deepcopy(source).to(torch.device("cpu"), dtype).state_dict()
    assert made.state_dict().keys() == want.keys() and not made.training
    assert all(torch.equal(v, want[k]) and v.dtype == want[k].dtype for k, v in made.state_dict().items())
    assert made[1].weight is made[0].weight and made.get_buffer("steps").dtype == torch.int64
    ours = {t.data_ptr() for t in (*source.parameters(), *source.buffers())}
    assert not ours & {t.data_ptr() for t in (*made.parameters(), *made.buffers())}


def test_cpu_engine_runs_the_batch_in_its_dtype() -> None:
    engine = prepare(build_model("vit_tiny"), "bf16", batch=3)
    out = engine.output()
    assert out.shape == (3, 1000) and out.dtype == torch.float32
    assert engine.describe()["dtype"] == "bfloat16" and engine.describe()["mode"] == "eager"
    check_output(engine)


def test_nan_outputs_are_refused_with_the_reason() -> None:
    model = build_model("vit_tiny")
    with torch.no_grad():
        model.head.weight.fill_(float("nan"))
    with pytest.raises(VitperfError, match=r"produced 2000 non-finite outputs of 2000.*--vitperf-precisions fp32,fp32"):
        check_output(prepare(model))


def test_an_output_far_from_fp32_fails_with_the_numbers() -> None:
    """The bound is the precision's registry entry: FP16 must stay within cosine 0.9999 of the FP32 model."""
    engine = prepare(build_model("vit_tiny"), "fp16", batch=2)
    with torch.inference_mode():
        same = build_model("vit_tiny")(engine.inputs.float())
        other = build_model("vit_tiny", seed=1)(engine.inputs.float())  # another model: what a broken engine computes
    err = check_output(engine, same)
    assert err is not None and err.cosine > 0.9999 and 0 < err.max_abs < 0.01 and err.vs == "fp32"
    with pytest.raises(VitperfError, match=r"output cosine -?0\.\d+ vs fp32 is below fp16's bound 0\.9999 "
                       r"\(max-abs error .*, relative L2 .*\).*--vitperf-precisions fp32,fp16$"):  # fmt: skip
        check_output(engine, other)


def test_torch_backend_refuses_precisions_it_does_not_build() -> None:
    for name in ("mxfp8", "fp8-sparse24"):
        with pytest.raises(VitperfError, match=f"{name} is not built by the torch backend.*--vitperf-backend"):
            prepare(build_model("vit_tiny"), name)
    with pytest.raises(VitperfError, match="fp16-sparse24 runs its GEMMs in cuSPARSELt, which needs a CUDA GPU"):
        prepare(build_model("vit_tiny"), "fp16-sparse24")


def test_the_sparse_recipe_leaves_every_linear_two_of_four() -> None:
    """What the torch backend hands to cuSPARSELt on a GPU: Model Optimizer's mask, baked into plain Linears."""
    import modelopt.torch.sparsity as mts

    from pytest_vitperf.core.precision import get_precision
    from pytest_vitperf.engines.quant.realquant import is_24_sparse
    from pytest_vitperf.engines.quant.recipes import apply

    model = mts.export(apply(get_precision("fp16-sparse24").recipe, build_model("vit_tiny")))
    linears = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 49 and all(is_24_sparse(w) for w in linears[:48])
    assert all(float((w == 0).float().mean()) == 0.5 for w in linears[:48])
    assert not is_24_sparse(build_model("vit_tiny").blocks[0].mlp.fc1.weight)  # dense weights are not


# vit_tiny has 49 Linears; _scaled_mm refuses the 1000x192 head (1000 % 16 != 0), so FP8 keeps it in FP16.
@pytest.mark.parametrize(("precision", "converted"), [("fp8", 48), ("int8", 49)])
def test_fp8_and_int8_run_real_gemms_with_calibrated_static_scales(precision: str, converted: int) -> None:
    """The same kernels as on a GPU (torch._scaled_mm / torch._int_mm have CPU implementations), so the path that
    the GPU benchmark times is checked here for its output and its stored weights."""
    fp16 = prepare(build_model("vit_tiny"), "fp16", batch=2)
    engine = prepare(build_model("vit_tiny"), precision, batch=2)
    info = engine.describe()
    assert info["quantization"].startswith(f"{converted} Linears in {precision}"), info["quantization"]
    assert info["quantization"].endswith("layer types it does not convert, kept in high precision: Conv2d x1 "
                                         "(patch_embed.proj)")  # fmt: skip
    # the Linears hold 1-byte weights: the model shrinks to well under the FP16 one's 2 bytes a weight
    assert info["weight_bytes"] < 0.6 * fp16.describe()["weight_bytes"]
    assert info["parameters"] == fp16.describe()["parameters"]
    with torch.no_grad():
        reference = build_model("vit_tiny")(engine.inputs.float())  # the same seeded weights, in FP32
    out = engine.output()
    cosine = torch.nn.functional.cosine_similarity(out.flatten(), reference.flatten(), dim=0)
    assert cosine > 0.99, f"{precision}: output cosine {cosine:.4f} against FP32"
    assert not torch.equal(out, fp16.output())  # quantized, not the FP16 path


def test_smoothquant_runs_its_pre_scales_on_the_int8_gemms() -> None:
    """int8-smoothquant on the torch backend: Model Optimizer's SmoothQuant calibration (per-channel pre-scales, the
    weights rescaled by their inverse), executed by real INT8 Linears that apply the pre-scales. Their output follows
    Model Optimizer's own fake-quantized model; without the pre-scales it would not (the weights hold the inverse)."""
    from pytest_vitperf.core.precision import get_precision
    from pytest_vitperf.engines.quant.recipes import apply
    from pytest_vitperf.numerics import cosine

    engine = prepare(build_model("vit_tiny"), "int8-smoothquant", batch=2)
    assert engine.describe()["quantization"].startswith("49 Linears in int8"), engine.describe()["quantization"]
    scales = [m.pre_scale for m in engine.model.modules() if getattr(m, "pre_scale", None) is not None]
    assert len(scales) == 49 and any(not torch.allclose(s, torch.ones_like(s)) for s in scales)
    fake = apply(get_precision("int8-smoothquant").recipe, build_model("vit_tiny"))
    with torch.inference_mode():
        expected = fake(engine.inputs.float())
    out = engine.output()
    assert cosine(expected, out) > 0.999
    for m in engine.model.modules():  # the same engine without its pre-scales computes something else
        if getattr(m, "pre_scale", None) is not None:
            m.pre_scale = None
    assert cosine(expected, engine.output()) < 0.99


@pytest.mark.parametrize("precision", ["int8-smoothquant"])
def test_a_linear_kept_in_high_precision_keeps_its_smoothquant_pre_scale(precision: str) -> None:
    """The digits ViT's 10-class head is too narrow for _int_mm and stays in FP32; SmoothQuant rescaled its weight
    by the inverse of a pre-scale that its dropped input quantizer held. The pre-scale is folded into the weight:
    without it the trained model's logits were off by about 30 on an H100 (docs/accuracy.md), and this random-weight
    one's cosine against Model Optimizer's fake quantization was 0.973 (0.997 with it; the fake quant also
    quantizes the head)."""
    from pytest_vitperf.core.precision import get_precision
    from pytest_vitperf.engines.quant.recipes import apply
    from pytest_vitperf.numerics import cosine

    model = build_model("vit_digits")
    engine = TorchBackend().prepare(
        model, model_name="vit_digits_patch4_32", precision=precision, batch=4, device=CPU, settings=Settings()
    )
    assert (
        "head (10x64: _int_mm needs dimensions divisible by 8, its pre-scale folded into the weight)"
        in (engine.describe()["quantization"])
    )
    fake = apply(get_precision(precision).recipe, build_model("vit_digits"))
    with torch.inference_mode():
        expected = fake(engine.inputs.float())
    assert cosine(expected, engine.output()) > 0.99


@pytest.mark.parametrize("precision", ["fp8", "fp8-attn", "int8-smoothquant"])
def test_a_converted_model_is_restored_bit_for_bit_without_model_optimizer(
    precision: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_vitperf.engines.quant.recipes as recipes

    settings = Settings(cache_dir=tmp_path)

    def engine() -> Any:
        return TorchBackend().prepare(build_model("vit_digits"), model_name="vit_digits_patch4_32",
                                      precision=precision, batch=4, device=CPU, settings=settings)  # fmt: skip

    first = engine()
    (entry,) = (tmp_path / "converted").glob(f"{precision}-*.pt")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("calibrated again instead of restoring the converted model")

    with monkeypatch.context() as mp:
        mp.setattr(recipes, "apply", refuse)
        second = engine()
    assert second.describe()["quantization"] == first.describe()["quantization"]
    a, b = first.model.state_dict(), second.model.state_dict()
    assert a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(first.output(), second.output())
    whole = entry.read_bytes()
    entry.write_bytes(whole[: len(whole) // 2])  # an interrupted write: converted again and rewritten
    assert torch.equal(engine().output(), first.output()) and entry.read_bytes() == whole


def test_a_model_in_bf16_is_keyed_for_the_caches(tmp_path: Path) -> None:
    """The caches hash a model's raw bytes; numpy, which the hash went through, has no bfloat16."""
    model = build_model("vit_digits").to(torch.bfloat16)
    engine = TorchBackend().prepare(model, model_name="vit_digits_patch4_32", precision="int8", batch=4, device=CPU,
                                    settings=Settings(cache_dir=tmp_path))  # fmt: skip
    assert engine.describe()["quantization"].startswith("8 Linears in int8")
    assert len(list((tmp_path / "converted").glob("int8-*.pt"))) == 1


def test_a_converted_model_that_does_not_fit_names_its_file(tmp_path: Path) -> None:
    def engine(model: torch.nn.Module) -> Any:
        return TorchBackend().prepare(model, model_name="vit_digits_patch4_32", precision="int8", batch=4,
                                      device=CPU, settings=Settings(cache_dir=tmp_path))  # fmt: skip

    engine(build_model("vit_digits"))
    (entry,) = (tmp_path / "converted").glob("int8-*.pt")
    saved = torch.load(entry, weights_only=True)
    saved["state"] = {k: v for k, v in saved["state"].items() if not k.startswith("head.")}
    torch.save(saved, entry)
    fits = r"converted model .*int8-\w+\.pt does not fit this model \(Missing key.*rm "
    with pytest.raises(VitperfError, match=fits):
        engine(build_model("vit_digits"))


def test_a_compiled_engine_is_static_whatever_was_compiled_before_it() -> None:
    """Every timm ViT runs the same forward code, so by default dynamo compiles the second engine it sees with another
    input size for symbolic sizes. In the main job the accuracy suite's ViT made every latency engine dynamic. Each
    engine must compile for its own shapes, as a TensorRT engine built for one batch does."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    created: list[object] = []
    real = ShapeEnv.create_symbol

    def counting(self: ShapeEnv, *args: Any, **kwargs: Any) -> Any:
        expr = real(self, *args, **kwargs)  # a sympy Integer for a static size, a Symbol for a dynamic one
        if not expr.is_number:
            created.append(args[0])
        return expr

    settings = Settings(compile="default")
    tiny = {"patch_size": 8, "embed_dim": 32, "depth": 1, "num_heads": 2}
    for img, batch in ((16, 3), (32, 2)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ShapeEnv, "create_symbol", counting)
            engine = TorchBackend().prepare(build_vit(img_size=img, **tiny), model_name="tiny", precision="fp32",
                                            batch=batch, device=CPU, settings=settings)  # fmt: skip
        assert engine.output().shape == (batch, 1000)
    assert created == [], f"symbolic sizes created for {created}"


@pytest.mark.parametrize(("mode", "deterministic"), [("default", False), ("deterministic", True)])
def test_the_deterministic_mode_compiles_without_timed_choices(mode: str, deterministic: bool) -> None:
    """Inductor picks some kernels by timing candidates as it compiles; two cold compiles of one engine then differ
    (up to 7.5% on an H200 at batch 1). `deterministic` compiles with those choices off, pointwise configs included,
    and only while compiling."""
    import torch._inductor.compile_fx as compile_fx

    seen: list[tuple[bool, bool]] = []
    real = compile_fx.compile_fx
    config = torch._inductor.config

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append((config.deterministic, not config.triton.autotune_pointwise))
        return real(*args, **kwargs)

    tiny = build_vit(img_size=16, patch_size=8, embed_dim=32, depth=1, num_heads=2)
    torch._dynamo.reset()  # dynamo would reuse another test's frame compiled for the same shapes
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compile_fx, "compile_fx", recording)
        engine = TorchBackend().prepare(tiny, model_name="tiny", precision="fp32", batch=2, device=CPU,
                                        settings=Settings(compile=mode))  # fmt: skip
    assert seen and seen[-1] == (deterministic, deterministic)  # torch.compile's options apply inside compile_fx
    assert (config.deterministic, config.triton.autotune_pointwise) == (False, True)
    assert engine.describe()["compile"] == mode
    torch.testing.assert_close(engine.output(), tiny.eval()(engine.inputs), rtol=1e-4, atol=1e-4)
