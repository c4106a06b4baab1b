"""Interrupts end everything: SIGINT or SIGTERM to `vitperf ab`, `vitperf calibrate` or a pytest run with the plugin
ends every process it started within seconds, prints one line (what was done, what was not, the command that
resumes) and exits 130 or 143; a parent killed outright takes its children along; `vitperf ab --resume` then
finishes the run, and a second run may not start in its folder while it runs (--prepare-only stops after the
prepares, for a --resume). Real processes throughout: the sides of `vitperf ab` are shell scripts that stand in for
pytest (each writes a real process's --benchmark-json) and start a grandchild, as pytest starts compile workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_vitperf.core import processes

DATA = Path(__file__).parent / "data" / "h100-vit_base-rounds-benchmark.json"
# A side: records its pid and its grandchild's, waits for its turn where asked, hangs where SLOW matches its
# label (prepare-A, round1-B, ...), else writes the recorded JSON.
SIDE = """
for a in "$@"; do case $a in --vitperf-wait-for=*) turn=${a#*=};; --benchmark-json=*) out=${a#*=};; esac; done
label=$(basename "$out" .json)
sleep 300 & echo "$! grandchild $label" >> pids
echo "$$ side $label" >> pids; echo "start $label" >> events
if [ -n "$turn" ]; then while [ ! -f "$turn" ]; do sleep 0.05; done; fi
echo "run $label" >> events
case "$label" in $SLOW) sleep 300;; esac
cp "$DATA" "$out"; echo "end $label" >> events
"""
LIMIT_S = 10.0


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a reaper."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _wait_for(check: object, what: str, limit_s: float = 60.0) -> None:
    start = time.monotonic()
    while not check():  # type: ignore[operator]
        assert time.monotonic() - start < limit_s, f"waited {limit_s:.0f} s for {what}"
        time.sleep(0.05)


def _events(path: Path) -> list[str]:
    f = path / "events"
    return f.read_text().splitlines() if f.exists() else []


def _left(path: Path) -> list[str]:
    """The lines of `pids` ("pid what label") whose process still runs."""
    f = path / "pids"
    return [line for line in f.read_text().splitlines() if alive(int(line.split()[0]))] if f.exists() else []


def _none_left(path: Path) -> None:
    """Every side and grandchild these runs started is gone within LIMIT_S."""
    start = time.monotonic()
    while left := _left(path):
        assert time.monotonic() - start < LIMIT_S, f"still running after {LIMIT_S:.0f} s: {left}"
        time.sleep(0.05)


def _ab_command(path: Path, *extra: str) -> list[str]:
    (path / "side.sh").write_text(SIDE)
    sides = [f"env SIDE={s} DATA={DATA} sh side.sh" for s in "AB"]
    return [sys.executable, "-m", "pytest_vitperf.cli", "ab", "--a", sides[0], "--b", sides[1], "--rounds", "4",
            "--work-dir", str(path / "w"), *extra, "--", "suite.py"]  # fmt: skip


def _ab(path: Path, slow: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(_ab_command(path, *extra), cwd=path, env={**os.environ, "SLOW": slow}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def _stopped(ab: subprocess.Popen[str], signum: int) -> str:
    """Its exit code and what it said. Its children are held to LIMIT_S; its own exit is given longer: on a 2-core
    machine with two CPU-bound processes and a test run beside it, it once took more than 10 s."""
    ab.send_signal(signum)
    out, err = ab.communicate(timeout=6 * LIMIT_S)
    text = out if err is None else err  # a pytest run's line is on its stdout, which takes its stderr too
    assert ab.returncode == 128 + signum, text
    return text


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_prepares_ends_both_and_resume_finishes(tmp_path: Path, signum: int) -> None:
    ab = _ab(tmp_path, "prepare-*")
    _wait_for(lambda: {"run prepare-A", "run prepare-B"} <= set(_events(tmp_path)), "both prepares")
    err = _stopped(ab, signum)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    name = signal.Signals(signum).name
    assert lines[0].startswith(f"vitperf ab: {name} arrived, and every process it started has ended. Kept in ")
    assert "0 of 2 prepares and 0 whole round(s); not run: the rounds; resume with: vitperf ab " in lines[0]
    assert lines[0].endswith(f"--work-dir {tmp_path / 'w'} --resume -- suite.py")
    _none_left(tmp_path)
    assert not list((tmp_path / "w").glob("prepare-*.json"))  # what the killed processes might have written

    again = _ab(tmp_path, "none", "--resume")  # the command the line ends with
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert {f"round{i}-{s}.json" for i in range(4) for s in "AB"} <= {p.name for p in (tmp_path / "w").glob("*")}
    _none_left(tmp_path)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_round_keeps_the_rounds_before_it_and_resume_runs_the_rest(
    tmp_path: Path, signum: int
) -> None:
    ab = _ab(tmp_path, "round1-B")  # ABBA: round 1 begins with B
    _wait_for(lambda: "run round1-B" in _events(tmp_path), "round 1")
    err = _stopped(ab, signum)
    assert "Kept in " in err and "2 of 2 prepares and 1 whole round(s); not run: round 1 on;" in err
    _none_left(tmp_path)
    work = tmp_path / "w"
    logs = {p.name: p.stat().st_mtime_ns for p in work.glob("*.log")}
    again = _ab(tmp_path, "none", "--resume")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    rerun = {name for name, t in logs.items() if (work / name).stat().st_mtime_ns != t}
    # round 1 whole, and nothing before it (a later round's process that only waited for its turn had a log too)
    assert {"round1-A.log", "round1-B.log"} <= rerun and not any(n.startswith(("prepare-", "round0-")) for n in rerun)
    assert {f"round{i}-{s}.json" for i in range(4) for s in "AB"} <= {p.name for p in work.glob("*.json")}
    _none_left(tmp_path)


@pytest.mark.parametrize(("slow", "signed"), [("round1-B", True), ("prepare-*", False)])
def test_an_interrupted_run_signs_what_its_rounds_compiled_into_a_prepared_sides_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow: str, signed: bool
) -> None:
    """A round's process compiles into the parts it borrows of its side's cache, and `vitperf ab` signs them as the
    run ends, a run cut off too: else the next run moves them aside and compiles them all again. A side whose prepare
    never finished is left as it was: the next prepare checks it."""
    from pytest_vitperf.core.signing import KEY_ENV, problem

    monkeypatch.setenv(KEY_ENV, "a key of this test")
    ab = _ab(tmp_path, slow)
    _wait_for(lambda: f"run {slow.replace('*', 'B')}" in _events(tmp_path), slow)
    for side in "AB":  # what a round compiled (the prepares here are scripts, which compile nothing)
        (tmp_path / "w" / f"cache-{side}" / "inductor").mkdir(parents=True, exist_ok=True)
        (tmp_path / "w" / f"cache-{side}" / "inductor" / "kernel.py").write_text("compiled by a round\n")
    _stopped(ab, signal.SIGTERM)
    _none_left(tmp_path)
    for side in "AB":
        why = problem(tmp_path / "w" / f"cache-{side}" / "inductor", b"a key of this test")
        assert (why is None) == signed, why


def test_a_second_run_in_a_work_folder_in_use_refuses_in_one_line_and_touches_nothing(tmp_path: Path) -> None:
    """Two runs in one folder clear and read each other's files; the second refuses until the first has ended, even
    one that was killed outright (the kernel drops its lock)."""
    first = _ab(tmp_path, "round1-B")
    _wait_for(lambda: "run round1-B" in _events(tmp_path), "round 1")
    work = tmp_path / "w"
    before = {p.name: p.stat().st_mtime_ns for p in work.iterdir() if p.is_file()}
    for extra in [(), ("--resume",)]:
        second = _ab(tmp_path, "none", *extra)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2, err
        assert err.count("\n") == 1 and err.startswith(f"vitperf ab: {work} is in use by another vitperf ab run (pid "
                                                       f"{first.pid}, since "), err  # fmt: skip
        assert err.rstrip().endswith("; wait for it to end, or run this one in a new folder: vitperf ab --a "
                                     "'env SIDE=A DATA=" + str(DATA) + " sh side.sh' --b 'env SIDE=B DATA="
                                     + str(DATA) + " sh side.sh' --rounds 4 -- suite.py"), err  # fmt: skip
    assert {p.name: p.stat().st_mtime_ns for p in work.iterdir() if p.is_file() and p.name in before} == before
    assert first.poll() is None and _events(tmp_path).count("start round0-A") == 1
    first.kill()
    first.communicate()
    _wait_for(lambda: not [line for line in _left(tmp_path) if " side " in line], "the first run's sides", LIMIT_S)
    for line in _left(tmp_path):  # their grandchildren, which only a group kill by a live parent ends
        os.kill(int(line.split()[0]), signal.SIGKILL)
    again = _ab(tmp_path, "none", "--resume")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    _none_left(tmp_path)


def test_prepare_only_fills_the_caches_and_resume_runs_the_rounds_alone(tmp_path: Path) -> None:
    """--prepare-only: the two prepares, then one line ending with the command that runs the rounds; that --resume
    prepares nothing again."""
    ab = _ab(tmp_path, "none", "--prepare-only")
    out, err = ab.communicate(timeout=120)
    assert ab.returncode == 0, err
    work = tmp_path / "w"
    said = out.strip().splitlines()
    assert said[0].startswith("vitperf ab: ") and said[0].endswith(
        f" s, preparing both sides at once in one process a side, untimed (their output: {work / 'prepare-A.log'}, "
        "prepare-B.log)")  # fmt: skip
    assert said[1:] == ["prepare A: 8 measurements", "prepare B: 8 measurements",
                        f"vitperf ab: both sides prepared in {work}; run the rounds with: vitperf ab --a 'env SIDE=A "
                        f"DATA={DATA} sh side.sh' --b 'env SIDE=B DATA={DATA} sh side.sh' --rounds 4 --work-dir {work} "
                        "--resume -- suite.py"]  # fmt: skip
    assert sorted(e for e in _events(tmp_path) if e.startswith("run")) == ["run prepare-A", "run prepare-B"]
    assert not list(work.glob("round*.json"))
    rounds = _ab(tmp_path, "none", "--resume")
    _, err = rounds.communicate(timeout=120)
    assert rounds.returncode == 0, err
    ran = [e for e in _events(tmp_path) if e.startswith("run")]
    assert ran.count("run prepare-A") == 1 and {f"run round{i}-{s}" for i in range(4) for s in "AB"} <= set(ran)
    _none_left(tmp_path)
    gpus = subprocess.run(_ab_command(tmp_path, "--prepare-only", "--gpus", "all"), capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert gpus.returncode == 2 and gpus.stderr.startswith("vitperf ab: --prepare-only prepares for one GPU; leave ")
    assert gpus.stderr.rstrip().endswith(f"--rounds 4 --work-dir {work} --prepare-only -- suite.py"), gpus.stderr


def test_a_parent_killed_outright_takes_its_children_along(tmp_path: Path) -> None:
    ab = _ab(tmp_path, "prepare-*")
    _wait_for(lambda: {"run prepare-A", "run prepare-B"} <= set(_events(tmp_path)), "both prepares")
    ab.kill()
    ab.communicate()
    sides = [int(line.split()[0]) for line in (tmp_path / "pids").read_text().splitlines() if " side " in line]
    # the kernel's parent-death signal: nothing of the parent's runs to end them
    _wait_for(lambda: not any(alive(p) for p in sides), "the sides to end", LIMIT_S)


def test_a_second_signal_kills_at_once(tmp_path: Path) -> None:
    """The first SIGTERM raises Interrupted; one more, while that is handled, ends the process by its default."""
    script = (
        "import os, signal, time\n"
        "from pytest_vitperf.core import processes\n"
        "with processes.interruptible():\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)\n"
        "    except processes.Interrupted as exc:\n"
        "        print(exc.code, flush=True); os.kill(os.getpid(), signal.SIGTERM); time.sleep(5)\n"
        "print('not reached')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False)
    assert done.stdout == "143\n" and done.returncode == -signal.SIGTERM


def test_a_signal_while_a_child_starts_is_raised_once_it_is_recorded() -> None:
    """Raised inside Popen, after its fork, an interrupt would leave a child that nothing ends."""
    started: list[subprocess.Popen[bytes]] = []
    with pytest.raises(processes.Interrupted), processes.interruptible(), processes.held():
        os.kill(os.getpid(), signal.SIGTERM)
        started.append(processes.start(["sleep", "30"]))
    assert len(started) == 1 and started[0].poll() is None
    processes.end(started[0])


def test_a_signal_from_another_thread_amid_starts_leaves_no_child(tmp_path: Path) -> None:
    """As `vitperf ab` starts a round's next process while the test's signal arrives: a signal comes at any point of
    a loop of starts, taken by whichever thread the kernel picks. Without held(), nearly every try left a child."""
    started: list[subprocess.Popen[bytes]] = []
    timer = threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGTERM))
    with pytest.raises(processes.Interrupted), processes.interruptible():
        timer.start()
        for _ in range(500):
            with processes.held():
                started.append(processes.start(["sh", "-c", "sleep 300 & echo $! grandchild >> pids; wait"],
                                               cwd=tmp_path))  # fmt: skip
    for child in started:
        processes.end(child)
    time.sleep(1)  # a child lost to the interrupt has no one to wait for: give it time to start its grandchild
    _none_left(tmp_path)


def test_the_group_a_child_started_goes_with_it(tmp_path: Path) -> None:
    child = processes.start(["sh", "-c", "sleep 300 & echo $! > grandchild; wait"], cwd=tmp_path)
    _wait_for(lambda: (tmp_path / "grandchild").exists() and (tmp_path / "grandchild").read_text().strip(), "it")
    grandchild = int((tmp_path / "grandchild").read_text())
    assert processes.end(child) == -signal.SIGKILL
    _wait_for(lambda: not alive(grandchild), "the grandchild to end", LIMIT_S)


SLOW_TEST = """
import os, time
import pytest

@pytest.mark.gpu_bench
def test_slow(vitperf_session):
    with open("started", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_pytest_run_ended_by_a_signal_says_so_and_exits_with_it(tmp_path: Path, signum: int) -> None:
    (tmp_path / "test_slow.py").write_text(SLOW_TEST)
    run = subprocess.Popen([sys.executable, "-m", "pytest", "--gpu-bench", "-p", "no:cacheprovider", "test_slow.py",
                            f"--vitperf-cache-dir={tmp_path / 'cache'}"], cwd=tmp_path, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    _wait_for(lambda: (tmp_path / "started").exists(), "the test to start")
    out = _stopped(run, signum)
    name = signal.Signals(signum).name
    assert (f"vitperf: {name} ended the run after 0 measurement(s); no baseline, history, export or report was "
            f"written; the engines it built are kept in {tmp_path / 'cache'}, so a new run starts warm. Run again: "
            "pytest --gpu-bench -p no:cacheprovider test_slow.py --vitperf-cache-dir=") in out


def test_vitperf_calibrate_ended_by_sigterm_ends_its_run(tmp_path: Path) -> None:
    (tmp_path / "test_slow.py").write_text(SLOW_TEST)
    cal = subprocess.Popen([sys.executable, "-m", "pytest_vitperf.cli", "calibrate", "--runs", "3", "--baseline-dir",
                            str(tmp_path / "bl"), "--", "test_slow.py"], cwd=tmp_path, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    _wait_for(lambda: (tmp_path / "started").exists() and (tmp_path / "started").read_text(), "the first run")
    err = _stopped(cal, signal.SIGTERM)
    assert err.strip().count("\n") == 0, err
    assert "vitperf calibrate: SIGTERM arrived and every process it started has ended: run 1 of 3 was cut off. " \
        f"The 0 run(s) before it stay in the baselines of {tmp_path / 'bl'}; run again: vitperf calibrate" in err
    _wait_for(lambda: not alive(int((tmp_path / "started").read_text())), "the run to end", LIMIT_S)
