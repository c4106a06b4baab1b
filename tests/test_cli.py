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


def _every_action() -> list[tuple[str, object]]:
    import argparse

    from pytest_vitperf.cli import build_parser

    out = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb, sub in action.choices.items():
                    walk(sub, f"{name} {verb}")
            elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                out.append((f"{name} {'/'.join(action.option_strings) or action.dest}", action))
    walk(build_parser(), "vitperf")
    return out


def test_every_option_of_every_command_has_help() -> None:
    actions = _every_action()
    assert len(actions) > 80
    assert [name for name, action in actions if not getattr(action, "help", None)] == []


def test_one_name_one_meaning_and_percentages_wherever_a_threshold_is_taken(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--gpu is a CUDA index (vitperf ab); a GPU model is --gpu-model; a delay is --inject-delay; every threshold,
    rate and tolerance takes 5% as it takes 0.05."""
    names = {name.split()[-1]: name for name, _ in _every_action()}
    assert "--gpu" in names and "--gpu-model" in names and "--inject-delay" in names and "--inject" not in names
    gpu = [name for name, _ in _every_action() if name.endswith(" --gpu")]
    assert gpu == ["vitperf ab --gpu"]
    from pytest_vitperf.cli import build_parser

    parser = build_parser()
    for argv, dest in ((["compare", "--from", "t/1", "--to", "t/2", "--threshold", "5%"], "threshold"),
                       (["floors", "suggest", "r.json", "--regression", "10%"], "regression"),
                       (["floors", "make", "--false-alarm", "1%"], "false_alarm"),
                       (["calibrate", "--false-alarm", "5%"], "false_alarm"),
                       (["selfcheck", "--tolerance", "2%"], "tolerance"),
                       (["ab", "--a", "x", "--b", "y", "--threshold", "0.75%", "--confidence", "95%"], "threshold")):
        value = getattr(parser.parse_args(argv), dest)
        assert value == pytest.approx(float(argv[-1].rstrip("%")) / 100 if dest != "threshold" or argv[0] != "ab"
                                      else 0.0075), argv  # fmt: skip


def test_vitperf_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from pytest_vitperf import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"vitperf (pytest-vitperf) {__version__}\n"
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert re.search(r'^version = "(.*)"$', pyproject, re.M)[1] == __version__  # type: ignore[index]


def test_vitperf_ab_help_lists_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["ab", "--help"])
    out = capsys.readouterr().out
    codes = out[out.index("exit codes:") :]
    assert [line.split()[0] for line in codes.splitlines()[1:] if line[2:3].isdigit()] == ["0", "1", "2", "3", "130"]
