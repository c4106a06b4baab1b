"""Words for the baseline gate: the outcomes table, the writes, and the message of a test that fails the gate."""

from __future__ import annotations

from pytest_vitperf.core.precision import sort_key
from pytest_vitperf.report.tables import ms_text, table
from pytest_vitperf.verdicts.baselines import gate
from pytest_vitperf.verdicts.baselines.compare import IMPROVEMENT, Comparison

UPDATE = "--vitperf-update-baselines"


def _spread(c: Comparison) -> str:
    """'0.4% (5 runs)', or why it is unknown."""
    where = f", {c.board}" if c.board else ""
    if c.sd_log is None:
        return f"unknown: {c.runs} run(s){where}"
    moderated = "" if c.own_sd_log is None else f", own {c.own_sd_log:.1%}"
    return f"{c.sd_log:.1%} ({c.runs} runs{where}{', cycles' if c.unit == 'cycles' else ''}{moderated})"


def _outcome_row(o: gate.Outcome) -> tuple[str, ...]:
    k, c = o.key, o.comparison
    batch = f"{k.batch} (cold)" if k.cold else str(k.batch)
    if c is None:
        return (k.model, k.precision, batch, "-", ms_text(o.current_ms), "-", "-", "-", o.kind)
    change = c.change
    if c.change == IMPROVEMENT:
        change += "; refresh with --vitperf-update-baselines"
    seen = "-" if c.detectable is None else f"{c.detectable:.1%}"
    return (k.model, k.precision, batch, ms_text(c.baseline_ms), ms_text(c.current_ms), f"{c.delta:+.1%}",
            _spread(c), seen, change)  # fmt: skip


def write_line(w: gate.Write) -> str:
    where = f"{w.path} [{w.key.entry}]"
    if w.error is not None:
        return f"NOT WRITTEN {where}: {w.error}; the run fails: fix that, then run again with {UPDATE}"
    if w.recorded:
        return f"recorded a run in {where}: median {ms_text(w.new_ms)} ms, {w.runs} run(s) now"
    if w.old_ms is None:
        return f"added {where} median {ms_text(w.new_ms)} ms"
    change = w.new_ms / w.old_ms - 1
    return f"refreshed {where} {ms_text(w.old_ms)} ms ({w.old_statistic}) -> {ms_text(w.new_ms)} ms ({change:+.1%})"


def baseline_summary(outcomes: list[gate.Outcome], writes: list[gate.Write], rate: float) -> list[str]:
    outcomes = sorted(outcomes, key=lambda o: (o.key.model, o.key.batch, sort_key(o.key.precision)))
    header = ("model", "precision", "batch", "baseline ms", "current ms", "Δ", "spread", "can see", "verdict")
    out = table(header, map(_outcome_row, outcomes)) if outcomes else []
    judged = [o.comparison for o in outcomes if o.comparison is not None and o.comparison.p_value is not None]
    if judged:
        c = judged[0]
        out.append(
            f"verdicts: a change beyond {c.threshold:.0%} that stands out from the spread between runs, with "
            f"Benjamini-Hochberg at {rate:.0%} over {len(judged)} row(s): an identical rerun flags "
            "a row at most that often. 'can see': the smallest slowdown flagged 4 times in 5 (docs/baselines.md)"
        )
    if any(c.own_sd_log is not None for c in judged):
        out.append(
            "spread: moderated toward the other stored rows of this GPU model (a prior that follows latency and "
            "weighs at most as much as the row's own runs); own: the row's runs alone (docs/baselines.md)"
        )
    if any(o.comparison is not None and o.comparison.sd_log is None for o in outcomes):
        out.append("spread unknown: judge with runs of fresh processes: vitperf calibrate --runs 5 -- <pytest args>")
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
    rows = [(f"{ms_text(c.baseline_ms)} ms", f"{ms_text(c.current_ms)} ms", f"{c.delta:+.1%}", _spread(c), p,
             c.change.upper())]  # fmt: skip
    lines = [
        f"latency regression: {k.model} {k.precision} batch {k.batch} on {k.backend} "
        f"{k.backend_version}, {k.gpu} (threshold {c.threshold:.0%}, {c.method}, level {c.level:.2g})",
        *("  " + line for line in table(("baseline", "current", "Δ", "spread", "p-value", "verdict"), rows)),
        f"baseline from {o.baseline_from}",
    ]
    if o.env_changes:
        lines.append("environment changed since the baseline: " + "; ".join(o.env_changes))
    return "\n".join([*lines, "If the change is intended, accept it:", f"  {accept}"])
