"""Every option: its effect end to end, its ini equivalent, and its bad-value usage error."""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import FAST

BAD = [
    ("--vitperf-backend=cuda", "unknown backend 'cuda'; valid: auto, tensorrt, tensorrt-rtx, torch"),
    (
        "--vitperf-precisions=fp16,fp6",
        "unknown precision 'fp6'; valid: fp32, fp16, bf16, int8, int8-smoothquant, fp8, fp8-attn",
    ),
    ("--vitperf-precisions=,", "no precision given"),
    ("--vitperf-batch-sizes=1,zero", "batch size 'zero' is not a positive integer"),
    ("--vitperf-batch-sizes=0", "batch size '0' is not a positive integer"),
    ("--vitperf-models=vit-huge", "'vit-huge' is not a model name: the zoo's (vit_tiny_patch16_224"),
    ("--vitperf-weights=vit_tiny", "'vit_tiny' is not MODEL=FILE or MODEL=pretrained"),
    ("--vitperf-warmup-ms=-1", "'-1' is not a number of ms >= 0"),
    ("--vitperf-duration-ms=soon", "'soon' is not a number of ms >= 0"),
    ("--vitperf-min-iterations=0", "'0' is not a whole number >= 1"),
    ("--vitperf-min-iterations=2.5", "'2.5' is not a whole number >= 1"),
    ("--vitperf-compile=fast", "'fast' is not one of: auto, off, default, deterministic, max-autotune"),
    ("--vitperf-regression-threshold=lots", "'lots' is not a relative change such as 0.05 or 5%"),
    ("--vitperf-regression-threshold=-1%", "'-1%' is not a relative change"),
    ("--vitperf-noise-threshold=quiet", "'quiet' is not a relative change"),
    ("--vitperf-max-noise=low", "'low' is not a relative change"),
    ("--vitperf-timeout-ms=-5", "'-5' is not a number of ms >= 0"),
    (
        "--vitperf-accuracy-bound=max_drop",
        "'max_drop' is not KEY=NUMBER, KEY one of max_drop, min_agreement, min_cosine",
    ),
    ("--vitperf-accuracy-bound=speed=2", "'speed=2' is not KEY=NUMBER"),
    ("--vitperf-accuracy-bound=,", "no bound given; e.g. max_drop=2,min_cosine=0.95"),
]


@pytest.mark.parametrize(("arg", "message"), BAD, ids=[b[0].split("=")[0] for b in BAD])
def test_bad_value_is_a_usage_error_listing_valid_values(pytester: pytest.Pytester, arg: str, message: str) -> None:
    result = pytester.runpytest(arg)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{arg.split('=')[0]}*: *{message}*"])


INI_BAD = [
    ("vitperf_backend", "cuda", "unknown backend 'cuda'; valid: auto, tensorrt"),
    ("vitperf_precisions", "fp6", "unknown precision 'fp6'"),
    ("vitperf_batch_sizes", "-2", "not a positive integer"),
    ("vitperf_models", "vit/huge", "'vit/huge' is not a model name"),
    ("vitperf_weights", "vit_tiny:w.pth", "is not MODEL=FILE"),
    ("vitperf_warmup_ms", "x", "not a number of ms"),
    ("vitperf_duration_ms", "-5", "not a number of ms"),
    ("vitperf_min_iterations", "0", "not a whole number"),
    ("vitperf_compile", "yes", "not one of: auto, off, default"),
    ("vitperf_cuda_graph", "maybe", "not a boolean"),
    ("vitperf_gpu_bench", "perhaps", "not a boolean"),
    ("vitperf_update_baselines", "sometimes", "not a boolean"),
    ("vitperf_strict", "2", "not a boolean"),
    ("vitperf_regression_threshold", "x", "not a relative change"),
    ("vitperf_noise_threshold", "x", "not a relative change"),
    ("vitperf_max_noise", "x", "not a relative change"),
    ("vitperf_timeout_ms", "never", "not a number of ms"),
    ("vitperf_clocks", "often", "not a boolean"),
    ("vitperf_cold", "sometimes", "not a boolean"),
    ("vitperf_accuracy_bound", "min_cosine=high", "not KEY=NUMBER"),
]


@pytest.mark.parametrize(("name", "value", "message"), INI_BAD, ids=[b[0] for b in INI_BAD])
def test_bad_ini_value_is_a_usage_error(pytester: pytest.Pytester, name: str, value: str, message: str) -> None:
    pytester.makeini(f"[pytest]\n{name} = {value}\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*ini option {name}*{message}*"])


def run_json(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict]:
    out = pytester.path / "bench.json"
    result = pytester.runpytest(*FAST, f"--benchmark-json={out}", *args)
    return result, json.loads(out.read_text())


def only(data: dict, precision: str) -> dict:
    """The benchmark entry for `precision` (the suite also measures its fp16 reference)."""
    (b,) = [b for b in data["benchmarks"] if b["params"]["precision"] == precision]
    return b


def test_precisions_batch_sizes_and_models_shape_the_parametrization(suite: pytest.Pytester) -> None:
    result = suite.runpytest(
        *FAST,
        "--vitperf-precisions=bf16,fp32",
        "--vitperf-batch-sizes=2,1",
        "--vitperf-models=test_vit",
        "-v",
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*test_latency?test_vit-b2-bf16? PASSED*",
            "*test_latency?test_vit-b2-fp32? PASSED*",
            "*test_latency?test_vit-b1-bf16? PASSED*",
            "*test_latency?test_vit-b1-fp32? PASSED*",
        ]
    )


def test_reference_precision_is_measured_first(suite: pytest.Pytester) -> None:
    result = suite.runpytest(*FAST, "--vitperf-precisions=bf16,fp16", "-v")
    lines = [line for line in result.outlines if "PASSED" in line]
    assert "fp16" in lines[0] and "bf16" in lines[1]


def test_min_iterations_and_duration_set_the_sample_count(suite: pytest.Pytester) -> None:
    """In one block per engine (--vitperf-rounds 0), as `bench` and the GEMM suite always measure."""
    _, data = run_json(suite, "--vitperf-precisions=fp32", "--vitperf-min-iterations=5", "--vitperf-rounds=0")
    b = only(data, "fp32")
    assert b["stats"]["rounds"] == 5 and len(b["stats"]["data"]) == 5
    assert b["options"]["rounds"] == {"sequential": "--vitperf-rounds 0"}
    _, data = run_json(suite, "--vitperf-precisions=fp32", "--vitperf-duration-ms=400", "--vitperf-rounds=0")
    b = only(data, "fp32")
    assert sum(b["stats"]["data"]) >= 0.3  # seconds: most of the 400 ms was sampled
    assert b["stats"]["rounds"] > 3


def test_warmup_is_recorded_with_the_measurement(suite: pytest.Pytester) -> None:
    _, data = run_json(suite, "--vitperf-precisions=fp16", "--vitperf-warmup-ms=25")
    assert only(data, "fp16")["options"]["warmup_ms"] == 25.0
    _, data = run_json(suite, "--vitperf-precisions=fp16", "--vitperf-warmup-ms=0")
    assert only(data, "fp16")["options"]["warmup_ms"] == 0.0


def test_ini_values_apply_and_command_line_wins(suite: pytest.Pytester) -> None:
    suite.makeini(
        "[pytest]\nvitperf_gpu_bench = true\nvitperf_precisions = bf16\nvitperf_min_iterations = 4\n"
        "vitperf_warmup_ms = 0\nvitperf_duration_ms = 0\nvitperf_batch_sizes = 1\nvitperf_rounds = 0\n"
    )
    out = suite.path / "bench.json"
    result = suite.runpytest(f"--benchmark-json={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)  # bf16, with its fp16 reference measured inside it
    data = json.loads(out.read_text())
    assert only(data, "bf16")["stats"]["rounds"] == 4
    assert only(data, "bf16")["options"]["warmup_ms"] == 0.0
    result = suite.runpytest(f"--benchmark-json={out}", "--vitperf-precisions=fp32", "--vitperf-min-iterations=2")
    data = json.loads(out.read_text())
    assert {b["params"]["precision"] for b in data["benchmarks"]} == {"fp32", "fp16"}
    assert only(data, "fp32")["stats"]["rounds"] == 2


def test_the_rounds_options_have_ini_twins(suite: pytest.Pytester) -> None:
    suite.makeini(
        "[pytest]\nvitperf_gpu_bench = true\nvitperf_models = test_vit\nvitperf_precisions = bf16\n"
        "vitperf_warmup_ms = 0\nvitperf_batch_sizes = 1\nvitperf_rounds = 4\nvitperf_slice_ms = 1\nvitperf_seed = 11\n"
        "vitperf_confidence = 90%\nvitperf_round_budget_s = 0\nvitperf_inconclusive = fail\n"
    )
    out = suite.path / "bench.json"
    result = suite.runpytest(f"--benchmark-json={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    bf16 = only(json.loads(out.read_text()), "bf16")
    # two builds (the default) of 4 rounds of 8 one-launch turns each, build after build
    assert bf16["stats"]["rounds"] == 2 * 4 * 8 and bf16["extra_info"]["vitperf"]["rounds"] == [8] * 8
    assert bf16["options"]["rounds"]["seed"] == 11 and bf16["options"]["rounds"]["budget_s"] == 0
    result.stdout.fnmatch_lines(["intervals: 90%, over 4 interleaved rounds per family and 2 build(s)*"])


@pytest.mark.parametrize(
    ("backend", "reason"),
    [
        ("tensorrt", "tensorrt is not installed*"),
        ("tensorrt-rtx", "the tensorrt-rtx backend needs an NVIDIA GPU to run engines; no CUDA GPU here*"),
        ("trtexec", "trtexec is not on PATH: run in an NGC TensorRT container, or add TensorRT's bin folder to PATH"),
        ("trtexec-rtx", "tensorrt_rtx is not on PATH: install TensorRT-RTX from NVIDIA's archive*"),
    ],
)
def test_backend_that_cannot_run_here_skips_with_its_reason(suite: pytest.Pytester, backend: str, reason: str) -> None:
    result = suite.runpytest(*FAST, f"--vitperf-backend={backend}", "--vitperf-precisions=fp16", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"vitperf: backend {backend} cannot run here: {reason}", f"SKIPPED*{reason}"])


def test_torch_backend_is_named_in_header_and_results(suite: pytest.Pytester) -> None:
    result, data = run_json(suite, "--vitperf-backend=torch", "--vitperf-precisions=fp32")
    result.stdout.fnmatch_lines(["vitperf: CPU * (no CUDA GPU); backend torch *"])
    assert only(data, "fp32")["extra_info"]["vitperf"]["backend"] == "torch"


def test_cuda_graph_flags_resolve_on_and_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_flag(vitperf_session):
            print("cuda_graph=%s" % vitperf_session.settings.cuda_graph)
        """
    )
    for args, expected in (
        ((), True),
        (("--no-vitperf-cuda-graph",), False),
        (("--vitperf-cuda-graph",), True),
    ):
        result = pytester.runpytest("-s", *args)
        result.stdout.fnmatch_lines([f"*cuda_graph={expected}"])
    pytester.makeini("[pytest]\nvitperf_cuda_graph = false\n")
    pytester.runpytest("-s").stdout.fnmatch_lines(["*cuda_graph=False"])
    pytester.runpytest("-s", "--vitperf-cuda-graph").stdout.fnmatch_lines(["*cuda_graph=True"])


def test_clock_flags_resolve_on_and_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_flag(vitperf_session):
            print("clocks=%s" % vitperf_session.settings.clocks)
        """
    )
    for args, expected in (((), True), (("--no-vitperf-clocks",), False), (("--vitperf-clocks",), True)):
        pytester.runpytest("-s", *args).stdout.fnmatch_lines([f"*clocks={expected}"])
    pytester.makeini("[pytest]\nvitperf_clocks = false\n")
    pytester.runpytest("-s").stdout.fnmatch_lines(["*clocks=False"])


def test_gemm_hot_resolves_from_the_command_line_and_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_flag(vitperf_session):
            print("gemm_hot=%s" % vitperf_session.settings.gemm_hot)
        """
    )
    pytester.runpytest("-s").stdout.fnmatch_lines(["*gemm_hot=False"])
    pytester.runpytest("-s", "--vitperf-gemm-hot").stdout.fnmatch_lines(["*gemm_hot=True"])
    pytester.makeini("[pytest]\nvitperf_gemm_hot = true\n")
    pytester.runpytest("-s").stdout.fnmatch_lines(["*gemm_hot=True"])


def test_noise_threshold_decides_what_the_summary_calls_noisy(suite: pytest.Pytester) -> None:
    """In one block per engine: in rounds, the spread between rounds makes the interval instead."""
    args = (*FAST, "--vitperf-precisions=fp32", "--vitperf-rounds=0")
    every = suite.runpytest(*args, "--vitperf-noise-threshold=0")
    every.stdout.fnmatch_lines(
        ["*no floor; sequential; noisy: CoV > 0.0%*", "warning: 2 measurement(s) with CoV above 0.0%*"]
    )
    none = suite.runpytest(*args, "--vitperf-noise-threshold=900%")
    assert "noisy:" not in none.stdout.str() and "CoV above" not in none.stdout.str()


def test_max_noise_is_recorded_and_a_missed_target_is_noted(suite: pytest.Pytester) -> None:
    # 8 samples at least: below that the half-width is unknown, and a loaded machine took only 7 in the 300 ms
    args = ("--vitperf-precisions=fp32", "--vitperf-max-noise=0", "--vitperf-timeout-ms=300", "--vitperf-rounds=0",
            "--vitperf-min-iterations=8")  # fmt: skip
    result = suite.runpytest(*FAST, *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["note: test_vit fp32 b1: the median's 95% confidence half-width is *"])


def test_cold_evicts_the_cache_outside_the_timed_region_and_says_so(suite: pytest.Pytester) -> None:
    result, data = run_json(suite, "--vitperf-precisions=fp32", "--vitperf-cold", "--vitperf-min-iterations=5")
    result.assert_outcomes(passed=1)
    assert only(data, "fp32")["options"]["cold"] is True
    result.stdout.fnmatch_lines(
        ["model * backend  mode * median ms*", "test_vit  fp32 * eager, cold cache *"]
    )
    _, data = run_json(suite, "--vitperf-precisions=fp32", "--vitperf-min-iterations=5")
    assert "cold" not in only(data, "fp32")["options"]


def test_compile_uses_the_cache_dir_for_inductor(suite: pytest.Pytester) -> None:
    cache = suite.path / "cache"
    result, data = run_json(
        suite,
        "--vitperf-precisions=fp32",
        "--vitperf-compile=default",
        f"--vitperf-cache-dir={cache}",
        "-p",
        "no:xdist",
    )
    result.assert_outcomes(passed=1)
    assert only(data, "fp32")["options"]["compile"] == "default"
    assert any((cache / "inductor").iterdir())


def test_compile_auto_is_eager_on_a_cpu_and_the_summary_says_how_it_ran(suite: pytest.Pytester) -> None:
    result, data = run_json(suite, "--vitperf-precisions=fp32")
    assert only(data, "fp32")["options"]["compile"] == "off"  # auto resolves to eager without a GPU
    result.stdout.fnmatch_lines(["model * backend  mode * median ms*", "test_vit  fp32 * torch    eager *"])


def test_wait_for_runs_no_test_before_its_file_exists(suite: pytest.Pytester) -> None:
    """--vitperf-wait-for (vitperf ab's turns): the run collects, then waits for the file; the time line says how long.
    The file appears 4 s in, from another thread of this process: with 2 s, the run's own start once took 1 s of
    them, and it waited only 1 s."""
    import threading

    from pytest_vitperf.ahead import wait_for_turn

    turn = suite.path / "turn"
    timer = threading.Timer(4.0, turn.touch)
    timer.start()
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32", f"--vitperf-wait-for={turn.name}")
    timer.join()
    result.assert_outcomes(passed=1)
    (line,) = [x for x in result.outlines if x.startswith("time: ") and "before its turn (imports, then waiting)" in x]
    assert float(line.split(" s before its turn")[0].rsplit(", ", 1)[1]) >= 1.5
    assert "before it was ready" not in line and (suite.path / "turn.ready").stat().st_mtime < turn.stat().st_mtime
    with pytest.raises(TimeoutError, match="run without --vitperf-wait-for to start at once"):
        wait_for_turn(suite.path / "never", limit_s=0.2)
    # a turn that came 30 s before the process was ready: the device waited for it, which its time line says
    came = suite.path / "came"
    came.touch()
    os.utime(came, (came.stat().st_mtime - 30, came.stat().st_mtime - 30))
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32", f"--vitperf-wait-for={came.name}")
    result.assert_outcomes(passed=1)
    (line,) = [x for x in result.outlines if x.startswith("time: ") and "before it was ready" in x]
    assert 30 <= int(line.split("(its turn came ")[1].split(" s")[0]) < 60




def test_a_model_built_ahead_of_the_turn_is_built_again_once_a_collected_conftest_adds_a_hook(
    pytester: pytest.Pytester,
) -> None:
    """A waiting process builds its models before its turn, before collection. A conftest.py that only collection
    loads (a folder pytest does not load ahead) and hooks the model built is still applied: the model is built again."""
    from tests.conftest import SUITE

    (pytester.path / "deep").mkdir()
    (pytester.path / "deep" / "test_vit_latency.py").write_text(SUITE.read_text())
    (pytester.path / "deep" / "conftest.py").write_text(
        "from pathlib import Path\n\ndef pytest_vitperf_model_built(config, name, model):\n"
        "    Path('hooked').write_text(name)\n"
    )
    (pytester.path / "turn").touch()
    result = pytester.runpytest(*FAST, "--vitperf-precisions=fp32", "--vitperf-wait-for=turn", ".")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "hooked").read_text() == "test_vit"

DONE_WATCH = """
from pathlib import Path

def pytest_runtest_teardown(item):
    Path("seen-in-tests").write_text(str(Path("done").exists()))
    if Path("gone").is_dir():  # after the options were checked: the write itself fails
        Path("gone").rmdir()

def pytest_sessionfinish(session):  # pytest-benchmark writes its JSON here, after this
    Path("seen-at-finish").write_text(str(Path("done").exists()))
"""


def test_turn_done_is_touched_once_the_last_test_has_run_before_the_results(suite: pytest.Pytester) -> None:
    """--vitperf-turn-done (vitperf ab hands the GPU on then): not there while the tests run, there before the run
    writes its results, and the time line says how long the turn was. A file that cannot be written fails the run."""
    suite.makeconftest(DONE_WATCH)
    result, data = run_json(suite, "--vitperf-precisions=fp32", "--vitperf-turn-done=done")
    result.assert_outcomes(passed=1)
    assert (suite.path / "seen-in-tests").read_text() == "False"
    assert (suite.path / "seen-at-finish").read_text() == "True"
    assert data["machine_info"]["vitperf"]["process"]["turn_s"] > 0
    assert any(x.startswith("time: ") and "; its turn on the device " in x for x in result.outlines)
    (suite.path / "gone").mkdir()
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32", "--vitperf-turn-done=gone/done")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["NOT WRITTEN *gone/done: No such file or directory (the turn was handed on at*"])
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32", "--vitperf-turn-done=nowhere/done")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--vitperf-turn-done */nowhere/done: its folder * does not exist*"])


AT_EXIT = """
import atexit
from pathlib import Path
atexit.register(lambda: Path("exit-handlers-ran").touch())
"""


@pytest.mark.parametrize("turn_done", [True, False], ids=["turn-done", "plain"])
def test_a_process_that_hands_its_turn_on_ends_as_soon_as_pytest_returns(
    suite: pytest.Pytester, turn_done: bool
) -> None:
    """With --vitperf-turn-done the process ends with pytest's exit status once pytest returns, its results written
    and its output flushed, but the exit handlers of what it imported not run (vitperf ab waits for the prepares'
    end and the last round's: 4.7-5.4 s each on an H200). A plain run runs them."""
    suite.makeconftest(AT_EXIT)
    suite.makepyfile(test_fails="def test_fails():\n    assert False\n")
    out = suite.path / "out.json"
    handing_on = ["--vitperf-turn-done=done"] if turn_done else []
    result = suite.runpytest_subprocess(*FAST, "--vitperf-precisions=fp32", f"--benchmark-json={out}", *handing_on)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1)  # the last line, flushed
    assert json.loads(out.read_text())["benchmarks"]
    assert (suite.path / "exit-handlers-ran").exists() != turn_done


HOST = """
import atexit
from pathlib import Path
atexit.register(lambda: Path("host-handlers-ran").touch())

def test_a_run_inside(pytester):
    pytester.makepyfile(test_inner="def test_inner():\\n    assert False\\n")
    result = pytester.runpytest("--gpu-bench", "--vitperf-turn-done=done", "-p", "no:cacheprovider")
    assert result.ret == 1 and (pytester.path / "done").exists()
"""


def test_a_run_inside_another_that_hands_its_turn_on_does_not_end_its_host(pytester: pytest.Pytester) -> None:
    """pytester's in-process run, as this project's own tests make them: it fails, and its host still ends with its
    own status, its exit handlers run. (A handler kept by the inner run once ended this project's CI with exit 1,
    every test passed.)"""
    pytester.makepyfile(test_host=HOST, test_after="def test_after():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "pytester", "-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    assert result.ret == 0 and (pytester.path / "host-handlers-ran").exists()


WATCH = """
import sys, threading, time
from pathlib import Path

def _hashed():  # Triton's hash, which a first ready engine's load would compute, is cached (where Triton is)
    cache = sys.modules.get("triton.runtime.cache")
    return cache is None or cache.triton_key.cache_info().currsize > 0

def _watch(turn, names):
    end = time.monotonic() + 90
    files = ("probed", "built")
    done = lambda: ([m for m in names if m not in sys.modules] + [f for f in files if not Path(f).exists()]
                    + ([] if _hashed() else ["hashed"]))
    while done():
        if time.monotonic() > end:
            Path("late").write_text(" ".join(done()))
            break
        time.sleep(0.05)
    turn.touch()

def pytest_vitperf_model_built(config, name, model):  # the FP32 model: built before the turn, on the CPU
    Path("built").touch()

import cpuinfo  # pytest-benchmark's CPU probe: it says when it ran
_probe = cpuinfo.get_cpu_info
def _said():
    Path("probed").touch()
    return _probe()
cpuinfo.get_cpu_info = _said

def pytest_configure(config):
    threading.Thread(target=_watch, args=(Path("turn").absolute(), NAMES), daemon=True).start()
"""


def test_a_waiting_process_imports_what_its_turn_would_first(suite: pytest.Pytester) -> None:
    """In a fresh process, the turn comes only once every module of AHEAD_OF_TURN is loaded, pytest-benchmark has
    probed the CPU and the run's model is built (its conftest's watcher writes the turn file then, or after 90 s with
    what is missing): so all three happened before the wait, and so did Triton's hash, which a first load computes.
    The probe's facts still reach the JSON."""
    from pytest_vitperf.ahead import AHEAD_OF_TURN

    suite.makeconftest(f"NAMES = {AHEAD_OF_TURN!r}\n{WATCH}")
    out = suite.path / "out.json"
    result = suite.runpytest_subprocess(*FAST, "--vitperf-precisions=fp32", "--vitperf-wait-for=turn",
                                        f"--benchmark-json={out}")  # fmt: skip
    result.assert_outcomes(passed=1)
    assert not (suite.path / "late").exists(), (suite.path / "late").read_text()
    assert json.loads(out.read_text())["machine_info"]["cpu"]["arch"]


def _documented_default(default: str) -> str | None:
    """The value an option's documented default stands for on a CPU (where it names a GPU's and a CPU's), or None
    where it names no value (none, all, drawn per run)."""
    import re

    both = re.match(r"(\S+) on a GPU, (\S+) on a CPU", default)
    value = both.group(2) if both else default
    return None if " " in value or value in ("none", "all", "drawn", "random", "off") else value


def test_passing_a_documented_default_is_the_same_as_omitting_it(pytester: pytest.Pytester) -> None:
    """Each option whose help names a default value: a run given that value resolves to what a run without the
    option does, its device-dependent defaults (warm-up, models, batches) as the CPU session takes them."""
    from dataclasses import asdict

    from pytest_vitperf.options.resolve import settings_from_config
    from pytest_vitperf.options.table import OPTIONS
    from pytest_vitperf.session import VitperfSession

    def effective(*args: str) -> dict:
        session = VitperfSession(settings_from_config(pytester.parseconfig("--gpu-bench", *args)), None)
        return {**asdict(session.settings), "warmup_ms": session.round_plan().warmup_ms, "models": session.models,
                "batch_sizes": session.batch_sizes, "rootdir": None}  # fmt: skip

    omitted = effective()
    checked = []
    for opt in OPTIONS:
        value = _documented_default(opt.default)
        if value is None:
            continue
        checked.append(opt.flag)
        assert effective(f"{opt.flag}={value}") == omitted, f"{opt.flag}={value} is not the same as omitting it"
    assert len(checked) >= 20, checked


def test_the_options_only_vitperf_ab_gives_its_processes_are_not_in_pytest_help(pytester: pytest.Pytester) -> None:
    from pytest_vitperf.options.table import CHILD_ONLY

    text = pytester.runpytest("--help").stdout.str()
    assert "--vitperf-rounds" in text and "--vitperf-shard" in text
    assert [flag for flag in CHILD_ONLY if flag in text] == []
    assert "vitperf_relay" not in text and len(CHILD_ONLY) == 5


@pytest.mark.parametrize("given", [(), ("--vitperf-warmup-ms=4000",), ("--vitperf-warmup-ms=9000",)])
def test_a_gpu_warm_up_ends_once_the_clock_is_settled_whether_its_length_was_given_or_not(
    pytester: pytest.Pytester, given: tuple[str, ...]
) -> None:
    """--vitperf-warmup-ms is the longest warm-up: where NVML reads the SM clock, the early end applies as it does
    by default, so passing the documented 4000 changes nothing; without NVML the whole warm-up runs."""
    from pytest_vitperf.fixtures.family import _settled
    from pytest_vitperf.measure.env import Device
    from pytest_vitperf.options.resolve import settings_from_config
    from pytest_vitperf.session import VitperfSession

    session = VitperfSession(settings_from_config(pytester.parseconfig("--gpu-bench", *given)), None)
    session.__dict__.update(device=Device("NVIDIA H100 80GB HBM3", sm=90), clock_facts={"max_sm_mhz": 1980},
                            clock_probe=object())  # read only once the warm-up asks it  # fmt: skip
    assert _settled(session) is not None
    session.__dict__.update(clock_probe=None)
    assert _settled(session) is None
