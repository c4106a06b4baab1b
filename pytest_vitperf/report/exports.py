"""A run's measurements in the formats that CI dashboards read: `--vitperf-export FORMAT=FILE`.

- `github-action-benchmark`: the `customSmallerIsBetter` input of benchmark-action/github-action-benchmark, a JSON
  array of {name, unit, value, range?, extra?} (its `BenchmarkResult`); the median in ms, and in `extra` the row's
  verdict as the summary words it (verdicts/rows.py).
- `bencher`: Bencher Metric Format, {benchmark: {measure: {value, lower_value?, upper_value?}}}, with Bencher's
  built-in measures: `latency` in nanoseconds (median, p10 to p90) and `throughput` in images per second.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pytest_vitperf.measure.measurement import Measurement
from pytest_vitperf.verdicts.rows import RowVerdict


def benchmark_name(m: Measurement) -> str:
    """One name per (model, precision, batch, backend, version, GPU): a dashboard keeps one series per name, and a
    number from another GPU or backend version must not continue it."""
    s = m.spec
    cold = ", cold cache" if s.options.get("cold") else ""
    return f"{s.model} {s.precision} b{s.batch} ({s.backend} {s.backend_version or '?'}, {s.device}{cold})"


def github_action_benchmark(measurements: Iterable[Measurement],
                            rows: Iterable[RowVerdict] = ()) -> list[dict[str, Any]]:  # fmt: skip
    judged = {(r.key, r.gpu_uuid): r.verdict_text() for r in rows}
    out = []
    for m in measurements:
        clock = f", SM {m.sm_mhz:.0f} MHz" if m.sm_mhz else ""
        verdict = judged.get((m.spec.key, m.spec.gpu_uuid))
        out.append(
            {
                "name": benchmark_name(m),
                "unit": "ms",
                "value": round(m.median, 6),
                "range": f"± {m.stdev:.4f}",
                "extra": f"median of {m.n} samples; p90 {m.p90:.4f} ms; CoV {m.cov:.2%}{clock}; timer {m.spec.timer}"
                + (f"; verdict: {verdict}" if verdict else ""),
            }
        )
    return out


def bencher(measurements: Iterable[Measurement], rows: Iterable[RowVerdict] = ()) -> dict[str, Any]:
    """Bencher's metric format has numbers only: its own thresholds judge them, and the rows' verdicts stay out."""
    out: dict[str, Any] = {}
    for m in measurements:
        out[benchmark_name(m)] = {
            "latency": {
                "value": m.median * 1e6,
                "lower_value": m.percentile(10) * 1e6,
                "upper_value": m.p90 * 1e6,
            },
            "throughput": {"value": m.images_per_s},
        }
    return out


FORMATS: dict[str, Callable[[Iterable[Measurement], Iterable[RowVerdict]], Any]] = {
    "github-action-benchmark": github_action_benchmark,
    "bencher": bencher,
}
