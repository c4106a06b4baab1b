"""Argument types the subcommands share: each turns a word of the command line into its value, or says in one line
what it expected."""

from __future__ import annotations

import argparse


def model(text: str) -> str:
    from pytest_vitperf.engines.models.zoo import MODEL_NAMES, canonical_model_name

    name = canonical_model_name(text)
    if name is None:
        raise argparse.ArgumentTypeError(f"unknown model {text!r}; valid: {', '.join(MODEL_NAMES)} or a timm name")
    return name


def precision(text: str) -> str:
    from pytest_vitperf.core.precision import get_precision

    try:
        return get_precision(text).name
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def precisions(text: str) -> tuple[str, ...]:
    from pytest_vitperf.options.parsers import parse_precisions

    return tuple(precision(name) for name in parse_precisions(text))


def backend_version(text: str) -> tuple[str, str]:
    backend, sep, version = text.partition("/")
    if not sep or not backend or not version:
        raise argparse.ArgumentTypeError(f"{text!r} is not BACKEND/VERSION, e.g. tensorrt/10.14.1")
    return backend, version


def floor(text: str) -> tuple[str, float]:
    from pytest_vitperf.core.precision import PRECISIONS

    name, sep, value = text.partition("=")
    try:
        floor = float(value)
    except ValueError:
        floor = -1.0
    if not sep or name not in PRECISIONS or not floor > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not PRECISION=SPEEDUP, e.g. nvfp4=1.55")
    return name, floor


def store(text: str) -> str:
    """A store's URL (or a file that becomes a SQLite one), refused before any round runs if it cannot be one."""
    from pytest_vitperf.store.sql import url_problem

    problem = url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text}: {problem}")
    return text
