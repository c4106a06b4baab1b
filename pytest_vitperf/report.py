"""Plain-text tables for the terminal summary."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pytest_vitperf.measurement import NOISY_COV, Measurement, Spec
from pytest_vitperf.precision import PRECISIONS, REFERENCE
from pytest_vitperf.session import BaselineRow, Verdict

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
    "img/s",
    "vs fp16",
    "verdict",
)


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    rows = [list(r) for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)).rstrip()

    return [fmt(header), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)]


def run_mode(spec: Spec) -> str:
    """How the engine ran: compiled or eager; on a GPU, replayed as a CUDA graph or launched op by op."""
    compiled = spec.options.get("compile")
    launch = "" if spec.sm is None else "graph" if spec.options.get("mode") == "cuda-graph" else "launches"
    how = {None: "", "off": "eager", "default": "compiled"}.get(compiled, f"compiled ({compiled})")
    return ", ".join(p for p in (how, launch) if p) or "-"


def _verdict(m: Measurement, ref: Measurement | None, verdict: Verdict | None) -> str:
    parts = []
    if m.spec.precision == REFERENCE:
        parts.append("reference")
    elif verdict is not None and verdict.floor is not None:
        word = "pass" if verdict.passed else "FAIL"
        parts.append(f"{word} (floor {verdict.floor:.2f}x)")
    elif ref is not None:
        parts.append("no floor")
    else:
        parts.append("no fp16 to compare")
    if m.noisy:
        parts.append(f"noisy: CoV > {NOISY_COV:.1%}")
    return "; ".join(parts)


def summary(measurements: Iterable[Measurement], verdicts: dict[tuple[str, str, int, str], Verdict]) -> list[str]:
    ms = list(measurements)
    order = list(PRECISIONS)
    ms.sort(key=lambda m: (m.spec.model, m.spec.batch, m.spec.backend, order.index(m.spec.precision)))
    by_key = {m.spec.key: m for m in ms}
    rows = []
    for m in ms:
        s = m.spec
        ref = by_key.get((s.model, REFERENCE, s.batch, s.backend))
        verdict = verdicts.get(s.key)
        if verdict is not None:
            ref = verdict.reference
        vs = f"{ref.median / m.median:.2f}x" if ref is not None else "-"
        rows.append(
            [
                s.model,
                s.precision,
                str(s.batch),
                s.backend,
                run_mode(s),
                f"{m.median:.3f}",
                f"{m.p90:.3f}",
                f"{m.p99:.3f}",
                f"{m.cov:.1%}",
                f"{m.images_per_s:.1f}",
                vs,
                _verdict(m, ref, verdict),
            ]
        )
    return table(COLUMNS, rows)


def baseline_summary(rows: list[BaselineRow], updates: list[str]) -> list[str]:
    order = list(PRECISIONS)
    rows = sorted(rows, key=lambda r: (r.model, r.batch, order.index(r.precision)))
    header = ("model", "precision", "batch", "baseline ms", "current ms", "Δ", "p-value", "verdict")
    out = (
        table(
            header,
            [(r.model, r.precision, str(r.batch), r.baseline, r.current, r.delta, r.p_value, r.verdict) for r in rows],
        )
        if rows
        else []
    )
    out += [f"note: {r.model} {r.precision} b{r.batch}: {r.note}" for r in rows if r.note]
    if any(r.verdict == "missing" for r in rows):
        out.append("record missing baselines with: pytest --gpu-bench <tests> --vitperf-update-baselines")
    out += updates
    return out


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
        ref = profiled((model, REFERENCE, batch, backend))
        if precision != REFERENCE and ref is not None and cand is not None:
            lines.append(f"why: {what} vs {REFERENCE}: {explain(ref, cand)}")
    return lines
