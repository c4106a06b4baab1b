"""The TensorRT backend's runtime path (allocate, launch, capture, run, layer times, release) and its plan cache, driven
against the stand-in TensorRT of tests/standins (as strict as TensorRT where the backend calls it: calls answer False,
plans are refused, work runs on the stream). No TensorRT runs here; what is checked is the wiring, never a number."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from onnx import TensorProto, helper

from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.core.settings import Settings
from pytest_vitperf.engines.backends.tensorrt import PlanRefused, TensorRTBackend, TrtEngine
from pytest_vitperf.engines.models.zoo import fixed_input
from pytest_vitperf.engines.tensorrt.plan import BuildOptions, build_plan
from pytest_vitperf.measure.env import Device
from tests.standins import tensorrt as trt

SHAPE = (2, 3, 4, 4)
Q_TYPES = {"fp8": TensorProto.FLOAT8E4M3FN, "int8": TensorProto.INT8}


def onnx_of(precision: str, io: int = TensorProto.FLOAT) -> bytes:
    """A small graph of the kind each precision exports: FP16 casts, or Q/DQ pairs of FP8 or INT8."""
    io = TensorProto.FLOAT16 if precision == "fp16" else io
    nodes = [helper.make_node("Flatten", ["input"], ["flat"], name="patch_embed.proj")]
    inits = []
    if precision in Q_TYPES:
        inits = [helper.make_tensor("scale", TensorProto.FLOAT, [], [0.1]),
                 helper.make_tensor("zero", Q_TYPES[precision], [], [0])]  # fmt: skip
        nodes += [helper.make_node("QuantizeLinear", ["flat", "scale", "zero"], ["q"], name="blocks.0.attn.qkv"),
                  helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["dq"], name="blocks.0.dq")]  # fmt: skip
    nodes.append(helper.make_node("ReduceMean", [nodes[-1].output[0]], ["logits"], name="head"))
    graph = helper.make_graph(nodes, "vit", [helper.make_tensor_value_info("input", io, list(SHAPE))],
                              [helper.make_tensor_value_info("logits", io, [SHAPE[0], 10])], inits)  # fmt: skip
    return bytes(helper.make_model(graph).SerializeToString())


@pytest.fixture(autouse=True)
def runtime() -> None:
    trt.reset()


def engine(precision: str = "fp16", *, io: int = TensorProto.FLOAT, cuda_graph: bool = True, rtx: bool = False
           ) -> TrtEngine:  # fmt: skip
    plan = build_plan(trt, onnx_of(precision, io), BuildOptions(target="native" if rtx else "sm_90"), rtx=rtx)  # type: ignore[arg-type]
    return TrtEngine("tensorrt", "vit", precision, SHAPE[0], trt, plan, cuda_graph, {"engine_bytes": len(plan)},
                     cuda=trt.CUDA)  # fmt: skip


def means(x: torch.Tensor) -> torch.Tensor:
    return x.float().reshape(SHAPE[0], -1).mean(dim=1, keepdim=True).expand(SHAPE[0], 10)


@pytest.mark.parametrize("precision", ["fp16", "fp8", "int8"])
def test_the_runtime_path_from_allocate_to_release(precision: str) -> None:
    e = engine(precision).allocate()
    assert e.describe()["mode"] == "cuda-graph" and trt.CUDA.live() == {"buffers": 4, "streams": 1, "graphs": 1}
    resident = fixed_input(SHAPE).to(torch.float16 if precision == "fp16" else torch.float32)
    tolerance = {"atol": 1e-3} if precision == "fp16" else {}
    assert torch.allclose(e.output(), means(resident), **tolerance)
    x = torch.rand(SHAPE)
    assert torch.allclose(e.run(x), means(x.to(resident.dtype)), **tolerance)
    assert torch.allclose(e.output(), means(resident), **tolerance)  # the resident input is back
    times = {t.name: t.ms for t in e.layer_times(runs=4)}
    assert times == pytest.approx(dict(zip([n for n in times], [0.01 * (i + 1) for i in range(len(times))],
                                           strict=True)))  # fmt: skip
    assert "blocks.0.attn.qkv" in times if precision != "fp16" else "head" in times
    d = e.describe()
    assert d["layers"] == len(times) and d["peak_bytes"] > d["engine_bytes"]
    io = {t.is_input: t.device for t in e._tensors.values()}
    assert d["addresses"] == {"input": io[True], "output": io[False]} and io[True] != io[False]
    assert {"fp8": "fp8", "int8": "int8", "fp16": "fp16"}[precision] in d["layer_precisions"]
    e.close()
    assert trt.CUDA.live() == {"buffers": 0, "streams": 0, "graphs": 0}
    e.close()  # a second release gives back nothing twice
    with pytest.raises(VitperfError, match="was released; prepare it again"):
        e.output()


def test_without_a_graph_every_launch_enqueues_and_each_launch_runs_once() -> None:
    e = engine(cuda_graph=False).allocate()
    assert e.describe()["mode"] == "enqueue" and trt.CUDA.live()["graphs"] == 0
    e.launch()
    e.launch()
    assert len(trt.CUDA.queues[e.stream]) == 2  # queued on the engine's stream, run when it is synchronised
    trt.CUDA.synchronize(e.stream)
    e.close()


@pytest.mark.parametrize(
    ("fail", "when", "message"),
    [
        ("set_tensor_address", "allocate", "refused the address of tensor 'input'"),
        ("execute_async_v3", "allocate", "could not enqueue its first run"),
        ("capture", "allocate", "could not enqueue inside a CUDA graph capture"),
        ("profiled", "layer_times", "could not enqueue a profiled run"),
    ],
)
def test_each_call_tensorrt_answers_false_stops_the_engine(fail: str, when: str, message: str) -> None:
    e = engine()
    if when != "allocate":
        e.allocate()
    trt.FAIL.add(fail)
    with pytest.raises(VitperfError) as info:
        e.allocate() if when == "allocate" else e.layer_times(runs=2)
    text = str(info.value)
    assert f"tensorrt {message} for vit fp16 b2; TensorRT's log above says why" in text
    assert text.endswith("check the backend with: vitperf selfcheck --backend tensorrt")
    if when == "allocate":  # what it took is given back
        assert trt.CUDA.live() == {"buffers": 0, "streams": 0, "graphs": 0}


def test_out_of_memory_while_allocating_gives_back_what_was_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    def oom(nbytes: int) -> int:
        raise RuntimeError("CUDA call failed: cudaErrorMemoryAllocation")

    monkeypatch.setattr(trt.CUDA, "pinned", oom)
    with pytest.raises(RuntimeError, match="cudaErrorMemoryAllocation"):
        engine().allocate()
    assert trt.CUDA.live() == {"buffers": 0, "streams": 0, "graphs": 0}  # the device buffer taken first, given back


def test_an_enqueue_that_fails_after_allocate_is_not_timed_as_nothing() -> None:
    e = engine(cuda_graph=False).allocate()
    trt.FAIL.add("execute_async_v3")
    with pytest.raises(VitperfError, match="could not enqueue a run"):
        e.launch()


def test_a_plan_of_another_build_or_gpu_is_refused_in_one_line() -> None:
    for state in ({"build": "b12"}, {"sm": 89}):
        e = engine()
        trt.reset(**state)
        with pytest.raises(PlanRefused, match=r"^tensorrt could not deserialize the plan of vit fp16 b2 \(built by "):
            e.allocate()
        trt.reset()


def test_bf16_and_fp8_inputs_and_outputs_are_fed_through_torch() -> None:
    """TensorRT's own trt.nptype raises for BF16 and FP8: numpy has neither."""
    for io in (TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN):
        e = engine("fp8", io=io).allocate()
        dtype = torch.bfloat16 if io == TensorProto.BFLOAT16 else torch.float8_e4m3fn
        assert torch.allclose(e.output(), means(fixed_input(SHAPE).to(dtype)), atol=0.05)
        e.close()


def test_builds_keep_fp32_fp32_and_rtx_builds_can_be_captured() -> None:
    import json

    def flags(rtx: bool) -> list[str]:
        plan = build_plan(trt, onnx_of("fp16"), BuildOptions(target="native" if rtx else "sm_90"), rtx=rtx)  # type: ignore[arg-type]
        return list(json.loads(plan[plan.index(b"{") :])["flags"])

    assert "TF32" not in flags(False) and "TF32" not in flags(True)  # TensorRT allows TF32 unless cleared
    assert "REQUIRE_USER_ALLOCATION" in flags(True) and "REQUIRE_USER_ALLOCATION" not in flags(False)


def test_a_context_tensorrt_rtx_cannot_capture_stays_on_enqueue_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trt.IExecutionContext, "is_stream_capturable", lambda self, stream: False, raising=False)
    e = engine(rtx=True).allocate()
    assert e.describe()["mode"] == "enqueue (TensorRT-RTX cannot capture this context in a CUDA graph)"
    assert trt.CUDA.live()["graphs"] == 0
    e.close()


def test_one_logger_per_process() -> None:
    before = len(trt.LOGGERS)
    for precision in ("fp16", "int8"):
        engine(precision).allocate().close()
    assert len(trt.LOGGERS) - before <= 1


def test_the_stand_in_speaks_tensorrt_s_api() -> None:
    """Every class of the stand-in is TensorRT's, and every member is on that class in TensorRT 10.16's Python API (its
    pybind11 sources), its methods taking that many arguments: the stand-in invents no API."""
    import enum
    import inspect

    from pytest_vitperf.engines.tensorrt.api import Usage, mismatched_in_api
    from tests.test_trt_api import api

    ours = {"HostCuda", "reset", "FAIL", "BUILD", "SM", "CUDA", "LOGGERS", "VERSION", "initialised"}
    table = api("10.16")
    used = []
    for cls_name, cls in vars(trt).items():
        if not isinstance(cls, type) or cls_name.startswith("_") or cls_name in ours or cls.__module__ != trt.__name__:
            continue
        if "__init__" in table.get(cls_name, {}).get("members", {}):  # type: ignore[attr-defined]
            init = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
            used.append(Usage(cls_name, "stand-in", len(init), owner=""))
        names = list(cls.__members__) if issubclass(cls, enum.Enum) else [a for a in vars(cls) if a not in ours]
        for attr in (a for a in names if not a.startswith("_")):
            member = getattr(cls, attr)
            params = inspect.signature(member).parameters if inspect.isfunction(member) else None
            rtx = attr == "REQUIRE_USER_ALLOCATION"  # TensorRT-RTX's flag (tensorrt_rtx.BuilderFlag)
            used.append(Usage(attr, f"stand-in {cls_name}", None if params is None else len(params) - 1,
                              rtx_only=rtx, owner=cls_name))  # fmt: skip
    assert len(used) > 50
    assert mismatched_in_api(used, table, "10.16") == []


class HostDevice(Device):
    """An H100 as the plan cache sees it, whose model stays on the host (the stand-in runs there)."""

    @property
    def torch_device(self) -> str:
        return "cpu"


class StandInTensorRT(TensorRTBackend):
    module = "tests.standins.tensorrt"
    dists = ()


def test_the_plan_cache_keys_the_sm_and_rebuilds_a_plan_the_runtime_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import timm

    backend = StandInTensorRT()
    backend.cuda = trt.CUDA
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False).eval()
    settings = Settings(cache_dir=tmp_path)

    def prepare(sm: int = 90) -> TrtEngine:
        e = backend.prepare(model, model_name="vit_tiny_patch16_224", precision="fp32", batch=1,
                            device=HostDevice("NVIDIA H100 80GB HBM3", sm=sm), settings=settings)  # fmt: skip
        assert isinstance(e, TrtEngine)
        return e

    first = prepare()
    assert first.info["cache"] == "miss" and first.info["target"] == "sm_90"
    assert prepare().info["cache"] == "hit"
    trt.reset(sm=89)
    backend.cuda = trt.CUDA
    assert prepare(89).info["cache"] == "miss"  # another SM: another entry, never a foreign plan
    trt.reset(build="b12")  # the same version, another build: the cached plan is refused
    backend.cuda = trt.CUDA
    capsys.readouterr()
    again = prepare()
    assert again.info["cache"] == "miss" and again.describe()["mode"] == "cuda-graph"
    err = capsys.readouterr().err
    assert "vitperf: tensorrt could not deserialize the plan of vit_tiny_patch16_224 fp32 b1 (built by another " \
           "TensorRT build or for another GPU); discarded the cached plan and built it again" in err
    assert prepare().info["cache"] == "hit"
    monkeypatch.delattr(trt, "__version__")  # a TensorRT whose version cannot be read: its plans are not cached
    assert prepare().info["cache"] == "off"


def test_a_family_released_for_memory_gives_its_engines_buffers_back() -> None:
    """The session drops a family whose engines do not fit together; torch.cuda.empty_cache frees none of what a
    TensorRT engine took through the CUDA runtime, so release() closes it, behind an injected delay too."""
    from pytest_vitperf.engines.delay import DelayedEngine
    from pytest_vitperf.session import VitperfSession

    session = VitperfSession(Settings())
    plain, delayed = engine().allocate(), DelayedEngine(engine("int8").allocate(), 0.01, lambda: None, {})
    session._engines[("vit", "fp16", 2, session.backend.name, 0)] = plain
    session._engines[("vit", "int8", 2, session.backend.name, 0)] = delayed  # type: ignore[assignment]
    assert trt.CUDA.live()["buffers"] == 8
    session.release("vit", "fp16", 2)
    session.release("vit", "int8", 2)
    assert trt.CUDA.live() == {"buffers": 0, "streams": 0, "graphs": 0}
