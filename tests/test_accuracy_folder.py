"""The accuracy suite on a user's folder of labelled images (--vitperf-accuracy-data): the digits' test split written
as PNG files in one sub-folder per class, prepared by timm's data config, judged end to end on the CPU; and one
clear line for each folder or model that cannot serve."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pytest_vitperf.engines.models import digits, folder
from tests.test_digits import accuracy_suite


def digits_folder(root: Path, per_class: int | None = None, classes: int = 10) -> Path:
    """The digits' test split as 8-bit 32x32 PNGs, `root/<class>/<n>.png`."""
    split = digits.load_split()
    pixels = (split.x_test[:, 0] * split.std + split.mean).clamp(0, 1).mul(255).round().to(torch.uint8).numpy()
    counts: dict[int, int] = {}
    for image, label in zip(pixels, split.y_test.tolist(), strict=True):
        if label >= classes or counts.get(label, 0) == per_class:
            continue
        counts[label] = counts.get(label, 0) + 1
        (root / str(label)).mkdir(parents=True, exist_ok=True)
        Image.fromarray(image, mode="L").save(root / str(label) / f"{counts[label]}.png")
    return root


FOLDER_RUN = ("--vitperf-models=vit_digits", "--vitperf-batch-sizes=8")


def test_a_folder_of_digits_is_judged_like_the_split_it_came_from(
    pytester: pytest.Pytester, shared_cache: Path, tmp_path: Path
) -> None:
    data = digits_folder(tmp_path / "digits")
    result = accuracy_suite(
        pytester, shared_cache, *FOLDER_RUN, f"--vitperf-accuracy-data={data}", "--vitperf-precisions=fp32,int8"
    )
    # fp32's engine, int8 by fake quant (its engine needs a GPU); fp32 has no recipe to fake
    result.assert_outcomes(passed=2, skipped=2)
    # 360 images, 90 of them (a quarter of a small folder) set apart to calibrate int8; the engines run batches of 8
    result.stdout.fnmatch_lines(
        [
            "*vitperf accuracy (digits folder, vit_digits_patch4_32, against its FP32 model)*",
            "fp32 * torch engine (cpu) * 270 * 9?.??% * +0.00 *",
            "int8 * Model Optimizer fake quant (cpu) * 270 *",
        ]
    )


@pytest.mark.parametrize(
    ("damage", "line"),
    [
        ("classes", "*accuracy data */digits has 3 class folders, and vit_digits_patch4_32's head has 10 classes; give"
                    " one sub-folder per class of the model, named to sort in the head's order*"),
        ("unreadable", "*/digits/1/broken.png is not an image that can be read (*); remove or replace it, then run "
                       "again: pytest --gpu-bench suites/test_accuracy.py*"),
    ],
)  # fmt: skip
def test_a_folder_that_cannot_serve_fails_the_accuracy_tests_in_one_line(
    pytester: pytest.Pytester, shared_cache: Path, tmp_path: Path, damage: str, line: str
) -> None:
    data = tmp_path / "digits"
    if damage == "classes":
        digits_folder(data, per_class=5, classes=3)
    elif damage == "unreadable":
        digits_folder(data, per_class=5)
        (data / "1" / "broken.png").write_bytes(b"not a png")
    result = accuracy_suite(
        pytester, shared_cache, *FOLDER_RUN, f"--vitperf-accuracy-data={data}", "--vitperf-precisions=fp32"
    )
    result.assert_outcomes(errors=2)  # both of fp32's tests, from the one task
    result.stdout.fnmatch_lines([line])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(
    ("damage", "line"),
    [
        ("missing", "*/nowhere: is not a folder; give one with a sub-folder of images per class"),
        ("empty", "*/digits: has no class sub-folders; give one with a sub-folder of images per class"),
        ("imageless", "*/digits: class folder '7' holds no images (.jpg, *); add some or remove it"),
        ("random", "*/digits: the accuracy suite judges the run's first model, vit_tiny_patch16_224, which has random "
                   "weights; give it trained ones: --vitperf-weights vit_tiny_patch16_224=FILE (or "
                   "vit_tiny_patch16_224=pretrained)"),
    ],
)  # fmt: skip
def test_a_folder_or_model_that_cannot_serve_is_a_usage_error_before_anything_is_built(
    pytester: pytest.Pytester, shared_cache: Path, tmp_path: Path, damage: str, line: str
) -> None:
    """Checked as the plugin configures (the folder) or once the tests are collected (the model's weights): one
    line, exit 4, in seconds; before, the suite's other tests ran first (539 s on 2 cores)."""
    data = tmp_path / "digits"
    if damage == "empty":
        data.mkdir()
    elif damage == "imageless":
        digits_folder(data, per_class=2)
        for f in (data / "7").iterdir():
            f.rename(f.with_suffix(".txt"))
    elif damage == "random":
        digits_folder(data, per_class=2)
    arg = tmp_path / "nowhere" if damage == "missing" else data
    model = "--vitperf-models=vit_tiny" if damage == "random" else FOLDER_RUN[0]
    result = accuracy_suite(pytester, shared_cache, model, f"--vitperf-accuracy-data={arg}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --vitperf-accuracy-data {line}"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_the_ini_names_the_folder_relative_to_itself(
    pytester: pytest.Pytester, shared_cache: Path
) -> None:
    digits_folder(pytester.path / "data" / "digits", per_class=4)
    pytester.makeini("[pytest]\nvitperf_accuracy_data = data/digits\n")
    result = accuracy_suite(pytester, shared_cache, *FOLDER_RUN, "--vitperf-precisions=fp32", "-k", "engine")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*vitperf accuracy (digits folder, vit_digits_patch4_32, *", "fp32 * 30 *"])


def test_batches_of_a_static_shape_pad_the_last_and_drop_what_was_padded() -> None:
    calls: list[int] = []

    def run(x: torch.Tensor) -> torch.Tensor:
        calls.append(len(x))
        assert len(x) == 4
        return x.sum(dim=(1, 2, 3))[:, None]

    x = torch.arange(10 * 3, dtype=torch.float32).reshape(10, 1, 3, 1)
    out = folder.in_batches(run, x, 4)
    assert calls == [4, 4, 4] and torch.equal(out, x.sum(dim=(1, 2, 3))[:, None])


@pytest.mark.parametrize("n", [1, 7, 100, 512, 2000])
def test_the_calibration_sample_is_set_apart_from_the_judged_images(n: int) -> None:
    held, judged = folder._split(n)
    assert not set(held) & set(judged) and sorted(held + judged) == list(range(n))
    assert len(held) == min(folder.CALIBRATION_IMAGES, n // 4)
    assert held == folder._split(n)[0]  # seeded: every process sets the same images apart
    assert np.all(np.diff(judged) > 0)


def test_accuracy_floors_of_the_floors_file_pass_fail_or_stay_inconclusive(
    pytester: pytest.Pytester, shared_cache: Path, tmp_path: Path
) -> None:
    data = digits_folder(tmp_path / "digits")
    floors = tmp_path / "floors.json"
    floors.write_text(json.dumps({"schema": 1, "floors": [], "accuracy": [
        {"precision": "fp32", "min_agreement": 0.95, "source": "FP32 against itself"},
        {"precision": "int8", "via": "fake-quant", "max_drop": 0.1, "source": "a bar 270 images cannot decide"},
        {"precision": "nvfp4", "via": "fake-quant", "min_agreement": 0.999, "source": "too strict for 4 bits"},
    ]}))  # fmt: skip
    result = accuracy_suite(
        pytester, shared_cache, *FOLDER_RUN, f"--vitperf-accuracy-data={data}", f"--vitperf-floors={floors}",
        "--vitperf-precisions=fp32,int8,nvfp4",
    )  # fmt: skip
    # fp32's engine passes; int8's fake quant is inconclusive (it warns: --vitperf-inconclusive's default); nvfp4's
    # fails; their engines need a GPU, and fp32 has no recipe to fake
    result.assert_outcomes(passed=2, failed=1, skipped=3)
    result.stdout.fnmatch_lines(
        [
            # four floors the run can meet (fp32's holds for both ways in) share 95%: each is judged at 98.75%
            "*nvfp4 via fake-quant on the digits folder, vit_digits_patch4_32 (270 images): accuracy floor FAIL at "
            "98.75% confidence: agreement 98.52% [[]*[]], at least 99.90% (too strict for 4 bits); check the recipe "
            "and its calibration, or the floor, then run again: pytest --gpu-bench *",
            "*InconclusiveFloor: int8 via fake-quant on the digits folder*: accuracy floor inconclusive at 98.75% "
            "confidence: drop * [[]*[]] points, at most 0.1 *more images would decide it*",  # the drop moves with torch
            "*vitperf accuracy (digits folder, *",
            "precision * via * floor * ms * vs fp16",
            "fp32 * torch engine (cpu) * pass *",
            "int8 * Model Optimizer fake quant (cpu) * inconclusive *",
            "nvfp4 * Model Optimizer fake quant (cpu) * FAIL *",
        ]
    )
