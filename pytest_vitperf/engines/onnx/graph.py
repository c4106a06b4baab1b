"""Reading exported ONNX graphs: loading with a clear error, static shapes through TensorRT's custom ops,
and the node patterns shared by the attention rules and the coverage report."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHAPE_OPS = {"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Cast", "Identity", "Flatten"}


def is_dq(op: str) -> bool:
    """DequantizeLinear, standard or TensorRT's (TRT_MXFP8DequantizeLinear, trt::DequantizeLinear)."""
    return op.endswith("DequantizeLinear")


def is_q(op: str) -> bool:
    """QuantizeLinear or a dynamic quantize (TRT_FP4DynamicQuantize, TRT_MXFP8DynamicQuantize)."""
    return "Quantize" in op and not is_dq(op)


def load(path: Path) -> Any:
    import onnx

    if not path.is_file():
        raise ValueError(f"ONNX file {path} does not exist")
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError, older onnx raises others
        raise ValueError(f"ONNX file {path} does not load: {type(exc).__name__}: {exc}") from None


def producers(g: Any) -> dict[str, Any]:
    return {o: n for n in g.node for o in n.output}


def consumers(g: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for n in g.node:
        for i in n.input:
            out.setdefault(i, []).append(n)
    return out


def infer_shapes(model: Any) -> dict[str, list[int | None]]:
    """Static shapes of every value. TensorRT's custom ops (domain `trt`) stop ONNX shape inference, so it
    runs on a copy where each of them keeps the shape of the tensor it quantizes, which is all that FLOP
    counting needs: a dequantize becomes a Cast to FP16 (so its FP8/FP4 input type does not trip the type
    checks downstream), anything else an Identity of its first input."""
    import onnx

    shadow = onnx.ModelProto()
    shadow.CopyFrom(model)
    nodes = []
    for n in shadow.graph.node:
        if n.domain not in ("", "ai.onnx"):
            if is_dq(n.op_type):
                n = onnx.helper.make_node("Cast", [n.input[0]], [n.output[0]], name=n.name, to=onnx.TensorProto.FLOAT16)
            else:
                n = onnx.helper.make_node("Identity", [n.input[0]], [n.output[0]], name=n.name)
        nodes.append(n)
    del shadow.graph.node[:]
    shadow.graph.node.extend(nodes)
    with contextlib.suppress(Exception):  # if inference fails, read whatever shapes the graph declares
        shadow = onnx.shape_inference.infer_shapes(shadow, data_prop=True)
    g = shadow.graph
    shapes: dict[str, list[int | None]] = {}
    for vi in [*g.input, *g.value_info, *g.output]:
        t = vi.type.tensor_type
        if t.HasField("shape"):
            shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


# Ops between Q·Kᵀ and the Softmax (scaling, masking, casts) and around attention's Q/DQ.
SCALE_OPS = {"Mul", "Div", "Add", "Where", "Cast"}


def _passes(op: str) -> bool:
    return op in SHAPE_OPS or op in SCALE_OPS or is_q(op) or is_dq(op)


class Graph:
    """An ONNX graph with who produces and who consumes each value: the one walk that the attention rules and the
    coverage report share."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.g = model.graph
        self.producer = producers(self.g)
        self.users = consumers(self.g)

    def upstream(self, name: str, skip: Callable[[str], bool]) -> Any:
        """The node that makes `name`, looking through nodes for which skip(op_type) holds."""
        node = self.producer.get(name)
        while node is not None and skip(node.op_type) and node.input:
            node = self.producer.get(node.input[0])
        return node

    def downstream(self, name: str, skip: Callable[[str], bool]) -> list[Any]:
        """The nodes that use `name`, looking through nodes for which skip(op_type) holds."""
        out, todo = [], list(self.users.get(name, []))
        while todo:
            n = todo.pop()
            if skip(n.op_type):
                for o in n.output:
                    todo.extend(self.users.get(o, []))
            else:
                out.append(n)
        return out

    def dq_fed(self, name: str) -> bool:
        """`name` comes from a dequantize, through shape ops only."""
        node = self.upstream(name, lambda op: op in SHAPE_OPS)
        return node is not None and is_dq(node.op_type)

    def attention(self) -> list[Attention]:
        """Each Softmax between two MatMuls (Q·Kᵀ before it, P·V after it, through scaling, shape ops and Q/DQ)."""
        out = []
        for sm in (n for n in self.g.node if n.op_type == "Softmax"):
            qk = self.upstream(sm.input[0], _passes)
            if qk is None or qk.op_type != "MatMul":
                continue
            pv = next((n for n in self.downstream(sm.output[0], _passes) if n.op_type == "MatMul"), None)
            out.append(Attention(sm, qk, pv))
        return out


@dataclass(frozen=True)
class Attention:
    softmax: Any
    qk: Any  # the MatMul of Q and Kᵀ
    pv: Any | None  # the MatMul of the probabilities and V, when found
