"""Bad input gets one line and loses nothing (docs/bad-input.md): every path option is checked as the plugin
configures, before any model is built (exit 4, no traceback, in seconds); and nothing the project reads is
unpickled beyond tensors and plain containers, so a planted pickle in a cache folder or a weights file runs
nothing."""

from __future__ import annotations

import copy
import fnmatch
import io
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

from pytest_vitperf.core.precision import get_precision
from pytest_vitperf.engines.models.zoo import build_model
from pytest_vitperf.engines.quant.recipes import apply
from pytest_vitperf.options.checks import IMAGE_SUFFIXES

REPO = Path(__file__).resolve().parents[1]


class Payload:
    """What a hostile pickle does when unpickled by the full unpickler: create a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, ...]]:
        return (Path.touch, (str(self.marker),))  # type: ignore[return-value]


def _planted(path: Path, marker: Path) -> None:
    """A torch.save file whose pickle would call Path.touch(marker), proven to do so by the full unpickler."""
    buf = io.BytesIO()
    torch.save({"modelopt_state": Payload(marker), "tensors": {}}, buf)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
    torch.load(io.BytesIO(buf.getvalue()), weights_only=False)  # the payload works ...
    assert marker.exists()
    marker.unlink()  # ... and is armed again


def test_a_planted_pickle_in_the_calibration_cache_runs_nothing_and_is_replaced(tmp_path: Path) -> None:
    tiny = build_model("test_vit").eval()
    recipe = get_precision("int8").recipe
    apply(recipe, copy.deepcopy(tiny), cache_dir=tmp_path)
    (entry,) = (tmp_path / "calibration").glob("*.pt")
    whole = entry.read_bytes()
    marker = tmp_path / "pwned"
    _planted(entry, marker)
    apply(recipe, copy.deepcopy(tiny), cache_dir=tmp_path)  # calibrates again
    assert not marker.exists()
    assert entry.read_bytes() == whole  # the real calibration, written over the planted file


def test_a_planted_pickle_as_weights_runs_nothing_and_is_one_line(tmp_path: Path) -> None:
    weights, marker = tmp_path / "ckpt.pth", tmp_path / "pwned"
    _planted(weights, marker)
    with pytest.raises(Exception, match="Weights only load failed"):
        build_model("test_vit", weights=weights)
    assert not marker.exists()


def _usage_error(tmp_path: Path, *args: str) -> str:
    """Run pytest as a user would, collecting the real suites: exit 4 within 5 s, one line, no traceback."""
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "--gpu-bench", "--co", "-q", "-p", "no:cacheprovider",
                           str(REPO / "suites"), *args], cwd=tmp_path, capture_output=True, text=True,
                          check=False, timeout=120)  # fmt: skip
    took = time.monotonic() - start
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: ") and "Traceback" not in done.stdout, done.stderr
    # 5 s for the check on a quiet machine; the interpreter and pytest's own start-up come on top of it here
    assert took < 30, took
    return lines[0].removeprefix("ERROR: ")


@pytest.mark.parametrize(
    ("make", "option", "message"),
    [
        (None, "--vitperf-weights=vit_tiny_patch16_224={}/nonexistent.safetensors", "*nonexistent.safetensors: "
         "does not exist"),
        ("random.safetensors", "--vitperf-weights=vit_tiny_patch16_224={}/random.safetensors",
         "*random.safetensors: is not a safetensors file (*)"),
        ("random.pth", "--vitperf-weights=vit_tiny_patch16_224={}/random.pth",
         "*random.pth: is neither .safetensors nor a torch.save file (a zip archive); save the state dict with either"),
        ("a-file", "--vitperf-cache-dir={}/a-file/cache", "--vitperf-cache-dir */a-file/cache: */a-file is not a "
         "folder; give a folder that can be written"),
        (None, "--vitperf-floors={}/missing.json", "--vitperf-floors */missing.json: cannot be read (*); fix it "
         "(format in docs/floors.md) or name another"),
        ("floors.json", "--vitperf-floors={}/floors.json", "--vitperf-floors */floors.json: is not valid JSON: *"),
        ("a-file", "--vitperf-baseline-dir={}/a-file", "--vitperf-baseline-dir */a-file: is not a folder; give the "
         "baselines folder, e.g. baselines/"),
        ("a-file", "--vitperf-history={}/a-file/h", "--vitperf-history */a-file/h: */a-file is not a folder; *"),
        ("a-file", "--vitperf-report={}/a-file", "--vitperf-report */a-file: */a-file is not a folder; *"),
        ("a-file", "--vitperf-export=bencher={}/a-file/x.json", "--vitperf-export bencher=*/a-file/x.json: */a-file "
         "is not a folder; *"),
        (None, "--vitperf-wait-for={}/nowhere/turn", "--vitperf-wait-for */nowhere/turn: its folder */nowhere does "
         "not exist; give a file in one that does"),
        (None, "--vitperf-accuracy-data={}/nowhere", "--vitperf-accuracy-data */nowhere: is not a folder; *"),
    ],
)  # fmt: skip
def test_each_bad_path_is_one_line_before_anything_is_built(
    tmp_path: Path, make: str | None, option: str, message: str
) -> None:
    if make is not None:  # random bytes after a fixed start: a first byte 0x80 (1 in 256) reads as an old pickle's
        junk = b"junk" + os.urandom(60)
        (tmp_path / make).write_bytes(junk if make.startswith("random") else b'{"schema": 1, "floors": [')
    line = _usage_error(tmp_path, option.format(tmp_path))
    assert fnmatch.fnmatch(line, message), line


def test_the_image_suffixes_are_torchvisions() -> None:
    from torchvision.datasets.folder import IMG_EXTENSIONS

    assert set(IMAGE_SUFFIXES) == set(IMG_EXTENSIONS)


def test_a_torch_save_archive_passes_the_header_check(tmp_path: Path) -> None:
    from pytest_vitperf.engines.models.zoo import weights_problem

    torch.save({"w": torch.zeros(2)}, tmp_path / "ok.pth")
    assert zipfile.is_zipfile(tmp_path / "ok.pth") and weights_problem(tmp_path / "ok.pth") is None
    assert weights_problem(tmp_path) == "is a folder, not a weights file"
