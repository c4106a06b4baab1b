"""The example workflows parse, and every pytest-vitperf option and `vitperf` subcommand they use exists.
(actionlint is not run here: its Python wheel builds by downloading the binary from GitHub, which this project's CI
cannot reach.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_vitperf.cli import build_parser
from pytest_vitperf.options.table import FLAGS, OPTIONS

yaml = pytest.importorskip("yaml")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "github-actions"
WORKFLOWS = {
    "nightly-tensorrt-upgrade.yml": ["compare", "compare"],
    "nightly-ab.yml": ["ab"],
    "nightly-shards.yml": ["merge"],
}


def run_lines(name: str) -> str:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    if name == "nightly-tensorrt-upgrade.yml":
        assert set(doc["jobs"]) == {"measure", "gate"} and doc["jobs"]["gate"]["needs"] == "measure"
    return "\n".join(step.get("run", "") for job in doc["jobs"].values() for step in job["steps"])


@pytest.mark.parametrize("name", WORKFLOWS)
def test_every_vitperf_option_in_the_workflow_exists(name: str) -> None:
    known = {o.flag for o in OPTIONS} | {flag for flag, _ in FLAGS} | {"--gpu-bench"}
    used = set(re.findall(r"--vitperf-[a-z-]+|--gpu-bench", run_lines(name)))
    assert used and used <= known, used - known


@pytest.mark.parametrize("name", WORKFLOWS)
def test_every_vitperf_command_in_the_workflow_parses(name: str) -> None:
    lines = run_lines(name).replace("\\\n", " ").splitlines()  # shell continuations joined
    commands = [line.split(">")[0].split() for line in lines if re.match(r"\s*(\.venv[\w-]*/bin/)?vitperf ", line)]
    assert [c[1] for c in commands] == WORKFLOWS[name]
    for c in commands:
        args = [a.strip('"').replace("$old", "10.16.0").replace("$new", "11.4.0") for a in c[1:]]
        parsed = build_parser().parse_args(args)
        assert parsed.command in ("ab", "merge") or parsed.fail_on_regression or "--format" in args
