"""What an engine really runs, layer by layer: the precision and tactic of each layer from TensorRT's engine
inspector, and the time of each layer from IProfiler, joined into time per precision.

Both come in the JSON that TensorRT writes: `IEngineInspector.get_engine_information(JSON)` (the same document
as `trtexec --exportLayerInfo`, detailed only when the engine was built with ProfilingVerbosity.DETAILED) and the
per-layer profile of `trtexec --exportProfile` (which the backends' IProfiler run produces as well). A layer's
precision is the lowest one among its inputs' data types: a GEMM fed FP8 or INT8 operands runs on those tensor cores
even when it writes FP16.

The inspector's schema changed in TensorRT 11 (NVIDIA, "Migrating IEngineInspector Usage from TensorRT 10.x to
11.x"): 10.x lists the engine's I/O as `Bindings` (names) and gives each layer tensor one `Format/Datatype` string;
11.x lists `I/O Tensors` (objects with Name, IOMode, DataType, ...) and splits the tensor's field in two, `Format`
and `Datatype`. Both are read; `inspector_schema` says which one a document follows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_vitperf.core.files import FileError, read_json

# Lowest precision first; matched as words in TensorRT's format strings ("Row major linear FP16 format",
# "Thirty-two wide channel vectorized row major Int8 format") and in weight types ("Half", "Int8").
_PRECISIONS = (
    ("fp4", r"fp4|float4|e2m1"),
    ("int4", r"int4"),
    ("fp8", r"fp8|float8|e4m3|e5m2"),
    ("int8", r"int8"),
    ("bf16", r"bf16|bfloat16"),
    ("fp16", r"fp16|half"),
    ("fp32", r"fp32|float"),
)


class LayerInfoError(FileError):
    kind = "TensorRT layer file"


SCHEMA_10 = "TensorRT 10.x"
SCHEMA_11 = "TensorRT 11.x"
_DATATYPE = ("Datatype", "DataType")  # 11.x's per-tensor key; its I/O Tensors spell it DataType


def _tensors(doc: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for layer in doc.get("Layers") or []:
        if isinstance(layer, dict):
            for t in (*layer.get("Inputs", []), *layer.get("Outputs", [])):
                if isinstance(t, dict):
                    yield t


def inspector_schema(doc: Any, source: Path = Path("<engine inspector>")) -> str | None:
    """SCHEMA_10 or SCHEMA_11 by the fields `doc` has, None when it has neither (a names-only document with no I/O
    list); a document with fields of both is refused."""
    if not isinstance(doc, dict):
        return None
    seen = {SCHEMA_10} if "Bindings" in doc else set()
    seen |= {SCHEMA_11} if "I/O Tensors" in doc else set()
    for t in _tensors(doc):
        seen |= {SCHEMA_10} if "Format/Datatype" in t else set()
        seen |= {SCHEMA_11} if any(k in t for k in _DATATYPE) else set()
    if len(seen) > 1:
        raise LayerInfoError(
            source, "mixes TensorRT 10.x fields (Bindings, Format/Datatype) with 11.x ones (I/O Tensors, Datatype): "
            "write it again with one TensorRT's trtexec --exportLayerInfo",
        )  # fmt: skip
    return seen.pop() if seen else None


def _datatype(t: dict[str, Any]) -> str:
    """The text that names a tensor's data type: 10.x's `Format/Datatype`, or 11.x's `Format` and `Datatype`."""
    if "Format/Datatype" in t:
        return str(t["Format/Datatype"])
    kind = next((t[k] for k in _DATATYPE if k in t), "")
    return f"{t.get('Format', '')} {kind}".strip()


@dataclass(frozen=True)
class Layer:
    name: str
    kind: str  # LayerType: CaskConvolution, CaskGemmMatrixMultiply, Myelin, Reformat, ...
    precision: str  # lowest input precision, "" when the document does not say (not DETAILED)
    tactic: str = ""  # TacticName, "" when the layer has none


@dataclass(frozen=True)
class LayerTime:
    name: str
    ms: float  # average per inference


def precision_of(text: str) -> str:
    lowered = text.lower()
    for name, pattern in _PRECISIONS:
        if re.search(rf"\b({pattern})\b", lowered):
            return name
    return ""


def _lowest(precisions: Iterable[str]) -> str:
    order = [p for p, _ in _PRECISIONS]
    known = [p for p in precisions if p in order]
    return min(known, key=order.index) if known else ""


def parse_layer_info(doc: Any, source: Path = Path("<engine inspector>")) -> list[Layer]:
    """Layers of an engine-inspector document: {"Layers": [...]} with dicts (DETAILED) or names only."""
    layers = doc.get("Layers") if isinstance(doc, dict) else None
    if not isinstance(layers, list):
        raise LayerInfoError(
            source,
            "has no 'Layers' list, so it is not engine-inspector JSON. Write one with: "
            "trtexec --onnx=model.onnx --profilingVerbosity=detailed --exportLayerInfo=layers.json",
        )
    inspector_schema(doc, source)  # refuses a document of both schemas
    out = []
    for i, entry in enumerate(layers):
        if isinstance(entry, str):  # ProfilingVerbosity.LAYER_NAMES_ONLY
            out.append(Layer(entry, "", ""))
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("Name"), str):
            raise LayerInfoError(source, f"layer {i} is not an object with a Name")
        inputs = [_datatype(t) for t in entry.get("Inputs", []) if isinstance(t, dict)]
        weights = entry.get("Weights")
        if isinstance(weights, dict):
            inputs.append(str(weights.get("Type", "")))
        out.append(
            Layer(
                name=entry["Name"],
                kind=str(entry.get("LayerType", "")),
                precision=_lowest(precision_of(s) for s in inputs),
                tactic=str(entry.get("TacticName", "")),
            )
        )
    return out


def parse_profile(doc: Any, source: Path = Path("<profile>")) -> list[LayerTime]:
    """Per-layer times of `trtexec --exportProfile`: [{"count": N}, {"name", "averageMs", ...}, ...]."""
    if not isinstance(doc, list):
        raise LayerInfoError(
            source, "is not a JSON list of layer times. Write one with: trtexec ... --exportProfile=profile.json"
        )
    out = []
    for entry in doc:
        if isinstance(entry, dict) and "name" in entry:
            try:
                out.append(LayerTime(str(entry["name"]), float(entry["averageMs"])))
            except (KeyError, TypeError, ValueError):
                raise LayerInfoError(source, f"layer {entry['name']!r} has no numeric averageMs") from None
    return out


def read_layer_info(path: Path) -> tuple[list[Layer], str | None]:
    """The layers of an inspector file, and the schema it follows."""
    doc = read_json(path, LayerInfoError)
    return parse_layer_info(doc, path), inspector_schema(doc, path)


def read_profile(path: Path) -> list[LayerTime]:
    return parse_profile(read_json(path, LayerInfoError), path)


def time_by_precision(layers: list[Layer], times: list[LayerTime]) -> dict[str, float]:
    """Milliseconds per inference spent in each precision; layers the inspector does not list count as "?"."""
    precision = {layer.name: layer.precision or "?" for layer in layers}
    out: dict[str, float] = {}
    for t in times:
        key = precision.get(t.name, "?")
        out[key] = out.get(key, 0.0) + t.ms
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def precision_counts(layers: list[Layer]) -> dict[str, int]:
    out: dict[str, int] = {}
    for layer in layers:
        out[layer.precision or "?"] = out.get(layer.precision or "?", 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def summary(layers: list[Layer], times: list[LayerTime] | None = None, top: int = 5) -> str:
    lines = [f"{len(layers)} layers: " + ", ".join(f"{p} {n}" for p, n in precision_counts(layers).items())]
    if times:
        total = sum(t.ms for t in times) or 1.0
        shares = time_by_precision(layers, times)
        lines.append(f"{total:.3f} ms per inference: " + ", ".join(f"{p} {ms / total:.1%}" for p, ms in shares.items()))
        by_name = {layer.name: layer for layer in layers}
        for t in sorted(times, key=lambda t: -t.ms)[:top]:
            layer = by_name.get(t.name)
            what = f"{layer.precision or '?'} {layer.kind}" if layer else "?"
            lines.append(f"  {t.ms:8.4f} ms  {what:<28} {t.name[:90]}")
    return "\n".join(lines)


def module_of(layer: str) -> str:
    """The module a TensorRT layer comes from, by the ONNX node name it carries: `/blocks/blocks.0/attn/qkv/MatMul`
    (or a fusion that starts with it, `... + /blocks/blocks.0/attn/Reshape`) reads `blocks.0.attn.qkv`. A Myelin
    region over several modules (`{ForeignNode[/blocks/blocks.0/norm1/ReduceMean.../head/Gemm]}`) reads as its
    first and last module; a layer TensorRT made itself (a reformat) comes from none."""
    from pytest_vitperf.measure.kernels import OUTSIDE

    first = layer.split(" + ", 1)[0].strip()
    if first.startswith("{ForeignNode[") and "..." in first:
        start, end = first.removeprefix("{ForeignNode[").removesuffix("]}").split("...", 1)
        return f"{module_of(start)} ... {module_of(end.lstrip('('))}"
    parts = [c for c in first.split("/") if c]
    if not first.startswith("/") or len(parts) < 2:
        return OUTSIDE
    path: list[str] = []
    for c in parts[:-1]:  # the last is the ONNX op
        if path and c.startswith(path[-1] + "."):  # the exporter's scope repeats its parent: blocks, blocks.0
            path[-1] = c
        else:
            path.append(c)
    return ".".join(path)


def by_module(layer_ms: dict[str, float]) -> dict[str, float]:
    """Milliseconds by module, from milliseconds by TensorRT layer."""
    out: dict[str, float] = {}
    for name, ms in layer_ms.items():
        out[module_of(name)] = out.get(module_of(name), 0.0) + ms
    return out
