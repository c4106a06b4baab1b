"""Several pytest-xdist workers: which tests must share a worker, and which GPU each worker takes.

A family is one (model, batch): its FP16 reference and every precision compared with it. A speedup is only a
speedup when both latencies come from one GPU in one process, so a family runs on one worker. The worker is
chosen by pytest-xdist's own scope scheduler; this module only says what a scope is.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_vitperf.core.precision import PRECISIONS
from pytest_vitperf.engines.models.zoo import NAME, canonical_model_name
from pytest_vitperf.options import RELAY, SHARE_DEVICES, THREADS

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
INDUCTOR_THREADS = "TORCHINDUCTOR_COMPILE_THREADS"
DURATIONS = "durations.json"  # in the cache folder: each test's seconds, for the next run's placement
ENGINE_S, IMAGE_S, TEST_S = 10.0, 0.1, 3.0  # modelled_s
# Balancing modes that would split a family across workers; the others (loadscope, loadfile, each) are kept.
BALANCING = ("load", "loadgroup", "worksteal")

# Test ids come from plugin.pytest_generate_tests as "<model>-b<batch>-<precision>", possibly joined with other
# parameters' ids. The controller never collects, so a family is read back from the node id.
_FAMILY = re.compile(r"\[(?:.*-)?(?P<model>" + NAME.pattern + r")-b(?P<batch>\d+)(?:-.*)?\]$")
# The GEMM suite's ids are "<shape>-<kind>" (engines.gemms): a shape's kinds share a worker, as a family's do.
_GEMM_SHAPE = re.compile(r"\[(?P<shape>gemm-(?:[\w-]+-)?m\d+-n\d+-k\d+)-[\w-]+\]$")


@dataclass(frozen=True)
class WorkerRecord:
    """Where one xdist worker ran and what its start-up cost: the summary's "vitperf workers" lines."""

    worker: str
    gpu_index: int | None
    gpu_uuid: str | None
    startup_s: dict[str, float]  # "device": torch import + CUDA probe; then each model's build
    prepare_s: float  # all its engines' preparation (compile included)
    measured: list[str]
    engines: int = 0  # engines prepared (every build counts)
    measure_s: float = 0.0  # wall time warming up and timing
    timed_s: float = 0.0  # the GPU time the samples cover
    wall_s: float = 0.0  # since the plugin started in this process
    waited_s: float = 0.0  # importing torch and timm, then waiting for its turn (--vitperf-wait-for)
    late_s: float = 0.0  # how long its turn had come before it was ready: the device waited for it (ahead.Turn)
    checks_s: float = 0.0  # engines' outputs checked against FP32 (the FP32 references included)
    prepare_steps: dict[str, float] = field(default_factory=dict)  # prepare_s by step (copy, convert, compile, ...)
    after_s: float = 0.0  # from its results written to its exit; vitperf ab measures it from outside
    turn_s: float = 0.0  # from its turn to handing it on (--vitperf-turn-done): what it held the device
    relayed_s: float = 0.0  # with vitperf ab's relay: waiting for the GPU while the other process measured
    threads: int = 0  # its thread budget (share_host)


def time_account(w: WorkerRecord) -> str:
    """Where a process's time went: start-up, preparing engines, warm-up and timing, and the rest (the accuracy and
    correctness tests, exports). A warm run's engines come from the cache: their preparation is what it costs."""
    start = math.fsum(w.startup_s.values())
    steps = ", ".join(f"{k} {v:.1f}" for k, v in w.prepare_steps.items() if v >= 0.05)
    each = f" ({w.prepare_s / w.engines:.1f} s each{'; in all: ' + steps if steps else ''})" if w.engines else ""
    rest = max(0.0, w.wall_s - w.waited_s - start - w.prepare_s - w.measure_s - w.checks_s - w.relayed_s)
    waited = f", {w.waited_s:.0f} s before its turn (imports, then waiting)" if w.waited_s else ""
    late = f" (its turn came {w.late_s:.0f} s before it was ready: the device waited)" if w.late_s >= 0.5 else ""
    checks = f", {w.checks_s:.0f} s checking outputs against FP32" if w.checks_s else ""
    relayed = f", {w.relayed_s:.0f} s waiting while the other process measured (--relay)" if w.relayed_s else ""
    return (
        f"{w.wall_s:.0f} s since the plugin started: {start:.0f} s start-up (torch, device, models){waited}{late}, "
        f"{w.prepare_s:.0f} s preparing {w.engines} engine(s){each}, {w.measure_s:.0f} s measuring "
        f"({w.timed_s:.0f} s timed, {max(0.0, w.measure_s - w.timed_s):.0f} s warm-up, clocks and turns){checks}"
        f"{relayed}, {rest:.0f} s in the rest (accuracy and correctness tests, exports)"
        + (f"; its turn on the device {w.turn_s:.0f} s" if w.turn_s else "")
        + (f"; then {w.after_s:.0f} s from its results to its exit" if w.after_s else "")
        + (f"; {w.threads} CPU thread(s) ({THREADS} to change)" if w.threads else "")
    )


def worker_summary(workers: Iterable[WorkerRecord]) -> list[str]:
    """One line per xdist worker: its GPU, what its start-up cost, and what it measured."""
    from pytest_vitperf.report.tables import gpu_label

    lines = []
    for w in sorted(workers, key=lambda w: w.worker):
        names = {"device": "torch import + device probe"}
        start = ", ".join(f"{names.get(k, k)} {v:.1f} s" for k, v in w.startup_s.items())
        where = "CPU" if w.gpu_index is None and w.gpu_uuid is None else f"GPU {gpu_label(w.gpu_index, w.gpu_uuid)}"
        lines.append(
            f"{w.worker} on {where}: start-up {start or 'none'}; engines prepared in {w.prepare_s:.1f} s; "
            f"measured {', '.join(w.measured) or 'nothing'}; time: {time_account(w)}"
        )
    return lines


def case_id(case: tuple[Any, ...]) -> str:
    """The id of one parametrized case: models and precisions as they are, batches as b<N>."""
    return "-".join(f"b{v}" if isinstance(v, int) else str(v) for v in case)


def family_of(nodeid: str) -> str | None:
    """'<model>-b<batch>' for a test parametrized with both, else None."""
    m = _FAMILY.search(nodeid)
    # Ids carry full model names: an alias (vit_tiny) or a precision (fp16-b1: no model) is not a family's.
    if m is None or m["model"] in PRECISIONS or canonical_model_name(m["model"]) != m["model"]:
        return None
    return f"{m['model']}-b{m['batch']}"


def visible_gpus() -> list[str]:
    """UUIDs of the CUDA GPUs this process may use (CUDA_VISIBLE_DEVICES applies); none on a CPU machine."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [f"GPU-{torch.cuda.get_device_properties(i).uuid}" for i in range(count)]


def worker_index() -> int | None:
    """xdist worker number (gw3 -> 3), or None outside a worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def worker_count() -> int:
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def host_gpu_count() -> int | None:
    """The host's GPUs, those CUDA_VISIBLE_DEVICES hides included (NVML counts them all); None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no driver, or no library: nothing to share by
        return None
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def thread_budget(cores: int, gpus: int, host_gpus: int | None, sharing: int = 1) -> int:
    """A process's share of the host's `cores`: by the `gpus` it uses of the `host_gpus`, divided among the `sharing`
    processes on its device (xdist workers). Left to torch's defaults, every process takes every core: two jobs side
    by side, one per GPU of a 16-core H100 host, had not trained the digits ViT after 150 s, against 26 s alone and
    28-30 s each at 8 threads."""
    share = cores * gpus // host_gpus if gpus and host_gpus and host_gpus > gpus else cores
    return max(1, share // max(1, sharing))


def share_host(threads: int | None, run_gpus: int | None) -> tuple[int, Callable[[], None]]:
    """This process's thread budget, taken: `threads` (--vitperf-threads) where given, else its share by the GPUs it
    sees, divided among the xdist workers dealt over the run's `run_gpus` (None: one process). Returns the budget and
    what undoes it."""
    import torch

    gpus = torch.cuda.device_count()
    sharing = -(-worker_count() // max(1, run_gpus)) if run_gpus is not None else 1
    n = threads or thread_budget(len(os.sched_getaffinity(0)), gpus, host_gpu_count() if gpus else None, sharing)
    return n, use_threads(n)


def use_threads(n: int) -> Callable[[], None]:
    """Hold this process, and what it starts (Inductor's compile workers, export processes: OpenMP, MKL and OpenBLAS
    read the environment), to `n` threads. Returns what puts the previous settings back."""
    import sys

    import torch
    from threadpoolctl import threadpool_limits

    # Inductor reads its variable when its config is first imported: a process that never compiles (--vitperf-compile
    # off, the CPU tests' processes) does not pay for that import (1-3 s) to set it.
    inductor = sys.modules.get("torch._inductor.config")
    saved = {v: os.environ.get(v) for v in (*THREAD_VARIABLES, INDUCTOR_THREADS)}
    old = (torch.get_num_threads(), getattr(inductor, "compile_threads", None), saved)
    # BLAS pools loaded already (numpy's OpenBLAS: the GEMM suite's float64 checks) read no environment again.
    # Left at every core, two workers' checks took 24 s against 6 s alone (2x H200, 2026-11-27).
    blas = threadpool_limits(n)
    torch.set_num_threads(n)
    with contextlib.suppress(RuntimeError):  # settable once, before any inter-op work: a process that began keeps it
        torch.set_num_interop_threads(n)
    compile_threads = min(int(os.environ.get(INDUCTOR_THREADS) or n), n)
    if inductor is not None:
        setattr(inductor, "compile_threads", max(1, min(old[1] or 1, n)))  # noqa: B010  (a module's config)
    os.environ.update({**dict.fromkeys(THREAD_VARIABLES, str(n)), INDUCTOR_THREADS: str(max(1, compile_threads))})

    def restore() -> None:
        blas.restore_original_limits()
        torch.set_num_threads(old[0])
        if inductor is not None:
            setattr(inductor, "compile_threads", old[1])  # noqa: B010
        for var, value in old[2].items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value

    return restore


def gpu_for_worker(worker: int | None, gpus: int) -> int:
    """Worker k takes GPU k mod the visible GPUs; one process alone takes GPU 0."""
    return (worker or 0) % gpus if gpus else 0


def pin_gpu(gpus: list[str], worker: int | None) -> int:
    """Make GPU `worker` mod len(gpus) (UUIDs) the only one this process sees; return its index in `gpus`. Must run
    before CUDA starts in this process: CUDA reads CUDA_VISIBLE_DEVICES once."""
    index = gpu_for_worker(worker, len(gpus))
    if gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[index]
    return index


def nothing_collected(workerinput: dict[str, Any], args: list[str], enabled: bool, errors: int) -> str:
    """What an xdist worker that collected no tests was given, in one line for its stderr: xdist says only that the
    collections differ (two of a prepare's four workers once collected none, the others 64; H200)."""
    return (f"vitperf: xdist worker {workerinput.get('workerid', '?')} collected no tests from {' '.join(args)} "
            f"(benchmarks {'on' if enabled else 'off'}; GPUs given {workerinput.get('vitperf_gpus')}; "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}; collection errors {errors})")  # fmt: skip


def too_many_workers(workers: int, gpus: int, share: bool, relay: bool = False) -> str | None:
    """Why `workers` xdist workers on `gpus` GPUs (0: the CPU) would mislead, or None. Workers that share a device
    time each other's work; under vitperf ab's relay (`relay`) they would time outside its turns."""
    if relay:
        return (f"{RELAY} hands this process the GPU a family at a time, and {workers} xdist workers would time "
                "outside those turns: run it in one process, -n 0")  # fmt: skip
    if workers <= max(gpus, 1) or share:
        return None
    where = f"{gpus} visible GPU(s)" if gpus else "a CPU"
    fix = f"run one worker per GPU: -n {gpus}" if gpus else "measure in one process: -n 0"
    return (f"{workers} xdist workers on {where}: workers that share a device slow each other down and every latency "
            f"they report is wrong. Share on purpose with {SHARE_DEVICES}, or {fix}")  # fmt: skip


def scope_of(nodeid: str) -> str:
    """The unit a worker runs whole: the test's family, or its GEMM shape (every speedup over FP16 stays a same-GPU
    ratio either way), else its module or class (xdist's loadscope)."""
    gemm = _GEMM_SHAPE.search(nodeid)
    return family_of(nodeid) or (gemm["shape"] if gemm else nodeid.rsplit("::", 1)[0])


def modelled_s(scope: str) -> float:
    """A test's cost before a run recorded it: in a family, an engine to prepare (about 10 s on an H100, compile
    included) and rounds that grow with the batch; elsewhere a few seconds."""
    batch = re.fullmatch(r"[^/:]+-b(\d+)", scope)
    return ENGINE_S + IMAGE_S * int(batch[1]) if batch else TEST_S


def unit_costs(units: dict[str, list[str]], recorded: dict[str, float]) -> dict[str, float]:
    """Each unit's seconds: its tests' as an earlier run recorded them, else modelled. Kept per test, so that a run
    of a few tests (-k) leaves the others' costs as they were."""
    return {u: math.fsum(recorded.get(t, modelled_s(scope_of(t))) for t in tests) for u, tests in units.items()}


def deal(nodeids: list[str], shares: int) -> list[list[str]]:
    """The units of `nodeids` dealt over `shares` (GPUs): longest first, each to the least loaded share, by modelled
    costs and ties by name, so that both sides of `vitperf ab` deal a suite alike. Each share's units, sorted."""
    units: dict[str, list[str]] = {}
    for nodeid in nodeids:
        units.setdefault(scope_of(nodeid), []).append(nodeid)
    costs = unit_costs(units, {})
    loads = [0.0] * shares
    dealt: list[list[str]] = [[] for _ in range(shares)]
    for unit in sorted(units, key=lambda u: (-costs[u], u)):
        k = min(range(shares), key=lambda i: (loads[i], i))
        loads[k] += costs[unit]
        dealt[k].append(unit)
    return [sorted(d) for d in dealt]


def kept_units(nodeids: list[str], units: Path | None, shard: tuple[int, int] | None) -> set[str]:
    """The units a share of a run keeps: those a file names (vitperf ab --gpus; or single tests, vitperf ab's rows
    still open), else shard K of N as `deal` gives it, alike on every host that collects the same tests."""
    if units is not None:
        return set(units.read_text().splitlines())
    assert shard is not None
    return set(deal(nodeids, shard[1])[shard[0] - 1])


def read_durations(cache_dir: Path | None) -> dict[str, float]:
    """Each test's seconds as the runs of this cache folder last recorded them; none without a cache folder, and
    none from a file that is not this plugin's (it is rewritten as the run ends)."""
    if cache_dir is None or not (cache_dir / DURATIONS).exists():
        return {}
    try:
        return {str(k): float(v) for k, v in json.loads((cache_dir / DURATIONS).read_bytes())["tests"].items()}
    except Exception:  # truncated, foreign or hand-edited: placement falls back to the model
        return {}


def write_durations(cache_dir: Path, seconds: dict[str, float]) -> None:
    """This run's seconds over what the file held: the tests it did not run keep theirs."""
    from pytest_vitperf.core.files import write_atomic

    tests = {**read_durations(cache_dir), **{k: round(v, 2) for k, v in seconds.items()}}
    write_atomic(cache_dir / DURATIONS, json.dumps({"tests": tests}, indent=0, sort_keys=True).encode())


@dataclass
class Placement:
    """What the run's tests cost, as they ran: per test (for the next run's placement) and per worker (busy time)."""

    test_s: dict[str, float] = field(default_factory=dict)
    busy_s: dict[str, float] = field(default_factory=dict)

    def ran(self, nodeid: str, seconds: float, worker: str) -> None:
        self.test_s[nodeid] = self.test_s.get(nodeid, 0.0) + seconds
        self.busy_s[worker] = self.busy_s.get(worker, 0.0) + seconds


def busy_line(busy_s: dict[str, float], wall_s: float) -> str:
    """Each worker's busy and idle seconds in the run's wall time: what dealing by cost left on the table."""
    each = ", ".join(f"{w} {b:.0f} s busy, {max(0.0, wall_s - b):.0f} s idle" for w, b in sorted(busy_s.items()))
    return f"placement: {each}, of {wall_s:.0f} s; units dealt longest first, by the durations in {DURATIONS}"


def make_scheduler(config: Any, log: Any, recorded: dict[str, float], apart: bool = False) -> Any:
    """pytest-xdist's scope scheduler over units (scope_of; each test where built `apart`), longest first by their
    `recorded` or modelled costs: each worker takes the next as it frees up, so the longest do not come last."""
    from xdist.scheduler import LoadScopeScheduling

    class FamilyScheduling(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return nodeid if apart else scope_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the queue is complete at the first assignment
                costs = unit_costs({u: list(t) for u, t in self.workqueue.items()}, recorded)
                for unit in sorted(self.workqueue, key=lambda u: -costs[u]):
                    self.workqueue.move_to_end(unit)
                self.ordered = True
                self.log("units longest first: " + ", ".join(f"{u} {costs[u]:.0f} s" for u in self.workqueue))
            super()._assign_work_unit(node)

    return FamilyScheduling(config, log)
