"""`vitperf capabilities`, `vitperf env` and `vitperf selfcheck`: what this machine can run, what a run would record
about it, and whether the plugin's timer agrees with a plain loop on it."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from pytest_vitperf.cli import argtypes
from pytest_vitperf.options.parsers import parse_threshold
from pytest_vitperf.report.tables import table

BACKENDS = ("torch", "tensorrt", "tensorrt-rtx", "trtexec", "trtexec-rtx")


def _capabilities(args: argparse.Namespace) -> int:
    from pytest_vitperf.core.precision import matrix_rows
    from pytest_vitperf.engines.backends import BUILTIN, TIMED_ON_GPU

    for line in table(("precision", "GPU", "needs", "backends"), matrix_rows()):
        print(line)
    print()
    rows = [(name, TIMED_ON_GPU.get(name, "never")) for name in BUILTIN]
    for line in table(("backend", "timed engines on a GPU in this project's records"), rows):
        print(line)
    print("auto takes the first backend that runs here and has such a record; name another to use it; what each has "
          "and has not done: docs/backends.md")
    return 0


def _env(args: argparse.Namespace) -> int:
    from pytest_vitperf.engines.backends import never_timed, select_backend
    from pytest_vitperf.measure.clocks import NvmlProbe, reason_names
    from pytest_vitperf.measure.env import header_line, probe_device

    device = probe_device(0)
    backend, reason, auto = select_backend(args.backend, device)
    print(header_line(device, backend.name, backend.version()))
    if said := auto or never_timed(backend.name):
        print(f"backend: {said}")
    probe = NvmlProbe.open(device.index) if device.sm is not None else None
    if probe is not None:
        facts, now = probe.facts(), probe.read(0)
        limits = ", ".join(f"{k} {v}" for k, v in facts.items() if v is not None)
        reasons = ", ".join(reason_names(now.reasons)) or "none"
        print(f"clocks: {limits}; now SM {now.sm_mhz} MHz, memory {now.mem_mhz} MHz, {now.power_w:.0f} W ({reasons})")
    elif device.sm is not None:
        print("clocks: NVML not available (pip install nvidia-ml-py, and an NVIDIA driver)")
    if reason:
        print(f"backend {backend.name} cannot run here: {reason}")
    from pytest_vitperf.core.precision import PRECISIONS, unsupported_reason

    for name in PRECISIONS:  # what a run here would skip, before it is run
        if why := unsupported_reason(name, device) or backend.precision_reason(name):
            print(f"skips here: {why}")
    if missing := missing_dependencies():
        print(f"not installed: {', '.join(missing)}, which pytest-vitperf depends on (Model Optimizer's ONNX export "
              "imports lief, for one); install them: pip install -e .")  # fmt: skip
    return 0


def missing_dependencies(dist: str = "pytest-vitperf") -> list[str]:
    """The requirements of `dist` (not its extras') that are not installed: a broken or hand-made environment."""
    import importlib.metadata
    import re

    try:
        requires = importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError:  # a checkout on PYTHONPATH, not installed: nothing to compare
        return []
    out = []
    for line in requires:
        name = re.match(r"[A-Za-z0-9._-]+", line)
        if name is None or "extra ==" in line:
            continue
        try:
            importlib.metadata.version(name[0])
        except importlib.metadata.PackageNotFoundError:
            out.append(name[0])
    return out


def _plain_loop(launch: Callable[[], None], stream: Any, ms: float) -> list[float]:
    """Per-launch times from a loop that shares no code with the plugin's timer: torch's CUDA events around each
    launch on the engine's stream, or the host's perf_counter on a CPU; at least `ms` of them, and 10."""
    out: list[float] = []
    start = time.perf_counter()
    while (time.perf_counter() - start) * 1e3 < ms or len(out) < 10:
        if stream is None:
            t0 = time.perf_counter()
            launch()
            out.append((time.perf_counter() - t0) * 1e3)
            continue
        import torch

        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(16)]
        with torch.cuda.stream(stream):
            for begin, end in pairs:
                begin.record(stream)
                launch()
                end.record(stream)
        pairs[-1][1].synchronize()
        out += [begin.elapsed_time(end) for begin, end in pairs]
    return out


def _selfcheck(args: argparse.Namespace) -> int:
    """The plugin's sampler and a plain loop time one engine in alternating rounds (ABBA); the ratio of their medians
    gets an interval over the rounds, which must lie within the tolerance of 1."""
    if args.backend != "torch":
        return _backend_selfcheck(args)
    import statistics

    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.engines.backends.torch import TorchBackend
    from pytest_vitperf.engines.models.zoo import build_model
    from pytest_vitperf.measure.env import probe_device
    from pytest_vitperf.measure.rounds import CPU_WARMUP_MS, GPU_WARMUP_MS
    from pytest_vitperf.measure.timing import sample
    from pytest_vitperf.verdicts.stats import ratio_interval

    device = probe_device(0)
    gpu = device.sm is not None
    model = args.model or ("vit_base_patch16_224" if gpu else "vit_tiny_patch16_224")
    precision, batch = args.precision or ("fp16" if gpu else "fp32"), args.batch or (64 if gpu else 1)
    engine = TorchBackend().prepare(build_model(model), model_name=model, precision=precision, batch=batch,
                                    device=device, settings=Settings(compile=args.compile))  # fmt: skip
    stream = getattr(engine.clock, "stream", None)
    sample(engine.launch, engine.clock, warmup_ms=GPU_WARMUP_MS if gpu else CPU_WARMUP_MS, duration_ms=0,
           min_iterations=1)  # the plugin's own warm-up
    plugin: list[float] = []
    plain: list[float] = []
    for r in range(args.rounds):
        for side in ("plugin", "plain") if r % 2 == 0 else ("plain", "plugin"):
            if side == "plugin":
                timed = sample(engine.launch, engine.clock, warmup_ms=20, duration_ms=args.slice_ms, min_iterations=10)
                plugin.append(statistics.median(timed))
            else:
                plain.append(statistics.median(_plain_loop(engine.launch, stream, args.slice_ms)))
    interval = ratio_interval(plugin, plain)
    print(f"vitperf selfcheck: {model} {precision} batch {batch} on {device.describe()}, {args.rounds} rounds ABBA")
    pairs = enumerate(zip(plugin, plain, strict=True), start=1)
    rows = [(str(i), f"{a:.4f}", f"{b:.4f}", f"{a / b:.4f}") for i, (a, b) in pairs]
    for line in table(("round", "plugin median ms", "plain loop median ms", "ratio"), rows):
        print(line)
    if interval is None:
        print("fewer than 3 rounds: no interval; run with --rounds 6 or more")
        return 2
    ok = interval.low >= 1 - args.tolerance and interval.high <= 1 + args.tolerance
    word = "agree" if ok else "DISAGREE"
    print(f"plugin / plain loop: {interval.text()} at {interval.confidence:.0%}; the timers {word} within "
          f"{args.tolerance:.1%}")  # fmt: skip
    return 0 if ok else 1


SELFCHECK_PRECISIONS = "fp32,fp16,bf16,fp8,int8"  # what a Hopper or Ada GPU builds; others skip with their reason


def _backend_selfcheck(args: argparse.Namespace) -> int:
    """A first contact with a TensorRT-family backend: the latency suite on one model and batch, each precision built,
    captured, timed and its output held against the FP32 model's, in one fresh process and without floors (a
    working backend on a GPU without floors must not fail one). Where the backend cannot run, what it would do."""
    import json
    import shlex
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from pytest_vitperf.engines.backends import get_backend
    from pytest_vitperf.measure.env import probe_device
    from pytest_vitperf.options import LATENCY_SUITE

    work = Path(tempfile.gettempdir()) / f"vitperf-selfcheck-{args.backend}"  # kept: a second run finds its plans
    precisions = f"fp16,{args.precision}" if args.precision else SELFCHECK_PRECISIONS
    cmd = ["pytest", "--gpu-bench", str(Path("suites") / LATENCY_SUITE), f"--vitperf-backend={args.backend}",
           f"--vitperf-models={args.model or 'vit_base_patch16_224'}", f"--vitperf-batch-sizes={args.batch or 8}",
           f"--vitperf-precisions={precisions}", "--vitperf-rounds=3", f"--vitperf-floors={work / 'floors.json'}",
           f"--vitperf-cache-dir={work / 'cache'}", "-p", "no:cacheprovider", "-rs"]  # fmt: skip
    print(f"vitperf selfcheck --backend {args.backend}: builds each precision's engine, captures it in a CUDA "
          "graph, times it against FP16 in 3 rounds, checks its output against the FP32 model's (the precision's "
          f"accuracy bound) and prints the summary, in one fresh process (about ten minutes):\n  $ {shlex.join(cmd)}")
    reason = get_backend(args.backend).unavailable_reason(probe_device(0))
    if reason is not None:
        print(f"it cannot run here: {reason}")
        return 2
    if not Path(cmd[2]).is_file():
        print(f"vitperf selfcheck: no {cmd[2]} here; run it from the project's folder", file=sys.stderr)
        return 2
    work.mkdir(exist_ok=True)
    (work / "floors.json").write_text(json.dumps({"schema": 1, "floors": []}))
    return subprocess.run([sys.executable, "-m", *cmd], check=False).returncode


def add(sub: Any) -> None:
    """The device subcommands."""
    sub.add_parser("capabilities", help="print the precision capability matrix").set_defaults(func=_capabilities)
    env = sub.add_parser("env", help="print the device, driver and versions a run would record, and what it would skip")
    env.add_argument("--backend", default="auto", choices=("auto", *BACKENDS),
                     help="as --vitperf-backend: the backend a run would use (auto)")
    env.set_defaults(func=_env)

    chk = sub.add_parser("selfcheck", help="does the plugin's timer agree with a plain loop on this machine? "
                         "With --backend, a first run of that backend: each precision built, timed, checked")
    chk.add_argument("--backend", choices=BACKENDS, default="torch",
                     help="torch: the timer against a plain loop; another: that backend's self-test (torch)")
    chk.add_argument("--model", type=argtypes.model, help="default: vit_base_patch16_224 on a GPU, vit_tiny on a CPU")
    chk.add_argument("--precision", type=argtypes.precision, help="default: fp16 on a GPU, fp32 on a CPU; with "
                     f"--backend, the one to check beside FP16 (default: {SELFCHECK_PRECISIONS})")
    chk.add_argument("--batch", type=int, help="default: 64 on a GPU, 1 on a CPU, 8 with --backend")
    chk.add_argument("--compile", choices=("auto", "off", "default"), default="off", help="torch.compile (off)")
    chk.add_argument("--rounds", type=int, default=10, help="alternating rounds of the two timers (10)")
    chk.add_argument("--slice-ms", type=float, default=300.0, help="each timer's time per round (300)")
    chk.add_argument("--tolerance", type=parse_threshold, default=0.02,
                     help="how far from 1 the interval may reach (2%%)")
    chk.set_defaults(func=_selfcheck)
