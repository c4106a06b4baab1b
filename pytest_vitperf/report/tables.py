"""Words for what the run decided: the summary tables, baseline outcomes and writes, and failure messages.
Nothing here decides anything (verdicts/floors.py and verdicts/baselines/gate.py do)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_vitperf.core.precision import get_precision, sort_key
from pytest_vitperf.engines.gemms import KINDS, dense_peak, roofline, shape_of
from pytest_vitperf.engines.tensorrt.plan import PlanRecord
from pytest_vitperf.measure.clocks import CLOCK_SPAN_WARN, ClockComparison, compare_clocks, sm_span, unexpected_reasons
from pytest_vitperf.measure.measurement import Measurement, Spec
from pytest_vitperf.verdicts.accuracy import TaskAccuracy
from pytest_vitperf.verdicts.floors import CYCLES, TIME, Verdict
from pytest_vitperf.verdicts.rows import RowVerdict, reference_of
from pytest_vitperf.verdicts.stats import FAIL

COLUMNS = (
    "model",
    "precision",
    "batch",
    "backend",
    "mode",
    "median ms",
    "p90 ms",
    "p99 ms",
    "CoV",
    "SM MHz",
    "img/s",
    "cos vs fp32",
    "vs fp16",
    "clock ratio",
    "cycles vs fp16",
    "verdict",
)


def table(header: Sequence[str], rows: Iterable[Sequence[str]], markdown: bool = False) -> list[str]:
    """Columns padded for a terminal, or (`markdown`) a GitHub-flavoured Markdown table, which report.md shows."""
    rows = [list(r) for r in rows]
    if markdown:
        def cells(values: Sequence[str]) -> str:
            return "| " + " | ".join(str(c).replace("|", "\\|") for c in values) + " |"

        return [cells(header), "|" + "---|" * len(header), *(cells(r) for r in rows)]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip()

    return [fmt(header), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)]


def run_mode(spec: Spec) -> str:
    """How the engine ran: compiled or eager; on a GPU, replayed as a CUDA graph or launched op by op; with the
    cache evicted before every sample (--vitperf-cold)."""
    compiled = spec.options.get("compile")
    launch = "" if spec.sm is None else "graph" if spec.options.get("mode") == "cuda-graph" else "launches"
    how = {None: "", "off": "eager", "default": "compiled"}.get(compiled, f"compiled ({compiled})")
    cold = "cold cache" if spec.options.get("cold") else ""
    return ", ".join(p for p in (how, launch, cold) if p) or "-"


def clock_comparison(reference: Measurement, candidate: Measurement) -> ClockComparison | None:
    return compare_clocks(reference.median, candidate.median, reference.sm_mhz, candidate.sm_mhz)


def _summary_row(m: Measurement, row: RowVerdict) -> list[str]:
    s = m.spec
    sm = "-" if m.sm_mhz is None else f"{m.sm_mhz:.0f}"
    err = s.options.get("output_error")
    cos = "-" if not err else f"{err['cosine']:.5f}"
    clock = "-" if row.clock_ratio is None else f"{row.clock_ratio:.2f}x"
    return [
        s.model,
        s.precision,
        str(s.batch),
        s.backend,
        run_mode(s),
        f"{m.median:.3f}",
        f"{m.p90:.3f}",
        f"{m.p99:.3f}",
        f"{m.cov:.1%}",
        sm,
        f"{m.images_per_s:.1f}",
        cos,
        row.ratio_text(TIME),
        clock,
        row.ratio_text(CYCLES),
        row.verdict_text(),
    ]


def rendered(measurements: Iterable[Measurement], rows: Iterable[RowVerdict]) -> list[tuple[Measurement, RowVerdict]]:
    """Each judged row beside its measurement, in the rows' order; GEMMs have their own table."""
    by_row = {(m.spec.key, m.spec.gpu_uuid): m for m in measurements if shape_of(m.spec.options) is None}
    return [(by_row[(r.key, r.gpu_uuid)], r) for r in rows if (r.key, r.gpu_uuid) in by_row]


def summary(measurements: Iterable[Measurement], rows: Iterable[RowVerdict], markdown: bool = False) -> list[str]:
    """The summary table: each row's measurement and what the run decided for it (verdicts/rows.py)."""
    pairs = rendered(measurements, rows)
    several = len({m.spec.gpu_uuid for m, _ in pairs}) > 1
    lines = []
    for m, row in pairs:
        cells = _summary_row(m, row)
        lines.append([*cells[:4], gpu_label(m.spec.gpu_index, m.spec.gpu_uuid), *cells[4:]] if several else cells)
    return table((*COLUMNS[:4], "GPU", *COLUMNS[4:]) if several else COLUMNS, lines, markdown)


GEMM_COLUMNS = ("shape (MxNxK)", "layer", "kind", "median ms", "CoV", "SM MHz", "TFLOPS", "% of peak", "GB/s",
                "% of HBM", "FLOP/B", "bound", "vs fp16")  # fmt: skip


def gemm_summary(measurements: Iterable[Measurement], markdown: bool = False) -> list[str]:
    """One row per GEMM: its throughput against the GPU's two roofs (gemms.roofline: the dense peak and the HBM
    bandwidth), the roof that bounds its arithmetic intensity, and its speedup over FP16 of the same operand mode on
    the same GPU; the datasheets and the operand mode under the table."""
    ms = [(shape, m) for m in measurements if (shape := shape_of(m.spec.options)) is not None]
    if not ms:
        return []
    ms.sort(key=lambda sm: (sm[0].layer, sm[0].n, sm[0].m, sm[0].k, sm[1].spec.model,
                            list(KINDS).index(sm[1].spec.precision)))  # fmt: skip
    fp16 = {(m.spec.model, m.spec.gpu_uuid): m for _, m in ms if m.spec.precision == "fp16"}
    rows, sources = [], set()
    for shape, m in ms:
        ref = fp16.get((m.spec.model, m.spec.gpu_uuid))
        r = roofline(shape, m.spec.precision, m.median, m.spec.device)
        peak = dense_peak(m.spec.device, m.spec.precision)
        if peak is not None:
            sources.add(f"{peak[1].gpu}: {peak[1].source}, {peak[1].hbm_tbps} TB/s")
        padded = m.spec.options.get("padded_m")
        hot = m.spec.options.get("operands", {}).get("hot")
        rows.append(
            [
                f"{shape.m}x{shape.n}x{shape.k}" + (f" (M padded to {padded})" if padded else "") + " hot" * bool(hot),
                shape.layer or "-",
                m.spec.precision,
                f"{m.median:.4f}",
                f"{m.cov:.1%}",
                "-" if m.sm_mhz is None else f"{m.sm_mhz:.0f}",
                f"{r.tflops:.1f}",
                "-" if r.of_peak is None or r.peak_tflops is None else f"{r.of_peak:.0%} of {r.peak_tflops:.0f}",
                f"{r.gbps:.0f}",
                "-" if r.of_hbm is None else f"{r.of_hbm:.0%}",
                f"{r.intensity:.0f}",
                "-" if r.bound is None else r.bound,
                "-" if ref is None or ref is m else f"{ref.median / m.median:.2f}x",
            ]
        )
    notes = [f"roofs (dense, at the datasheet's boost clock; HBM bandwidth): {s}" for s in sorted(sources)]
    notes.append("GB/s and FLOP/B count the least traffic a product needs: A and B read once, its output written once; "
                 "bound: memory below the ridge (peak / bandwidth), compute above it")  # fmt: skip
    modes = [m.spec.options.get("operands") for _, m in ms]
    rotated = sorted({o["copies"] for o in modes if o and not o.get("hot")})
    if rotated:
        copies = f"{rotated[0]}" + (f"-{rotated[-1]}" if len(rotated) > 1 else "")
        notes.append(f"operands rotated over {copies} copies holding more than twice the L2, so each launch reads "
                     "them from HBM")  # fmt: skip
    if any(o and o.get("hot") for o in modes):
        notes.append("hot: one set of operands launched back to back (--vitperf-gemm-hot); they stay in L2 where they "
                     "fit, and % of HBM can pass 100%")  # fmt: skip
    batched = sorted({n for _, m in ms if (n := m.spec.options.get("launches_per_sample", 1)) > 1})
    if batched:
        notes.append(
            f"each sample: one CUDA graph of {batched[0]}-{batched[-1]} back-to-back launches, divided by their "
            "number (launches_per_sample in the JSON)"
        )
    return [*table(GEMM_COLUMNS, rows, markdown), "", *notes] if markdown else [*table(GEMM_COLUMNS, rows), *notes]


def gpu_label(index: int | None, uuid: str | None) -> str:
    """'1 (GPU-8f3c1d2e)': the index, and enough of the UUID to tell two GPUs of one model apart."""
    return "-" if index is None else f"{index} ({(uuid or '?')[:12]})"


def clock_notes(measurements: Iterable[Measurement]) -> list[str]:
    """Warnings for measurements whose SM clock moved more than CLOCK_SPAN_WARN of its median, or that saw
    clock-event reasons other than the power cap (thermal slowdown, power brake, ...), or that missed their
    --vitperf-max-noise target."""
    lines = []
    for m in measurements:
        what = f"{m.spec.model} {m.spec.precision} b{m.spec.batch}"
        span, sm = sm_span(m.clocks), m.sm_mhz
        if span is not None and sm and (span[1] - span[0]) > CLOCK_SPAN_WARN * sm:
            lines.append(f"warning: {what}: SM clock spanned {span[0]}-{span[1]} MHz (median {sm:.0f})")
        others = unexpected_reasons(m.clocks)
        if others:
            lines.append(f"warning: {what}: clocks held back by {', '.join(others)}, not only the power cap")
        target, noise = m.spec.options.get("max_noise"), m.spec.options.get("median_noise")
        if target is not None and noise is not None and noise > target:
            lines.append(
                f"note: {what}: the median's 95% confidence half-width is {noise:.2%} after {m.n} samples, above the "
                f"{target:.2%} target: sampling stopped at --vitperf-timeout-ms"
            )
        dropped = m.spec.options.get("clocks", {}).get("throttled_samples_dropped")
        if dropped:
            lines.append(f"note: {what}: {dropped} samples below 75% of the default SM clock dropped (NVBench's rule)")
    return lines


def interval_notes(measurements: Iterable[Measurement], rows: Iterable[RowVerdict], confidence: float) -> list[str]:
    """How the speedups' intervals were made and how the floors were judged, under the summary."""
    runs = {m.run: m for m in measurements if m.run is not None}
    if not runs:
        return []
    rounds = sorted({m.rounds_taken for m in runs.values()})
    builds = sorted({m.builds for m in runs.values()})
    lines = [
        f"intervals: {confidence:.0%}, over {' or '.join(map(str, rounds))} interleaved rounds per family and "
        f"{' or '.join(map(str, builds))} build(s) per precision (Student's t on the rounds' log ratios, widened by "
        "the spread between builds); the cycles column multiplies each round's time by its SM clock"
    ]
    judged = [r for r in rows if r.floor is not None]
    if judged:
        level = judged[0].level
        lines.append(
            f"floors: judged at {level:.2%} each, so that all of them hold together at {confidence:.0%} "
            "(Bonferroni over the run's floors and looks); pass when the interval clears the floor, FAIL when it "
            "lies below, inconclusive when it straddles it"
        )
    return lines


def speedup_message(v: Verdict, nodeid: str) -> str:
    """Why a speedup fails its floor, or stays inconclusive: both intervals, the medians, where, and what to run."""
    b, c = v.reference.spec, v.candidate.spec
    judged = v.judged
    at = f"{v.judged_in}" + (f", {judged.text()} at {judged.confidence:.2%}" if judged is not None else ", by medians")
    head = "below" if v.outcome == FAIL else "not told apart from"
    shown = v.interval(TIME)
    lines = [
        f"{c.precision} is {v.speedup:.3f}x faster than {b.precision}, {head} the floor {v.floor:.2f}x ({at})"
        + (f", set on {v.set_on}" if v.set_on else "") + (f" [{v.source}]" if v.source else ""),
        *(
            [f"  in time {shown.text()} at {shown.confidence:.0%} over {shown.n} rounds"]
            if shown is not None
            else ["  timed one after the other: no interval"]
        ),
        f"  {b.precision:>12} median {v.reference.median:.3f} ms (n={v.reference.n}, CoV {v.reference.cov:.1%})",
        f"  {c.precision:>12} median {v.candidate.median:.3f} ms (n={v.candidate.n}, CoV {v.candidate.cov:.1%})",
        f"  {c.model} batch {c.batch}, {c.backend} {c.backend_version}, {c.device}",
    ]
    if v.outcome == FAIL:
        lines.append("If the new speedup is expected, lower the floor in the floors file; to re-measure run:")
    elif v.settles_in():
        lines.append("More rounds may settle it (--vitperf-round-budget-s, --vitperf-rounds); to re-measure run:")
    else:
        lines.append("More rounds cannot settle it: the spread between its engine's builds alone straddles the floor. "
                     "More builds can (--vitperf-builds), or a floor further from the speedup; to re-measure run:")
    return "\n".join([*lines, f"  pytest --gpu-bench {nodeid!r}"])


def ms_text(ms: float) -> str:
    """A latency in ms: three decimals, or three significant digits below 0.1 ms, where three decimals would
    round a 6 us GEMM and a 7 us one to the same 0.006 or 0.007."""
    return f"{ms:.3f}" if ms >= 0.1 else f"{ms:.3g}"


def _plan_row(p: PlanRecord) -> tuple[str, ...]:
    size = f"{p.info.get('engine_bytes', 0) / 1e6:.1f}"
    facts = (str(p.info.get(k, "")) for k in ("target", "build_s", "cache", "coverage"))
    target, build_s, cache, coverage = facts
    return (p.model, p.precision, str(p.batch), f"{p.backend} {p.version}", target, size, build_s, cache, coverage)


def plan_summary(plans: Iterable[PlanRecord]) -> list[str]:
    rows = map(_plan_row, sorted(plans, key=lambda p: (p.model, p.batch, sort_key(p.precision))))
    return table(("model", "precision", "batch", "builder", "target", "MB", "build s", "cache", "coverage"), rows)


def accuracy_summary(accuracies: Iterable[TaskAccuracy], measurements: Iterable[Measurement]) -> list[str]:
    """Seed 003's trade-off: per precision, what it costs on the accuracy task and, where the same run timed it,
    what it buys (the largest batch timed of the run's first model, against FP16 at that batch)."""
    # ViT measurements only: a GEMM's spec records its shape (gemms.describe) and would sort first as a "model"
    timed = {(m.spec.model, m.spec.precision, m.spec.batch): m for m in measurements if "gemm" not in m.spec.options}
    model = min((k[0] for k in timed), default="")  # the first model alphabetically...
    batch = max((k[2] for k in timed if k[0] == model), default=0)  # ...at its largest batch

    def speed(precision: str) -> tuple[str, str]:
        m = timed.get((model, precision, batch))
        if m is None:
            return "-", "-"
        ref = timed.get((model, get_precision(precision).reference, batch))
        ratio = f"{ref.median / m.median:.2f}x" if ref is not None else "-"
        return f"{m.median:.3f} ({model} b{batch})", ratio

    rows = []
    for a in sorted(accuracies, key=lambda a: (sort_key(a.precision), a.via)):
        ms, ratio = speed(a.precision)
        rows.append((a.precision, a.via, str(a.images), f"{a.top1:.2%}", a.drop_interval().text(signed=True),
                     f"{a.mcnemar_p:.3g}", a.agreement_interval().text(), f"{a.error.cosine:.5f}",
                     f"{a.error_quantile:.4f}", a.floor or "-", ms, ratio))  # fmt: skip
    header = ("precision", "via", "images", "top-1", "drop pts [95%]", "McNemar p", "agreement [95%]", "cosine",
              "|err| p99", "floor", "ms", "vs fp16")  # fmt: skip
    return table(header, rows)


def measurement_notes(measurements: dict[tuple[str, str, int, str], Measurement]) -> list[str]:
    """Lines under the summary: what each quantized precision left in high precision in each model, engines timed
    without a CUDA graph, kernel breakdowns (--vitperf-kernels), and for each profiled precision next to its
    profiled FP16 reference, the Amdahl reading of the two."""
    from pytest_vitperf.measure.kernels import Breakdown, explain

    def profiled(key: tuple[str, str, int, str]) -> Breakdown | None:
        m = measurements.get(key)
        k = m.spec.options.get("kernels") if m is not None else None
        return Breakdown.from_dict(k) if k else None

    lines = []
    said: set[tuple[str, str]] = set()
    for (model, precision, batch, backend), m in measurements.items():
        what = f"{model} {precision} b{batch}"
        quantized = m.spec.options.get("quantization", "")
        if "kept in" in quantized and (model, precision) not in said:  # what the precision left alone, per model
            said.add((model, precision))
            lines.append(f"note: {model} {precision}: {quantized}")
        if "cuda_graph" in m.spec.options:  # the engine could not be captured: launch overhead is inside
            lines.append(f"note: {what}: CUDA graph {m.spec.options['cuda_graph']}")
        cand = profiled((model, precision, batch, backend))
        if cand is not None:
            lines.append(f"kernels: {what}: {cand.line()}")
        reference = reference_of(precision)
        ref = profiled((model, reference, batch, backend))
        if precision != reference and ref is not None and cand is not None:
            lines.append(f"why: {what} vs {reference}: {explain(ref, cand)}")
    return lines
