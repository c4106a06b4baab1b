"""`vitperf ab --gpus`: a suite's units split over several GPUs, each GPU running both sides' ABBA rounds for its own.

A unit is what one GPU runs whole (workers.scope_of): a family, so that every speedup is a same-GPU ratio, or another
test's module. Side A's collection is dealt longest first by modelled cost (workers.deal), and each GPU gets a
`vitperf ab --gpu G` of its own with `--vitperf-units` naming its share, all at once. The rows of every GPU are then
reported together: one table, one JSON, each row with its GPU. Each GPU's run judges its own rows as they leave its
rounds, at an equal share of the run's error rate (--confidence), so that the false discoveries of all of them
together stay within it (each GPU's share of false discoveries is at most its share of the rate).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.ab.plan import host_prepare_workers, suite_args
from pytest_vitperf.ab.report import processes_in_states, report
from pytest_vitperf.ab.states import placement
from pytest_vitperf.ab.turns import again, recorded
from pytest_vitperf.core import processes

if TYPE_CHECKING:
    from pytest_vitperf.verdicts.ab import Process


def gpu_list(spec: str) -> list[str]:
    """`all` (those CUDA_VISIBLE_DEVICES names, else every GPU NVML counts) or `0,1,...`."""
    if spec != "all":
        return [g.strip() for g in spec.split(",") if g.strip()]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip()]
    from pytest_vitperf.workers import host_gpu_count

    return [str(i) for i in range(host_gpu_count() or 0)]


def _collected(command: list[str], gpu: str, args: argparse.Namespace) -> list[str]:
    """The node ids side A's pytest collects on `gpu` (defaults follow the device)."""
    cmd = [*command, "-m", "pytest", "--gpu-bench", "--collect-only", "-q", "-p", "no:cacheprovider",
           *suite_args(args.pytest_args)]  # fmt: skip
    done = processes.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, CUDA_VISIBLE_DEVICES=gpu))  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"side A's pytest --collect-only exited {done.returncode}: {done.stdout.strip()[-500:]}")
    ids = done.stdout.split("\n\n", 1)[0]  # -q lists the node ids, then a blank line, then warnings and the count
    return [line for line in ids.splitlines() if "::" in line]


def _command(gpu: str, units: Path, work: Path, args: argparse.Namespace, shares: int, workers: int) -> list[str]:
    opts = ["--a", args.a, "--b", args.b, *(["--rounds", str(args.rounds)] if args.rounds else []),
            "--budget-s", str(args.budget_s), "--threshold", str(args.threshold),
            "--confidence", repr(1 - (1 - args.confidence) / shares), "--gpu", gpu,
            "--work-dir", str(work / f"gpu{gpu}"), "--json", str(work / f"gpu{gpu}.json")]  # fmt: skip
    opts += ["--prepare-workers", str(workers)] + ["--reuse-compiles"] * bool(args.reuse_compiles)
    opts += ["--resume"] * bool(args.resume) + ["--relay"] * bool(getattr(args, "relay", False))
    return [sys.executable, "-m", "pytest_vitperf.cli", "ab", *opts, "--", *args.pytest_args,
            f"--vitperf-units={units}"]  # fmt: skip


def _rounds(folder: Path, count: int, args: argparse.Namespace) -> list[tuple[Process, Process]]:
    """The `count` rounds a GPU's run recorded in its work folder."""
    out = []
    for i in range(count):
        a, b = (recorded(folder, f"round{i}", side, args, say=False) for side in "AB")
        if a is None or b is None:
            raise RuntimeError(f"{folder}: round {i} is not whole; run again: {again(args, resume=True)}")
        out.append((a, b))
    return out


def split_over_gpus(commands: dict[str, list[str]], work: Path, args: argparse.Namespace) -> int:
    from pytest_vitperf.verdicts.ab import Row, states
    from pytest_vitperf.workers import deal

    gpus = gpu_list(args.gpus)
    if not gpus:
        print(f"vitperf ab: --gpus {args.gpus} names no GPU; name them, e.g. --gpus 0,1", file=sys.stderr)
        return 2
    started: list[tuple[str, subprocess.Popen[Any]]] = []
    try:
        with processes.interruptible():
            shares = deal(_collected(commands["A"], gpus[0], args), len(gpus))
            workers = args.prepare_workers or host_prepare_workers(len(gpus), args.reuse_compiles)  # each GPU's share
            for gpu, units in zip(gpus, shares, strict=True):
                if units:
                    (work / f"units-gpu{gpu}.txt").write_text("\n".join(units) + "\n")
                    log = (work / f"gpu{gpu}.log").open("wb")
                    with processes.held():
                        cmd = _command(gpu, work / f"units-gpu{gpu}.txt", work, args, len(gpus), workers)
                        started.append((gpu, processes.start(cmd, stdout=log, stderr=subprocess.STDOUT)))
                    log.close()
            codes = {gpu: processes.end(child, kill=False) for gpu, child in started}
        failed = [g for g, code in codes.items() if code not in (0, 1, 3)]  # 1 and 3: SLOWER or UNKNOWN rows
        if failed:
            raise RuntimeError(f"GPU {', '.join(failed)} failed; what it said is in "
                               f"{', '.join(str(work / f'gpu{g}.log') for g in failed)}")  # fmt: skip
        judged: list[Row] = []
        rounds, looks = 0, 1
        odd: list[str] = []  # the processes that ran a family in two states, and those families
        aside: list[str] = []  # and those set aside
        placed: list[dict[str, Any]] = []  # where the processes of those families ran
        for gpu, _ in started:
            ran = json.loads((work / f"gpu{gpu}.json").read_text())
            rounds, looks = max(rounds, ran["rounds"]), max(looks, ran["looks"])
            judged += [replace(Row.from_dict(r), gpu=gpu) for r in ran["rows"]]
            found = states(_rounds(work / f"gpu{gpu}", ran["rounds"], args))
            unjudged, set_aside = processes_in_states(found, gpu)
            odd += unjudged
            aside += set_aside
            placed += placement(work / f"gpu{gpu}", found, gpu)
    except processes.Interrupted as exc:
        print(f"vitperf ab: {exc}, and every process it started has ended. Each GPU's rounds are kept in {work}; "
              f"resume with: {again(args, resume=True)}", file=sys.stderr)  # fmt: skip
        return exc.code
    except RuntimeError as exc:
        print(f"vitperf ab: {exc}", file=sys.stderr)
        return 2
    finally:
        for _, child in started:
            if child.returncode is None:  # interrupted: each GPU's vitperf ab ends its own sides, given the chance
                child.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=60)
                processes.end(child)
    return report(judged, f"GPUs {', '.join(g for g, _ in started)}", rounds, looks, work, args, odd=odd, aside=aside,
                  placed=placed)
