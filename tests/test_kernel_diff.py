"""Where a change in time went (measure/kernel_diff.py): kernel names normalised, groups whose changes add up to the
whole, intervals over repeated profiles, and a real profiled delay on a CPU found as the change."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_vitperf.measure.kernel_diff import diff, normalise

# Real kernel names from the profiler (Hopper cuBLAS and CUTLASS, ATen, Inductor), as this project's runs showed them.
ADD = "at::native::CUDAFunctor_add<c10::Half>"
GELU = ("at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() "
        "const::{lambda(c10::Half)#1}")  # fmt: skip


@pytest.mark.parametrize(
    ("name", "normalised"),
    [
        ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f16_tn_n_tilesize128x128x128",
         "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f16_tn_n_tilesize*"),
        ("nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT", "nvjet_hsh_*_*_*_v_bz_coopA_NNT"),
        ("nvjet_hsh_128x256_64x4_1x2_v_bz_coopA_NNT", "nvjet_hsh_*_*_*_v_bz_coopA_NNT"),  # another tile: one family
        ("nvjet_sm90_qqhsh_192x192_128x4_1x2_h_bz_coopB_bias_TNN", "nvjet_sm90_qqhsh_*_*_*_h_bz_coopB_bias_TNN"),
        ("void cutlass::Kernel2<cutlass_80_tensorop_f16_s16816gemm_relu_f16_256x128_32x3_nn_align8>"
         "(cutlass_80_tensorop_f16_s16816gemm_relu_f16_256x128_32x3_nn_align8::Params)",
         "cutlass_80_tensorop_f16_s16816gemm_relu_f16_*_*_nn_align8"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>", "pytorch_flash::flash_fwd_kernel"),
        (f"void at::native::vectorized_elementwise_kernel<4, {GELU}, std::array<char*, 2ul> >(int, {GELU}, "
         "std::array<char*, 2ul>)", "at::native::vectorized_elementwise_kernel[at::native::GeluCUDAKernelImpl]"),
        (f"void at::native::vectorized_elementwise_kernel<4, {ADD}, std::array<char*, 3ul> >(int, {ADD}, "
         "std::array<char*, 3ul>)", "at::native::vectorized_elementwise_kernel[at::native::CUDAFunctor_add]"),
        ("triton_poi_fused__scaled_mm__to_copy_clamp_div_gelu_t_view_3",
         "triton_poi_fused__scaled_mm__to_copy_clamp_div_gelu_t_view"),
        ("triton_per_fused_native_layer_norm_1", "triton_per_fused_native_layer_norm"),
        ("void at::native::(anonymous namespace)::sleep(long)", "at::native::sleep"),
        ("Memset (Device)", "Memset"),
        ("aten::addmm", "aten::addmm"),
        ("vitperf::injected_delay", "vitperf::injected_delay"),
    ],
)  # fmt: skip
def test_kernel_names_are_normalised(name: str, normalised: str) -> None:
    assert normalise(name) == normalised


NAMES = ["nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT", "nvjet_hsh_128x256_64x4_1x2_v_bz_coopA_NNT",
         "triton_per_fused_native_layer_norm_1", "triton_poi_fused_gelu_view_2", "flash_fwd",
         "Memset (Device)"]  # fmt: skip
PROFILE = st.dictionaries(st.sampled_from(NAMES), st.floats(0.0, 10.0, allow_subnormal=False), min_size=1)


@given(st.lists(PROFILE, min_size=1, max_size=4), st.lists(PROFILE, min_size=1, max_size=4))
def test_each_groupings_changes_add_up_to_the_whole(a: list[dict[str, float]], b: list[dict[str, float]]) -> None:
    d = diff(a, b)
    for groups in (d.by_kind, d.by_kernel):
        assert math.fsum(g.delta_ms for g in groups) == pytest.approx(d.delta_ms, abs=1e-9)
        assert math.fsum(g.a_ms for g in groups) == pytest.approx(d.a_ms, abs=1e-9)
        if abs(d.delta_ms) > 1e-6:
            assert math.fsum(g.share for g in groups) == pytest.approx(1.0)
        assert [abs(g.delta_ms) for g in groups] == sorted((abs(g.delta_ms) for g in groups), reverse=True)
        for g in groups:
            if g.low is not None:
                assert g.high is not None and g.low <= g.delta_ms + 1e-9 and g.delta_ms - 1e-9 <= g.high
            assert (g.low is None) == (min(len(a), len(b)) < 2)


def test_new_and_gone_kernels_and_what_one_profile_a_side_cannot_say() -> None:
    a = [{"nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT": 4.0, "triton_poi_fused_gelu_view_2": 1.0}] * 3
    b = [{"nvjet_hsh_128x256_64x4_1x2_v_bz_coopA_NNT": 4.5, "triton_poi_fused_gelu_view_2": 1.0,
          "triton_poi_fused_add_bias_4": 0.5}] * 3  # fmt: skip
    d = diff(a, b)
    kernels = {g.name: g for g in d.by_kernel}
    assert kernels["nvjet_hsh_*_*_*_v_bz_coopA_NNT"].change == ""  # another tile of one family: moved, not new
    assert kernels["triton_poi_fused_add_bias"].change == "new in B"
    assert kernels["nvjet_hsh_*_*_*_v_bz_coopA_NNT"].share == pytest.approx(0.5)
    assert kernels["triton_poi_fused_gelu_view"].delta_ms == 0 and not kernels["triton_poi_fused_gelu_view"].moved
    assert {g.name: g.change for g in diff(b, a).by_kernel}["triton_poi_fused_add_bias"] == "gone in B"
    one = diff(a[:1], b[:1])
    assert all(g.low is None for g in one.by_kernel)
    assert "cannot: one profile a side" in "\n".join(one.markdown())
    md = d.markdown()
    assert md[0].startswith("Kernel time per inference: A 5.000 ms, B 6.000 ms (+1.000 ms), from 3 and 3 profiles")
    new = "| `triton_poi_fused_add_bias` | 0.0000 | 0.5000 | +0.5000 | 50% | [+0.5000, +0.5000] | new in B moved |"
    assert new in md
    gemm = {k["name"]: k for k in d.as_dict()["by_kind"]}["gemm"]
    assert gemm == {"name": "gemm", "a_ms": 4.0, "b_ms": 4.5, "delta_ms": 0.5, "share": 0.5, "interval_ms": [0.5, 0.5],
                    "change": "", "moved": True}  # fmt: skip
    assert d.changed_ms == pytest.approx(0.5) and "Kernels new in B or gone in B: +0.500 ms, 50% of the change" in md
    with pytest.raises(ValueError, match="at least one profile a side"):
        diff([], b)


def test_a_change_below_the_floor_has_not_moved_and_shares_of_no_change_are_not_shown() -> None:
    """One process's profiles agree closely, so their interval excludes a process's own draw: in an A/A on an H100
    (2026-11-28) the GEMMs of one pair of profile processes read 0.9% apart. The floor keeps such a group still."""
    a = [{"nvjet_gemm": 3.70 + i * 1e-4, "flash_fwd": 0.57} for i in range(5)]
    b = [{"nvjet_gemm": 3.66 + i * 1e-4, "flash_fwd": 0.57} for i in range(5)]
    strict, floored = diff(a, b), diff(a, b, floor=0.01)  # 1% of A's 4.27 ms: 0.0427 ms
    assert {g.name: g.moved for g in strict.by_kernel}["nvjet_gemm"]
    assert floored.floor_ms == pytest.approx(0.0427, abs=1e-5)
    assert not any(g.moved for g in floored.by_kernel + floored.by_kind)
    assert "| `nvjet_gemm` | 3.7002 | 3.6602 | -0.0400 | - |" in "\n".join(floored.markdown())
    assert "| `nvjet_gemm` | 3.7002 | 3.6602 | -0.0400 | 100% |" in "\n".join(strict.markdown())


MODULES = st.dictionaries(st.sampled_from(["blocks.0.attn.qkv", "blocks.1.attn.qkv", "blocks.0.mlp.fc1", "head",
                                           "(outside any module)"]), st.floats(0.0, 10.0, allow_subnormal=False),
                          min_size=1)  # fmt: skip


@given(st.lists(MODULES, min_size=2, max_size=4), st.lists(MODULES, min_size=2, max_size=4))
def test_modules_fold_their_block_index_and_their_changes_add_up(a: list[dict[str, float]],
                                                                 b: list[dict[str, float]]) -> None:  # fmt: skip
    d = diff([{"k": 1.0}], [{"k": 1.0}], a_modules=a, b_modules=b)
    names = {g.name for g in d.by_module}
    assert names <= {"blocks.*.attn.qkv", "blocks.*.mlp.fc1", "head", "(outside any module)"}
    total = math.fsum(math.fsum(p.values()) for p in b) / len(b) - math.fsum(math.fsum(p.values()) for p in a) / len(a)
    assert math.fsum(g.delta_ms for g in d.by_module) == pytest.approx(total, abs=1e-9)
    assert "| module |" in "\n".join(d.markdown()) and diff([{"k": 1.0}], [{"k": 1.0}]).by_module == []


@pytest.mark.parametrize(
    ("layer", "module"),
    [
        ("/blocks/blocks.0/attn/qkv/MatMul", "blocks.0.attn.qkv"),
        ("/blocks/blocks.11/mlp/fc1/MatMul + /blocks/blocks.11/mlp/act/Mul", "blocks.11.mlp.fc1"),
        ("{ForeignNode[/blocks/blocks.0/norm1/ReduceMean.../head/Gemm]}", "blocks.0.norm1 ... head"),
        ("/head/Gemm", "head"),
        ("Reformatting CopyNode for Input Tensor 0 to /blocks/blocks.0/attn/qkv/MatMul", "(outside any module)"),
    ],
)
def test_a_tensorrt_layer_is_read_as_the_module_its_onnx_name_comes_from(layer: str, module: str) -> None:
    from pytest_vitperf.measure.layers import by_module, module_of

    assert module_of(layer) == module
    assert by_module({layer: 0.25, "/patch_embed/proj/Conv": 0.5}) == {module: 0.25, "patch_embed.proj": 0.5}


def test_an_eager_torch_engine_is_profiled_by_module_on_a_cpu() -> None:
    """A tiny ViT, eager on the CPU: every op's self time belongs to the innermost module that ran it, and the
    modules' times add up to the ops'. A compiled engine gives no module times (its kernels are fused)."""
    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.engines.backends.torch import TorchBackend
    from pytest_vitperf.engines.models.zoo import build_model
    from pytest_vitperf.measure.env import Device

    engine = TorchBackend().prepare(build_model("vit_tiny"), model_name="vit_tiny_patch16_224", precision="fp32",
                                    batch=1, device=Device("test CPU"), settings=Settings())  # fmt: skip
    b = engine.kernel_breakdown()
    assert len(b.modules) == len(b.profiles)
    for ops, modules in zip(b.profiles, b.modules, strict=True):
        assert math.fsum(modules.values()) == pytest.approx(math.fsum(ops.values()), rel=1e-6)
        assert {"blocks.0.attn.qkv", "blocks.11.mlp.fc2", "head"} <= modules.keys()
    d = diff(b.profiles, b.profiles, a_modules=b.modules, b_modules=b.modules)
    assert "blocks.*.attn.qkv" in {g.name for g in d.by_module}


def test_a_delay_injected_on_a_cpu_is_where_the_change_went() -> None:
    """A tiny ViT on the CPU, each side profiled as --vitperf-kernels does: B carries a delay of half the engine's
    time, which the profile sees by its label. The delay must be new in B, moved beyond its interval, the largest
    change and most of the whole (a busy CPU moves the other ops' times too: seen at 66% with a 30% delay)."""
    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.engines.backends.torch import TorchBackend
    from pytest_vitperf.engines.delay import DELAY_LABEL, inject
    from pytest_vitperf.engines.models.zoo import build_model
    from pytest_vitperf.measure.env import Device
    from pytest_vitperf.measure.kernels import PROFILES

    cpu = Device("test CPU")
    engine = TorchBackend().prepare(build_model("vit_tiny"), model_name="vit_tiny_patch16_224", precision="fp32",
                                    batch=1, device=cpu, settings=Settings())  # fmt: skip
    delayed = inject(engine, 0.5)
    ka, kb = engine.kernel_breakdown(), delayed.kernel_breakdown()
    a, b = ka.profiles, kb.profiles  # what --vitperf-kernels keeps
    assert len(a) == len(b) == PROFILES
    d = diff(a, b)
    assert d.by_kernel[0].name == DELAY_LABEL, "\n".join(d.markdown())
    assert d.by_kernel[0].change == "new in B" and d.by_kernel[0].moved
    assert d.by_kernel[0].share >= 0.5, "\n".join(d.markdown())
    by_module = diff(a, b, a_modules=ka.modules, b_modules=kb.modules)
    assert by_module.by_module[0].name == DELAY_LABEL and by_module.by_module[0].change == "new in B"
