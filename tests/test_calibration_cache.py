"""Calibrations kept in the cache folder: restored bit for bit, without Model Optimizer's calibration passes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from pytest_vitperf.core.errors import VitperfError
from pytest_vitperf.core.precision import get_precision
from pytest_vitperf.engines.models.zoo import build_model
from pytest_vitperf.engines.quant.recipes import apply

X = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(5))


@pytest.fixture(scope="module")
def tiny() -> torch.nn.Module:
    return build_model("vit_tiny").eval()


def _out(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(X)


def _no_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    import modelopt.torch.quantization as mtq

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("calibrated again instead of restoring")

    monkeypatch.setattr(mtq, "quantize", refuse)


@pytest.mark.parametrize("name", ["fp8", "int8-smoothquant", "fp8-attn", "fp8-sparse24"])
def test_a_restored_calibration_is_the_calibrated_model(
    tiny: torch.nn.Module, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    recipe = get_precision(name).recipe
    calibrated = _out(apply(recipe, copy.deepcopy(tiny), cache_dir=tmp_path))
    (entry,) = (tmp_path / "calibration").glob("*.pt")
    _no_calibration(monkeypatch)
    assert torch.equal(_out(apply(recipe, copy.deepcopy(tiny), cache_dir=tmp_path)), calibrated)
    assert list((tmp_path / "calibration").glob("*.pt")) == [entry]


def test_a_truncated_entry_is_calibrated_again_and_rewritten(tiny: torch.nn.Module, tmp_path: Path) -> None:
    recipe = get_precision("int8").recipe
    calibrated = _out(apply(recipe, copy.deepcopy(tiny), cache_dir=tmp_path))
    (entry,) = (tmp_path / "calibration").glob("*.pt")
    whole = entry.read_bytes()
    entry.write_bytes(whole[: len(whole) // 3])  # an interrupted write
    assert torch.equal(_out(apply(recipe, copy.deepcopy(tiny), cache_dir=tmp_path)), calibrated)
    assert entry.read_bytes() == whole


def test_other_weights_or_recipes_get_their_own_entry(tiny: torch.nn.Module, tmp_path: Path) -> None:
    apply(get_precision("fp8").recipe, copy.deepcopy(tiny), cache_dir=tmp_path)
    apply(get_precision("int8").recipe, copy.deepcopy(tiny), cache_dir=tmp_path)
    apply(get_precision("fp8").recipe, build_model("vit_tiny", seed=3), cache_dir=tmp_path)
    assert len(list((tmp_path / "calibration").glob("*.pt"))) == 3


def test_an_entry_that_does_not_fit_says_how_to_remove_it(tiny: torch.nn.Module, tmp_path: Path) -> None:
    apply(get_precision("fp8-attn").recipe, copy.deepcopy(tiny), cache_dir=tmp_path)
    (attn,) = (tmp_path / "calibration").glob("*.pt")
    apply(get_precision("fp8").recipe, copy.deepcopy(tiny), cache_dir=tmp_path)
    (fp8,) = set((tmp_path / "calibration").glob("*.pt")) - {attn}
    fp8.write_bytes(attn.read_bytes())  # another recipe's state under this key
    with pytest.raises(VitperfError, match=r"does not fit this model .*; remove it to calibrate again: rm "):
        apply(get_precision("fp8").recipe, copy.deepcopy(tiny), cache_dir=tmp_path)


def test_model_optimizer_builds_its_extensions_in_the_cache_folder(
    tiny: torch.nn.Module, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its CUDA extensions are built (about a minute each) where TORCH_EXTENSIONS_DIR says when quantize first runs:
    under the cache folder while a recipe is applied, the environment as it was afterwards."""
    import os

    import modelopt.torch.quantization as mtq

    seen = []
    real = mtq.quantize

    def record(*args: object, **kwargs: object) -> object:
        seen.append(os.environ.get("TORCH_EXTENSIONS_DIR"))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(mtq, "quantize", record)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", "/elsewhere")
    apply(get_precision("fp8").recipe, copy.deepcopy(tiny), cache_dir=tmp_path)
    apply(get_precision("int8").recipe, copy.deepcopy(tiny))
    assert seen == [str(tmp_path / "torch_extensions"), "/elsewhere"]
    assert os.environ["TORCH_EXTENSIONS_DIR"] == "/elsewhere"


def test_a_bmm_attention_calibration_restores_whatever_ran_before_it_in_the_process(tmp_path: Path) -> None:
    """fp8-attn's registration of the bmm attention with Model Optimizer is process-wide. A calibration of a
    bmm-attention model (vit_digits) saved by a process that never ran fp8-attn must restore in one that did, and
    the other way round: every quantize and restore registers it first."""
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from pytest_vitperf.engines.models.zoo import build_model; "
        "from pytest_vitperf.core.precision import get_precision\n"
        "from pytest_vitperf.engines.quant.recipes import apply, register_quant_attention\n"
        "if sys.argv[2] == 'fp8-attn first': register_quant_attention()\n"
        "apply(get_precision('int8').recipe, build_model('vit_digits'), cache_dir=Path(sys.argv[1]))\n"
        "print(len(list((Path(sys.argv[1]) / 'calibration').iterdir())))"
    )
    for order in ("plain", "fp8-attn first", "plain"):
        out = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path), order],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parents[1],
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip().splitlines()[-1] == "1"  # one entry, written once and restored after
