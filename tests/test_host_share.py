"""No process assumes it owns the host: each takes its share of the cores by the GPUs it sees (workers.thread_budget),
or --vitperf-threads; the BLAS pools it has loaded are held to it, and what it starts inherits the budget through
OpenMP's, MKL's and OpenBLAS's variables."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pytest_vitperf.workers import THREAD_VARIABLES, thread_budget, use_threads
from tests.conftest import FAST


@given(st.integers(1, 8).flatmap(lambda host: st.tuples(st.just(host), st.integers(host, 512),
                                                        st.lists(st.integers(1, host), min_size=1))))  # fmt: skip
def test_jobs_that_split_a_hosts_gpus_never_take_more_than_its_cores(case: tuple[int, int, list[int]]) -> None:
    """Jobs side by side, each with CUDA_VISIBLE_DEVICES set to its own GPUs: together at most the host's cores."""
    host, cores, sizes = case
    jobs, left = [], host
    for size in sizes:  # the GPUs each job sees, dealt until the host has none left
        if left == 0:
            break
        jobs.append(min(size, left))
        left -= jobs[-1]
    budgets = [thread_budget(cores, gpus, host) for gpus in jobs]
    assert all(b >= 1 for b in budgets) and sum(budgets) <= cores
    assert all(b >= cores * g // host - 1 for b, g in zip(budgets, jobs, strict=True))  # and no less than its share


@given(st.integers(1, 512), st.integers(1, 16))
def test_workers_on_one_device_split_its_share(cores: int, sharing: int) -> None:
    assert thread_budget(cores, 0, None, sharing) == max(1, cores // sharing)  # a CPU: xdist workers share it
    assert sharing * thread_budget(cores, 1, 2, sharing) <= max(cores // 2, sharing)


def test_a_process_that_sees_every_gpu_or_knows_no_host_count_takes_every_core() -> None:
    assert thread_budget(16, 2, 2) == 16 and thread_budget(16, 1, None) == 16 and thread_budget(16, 1, 2) == 8


def test_use_threads_holds_torch_and_children_and_puts_them_back(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._inductor.config as inductor

    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    before = (torch.get_num_threads(), inductor.compile_threads, blas_threads())
    restore = use_threads(1)
    assert torch.get_num_threads() == 1 and inductor.compile_threads == 1
    assert all(os.environ[v] == "1" for v in THREAD_VARIABLES)
    assert set(blas_threads().values()) == {1}  # numpy's BLAS, loaded before: it reads no variable again
    restore()
    assert (torch.get_num_threads(), inductor.compile_threads, blas_threads()) == before
    assert os.environ["OMP_NUM_THREADS"] == "7" and "MKL_NUM_THREADS" not in os.environ


def test_a_budget_reaches_inductor_without_importing_it() -> None:
    """A process that never compiles does not import Inductor's config to set its compile workers: the budget waits
    in its variable, which Inductor reads when a compile imports it."""
    script = (
        "import sys; from pytest_vitperf.workers import use_threads; use_threads(2); "
        "print('torch._inductor.config' in sys.modules); import torch._inductor.config as c; print(c.compile_threads)"
    )
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_COMPILE_THREADS"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["False", "2"]


def blas_threads() -> dict[str, int]:
    import numpy  # noqa: F401  (its BLAS is loaded with it)
    from threadpoolctl import threadpool_info

    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


THREADS_SEEN = """
import os
import torch

def test_threads(vitperf_session):
    assert torch.get_num_threads() == 1, torch.get_num_threads()
    assert os.environ["OMP_NUM_THREADS"] == "1" and vitperf_session.threads == 1
"""


def test_vitperf_threads_holds_the_run_and_the_time_line_says_so(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_threads=THREADS_SEEN)
    before = torch.get_num_threads()
    result = suite.runpytest_inprocess(*FAST, "--vitperf-precisions=fp32", "--vitperf-threads=1")
    result.assert_outcomes(passed=2)
    (line,) = [x for x in result.outlines if x.startswith("time: ")]
    assert line.endswith("; 1 CPU thread(s) (--vitperf-threads to change)")
    assert torch.get_num_threads() == before  # put back as the run ended: this process goes on


def test_a_run_on_this_cpu_takes_every_core_it_may_use(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess(*FAST, "--vitperf-precisions=fp32")
    result.assert_outcomes(passed=1)
    cores = len(os.sched_getaffinity(0))
    assert any(x.startswith("time: ") and x.endswith(f"; {cores} CPU thread(s) (--vitperf-threads to change)")
               for x in result.outlines)  # fmt: skip


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_thread_count_that_is_not_one_or_more_is_a_usage_error(suite: pytest.Pytester, value: str) -> None:
    result = suite.runpytest_subprocess("--gpu-bench", f"--vitperf-threads={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--vitperf-threads*{value!r} is not a whole number >= 1*"])
