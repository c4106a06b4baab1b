"""What each process of `vitperf ab` measures, and which builds its rounds borrow from their side's prepare."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pytest_vitperf.engines import INDUCTOR_PART, READY_PART, REPRODUCIBLE_PARTS
from pytest_vitperf.options import (
    BUILD_APART,
    BUILDS,
    COMPILE,
    FIRST_LOOK,
    ROUND_BUDGET_S,
    ROUNDS,
    ROUNDS_AGREE,
    SHARE_DEVICES,
    SLICE_MS,
    THREADS,
    WARMUP_MS,
)

# What a process measures of a family unless the suite says otherwise: one observation (its median); the spread a
# verdict needs comes from processes, so the time goes to more of them. The suite's 20 rounds of 2 builds took 36 s
# of a 62 s turn (H200). Within a process, batch 1's rounds agreed to 0.04% and its processes differed by 0.2-0.3%;
# batch 64's rounds differed by 1.0-1.6% (the clock wandering under the power cap) and its processes by no more than
# that: its one observation is as good as its rounds are many (22 H200 processes, 2026-11-29). So a family stops
# after 2 rounds once they agree, and runs up to 10 where they do not. Slices of 100 ms: batch 64's 10 rounds time
# about as long as 5 of the suite's 200 ms, and batch 1's 2 rounds half as long, which its spread allows. (Until
# fce8755 a turn's launch count rounded up: batch 64 timed 5.3 s, not 4.4 s, on an H200, and its rows could see 0.6%
# where 1% was asked.)
# The warm-up is the plugin's (4 s where a load meets the power cap): after 1 s, batch 64's first round ran 0.8-1.6%
# faster than the next two; after 2 s, a nightly process's first 5 round medians spread 1.12%, its last 5 0.79%.
# 20 rounds were tried: 4-5 s more a turn, and no more rows SAME at the first look (H200, 2026-12-02): what moves a
# batch-64 process is the clock it settles at under the cap, which more rounds within it do not average.
# No early look at floors: every process of a side measures as much, whatever it reads.
PROCESS_PLAN = (f"{BUILDS}=1", f"{ROUNDS}=10", f"{SLICE_MS}=100", f"{ROUNDS_AGREE}=0.1%", f"{FIRST_LOOK}=0",
                f"{ROUND_BUDGET_S}=0")  # fmt: skip
# What a prepare process measures, after the suite's own arguments: what it builds is what the rounds use, and of
# its measurements only which clock timed them (a CPU run's) and which tests make each row (--explain) are read. Two
# rounds of short slices with no warm-up: the two prepares measured a round's 9 s each, on one GPU at once.
# Each test's engine apart, a test to an xdist worker: with a family to a worker, the latency suite's two families
# left two of four workers idle while the other two compiled 4 engines each, one after another (52-53 s of a 101 s
# prepare; H200, 2026-12-03).
PREPARE_PLAN = (f"{ROUNDS}=2", f"{ROUNDS_AGREE}=0", f"{SLICE_MS}=10", f"{WARMUP_MS}=0", BUILD_APART)
# A prepare's xdist workers have this many threads each (Inductor's compile pool among them): a compile is mostly
# one Python thread (tracing, lowering), so the host is used by compiling several engines at once. One process
# compiled 8 ViT-B engines in 82 s on a 16-core H200 host, one after another (2026-12-02); with 2 threads a worker
# and 4 workers a side, the nightly set's compiles took 17.5-21.9 s an engine and its prepares 5.5 min; with one
# and 7 a side, 28.8-34.1 s and 4.6 min (2026-12-04).
PREPARE_THREADS = 1
# Host memory a prepare's worker may take (torch, a ViT-L's compile and calibration): the nightly set's 14 workers
# left 46 GiB of 125 free at the least, 5.6 GiB a worker (H200, 2026-12-04); 8 GiB left the latency suite's 8
# engines to 7 workers a side, one of them compiling 2 one after the other.
PREPARE_WORKER_GIB = 7.0


def prepare_workers(cores: int, memory_gib: float, at_once: int) -> int:
    """How many xdist workers each of `at_once` prepares (both sides', on each GPU of --gpus) may run on a host of
    `cores` and `memory_gib` free: PREPARE_THREADS each, within PREPARE_WORKER_GIB each."""
    return max(1, min(cores // at_once // PREPARE_THREADS, int(memory_gib / at_once / PREPARE_WORKER_GIB)))


def host() -> tuple[int, float]:
    """This host's CPUs that this process may use, and its memory free now, in GiB."""
    try:
        free = next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                    if line.startswith("MemAvailable:"))  # fmt: skip
    except (OSError, StopIteration, ValueError, IndexError):
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return len(os.sched_getaffinity(0)), free / 2**30


def host_prepare_workers(gpus: int, reuse_compiles: bool) -> int:
    """prepare_workers on this host for the prepares that run at once: both sides' on each of `gpus`, or one at a
    time where compiles are reused (they run in turn then)."""
    return prepare_workers(*host(), max(1, gpus) * (1 if reuse_compiles else 2))


def prepare_args(workers: int) -> list[str]:
    """A prepare's pytest arguments for `workers`: xdist workers that share the GPU (untimed), or none for one."""
    return ["-n", str(workers), SHARE_DEVICES, f"{THREADS}={PREPARE_THREADS}"] if workers > 1 else []


def suite_args(pytest_args: list[str]) -> list[str]:
    """The sides' pytest arguments, theirs last so that they win: compiled deterministically (every compile chooses the
    same kernels; in the default mode one came out 7.5% slower than four others), measuring PROCESS_PLAN."""
    return [f"{COMPILE}=deterministic", *PROCESS_PLAN, *pytest_args]


def compile_mode(pytest_args: list[str]) -> str:
    """The mode the sides compile in: the last one named, as pytest reads it."""
    args = suite_args(pytest_args)
    last = max(i for i, a in enumerate(args) if a == COMPILE or a.startswith(f"{COMPILE}="))
    return "".join(args[last + 1 : last + 2]) if args[last] == COMPILE else args[last].split("=", 1)[1]


def shared_parts(pytest_args: list[str]) -> tuple[str, ...]:
    """The parts of a side's cache that its rounds borrow: what every build reproduces. Inductor's kernels, and the
    ready engines made of them, are among them when compiled without timed choices; TensorRT plans never are (a build
    times tactics)."""
    untimed = compile_mode(pytest_args) == "deterministic"
    return (*REPRODUCIBLE_PARTS, INDUCTOR_PART, READY_PART) if untimed else REPRODUCIBLE_PARTS


def own_builds(side_cache: Path, cache: Path, parts: tuple[str, ...]) -> Path:
    """A fresh cache folder whose `parts` are links to the side's, so that the process builds, and draws, the rest
    without converting its models again."""
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    for part in parts:
        (side_cache / part).mkdir(parents=True, exist_ok=True)
        (cache / part).symlink_to((side_cache / part).absolute(), target_is_directory=True)
    return cache


def tests_of(work: Path) -> dict[str, str]:
    """Each row's test ('MODEL PRECISION bBATCH' -> its node id), as the sides' prepare processes ran them (every
    row is there): what the later rounds keep (open_units) and what --explain profiles."""
    from pytest_vitperf.core.files import read_json
    from pytest_vitperf.measure.measurement import BenchmarkJsonError

    out: dict[str, str] = {}
    for side in "BA":  # A's names win where both ran one
        try:
            doc = read_json(work / f"prepare-{side}.json", BenchmarkJsonError)
        except BenchmarkJsonError:
            continue
        for b in doc.get("benchmarks", []) if isinstance(doc, dict) else []:
            p, test = (b.get("params"), b.get("fullname")) if isinstance(b, dict) else (None, None)
            if isinstance(p, dict) and {"model", "precision", "batch"} <= p.keys() and isinstance(test, str):
                out[f"{p['model']} {p['precision']} b{p['batch']}"] = test
    return out


def units_file(work: Path, look: int) -> Path:
    """Where open_units writes the tests the rounds after `look` keep."""
    return work / f"open-after-look{look}.txt"


def open_units(work: Path, look: int, rows: set[str], tests: dict[str, str]) -> Path | None:
    """A --vitperf-units file that keeps the tests of `rows` (verdicts.ab.still_measured; `tests`: tests_of) for
    the rounds after `look`: the tests of decided rows, and tests that measure no row, leave them. None (every test
    stays) where `tests` names none of those rows'."""
    kept = [tests[name] for name in sorted(rows) if name in tests]
    if not kept:
        return None
    path = units_file(work, look)
    path.write_text("".join(f"{test}\n" for test in kept))
    return path
