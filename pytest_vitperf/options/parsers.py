"""Parsers of option values: each turns the text of a command-line or ini value into its setting, or raises
argparse.ArgumentTypeError with a line that names the valid values."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import TypeVar

from pytest_vitperf.core.precision import PRECISIONS, TaskBound
from pytest_vitperf.engines.models.zoo import MODEL_NAMES, MODEL_SETS, PRETRAINED, canonical_model_name
from pytest_vitperf.report.exports import FORMATS

T = TypeVar("T")

def choice(valid: Sequence[str]) -> Callable[[str], str]:
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
        raise argparse.ArgumentTypeError(
            f"{raw!r} is not a model name: the zoo's ({', '.join(MODEL_NAMES)}), a timm name such as "
            "deit_small_patch16_224, or one a conftest.py registers; letters, digits, '_' and '.'"
        )
    return name

def parse_models(value: str) -> tuple[str, ...]:
    """Names only: whether timm or a conftest.py knows them is checked once conftest.py files are loaded. A named
    set (`nightly`) stands for its models."""
    names = ",".join(",".join(MODEL_SETS.get(v.strip().lower(), (v,))) for v in value.split(","))
    return _comma_list(names, _model, f"no model given; valid: {', '.join(MODEL_NAMES)} or a timm model name")

def parse_weights(value: str) -> tuple[tuple[str, str], ...]:
    """`deit_small_patch16_224=ckpt.safetensors,vit_base=pretrained` -> ((model, file or PRETRAINED), ...)."""

    def pair(item: str) -> tuple[str, str]:
        name, sep, where = (part.strip() for part in item.partition("="))
        if not sep or not where:
            raise argparse.ArgumentTypeError(
                f"{item!r} is not MODEL=FILE or MODEL={PRETRAINED}, e.g. deit_small_patch16_224=ckpt.safetensors"
            )
        return _model(name), where

    return _comma_list(value, pair, "no MODEL=FILE given, e.g. deit_small_patch16_224=ckpt.safetensors")

def _batch(raw: str) -> int:
    n = int(raw) if raw.isdigit() else 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"batch size {raw!r} is not a positive integer, e.g. 1,8,64")
    return n

def parse_batch_sizes(value: str) -> tuple[int, ...]:
    return _comma_list(value, _batch, "no batch size given, e.g. 1,8,64")

def number(kind: type[T], minimum: float, what: str) -> Callable[[str], T]:
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


def parse_confidence(value: str) -> float:
    """0.95 or 95%: a confidence level strictly between 0 and 1."""
    text = value.strip()
    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        v = -1.0
    if not 0.5 <= v < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a confidence level such as 0.95 or 95%")
    return v


def parse_delays(value: str) -> tuple[tuple[str, float], ...]:
    """`fp8=2%,vit_large:int8=0.01` -> (("fp8", 0.02), ("vit_large_patch16_224:int8", 0.01)): a share of the own
    time of each precision's engines, or of one model's only (a nightly matrix's +1% on one of its rows)."""

    def pair(item: str) -> tuple[str, float]:
        name, sep, rel = item.partition("=")
        model, colon, precision = name.strip().lower().rpartition(":")
        model = (canonical_model_name(model) or "") if colon else ""
        try:
            share = parse_threshold(rel) if sep else -1.0
        except argparse.ArgumentTypeError:
            share = -1.0
        if not 0 < share < 1 or not precision or (colon and not model):
            raise argparse.ArgumentTypeError(f"{item!r} is not [MODEL:]PRECISION=REL with REL between 0 and 1, "
                                             "e.g. fp8=2% or vit_large:fp8=1%")  # fmt: skip
        return f"{model}:{precision}" if colon else precision, share

    return _comma_list(value, pair, "no PRECISION=REL given, e.g. fp8=2%")


def parse_shard(value: str) -> tuple[int, int]:
    """`2/4` -> (2, 4): the second of four shards."""
    k, sep, n = value.strip().partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"{value!r} is not K/N with 1 <= K <= N, e.g. 1/2")
    return int(k), int(n)
