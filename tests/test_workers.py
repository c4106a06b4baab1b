"""Several xdist workers: a family (model, batch) stays on one worker, one worker per device, one reference per
family, and one merged summary, baselines table and pytest-benchmark JSON. Two workers on the CPU run the logic; the
GPU pinning itself can only run on a machine with two GPUs (docs/several-gpus.md)."""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_vitperf.core.precision import PRECISIONS
from pytest_vitperf.engines.models.zoo import MODEL_NAMES
from pytest_vitperf.measure.measurement import Measurement, Spec
from pytest_vitperf.report.tables import summary
from pytest_vitperf.results import export
from pytest_vitperf.store.baselines import JsonDirStorage
from pytest_vitperf.verdicts.baselines.gate import to_baseline, write
from pytest_vitperf.verdicts.rows import judge_rows
from pytest_vitperf.workers import (
    ENGINE_S,
    IMAGE_S,
    TEST_S,
    case_id,
    family_of,
    gpu_for_worker,
    pin_gpu,
    scope_of,
    too_many_workers,
    unit_costs,
    worker_index,
)  # fmt: skip
from tests.conftest import FAST

pytest.importorskip("xdist")
SHARE = "--vitperf-share-devices"


@given(st.sampled_from(MODEL_NAMES), st.integers(1, 4096), st.sampled_from(list(PRECISIONS)))
def test_a_family_is_read_back_from_the_id_the_plugin_gives(model: str, batch: int, precision: str) -> None:
    nodeid = f"suites/test_vit_latency.py::test_latency[{case_id((model, batch, precision))}]"
    assert family_of(nodeid) == f"{model}-b{batch}"
    assert family_of(f"t.py::test[via-{case_id((model, batch, precision))}-x]") == f"{model}-b{batch}"


@pytest.mark.parametrize(
    "nodeid",
    ["t.py::test_plain", "t.py::test[vit_tiny_patch16_224-fp16]", "t.py::test[fp16-b1]", "t.py::test[vit_tiny-b1]"],
)
def test_tests_without_model_and_batch_have_no_family(nodeid: str) -> None:
    assert family_of(nodeid) is None


def test_worker_k_takes_gpu_k_mod_the_visible_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert worker_index() == 3
    assert [gpu_for_worker(k, 2) for k in range(4)] == [0, 1, 0, 1]
    assert gpu_for_worker(worker_index(), 0) == 0  # a CPU: nothing to pin
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert worker_index() is None and gpu_for_worker(None, 8) == 0


def test_a_worker_sees_only_its_own_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")  # what the run was started with: two GPUs, by UUID below
    assert pin_gpu(["GPU-aa", "GPU-bb"], 3) == 1
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-bb"  # so it compiles for cuda:0, like every other worker
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert pin_gpu([], 1) == 0 and os.environ["CUDA_VISIBLE_DEVICES"] == ""  # a CPU: nothing to pin


@pytest.mark.parametrize(
    ("workers", "gpus", "share", "error"),
    [(2, 2, False, None), (1, 0, False, None), (3, 2, False, "-n 2"), (3, 2, True, None), (2, 0, False, "-n 0")],
)
def test_more_workers_than_devices_is_refused_unless_asked(workers: int, gpus: int, share: bool, error: str) -> None:
    why = too_many_workers(workers, gpus, share)
    assert (why is None) == (error is None)
    if why is not None:
        assert why.endswith(error) and SHARE in why


# -- the summary and baselines of several GPUs -------------------------------------------------------------------
def measured(precision: str, ms: float, gpu: int, name: str = "NVIDIA H200") -> Measurement:
    spec = Spec("vit_base_patch16_224", precision, 64, "torch", "2.11.0", name, 90, "cuda-event", gpu, f"GPU-{gpu}aaa")
    return Measurement(spec, (ms,) * 10)


def test_the_summary_shows_the_gpu_and_takes_ratios_on_one_gpu_only() -> None:
    ms = [measured("fp16", 6.0, 0), measured("bf16", 5.0, 0), measured("fp8", 4.0, 1)]
    lines = summary(ms, judge_rows(ms, {}))
    assert lines[0].split()[:5] == ["model", "precision", "batch", "backend", "GPU"]
    rows = {line.split()[1]: line for line in lines[2:]}
    assert "0 (GPU-0aaa)" in rows["bf16"] and "1.20x" in rows["bf16"]
    assert "1 (GPU-1aaa)" in rows["fp8"] and "no fp16 to compare" in rows["fp8"]  # its fp16 ran on the other GPU
    one_gpu = summary(ms[:2], judge_rows(ms[:2], {}))
    assert "GPU" not in one_gpu[0].split()


def test_two_gpu_models_in_one_machine_keep_their_own_baselines(tmp_path) -> None:
    store = JsonDirStorage(tmp_path)
    h100, h200 = measured("fp16", 6.5, 0, "NVIDIA H100 80GB HBM3"), measured("fp16", 6.1, 1, "NVIDIA H200")
    for m in (h100, h200):
        assert write(store, to_baseline(m, {}, {"kind": "measured"})).error is None
    paths = sorted(p.relative_to(tmp_path).parts[2] for p in tmp_path.rglob("*.json"))
    assert paths == ["nvidia-h100-80gb-hbm3", "nvidia-h200"]
    fresh = JsonDirStorage(tmp_path)
    keys = [to_baseline(m, {}, {}).key for m in (h100, h200)]
    assert [fresh.get(k).value for k in keys] == [6.5, 6.1]  # type: ignore[union-attr]
    assert fresh.get(replace(keys[0], gpu="NVIDIA H100 PCIe")) is None


# -- end to end, two workers -------------------------------------------------------------------------------------
WHERE = """
import os, pytest

@pytest.mark.gpu_bench
def test_where(vitperf_model, vitperf_batch, vitperf_precision):
    with open(f"ran-{os.environ['PYTEST_XDIST_WORKER']}.txt", "a") as f:
        f.write(f"{vitperf_model}-b{vitperf_batch}\\n")
"""


def test_each_family_runs_on_one_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_where=WHERE)
    models, batches = "--vitperf-models=vit_tiny,vit_small", "--vitperf-batch-sizes=1,2,4"
    r = pytester.runpytest("--gpu-bench", "-p", "no:cacheprovider", "-n", "2", SHARE, models, batches)
    r.assert_outcomes(passed=2 * 3 * len(PRECISIONS))
    ran = {p.stem: set(p.read_text().split()) for p in pytester.path.glob("ran-gw*.txt")}
    assert len(ran) == 2 and all(ran.values())  # both workers had work
    assert not ran["ran-gw0"] & ran["ran-gw1"]  # and no family was split between them
    assert len(ran["ran-gw0"] | ran["ran-gw1"]) == 6


def test_a_worker_that_collects_no_tests_says_what_it_was_given(pytester: pytest.Pytester) -> None:
    """xdist says only that two workers' collections differ; a worker that collected none says what it was given."""
    pytester.makepyfile(test_where=WHERE)
    pytester.makeconftest(
        """
        import os

        def pytest_collection_modifyitems(items):
            if os.environ.get("PYTEST_XDIST_WORKER") == "gw1":
                items.clear()
        """
    )
    one = ("--vitperf-models=vit_tiny", "--vitperf-batch-sizes=1", "--vitperf-precisions=fp16")
    r = pytester.runpytest_subprocess("--gpu-bench", "-p", "no:cacheprovider", "-n", "2", SHARE, *one)
    assert r.ret != pytest.ExitCode.OK
    r.stdout.fnmatch_lines(["*Different tests were collected between gw? and gw?*"])  # whichever finished first
    r.stderr.fnmatch_lines(["vitperf: xdist worker gw1 collected no tests from * (benchmarks on; GPUs "
                            "given []; CUDA_VISIBLE_DEVICES=*; collection errors 0)"])  # fmt: skip
    assert "worker gw0" not in r.stderr.str()


def test_without_vitperf_the_default_distribution_is_kept(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_where=WHERE)
    one = ("--vitperf-models=vit_tiny", "--vitperf-batch-sizes=1", "--vitperf-precisions=fp16")
    r = pytester.runpytest("-p", "no:cacheprovider", "-n", "2", "--gpu-bench", SHARE, "--dist=each", *one)
    r.assert_outcomes(passed=2)  # --dist each: every worker runs every test, as asked


def test_two_workers_on_a_cpu_are_a_usage_error(suite: pytest.Pytester) -> None:
    r = suite.runpytest(*FAST, "-n", "2")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["ERROR: 2 xdist workers on a CPU: * or measure in one process: -n 0"])
    auto = suite.runpytest(*FAST, "-n", "auto", "--vitperf-precisions=fp32")
    auto.assert_outcomes(passed=1)
    auto.stdout.fnmatch_lines(["created: 1/1 worker*"])  # one per device: the CPU


def test_one_reference_per_family_one_summary_one_json(suite: pytest.Pytester) -> None:
    r = suite.runpytest(*FAST, "-n", "2", SHARE, "--vitperf-batch-sizes=1,2", "--vitperf-precisions=fp16,bf16,fp32",
                        "--vitperf-baseline-dir=bl", "--benchmark-json=out.json")  # fmt: skip
    r.assert_outcomes(passed=6)
    out = r.stdout.str()
    table, memory = out.split("vitperf memory")  # the summary, then each engine's weights
    assert "vitperf workers (sharing the devices; each family of a model and batch on one worker)" in out
    summary_rows = re.findall(r"^test_vit +(\w+) +(\d+) +torch ", table, re.M)
    assert sorted(summary_rows) == sorted((p, b) for p in ("fp16", "bf16", "fp32") for b in ("1", "2"))
    assert sorted(re.findall(r"^test_vit +(\w+) +(\d+) +torch ", memory, re.M)) == sorted(summary_rows)
    baseline_rows = re.findall(r"^test_vit +(\w+) +(\d+) +- .*missing$", out, re.M)
    assert sorted(baseline_rows) == sorted(summary_rows)  # each once, though both workers could have measured fp16
    benchmarks = json.loads((suite.path / "out.json").read_text())["benchmarks"]
    cases = [f"test_vit-b{b}-{p}" for p in ("fp16", "bf16", "fp32") for b in (1, 2)]
    assert sorted(b["name"] for b in benchmarks) == sorted(f"test_latency[{c}]" for c in cases)
    by_worker: dict[str, set[str]] = defaultdict(set)
    for line in r.stdout.lines:
        m = re.match(r"(gw\d) on CPU: start-up torch import \+ device probe [\d.]+ s, test_vit [\d.]+ s; "
                     r"engines prepared in [\d.]+ s; measured (.*); time: \d+ s since the plugin started: .*$",
                     line)  # fmt: skip
        if m:
            by_worker[m[1]] = set(m[2].split(", "))
    assert sorted(by_worker) == ["gw0", "gw1"]
    assert by_worker["gw0"].isdisjoint(by_worker["gw1"])  # fp16 b1 and b2 each measured by one worker
    for batch in (1, 2):
        family = {f"test_vit-{p}-b{batch}" for p in ("fp16", "bf16", "fp32")}
        assert any(family <= labels for labels in by_worker.values())


def test_a_worker_that_goes_down_fails_the_run_and_says_so(suite: pytest.Pytester) -> None:
    suite.makeconftest(
        """
        def pytest_sessionfinish(session):
            out = getattr(session.config, "workeroutput", None)
            if out is not None:
                out["unsendable"] = object()  # execnet cannot send it: the worker goes down at its end
        """
    )
    # Without --max-worker-restart=0 xdist starts 8 more workers, each going down the same way (40 s more).
    r = suite.runpytest(*FAST, "-n", "2", "--max-worker-restart=0", SHARE, "--vitperf-batch-sizes=1,2",
                        "--vitperf-precisions=fp32")  # fmt: skip
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(
        ["vitperf: worker gw*: *DumpError* run it again, or in one process to see the error: pytest -n 0"]
    )


def test_a_worker_s_results_are_plain_data(tmp_path) -> None:
    from pytest_vitperf.core.settings import Settings
    from pytest_vitperf.session import VitperfSession

    class Version(str):  # as torch.__version__ is
        pass

    s = VitperfSession(Settings())
    spec = Spec("gemm-m8-n8-k8", "fp16", 1, "torch", Version("2.11.0"), "NVIDIA H200", sm=90)
    s.record(Measurement(spec, (1.0, 2.0)), "suites/test_gemm.py::test_gemm_speed[x]")
    data = export(s, "gw0")
    assert type(data["measurements"][0]["spec"]["backend_version"]) is str
    execnet = pytest.importorskip("execnet")
    assert execnet.loads(execnet.dumps(data)) == data


# -- placement by cost ------------------------------------------------------------------------------------------
def test_a_units_cost_is_its_tests_recorded_seconds_else_the_model() -> None:
    a, b = (f"s/t.py::test[vit_tiny_patch16_224-b64-{p}]" for p in ("fp16", "bf16"))
    units = {"vit_tiny_patch16_224-b64": [a, b], "suites/test_gemms.py": ["suites/test_gemms.py::t[x]"]}
    modelled = unit_costs(units, {})
    assert modelled == {"vit_tiny_patch16_224-b64": 2 * (ENGINE_S + 64 * IMAGE_S), "suites/test_gemms.py": TEST_S}
    recorded = unit_costs(units, {a: 100.0, "suites/test_gemms.py::t[x]": 0.5})  # one test of the family modelled
    assert recorded == {"vit_tiny_patch16_224-b64": 100.0 + ENGINE_S + 64 * IMAGE_S, "suites/test_gemms.py": 0.5}
    assert unit_costs({b: [b]}, {}) == {b: ENGINE_S + 64 * IMAGE_S}  # a test its own unit (built apart): its engine
    assert scope_of("suites/test_gemms.py::test_gemm[x]") == "suites/test_gemms.py"
    assert scope_of("s/t.py::C::test[vit_tiny_patch16_224-b8-fp16]") == "vit_tiny_patch16_224-b8"


def test_a_gemm_shapes_kinds_are_one_unit() -> None:
    from suites.test_gemm import CASES

    units: dict[str, set[str]] = {}
    for case in CASES:
        shape = case.values[0]
        for test in ("test_gemm_correct", "test_gemm_speed"):
            units.setdefault(scope_of(f"suites/test_gemm.py::{test}[{case.id}]"), set()).add(shape.name)
    # one unit per shape, named by it: its kinds' speedups over FP16 stay on one GPU
    assert units == {shape.name: {shape.name} for shape in {c.values[0] for c in CASES}}


SLEEPY = """
import os, time, pytest

@pytest.mark.gpu_bench
def test_where(vitperf_model, vitperf_batch, vitperf_precision):
    with open(f"ran-{os.environ.get('PYTEST_XDIST_WORKER', 'one')}.txt", "a") as f:
        f.write(f"{vitperf_model}-b{vitperf_batch}\\n")
    time.sleep(0.5 if (vitperf_model, vitperf_batch) == ("vit_small_patch16_224", 1) else 0.01)
"""


def test_workers_take_the_longest_recorded_units_first(pytester: pytest.Pytester) -> None:
    """A one-process run records each test's seconds in the cache; the next -n run deals the family that took longest
    first, where the model alone (by batch) would have dealt a batch-4 family first."""
    pytester.makepyfile(test_where=SLEEPY)
    args = ["--gpu-bench", "-p", "no:cacheprovider", "--vitperf-models=vit_tiny,vit_small",
            "--vitperf-batch-sizes=1,2,4", "--vitperf-precisions=fp16,fp32", "--vitperf-cache-dir=cache"]  # fmt: skip
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=12)
    tests = json.loads((pytester.path / "cache" / "durations.json").read_text())["tests"]
    assert len(tests) == 12 and all(s >= 0.5 for t, s in tests.items() if "vit_small_patch16_224-b1-" in t)
    r = pytester.runpytest_subprocess(*args, "-n", "2", SHARE)
    r.assert_outcomes(passed=12)
    firsts = {p.read_text().split()[0] for p in pytester.path.glob("ran-gw*.txt")}
    assert "vit_small_patch16_224-b1" in firsts, firsts
    r.stdout.fnmatch_lines(["placement: gw0 * s busy, * s idle, gw1 * s busy, * s idle, of * s; units dealt longest "
                            "first, by the durations in durations.json"])  # fmt: skip
    (pytester.path / "cache" / "durations.json").write_text("{not json")  # a damaged file: the model, then rewritten
    pytester.runpytest_subprocess(*args, "-n", "2", SHARE).assert_outcomes(passed=12)
    assert len(json.loads((pytester.path / "cache" / "durations.json").read_text())["tests"]) == 12
