"""Options into Settings: the command line's value, else the ini file's, else the default; paths anchored where
they were given; precision and backend names checked once conftest.py files have registered theirs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_vitperf.core.precision import PRECISIONS
from pytest_vitperf.core.settings import Settings
from pytest_vitperf.engines.models.zoo import PRETRAINED
from pytest_vitperf.hookspec import backend_names
from pytest_vitperf.options import (
    BACKEND,
    CLOCKS,
    CUDA_GRAPH,
    FALSE_ALARM,
    GPU_BENCH,
    GPU_BENCH_INI,
    INJECT_DELAY,
    PRECISIONS_OPT,
    RECORD_RUN,
    UPDATE_BASELINES,
    _dest,
)
from pytest_vitperf.options.parsers import parse_bool
from pytest_vitperf.options.table import CHILD_ONLY, FLAGS, OPTIONS

_DEFAULTS = Settings()
GPU_DEFAULTS = (("vit_base_patch16_224",), (1, 64))
CPU_DEFAULTS = (("vit_tiny_patch16_224",), (1, 8))


def run_defaults(gpu: bool) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The models and batches a run measures unless told: ViT-B/16 at 1 and 64 on a GPU, ViT-Ti/16 at 1 and 8 on a
    CPU."""
    return GPU_DEFAULTS if gpu else CPU_DEFAULTS


PATH_SETTINGS = (
    "cache_dir", "floors", "baseline_dir", "history", "export", "report", "weights", "accuracy_data", "wait_for",
    "turn_done", "units", "relay",
)


def _anchored(value: Any, base: Path) -> Any:
    if isinstance(value, tuple):  # --vitperf-export's FORMAT=FILE and --vitperf-weights' MODEL=FILE pairs
        return tuple((key, path if path == PRETRAINED else _anchored(path, base)) for key, path in value)
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
    if flag in CHILD_ONLY:  # given on the command line by vitperf ab, or not at all
        return default
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

    _check_names(config, values)
    writes = [f for f, on in ((UPDATE_BASELINES, values["update_baselines"]), (RECORD_RUN, values["record_run"])) if on]
    if values["inject_delay"] and writes:
        raise pytest.UsageError(
            f"{INJECT_DELAY} makes engines slower on purpose; their times must not become baselines. Drop one of "
            f"{INJECT_DELAY} and {writes[0]}"
        )
    if len(writes) == 2:
        raise pytest.UsageError(f"{UPDATE_BASELINES} writes new baselines, {RECORD_RUN} adds runs to the old: pick one")
    if not 0 < values["false_alarm"] < 1:
        raise pytest.UsageError(f"{FALSE_ALARM}: a rate between 0 and 1, e.g. 5%, got {values['false_alarm']!r}")
    root = Path(str(config.rootpath))
    if values["baseline_dir"] is None and (root / "baselines").is_dir():
        values["baseline_dir"] = root / "baselines"
    return Settings(rootdir=root, **values)


def _check_names(config: pytest.Config, values: dict[str, Any]) -> None:
    """Precision and backend names, checked once conftest.py files have registered theirs."""
    delayed = [name.rpartition(":")[2] for name, _ in values["inject_delay"]]  # [MODEL:]PRECISION
    named = ((PRECISIONS_OPT, values["precisions"] or ()), (INJECT_DELAY, delayed))
    for flag, precisions in named:
        bad = [n for n in precisions if n not in PRECISIONS]
        if bad:
            raise pytest.UsageError(
                f"{flag} (ini option {_dest(flag)}): unknown precision {', '.join(map(repr, bad))}; "
                f"valid: {', '.join(PRECISIONS)}"
            )
    names = ["auto", *backend_names(config)]
    if values["backend"] not in names:
        raise pytest.UsageError(
            f"{BACKEND} (ini option {_dest(BACKEND)}): unknown backend {values['backend']!r}; valid: {', '.join(names)}"
        )
