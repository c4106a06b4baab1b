"""The table of options: each one's flag, value parser, metavar and help; the on/off flags; and their registration
with pytest and its ini file (add_options). The names are the package's (options/__init__.py).

Kept free of heavy imports: `pytest --help` loads this module.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_vitperf import options as o  # the options' names
from pytest_vitperf.core.precision import PRECISIONS
from pytest_vitperf.options.parsers import (
    choice,
    number,
    parse_batch_sizes,
    parse_confidence,
    parse_delays,
    parse_exports,
    parse_models,
    parse_path,
    parse_precisions,
    parse_shard,
    parse_task_bound,
    parse_threshold,
    parse_weights,
)


@dataclass(frozen=True)
class _Option:
    flag: str
    parse: Callable[[str], Any]
    metavar: str
    help: str

    @property
    def ini(self) -> str:
        return o._dest(self.flag)

    @property
    def default(self) -> str:
        """What the help gives after 'Default:': docs/options.md's default column holds the same."""
        return self.help.rpartition("Default: ")[2].removesuffix(".").replace("%%", "%")


OPTIONS: tuple[_Option, ...] = (
    _Option(
        o.BACKEND,
        lambda v: v.strip().lower(),
        "NAME",
        "backend that builds and runs engines: auto (best one runnable here), torch, tensorrt, "
        "tensorrt-rtx, trtexec, trtexec-rtx (TensorRT's own tool times the engines), or one a conftest.py adds "
        "(hook pytest_vitperf_make_backend). Default: auto.",
    ),
    _Option(o.PRECISIONS_OPT, parse_precisions, "LIST",
            f"comma-separated precisions to benchmark, from: {', '.join(PRECISIONS)}. Default: all."),
    _Option(o.BATCH_SIZES, parse_batch_sizes, "LIST",
            "comma-separated batch sizes. Default: 1,64 on a GPU, 1,8 on a CPU."),
    _Option(
        o.MODELS,
        parse_models,
        "LIST",
        "comma-separated models: the zoo's, any timm name (deit_small_patch16_224, vit_base_patch14_dinov2), "
        "nightly (the 7 ViTs of a nightly matrix), or one a conftest.py registers (hook pytest_vitperf_models). "
        "Default: vit_base_patch16_224 on a GPU, vit_tiny_patch16_224 on a CPU.",
    ),
    _Option(
        o.WEIGHTS,
        parse_weights,
        "LIST",
        "comma-separated MODEL=FILE (.safetensors, or a .pth holding a state dict) or MODEL=pretrained (timm's "
        "weights, from the local Hugging Face cache; nothing is downloaded); without, random weights from a fixed "
        "seed. Default: random.",
    ),
    _Option(
        o.WARMUP_MS,
        number(float, 0, "number of ms"),
        "MS",
        "the longest warm-up before sampling: a family's ends after 0.5 s where NVML shows the SM clock at its top "
        "with nothing holding it back (a load below the power cap has nothing to settle to; --no-vitperf-clocks: "
        "all of it). Power-capped clocks take about 4 s to settle. Default: 4000 on a GPU, 200 on a CPU.",
    ),
    _Option(o.DURATION_MS, number(float, 0, "number of ms"), "MS",
            "minimum sampling time per benchmark. Default: 3000."),
    _Option(o.MIN_ITERATIONS, number(int, 1, "whole number"), "N",
            "minimum number of timed iterations per benchmark. Default: 10."),
    _Option(
        o.COMPILE,
        choice(o.COMPILE_MODES),
        "MODE",
        "torch backend: torch.compile mode (auto, off, default, deterministic, max-autotune). auto compiles every "
        "precision in the default mode on a GPU (as a deployment runs fused kernels) and runs eagerly on a CPU. "
        "deterministic: the default mode without the kernel choices Inductor makes by timing, which make two "
        "compiles of one engine differ by several percent; vitperf ab compiles so. Default: auto.",
    ),
    _Option(o.CACHE_DIR, parse_path, "DIR",
            "directory for engines and compile caches; without it nothing is written. Default: none."),
    _Option(o.FLOORS, parse_path, "FILE", "speedup floors file. Default: floors.json beside the test module."),
    _Option(o.BASELINE_DIR, parse_path, "DIR", "baselines folder (<backend>/<version>/<gpu>/<model>.json), if there "
            "is one. Default: baselines/ in the rootdir."),
    _Option(o.HISTORY, parse_path, "DIR", "append this run's medians to a history (<backend>/<version>/<gpu>/"
            "<model>.json, one run per entry), for `vitperf history DIR` to find steps across nightly runs. "
            "Default: none."),
    _Option(o.STORE, str, "URL", "write this run's rows to a database that many hosts can share, in one transaction: "
            "sqlite:///FILE (or a file path), or postgresql+psycopg://HOST/DB; `vitperf history URL` reads it. "
            "Default: none."),
    _Option(
        o.REPORT,
        parse_path,
        "DIR",
        "write report.md, figures (speedup with floors, latency distributions, kernel time by kind, accuracy against "
        "speed) and data.json here at the end of the run; `vitperf report` does the same from a stored "
        "--benchmark-json. Default: none.",
    ),
    _Option(
        o.EXPORT,
        parse_exports,
        "FORMAT=FILE,...",
        "write this run's medians for a CI dashboard: github-action-benchmark (customSmallerIsBetter JSON) or bencher "
        "(Bencher Metric Format). Default: none.",
    ),
    _Option(
        o.THRESHOLD,
        parse_threshold,
        "REL",
        "the practical threshold: a change from the baseline smaller than this is never a regression or an "
        "improvement, however clear (0.03 or 3%%). Per test: @pytest.mark.vitperf_threshold(0.10). Default: 3%%.",
    ),
    _Option(
        o.FALSE_ALARM,
        parse_threshold,
        "RATE",
        "the baseline gate's false-alarm rate: Benjamini-Hochberg holds the run's rows at this rate, so an "
        "identical rerun flags anything at most this often (0.05 or 5%%). Default: 5%%.",
    ),
    _Option(
        o.BOARD_SPREAD,
        parse_threshold,
        "REL",
        "the spread (sd of log latency) assumed between boards of one GPU model, added when a row's runs were made "
        "on another board (its GPU UUID differs), where the row is judged in cycles; 2%% was seen between two H100s. "
        "Default: 2%%.",
    ),
    _Option(o.MAX_NOISE, parse_threshold, "REL",
            "after the duration, keep sampling until the median's 95%% confidence half-width is at most this share of "
            "the median (0.005 or 0.5%%), or until --vitperf-timeout-ms; off: the duration and iterations only. "
            "Default: off."),
    _Option(o.TIMEOUT_MS, number(float, 0, "number of ms"), "MS",
            "the longest sampling time per benchmark with --vitperf-max-noise. Default: 15000."),
    _Option(
        o.ACCURACY_BOUND,
        parse_task_bound,
        "BOUNDS",
        "the accuracy suite's bounds for every precision of this run, over the registry's and the tests' markers: "
        "max_drop (points of top-1), min_agreement (share of images with FP32's top-1), min_cosine (of the logits); "
        "e.g. max_drop=2,min_cosine=0.95. Default: the registry's.",
    ),
    _Option(
        o.ACCURACY_DATA,
        parse_path,
        "DIR",
        "the accuracy suite's own data: a folder with one sub-folder of labelled images per class (torchvision's "
        "ImageFolder layout, sorted in the head's class order), judged on the run's first model, which needs trained "
        "weights (--vitperf-weights). 128 of the images calibrate its quantized engines. Default: the digits task.",
    ),
    _Option(
        o.NOISE,
        parse_threshold,
        "REL",
        "coefficient of variation above which a measurement is flagged noisy (0.01 or 1%%), trtexec's threshold for "
        "unstable timing. Default: 1%%.",
    ),
    _Option(
        o.ROUNDS,
        number(int, 0, "whole number"),
        "N",
        "the latency suite times a family's engines (a model and batch: FP16 and every precision compared with it) "
        "in N interleaved rounds, every engine a slice of each round, so every speedup has an interval. 0: one "
        "block per engine (--vitperf-duration-ms), no interval. Default: 20.",
    ),
    _Option(
        o.ROUNDS_AGREE,
        parse_threshold,
        "REL",
        "--vitperf-rounds is the most a family runs: it stops after 3 rounds (2 with one build) once they agree, "
        "the standard error of their log medians (pooled over its engines) at most REL (0.001 or 0.1%%). Below the "
        "power cap (an H200 at batch 1) the builds' spread sets the intervals, and 3 rounds gave them as 20 did. "
        "0: all its rounds. Default: 0.1%%.",
    ),
    _Option(o.FIRST_LOOK, number(int, 0, "whole number"), "N",
            "a family with floors looks at them after N rounds and ends there once every floor's interval is clear of "
            "it (the look takes its share of the confidence), leaving its rows without a floor N rounds' intervals; "
            "else its rounds go on to --vitperf-rounds, as they do where a row has a stored baseline. 0: no early "
            "look. Default: 6."),
    _Option(
        o.BUILDS,
        number(int, 1, "whole number"),
        "N",
        "in the rounds, each precision's engine is built N times, and a speedup's interval carries the spread between "
        "builds (on an H100 at batch 1, builds of one engine differed by up to 0.7%%). 1: one build, an interval for "
        "that build only. Default: 2.",
    ),
    _Option(
        o.SLICE_MS,
        number(float, 1, "number of ms"),
        "MS",
        "each engine's time per round, cut into 8 visits made in a shuffled order (at least one launch a visit). "
        "Default: 200.",
    ),
    _Option(
        o.ROUND_BUDGET_S,
        number(float, 0, "number of seconds"),
        "S",
        "the longest a family may spend adding rounds (doubling them, to three looks in all) while a floor's interval "
        "still straddles the floor and more rounds could settle it (none where the spread between builds alone "
        "straddles it). Default: 60.",
    ),
    _Option(
        o.CONFIDENCE,
        parse_confidence,
        "LEVEL",
        "confidence of the intervals shown (0.95 or 95%%); floors are judged at this level shared among all the "
        "floors and looks of the run (Bonferroni), so that this is the chance no floor is judged wrongly. "
        "Default: 95%%.",
    ),
    _Option(o.INCONCLUSIVE, choice(o.INCONCLUSIVE_OUTCOMES), "OUTCOME",
            "what a floor verdict that stays inconclusive (its interval straddles the floor once the rounds are "
            "spent) does to its test: warn (passes, with a warning in the summary), xfail, or fail. Default: warn."),
    _Option(o.SEED, number(int, 0, "whole number"), "N",
            "the seed of the rounds' shuffled orders, to repeat a run's orders; without, one is drawn and recorded. "
            "Default: drawn."),
    _Option(o.THREADS, number(int, 1, "whole number"), "N",
            "CPU threads for this process and what it starts (torch, OpenMP, Inductor's compile workers): by default "
            "its share of the host's cores by the GPUs it sees of the host's, divided among xdist workers on one "
            "device, so that jobs side by side on one host do not oversubscribe it. Default: its share."),
    _Option(o.UNITS, parse_path, "FILE",
            "run only the tests of the units in FILE, one a line: a family (MODEL-bBATCH), another test's module or "
            f"class, or a node id (vitperf ab: a GPU's share, the open rows; read after {o.WAIT_FOR}). Default: all."),
    _Option(o.SHARD, parse_shard, "K/N",
            "run only shard K of N: the run's units (families, other tests' modules) dealt over N by a model of their "
            "cost, alike on every host, a family never split. Default: all."),
    _Option(o.WAIT_FOR, parse_path, "FILE",
            "touch no GPU and run no test until FILE exists (vitperf ab: a side's next process starts and imports "
            "while the one before it runs). Default: none."),
    _Option(o.TURN_DONE, parse_path, "FILE",
            "touch FILE once the last test has run, before the reports and the exit: vitperf ab gives the GPU to "
            "the next process then, while this one writes its results; it then ends as soon as pytest returns, "
            "without the exit handlers of what it imported. Default: none."),
    _Option(o.RELAY, parse_path, "FILE",
            "share the GPU with vitperf ab's other process of a round: load every family's engines, then take the "
            "GPU a family at a time when FILE's answer says (core/relay.py). Default: none."),
    _Option(
        o.INJECT_DELAY,
        parse_delays,
        "[MODEL:]PRECISION=REL,...",
        "the sensitivity self-test: add a GPU-side delay of REL of the engine's own time after every launch of "
        "PRECISION's engines (fp8=2%%), or of one model's (vit_large:fp8=1%%), to see what the run detects on this "
        f"machine; never with {o.UPDATE_BASELINES}. Default: off.",
    ),
)
FLAGS = (
    (o.UPDATE_BASELINES, "write or refresh the baselines of what this run measures, and report what changed."),
    (o.STRICT, "fail tests whose measurement has no baseline, instead of reporting it."),
    (
        o.RECORD_RUN,
        "add this run's medians to their baselines' runs, keeping the baselines' values: the runs give the spread "
        "between processes that the gate judges with (`vitperf calibrate` runs this K times).",
    ),
    (
        o.STORE_BASELINES,
        f"judge each row against its earlier runs in {o.STORE}'s database instead of {o.BASELINE_DIR}'s files: its "
        "newest runs on this GPU model and backend version, from every host, leaving out runs the gate flagged; "
        f"{o.UPDATE_BASELINES} starts new baselines there. So a fleet's nights are the spread.",
    ),
    (
        o.KERNELS,
        "after each measurement, profile it once more and print where the time goes (GEMM, attention, "
        "quantize, norm, elementwise): why a precision is or is not faster.",
    ),
    (
        o.COLD,
        "evict the cache before every sample, outside the timed region (the GPU's L2, or the CPU's last-level "
        "cache), for deployments that run one request at a time with cold caches. Baselined apart from warm runs.",
    ),
    (
        o.GEMM_HOT,
        "time each GEMM on one set of operands, launched back to back, so that they stay in L2 where they fit: the "
        "in-cache number. By default a GEMM rotates over copies of its operands that hold more than twice the L2, "
        "as a deployed layer reads its weights from HBM. Hot rows are baselined apart (their model ends in -hot).",
    ),
    (o.BUILD_APART, "each test builds, checks and briefly times only its own engine, a test to an xdist worker, so a "
                  "family's engines compile at once; speedups skip. What vitperf ab's prepare runs."),
    (
        o.SHARE_DEVICES,
        "let more xdist workers run than there are GPUs (or more than one on a CPU): they then share a device and time "
        "each other's work. Without it, that is a usage error. Worker k uses GPU k mod the number of visible GPUs.",
    ),
)


# Options that only `vitperf ab`'s own processes are given: registered, kept out of `pytest --help` and the ini file.
CHILD_ONLY = (o.WAIT_FOR, o.TURN_DONE, o.RELAY, o.UNITS, o.BUILD_APART)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("vitperf", "ViT precision benchmarks (pytest-vitperf)")
    group.addoption(
        o.GPU_BENCH,
        action="store_true",
        default=None,
        dest=o._dest(o.GPU_BENCH),
        help="run benchmark tests (marked gpu_bench); without it they are skipped.",
    )
    parser.addini(o.GPU_BENCH_INI, "run benchmark tests, as --gpu-bench (true/false)", default="false")
    for opt in OPTIONS:
        shown = opt.flag not in CHILD_ONLY
        group.addoption(opt.flag, dest=opt.ini, type=opt.parse, metavar=opt.metavar, default=None,
                        help=opt.help if shown else argparse.SUPPRESS)  # fmt: skip
        if shown:
            parser.addini(opt.ini, f"as {opt.flag}", default="")
    for flag, text in FLAGS:
        shown = flag not in CHILD_ONLY
        group.addoption(flag, dest=o._dest(flag), action="store_true", default=None,
                        help=text if shown else argparse.SUPPRESS)  # fmt: skip
        if shown:
            parser.addini(o._dest(flag), f"as {flag} (true/false)", default="false")
    group.addoption(
        o.CUDA_GRAPH,
        dest=o._dest(o.CUDA_GRAPH),
        action="store_true",
        default=None,
        help="replay CUDA graphs on a GPU (default).",
    )
    group.addoption(
        o.NO_CUDA_GRAPH,
        dest=o._dest(o.CUDA_GRAPH),
        action="store_false",
        help="launch eagerly instead of replaying CUDA graphs.",
    )
    parser.addini(o._dest(o.CUDA_GRAPH), f"as {o.CUDA_GRAPH} (true/false)", default="true")
    group.addoption(
        o.CLOCKS,
        dest=o._dest(o.CLOCKS),
        action="store_true",
        default=None,
        help="read the GPU's SM and memory clocks, power and clock-event reasons through NVML after every timed "
        "chunk (default, where NVML is there).",
    )
    group.addoption(o.NO_CLOCKS, dest=o._dest(o.CLOCKS), action="store_false", help="do not read GPU clocks.")
    parser.addini(o._dest(o.CLOCKS), f"as {o.CLOCKS} (true/false)", default="true")
