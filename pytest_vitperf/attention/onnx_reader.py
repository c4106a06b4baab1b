"""The ONNX reader: attention found by pattern (MatMul -> Softmax -> MatMul through onnx_graph.Graph, or an ONNX
Attention node), ranks and sizes read with shape inference."""

from __future__ import annotations

from typing import Any

from pytest_vitperf.attention.shape import AttentionBlock, AttentionShape
from pytest_vitperf.engines.onnx.graph import Attention, Graph, infer_shapes, is_dq, is_q

Shapes = dict[str, list[int | None]]


def _image(graph: Graph, shapes: Shapes) -> tuple[int, int] | None:
    initializers = {i.name for i in graph.g.initializer}
    for inp in graph.g.input:
        s = shapes.get(inp.name)
        if inp.name not in initializers and s and len(s) == 4 and s[2] and s[3]:
            return (int(s[2]), int(s[3]))
    return None


def _patch_embedding(
    graph: Graph, shapes: Shapes, image: tuple[int, int] | None
) -> tuple[tuple[int, int] | None, int | None]:
    """The patch size and patch count, from the first convolution."""
    conv = next((n for n in graph.g.node if n.op_type == "Conv"), None)
    if conv is None:
        return None, None
    attrs = {a.name: list(a.ints) for a in conv.attribute}
    k: list[Any] = attrs.get("kernel_shape") or (shapes.get(conv.input[1]) or [None] * 4)[2:]
    patch = (int(k[0]), int(k[1])) if len(k) == 2 and all(k) else None
    out = shapes.get(conv.output[0])
    if out and len(out) == 4 and out[2] and out[3]:
        return patch, int(out[2]) * int(out[3])
    if image and patch:
        return patch, (image[0] // patch[0]) * (image[1] // patch[1])
    return patch, None


def _softmax_block(graph: Graph, shapes: Shapes, a: Attention) -> AttentionBlock:
    q, s = shapes.get(a.qk.input[0]), shapes.get(a.softmax.input[0])
    seq = int(s[-1]) if s and s[-1] else (int(q[-2]) if q and q[-2] else None)
    head = int(q[-1]) if q and q[-1] else None
    after = graph.downstream(a.softmax.output[0], lambda op: op in {"Cast", "Identity"})
    q_after = [n for n in after if is_q(n.op_type)]
    operands = [*a.qk.input[:2], *(a.pv.input[:2] if a.pv is not None else [])]
    quantized = bool(q_after) and all(graph.dq_fed(i) for i in operands)
    return AttentionBlock(a.qk.name or a.softmax.name, seq, head, len(q) if q else None, quantized)


def _attention_node_block(node: Any, shapes: Shapes) -> AttentionBlock:
    q = shapes.get(node.input[0])
    rank = len(q) if q else None
    seq = int(q[-2]) if q and rank == 4 and q[-2] else None
    head = int(q[-1]) if q and rank == 4 and q[-1] else None
    return AttentionBlock(node.name, seq, head, rank, None)


def onnx_shape(model: Any) -> AttentionShape:
    graph = Graph(model)
    shapes = infer_shapes(model)
    image = _image(graph, shapes)
    patch, patches = _patch_embedding(graph, shapes, image)
    blocks = [_softmax_block(graph, shapes, a) for a in graph.attention()]
    blocks += [_attention_node_block(n, shapes) for n in graph.g.node if n.op_type == "Attention"]
    if not blocks:
        raise ValueError(
            f"no attention found in ONNX graph {graph.g.name or '(unnamed)'}: no MatMul -> Softmax -> MatMul pattern "
            "and no Attention node"
        )
    quantized_graph = any(is_q(n.op_type) or is_dq(n.op_type) for n in graph.g.node)
    return AttentionShape(graph.g.name or "onnx", image, patch, patches, tuple(blocks), quantized_graph)
