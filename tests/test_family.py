"""The latency suite's families end to end on the CPU through pytester: one interleaved run per family, a known
injected delay seen, the three outcomes of a floor, the fall-back to one block per engine, and the options'
usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import AGAIN, FAST
from tests.test_baselines_workflow import CONFTEST


def floors(path: Path, precision: str, min_speedup: float) -> None:
    entry = {"gpu": "*", "backend": "torch", "precision": precision, "min_speedup": min_speedup, "judged_in": "time"}
    path.write_text(json.dumps({"schema": 1, "floors": [entry]}))


def test_one_run_measures_the_whole_family_in_rounds(suite: pytest.Pytester) -> None:
    out = suite.path / "bench.json"
    args = ("--vitperf-precisions=fp32,fp16,bf16", "--vitperf-seed=5", f"--benchmark-json={out}")
    result = suite.runpytest(*FAST, *args)
    result.assert_outcomes(passed=3)
    spec_options = [b["options"] for b in json.loads(out.read_text())["benchmarks"]]
    runs = {o["rounds"]["run"] for o in spec_options}
    assert len(runs) == 1  # the three tests share one family run: its rounds pair
    assert all(o["rounds"]["seed"] == 5 and o["rounds"]["done"] == 3 for o in spec_options)
    assert all("duration_ms" not in o for o in spec_options)  # block sampling's settings do not describe rounds


def test_built_apart_each_test_builds_only_its_own_engine_in_whichever_worker_takes_it(suite: pytest.Pytester) -> None:
    """vitperf ab's prepare: a test to an xdist worker, so one family's engines are built in both workers at once;
    each test times its own engine once, and the speedups, with nothing beside them, skip saying why."""
    pytest.importorskip("xdist")
    out = suite.path / "bench.json"
    args = ("--vitperf-precisions=fp16,bf16,fp32", "--vitperf-build-apart", f"--benchmark-json={out}", "-rs")
    result = suite.runpytest(*FAST, *args, "-n", "2", "--vitperf-share-devices")
    result.assert_outcomes(passed=1, skipped=2)  # FP16 is the reference: it compares itself with nothing
    result.stdout.fnmatch_lines(["*vitperf workers (sharing the devices; each test on the worker that took it)*",
                                 "SKIPPED*--vitperf-build-apart: each test's engine is built and timed apart, "
                                 "fp16 not beside it"])  # fmt: skip
    doc = json.loads(out.read_text())
    workers = doc["machine_info"]["vitperf"]["results"]["workers"]
    built = {w["worker"]: w["measured"] for w in workers}
    assert len(built) == 2 and all(built.values()), built  # one family, and both workers built of it
    assert sorted(m for ms in built.values() for m in ms) == [f"test_vit-{p}-b1" for p in ("bf16", "fp16", "fp32")]
    assert all(w["engines"] == len(w["measured"]) for w in workers)  # no worker built a reference beside its own
    runs = {b["options"]["rounds"]["run"] for b in doc["benchmarks"]}
    assert len(doc["benchmarks"]) == 3 and len(runs) == 3  # each its own family run
    assert all(b["fullname"].endswith(f"-{b['params']['precision']}]") for b in doc["benchmarks"])  # its own test's


def test_a_long_family_says_which_round_it_is_in(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past pytest's capture, on the terminal: here after every round, as if each took longer than TELL_EVERY_S."""
    from pytest_vitperf.fixtures import family

    monkeypatch.setattr(family, "TELL_EVERY_S", 0.0)
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32,fp16")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["vitperf: * b1: round 1 done, * s in its rounds", "vitperf: * b1: round 3 done, *"])


@pytest.mark.parametrize(("agree", "builds", "done"), [("50%", 1, 2), ("50%", 2, 3), ("0.0001%", 1, 5)])
def test_rounds_that_agree_end_early(suite: pytest.Pytester, agree: str, builds: int, done: int) -> None:
    """With --vitperf-rounds-agree, --vitperf-rounds is the most: a CPU's rounds agree within 50%, never within
    0.0001%. Two builds need a third round (an interval widened by the builds' spread). The plan is recorded with what
    it did."""
    out = suite.path / "bench.json"
    args = ("--vitperf-precisions=fp32,fp16", "--vitperf-rounds=5", f"--vitperf-rounds-agree={agree}")
    result = suite.runpytest(*FAST, *args, f"--vitperf-builds={builds}", f"--benchmark-json={out}")
    result.assert_outcomes(passed=2)
    benchmarks = json.loads(out.read_text())["benchmarks"]
    assert {(b["options"]["rounds"]["done"], b["options"]["rounds"]["agree"]) for b in benchmarks} == {
        (done, float(agree.rstrip("%")) / 100)
    }
    assert all(len(b["extra_info"]["vitperf"]["rounds"]) == builds * done for b in benchmarks)


def test_two_builds_a_precision_carry_their_spread_into_the_interval(suite: pytest.Pytester) -> None:
    out = suite.path / "bench.json"
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp32,fp16", "--vitperf-builds=2", f"--benchmark-json={out}")
    result.assert_outcomes(passed=2)
    fp32 = next(b for b in json.loads(out.read_text())["benchmarks"] if b["params"]["precision"] == "fp32")
    info = fp32["options"]["rounds"]
    assert info["builds"] == 2 and sorted(info["built"]) == ["fp16#0", "fp16#1", "fp32#0", "fp32#1"]
    assert fp32["extra_info"]["vitperf"]["rounds"] == [8] * 6  # 3 rounds of build 0, then 3 of build 1
    assert set(info["spread"]) == {"time"} and info["spread"]["time"]["df"] == 2  # no clock on a CPU: no cycles
    result.stdout.fnmatch_lines(["test_vit * fp32 * *x [[]*, *] * no floor*"])


def test_an_injected_delay_is_seen_and_said_loudly(aa: pytest.Pytester) -> None:
    aa.makeconftest(AGAIN + CONFTEST)  # the engines' cost a sleep: a busy machine stretched the model's own time
    floors(aa.path / "floors.json", "bf16-again", 0.95)
    # one model's engines of the precision (a nightly matrix's +1% on one row); another model's delay is not this one's
    delays = "--vitperf-inject-delay=test_vit:bf16-again=30%,vit_large:bf16=30%"
    result = aa.runpytest(*FAST, "--vitperf-precisions=bf16,bf16-again", delays)
    result.assert_outcomes(passed=1, failed=1)  # bf16 passes; its slowed copy fails its floor
    result.stdout.fnmatch_lines(
        [
            "vitperf: !!! SENSITIVITY SELF-TEST: every bf16-again engine of test_vit runs 30.0% of its own time*",
            "vitperf: !!! SENSITIVITY SELF-TEST: every bf16 engine of vit_large_patch16_224 runs 30.0%*",
            # 1 / 1.3 = 0.77
            "*bf16-again is 0.[678]*x faster than bf16, below the floor 0.95x (time, 0.[678]*x [[]*] at 98.33%)*",
            "*= vitperf summary =*",
            "!!! SENSITIVITY SELF-TEST*",
            "test_vit * bf16-again * 0.[678]*x [[]*, *] vs bf16 * FAIL (floor 0.95x)*",
        ]
    )


def _busy(ms: float) -> None:
    import time

    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize("gap_ms", [0.0, 0.2])
def test_an_injected_delay_is_fitted_to_what_the_timer_sees(gap_ms: float) -> None:
    """A delay whose every run costs `gap_ms` more than its size (as a GPU spin's own launch does) is shortened by
    that gap, so that it adds what was asked; one without a gap is left as asked. Real busy waits, timed on the host:
    a 2 ms engine and 0.5 ms asked."""
    from types import SimpleNamespace

    from pytest_vitperf.engines.delay import _fitted
    from pytest_vitperf.measure.timing import PerfCounterClock

    engine = SimpleNamespace(clock=PerfCounterClock(), launch=lambda: _busy(2.0))
    _, found = _fitted(engine, 0.5, lambda size: lambda: _busy(size + gap_ms), 1.0)  # type: ignore[arg-type]
    assert found["gap_ms"] == pytest.approx(gap_ms, abs=0.05)
    assert found["size"] == pytest.approx(0.5 - gap_ms, abs=0.05)
    assert found["added_ms"] == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize(("outcome", "counts"), [("warn", {"passed": 2}), ("xfail", {"passed": 1, "xfailed": 1}),
                                                  ("fail", {"passed": 1, "failed": 1})])  # fmt: skip
def test_an_interval_that_straddles_its_floor_is_inconclusive(
    aa: pytest.Pytester, outcome: str, counts: dict[str, int]
) -> None:
    """An A/A pair against a floor of 1.0 at a confidence so high that no three rounds can settle it, and no budget
    for more: the verdict is inconclusive, and --vitperf-inconclusive says what that does to the test."""
    floors(aa.path / "floors.json", "bf16-again", 1.0)
    args = ("--vitperf-precisions=bf16,bf16-again", "--vitperf-confidence=0.999999", "--vitperf-round-budget-s=0")
    result = aa.runpytest(*FAST, *args, f"--vitperf-inconclusive={outcome}", "-rx")
    result.assert_outcomes(**counts)
    result.stdout.fnmatch_lines(["test_vit * bf16-again * inconclusive (floor 1.00x)*"])
    if outcome != "xfail":
        result.stdout.fnmatch_lines(["*bf16-again is *x faster than bf16, not told apart from the floor 1.00x*"])


# Each precision's second build sleeps 40 ms longer a launch than its first: a spread between builds that no number
# of rounds averages away. Sleeps, not busy time: a busy CPU moves a busy wait's rounds by as much (CoV over 100%
# with three runs on two cores), and the rounds' spread could then be the larger.
UNEVEN = AGAIN + """
import time

from pytest_vitperf.engines.backends.torch import TorchBackend


class Uneven(TorchBackend):
    name = "uneven"
    built = {}

    def precision_reason(self, precision):
        return None

    def prepare(self, model, **kw):
        engine = super().prepare(model, **kw)
        n = Uneven.built[kw["precision"]] = Uneven.built.get(kw["precision"], 0) + 1
        launch, pause = engine.launch, 0.02 if n == 1 else 0.06

        def slept():
            launch()
            time.sleep(pause)

        engine.launch = slept
        return engine


def pytest_vitperf_backend_names(config):
    return ["uneven"]


def pytest_vitperf_make_backend(config, name):
    return Uneven() if name == "uneven" else None
"""


def test_rounds_that_cannot_settle_a_floor_are_not_spent(suite: pytest.Pytester) -> None:
    """An A/A pair against a floor of 1.00, every precision's second build far slower, and a minute of budget for
    more rounds: the builds' spread alone straddles the floor, so the family stops at its first 3 rounds instead of
    doubling them, and the message says what can settle it."""
    suite.makeconftest(UNEVEN)
    entry = {"gpu": "*", "backend": "uneven", "precision": "bf16-again", "min_speedup": 1.0, "judged_in": "time"}
    (suite.path / "floors.json").write_text(json.dumps({"schema": 1, "floors": [entry]}))
    args = ("--vitperf-precisions=bf16,bf16-again", "--vitperf-builds=2", "--vitperf-backend=uneven",
            "--vitperf-round-budget-s=60", f"--benchmark-json={suite.path / 'bench.json'}")  # fmt: skip
    result = suite.runpytest(*FAST, *args)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*More rounds cannot settle it: the spread between its engine's builds alone*"])
    done = {b["options"]["rounds"]["done"] for b in json.loads((suite.path / "bench.json").read_text())["benchmarks"]}
    assert done == {3}


def test_engines_that_do_not_fit_together_are_timed_one_block_each(suite: pytest.Pytester) -> None:
    """A backend that runs out of memory the first time it prepares bf16 (while fp16 is held): the family releases
    what it built and times each engine alone, and the summary marks those rows."""
    suite.makeconftest(
        """
        from pytest_vitperf.core.errors import OutOfMemory
        from pytest_vitperf.engines.backends.torch import TorchBackend

        class Tight(TorchBackend):
            name = "tight"
            failed = False

            def precision_reason(self, precision):
                return None

            def prepare(self, model, **kw):
                if kw["precision"] == "bf16" and not Tight.failed:
                    Tight.failed = True
                    raise OutOfMemory("out of GPU memory preparing bf16 batch 1 (a test)")
                return super().prepare(model, **kw)

        def pytest_vitperf_backend_names(config):
            return ["tight"]

        def pytest_vitperf_make_backend(config, name):
            return Tight() if name == "tight" else None
        """
    )
    result = suite.runpytest(*FAST, "--vitperf-precisions=fp16,bf16", "--vitperf-backend=tight")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["test_vit * fp16 * tight * reference; sequential*", "test_vit * bf16 * sequential*"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vitperf-inject-delay=fp8=2%", "--vitperf-update-baselines"], "*must not become baselines*"),
        (["--vitperf-inject-delay=fp6=2%"], "*--vitperf-inject-delay (ini option vitperf_inject_delay): unknown*"),
        (["--vitperf-inject-delay=fp8=200%"], "*'fp8=200%' is not [[]MODEL:[]]PRECISION=REL with REL between 0 and 1*"),
        (["--vitperf-inject-delay=vit_base:fp6=2%"], "*--vitperf-inject-delay (ini *): unknown precision 'fp6'*"),
        (["--vitperf-inject-delay=vit-base:fp8=2%"], "*'vit-base:fp8=2%' is not [[]MODEL:[]]PRECISION=REL*"),
        (["--vitperf-confidence=1.5"], "*'1.5' is not a confidence level such as 0.95 or 95%*"),
        (["--vitperf-rounds-agree=-1%"], "*'-1%' is not a relative change such as 0.05 or 5%*"),
        (["--vitperf-inconclusive=maybe"], "*'maybe' is not one of: warn, xfail, fail*"),
    ],
)
def test_bad_round_options_are_usage_errors(suite: pytest.Pytester, args: list[str], message: str) -> None:
    result = suite.runpytest("--gpu-bench", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(
    ("floor", "args", "done", "looks"),
    [
        (0.5, (), 3, 1),  # settled at the early look: the family ends there
        (1.0, ("--vitperf-confidence=0.999999",), 6, 2),  # unsettled: on to --vitperf-rounds, the second look
        (None, (), 6, 1),  # no floor: nothing to look at, every round runs
        (0.5, ("--vitperf-first-look=0",), 6, 1),  # no early look
    ],
)
def test_a_family_whose_floors_are_settled_at_its_early_look_ends_there(
    aa: pytest.Pytester, floor: float | None, args: tuple[str, ...], done: int, looks: int
) -> None:
    """--vitperf-first-look 3 of 6 rounds on an A/A pair whose engines cost a sleep (a busy CPU's own time moves by
    more than half): a floor at half its speed is settled after 3 rounds; one at 1.00 at a confidence no rounds reach
    is not; without a floor, or with no early look, all 6 run."""
    aa.makeconftest(AGAIN + CONFTEST)
    if floor is not None:
        floors(aa.path / "floors.json", "bf16-again", floor)
    out = aa.path / "bench.json"
    plan = ("--vitperf-rounds=6", "--vitperf-first-look=3", "--vitperf-round-budget-s=0")
    result = aa.runpytest(*FAST, "--vitperf-precisions=bf16,bf16-again", *plan, *args, f"--benchmark-json={out}")
    assert result.ret == 0
    rounds = [b["options"]["rounds"] for b in json.loads(out.read_text())["benchmarks"]]
    assert {(r["done"], r["looks"]) for r in rounds} == {(done, looks)}  # the plan is recorded with what it did


def test_a_family_with_stored_baselines_takes_no_early_look(aa: pytest.Pytester) -> None:
    """The baseline gate judges at a level that counts no looks: once a row has a stored baseline, the family runs
    every round, though its floor is settled at the early look."""
    aa.makeconftest(AGAIN + CONFTEST)
    floors(aa.path / "floors.json", "bf16-again", 0.5)
    out = aa.path / "bench.json"
    plan = ("--vitperf-rounds=6", "--vitperf-first-look=3", "--vitperf-round-budget-s=0")
    args = ("--vitperf-precisions=bf16,bf16-again", *plan, f"--vitperf-baseline-dir={aa.path / 'bl'}",
            f"--benchmark-json={out}")
    for update, done in ((("--vitperf-update-baselines",), 3), ((), 6)):
        assert aa.runpytest(*FAST, *args, *update).ret == 0
        assert {b["options"]["rounds"]["done"] for b in json.loads(out.read_text())["benchmarks"]} == {done}


def test_a_turn_times_the_nearest_count_of_launches_to_its_length() -> None:
    """A turn's launch count comes from its last turn, to the nearest count and at least one: rounded up, batch 64's
    5-6 ms launches took 3 to a 12.5 ms turn (H200), up to 38% longer than asked. Real 10 ms sleeps, timed on the
    host; at 17 ms a sleep that took 11.4 ms on a busy host is one launch, so the count is checked against what the
    first launch took."""
    import time
    from types import SimpleNamespace

    from pytest_vitperf.fixtures.family import _turn
    from pytest_vitperf.measure.timing import PerfCounterClock

    engine = SimpleNamespace(clock=PerfCounterClock(), launch=lambda: time.sleep(0.01))
    session = SimpleNamespace(settings=SimpleNamespace(cold=False), clock_probe=None, clock_facts={})
    for turns in (1.3, 1.7, 0.3):  # the turn asked for, in launches of 10 ms
        take = _turn(session, engine, 10.0 * turns)  # type: ignore[arg-type]
        first = take()[0]
        assert len(first) == 1  # the first turn: one launch, which sizes the next
        # a busy host sleeps longer than asked: the count follows the launch the turn timed, not the 10 ms asked for
        assert len(take()[0]) == max(1, round(10.0 * turns / first[0]))
