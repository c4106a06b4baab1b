"""The example workflow parses, and every pytest-vitperf option and `vitperf` subcommand it uses exists.
(actionlint is not run here: its Python wheel builds by downloading the binary from GitHub, which this project's CI
cannot reach.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_vitperf.cli import build_parser
from pytest_vitperf.options import FLAGS, OPTIONS

yaml = pytest.importorskip("yaml")
WORKFLOW = Path(__file__).resolve().parents[1] / "examples" / "github-actions" / "nightly-tensorrt-upgrade.yml"


def run_lines() -> str:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert set(doc["jobs"]) == {"measure", "gate"} and doc["jobs"]["gate"]["needs"] == "measure"
    return "\n".join(step.get("run", "") for job in doc["jobs"].values() for step in job["steps"])


def test_every_vitperf_option_in_the_workflow_exists() -> None:
    known = {o.flag for o in OPTIONS} | {flag for flag, _ in FLAGS} | {"--gpu-bench"}
    used = set(re.findall(r"--vitperf-[a-z-]+|--gpu-bench", run_lines()))
    assert used and used <= known, used - known


def test_every_vitperf_command_in_the_workflow_parses() -> None:
    lines = run_lines().replace("\\\n", " ").splitlines()  # shell continuations joined
    commands = [line.split(">")[0].split() for line in lines if line.strip().startswith("vitperf ")]
    assert [c[1] for c in commands] == ["compare", "compare"]
    for c in commands:
        args = [a.strip('"').replace("$old", "10.16.0").replace("$new", "11.4.0") for a in c[1:]]
        assert build_parser().parse_args(args).fail_on_regression or "--format" in args
