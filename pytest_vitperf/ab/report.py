"""`vitperf ab`'s results written: the verdict table (with --explain's findings) on stdout, and --markdown, --json
and --export; the exit code of the verdicts. Shared by one GPU's run and the run split over GPUs (gpus.py)."""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.ab.folder import measured_in, parsed
from pytest_vitperf.ab.plan import compile_mode, shared_parts
from pytest_vitperf.ab.turns import ENDED
from pytest_vitperf.engines import INDUCTOR_PART, READY_PART

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.ab import Row, States
    from pytest_vitperf.workers import WorkerRecord


def _builds(args: argparse.Namespace) -> str:
    """Where a round's engines come from, for the facts under the table."""
    if args.reuse_compiles:
        return "once a side"
    if INDUCTOR_PART in shared_parts(args.pytest_args):
        ready = " and ready engines" if READY_PART in shared_parts(args.pytest_args) else ""
        return f"Inductor's kernels{ready} once a side (no timed choices), other builds each process"
    return "each process"


def _rounds(work: Path) -> list[tuple[str, Path]]:
    """Each round process's JSON and its side; with --gpus, each GPU's rounds are in a folder of their own."""
    return [(path.stem[-1], path) for path in sorted(work.rglob("round*-[AB].json"))]


def ready_engines(work: Path) -> tuple[dict[str, dict[str, list[str]]], list[list[float]]]:
    """Per side and row, the ready engines (engines/ready.py) its round processes ran, by hash: one a row when every
    round loaded what the side's prepare built; and the seconds each round process took to load each of them."""
    from pytest_vitperf.engines.ready import compiled_hash
    from pytest_vitperf.measure.measurement import BenchmarkJsonError

    seen: dict[str, dict[str, set[str]]] = {}
    loads = []
    for side, path in _rounds(work):
        try:
            measured = measured_in(path)
        except BenchmarkJsonError:
            continue  # a round that wrote nothing was said when it ended
        took = []
        for m in measured:
            sha = compiled_hash(m.spec.options)
            if sha is not None:
                row = f"{m.spec.model} {m.spec.precision} b{m.spec.batch}"
                seen.setdefault(side, {}).setdefault(row, set()).add(sha)
                seconds = m.spec.options["ready"].get("seconds")
                if m.spec.options["ready"].get("how") == "loaded" and isinstance(seconds, (int, float)):
                    took.append(float(seconds))
        if took:
            loads.append(took)
    return {side: {row: sorted(h) for row, h in rows.items()} for side, rows in seen.items()}, loads


def ready_line(ready: dict[str, dict[str, list[str]]], loads: Sequence[Sequence[float]] = ()) -> list[str]:
    """What the rounds ran, said under the table, with how long a load took and each process's slowest (a one-time
    cost lands on one load; ready.hash_ahead moves the known ones before the turn): nothing where no round ran a
    ready engine."""
    if not ready:
        return []
    apart = [f"{row} on side {side} ({len(h)} builds)" for side, rows in ready.items() for row, h in rows.items()
             if len(h) > 1]  # fmt: skip
    every, slowest = [s for p in loads for s in p], [max(p) for p in loads if p]
    took = (f"; a load took {statistics.median(every):.2f} s (median of {len(every)}), each process's slowest "
            f"{min(slowest):.2f}-{max(slowest):.2f} s" if every else "")  # fmt: skip
    if apart:
        return ["", f"Ready engines: the rounds ran more than one build of {', '.join(apart)}{took}"]
    rows = sorted({row for rows in ready.values() for row in rows})
    return ["", f"Ready engines: every round of a side ran its side's one build of each of {len(rows)} rows{took}"]


def processes_in_states(found: States, gpu: str | None = None) -> tuple[list[str], list[str]]:
    """The processes in another state (verdicts.ab.states), as 'round R SIDE: MODEL bBATCH' with their GPU where the
    run was split over GPUs: those whose families ran in two states (not judged), and those set aside."""
    on = f" (GPU {gpu})" if gpu is not None else ""

    def named(by: Mapping[tuple[int, str], list[str]]) -> list[str]:
        return [f"round {i} {side}{on}: {', '.join(f)}" for (i, side), f in sorted(by.items()) if f]

    return named({k: [f for f in fs if f in found.mixed] for k, fs in found.found.items()}), named(found.aside)


def _vitperf(path: Path) -> dict[str, Any] | None:
    """What the plugin wrote of a process into its JSON (machine_info.vitperf); None where it wrote nothing
    readable: an older plugin's JSON, or a process cut off mid-write."""
    from pytest_vitperf.measure.measurement import BenchmarkJsonError

    try:
        vitperf = parsed(path)["machine_info"]["vitperf"]
    except (OSError, BenchmarkJsonError, KeyError, TypeError):
        return None
    return vitperf if isinstance(vitperf, dict) else None


def _records(path: Path) -> tuple[WorkerRecord, list[WorkerRecord]] | None:
    """A process's record of its time (machine_info.vitperf.process) and its xdist workers' (itself where it ran
    none), as it wrote them in its JSON; None for an older plugin's JSON, or a process that wrote none."""
    from pytest_vitperf.workers import WorkerRecord

    vitperf = _vitperf(path)
    if vitperf is None:
        return None
    try:
        own = WorkerRecord(**vitperf["process"])
        workers = [WorkerRecord(**w) for w in (vitperf.get("results") or {}).get("workers") or []]
    except (KeyError, TypeError, AttributeError):
        return None
    return own, workers or [own]


def not_passed_in(work: Path) -> dict[str, dict[str, dict[str, str]]]:
    """Per side, each test that failed or was skipped in any of its processes (on any GPU's folder with --gpus), with
    how (results.not_passed)."""
    found: dict[str, dict[str, dict[str, str]]] = {"A": {}, "B": {}}
    for path in sorted(work.rglob("*-[AB].json")):
        results = (_vitperf(path) or {}).get("results") or {}
        for node, how in (results.get("not_passed") or {}).items():
            found[path.stem[-1]].setdefault(node, how)
    return found


def not_passed_lines(found: Mapping[str, Mapping[str, Mapping[str, str]]]) -> list[str]:
    """The tests that did not pass, grouped by how and on which side: one side's failure is a finding of its own."""
    groups: dict[tuple[str, str], list[str]] = {}
    for node in sorted(set(found["A"]) | set(found["B"])):
        hows = {side: found[side][node] for side in "AB" if node in found[side]}
        if len(hows) == 2 and hows["A"]["outcome"] == hows["B"]["outcome"]:
            said = f"{hows['B']['outcome']} on both sides"
        else:
            said = ", ".join(f"{how['outcome']} on {side}" for side, how in hows.items()) + " only" * (len(hows) == 1)
        line = (hows.get("B") or hows["A"])["line"]
        groups.setdefault((said, line), []).append(node.rpartition("::")[2])
    if not groups:
        return []
    lines = [f"- {said}: {', '.join(nodes)}: {line}" for (said, line), nodes in groups.items()]
    return ["", "Tests that did not pass, so their rows are missing (a failure on one side only is a finding of its "
            "own; B failing a test A passes fails the gate):", *lines]  # fmt: skip


def failed_on_b_only(found: Mapping[str, Mapping[str, Mapping[str, str]]]) -> bool:
    return any(how["outcome"] != "skipped" and node not in found["A"] for node, how in found["B"].items())


def round_time(work: Path) -> dict[str, WorkerRecord]:
    """Per side, where a round's process spent its time: each field the median over the side's rounds, as the
    processes recorded it in their JSON (the plugin's own clock, from its start)."""
    records: dict[str, list[WorkerRecord]] = {}
    for side, path in _rounds(work):
        if (found := _records(path)) is None:
            continue
        record = found[0]
        ended = path.with_suffix(ENDED)
        if ended.exists():  # from its results written to its exit: its summary, then the interpreter's shutdown
            record = replace(record, after_s=round(max(0.0, ended.stat().st_mtime - path.stat().st_mtime), 1))
        records.setdefault(side, []).append(record)

    def median(rs: list[WorkerRecord]) -> WorkerRecord:
        def mid(values: list[float]) -> float:
            return float(statistics.median(values))

        def each(field: str) -> dict[str, float]:
            parts: list[dict[str, float]] = [getattr(r, field) for r in rs]
            return {k: mid([p.get(k, 0.0) for p in parts]) for k in dict.fromkeys(k for p in parts for k in p)}

        # every seconds field (type "float"), so that a new one cannot be left out of the median
        seconds: dict[str, Any] = {f.name: mid([getattr(r, f.name) for r in rs]) for f in fields(rs[0])
                                   if f.type == "float"}  # fmt: skip
        return replace(rs[0], worker=f"median of {len(rs)}", startup_s=each("startup_s"), measured=[],
                       engines=round(mid([r.engines for r in rs])), prepare_steps=each("prepare_steps"),
                       **seconds)  # fmt: skip

    return {side: median(rs) for side, rs in sorted(records.items())}


def late_line(work: Path) -> list[str]:
    """Under the table: the round processes whose turn came before they were ready (ahead.Turn), the device waiting
    for them. A round after a look is short, and a process that needs longer than it to start must start rounds
    earlier: ab.turns.ahead_for starts more once it has seen how long they take."""
    late = [found[0].late_s for _, path in _rounds(work) if (found := _records(path)) is not None]
    slow = sorted(s for s in late if s >= 0.5)
    if not slow:
        return []
    return ["", f"Late turns: {len(slow)} of {len(late)} round processes were not ready when their turn came, "
                f"{slow[0]:.0f}-{slow[-1]:.0f} s late (median {statistics.median(slow):.0f} s): the device waited"]


def prepare_time(work: Path) -> dict[str, dict[str, Any]]:
    """Per side, its prepare's wall, its xdist workers (one process: itself), how many built nothing (a test is a
    worker's unit: fewer tests than workers leave the rest idle) and the slowest one's record: what the first round
    waits for."""
    out = {}
    for path in sorted(work.rglob("prepare-[AB].json")):
        if (found := _records(path)) is None:
            continue
        own, workers = found
        where = "" if path.parent == work else f" ({path.parent.relative_to(work)})"  # --gpus: a folder a GPU
        out[path.stem[-1] + where] = {"wall_s": own.wall_s, "workers": len(workers),
                                      "idle": sum(not w.engines for w in workers),
                                      "slowest": max(workers, key=lambda w: w.wall_s)}  # fmt: skip
    return out


def time_lines(times: dict[str, WorkerRecord], prepares: Mapping[str, Mapping[str, Any]] = {}) -> list[str]:
    """The time line of each side's prepare (its slowest worker) and round processes, under the table."""
    from pytest_vitperf.workers import time_account

    lines = [""]
    for side, p in prepares.items():
        idle = f", {p['idle']} of which built nothing (a family is a worker's unit)" if p["idle"] else ""
        lines.append(f"Prepare, side {side}: {p['wall_s']:.0f} s in {p['workers']} worker(s){idle}; the slowest, "
                     f"{p['slowest'].worker}: {time_account(p['slowest'])}")  # fmt: skip
    return lines + [f"Round process, side {side} ({w.worker} rounds): {time_account(w)}" for side, w in times.items()]


def open_rows_line(
    rows: Sequence[Row], rounds: int, args: argparse.Namespace, times: dict[str, WorkerRecord]
) -> list[str]:
    """Under the table of a run with rows open: how many of them the next three blocks would decide on a quiet night,
    and what a round's turns took, so that a nightly can choose its --budget-s."""
    from pytest_vitperf.verdicts.ab import BLOCK
    from pytest_vitperf.verdicts.budget import decided_if_unchanged

    still = sum(r.open for r in rows)
    if not still:
        return []
    totals = [rounds + BLOCK * k for k in (1, 2, 3)]
    by = decided_if_unchanged(rows, totals, threshold=args.threshold, confidence=args.confidence)
    relayed = getattr(args, "relay", False)  # its two processes' turns were one
    turns = (max if relayed else sum)([w.turn_s for w in times.values()] or [0.0])
    what = "a round of two relayed processes" if relayed else "a round's two turns"
    took = f"; {what} took about {turns:.0f} s here" if turns else ""
    each = ", ".join(f"{by[n]} by {n}" for n in totals[1:])
    return ["", f"Open rows: {still}. Were they unchanged (B/A 1) at the spreads they have, {by[totals[0]]} would be "
                f"decided by {totals[0]} rounds in all, {each} (--budget-s buys rounds{took})"]  # fmt: skip


def report(rows: list[Row], device: str, rounds: int, looks: int, work: Path, args: argparse.Namespace,
           explained: dict[str, Any] | None = None, odd: Sequence[str] = (),
           aside: Sequence[str] = (), placed: Sequence[Mapping[str, Any]] = ()) -> int:  # fmt: skip
    """The table (and --explain's findings) on stdout, --markdown, --json and --export written; the exit code of
    the verdicts. `placed`: where the processes of families found in another state ran (ab/states.py)."""
    from pytest_vitperf.ab.explain import as_json
    from pytest_vitperf.ab.explain import markdown as explanations
    from pytest_vitperf.ab.formats import github_action_benchmark, markdown
    from pytest_vitperf.ab.states import lines as state_lines
    from pytest_vitperf.verdicts.ab import EXIT_SLOWER, STATE, STATE_ROW, exit_code

    facts = {"a": args.a, "b": args.b, "device": device, "threshold": args.threshold, "confidence": args.confidence,
             "rounds": rounds, "looks": looks, "compile": compile_mode(args.pytest_args),
             "builds": _builds(args)}  # fmt: skip
    (ready, loads), times, prepares = ready_engines(work), round_time(work), prepare_time(work)
    lines = markdown(rows, facts) + open_rows_line(rows, rounds, args, times) + ready_line(ready, loads)
    lines += time_lines(times, prepares) if times or prepares else []
    lines += late_line(work)
    not_passed = not_passed_in(work)
    lines += not_passed_lines(not_passed)
    away = f"every row {STATE_ROW:.0%} or more one way from the side's medians, {STATE:.0%} on average"
    lines += ["", f"Not judged, their families run in two states ({away}): {'; '.join(odd)}"] if odd else []
    lines += ["", f"Set aside, in another state ({away}, and the family's others so found the same way; its round "
              f"left out of that family's rows): {'; '.join(aside)}"] if aside else []  # fmt: skip
    lines += state_lines(placed)
    lines += ["", *explanations(explained)] if explained else []
    print("\n".join(lines))
    code = exit_code(rows)
    code = EXIT_SLOWER if failed_on_b_only(not_passed) and code != EXIT_SLOWER else code
    why = {"explain": as_json(explained)} if explained else {}
    outputs = {args.markdown: "\n".join(lines) + "\n",
               args.json: json.dumps({**facts, "work_dir": str(work), "exit": code,
                                      "rows": [r.to_dict() for r in rows], "ready_engines": ready,
                                      "round_time": {side: asdict(w) for side, w in times.items()},
                                      "prepare_time": {side: {**p, "slowest": asdict(p["slowest"])}
                                                       for side, p in prepares.items()},
                                      "other_states": list(odd), "set_aside": list(aside),
                                      "not_passed": not_passed, "placement": list(placed), **why},
                                     indent=1),
               args.export: json.dumps(github_action_benchmark(rows), indent=1)}  # fmt: skip
    for path, text in outputs.items():
        if path is not None:
            path.write_text(text)  # an OSError fails the command: a gate must not believe it wrote its verdicts
    if args.store is not None:  # a StoreError fails it too (cli.main: one line, exit 2)
        from pytest_vitperf.store.sql import SqlStore

        run = SqlStore(args.store).append_ab([r.to_dict() for r in rows], facts)
        print(f"vitperf ab: verdicts added to the store {args.store} as run {run}")
    return code
