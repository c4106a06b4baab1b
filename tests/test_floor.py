from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_vitperf.verdicts.floors import FloorsFile, FloorsFileError

REPO = Path(__file__).resolve().parents[1]
KEY = {
    "gpu": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    "backend": "tensorrt",
    "model": "vit_base_patch16_224",
    "batch": 64,
}


def write(tmp_path: Path, data: object) -> Path:
    p = tmp_path / "floors.json"
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def test_suite_floors_are_kept_per_tensorrt_version() -> None:
    floors = FloorsFile.load(REPO / "suites" / "floors.json")
    f14 = floors.find(**KEY, version="10.14.1", precision="nvfp4")
    f16 = floors.find(**KEY, version="10.16.0", precision="nvfp4")
    assert f14 is not None and f16 is not None
    # Seed 001: 1.60x on 10.14.1 but 1.53x on 10.16.0, because FP16 got faster.
    assert f14.min_speedup <= 1.60 and f16.min_speedup <= 1.53 < f14.min_speedup
    assert floors.find(**KEY, version="10.11.0", precision="nvfp4") is None
    assert floors.find(**{**KEY, "gpu": "NVIDIA H100 80GB HBM3"}, version="10.14.1", precision="nvfp4") is None


def test_most_specific_floor_wins(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        {
            "schema": 1,
            "floors": [
                {"gpu": "*", "backend": "torch", "precision": "bf16", "min_speedup": 0.5},
                {
                    "gpu": "NVIDIA H100*",
                    "backend": "torch",
                    "precision": "bf16",
                    "min_speedup": 0.9,
                    "batch": 64,
                },
            ],
        },
    )
    floors = FloorsFile.load(p)
    args = {"backend": "torch", "version": "2.11", "model": "vit_base_patch16_224", "precision": "bf16"}
    assert floors.find(gpu="NVIDIA H100 80GB HBM3", batch=64, **args).min_speedup == 0.9  # type: ignore[union-attr]
    assert floors.find(gpu="NVIDIA H100 80GB HBM3", batch=1, **args).min_speedup == 0.5  # type: ignore[union-attr]
    assert floors.find(gpu="nvidia h100 pcie", batch=64, **args).min_speedup == 0.9  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "is not valid JSON"),
        ('{"schema": 1, "floors": [', "is not valid JSON"),
        ("[]", "top level must be an object"),
        ({"schema": 2, "floors": []}, "schema is 2"),
        ({"schema": 1}, "'floors' must be a list"),
        ({"schema": 1, "floors": [{"gpu": "*"}]}, "floors[0] lacks backend, precision, min_speedup"),
        (
            {"schema": 1, "floors": [{"gpu": "*", "backend": "torch", "precision": "fp6", "min_speedup": 1}]},
            "precision 'fp6' is not one of",
        ),
        (
            {
                "schema": 1,
                "floors": [{"gpu": "*", "backend": "torch", "precision": "fp16", "min_speedup": 1}],
            },
            "precision 'fp16' is not one of",
        ),
        (
            {
                "schema": 1,
                "floors": [{"gpu": "*", "backend": "torch", "precision": "bf16", "min_speedup": "1.2"}],
            },
            "min_speedup must be a number > 0",
        ),
        (
            {
                "schema": 1,
                "floors": [{"gpu": "*", "backend": "torch", "precision": "bf16", "min_speedup": 1, "batch": 0}],
            },
            "batch must be a positive integer",
        ),
        (
            {
                "schema": 1,
                "floors": [{"gpu": "*", "backend": "torch", "precision": "bf16", "min_speedup": 1, "x": 1}],
            },
            "unknown field(s) x",
        ),
        (
            {
                "schema": 1,
                "floors": [{"gpu": "*", "backend": "torch", "precision": "bf16", "min_speedup": 1}] * 2,
            },
            "floors[1] repeats floors[0]",
        ),
    ],
)
def test_malformed_files_name_the_file_and_the_problem(tmp_path: Path, content: object, message: str) -> None:
    p = write(tmp_path, content)
    before = p.read_bytes()
    with pytest.raises(FloorsFileError) as info:
        FloorsFile.load(p)
    assert str(p) in str(info.value) and message in str(info.value)
    assert p.read_bytes() == before  # a failed read never rewrites the file


def test_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(FloorsFileError, match="cannot be read"):
        FloorsFile.load(tmp_path / "nope.json")


def test_trtexec_is_held_to_tensorrt_s_floors(tmp_path: Path) -> None:
    """trtexec times TensorRT's engines: the floors written for the tensorrt backend (the seed reports' trtexec
    numbers) apply to it, and a floor for another backend does not."""
    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.session import VitperfSession

    floors = tmp_path / "floors.json"
    floors.write_text(json.dumps({"schema": 1, "floors": [
        {"gpu": "*", "backend": "tensorrt", "precision": "fp8", "min_speedup": 1.2, "source": "trtexec by hand"},
        {"gpu": "*", "backend": "torch", "precision": "int8", "min_speedup": 0.9}]}))  # fmt: skip
    s = VitperfSession(Settings(backend="trtexec", floors=floors))
    found = s.floor_for(tmp_path, "vit_base_patch16_224", "fp8", 64)
    assert found is not None and found.min_speedup == 1.2
    assert s.floor_for(tmp_path, "vit_base_patch16_224", "int8", 64) is None
