"""The relay (core/relay.py): a round's two processes on one GPU at once, a family at a time in turn. The hand-over
alone, with threads standing in for the processes; then `vitperf ab`'s turns with two real pytest processes of the
latency suite on the CPU."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_vitperf.ab.turns import in_turn
from pytest_vitperf.core.relay import Relay, alternate
from tests.conftest import FAST


def test_the_gpu_goes_to_each_in_turn_once_both_have_loaded_and_never_to_two_at_once(tmp_path: Path) -> None:
    """A loads fast and B slowly: A is given nothing until B waits too. Then A, B, A, B by family; each is told what
    the GPU ran before it; once B has ended, A runs its last family alone. No two ever hold it at once."""
    log: list[tuple[str, str, str]] = []  # (process, what, what the GPU ran before)
    holding: set[str] = set()
    overlaps: list[str] = []
    ended = {"A": threading.Event(), "B": threading.Event()}

    def process(name: str, load_s: float, families: list[str]) -> None:
        relay = Relay(tmp_path / f"{name}.relay")
        time.sleep(load_s)  # loading its engines: the other must not measure meanwhile
        log.append((name, "loaded", ""))
        for family in ["", *families]:
            holding.discard(name)
            before = relay.take(family)
            holding.add(name)
            if len(holding) > 1:
                overlaps.append(family)
            log.append((name, family, before))
            time.sleep(0.02)
        holding.discard(name)
        ended[name].set()

    threads = [threading.Thread(target=process, args=("A", 0.0, ["m b1", "m b64", "n b1"])),
               threading.Thread(target=process, args=("B", 0.3, ["m b1", "m b64"]))]  # fmt: skip
    for t in threads:
        t.start()
    order = alternate([tmp_path / "A.relay", tmp_path / "B.relay"], [ended["A"].is_set, ended["B"].is_set])
    for t in threads:
        t.join()
    assert not overlaps
    assert order == ["0 ", "1 ", "0 m b1", "1 m b1", "0 m b64", "1 m b64", "0 n b1"]
    assert log.index(("B", "loaded", "")) < log.index(("A", "", ""))  # A waited for B's load
    runs = [entry for entry in log if entry[1] != "loaded"]
    assert runs[2:] == [("A", "m b1", ""), ("B", "m b1", "m b1"), ("A", "m b64", "m b1"), ("B", "m b64", "m b64"),
                        ("A", "n b1", "m b64")]  # fmt: skip


def test_a_process_that_is_never_answered_says_what_it_waited_for(tmp_path: Path) -> None:
    with pytest.raises(TimeoutError, match=r"waited 0 s for .*A\.relay\.go, which vitperf ab writes"):
        Relay(tmp_path / "A.relay").take("m b1", limit_s=0.05)


# Each process notes when each of its tests has run (its family measured, if it was the first of it), before it asks
# for the GPU again, in the next family's first test.
EVENTS = """
import os

def pytest_runtest_teardown(item):
    with open(os.path.join(os.environ["EVENTS_DIR"], "events"), "a") as f:
        f.write(f"{os.environ['SIDE']} {item.callspec.params['vitperf_batch']}\\n")
"""


def test_a_rounds_two_processes_load_at_once_then_take_turns_a_family_at_a_time(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two real processes of the latency suite (two families: batches 1 and 2), relayed by `vitperf ab`'s turns: A's
    family b1, B's b1, A's b2, B's b2; the second of each pair, after the same family, warms up AFTER_ITSELF_MS instead
    of the 1.5 s asked; both write their results."""
    from pytest_vitperf.fixtures.family import AFTER_ITSELF_MS

    suite.makeconftest(EVENTS)
    monkeypatch.chdir(suite.path)
    work = suite.path / "ab"
    work.mkdir()
    suite_args = ["test_vit_latency.py", *FAST, "--vitperf-batch-sizes=1,2", "--vitperf-precisions=fp32,fp16",
                  "--vitperf-warmup-ms=1500", "--vitperf-compile=off"]  # fmt: skip
    commands = {s: ["env", f"SIDE={s}", f"EVENTS_DIR={suite.path}", sys.executable] for s in "AB"}
    args = argparse.Namespace(a="A", b="B", rounds=3, work_dir=work, reuse_compiles=False, resume=False,
                              pytest_args=suite_args, relay=True)  # fmt: skip
    tasks = [("round0", "A"), ("round0", "B")]
    done = in_turn(tasks, commands, work, args, dict(os.environ), relay=True)
    assert [sorted(p) for p in done] == [["test_vit fp16 b1", "test_vit fp16 b2", "test_vit fp32 b1",
                                          "test_vit fp32 b2"]] * 2  # fmt: skip
    events = (suite.path / "events").read_text().split()
    firsts = [" ".join(events[i : i + 2]) for i in range(0, len(events), 2)]
    turns = [f for k, f in enumerate(firsts) if k == 0 or f != firsts[k - 1]]
    assert turns in (["A 1", "B 1", "A 2", "B 2"], ["A 2", "B 2", "A 1", "B 1"])
    warmed = {}
    for side in "AB":
        for b in json.loads((work / f"round0-{side}.json").read_text())["benchmarks"]:
            warmed[(side, b["params"]["batch"])] = b["options"]["rounds"]["warmed_ms"]
    assert all(warmed[("A", batch)] >= 1500 for batch in (1, 2)), warmed
    assert all(AFTER_ITSELF_MS <= warmed[("B", batch)] < 1500 for batch in (1, 2)), warmed
    assert not list(work.glob("*.relay*"))  # nothing left to mislead a later run
    relayed = sorted(json.loads((work / f"round0-{s}.json").read_text())["machine_info"]["vitperf"]["process"]
                     ["relayed_s"] for s in "AB")  # fmt: skip
    assert relayed[0] >= AFTER_ITSELF_MS / 1000 and relayed[1] >= 1.5, relayed  # while the other one measured


def test_the_replay_of_the_relays_first_h200_runs() -> None:
    """Real rounds of `vitperf ab --relay` (H200, 2026-12-03, cold): the latency suite's A/A, 6 rounds, had 5 of 14
    rows SAME and 9 UNKNOWN, none SLOWER or FASTER; the nightly set's A/A at ±0.75%, one block of 4 rounds, 60 of 98
    SAME and 38 UNKNOWN. The replay with the matrix's spread alone gives the live verdicts; with their family's
    (by_family, since 2026-12-04), two rows of ViT-S at batch 1, its BF16 latency and INT8 speedup, SAME live, stay
    open. In the latency A/A the first process of each round was
    the slower at batch 64, by 0.44-0.50% in three of its four latencies (BF16's 0.1%): an order effect that the
    rounds' ABBA order cancels in the estimate but not in the spread
    (docs/measurements/2026-12-03-h200-relay-latency-and-nightly.md)."""
    import math
    import statistics

    from pytest_vitperf.verdicts.ab import LATENCY, SPEEDUP, order, pairs, sequential
    from tests.conftest import recorded_rounds

    data = json.loads((Path(__file__).parent / "data" / "ab" / "h200-ab-relay-2026-12-03.json").read_text())
    opened = {f"vit_small_patch16_224 bf16 b1 | {LATENCY}", f"vit_small_patch16_224 int8 b1 | {SPEEDUP}"}
    for run, threshold in (("latency", 0.005), ("nightly", 0.0075)):
        live, recorded = data[f"{run}_verdicts"], recorded_rounds(data[run])
        alone = sequential(recorded, threshold=threshold, by_family=False)
        assert {f"{r.name} | {r.what}": r.verdict for r in alone} == live, run
        rows = {f"{r.name} | {r.what}": r.verdict for r in sequential(recorded, threshold=threshold)}
        assert {k for k, v in rows.items() if v != live[k]} == (opened if run == "nightly" else set()), run
    assert {rows[k] for k in opened} == {"UNKNOWN"}
    assert sorted(data["nightly_verdicts"].values()).count("SAME") == 60
    rounds = recorded_rounds(data["latency"])
    first_slower = []
    for (name, what), p in pairs(rounds).items():
        if name.endswith("b64") and what == LATENCY:
            logs = [math.log(b.median_ms / a.median_ms) for a, b in p]
            by = {s: statistics.mean(x for x, o in zip(logs, order(len(p)), strict=True) if o[0] == s) for s in "AB"}
            first_slower.append((by["B"] - by["A"]) / 2)  # B first: log(B/A) up by the order; A first: down by it
    assert len(first_slower) == 4 and all(d > 0 for d in first_slower), first_slower
    assert sum(0.004 < d < 0.006 for d in first_slower) == 3, first_slower  # BF16's: 0.1%


def test_a_relay_is_refused_with_xdist_workers_or_where_its_folder_is_not(suite: pytest.Pytester) -> None:
    """Workers would time outside the relay's turns; a relay file must be one the process can write beside."""
    relay = suite.path / "round0-A.relay"
    result = suite.runpytest(*FAST, f"--vitperf-relay={relay}", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--vitperf-relay hands this process the GPU a family at a time, and 2 xdist "
                                 "workers would time outside those turns: run it in one process, -n 0"])  # fmt: skip
    result = suite.runpytest(*FAST, f"--vitperf-relay={suite.path / 'none' / 'r.relay'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--vitperf-relay *r.relay: *"])
    assert not relay.exists()
