"""`vitperf ab`'s verdicts as a pull-request comment (markdown), as JSON, and as github-action-benchmark's input."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pytest_vitperf.verdicts.ab import EXIT_SAME, EXIT_SLOWER, EXIT_UNKNOWN, Row, equivalence_level, exit_code


def _ratio(i: Any) -> str:
    return "-" if i is None else i.text()


def markdown(rows: Sequence[Row], facts: dict[str, Any]) -> list[str]:
    """One table, a line per row and kind: B over A with its interval, in time and cycles; the rounds; what they
    can see; the verdict; the GPU of each row where they ran on several. `facts`: a, b, device, threshold,
    confidence, rounds, builds, compile."""
    gpus = any(r.gpu is not None for r in rows)
    head = [
        f"### vitperf ab: B `{facts['b']}` against A `{facts['a']}`",
        "",
        f"{facts['device']}; {facts['rounds']} rounds, each a fresh process per side in ABBA BAAB order; engines "
        f"built {facts.get('builds', 'each process')}, torch mode `{facts.get('compile', 'as the suite says')}`; "
        "B/A above 1: "
        f"B is slower. Rows are judged after every block of 4 rounds (a look); a row decided leaves the rounds, and "
        f"its rounds are those it was decided at. Look k spends {1 - facts['confidence']:.0%}/(k(k+1)) of the error "
        f"rate: SAME when the interval lies within ±{facts['threshold'] * 100:g}% (two one-sided tests: intervals at "
        f"{equivalence_level(facts['confidence'], 1):.0%} at the first look, "
        f"{equivalence_level(facts['confidence'], 2):.1%} at the second, ...); SLOWER / FASTER: beyond it, "
        "Benjamini-Hochberg over the rows still open; each row's spread moderated toward the others'.",
        "",
        "| row | what |" + (" GPU |" if gpus else "") + " B/A, time | B/A, cycles | rounds | can see | verdict |",
        "|---|---|" + ("---|" if gpus else "") + "---|---|---|---|---|",
    ]
    body = [
        f"| {r.name} | {r.what} |" + (f" {r.gpu} |" if gpus else "") + f" {_ratio(r.interval)} | {_ratio(r.cycles)} | "
        f"{r.rounds} | {f'{r.detectable:.1%}' if math.isfinite(r.detectable) else '-'} | **{r.verdict}**"
        f"{' (two states)' if r.two_states else ''} |"
        for r in rows
    ]
    code = exit_code(rows)
    meaning = {EXIT_SAME: "same or faster", EXIT_SLOWER: "a row is slower", EXIT_UNKNOWN: "a row is still unknown"}
    return [*head, *body, "", f"exit {code}: {meaning[code]}"]


def github_action_benchmark(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """`customSmallerIsBetter` entries: B over A, so that a dashboard draws the candidate's ratio over time."""
    return [
        {"name": f"{r.name} ({r.what}) B/A", "unit": "B/A", "value": round(r.interval.estimate, 6),
         "range": f"[{r.interval.low:.4f}, {r.interval.high:.4f}]", "extra": f"{r.verdict} over {r.rounds} rounds"}
        for r in rows if r.interval is not None
    ]  # fmt: skip
