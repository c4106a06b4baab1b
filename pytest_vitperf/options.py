"""Command-line and ini options: names, parsers and the resolved Settings.

Kept free of heavy imports: `pytest --help` loads this module.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_vitperf.exports import FORMATS
from pytest_vitperf.hookspec import backend_names
from pytest_vitperf.measurement import NOISY_COV
from pytest_vitperf.models import MODEL_NAMES, canonical_model_name
from pytest_vitperf.precision import PRECISIONS, TaskBound

GPU_BENCH = "--gpu-bench"
GPU_BENCH_INI = "vitperf_gpu_bench"
BACKEND = "--vitperf-backend"
PRECISIONS_OPT = "--vitperf-precisions"
BATCH_SIZES = "--vitperf-batch-sizes"
MODELS = "--vitperf-models"
WARMUP_MS = "--vitperf-warmup-ms"
DURATION_MS = "--vitperf-duration-ms"
MIN_ITERATIONS = "--vitperf-min-iterations"
CUDA_GRAPH = "--vitperf-cuda-graph"
NO_CUDA_GRAPH = "--no-vitperf-cuda-graph"
CLOCKS = "--vitperf-clocks"
NO_CLOCKS = "--no-vitperf-clocks"
COMPILE = "--vitperf-compile"
CACHE_DIR = "--vitperf-cache-dir"
FLOORS = "--vitperf-floors"
BASELINE_DIR = "--vitperf-baseline-dir"
HISTORY = "--vitperf-history"
EXPORT = "--vitperf-export"
REPORT = "--vitperf-report"
THRESHOLD = "--vitperf-regression-threshold"
NOISE = "--vitperf-noise-threshold"
MAX_NOISE = "--vitperf-max-noise"
ACCURACY_BOUND = "--vitperf-accuracy-bound"
TIMEOUT_MS = "--vitperf-timeout-ms"
UPDATE_BASELINES = "--vitperf-update-baselines"
STRICT = "--vitperf-strict"
COLD = "--vitperf-cold"
KERNELS = "--vitperf-kernels"
SHARE_DEVICES = "--vitperf-share-devices"

COMPILE_MODES = ("auto", "off", "default", "max-autotune")

T = TypeVar("T")


def _dest(opt: str) -> str:
    return opt.lstrip("-").replace("-", "_")


def _choice(valid: Sequence[str]) -> Callable[[str], str]:
    def parse(value: str) -> str:
        v = value.strip().lower()
        if v not in valid:
            raise argparse.ArgumentTypeError(f"{value!r} is not one of: {', '.join(valid)}")
        return v

    return parse


def _comma_list(value: str, item: Callable[[str], T], none: str) -> tuple[T, ...]:
    """`a, b,,a` -> (a, b): each item parsed by `item`, empty ones dropped, repeats dropped, none at all refused."""
    out = [item(raw) for raw in (v.strip() for v in value.split(",")) if raw]
    if not out:
        raise argparse.ArgumentTypeError(none)
    return tuple(dict.fromkeys(out))


def parse_precisions(value: str) -> tuple[str, ...]:
    """Names only: they are checked against the registry once conftest.py files have registered theirs."""
    return _comma_list(value, str.lower, f"no precision given; valid: {', '.join(PRECISIONS)}")


def _model(raw: str) -> str:
    name = canonical_model_name(raw)
    if name is None:
        raise argparse.ArgumentTypeError(f"unknown model {raw!r}; valid: {', '.join(MODEL_NAMES)}")
    return name


def parse_models(value: str) -> tuple[str, ...]:
    return _comma_list(value, _model, f"no model given; valid: {', '.join(MODEL_NAMES)}")


def _batch(raw: str) -> int:
    n = int(raw) if raw.isdigit() else 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"batch size {raw!r} is not a positive integer, e.g. 1,8,64")
    return n


def parse_batch_sizes(value: str) -> tuple[int, ...]:
    return _comma_list(value, _batch, "no batch size given, e.g. 1,8,64")


def _number(kind: type[T], minimum: float, what: str) -> Callable[[str], T]:
    def parse(value: str) -> T:
        try:
            n = kind(value)  # type: ignore[call-arg]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a {what} >= {minimum:g}") from None
        if n < minimum or n != n:  # type: ignore[operator]
            raise argparse.ArgumentTypeError(f"{value!r} is not a {what} >= {minimum:g}")
        return n

    return parse


def parse_threshold(value: str) -> float:
    """0.05 or 5%: a relative latency change."""
    text = value.strip()
    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        v = -1.0
    if not 0 <= v < 10:
        raise argparse.ArgumentTypeError(f"{value!r} is not a relative change such as 0.05 or 5%")
    return v


TASK_BOUND_KEYS = tuple(f.name for f in fields(TaskBound))


def parse_task_bound(value: str) -> dict[str, float]:
    """max_drop=2,min_cosine=0.95: the accuracy suite's bounds for every precision of the run."""
    out: dict[str, float] = {}
    for part in filter(None, (x.strip() for x in value.split(","))):
        key, _, number = (t.strip() for t in part.partition("="))
        try:
            bound: float | None = float(number)
        except ValueError:
            bound = None
        if key not in TASK_BOUND_KEYS or bound is None:
            raise argparse.ArgumentTypeError(
                f"{part!r} is not KEY=NUMBER, KEY one of {', '.join(TASK_BOUND_KEYS)}; e.g. max_drop=2,min_cosine=0.95"
            )
        out[key] = bound
    if not out:
        raise argparse.ArgumentTypeError("no bound given; e.g. max_drop=2,min_cosine=0.95")
    return out


def parse_path(value: str) -> str:
    """A file or folder; resolved later, against the folder it was given in (settings_from_config)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("an empty path; give a file or folder, e.g. .vitperf-cache")
    return value.strip()


def parse_exports(value: str) -> tuple[tuple[str, str], ...]:
    """`github-action-benchmark=gab.json,bencher=bmf.json` -> ((format, file), ...)."""

    def pair(item: str) -> tuple[str, str]:
        fmt, sep, path = item.partition("=")
        if not sep or fmt.strip() not in FORMATS or not path.strip():
            valid = ", ".join(FORMATS)
            raise argparse.ArgumentTypeError(f"{item!r} is not FORMAT=FILE with FORMAT one of: {valid}")
        return fmt.strip(), path.strip()

    return _comma_list(value, pair, "no FORMAT=FILE given")


def parse_bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{value!r} is not a boolean; valid: true, false")


@dataclass(frozen=True)
class _Option:
    flag: str
    parse: Callable[[str], Any]
    metavar: str
    help: str

    @property
    def ini(self) -> str:
        return _dest(self.flag)


OPTIONS: tuple[_Option, ...] = (
    _Option(
        BACKEND,
        lambda v: v.strip().lower(),
        "NAME",
        "backend that builds and runs engines: auto (best one runnable here), torch, tensorrt, "
        "tensorrt-rtx, trtexec, trtexec-rtx (TensorRT's own tool times the engines), or one a conftest.py adds "
        "(hook pytest_vitperf_make_backend). Default: auto.",
    ),
    _Option(
        PRECISIONS_OPT,
        parse_precisions,
        "LIST",
        f"comma-separated precisions to benchmark, from: {', '.join(PRECISIONS)}. Default: all.",
    ),
    _Option(
        BATCH_SIZES,
        parse_batch_sizes,
        "LIST",
        "comma-separated batch sizes. Default: 1,64 on a GPU, 1,8 on a CPU.",
    ),
    _Option(
        MODELS,
        parse_models,
        "LIST",
        "comma-separated models from the zoo. Default: vit_base_patch16_224 on a GPU, vit_tiny_patch16_224 on a CPU.",
    ),
    _Option(
        WARMUP_MS,
        _number(float, 0, "number of ms"),
        "MS",
        "warm-up time before sampling. Default: 2000 on a GPU (power-capped clocks take about 2 s "
        "to settle), 200 on a CPU.",
    ),
    _Option(
        DURATION_MS,
        _number(float, 0, "number of ms"),
        "MS",
        "minimum sampling time per benchmark. Default: 3000.",
    ),
    _Option(
        MIN_ITERATIONS,
        _number(int, 1, "whole number"),
        "N",
        "minimum number of timed iterations per benchmark. Default: 10.",
    ),
    _Option(
        COMPILE,
        _choice(COMPILE_MODES),
        "MODE",
        "torch backend: torch.compile mode (auto, off, default, max-autotune). Default: auto, which compiles every "
        "precision in the default mode on a GPU (as a deployment runs fused kernels) and runs eagerly on a CPU.",
    ),
    _Option(CACHE_DIR, parse_path, "DIR", "directory for engines and compile caches. Default: none (nothing written)."),
    _Option(
        FLOORS,
        parse_path,
        "FILE",
        "speedup floors file. Default: floors.json beside the test module.",
    ),
    _Option(
        BASELINE_DIR,
        parse_path,
        "DIR",
        "baselines folder (<backend>/<version>/<gpu>/<model>.json). Default: baselines/ in the rootdir, if any.",
    ),
    _Option(
        HISTORY,
        parse_path,
        "DIR",
        "append this run's medians to a history (<backend>/<version>/<gpu>/<model>.json, one run per entry), for "
        "`vitperf history DIR` to find steps across nightly runs. Default: none.",
    ),
    _Option(
        REPORT,
        parse_path,
        "DIR",
        "write report.md, figures (speedup with floors, latency distributions, kernel time by kind, accuracy against "
        "speed) and data.json here at the end of the run; `vitperf report` does the same from a stored "
        "--benchmark-json. Default: none.",
    ),
    _Option(
        EXPORT,
        parse_exports,
        "FORMAT=FILE,...",
        "write this run's medians for a CI dashboard: github-action-benchmark (customSmallerIsBetter JSON) or bencher "
        "(Bencher Metric Format). Default: none.",
    ),
    _Option(
        THRESHOLD,
        parse_threshold,
        "REL",
        "latency change beyond which a significant difference from the baseline counts (0.05 or 5%%). "
        "Per test: @pytest.mark.vitperf_threshold(0.10). Default: 0.05.",
    ),
    _Option(
        MAX_NOISE,
        parse_threshold,
        "REL",
        "after the duration, keep sampling until the median's 95%% confidence half-width is at most this share of "
        "the median (0.005 or 0.5%%), or until --vitperf-timeout-ms. Default: off (duration and iterations only).",
    ),
    _Option(
        TIMEOUT_MS,
        _number(float, 0, "number of ms"),
        "MS",
        "the longest sampling time per benchmark with --vitperf-max-noise. Default: 15000.",
    ),
    _Option(
        ACCURACY_BOUND,
        parse_task_bound,
        "BOUNDS",
        "the accuracy suite's bounds for every precision of this run, over the registry's and the tests' markers: "
        "max_drop (points of top-1), min_agreement (share of images with FP32's top-1), min_cosine (of the logits); "
        "e.g. max_drop=2,min_cosine=0.95.",
    ),
    _Option(
        NOISE,
        parse_threshold,
        "REL",
        "coefficient of variation above which a measurement is flagged noisy (0.01 or 1%%). "
        "Default: 1%%, trtexec's threshold for unstable timing.",
    ),
)
FLAGS = (
    (UPDATE_BASELINES, "write or refresh the baselines of what this run measures, and report what changed."),
    (STRICT, "fail tests whose measurement has no baseline, instead of reporting it."),
    (
        KERNELS,
        "after each measurement, profile it once more and print where the time goes (GEMM, attention, "
        "quantize, norm, elementwise): why a precision is or is not faster.",
    ),
    (
        COLD,
        "evict the cache before every sample, outside the timed region (the GPU's L2, or the CPU's last-level "
        "cache), for deployments that run one request at a time with cold caches. Baselined apart from warm runs.",
    ),
    (
        SHARE_DEVICES,
        "let more xdist workers run than there are GPUs (or more than one on a CPU): they then share a device and time "
        "each other's work. Without it, that is a usage error. Worker k uses GPU k mod the number of visible GPUs.",
    ),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("vitperf", "ViT precision benchmarks (pytest-vitperf)")
    group.addoption(
        GPU_BENCH,
        action="store_true",
        default=None,
        dest=_dest(GPU_BENCH),
        help="run benchmark tests (marked gpu_bench); without it they are skipped.",
    )
    parser.addini(GPU_BENCH_INI, "run benchmark tests, as --gpu-bench (true/false)", default="false")
    for opt in OPTIONS:
        group.addoption(opt.flag, dest=opt.ini, type=opt.parse, metavar=opt.metavar, default=None, help=opt.help)
        parser.addini(opt.ini, f"as {opt.flag}", default="")
    for flag, text in FLAGS:
        group.addoption(flag, dest=_dest(flag), action="store_true", default=None, help=text)
        parser.addini(_dest(flag), f"as {flag} (true/false)", default="false")
    group.addoption(
        CUDA_GRAPH,
        dest=_dest(CUDA_GRAPH),
        action="store_true",
        default=None,
        help="replay CUDA graphs on a GPU (default).",
    )
    group.addoption(
        NO_CUDA_GRAPH,
        dest=_dest(CUDA_GRAPH),
        action="store_false",
        help="launch eagerly instead of replaying CUDA graphs.",
    )
    parser.addini(_dest(CUDA_GRAPH), f"as {CUDA_GRAPH} (true/false)", default="true")
    group.addoption(
        CLOCKS,
        dest=_dest(CLOCKS),
        action="store_true",
        default=None,
        help="read the GPU's SM and memory clocks, power and clock-event reasons through NVML after every timed "
        "chunk (default, where NVML is there).",
    )
    group.addoption(NO_CLOCKS, dest=_dest(CLOCKS), action="store_false", help="do not read GPU clocks.")
    parser.addini(_dest(CLOCKS), f"as {CLOCKS} (true/false)", default="true")


@dataclass(frozen=True)
class Settings:
    """Options after command line, ini file and defaults are combined."""

    enabled: bool = False
    backend: str = "auto"
    precisions: tuple[str, ...] | None = None
    batch_sizes: tuple[int, ...] | None = None
    models: tuple[str, ...] | None = None
    warmup_ms: float | None = None  # None: the device's default, see VitperfSession.timing
    duration_ms: float = 3000.0
    min_iterations: int = 10
    cuda_graph: bool = True
    clocks: bool = True
    compile: str = "auto"
    cache_dir: Path | None = None
    floors: Path | None = None
    baseline_dir: Path | None = None
    history: Path | None = None
    export: tuple[tuple[str, Path], ...] = ()
    report: Path | None = None
    regression_threshold: float = 0.05
    noise_threshold: float = NOISY_COV
    max_noise: float | None = None
    accuracy_bound: dict[str, float] | None = None
    timeout_ms: float = 15000.0
    update_baselines: bool = False
    strict: bool = False
    kernels: bool = False
    cold: bool = False
    share_devices: bool = False
    rootdir: Path = field(default_factory=Path.cwd)


_DEFAULTS = Settings()


PATH_SETTINGS = ("cache_dir", "floors", "baseline_dir", "history", "export", "report")


def _anchored(value: Any, base: Path) -> Any:
    if isinstance(value, tuple):  # --vitperf-export's FORMAT=FILE pairs
        return tuple((fmt, _anchored(path, base)) for fmt, path in value)
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _resolve(
    config: pytest.Config,
    dest: str,
    parse: Callable[[str], Any],
    flag: str,
    default: Any,
    ini: str = "",
    is_path: bool = False,
) -> Any:
    """The command line's value, else the ini file's, else `default`. A relative path is taken from the folder
    pytest was started in when given on the command line, from the ini file's folder when given there."""
    cli = config.getoption(dest, default=None)
    if cli is not None:
        return _anchored(cli, config.invocation_params.dir) if is_path else cli
    ini = ini or dest
    raw = config.getini(ini)
    if isinstance(raw, str) and raw.strip():
        try:
            value = parse(raw)
        except argparse.ArgumentTypeError as exc:
            raise pytest.UsageError(f"ini option {ini} (same as {flag}): {exc}") from None
        return _anchored(value, config.inipath.parent if config.inipath else config.rootpath) if is_path else value
    return default


def settings_from_config(config: pytest.Config) -> Settings:
    """The one place where options become values: suites and fixtures read `Settings`, never `getoption`."""
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        attr = opt.ini.removeprefix("vitperf_")
        default = getattr(_DEFAULTS, attr)
        values[attr] = _resolve(config, opt.ini, opt.parse, opt.flag, default, is_path=attr in PATH_SETTINGS)
    values["enabled"] = _resolve(config, _dest(GPU_BENCH), parse_bool, GPU_BENCH, False, ini=GPU_BENCH_INI)
    values["cuda_graph"] = _resolve(config, _dest(CUDA_GRAPH), parse_bool, CUDA_GRAPH, True)
    values["clocks"] = _resolve(config, _dest(CLOCKS), parse_bool, CLOCKS, True)
    for flag, _ in FLAGS:
        values[_dest(flag).removeprefix("vitperf_")] = _resolve(config, _dest(flag), parse_bool, flag, False)

    _check_names(config, values["precisions"], values["backend"])
    root = Path(str(config.rootpath))
    if values["baseline_dir"] is None and (root / "baselines").is_dir():
        values["baseline_dir"] = root / "baselines"
    return Settings(rootdir=root, **values)


def _check_names(config: pytest.Config, precisions: tuple[str, ...] | None, backend: str) -> None:
    """Precision and backend names, checked once conftest.py files have registered theirs."""
    bad = [n for n in precisions or () if n not in PRECISIONS]
    if bad:
        raise pytest.UsageError(
            f"{PRECISIONS_OPT} (ini option {_dest(PRECISIONS_OPT)}): unknown precision {', '.join(map(repr, bad))}; "
            f"valid: {', '.join(PRECISIONS)}"
        )
    names = ["auto", *backend_names(config)]
    if backend not in names:
        raise pytest.UsageError(
            f"{BACKEND} (ini option {_dest(BACKEND)}): unknown backend {backend!r}; valid: {', '.join(names)}"
        )
