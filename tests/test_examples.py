"""The example workflows: every pytest-vitperf option and `vitperf` command they use exists and parses, and the gate
steps act on each of `vitperf ab`'s exit codes as docs/gate-an-upgrade.md says, run by bash against a stand-in
`vitperf` that exits with each code. (.ci/run lints them with zizmor and GitHub's workflow schema.)"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from pytest_vitperf.cli import build_parser
from pytest_vitperf.options.table import FLAGS, OPTIONS

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "github-actions"
WORKFLOWS = {
    "gate-torch-upgrade.yml": ["ab", "ab"],
    "gate-tensorrt-upgrade.yml": ["ab", "ab"],
    "nightly-shards.yml": ["merge"],
}
GATES = ("gate-torch-upgrade.yml", "gate-tensorrt-upgrade.yml")


def _doc(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def run_lines(name: str) -> str:
    doc = _doc(name)
    return "\n".join(step.get("run", "") for job in doc["jobs"].values() for step in job["steps"])


def test_every_example_is_named_here() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.yml")) == sorted(WORKFLOWS)


@pytest.mark.parametrize("name", WORKFLOWS)
def test_every_vitperf_option_in_the_workflow_exists(name: str) -> None:
    known = {o.flag for o in OPTIONS} | {flag for flag, _ in FLAGS} | {"--gpu-bench"}
    text = run_lines(name) + " " + " ".join(str(v) for v in (_doc(name).get("env") or {}).values())
    used = set(re.findall(r"--vitperf-[a-z-]+|--gpu-bench", text))
    assert used and used <= known, used - known


@pytest.mark.parametrize("name", WORKFLOWS)
def test_every_vitperf_command_in_the_workflow_parses(name: str) -> None:
    env = {k: str(v) for k, v in (_doc(name).get("env") or {}).items()}
    lines = run_lines(name).replace("\\\n", " ").splitlines()  # shell continuations joined
    commands = []
    for line in lines:
        words = shlex.split(os.path.expandvars(line.split(">")[0]), comments=True) if "vitperf" in line else []
        if words and Path(words[0]).name == "vitperf":
            commands.append(words[1:])
    assert [c[0] for c in commands] == WORKFLOWS[name]
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        for c in commands:
            args = [os.path.expandvars(a) for a in c]
            parsed = build_parser().parse_args(args)
            assert parsed.command in ("ab", "merge")
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize("name", GATES)
def test_a_gate_prepares_in_one_job_and_resumes_its_rounds_in_the_next_on_one_runner(name: str) -> None:
    jobs = _doc(name)["jobs"]
    assert set(jobs) == {"prepare", "gate"} and jobs["gate"]["needs"] == "prepare"
    assert jobs["prepare"]["runs-on"] == jobs["gate"]["runs-on"]  # one runner: one persistent work folder
    for job in jobs.values():  # one key, so that what the prepare signed stays trusted
        assert job["env"]["VITPERF_CACHE_KEY"] == "${{ secrets.VITPERF_CACHE_KEY }}"
    text = run_lines(name)
    assert "--prepare-only" in text and "--resume --budget-s" in text and '--work-dir "$WORK/ab"' in text


STANDIN = """#!/usr/bin/env bash
# A stand-in for vitperf: what it was asked, a report, and the exit code it is told.
echo "$@" > "$STANDIN_ARGS"
echo "### vitperf ab (stand-in)" > ab.md
exit "$STANDIN_EXIT"
"""


@pytest.mark.parametrize("name", GATES)
@pytest.mark.parametrize(("code", "step_exit", "said"), [
    (0, 0, "every row SAME or FASTER: the candidate passes"),
    (1, 1, "::error::a row is SLOWER with the candidate"),
    (2, 2, "::error::no verdict: a side failed"),
    (3, 3, "::error::a row is still UNKNOWN once the budget was spent"),
    (130, 130, "::error::interrupted (exit 130)"),
])  # fmt: skip
def test_the_gate_step_acts_on_each_exit_code(name: str, code: int, step_exit: int, said: str, tmp_path: Path) -> None:
    """The rounds' step, run by bash -e as GitHub runs it, against a stand-in vitperf: only 0 passes, and the report
    reaches the job's summary whatever the code."""
    step = next(s for s in _doc(name)["jobs"]["gate"]["steps"] if s.get("id") == "ab")
    work = tmp_path / "work"
    standin = work / "venv-current" / "bin" / "vitperf"
    standin.parent.mkdir(parents=True)
    standin.write_text(STANDIN)
    standin.chmod(0o755)
    summary, args = tmp_path / "summary.md", tmp_path / "args.txt"
    env = {**os.environ, **{k: str(v) for k, v in _doc(name)["env"].items()}, "WORK": str(work),
           "GITHUB_STEP_SUMMARY": str(summary), "STANDIN_EXIT": str(code), "STANDIN_ARGS": str(args)}  # fmt: skip
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == step_exit, done.stdout + done.stderr
    assert said in done.stdout
    assert summary.read_text() == "### vitperf ab (stand-in)\n"
    asked = args.read_text().split()
    assert asked[:1] == ["ab"] and "--resume" in asked and "--markdown" in asked
    assert asked[asked.index("--") + 1] == "suites/test_vit_latency.py"  # the suite's arguments, split by the shell
