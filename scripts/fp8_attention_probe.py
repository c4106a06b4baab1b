"""Does FP8 attention pay on this GPU? ViT attention shapes through cuDNN's FP8 fused attention (cudnn-frontend's
`sdpa_fp8`, E4M3 in and out, per-tensor scales) against torch's FP16 scaled_dot_product_attention, timed with the
plugin's own sampler. Prints one line per shape: both medians, the speedup and the FP8 output's cosine against FP16.

    python scripts/fp8_attention_probe.py            # needs a CUDA GPU and the nvidia-cudnn-frontend package

Evidence for docs/benchmarks.md ("FP8 attention on Hopper"); not part of the suite.
"""

from __future__ import annotations

import math
import statistics
import sys

import torch

from pytest_vitperf.numerics import cosine
from pytest_vitperf.timing import TorchCudaEventClock, sample

# (name, batch, heads, tokens, head dim): ViT-B/16 at 224 px (196 patches + class token) and the
# quantization-friendly ViT-B at 256 px (256 tokens).
SHAPES = [
    ("vit_base b64", 64, 12, 197, 64),
    ("vit_base b1", 1, 12, 197, 64),
    ("vit_qf_base b64", 64, 12, 256, 64),
]
E4M3_MAX = 448.0


def timed(launch: object, stream: torch.cuda.Stream) -> float:
    samples = sample(launch, TorchCudaEventClock(stream), warmup_ms=500, duration_ms=1000, min_iterations=50)  # type: ignore[arg-type]
    return statistics.median(samples)


def fp8_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, stream: torch.cuda.Stream):  # type: ignore[no-untyped-def]
    """A cuDNN graph for E4M3 attention on [B, H, S, D] tensors; returns (launch, output, output scale)."""
    import cudnn

    handle = cudnn.create_handle()
    cudnn.set_stream(handle=handle, stream=stream.cuda_stream)
    e4m3, fp32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
    graph = cudnn.pygraph(io_data_type=e4m3, intermediate_data_type=fp32, compute_data_type=fp32, handle=handle)
    # Per-tensor scales as a calibrated engine holds them: amax / 448 for the inputs, the softmax output in [0, 1].
    names = ("dq", "dk", "dv", "ds", "ss", "so")
    scales = {n: torch.ones(1, 1, 1, 1, dtype=torch.float32, device=q.device) for n in names}
    qs, ks, vs = (float(t.abs().max()) / E4M3_MAX for t in (q, k, v))
    scales["dq"].fill_(qs), scales["dk"].fill_(ks), scales["dv"].fill_(vs)
    scales["ss"].fill_(E4M3_MAX), scales["ds"].fill_(1 / E4M3_MAX)
    out_scale = float(v.abs().max()) / E4M3_MAX  # attention output is a convex mix of V rows
    scales["so"].fill_(1 / out_scale)
    q8, k8, v8 = ((t / s).to(torch.float8_e4m3fn) for t, s in ((q, qs), (k, ks), (v, vs)))
    tensors = {n: graph.tensor_like(t) for n, t in (("q", q8), ("k", k8), ("v", v8))}
    scalars = {n: graph.tensor_like(t) for n, t in scales.items()}
    o, _, amax_s, amax_o = graph.sdpa_fp8(
        q=tensors["q"], k=tensors["k"], v=tensors["v"],
        descale_q=scalars["dq"], descale_k=scalars["dk"], descale_v=scalars["dv"],
        descale_s=scalars["ds"], scale_s=scalars["ss"], scale_o=scalars["so"],
        is_inference=True, attn_scale=1.0 / math.sqrt(q.shape[-1]), use_causal_mask=False,
    )  # fmt: skip
    out = torch.empty_like(q8)
    o.set_output(True).set_dim(list(out.shape)).set_stride(list(out.stride())).set_data_type(e4m3)
    amaxes = [torch.empty(1, 1, 1, 1, dtype=torch.float32, device=q.device) for _ in range(2)]
    for t in (amax_s, amax_o):
        t.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(fp32)
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans()
    workspace = torch.empty(graph.get_workspace_size(), dtype=torch.uint8, device=q.device)
    pack = {tensors["q"]: q8, tensors["k"]: k8, tensors["v"]: v8, o: out, amax_s: amaxes[0], amax_o: amaxes[1]}
    pack |= {scalars[n]: t for n, t in scales.items()}

    def launch() -> None:
        graph.execute(pack, workspace, handle=handle)

    return launch, out, out_scale


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to measure")
        return 0
    try:
        import cudnn
    except ImportError as exc:
        print(f"cudnn-frontend is not installed ({exc}); install it with: pip install nvidia-cudnn-frontend")
        return 1
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    print(f"{props.name} (sm_{props.major}{props.minor}), torch {torch.__version__}, cuDNN backend "
          f"{cudnn.backend_version()}, cudnn-frontend {cudnn.__version__}")  # fmt: skip
    stream = torch.cuda.Stream(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    for name, b, h, s, d in SHAPES:
        q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=torch.float16, generator=gen) for _ in range(3))
        with torch.cuda.stream(stream):
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        stream.synchronize()

        def fp16(q: torch.Tensor = q, k: torch.Tensor = k, v: torch.Tensor = v) -> None:
            with torch.cuda.stream(stream):
                torch.nn.functional.scaled_dot_product_attention(q, k, v)

        fp16_ms = timed(fp16, stream)
        try:
            launch, out, out_scale = fp8_attention(q, k, v, stream)
            launch()
            stream.synchronize()
        except Exception as exc:  # cuDNN says which limit it hit: report it, go on with the next shape
            print(f"{name}: FP16 SDPA {fp16_ms:.4f} ms; cuDNN FP8 refused: {str(exc).splitlines()[0]}")
            continue
        fp8_ms = timed(launch, stream)
        cos = cosine(ref.float().cpu().numpy(), (out.float() * out_scale).cpu().numpy())
        print(f"{name} [B{b} H{h} S{s} D{d}]: FP16 SDPA {fp16_ms:.4f} ms, cuDNN FP8 {fp8_ms:.4f} ms = "
              f"{fp16_ms / fp8_ms:.2f}x; FP8 output cosine vs FP16 {cos:.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
