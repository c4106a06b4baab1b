"""`vitperf compare`, `import-trtexec`, `show` and `history`: stored baselines, an upgrade between two versions, and
steps across nightly runs."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import astuple
from pathlib import Path
from typing import Any

from pytest_vitperf.cli import argtypes
from pytest_vitperf.options.parsers import parse_threshold
from pytest_vitperf.report.tables import table

DEFAULT_BASELINES = Path("baselines")


DEFAULT_FLOORS = Path("suites") / "floors.json"
GPU_MODEL = "the GPU model: its name as the driver reports it ('NVIDIA H100 80GB HBM3') or its slug"


def _compare(args: argparse.Namespace) -> int:
    from pytest_vitperf.store.baselines import JsonDirStorage
    from pytest_vitperf.verdicts.baselines.upgrade import build_report
    from pytest_vitperf.verdicts.floors import FloorsFile

    (backend, old), (backend_to, new) = args.from_, args.to
    if backend != backend_to:
        print(f"vitperf compare: --from and --to name different backends ({backend}, {backend_to}); compare one "
              f"backend's versions: vitperf compare --from {backend}/{old} --to {backend}/{new}", file=sys.stderr)
        return 2
    floors = FloorsFile.load(args.floors) if args.floors.exists() else None
    report = build_report(
        JsonDirStorage(args.baseline_dir),
        backend,
        old,
        new,
        gpu=args.gpu_model,
        floors=floors,
        floor_overrides=dict(args.floor),
        threshold=args.threshold,
    )
    text = report.markdown() if args.format == "markdown" else json.dumps(report.to_dict(), indent=1) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    print(text, end="")
    return 1 if args.fail_on_regression and not report.passed else 0


def _import_trtexec(args: argparse.Namespace) -> int:
    from pytest_vitperf.engines.tensorrt.trtexec import read_compute_ms
    from pytest_vitperf.measure.measurement import Measurement, Spec
    from pytest_vitperf.store.baselines import JsonDirStorage
    from pytest_vitperf.verdicts.baselines.gate import to_baseline

    samples = read_compute_ms(args.file)
    spec = Spec(args.model, args.precision, args.batch, args.backend, args.version, args.gpu_model, timer="trtexec")
    m = Measurement(spec, tuple(samples))
    provenance = {"kind": "imported", "source": str(args.file), "tool": "trtexec --exportTimes"}
    b = to_baseline(m, {}, provenance)
    storage = JsonDirStorage(args.baseline_dir)
    storage.put([b])
    where = f"{storage.path(b.key)}: {b.key.entry}"
    print(f"{where} median {m.median:.3f} ms from {m.n} computeMs samples (CoV {m.cov:.1%})")
    return 0


def _show(args: argparse.Namespace) -> int:
    from pytest_vitperf.core.precision import sort_key
    from pytest_vitperf.store.baselines import JsonDirStorage, read_file

    path = Path(args.path)
    if not path.exists():
        print(
            f"vitperf show: {path} does not exist; store baselines there with: "
            f"pytest --gpu-bench suites/ --vitperf-baseline-dir {path} --vitperf-update-baselines",
            file=sys.stderr,
        )
        return 2
    items = list(read_file(path).values()) if path.is_file() else list(JsonDirStorage(path).all())
    if not items:
        print(
            f"vitperf show: no baselines under {path} (<backend>/<version>/<gpu>/<model>.json); store some with: "
            f"pytest --gpu-bench suites/ --vitperf-baseline-dir {path} --vitperf-update-baselines",
            file=sys.stderr,
        )
        return 1
    items.sort(key=lambda b: (*astuple(b.key)[:5], sort_key(b.key.precision)))
    rows = [
        (
            b.key.backend,
            b.key.backend_version,
            b.key.gpu,
            b.key.model,
            b.key.precision,
            str(b.key.batch),
            f"{b.value:.3f} ms ({b.statistic})",
            str(len(b.samples)) if b.samples else "-",
            str(b.provenance.get("source", b.provenance.get("kind", ""))),
        )
        for b in items
    ]
    header = ("backend", "version", "gpu", "model", "precision", "batch", "latency", "samples", "source")
    for line in table(header, rows):
        print(line)
    return 0


def _history(args: argparse.Namespace) -> int:
    from pytest_vitperf.store.history import Folder, figure_name, plot, steps
    from pytest_vitperf.store.sql import open_history

    history = open_history(args.dir)
    all_series = history.series()
    if not all_series:
        option = "--vitperf-history" if isinstance(history, Folder) else "--vitperf-store"
        raise SystemExit(f"vitperf history: no history in {args.dir}; record some with: "
                         f"pytest --gpu-bench suites/ {option} {args.dir}")  # fmt: skip
    rows, slower = [], 0
    for key, points in all_series.items():
        found = steps(points, args.penalty)
        for s in found:
            rows.append((*key, str(len(points)), f"run {s.index + 1} ({s.time}, {key[0]} {s.backend_version})",
                         f"{s.before:.3f} -> {s.after:.3f} ms", f"{s.change:+.1%}"))  # fmt: skip
            slower += s.change > 0
        if not found:
            rows.append((*key, str(len(points)), "none", "-", "-"))
        if args.plots is not None:
            print(f"wrote {plot(key, points, found, args.plots / figure_name(key))}")
    for line in table(("backend", "gpu", "model", "entry", "runs", "step at", "level", "change"), rows):
        print(line)
    return 1 if args.fail_on_slowdown and slower else 0


def add(sub: Any) -> None:
    """The baseline subcommands."""
    cmp = sub.add_parser("compare", help="report an upgrade: absolute latency and speedup over FP16, two versions")
    cmp.add_argument("--from", dest="from_", required=True, type=argtypes.backend_version, metavar="BACKEND/VERSION",
                     help="the current version's baselines, e.g. tensorrt/10.14.1")
    cmp.add_argument("--to", required=True, type=argtypes.backend_version, metavar="BACKEND/VERSION",
                     help="the candidate's, e.g. tensorrt/10.16.0")
    cmp.add_argument("--gpu-model", metavar="NAME", help=GPU_MODEL + ", where both versions have baselines for several")
    cmp.add_argument("--baseline-dir", type=Path, default=DEFAULT_BASELINES, help=f"({DEFAULT_BASELINES})")
    cmp.add_argument("--floors", type=Path, default=DEFAULT_FLOORS,
                     help=f"floors file judged on the --to version ({DEFAULT_FLOORS})")
    cmp.add_argument("--floor", action="append", type=argtypes.floor, default=[], metavar="PRECISION=SPEEDUP",
                     help="a floor for one precision over the floors file's, e.g. nvfp4=1.55; repeatable")
    cmp.add_argument("--threshold", type=parse_threshold, default=0.05,
                     help="the relative latency change that counts (5%%)")
    cmp.add_argument("--format", choices=("markdown", "json"), default="markdown",
                     help="markdown: a pull-request comment; json: a machine-readable verdict")  # fmt: skip
    cmp.add_argument("--out", help="also write the report here, in --format")
    cmp.add_argument("--fail-on-regression", action="store_true", help="exit 1 on a regression or failed floor")
    cmp.set_defaults(func=_compare)

    imp = sub.add_parser("import-trtexec", help="store a trtexec --exportTimes trace as a baseline")
    imp.add_argument("file", type=Path, help="the JSON that trtexec --exportTimes wrote")
    imp.add_argument("--backend", default="tensorrt", help="the backend the baseline is kept under (tensorrt)")
    imp.add_argument("--version", required=True, help="the TensorRT version that timed it, e.g. 10.16.0")
    imp.add_argument("--gpu-model", required=True, metavar="NAME", help=GPU_MODEL)
    imp.add_argument("--model", required=True, help="the model the engine was built from, e.g. vit_base_patch16_224")
    imp.add_argument("--precision", required=True, type=argtypes.precision, help="the engine's precision, e.g. fp8")
    imp.add_argument("--batch", type=int, default=1, help="the engine's batch (1)")
    imp.add_argument("--baseline-dir", type=Path, default=DEFAULT_BASELINES, help=f"({DEFAULT_BASELINES})")
    imp.set_defaults(func=_import_trtexec)

    show = sub.add_parser("show", help="list baselines as a table")
    show.add_argument("path", nargs="?", default=str(DEFAULT_BASELINES), help="a baselines folder or one file")
    show.set_defaults(func=_show)

    his = sub.add_parser("history", help="find steps in each series of a history (ruptures' PELT)")
    his.add_argument("dir", help="the folder given to --vitperf-history, or the URL given to --vitperf-store")
    his.add_argument("--plots", type=Path, help="write one PNG per series here, each step marked")
    his.add_argument("--penalty", type=float, default=6.0, help="PELT penalty in sigma^2 ln(n) units (6: see docs)")
    his.add_argument("--fail-on-slowdown", action="store_true", help="exit 1 when a step made anything slower")
    his.set_defaults(func=_history)
