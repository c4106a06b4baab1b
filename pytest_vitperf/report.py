"""Words for what the run decided: the summary tables, baseline outcomes and writes, and failure messages.
Nothing here decides anything (floor.py and baselines/gate.py do)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_vitperf.accuracy import TaskAccuracy
from pytest_vitperf.baselines import gate
from pytest_vitperf.clocks import CLOCK_SPAN_WARN, ClockComparison, compare_clocks, sm_span, unexpected_reasons
from pytest_vitperf.floor import Verdict
from pytest_vitperf.gemms import KINDS, dense_peak, shape_of, tflops
from pytest_vitperf.measurement import NOISY_COV, Measurement, Spec
from pytest_vitperf.plan import PlanRecord
from pytest_vitperf.precision import PRECISIONS, REFERENCE, get_precision, sort_key
from pytest_vitperf.workers import WorkerRecord

UPDATE = "--vitperf-update-baselines"
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


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    rows = [list(r) for r in rows]
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


def _verdict(m: Measurement, ref: Measurement | None, verdict: Verdict | None, max_cov: float) -> str:
    parts = []
    if m.spec.precision == REFERENCE:
        parts.append("reference")
    elif verdict is not None and verdict.floor is not None:
        word = "pass" if verdict.passed else "FAIL"
        c = clock_comparison(verdict.reference, m)
        why = c.disagreement(verdict.floor, verdict.reference.spec.precision, m.spec.precision) if c else None
        parts.append(f"{word} (floor {verdict.floor:.2f}x{'; ' + why if why else ''})")
    elif ref is not None:
        parts.append("no floor")
    else:
        parts.append("no fp16 to compare")
    if m.cov > max_cov:
        parts.append(f"noisy: CoV > {max_cov:.1%}")
    return "; ".join(parts)


def _reference(precision: str) -> str:
    return get_precision(precision).reference if precision in PRECISIONS else REFERENCE


def clock_comparison(reference: Measurement, candidate: Measurement) -> ClockComparison | None:
    return compare_clocks(reference.median, candidate.median, reference.sm_mhz, candidate.sm_mhz)


def _summary_row(m: Measurement, ref: Measurement | None, verdict: Verdict | None, max_cov: float) -> list[str]:
    s = m.spec
    vs = "-" if ref is None else f"{ref.median / m.median:.2f}x"
    if ref is not None and ref.spec.precision != REFERENCE:  # a registered entry with its own reference
        vs += f" vs {ref.spec.precision}"
    c = clock_comparison(ref, m) if ref is not None else None
    clock, cycles = ("-", "-") if c is None else (f"{c.clock_ratio:.2f}x", f"{c.cycle_speedup:.2f}x")
    sm = "-" if m.sm_mhz is None else f"{m.sm_mhz:.0f}"
    err = s.options.get("output_error")
    cos = "-" if not err else f"{err['cosine']:.5f}"
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
        vs,
        clock,
        cycles,
        _verdict(m, ref, verdict, max_cov),
    ]


def summary(
    measurements: Iterable[Measurement],
    verdicts: dict[tuple[str, str, int, str], Verdict],
    max_cov: float = NOISY_COV,
) -> list[str]:
    ms = sorted(
        (m for m in measurements if shape_of(m.spec.options) is None),  # GEMMs have their own table
        key=lambda m: (m.spec.model, m.spec.batch, m.spec.backend, sort_key(m.spec.precision)),
    )
    by_key = {(m.spec.key, m.spec.gpu_uuid): m for m in ms}  # a ratio is only taken on one GPU
    gpus = {m.spec.gpu_uuid for m in ms}
    rows = []
    for m in ms:
        s = m.spec
        verdict = verdicts.get(s.key)
        same_gpu = by_key.get(((s.model, _reference(s.precision), s.batch, s.backend), s.gpu_uuid))
        ref = verdict.reference if verdict is not None else same_gpu
        row = _summary_row(m, ref, verdict, max_cov)
        rows.append([*row[:4], gpu_label(s.gpu_index, s.gpu_uuid), *row[4:]] if len(gpus) > 1 else row)
    return table((*COLUMNS[:4], "GPU", *COLUMNS[4:]) if len(gpus) > 1 else COLUMNS, rows)


GEMM_COLUMNS = ("shape (MxNxK)", "layer", "kind", "median ms", "CoV", "SM MHz", "TFLOPS", "% of peak", "vs fp16")


def gemm_summary(measurements: Iterable[Measurement]) -> list[str]:
    """One row per GEMM: throughput, its share of the GPU's dense peak (gemms.PEAKS) and its speedup over FP16 on
    the same GPU; the peaks' source under the table."""
    ms = [(shape, m) for m in measurements if (shape := shape_of(m.spec.options)) is not None]
    ms.sort(key=lambda sm: (sm[0].layer, sm[0].n, sm[0].m, sm[0].k, list(KINDS).index(sm[1].spec.precision)))
    fp16 = {(m.spec.model, m.spec.gpu_uuid): m for _, m in ms if m.spec.precision == "fp16"}
    rows, sources = [], set()
    for shape, m in ms:
        ref = fp16.get((m.spec.model, m.spec.gpu_uuid))
        peak = dense_peak(m.spec.device, m.spec.precision)
        tf = tflops(shape, m.median)
        pct = "-"
        if peak is not None:
            pct = f"{100 * tf / peak[0]:.0f}% of {peak[0]:.0f}"
            sources.add(f"{peak[1].gpu}: {peak[1].source}")
        padded = m.spec.options.get("padded_m")
        rows.append(
            [
                f"{shape.m}x{shape.n}x{shape.k}" + (f" (M padded to {padded})" if padded else ""),
                shape.layer or "-",
                m.spec.precision,
                f"{m.median:.4f}",
                f"{m.cov:.1%}",
                "-" if m.sm_mhz is None else f"{m.sm_mhz:.0f}",
                f"{tf:.1f}",
                pct,
                "-" if ref is None or ref is m else f"{ref.median / m.median:.2f}x",
            ]
        )
    notes = [f"peaks (dense, at the datasheet's boost clock): {s}" for s in sorted(sources)]
    batched = sorted({n for _, m in ms if (n := m.spec.options.get("launches_per_sample", 1)) > 1})
    if batched:
        notes.append(
            f"each sample: one CUDA graph of {batched[0]}-{batched[-1]} back-to-back launches, divided by their "
            "number (launches_per_sample in the JSON)"
        )
    return [*table(GEMM_COLUMNS, rows), *notes]


def gpu_label(index: int | None, uuid: str | None) -> str:
    """'1 (GPU-8f3c1d2e)': the index, and enough of the UUID to tell two GPUs of one model apart."""
    return "-" if index is None else f"{index} ({(uuid or '?')[:12]})"


def worker_summary(workers: Iterable[WorkerRecord]) -> list[str]:
    """One line per xdist worker: its GPU, what its start-up cost, and what it measured."""
    lines = []
    for w in sorted(workers, key=lambda w: w.worker):
        names = {"device": "torch import + device probe"}
        start = ", ".join(f"{names.get(k, k)} {v:.1f} s" for k, v in w.startup_s.items())
        where = "CPU" if w.gpu_index is None and w.gpu_uuid is None else f"GPU {gpu_label(w.gpu_index, w.gpu_uuid)}"
        lines.append(
            f"{w.worker} on {where}: start-up {start or 'none'}; engines prepared in {w.prepare_s:.1f} s; "
            f"measured {', '.join(w.measured) or 'nothing'}"
        )
    return lines


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


def ms_text(ms: float) -> str:
    """A latency in ms: three decimals, or three significant digits below 0.1 ms, where three decimals would
    round a 6 us GEMM and a 7 us one to the same 0.006 or 0.007."""
    return f"{ms:.3f}" if ms >= 0.1 else f"{ms:.3g}"


def _outcome_row(o: gate.Outcome) -> tuple[str, ...]:
    k, c = o.key, o.comparison
    batch = f"{k.batch} (cold)" if k.cold else str(k.batch)
    if c is None:
        return (k.model, k.precision, batch, "-", ms_text(o.current_ms), "-", "-", o.kind)
    change = c.change + ("" if c.p_value is not None else " (threshold only: no raw samples)")
    if c.change == "improvement":
        change += "; refresh with --vitperf-update-baselines"
    p = "-" if c.p_value is None else f"{c.p_value:.2g}"
    return (k.model, k.precision, batch, f"{ms_text(c.baseline_ms)} ({c.statistic})", ms_text(c.current_ms),
            f"{c.delta:+.1%}", p, change)  # fmt: skip


def write_line(w: gate.Write) -> str:
    where = f"{w.path} [{w.key.entry}]"
    if w.error is not None:
        return f"NOT WRITTEN {where}: {w.error}; the run fails: fix that, then run again with {UPDATE}"
    if w.old_ms is None:
        return f"added {where} median {ms_text(w.new_ms)} ms"
    change = w.new_ms / w.old_ms - 1
    return f"refreshed {where} {ms_text(w.old_ms)} ms ({w.old_statistic}) -> {ms_text(w.new_ms)} ms ({change:+.1%})"


def baseline_summary(outcomes: list[gate.Outcome], writes: list[gate.Write]) -> list[str]:
    outcomes = sorted(outcomes, key=lambda o: (o.key.model, o.key.batch, sort_key(o.key.precision)))
    header = ("model", "precision", "batch", "baseline ms", "current ms", "Δ", "p-value", "change")
    out = table(header, map(_outcome_row, outcomes)) if outcomes else []
    for o in outcomes:
        notes = ([o.note] if o.note else []) + [f"environment: {e}" for e in o.env_changes]
        if notes:
            out.append(f"note: {o.key.model} {o.key.precision} b{o.key.batch}: {'; '.join(notes)}")
    if any(o.kind == gate.MISSING for o in outcomes):
        out.append("record missing baselines with: pytest --gpu-bench <tests> --vitperf-update-baselines")
    return out + [write_line(w) for w in writes]


def failure_message(o: gate.Outcome, nodeid: str) -> str:
    """Why a test fails the baseline gate, ending with the command that accepts or creates its baseline."""
    accept = f"pytest --gpu-bench {nodeid!r} --vitperf-update-baselines"
    if o.failure == gate.UNREADABLE:
        return f"{o.note}\nFix or remove that file, then measure again with:\n  {accept}"
    if o.failure == gate.MISSING:
        return f"{o.note} (--vitperf-strict)\nCreate it with:\n  {accept}"
    c, k = o.comparison, o.key
    assert c is not None
    p = "-" if c.p_value is None else f"{c.p_value:.2g}"
    rows = [(f"{ms_text(c.baseline_ms)} ms", f"{ms_text(c.current_ms)} ms", f"{c.delta:+.1%}", p, c.change.upper())]
    lines = [
        f"latency regression: {k.model} {k.precision} batch {k.batch} on {k.backend} "
        f"{k.backend_version}, {k.gpu} ({c.statistic}, threshold {c.threshold:.0%}, {c.method})",
        *("  " + line for line in table(("baseline", "current", "Δ", "p-value", "change"), rows)),
        f"baseline from {o.baseline_from}",
    ]
    if o.note:  # a slowdown the clock explains, failing under --vitperf-strict
        lines.append(o.note)
    if o.env_changes:
        lines.append("environment changed since the baseline: " + "; ".join(o.env_changes))
    return "\n".join([*lines, "If the change is intended, accept it:", f"  {accept}"])


def _plan_row(p: PlanRecord) -> tuple[str, ...]:
    size = f"{p.info.get('engine_bytes', 0) / 1e6:.1f}"
    facts = (str(p.info.get(k, "")) for k in ("target", "build_s", "cache", "coverage"))
    target, build_s, cache, coverage = facts
    return (p.model, p.precision, str(p.batch), f"{p.backend} {p.version}", target, size, build_s, cache, coverage)


def plan_summary(plans: Iterable[PlanRecord]) -> list[str]:
    rows = map(_plan_row, sorted(plans, key=lambda p: (p.model, p.batch, sort_key(p.precision))))
    return table(("model", "precision", "batch", "builder", "target", "MB", "build s", "cache", "coverage"), rows)


def accuracy_summary(accuracies: Iterable[TaskAccuracy], measurements: Iterable[Measurement]) -> list[str]:
    """Seed 003's trade-off: per precision, what it costs on the digits task and, where the same run timed it,
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
        rows.append((a.precision, a.via, str(a.images), f"{a.top1:.2%}", f"{a.drop:+.2f}", f"{a.agreement:.2%}",
                     f"{a.error.cosine:.5f}", f"{a.error_quantile:.4f}", ms, ratio))  # fmt: skip
    header = ("precision", "via", "images", "top-1", "drop pts", "agreement", "cosine", "|err| p99", "ms", "vs fp16")
    return table(header, rows)


def measurement_notes(measurements: dict[tuple[str, str, int, str], Measurement]) -> list[str]:
    """Lines under the summary: engines timed without a CUDA graph, kernel breakdowns (--vitperf-kernels),
    and for each profiled precision next to its profiled FP16 reference, the Amdahl reading of the two."""
    from pytest_vitperf.kernels import Breakdown, explain

    def profiled(key: tuple[str, str, int, str]) -> Breakdown | None:
        m = measurements.get(key)
        k = m.spec.options.get("kernels") if m is not None else None
        return Breakdown.from_dict(k) if k else None

    lines = []
    for (model, precision, batch, backend), m in measurements.items():
        what = f"{model} {precision} b{batch}"
        if "cuda_graph" in m.spec.options:  # the engine could not be captured: launch overhead is inside
            lines.append(f"note: {what}: CUDA graph {m.spec.options['cuda_graph']}")
        cand = profiled((model, precision, batch, backend))
        if cand is not None:
            lines.append(f"kernels: {what}: {cand.line()}")
        reference = _reference(precision)
        ref = profiled((model, reference, batch, backend))
        if precision != reference and ref is not None and cand is not None:
            lines.append(f"why: {what} vs {reference}: {explain(ref, cand)}")
    return lines
