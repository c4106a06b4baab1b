from __future__ import annotations

from pathlib import Path

import pytest

from pytest_vitperf.cli import main


def test_capabilities_prints_the_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capabilities"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["precision", "GPU", "needs", "backends"]
    nvfp4 = next(line for line in out if line.startswith("nvfp4"))
    assert "Blackwell sm_100/sm_103/sm_110/sm_120/sm_121" in nvfp4 and "tensorrt, tensorrt-rtx" in nvfp4
    # Each backend and the record of it timing engines on a GPU, or "never".
    assert next(line for line in out if line.startswith("tensorrt ")).split() == ["tensorrt", "never"]
    assert next(line for line in out if line.startswith("torch ")).split()[1].startswith("docs/measurements/")


def test_env_prints_the_header_and_why_a_backend_cannot_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--backend", "tensorrt"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("vitperf: CPU ") and "backend tensorrt" in out
    assert "backend tensorrt cannot run here: tensorrt is not installed" in out
    assert "backend: tensorrt has never timed an engine on a GPU in this project's records" in out
    assert main(["env"]) == 0
    assert "backend: auto took torch, the first backend here that this project has timed engines with on a GPU" in (
        capsys.readouterr().out)


def test_env_says_what_a_run_here_would_skip_and_a_dependency_not_installed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before a run: the precisions it would skip here, with the skip's reason, and the project's own dependencies
    that are missing (an environment made by hand: without lief, Model Optimizer's ONNX export fails)."""
    import importlib.metadata

    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "skips here: nvfp4 needs an NVIDIA GPU with NVFP4 block-scaled tensor cores" in out  # a CPU, here
    assert "skips here: fp32" not in out and "not installed:" not in out
    version = importlib.metadata.version

    def without_lief(name: str) -> str:
        if name == "lief":
            raise importlib.metadata.PackageNotFoundError(name)
        return version(name)

    monkeypatch.setattr(importlib.metadata, "version", without_lief)
    assert main(["env"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith("not installed: lief, which pytest-vitperf depends on") and line.endswith("pip install -e .")
    from pytest_vitperf.cli.device import missing_dependencies

    assert missing_dependencies("no-such-distribution") == []  # a checkout that was never installed


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_show_of_a_missing_folder_says_so_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nonexistent"
    assert main(["show", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"{missing} does not exist" in err and "--vitperf-update-baselines" in err
    assert not missing.exists()  # looking never creates it


def test_show_of_an_empty_folder_says_so_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert f"no baselines under {tmp_path}" in captured.err and captured.out == ""
