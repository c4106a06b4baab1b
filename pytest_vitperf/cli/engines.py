"""`vitperf export`, `vitperf layers` and `vitperf report`: a precision's ONNX export with what it quantizes, what a
built engine ran in each layer, and a report from a stored run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_vitperf.cli import argtypes
from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.core.files import write_atomic


def _export(args: argparse.Namespace) -> int:
    """One ONNX file per precision, as the TensorRT backends build from it, with its quantization coverage."""
    import onnx
    import torch

    from pytest_vitperf.engines.models.zoo import build_model
    from pytest_vitperf.engines.onnx.coverage import quantization_coverage
    from pytest_vitperf.engines.quant.recipes import export_onnx

    device = "cuda" if torch.cuda.is_available() else "cpu"  # on a CPU the block formats use cpu_quant's kernels
    model = build_model(args.model).to(device)
    args.out.mkdir(parents=True, exist_ok=True)
    for precision in args.precision:
        try:
            data = export_onnx(precision, model, args.batch, cache_dir=args.cache_dir)
        except VitperfError as exc:
            print(f"vitperf export: {precision}: {exc}", file=sys.stderr)
            return 2
        path = args.out / f"{args.model}-{precision}-b{args.batch}.onnx"
        write_atomic(path, data)
        coverage = quantization_coverage(onnx.load_from_string(data)).summary()
        print(f"wrote {path} ({len(data) / 1e6:.1f} MB): {coverage}")
    return 0


def _layers(args: argparse.Namespace) -> int:
    from pytest_vitperf.measure.layers import read_layer_info, read_profile, summary

    layers, schema = read_layer_info(args.layer_info)
    print(f"schema: {schema or 'not told (layer names only, no I/O list)'}")
    print(summary(layers, read_profile(args.profile) if args.profile else None, top=args.top))
    return 0


def _report(args: argparse.Namespace) -> int:
    """The rows as the run's JSON carries them; judged with the floors file where it carries none."""
    from pytest_vitperf.measure.measurement import read_benchmark_json
    from pytest_vitperf.report.pictures import write
    from pytest_vitperf.results import stored_rows

    measurements = read_benchmark_json(args.file)
    rows, how = stored_rows(args.file, measurements, args.floors)
    if how:
        print(f"vitperf report: {how}")
    confidence = next((r.time.confidence for r in rows if r.time is not None), 0.95)
    for path in write(args.out, measurements, rows, source=str(args.file), confidence=confidence):
        print(f"wrote {path}")
    return 0


def add(sub: Any) -> None:
    """The engine and report subcommands."""
    exp = sub.add_parser("export", help="a zoo model through a precision recipe to ONNX, with what it quantizes")
    exp.add_argument("--model", required=True, type=argtypes.model, help="a zoo model, e.g. vit_base_patch16_224")
    exp.add_argument("--precision", required=True, action="append", type=argtypes.precision, help="repeatable")
    exp.add_argument("--batch", type=int, default=1, help="the batch the graph is exported for (1)")
    exp.add_argument("--out", type=Path, required=True, help="folder for <model>-<precision>-b<batch>.onnx")
    exp.add_argument("--cache-dir", type=Path, help="reuse and keep exports and calibrations here")
    exp.set_defaults(func=_export)

    lay = sub.add_parser("layers", help="precision and time per layer of an engine (trtexec layer info + profile)")
    lay.add_argument("layer_info", type=Path, help="trtexec --exportLayerInfo output (engine-inspector JSON)")
    lay.add_argument("--profile", type=Path, help="trtexec --exportProfile output: adds time per precision")
    lay.add_argument("--top", type=int, default=5, help="slowest layers to list (5)")
    lay.set_defaults(func=_layers)

    rep = sub.add_parser("report", help="report.md and figures from a stored --benchmark-json (no GPU needed)")
    rep.add_argument("file", type=Path, help="a pytest-benchmark JSON written by a --gpu-bench run")
    rep.add_argument("--out", type=Path, required=True, help="folder for report.md, the PNGs and data.json")
    rep.add_argument("--floors", type=Path, default=Path("suites") / "floors.json",
                     help="for a JSON that carries no verdicts (written before runs kept them): the floors file its "
                          "run read (default: suites/floors.json)")  # fmt: skip
    rep.set_defaults(func=_report)
