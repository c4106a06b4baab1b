"""`vitperf ab` names every test that failed or was skipped on either side, beside its rows: a row that is missing
says why, and a test that fails on B only (B broke it) fails the gate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_vitperf.ab.report import failed_on_b_only, not_passed_in, not_passed_lines

TESTS = """
import pytest

def test_needs_blackwell():
    pytest.skip("nvfp4 needs a Blackwell GPU (sm_100 or sm_120)")

def test_accuracy():
    assert False, "deit3_small fp16: output cosine 0.99901 vs fp32 is below fp16's bound 0.9999\\nmore detail"

@pytest.fixture
def broken():
    raise RuntimeError("the engine could not be built")

def test_built(broken):
    pass

def test_timed(benchmark):
    benchmark(lambda: None)
"""


def test_each_process_records_the_tests_that_did_not_pass_and_the_report_names_them(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_side=TESTS)
    out = pytester.path / "run.json"
    result = pytester.runpytest("--gpu-bench", f"--benchmark-json={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, skipped=1, errors=1)
    recorded = json.loads(out.read_text())["machine_info"]["vitperf"]["results"]["not_passed"]
    assert recorded == {
        "test_side.py::test_needs_blackwell": {"outcome": "skipped",
                                               "line": "nvfp4 needs a Blackwell GPU (sm_100 or sm_120)"},
        "test_side.py::test_accuracy": {"outcome": "failed", "line": "AssertionError: deit3_small fp16: output "
                                        "cosine 0.99901 vs fp32 is below fp16's bound 0.9999"},
        "test_side.py::test_built": {"outcome": "error in setup",
                                     "line": "RuntimeError: the engine could not be built"},
    }  # fmt: skip
    # B's rounds failed the accuracy test, A's passed it; both skipped the NVFP4 test.
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(out, work / "prepare-B.json")
    shutil.copy(out, work / "round1-B.json")
    a = json.loads(out.read_text())
    del a["machine_info"]["vitperf"]["results"]["not_passed"]["test_side.py::test_accuracy"]
    del a["machine_info"]["vitperf"]["results"]["not_passed"]["test_side.py::test_built"]
    (work / "prepare-A.json").write_text(json.dumps(a))
    (work / "round1-A.log").write_text("not a JSON: left alone")
    found = not_passed_in(work)
    assert set(found["A"]) == {"test_side.py::test_needs_blackwell"} and len(found["B"]) == 3
    lines = not_passed_lines(found)
    assert lines[1].startswith("Tests that did not pass, so their rows are missing")
    assert lines[2:] == [
        "- failed on B only: test_accuracy: AssertionError: deit3_small fp16: output cosine 0.99901 vs fp32 is below "
        "fp16's bound 0.9999",
        "- error in setup on B only: test_built: RuntimeError: the engine could not be built",
        "- skipped on both sides: test_needs_blackwell: nvfp4 needs a Blackwell GPU (sm_100 or sm_120)",
    ]
    assert failed_on_b_only(found) and not failed_on_b_only({"A": found["B"], "B": found["A"]})


def test_a_run_where_every_test_passed_adds_nothing() -> None:
    assert not_passed_lines({"A": {}, "B": {}}) == [] and not failed_on_b_only({"A": {}, "B": {}})
