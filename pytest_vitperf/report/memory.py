"""Memory beside time: each engine's weights and the GPU memory one call of it needs, against its reference's (FP16's)
at the same model, batch and backend. Seeds 000 and 001 weigh a precision by both: an NVFP4 engine of 52 MB against
FP16's 169 MB says something its latency does not."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pytest_vitperf.core.precision import sort_key
from pytest_vitperf.measure.measurement import Measurement
from pytest_vitperf.report.tables import table
from pytest_vitperf.verdicts.rows import reference_of

HEADER = ("model", "precision", "batch", "backend", "weight MB", "vs fp16", "peak MB", "vs fp16")


def weight_bytes(m: Measurement) -> int | None:
    """The engine's weights: the torch backend's tensors, else a TensorRT plan's size."""
    o = m.spec.options
    found = o.get("weight_bytes") or o.get("engine_bytes")
    return int(found) if found else None


def peak_bytes(m: Measurement) -> int | None:
    """What the engine needs on the GPU for one call: weights, input, activations, workspace and output."""
    found = m.spec.options.get("peak_bytes")
    return int(found) if found else None


def memory_summary(measurements: Iterable[Measurement]) -> list[str]:
    """One row per engine that says what it weighs; each figure in MB and as a ratio to its reference's. Nothing
    where no engine says (the GEMM products, a run of none)."""
    ms = [m for m in measurements if weight_bytes(m) is not None]
    by_key = {(m.spec.model, m.spec.precision, m.spec.batch, m.spec.backend): m for m in ms}

    def cell(m: Measurement, of: Callable[[Measurement], int | None]) -> tuple[str, str]:
        mine = of(m)
        if mine is None:
            return "-", "-"
        ref = by_key.get((m.spec.model, reference_of(m.spec.precision), m.spec.batch, m.spec.backend))
        theirs = of(ref) if ref is not None else None
        return f"{mine / 1e6:.1f}", f"{mine / theirs:.2f}x" if theirs else "-"

    rows = []
    for m in sorted(ms, key=lambda m: (m.spec.model, m.spec.batch, sort_key(m.spec.precision), m.spec.backend)):
        s = m.spec
        rows.append((s.model, s.precision, str(s.batch), s.backend, *cell(m, weight_bytes), *cell(m, peak_bytes)))
    return table(HEADER, rows) if rows else []
