"""Every file the tool reads, fuzzed: random bytes, a real file truncated at any length, valid JSON of the wrong
shape, and a real file with one value replaced by NaN, Inf, a huge number or a wrong type. Each reader either reads
the file or raises its one error, one line that names the file, and leaves the file as it was; the commands turn
that error into exit 2 (docs/bad-input.md). The `ci` hypothesis profile runs these in CI; `nightly` runs 5000
examples per format: pytest tests/test_fuzz_files.py --hypothesis-profile=nightly."""

from __future__ import annotations

import argparse
import copy
import io
import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_vitperf.ab.folder import RUN_FILE, begin
from pytest_vitperf.ab.turns import SideFailed
from pytest_vitperf.cli import main
from pytest_vitperf.cli.floors import _key, _merge
from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.core.files import FileError
from pytest_vitperf.measure.measurement import read_benchmark_json
from pytest_vitperf.store.baselines import read_file as read_baselines
from pytest_vitperf.store.history import SCHEMA as HISTORY_SCHEMA
from pytest_vitperf.store.history import _read as read_history
from pytest_vitperf.verdicts.floors import FloorsFile

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
BASELINE = next((REPO / "baselines").glob("tensorrt/10.14.1/*/*.json"))
BENCHMARK = DATA / "h100-vit_base-rounds-benchmark.json"
HISTORY = json.dumps({"schema": HISTORY_SCHEMA, "backend": "torch", "backend_version": "2.11.0", "gpu": "h100",
                      "model": "vit_base_patch16_224", "runs": [{"time": "2026-11-27T00:00:00",
                                                                 "entries": {"fp16/b1": 0.62}}]}).encode()  # fmt: skip
AB_ARGS = {"a": ".venv", "b": "cand", "pytest_args": ["suites/"], "reuse_compiles": False}

ODD = [math.nan, math.inf, -math.inf, 1e308, 10**400, -1, 0, "x", None, [], {}, True]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))] or [path]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))] or [path]
    return [path]


def _replaced(doc: Any, where: tuple[Any, ...], new: Any) -> Any:
    out = copy.deepcopy(doc)
    if not where:
        return new
    node = out
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = new
    return out


def mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    """Bad versions of a good file `seed` (JSON)."""
    doc = json.loads(seed)
    leaves = _leaves(doc)
    one_value = st.tuples(st.sampled_from(leaves), st.sampled_from(ODD)).map(
        lambda t: json.dumps(_replaced(doc, t[0], t[1])).encode()
    )
    return st.one_of(
        st.binary(max_size=512),
        st.integers(0, len(seed)).map(lambda n: seed[:n]),
        JSON.map(lambda v: json.dumps(v).encode()),
        one_value,
    )


def _check(tmp: Path, name: str, data: bytes, read: Callable[[Path], object], error: type[Exception]) -> None:
    """`read` reads the file or raises `error`, one line naming it; the file is unchanged either way."""
    path = tmp / name
    path.write_bytes(data)
    try:
        read(path)
    except error as exc:
        text = str(exc)
        assert str(path) in text and "\n" not in text, text
    assert path.read_bytes() == data


FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(data=mutations(BASELINE.read_bytes()))
def test_baseline_files(tmp_path: Path, data: bytes) -> None:
    _check(tmp_path, "vit.json", data, read_baselines, FileError)


@FUZZ
@given(data=mutations((REPO / "suites" / "floors.json").read_bytes()))
def test_floors_files(tmp_path: Path, data: bytes) -> None:
    _check(tmp_path, "floors.json", data, FloorsFile.load, FileError)


@FUZZ
@given(data=mutations((REPO / "suites" / "floors.json").read_bytes()))
def test_a_floors_merge_refuses_what_the_reader_refuses_and_keeps_the_rest(tmp_path: Path, data: bytes) -> None:
    """`vitperf floors suggest --out` into a bad file: the reader's error, the file unchanged; into a file the reader
    takes: the entries it does not replace as they were, then the new one."""
    path = tmp_path / "floors.json"
    path.write_bytes(data)
    entry = {"gpu": "NVIDIA H200", "backend": "torch", "version": "2.11.*", "model": "vit_base_patch16_224",
             "batch": 64, "precision": "fp8-fused", "min_speedup": 1.246, "source": "3 runs"}  # fmt: skip
    try:
        FloorsFile.load(path)
    except FileError:
        with pytest.raises(FileError):
            _merge(path, [entry])
        assert path.read_bytes() == data
        return
    _merge(path, [entry])
    kept = [e for e in json.loads(data)["floors"] if _key(e) != _key(entry)]
    assert json.dumps(json.loads(path.read_text())["floors"]) == json.dumps([*kept, entry])


@FUZZ
@given(data=mutations(BENCHMARK.read_bytes()))
def test_benchmark_json(tmp_path: Path, data: bytes) -> None:
    def read(path: Path) -> None:
        for m in read_benchmark_json(path):
            assert all(math.isfinite(s) and s >= 0 for s in m.samples_ms), m.samples_ms

    _check(tmp_path, "run.json", data, read, FileError)


@FUZZ
@given(data=mutations(HISTORY))
def test_history_files(tmp_path: Path, data: bytes) -> None:
    _check(tmp_path, "vit.json", data, read_history, FileError)


@FUZZ
@given(data=mutations(json.dumps({**AB_ARGS, "looks": 1}).encode()))
def test_ab_run_files(tmp_path: Path, data: bytes) -> None:
    """--resume reads the work folder's ab-run.json: it resumes that run, or refuses in one line."""
    args = argparse.Namespace(**AB_ARGS, resume=True, rounds=4, work_dir=tmp_path, budget_s=0)

    def read(path: Path) -> None:
        begin(path.parent, args)  # resumes (its recorded blocks are judged again as they were), or raises

    _check(tmp_path, RUN_FILE, data, read, SideFailed)


def _torch_save(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


WEIGHTS = _torch_save({"w": torch.ones(3), "b": torch.zeros(2, dtype=torch.float16)})


def _torch_mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes, truncations, and a torch.save archive with one stored member's bytes changed."""

    def flip(at: int, byte: int) -> bytes:
        return seed[:at] + bytes([byte]) + seed[at + 1 :]

    return st.one_of(
        st.binary(max_size=512),
        st.integers(0, len(seed)).map(lambda n: seed[:n]),
        st.tuples(st.integers(0, len(seed) - 1), st.integers(0, 255)).map(lambda t: flip(*t)),
        st.sampled_from([_torch_save(v) for v in ([1, 2], "x", None, {"w": [1.0]}, {"state_dict": 3})]),
    )


@FUZZ
@given(data=_torch_mutations(WEIGHTS), suffix=st.sampled_from([".pth", ".safetensors"]))
def test_weights_files(tmp_path: Path, data: bytes, suffix: str) -> None:
    from pytest_vitperf.engines.models.zoo import _load_state_dict

    _check(tmp_path, f"ckpt{suffix}", data, _load_state_dict, ValueError)


def test_a_weights_archive_whose_end_record_claims_several_disks_is_one_line() -> None:
    """Found by test_weights_files: zipfile.is_zipfile raises BadZipFile, not False, for an end record that claims a
    multi-disk archive (one byte of it changed)."""
    from pytest_vitperf.engines.models.zoo import weights_problem

    at = len(WEIGHTS) - 22 - 20 + 4  # the ZIP64 end-of-archive locator's disk number
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ckpt.pth"
        path.write_bytes(WEIGHTS[:at] + bytes([2]) + WEIGHTS[at + 1 :])
        assert weights_problem(path) == "is a damaged zip archive (zipfiles that span multiple disks are not supported)"


@pytest.fixture(scope="module")
def calibrated() -> tuple[torch.nn.Module, bytes, Any]:
    """timm's test ViT and a real int8 calibration-cache entry of it."""
    import tempfile

    from pytest_vitperf.core.precision import get_precision
    from pytest_vitperf.engines.models.zoo import build_model
    from pytest_vitperf.engines.quant.recipes import apply

    model = build_model("test_vit").eval()
    recipe = get_precision("int8").recipe
    with tempfile.TemporaryDirectory() as d:
        apply(recipe, copy.deepcopy(model), cache_dir=Path(d))
        (entry,) = (Path(d) / "calibration").glob("*.pt")
        return model, entry.read_bytes(), recipe


@FUZZ
@given(data=st.data())
def test_calibration_cache_entries(tmp_path: Path, calibrated: tuple[torch.nn.Module, bytes, Any], data: Any) -> None:
    """A damaged entry is calibrated again (restore gives None) or refused in one line that names it."""
    from pytest_vitperf.engines.quant.recipes import CalibrationCache

    model, entry, recipe = calibrated
    raw = data.draw(_torch_mutations(entry))
    cache = CalibrationCache(tmp_path, recipe, model, [torch.zeros(1, 3, 160, 160)])
    cache.path.write_bytes(raw)
    try:
        cache.restore(copy.deepcopy(model))
    except VitperfError as exc:
        assert str(cache.path) in str(exc) and "\n" not in str(exc)
    assert cache.path.read_bytes() == raw


def test_the_commands_turn_a_reader_error_into_exit_2_and_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "run.json"
    bad.write_bytes(BENCHMARK.read_bytes()[:1000])
    for args in (["floors", "suggest", str(bad)], ["report", str(bad), "--out", str(tmp_path / "r")]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and str(bad) in err and err.startswith(f"vitperf {args[0]}: ")
