"""Per-layer precision and time: TensorRT engine-inspector JSON and trtexec per-layer profiles.

The documents below are written by hand in the shape TensorRT emits (field names and format strings as in
`trtexec --exportLayerInfo` / `--exportProfile`); they exercise the parser, they are not measurements.
- LAYER_INFO follows TensorRT 10.x's schema (NVIDIA, "Engine Inspector", TensorRT 10.16 documentation): `Bindings`
  and one `Format/Datatype` string per tensor.
- LAYER_INFO_11 follows TensorRT 11.x's (NVIDIA, "Migrating IEngineInspector Usage from TensorRT 10.x to 11.x",
  TensorRT 11.0 documentation): `I/O Tensors` objects, copied from that page's example, and `Format/Datatype` split
  into `Format` and `Datatype`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_vitperf.cli import main
from pytest_vitperf.measure.layers import (
    Layer,
    LayerInfoError,
    LayerTime,
    inspector_schema,
    parse_layer_info,
    parse_profile,
    precision_of,
    summary,
    time_by_precision,
)


def tensor(fmt: str) -> dict[str, object]:
    return {"Name": "t", "Location": "Device", "Dimensions": [1, 197, 768], "Format/Datatype": fmt}


LAYER_INFO = {
    "Layers": [
        {
            "Name": "patch_embed.proj",
            "LayerType": "CaskConvolution",
            "Inputs": [tensor("Row major linear FP32")],
            "Outputs": [tensor("Channel major FP16 format where channel % 8 == 0")],
            "Weights": {"Type": "Half", "Count": 589824},
            "TacticName": "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32",
        },
        {
            "Name": "blocks.0.attn.qkv",
            "LayerType": "CaskGemmMatrixMultiply",
            "Inputs": [tensor("Row major linear FP8 format"), tensor("Row major linear FP16 format")],
            "Outputs": [tensor("Row major linear FP16 format")],
            "TacticName": "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f16",
        },
        {
            "Name": "blocks.0.mlp.fc1",
            "LayerType": "CaskGemmMatrixMultiply",
            "Inputs": [tensor("Thirty-two wide channel vectorized row major Int8 format")],
            "Outputs": [tensor("Row major linear FP16 format")],
            "Weights": {"Type": "Int8", "Count": 2359296},
        },
        {"Name": "blocks.0.attn.softmax", "LayerType": "Myelin", "Inputs": [tensor("Row major linear BF16")]},
    ]
}
PROFILE = [
    {"count": 100},
    {"name": "patch_embed.proj", "timeMs": 10.0, "averageMs": 0.1, "percentage": 10.0},
    {"name": "blocks.0.attn.qkv", "timeMs": 30.0, "averageMs": 0.3, "percentage": 30.0},
    {"name": "blocks.0.mlp.fc1", "timeMs": 40.0, "averageMs": 0.4, "percentage": 40.0},
    {"name": "blocks.0.attn.softmax", "timeMs": 15.0, "averageMs": 0.15, "percentage": 15.0},
    {"name": "Reformatting CopyNode for Output Tensor 0", "timeMs": 5.0, "averageMs": 0.05, "percentage": 5.0},
]


def tensor_11(fmt: str, datatype: str) -> dict[str, object]:
    return {"Name": "t", "Location": "Device", "Dimensions": [1, 197, 768], "Format": fmt, "Datatype": datatype}


LAYER_INFO_11 = {
    "Layers": [
        {
            "Name": "patch_embed.proj",
            "LayerType": "CaskConvolution",
            "Inputs": [tensor_11("Row major linear", "FP32")],
            "Outputs": [tensor_11("Channel major format where channel % 8 == 0", "FP16")],
            "Weights": {"Type": "Half", "Count": 589824},
            "TacticName": "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32",
        },
        {
            "Name": "blocks.0.attn.qkv",
            "LayerType": "CaskGemmMatrixMultiply",
            "Inputs": [tensor_11("Row major linear", "FP8"), tensor_11("Row major linear", "FP16")],
            "Outputs": [tensor_11("Row major linear", "FP16")],
            "TacticName": "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f16",
        },
        {
            "Name": "blocks.0.mlp.fc1",
            "LayerType": "CaskGemmMatrixMultiply",
            "Inputs": [tensor_11("Thirty-two wide channel vectorized row major", "Int8")],
            "Outputs": [tensor_11("Row major linear", "FP16")],
            "Weights": {"Type": "Int8", "Count": 2359296},
        },
        {"Name": "blocks.0.attn.softmax", "LayerType": "Myelin", "Inputs": [tensor_11("Row major linear", "BF16")]},
    ],
    "I/O Tensors": [
        {"Name": "input_0", "IOMode": "Input", "DataType": "Float", "Dimensions": [1, 3, 224, 224],
         "Location": "Device", "IsShapeInferenceIO": False,
         "ProfileInfo": [{"MinShape": [1, 3, 224, 224], "OptShape": [1, 3, 224, 224], "MaxShape": [1, 3, 224, 224],
                          "Format": "Row major linear FP32 format (kLINEAR)"}]},
        {"Name": "output_0", "IOMode": "Output", "DataType": "Float", "Dimensions": [1, 1000],
         "Location": "Device", "IsShapeInferenceIO": False},
    ],
}  # fmt: skip


def test_both_inspector_schemas_give_the_same_layers() -> None:
    ten = {**LAYER_INFO, "Bindings": ["input_0", "output_0"]}
    assert inspector_schema(ten) == "TensorRT 10.x" and inspector_schema(LAYER_INFO) == "TensorRT 10.x"
    assert inspector_schema(LAYER_INFO_11) == "TensorRT 11.x"
    assert parse_layer_info(LAYER_INFO_11) == parse_layer_info(ten)
    assert [x.precision for x in parse_layer_info(LAYER_INFO_11)] == ["fp16", "fp8", "int8", "bf16"]
    assert inspector_schema({"Layers": ["a"]}) is None  # names only: neither schema shows


def test_a_document_of_both_schemas_is_refused() -> None:
    mixed = {**LAYER_INFO_11, "Bindings": ["input_0", "output_0"]}
    with pytest.raises(LayerInfoError, match=r"mixes TensorRT 10.x fields .* with 11.x ones .*--exportLayerInfo$"):
        parse_layer_info(mixed)


@pytest.mark.parametrize(
    ("text", "precision"),
    [
        ("Row major linear FP32", "fp32"),
        ("Float", "fp32"),
        ("Channel major FP16 format where channel % 8 == 0", "fp16"),
        ("Half", "fp16"),
        ("Row major linear BF16", "bf16"),
        ("Thirty-two wide channel vectorized row major Int8 format", "int8"),
        ("Row major linear FP8 format", "fp8"),
        ("Row major linear FP4 format", "fp4"),
        ("Row major linear Int32", ""),
    ],
)
def test_precision_of_format_strings(text: str, precision: str) -> None:
    assert precision_of(text) == precision


def test_a_layer_runs_in_its_lowest_input_precision() -> None:
    layers = parse_layer_info(LAYER_INFO)
    assert [(x.name, x.precision) for x in layers] == [
        ("patch_embed.proj", "fp16"),  # FP32 input, FP16 weights: the conv runs FP16 after an input cast
        ("blocks.0.attn.qkv", "fp8"),  # writes FP16, reads FP8
        ("blocks.0.mlp.fc1", "int8"),
        ("blocks.0.attn.softmax", "bf16"),
    ]
    assert layers[1].tactic == "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f16" and layers[2].tactic == ""
    names_only = parse_layer_info({"Layers": ["a", "b"]})  # an engine built without DETAILED verbosity
    assert names_only == [Layer("a", "", ""), Layer("b", "", "")]


def test_time_by_precision_joins_profile_and_layers() -> None:
    shares = time_by_precision(parse_layer_info(LAYER_INFO), parse_profile(PROFILE))
    assert shares == pytest.approx({"int8": 0.4, "fp8": 0.3, "bf16": 0.15, "fp16": 0.1, "?": 0.05})
    assert list(shares) == ["int8", "fp8", "bf16", "fp16", "?"]  # largest first


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "zzz"]), st.floats(0, 10)), max_size=20))
def test_time_shares_add_up_to_the_profile(entries: list[tuple[str, float]]) -> None:
    layers = [Layer("a", "Gemm", "fp8"), Layer("b", "Gemm", "fp16"), Layer("c", "Reformat", "")]
    times = [LayerTime(n, ms) for n, ms in entries]
    assert sum(time_by_precision(layers, times).values()) == pytest.approx(sum(ms for _, ms in entries))


def test_summary_names_shares_and_slowest_layers() -> None:
    text = summary(parse_layer_info(LAYER_INFO), parse_profile(PROFILE), top=2)
    lines = text.splitlines()
    assert lines[0] == "4 layers: fp16 1, fp8 1, int8 1, bf16 1"
    assert lines[1] == "1.000 ms per inference: int8 40.0%, fp8 30.0%, bf16 15.0%, fp16 10.0%, ? 5.0%"
    assert "int8 CaskGemmMatrixMultiply" in lines[2] and "blocks.0.mlp.fc1" in lines[2]
    assert "blocks.0.attn.qkv" in lines[3] and len(lines) == 4


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "has no 'Layers' list, so it is not engine-inspector JSON. Write one with: trtexec"),
        ({"Layers": [{"LayerType": "Reformat"}]}, "layer 0 is not an object with a Name"),
    ],
)
def test_malformed_layer_info_is_named(doc: object, message: str) -> None:
    with pytest.raises(LayerInfoError, match=message):
        parse_layer_info(doc)


def test_malformed_profiles_are_named() -> None:
    with pytest.raises(LayerInfoError, match="is not a JSON list of layer times"):
        parse_profile({"name": "x"})
    with pytest.raises(LayerInfoError, match="layer 'x' has no numeric averageMs"):
        parse_profile([{"count": 1}, {"name": "x", "timeMs": 1.0}])


def test_cli_layers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    info, profile = tmp_path / "layers.json", tmp_path / "profile.json"
    info.write_text(json.dumps(LAYER_INFO))
    profile.write_text(json.dumps(PROFILE))
    assert main(["layers", str(info), "--profile", str(profile), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "int8 40.0%" in out and out.count(" ms  ") == 1
    assert out.startswith("schema: TensorRT 10.x\n")
    info.write_text(json.dumps(LAYER_INFO_11))
    assert main(["layers", str(info), "--profile", str(profile), "--top", "1"]) == 0
    out11 = capsys.readouterr().out
    assert out11 == out.replace("TensorRT 10.x", "TensorRT 11.x")

    info.write_text('{"Layers": [')  # a truncated file
    assert main(["layers", str(info)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vitperf layers: TensorRT layer file {info}: is not valid JSON")
