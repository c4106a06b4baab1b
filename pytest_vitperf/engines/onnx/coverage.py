"""Quantization coverage of an ONNX graph: which share of the GEMM FLOPs runs in which precision.

An "NVFP4" engine whose GEMMs are half FP16 cannot be much faster than FP16 (seed 000: 1.42x against a 2.68x
ceiling). Coverage reads the exported graph the way TensorRT will: a MatMul, Gemm or Conv is quantized when
each of its data inputs comes from a DequantizeLinear (standard or TensorRT's `trt` domain), looking through
shape-only nodes; its precision is the quantized tensor's type (FLOAT8E4M3FN, FLOAT4E2M1, INT8) or the custom
op's name (TRT_MXFP8..., TRT_FP4...). FLOPs come from shape inference: 2·M·K·N per matrix product, 2·output·
(C_in/groups)·kH·kW per convolution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_vitperf.engines.onnx.graph import SHAPE_OPS, Graph, infer_shapes, is_dq, load

GEMM_OPS = ("MatMul", "Gemm", "Conv")
_NARROWEST_FIRST = ["nvfp4", "fp4", "mxfp8", "fp8", "fp8-e5m2", "int8", "quantized", "high"]
_TYPE_PRECISION = {
    "FLOAT8E4M3FN": "fp8",
    "FLOAT8E5M2": "fp8-e5m2",
    "FLOAT4E2M1": "fp4",
    "INT8": "int8",
    "UINT8": "int8",
}


@dataclass(frozen=True)
class Gemm:
    """One GEMM node of an ONNX graph (MatMul, Gemm, Conv) and the precision its inputs arrive in."""

    name: str
    op: str
    flops: int
    precision: str  # "fp8", "nvfp4", "mxfp8", "int8", "fp4", or "high" (not quantized)
    attention: bool = False


@dataclass
class CoverageReport:
    gemms: list[Gemm] = field(default_factory=list)

    @property
    def total_flops(self) -> int:
        return sum(x.flops for x in self.gemms)

    def flops_by_precision(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for x in self.gemms:
            out[x.precision] = out.get(x.precision, 0) + x.flops
        return out

    @property
    def fraction(self) -> float:
        """Share of GEMM FLOPs with quantized inputs, any precision."""
        total = self.total_flops
        return sum(x.flops for x in self.gemms if x.precision != "high") / total if total else 0.0

    def fraction_at(self, precision: str) -> float:
        total = self.total_flops
        return self.flops_by_precision().get(precision, 0) / total if total else 0.0

    @property
    def weight_fraction(self) -> float:
        """Share of the FLOPs outside attention (the GEMMs with weights: Linear, Conv) with quantized inputs: what a
        recipe that leaves attention's two batched matmuls alone, as the default ones do, is meant to cover. Attention
        is 4% of ViT-B/16's GEMM FLOPs at 224 px and 14% of ViT-Ti/16's."""
        outside = [x for x in self.gemms if not x.attention]
        total = sum(x.flops for x in outside)
        return sum(x.flops for x in outside if x.precision != "high") / total if total else 0.0

    @property
    def attention_quantized(self) -> bool | None:
        att = [x for x in self.gemms if x.attention]
        return None if not att else all(x.precision != "high" for x in att)

    @property
    def high_precision(self) -> list[Gemm]:
        return sorted((x for x in self.gemms if x.precision == "high"), key=lambda x: -x.flops)

    def left_out(self, most: int = 3) -> str:
        """The largest GEMMs left in high precision, with their share of the FLOPs: what a recipe did not reach."""
        total = self.total_flops or 1
        high = self.high_precision
        shown = [f"{x.op} {x.name} ({x.flops / total:.1%})" for x in high[:most]]
        more = f" and {len(high) - most} more" if len(high) > most else ""
        return f"in high precision: {', '.join(shown)}{more}" if high else "nothing in high precision"

    def summary(self) -> str:
        parts = [f"{p} {f / self.total_flops:.1%}" for p, f in sorted(self.flops_by_precision().items())]
        share = sum(x.flops for x in self.gemms if x.attention) / (self.total_flops or 1)
        att = {None: "no attention found", True: f"attention ({share:.1%}) quantized",
               False: f"attention ({share:.1%}) in high precision"}  # fmt: skip
        # ONNX shape inference stops at some custom ops: a GEMM whose shapes it lost has no FLOPs to count
        unknown = sum(x.flops == 0 for x in self.gemms)
        lost = f"; {unknown} of {len(self.gemms)} GEMMs of unknown shape, not counted" if unknown else ""
        return (f"GEMM FLOPs {self.total_flops / 1e9:.2f} G: " + ", ".join(parts) + f"; {att[self.attention_quantized]}"
                + lost)  # fmt: skip


def quantization_coverage(target: Any) -> CoverageReport:
    """Coverage of an `onnx.ModelProto` or ONNX file."""
    import onnx

    model = load(Path(target)) if isinstance(target, (str, Path)) else target
    g = model.graph
    shapes = infer_shapes(model)
    types: dict[str, int] = {init.name: init.data_type for init in g.initializer}
    graph = Graph(model)
    producer = graph.producer
    attention_mm = {m.name for a in graph.attention() for m in (a.qk, a.pv) if m is not None}

    def source(name: str) -> Any:
        return graph.upstream(name, lambda op: op in SHAPE_OPS)

    def precision_of(dq: Any) -> str:
        op = dq.op_type.upper()
        if "MXFP8" in op:
            return "mxfp8"
        if "FP4" in op or "NVFP4" in op:
            return "nvfp4"
        q_in = dq.input[0]
        elem = types.get(q_in)
        if elem is None:  # the quantized tensor comes from a Q node: its name says the format
            q = producer.get(q_in)
            if q is not None and "FP4" in q.op_type.upper():
                return "nvfp4"
            if q is not None and "MXFP8" in q.op_type.upper():
                return "mxfp8"
            if q is not None and q.op_type == "QuantizeLinear":
                return _q_output_precision(q, types)
            return "quantized"
        name = onnx.TensorProto.DataType.Name(elem)
        if name == "FLOAT4E2M1":
            # FP4 weights double-dequantized through an FP8 block scale are NVFP4.
            scale = source(dq.input[1]) if len(dq.input) > 1 else None
            return "nvfp4" if scale is not None and is_dq(scale.op_type) else "fp4"
        return _TYPE_PRECISION.get(name, "quantized")

    report = CoverageReport()
    for n in g.node:
        if n.op_type not in GEMM_OPS:
            continue
        data_inputs = list(n.input[:2])
        srcs = [source(i) for i in data_inputs]
        quantized = all(s is not None and is_dq(s.op_type) for s in srcs)
        precs = {precision_of(s) for s in srcs} if quantized else {"high"}
        # A GEMM with FP4 weights and FP8 activations (W4A8) counts at the narrower weight precision.
        precision = min(precs, key=_NARROWEST_FIRST.index)
        report.gemms.append(
            Gemm(n.name or n.output[0], n.op_type, _flops(n, shapes), precision, n.name in attention_mm)
        )
    return report


def _q_output_precision(q: Any, types: dict[str, int]) -> str:
    """Precision of a standard QuantizeLinear: its zero point's type, else its output_dtype attribute."""
    import onnx

    elem = types.get(q.input[2]) if len(q.input) > 2 else None
    if elem is None:
        elem = next((a.i for a in q.attribute if a.name == "output_dtype"), None) or onnx.TensorProto.UINT8
    return _TYPE_PRECISION.get(onnx.TensorProto.DataType.Name(elem), "quantized")


def _flops(n: Any, shapes: dict[str, list[int | None]]) -> int:
    def known(s: list[int | None] | None) -> list[int] | None:
        if not s or any(d is None for d in s):
            return None
        return [int(d or 0) for d in s]

    a, b = known(shapes.get(n.input[0])), known(shapes.get(n.input[1]))
    out = known(shapes.get(n.output[0]))
    if n.op_type == "Conv":
        if out is None or b is None:
            return 0
        per_output = 1
        for d in b[1:]:
            per_output *= d  # C_in/groups * kH * kW
        count = 1
        for d in out:
            count *= d
        return 2 * count * per_output
    if n.op_type == "Gemm":
        trans_a = next((x.i for x in n.attribute if x.name == "transA"), 0)
        if a is None or out is None:
            return 0
        k = a[0] if trans_a else a[1]
        return 2 * out[0] * out[1] * k
    if a is None or out is None:  # MatMul
        return 0
    count = 1
    for d in out:
        count *= d
    return 2 * count * a[-1]
