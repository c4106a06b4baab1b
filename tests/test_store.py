"""The fleet's store (--vitperf-store): one suite over SQLite and a real PostgreSQL server, which these tests start
from Debian's postgresql package in a folder of their own (each test creates and drops its own database). Where the
server's programs are missing the PostgreSQL half skips and says so, except where VITPERF_TEST_POSTGRES=required
(.ci/run), where it fails."""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from pytest_vitperf.cli import main
from pytest_vitperf.store.history import Folder
from pytest_vitperf.store.sql import SqlStore, StoreError, open_history
from tests.conftest import FAST, REPO
from tests.test_history import T0, measured, two_steps

FIXTURE_DB = REPO / "tests" / "data" / "store-v0001.db"  # made by the first schema, with three runs


def _server_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL server on a Unix socket; the URL of its maintenance database."""
    bindir = _server_bin()
    if bindir is None:
        reason = "PostgreSQL's server programs are not installed (Debian: apt-get install postgresql)"
        if os.environ.get("VITPERF_TEST_POSTGRES") == "required":
            pytest.fail(reason)
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="vitperf-pg-"))  # not in pytest's folder, which the server's user cannot enter
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []  # initdb refuses to run as root
    if as_user:
        shutil.chown(root, "postgres")
    data = root / "data"
    run = lambda *cmd: subprocess.run([*as_user, *cmd], check=True, capture_output=True, timeout=120)  # noqa: E731
    run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "vitperf")
    run(str(bindir / "pg_ctl"), "-D", str(data), "-o", f"-k {root} -c listen_addresses=''", "-l",
        str(root / "log"), "-w", "start")  # fmt: skip
    try:
        yield f"postgresql+psycopg://vitperf@/postgres?host={root}"
    finally:
        run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new, empty store on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    import sqlalchemy as sa

    admin_url: str = request.getfixturevalue("postgres")
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f"CREATE DATABASE {name}")
    yield admin_url.replace("/postgres?", f"/{name}?")
    with admin.connect() as c:
        c.exec_driver_sql(f"DROP DATABASE {name} WITH (FORCE)")
    admin.dispose()


def test_runs_read_back_as_a_history_folder_reads_them(store_url: str, tmp_path: Path) -> None:
    folder, store = Folder(tmp_path / "folder"), SqlStore(store_url)
    for day, (version, fp16) in enumerate([("2.11.0", 6.5), ("2.11.0", 6.6), ("2.12.0", 6.1)]):
        run = [measured("fp16", fp16, version), measured("fp8", 5.2, version), measured("fp16", fp16 * 6, batch=1)]
        for history in (folder, store):
            history.append(run, T0 + timedelta(days=day))
    assert store.series() == folder.series()  # the same points, in the same order, whichever backend keeps them
    assert store.counts() == (3, 9)
    assert SqlStore(store_url).counts() == (3, 9)  # opened again: migrated already, nothing lost


WRITER = """
import sys
from pytest_vitperf.store.sql import SqlStore
from tests.test_history import measured
store = SqlStore(sys.argv[1])
for i in range(int(sys.argv[2])):
    store.append([measured(p, 5.0 + i / 100) for p in ("fp16", "bf16", "fp8")])
"""


def test_concurrent_writers_land_every_row_once(store_url: str) -> None:
    """16 processes x 50 runs of 3 rows, started at once on a store none of them has made yet."""
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, store_url, "50"], cwd=REPO) for _ in range(16)]
    assert [w.wait(timeout=600) for w in writers] == [0] * 16
    store = SqlStore(store_url)
    assert store.counts() == (16 * 50, 16 * 50 * 3)
    points = store.series()[("torch", "NVIDIA H100 80GB HBM3", "vit_base_patch16_224", "fp8/b64")]
    assert sorted(p.median for p in points) == sorted(5.0 + i / 100 for i in range(50) for _ in range(16))


KILLED = """
import os, signal, sys
from pytest_vitperf.store import sql
from tests.test_history import measured
store = sql.SqlStore(sys.argv[1])
store.append([measured("fp16", 6.0)])  # one whole run first
import sqlalchemy as sa
real = sa.engine.Connection.execute
def execute(self, statement, *args, **kwargs):
    result = real(self, statement, *args, **kwargs)
    if getattr(statement, "table", None) is not None and statement.table.name == "rows":
        os.kill(os.getpid(), signal.SIGKILL)  # the run and its rows inserted, not committed
    return result
sa.engine.Connection.execute = execute
store.append([measured(p, 5.0) for p in ("fp16", "bf16", "fp8")])
"""


def test_a_writer_killed_mid_run_leaves_no_part_of_it(store_url: str) -> None:
    done = subprocess.run([sys.executable, "-c", KILLED, store_url], cwd=REPO, timeout=300, check=False)
    assert done.returncode == -signal.SIGKILL
    assert SqlStore(store_url).counts() == (1, 1)  # the first run whole; of the killed one, nothing


def test_a_store_of_the_first_schema_is_migrated_and_keeps_its_runs(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE_DB, db)
    store = SqlStore(db)
    assert store.counts() == (3, 6)
    store.append([measured("fp16", 6.0)])
    assert store.counts() == (4, 7)
    with store.engine.connect() as c:
        assert c.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one() == "0006"
        old, new = c.exec_driver_sql("SELECT host, speedup FROM runs JOIN rows ON rows.run_id = runs.id "
                                     "WHERE precision = 'fp16' ORDER BY runs.id").all()[-2:]  # fmt: skip
    assert old == ("", None) and new[0]  # columns added since: empty for the old runs, filled for the new


def test_ab_verdicts_land_as_one_run_of_their_own(store_url: str) -> None:
    """`vitperf ab --store`: a run of its own, a row per judged row with B over A, its interval and verdict."""
    from pytest_vitperf.verdicts.ab import SAME, SLOWER, Row
    from pytest_vitperf.verdicts.stats import Interval

    slower = Interval(1.012, 1.008, 1.016, 0.95, 12, 0.004, 0.001)
    rows = [Row("vit_base fp8 b64", "latency", 12, slower, None, SLOWER, 0.006, "0"),
            Row("vit_base fp16 b1", "latency", 2, None, None, SAME, float("inf"))]  # fmt: skip
    facts = {"a": "python3", "b": "env X=1 python3", "device": "GPU 0", "threshold": 0.01, "confidence": 0.95}
    store = SqlStore(store_url)
    run = store.append_ab([r.to_dict() for r in rows], facts)
    assert store.counts() == (1, 0)  # a run, and no measurement rows: its rows are verdicts
    with store.engine.connect() as c:
        got = c.exec_driver_sql("SELECT r.uid, a.name, a.gpu, a.ratio, a.ratio_low, a.detectable, a.verdict, a.side_b "
                                "FROM ab_rows a JOIN runs r ON a.run_id = r.id ORDER BY a.name").all()  # fmt: skip
    assert [tuple(g) for g in got] == [(run, "vit_base fp16 b1", None, None, None, None, SAME, "env X=1 python3"),
                                       (run, "vit_base fp8 b64", "0", 1.012, 1.008, 0.006, SLOWER, "env X=1 python3")]


def test_what_cannot_be_a_store_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "not.db").write_text("a text file, not a database\n")
    with pytest.raises(StoreError, match=r"^store sqlite:///.*not\.db: file is not a database$"):
        SqlStore(tmp_path / "not.db")
    assert (tmp_path / "not.db").read_text() == "a text file, not a database\n"  # lost nothing


def test_the_option_writes_each_run_and_vitperf_history_reads_the_store(suite: pytest.Pytester, capsys) -> None:
    url = f"sqlite:///{suite.path / 'fleet.db'}"
    for _ in range(2):
        r = suite.runpytest(*FAST, "--vitperf-precisions=fp32", f"--vitperf-store={url}")
        r.assert_outcomes(passed=1)
        r.stdout.fnmatch_lines([f"appended this run to the store as run * (2 rows); find steps with: *history {url}"])
    assert SqlStore(url).counts() == (2, 4)  # each run: fp32 and its reference, fp16
    with SqlStore(url).engine.connect() as c:
        judged = c.exec_driver_sql("SELECT reference, speedup_low, speedup, speedup_high, verdict FROM rows "
                                   "WHERE precision = 'fp32'").all()  # fmt: skip
    assert len(judged) == 2 and all(r[0] == "fp16" and r[1] < r[2] < r[3] and r[4] == "no floor" for r in judged)
    assert main(["history", url]) == 0
    assert "test_vit" in capsys.readouterr().out
    r = suite.runpytest(*FAST, "--vitperf-precisions=fp32", "--vitperf-store=mysql://host/db")
    assert r.ret == pytest.ExitCode.USAGE_ERROR  # said as the plugin configures: nothing measured in vain
    r.stderr.fnmatch_lines(["ERROR: --vitperf-store mysql://host/db: a mysql URL; give sqlite:///FILE, *"])
    # a store spoilt while the run measured (here, at its last teardown) is found only on writing, and fails the run
    suite.makeconftest("""
import pathlib, pytest
@pytest.fixture(scope="session", autouse=True)
def spoil():
    yield
    pathlib.Path("spoilt.db").write_text("not a database any more")
""")
    r = suite.runpytest(*FAST, "--vitperf-precisions=fp32", f"--vitperf-store={suite.path / 'spoilt.db'}")
    r.assert_outcomes(passed=1)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["NOT WRITTEN: store *spoilt.db: file is not a database; the run fails: fix that, *"])


def test_change_points_come_from_the_store_as_from_a_folder(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = open_history(url)
    for i, v in enumerate(two_steps(0)):
        store.append([measured("fp16", v, "10.16" if i < 40 else "11.4")], T0 + timedelta(days=i))
    assert main(["history", url, "--fail-on-slowdown"]) == 1
    assert "run 41 (2026-12-11T02:00:00+00:00, torch 11.4)" in capsys.readouterr().out


def test_a_rows_runs_in_the_store_are_its_baseline(store_url: str) -> None:
    """--vitperf-store-baselines: the gate reads a row's runs in the store as it reads a baseline file's: a START begins
    a new group (the reference), a FLAGGED run is left out, the newest MAX_RUNS count, and another GPU model's runs
    are named, never judged with."""
    from pytest_vitperf.store.baselines import MAX_RUNS
    from pytest_vitperf.verdicts.baselines.gate import COMPARED, ELSEWHERE, FLAGGED, START, judge, key_for, prior_for

    store = SqlStore(store_url)
    nights = [(6.50, None), (6.55, None), (6.48, None), (7.20, FLAGGED), (6.00, START), (6.05, None), (6.02, None)]
    for day, (ms, role) in enumerate(nights):
        m = measured("fp16", ms)
        store.append([m, measured("fp8", 5.2)], T0 + timedelta(days=day), roles={key_for(m): role} if role else None,
                     environment={"driver": f"58{day}"})  # fmt: skip
    key = key_for(measured("fp16", 1.0))
    got = SqlStore(store_url).get(key)  # another reader, as the next night's process is
    assert got is not None and got.key == key
    assert [(r.median_ms, r.group) for r in got.runs] == [(6.5, 0), (6.55, 0), (6.48, 0), (6.0, 1), (6.05, 1),
                                                          (6.02, 1)]  # fmt: skip
    assert got.value == pytest.approx(math.exp((math.log(6.0) + math.log(6.05) + math.log(6.02)) / 3))
    assert got.environment == {"driver": "584"} and got.runs[0].date == "2026-11-01"  # the new baseline's first run
    assert store.where(key).endswith("[torch 2.11.0, NVIDIA H100 80GB HBM3, vit_base_patch16_224 fp16/b64]")
    assert sorted(b.key.entry for b in store.beside(key)) == ["fp16/b64", "fp8/b64"] == sorted(
        b.key.entry for b in store.all())
    assert prior_for(store, key, "") is None  # two rows: too few to lend a prior

    with store.engine.begin() as c:  # a run whose environment another writer left unreadable lends no note
        c.exec_driver_sql("UPDATE runs SET environment = '{not json' WHERE id = 1")
    fp8 = SqlStore(store_url).get(key_for(measured("fp8", 1.0)))  # its baseline's first run is that one
    assert fp8 is not None and fp8.environment == {} and len(fp8.runs) == 7
    o = judge(store, measured("fp16", 6.03), threshold=0.03, environment={"driver": "590"})
    assert o.kind == COMPARED and o.comparison is not None and o.comparison.runs == 6
    assert o.env_changes == ("driver 584 -> 590",) and o.failure is None

    h200 = measured("fp16", 4.0)
    h200 = replace(h200, spec=replace(h200.spec, device="NVIDIA H200"))
    assert judge(store, h200, threshold=0.03, environment={}).kind == ELSEWHERE  # named, never judged with H100's
    store.append([h200])
    assert store.others(key_for(h200)) == [key]
    assert judge(SqlStore(store_url), h200, threshold=0.03, environment={}).kind == COMPARED  # its own, now
    h100 = key_for(measured("fp16", 1.0, "2.12.0"))
    assert SqlStore(store_url).get(h100) is None and SqlStore(store_url).others(h100) == []

    for day in range(MAX_RUNS + 2):
        store.append([measured("fp8", 5.0 + day / 1000)], T0 + timedelta(days=10 + day))
    fp8 = SqlStore(store_url).get(key_for(measured("fp8", 1.0)))
    assert fp8 is not None and len(fp8.runs) == MAX_RUNS and fp8.runs[-1].median_ms == 5.0 + (MAX_RUNS + 1) / 1000


# A store that cannot be written is found as the run starts, not after it measured (a nightly spends its hour first).
BAD_STORES = {
    "a text file": ("notes.txt", "file is not a database"),
    "a server that is not there": ("postgresql+psycopg://vitperf@127.0.0.1:1/none", "Connection refused"),
}


@pytest.mark.parametrize("case", BAD_STORES)
def test_a_store_that_cannot_be_written_is_a_usage_error_before_anything_is_built(suite: pytest.Pytester,
                                                                                   case: str) -> None:  # fmt: skip
    import time

    where, said = BAD_STORES[case]
    (suite.path / "notes.txt").write_text("the nightly's notes, not a database\n")
    started = time.perf_counter()
    result = suite.runpytest(*FAST, f"--vitperf-store={where}", f"--vitperf-cache-dir={suite.path / 'cache'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR and time.perf_counter() - started < 10
    errors = [line for line in result.errlines if line.startswith("ERROR: ")]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: --vitperf-store {where}: ") and said in errors[0]
    assert "give a store this run can write" in errors[0]
    assert not (suite.path / "cache").exists() and "vitperf summary" not in result.stdout.str()  # nothing built
    assert (suite.path / "notes.txt").read_text() == "the nightly's notes, not a database\n"  # and nothing lost


def test_vitperf_ab_and_calibrate_refuse_such_a_store_before_their_first_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("not a database\n")
    store, work = str(tmp_path / "notes.txt"), tmp_path / "work"
    sides = ["--a", sys.executable, "--b", sys.executable]
    assert main(["ab", *sides, "--store", store, "--work-dir", str(work), "--", "suites/"]) == 2
    assert main(["calibrate", "--runs", "3", "--store", store, "--", "suites/"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": ")[0] for line in err] == ["vitperf ab", "vitperf calibrate"]
    assert all("file is not a database" in line for line in err) and not work.exists()
