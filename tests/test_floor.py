from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_vitperf.verdicts.accuracy import OutputError, TaskAccuracy
from pytest_vitperf.verdicts.floors import AccuracyFloor, FloorsFile, FloorsFileError
from pytest_vitperf.verdicts.stats import FAIL, INCONCLUSIVE, PASS

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


def _acc(images: int, fp32_right: int, lost: int, gained: int, agree: int) -> TaskAccuracy:
    return TaskAccuracy("fp8", "torch engine (cuda)", images, (fp32_right - lost + gained) / images,
                        fp32_right / images, agree / images, OutputError(1.0, 0.0, 0.0), 0.0, lost, gained)  # fmt: skip


@pytest.mark.parametrize(
    ("floor", "acc", "outcome"),
    [
        # no image changed of 360 (FP32 at 98.33%): the drop's interval is +-1.02 points, the agreement's [98.94, 100]
        (AccuracyFloor("fp8", max_drop=2.0), _acc(360, 354, 0, 0, 360), PASS),
        (AccuracyFloor("fp8", max_drop=0.5), _acc(360, 354, 0, 0, 360), INCONCLUSIVE),
        (AccuracyFloor("fp8", min_agreement=0.98), _acc(360, 354, 0, 0, 360), PASS),
        # 20 images lost: a drop of 5.56 points, whose interval lies wholly above 2
        (AccuracyFloor("fp8", max_drop=2.0), _acc(360, 354, 20, 0, 340), FAIL),
        # 300 of 360 agree: 83.3% [79.1, 86.8], wholly below 95%
        (AccuracyFloor("fp8", min_agreement=0.95), _acc(360, 354, 0, 0, 300), FAIL),
        # both stated: one FAIL fails it; else one inconclusive keeps it inconclusive
        (AccuracyFloor("fp8", max_drop=2.0, min_agreement=0.95), _acc(360, 354, 0, 0, 300), FAIL),
        (AccuracyFloor("fp8", max_drop=0.5, min_agreement=0.98), _acc(360, 354, 0, 0, 360), INCONCLUSIVE),
    ],
)
def test_accuracy_floors_are_judged_on_the_paired_intervals(
    floor: AccuracyFloor, acc: TaskAccuracy, outcome: str
) -> None:
    found, text = floor.judge(acc, 0.95)
    assert found == outcome
    if floor.max_drop is not None:
        assert f"drop {acc.drop_interval(0.95).text(signed=True)} points, at most {floor.max_drop:g}" in text
    if floor.min_agreement is not None:
        assert f"agreement {acc.agreement_interval(0.95).text()}, at least {floor.min_agreement:.2%}" in text


def test_accuracy_floors_are_read_and_the_most_specific_wins(tmp_path: Path) -> None:
    p = write(tmp_path, {"schema": 1, "floors": [], "accuracy": [
        {"precision": "fp8", "max_drop": 2},
        {"precision": "fp8", "model": "vit_base*", "via": "engine", "min_agreement": 0.97, "source": "H100 run"},
    ]})  # fmt: skip
    floors = FloorsFile.load(p)
    assert floors.find_accuracy(model="vit_base_patch16_224", precision="fp8", via="engine") == AccuracyFloor(
        "fp8", model="vit_base*", via="engine", min_agreement=0.97, source="H100 run"
    )
    assert floors.find_accuracy(model="vit_base_patch16_224", precision="fp8", via="fake-quant") == AccuracyFloor(
        "fp8", max_drop=2
    )
    assert floors.find_accuracy(model="deit_small_patch16_224", precision="int8", via="engine") is None
    assert FloorsFile.load(REPO / "suites" / "floors.json").accuracy == ()  # optional: schema 1 files stay valid


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"precision": "fp8"}, "accuracy[0] states neither max_drop (points) nor min_agreement (a share)"),
        ({"precision": "fp6", "max_drop": 1}, "accuracy[0].precision 'fp6' is not one of"),
        ({"precision": "fp8", "max_drop": 1, "gpu": "*"}, "accuracy[0] has unknown field(s) gpu"),
        ({"precision": "fp8", "max_drop": 1, "via": "trt"}, "accuracy[0]: via must be one of engine, fake-quant, *"),
        ({"precision": "fp8", "min_agreement": 97}, "accuracy[0].min_agreement must be a number in [0, 1], got 97"),
        ({"precision": "fp8", "max_drop": "1"}, "accuracy[0].max_drop must be a number in [0, 100], got '1'"),
        ("fp8", "accuracy[0] is a str, expected an object"),
        ({"precision": "fp8", "max_drop": 1, "source": 3}, "accuracy[0]: source must be a string and provenance an"),
    ],
)
def test_malformed_accuracy_floors_name_the_entry_and_the_problem(tmp_path: Path, entry: object, message: str) -> None:
    p = write(tmp_path, {"schema": 1, "floors": [], "accuracy": [entry]})
    with pytest.raises(FloorsFileError) as info:
        FloorsFile.load(p)
    assert str(p) in str(info.value) and message in str(info.value)
    with pytest.raises(FloorsFileError, match="'accuracy' must be a list"):
        FloorsFile.load(write(tmp_path, {"schema": 1, "floors": [], "accuracy": {}}))
