"""A run as a report a person looks at: `--vitperf-report DIR` at the end of a run, or `vitperf report` from a stored
pytest-benchmark JSON (no GPU needed). Writes report.md, one PNG per figure and data.json.

Figures, per (model, batch), each ratio taken on one GPU:
- speedup over FP16 per precision, with its interval where the rounds gave one, the floor drawn over its bar;
  speedups, intervals and floors are the rows' records (verdicts/rows.py), as the run judged them;
- latency distribution of the raw samples per precision (box plot);
- kernel time by kind, FP16 next to each quantized or pruned precision, when the run profiled kernels
  (--vitperf-kernels);
- accuracy against speed: the top-1 drop from FP32 on the accuracy task (or, without one, the output's distance
  from FP32, 1 - cosine) against the speedup, each with its interval.
And, per GPU, the GEMM micro-suite's share of the dense peak per shape and kind (suites/test_gemm.py).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.core.precision import PRECISIONS, REFERENCE, get_precision, sort_key
from pytest_vitperf.engines.gemms import KINDS as GEMM_KINDS
from pytest_vitperf.engines.gemms import dense_peak, shape_of, tflops
from pytest_vitperf.measure.env import slug
from pytest_vitperf.measure.measurement import Measurement
from pytest_vitperf.report.tables import gemm_summary, interval_notes, summary
from pytest_vitperf.verdicts.accuracy import FAKE_QUANT_VIA
from pytest_vitperf.verdicts.rows import RowVerdict

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.accuracy import TaskAccuracy

Rows = dict[tuple[tuple[str, str, int, str], str | None], RowVerdict]  # (key, GPU) -> its record
KINDS = ("gemm", "attention", "quantize", "norm", "elementwise", "other")
COLORS = {"gemm": "#1f77b4", "attention": "#ff7f0e", "quantize": "#d62728", "norm": "#2ca02c",
          "elementwise": "#9467bd", "other": "#7f7f7f"}  # fmt: skip


def _families(ms: Iterable[Measurement]) -> dict[tuple[str, int, str, str | None], list[Measurement]]:
    out: dict[tuple[str, int, str, str | None], list[Measurement]] = defaultdict(list)
    for m in ms:
        if shape_of(m.spec.options) is None:  # GEMMs have a figure of their own
            out[(m.spec.model, m.spec.batch, m.spec.backend, m.spec.gpu_uuid)].append(m)
    return {k: sorted(v, key=lambda m: sort_key(m.spec.precision)) for k, v in sorted(out.items(), key=str)}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _title(family: tuple[str, int, str, str | None], what: str, device: str) -> str:
    """Two lines, so that a long model and device name fit a narrow figure."""
    model, batch, backend, _ = family
    return f"{what}\n{model} batch {batch}, {backend} on {device}"


def _judged(ms: list[Measurement], rows: Rows) -> list[tuple[Measurement, RowVerdict]]:
    """The family's rows with a speedup, but the reference's own."""
    found = [(m, rows.get((m.spec.key, m.spec.gpu_uuid))) for m in ms if m.spec.precision != REFERENCE]
    return [(m, r) for m, r in found if r is not None and r.speedup is not None]


def speedup_figure(family: Any, ms: list[Measurement], rows: Rows, path: Path) -> Path | None:
    judged = _judged(ms, rows)
    if not judged:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.4), dpi=100)
    names = [m.spec.precision + ("" if r.reference == REFERENCE else f"\nvs {r.reference}") for m, r in judged]
    speedups = [r.speedup or 0.0 for _, r in judged]
    intervals = [r.time for _, r in judged]  # None where the engines were not timed in rounds
    bars = ax.bar(names, speedups, color=["#2ca02c" if s >= 1 else "#d62728" for s in speedups])
    for k, ci in enumerate(intervals):  # drawn as measured: on a busy CPU the medians' ratio can lie outside it
        if ci is not None:
            ax.vlines(k, ci.low, ci.high, color="black", lw=1)
            ax.hlines([ci.low, ci.high], k - 0.08, k + 0.08, color="black", lw=1)
    ax.axhline(1.0, color="black", lw=0.8)
    drawn = [(i, r.floor) for i, (_, r) in enumerate(judged) if r.floor is not None]
    for n, (i, floor) in enumerate(drawn):
        ax.hlines(floor, i - 0.4, i + 0.4, color="black", ls="--", lw=1.5, label="_" if n else "floor")
    ax.bar_label(bars, [f"{s:.2f}x" for s in speedups], fontsize=8)
    ax.set_ylabel(f"speedup over {REFERENCE}\n(median, 95% interval)")
    ax.set_title(_title(family, "Speedup", ms[0].spec.device), fontsize=9)
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    if drawn:
        ax.legend(fontsize=7)
    return _save(fig, plt, path)


def latency_figure(family: Any, ms: list[Measurement], path: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3.4), dpi=100)
    ax.boxplot([list(m.samples_ms) for m in ms], showfliers=False)
    ax.set_xticks(range(1, len(ms) + 1), [m.spec.precision for m in ms])
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter("{x:g}")
    ax.yaxis.set_minor_formatter("{x:g}")
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_ylabel("latency per sample (ms, log)")
    ax.set_title(_title(family, "Latency", ms[0].spec.device), fontsize=9)
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    return _save(fig, plt, path)


def _quantized_or_reference(precision: str) -> bool:
    """FP16 and what a recipe quantizes or prunes, as seed 000's figure shows them: FP32's ten-fold bar and BF16's
    copy of FP16 would only squeeze them."""
    if precision == REFERENCE or precision not in PRECISIONS:
        return True
    recipe = get_precision(precision).recipe
    return recipe.config is not None or recipe.sparse24


def kernel_figure(family: Any, ms: list[Measurement], path: Path) -> Path | None:
    profiled = [m for m in ms if m.spec.options.get("kernels") and _quantized_or_reference(m.spec.precision)]
    if not profiled:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(profiled) + 1.8), dpi=100)
    left = [0.0] * len(profiled)
    for kind in KINDS:
        widths = [float(m.spec.options["kernels"]["by_category"].get(kind, 0.0)) for m in profiled]
        ax.barh([m.spec.precision for m in profiled], widths, left=left, color=COLORS[kind], label=kind)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("kernel time per inference (ms)")
    ax.set_title(_title(family, "Kernel time by kind", ms[0].spec.device), fontsize=9)
    ax.legend(fontsize=7, ncol=len(KINDS), loc="upper center", bbox_to_anchor=(0.5, -0.25), frameon=False)
    return _save(fig, plt, path)


Point = tuple[str, tuple[float, float, float], tuple[float, float, float]]  # name, (x, low, high), (y, low, high)


def tradeoff_points(ms: list[Measurement], rows: Rows,
                    accuracies: Iterable[TaskAccuracy] = ()) -> tuple[list[Point], bool]:  # fmt: skip
    """Every precision at its speedup over FP16 (with its interval where the rounds gave one) and what it costs: its
    top-1 drop from FP32 in points on the accuracy task, with its paired interval, where the run measured one (True);
    else the output's distance from FP32, 1 - cosine (False)."""
    ref = next((m for m in ms if m.spec.precision == REFERENCE), None)
    if ref is None:
        return [], False
    # the engine's own logits over fake quantization's: later entries win
    task = {a.precision: a for a in sorted(accuracies, key=lambda a: a.via.startswith(FAKE_QUANT_VIA), reverse=True)}
    points: list[Point] = []
    for m in ms:
        row = rows.get((m.spec.key, m.spec.gpu_uuid))
        if row is None or row.speedup is None:
            continue
        x, speed = row.speedup, None if m is ref else row.time
        xs = (x, speed.low, speed.high) if speed else (x, x, x)
        if task and m.spec.precision in task:
            d = task[m.spec.precision].drop_interval()
            points.append((m.spec.precision, xs, (d.estimate * 100, d.low * 100, d.high * 100)))
        elif not task and m.spec.options.get("output_error"):
            y = max(1 - m.spec.options["output_error"]["cosine"], 1e-9)
            points.append((m.spec.precision, xs, (y, y, y)))
    return points, bool(task)


def tradeoff_figure(family: Any, ms: list[Measurement], rows: Rows, path: Path,
                    accuracies: Iterable[TaskAccuracy] = ()) -> Path | None:  # fmt: skip
    points, by_task = tradeoff_points(ms, rows, accuracies)
    if not points:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.8), dpi=100)
    for name, (x, xlo, xhi), (y, ylo, yhi) in points:  # intervals drawn as measured, as in speedup_figure
        ax.hlines(y, xlo, xhi, color="#9ecae1", lw=1)
        ax.vlines(x, ylo, yhi, color="#9ecae1", lw=1)
        ax.plot(x, y, "o", color="#1f77b4", ms=4)
        ax.annotate(name, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.axvline(1.0, color="gray", lw=0.8)
    ax.set_xlabel(f"speedup over {REFERENCE} (95% interval where measured in rounds)")
    if by_task:
        ax.axhline(0.0, color="gray", lw=0.8)
        ax.set_ylabel("top-1 drop vs FP32 on the task,\npoints (95% paired interval)")
    else:
        ax.set_yscale("log")
        ax.set_ylabel("1 - cosine of the output vs FP32 (log)")
    ax.set_title(_title(family, "Accuracy against speed", ms[0].spec.device), fontsize=9)
    return _save(fig, plt, path)


def gemm_figure(ms: list[Measurement], path: Path) -> Path | None:
    """Percent of the GPU's dense peak per GEMM shape, one bar per kind; None without GEMMs of a known GPU."""
    rows: dict[str, dict[str, float]] = defaultdict(dict)
    for m in ms:
        shape, peak = shape_of(m.spec.options), dense_peak(m.spec.device, m.spec.precision)
        if shape is not None and peak is not None:
            label = f"{shape.layer + ' ' if shape.layer else ''}{shape.m}x{shape.n}x{shape.k}"
            rows[label][m.spec.precision] = 100 * tflops(shape, m.median) / peak[0]
    if not rows:
        return None
    plt = _plt()
    kinds = [k for k in GEMM_KINDS if any(k in r for r in rows.values())]
    fig, ax = plt.subplots(figsize=(8, 0.5 + 0.22 * len(rows) * len(kinds)))
    height = 0.8 / len(kinds)
    for i, kind in enumerate(kinds):
        ys = [j + i * height for j in range(len(rows))]
        ax.barh(ys, [r.get(kind, 0.0) for r in rows.values()], height=height, label=kind)
    ax.set_yticks([j + 0.4 - height / 2 for j in range(len(rows))], list(rows))
    ax.invert_yaxis()
    ax.set_xlabel("% of the dense peak (datasheet, boost clock)")
    ax.set_title(f"GEMMs, {ms[0].spec.device}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, plt, path)


def _save(fig: Any, plt: Any, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def write(out: Path, measurements: Iterable[Measurement], rows: Iterable[RowVerdict], source: str = "this run",
          accuracies: Iterable[TaskAccuracy] = (), confidence: float = 0.95) -> list[Path]:  # fmt: skip
    """report.md, the figures and data.json under `out`, rendering the rows' records; returns the files written."""
    accuracies = list(accuracies)
    ms, judged = list(measurements), list(rows)
    by_row: Rows = {(r.key, r.gpu_uuid): r for r in judged}
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    sections = []
    for family, members in _families(ms).items():
        model, batch, backend, uuid = family
        stem = slug(f"{model}-b{batch}-{backend}-{(uuid or 'cpu')[:12]}")  # GPU-xxxxxxxx: two GPUs of a run apart
        figures = [
            speedup_figure(family, members, by_row, out / f"speedup-{stem}.png"),
            latency_figure(family, members, out / f"latency-{stem}.png"),
            kernel_figure(family, members, out / f"kernels-{stem}.png"),
            tradeoff_figure(family, members, by_row, out / f"tradeoff-{stem}.png", accuracies),
        ]
        made = [f for f in figures if f is not None]
        written += made
        sections += [f"## {model}, batch {batch} ({backend}, {members[0].spec.device})", ""]
        sections += [f"![{f.stem}]({f.name})" for f in made] + [""]
    gemm_text: list[str] = []
    gemms = [m for m in ms if shape_of(m.spec.options) is not None]
    for uuid in sorted({m.spec.gpu_uuid or "" for m in gemms}):
        on_gpu = [m for m in gemms if (m.spec.gpu_uuid or "") == uuid]
        fig = gemm_figure(on_gpu, out / f"gemm-{slug(on_gpu[0].spec.device)}-{uuid[:12] or 'cpu'}.png")
        written += [fig] if fig is not None else []
        gemm_text += ["## GEMMs", "", *gemm_summary(on_gpu, markdown=True), ""]
        gemm_text += [f"![{fig.stem}]({fig.name})", ""] if fig is not None else []
    data = {"measurements": [m.to_dict() for m in ms], "rows": [r.to_dict() for r in judged]}
    (out / "data.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    notes = interval_notes(ms, judged, confidence)
    text = "\n".join([f"# pytest-vitperf report ({source}, written {when})", "", *summary(ms, judged, markdown=True),
                      "", *notes, *([""] if notes else []), *sections, *gemm_text])  # fmt: skip
    (out / "report.md").write_text(text, encoding="utf-8")
    return [out / "report.md", *written, out / "data.json"]
