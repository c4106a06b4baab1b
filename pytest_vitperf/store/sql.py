"""A fleet's history in a database (--vitperf-store URL): every run's rows written through SQLAlchemy, SQLite by
default (a file, no server), PostgreSQL where many hosts write (`postgresql+psycopg://...`).

A run is one transaction: its `runs` row and all of its `rows` commit together or not at all, so a writer killed
mid-run leaves nothing that a reader could take for a whole run. A run's id is a fresh UUID, unique in the table,
so a run lands once. The schema is Alembic's (migrations/, applied on open, under a lock so that writers opening a
new store at once do not race to create it).

`series()` gives the same points as a --vitperf-history folder, so `vitperf history` and its change points read
either. With --vitperf-store-baselines the store is also the gate's baseline storage (store.BaselineStorage): a
row's baseline is its newest runs in the store on its GPU model and backend version, each row's `role` saying what
it is to that baseline (`baseline_runs`).
"""

from __future__ import annotations

import importlib.util
import json
import math
import socket
import uuid
from collections.abc import Iterable
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_vitperf.core.files import FileError
from pytest_vitperf.measure.measurement import Measurement
from pytest_vitperf.store.baselines import FLAGGED, MAX_RUNS, RUN, START, Baseline, BaselineKey, Run, key_for, tool
from pytest_vitperf.store.history import Folder, History, Point, entry_of

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    import sqlalchemy as sa


MIGRATIONS = Path(__file__).parent / "migrations"
SCHEMES = ("sqlite", "postgresql")


class StoreError(FileError):
    kind = "store"


def url_of(where: str | Path) -> str:
    """A database URL: as given, or a file path made a SQLite URL (the embedded default)."""
    text = str(where)
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).expanduser().resolve()}"


def shown(where: str | Path) -> str:
    """The store's URL as a summary may print it: its password hidden."""
    import sqlalchemy as sa

    return sa.engine.make_url(url_of(where)).render_as_string(hide_password=True)


def url_problem(where: str) -> str | None:
    """Why `where` cannot name a store, or None."""
    url = url_of(where)
    scheme = url.split("://", 1)[0].split("+", 1)[0]
    if scheme not in SCHEMES:
        return f"a {scheme} URL; give sqlite:///FILE, a file path, or postgresql+psycopg://HOST/DB"
    if scheme == "sqlite":
        folder = Path(url.removeprefix("sqlite:///")).parent
        if not folder.is_dir():
            return f"{folder} is not a folder; make it, or give another file"
    elif importlib.util.find_spec("psycopg") is None:
        return "PostgreSQL needs psycopg, which is not installed: pip install 'pytest-vitperf[postgres]'"
    return None


def store_problem(where: str) -> str | None:
    """Why `where` cannot serve as a store, found before anything is measured: its URL (url_problem), or the database
    it names, opened and brought to the schema (a file that is not a database, a server that does not answer in
    CONNECT_TIMEOUT_S, a schema that is not the store's); or None."""
    problem = url_problem(where)
    if problem is not None:
        return problem
    try:
        SqlStore(where).engine.dispose()
    except StoreError as exc:
        return str(exc).split(": ", 1)[-1] + "; give a store this run can write, or leave the option out"
    return None


CONNECT_TIMEOUT_S = 10  # a PostgreSQL server that does not answer: a nightly must not wait the OS's TCP timeout


class SqlStore:
    """The runs and rows of a database, through SQLAlchemy Core."""

    def __init__(self, where: str | Path) -> None:
        import sqlalchemy as sa

        self.url = url_of(where)
        sqlite = self.url.startswith("sqlite")
        # SQLite: wait for another writer's transaction rather than fail at once.
        wait = {"timeout": 120} if sqlite else {"connect_timeout": CONNECT_TIMEOUT_S}
        self.engine = sa.create_engine(self.url, connect_args=wait)
        self.shown = shown(self.url)
        self._baselines: dict[tuple[str, str, str], dict[tuple[str, str], Baseline]] = {}
        with self._said():
            self._migrate()

    @contextmanager
    def _said(self) -> Iterator[None]:
        """A database's error as one line naming the store (its password hidden)."""
        import sqlalchemy as sa

        try:
            yield
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(self.shown, _first_line(exc)) from None

    def _migrate(self) -> None:
        """Bring the schema to Alembic's head, one opener at a time."""
        import sqlalchemy as sa
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with self._locked() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
            # The tables as the migrations left them: the schema is written once, in versions/.
            meta = sa.MetaData()
            self.runs, self.rows, self.ab_rows = (sa.Table(name, meta, autoload_with=connection)
                                                  for name in ("runs", "rows", "ab_rows"))  # fmt: skip

    @contextmanager
    def _locked(self) -> Iterator[sa.Connection]:
        import sqlalchemy as sa

        with self.engine.begin() as connection:
            if self.engine.dialect.name == "postgresql":
                connection.execute(sa.text("SELECT pg_advisory_xact_lock(5717)"))  # the store's migration lock
            else:
                connection.exec_driver_sql("BEGIN IMMEDIATE")  # SQLite's write lock, held to the commit
            yield connection

    def append(
        self,
        measurements: Iterable[Measurement],
        when: datetime | None = None,
        rows: Iterable[Mapping[str, Any]] = (),
        *,
        roles: Mapping[BaselineKey, str] | None = None,
        environment: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """One run with a row per measurement, each with its speedup and floor verdict where it has one and its role
        in its baseline (gate.roles; RUN where none is given), in one transaction; what was written, for the
        summary."""
        import sqlalchemy as sa

        judged = {((r["model"], r["precision"], r["batch"], r["backend"]), r["gpu_uuid"]): r for r in rows}
        roles = roles or {}
        table = [{**_row(m), **_judged(judged.get((m.spec.key, m.spec.gpu_uuid))), "role": roles.get(key_for(m), RUN)}
                 for m in measurements]  # fmt: skip
        run = {**_run(when, tool()), "environment": json.dumps(dict(environment or {}), sort_keys=True, default=str)}
        with self._said(), self.engine.begin() as connection:
            (key,) = connection.execute(sa.insert(self.runs).values(**run)).inserted_primary_key or (None,)
            if table:
                connection.execute(sa.insert(self.rows), [{"run_id": key, **r} for r in table])
        starts = sum(r["role"] == START for r in table)
        return [f"run {run['uid']} ({len(table)} rows" + (f", {starts} starting new baselines)" if starts else ")")]

    def append_ab(self, rows: Iterable[Mapping[str, Any]], facts: dict[str, Any], when: datetime | None = None) -> str:
        """One `vitperf ab` run: a `runs` row and its verdicts (B over A with its interval, per row and GPU; each as
        verdicts/ab.Row.to_dict gives it), in one transaction; its id."""
        import sqlalchemy as sa

        run = _run(when, f"vitperf ab ({tool()})")
        common = {"side_a": facts["a"], "side_b": facts["b"], "device": facts["device"],
                  "threshold": facts["threshold"], "confidence": facts["confidence"]}  # fmt: skip
        with self._said(), self.engine.begin() as connection:
            (key,) = connection.execute(sa.insert(self.runs).values(**run)).inserted_primary_key or (None,)
            values = [{"run_id": key, **common, **_ab_row(r)} for r in rows]
            if values:
                connection.execute(sa.insert(self.ab_rows), values)
        return run["uid"]

    def series(self) -> dict[tuple[str, str, str, str], list[Point]]:
        """(backend, GPU, model, entry) -> its points in time order, across backend versions."""
        import sqlalchemy as sa

        runs = self.runs
        query = sa.select(runs.c.time, self.rows).join(runs, self.rows.c.run_id == runs.c.id)
        out: dict[tuple[str, str, str, str], list[Point]] = {}
        with self._said(), self.engine.connect() as connection:
            for r in connection.execute(query.order_by(runs.c.time, runs.c.id)).mappings():
                point = Point(r["time"], r["backend_version"], r["median_ms"], r["cov"], r["sm_mhz"])
                out.setdefault((r["backend"], r["gpu"], r["model"], r["entry"]), []).append(point)
        return dict(sorted(out.items()))

    # -- the store as the gate's baselines (store.BaselineStorage) ---------------------------------------------
    def where(self, key: BaselineKey) -> str:
        return f"{self.shown} [{key.backend} {key.backend_version}, {key.gpu}, {key.model} {key.entry}]"

    def get(self, key: BaselineKey) -> Baseline | None:
        return self._beside(key.backend, key.backend_version, key.gpu).get((key.model, key.entry))

    def beside(self, key: BaselineKey) -> list[Baseline]:
        return list(self._beside(key.backend, key.backend_version, key.gpu).values())

    def others(self, key: BaselineKey) -> list[BaselineKey]:
        """The key on the other GPU models that have runs of it."""
        import sqlalchemy as sa

        rows = self.rows
        same = (rows.c.backend == key.backend, rows.c.backend_version == key.backend_version,
                rows.c.model == key.model, rows.c.entry == key.entry, rows.c.gpu != key.gpu)  # fmt: skip
        with self._said(), self.engine.connect() as connection:
            gpus = connection.execute(sa.select(rows.c.gpu).where(*same).distinct().order_by(rows.c.gpu)).scalars()
            return [BaselineKey(key.backend, key.backend_version, g, key.model, key.precision, key.batch, key.cold)
                    for g in gpus]  # fmt: skip

    def all(self) -> Iterator[Baseline]:
        import sqlalchemy as sa

        rows = self.rows
        with self._said(), self.engine.connect() as connection:
            where = connection.execute(sa.select(rows.c.backend, rows.c.backend_version, rows.c.gpu).distinct()).all()
        for backend, version, gpu in sorted(where):
            yield from self._beside(backend, version, gpu).values()

    def _beside(self, backend: str, version: str, gpu: str) -> dict[tuple[str, str], Baseline]:
        """Every row's baseline on a backend version and GPU model, read once per store object (as a baselines
        folder's files are)."""
        where = (backend, version, gpu)
        if where not in self._baselines:
            self._baselines[where] = baseline_runs(self._runs_of(*where), where, self.shown)
        return self._baselines[where]

    def _runs_of(self, backend: str, version: str, gpu: str) -> list[dict[str, Any]]:
        """The newest MAX_RUNS rows of each (model, entry) that a baseline may hold (not FLAGGED), oldest first."""
        import sqlalchemy as sa

        rows, runs = self.rows, self.runs
        newest = sa.func.row_number().over(partition_by=(rows.c.model, rows.c.entry), order_by=runs.c.id.desc())
        picked = (
            sa.select(rows.c.model, rows.c.entry, rows.c.precision, rows.c.batch, rows.c.median_ms, rows.c.gpu_uuid,
                      rows.c.sm_mhz, rows.c.role, runs.c.id.label("run"), runs.c.time, runs.c.environment,
                      newest.label("k"))
            .join(runs, rows.c.run_id == runs.c.id)
            .where(rows.c.backend == backend, rows.c.backend_version == version, rows.c.gpu == gpu,
                   sa.or_(rows.c.role.is_(None), rows.c.role != FLAGGED))
            .subquery()
        )  # fmt: skip
        query = sa.select(picked).where(picked.c.k <= MAX_RUNS).order_by(picked.c.run)
        with self._said(), self.engine.connect() as connection:
            return [dict(r) for r in connection.execute(query).mappings()]

    def counts(self) -> tuple[int, int]:
        """How many runs and rows the store holds."""
        import sqlalchemy as sa

        with self.engine.connect() as connection:
            runs, rows = (connection.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                          for t in (self.runs, self.rows))  # fmt: skip
        return int(runs), int(rows)


def baseline_runs(
    rows: Iterable[Mapping[str, Any]], where: tuple[str, str, str], source: str
) -> dict[tuple[str, str], Baseline]:
    """The baselines that a store's rows of one (backend, version, GPU) make, by (model, entry), from rows in run
    order: a START row begins a new group (the new normal, as a refreshed baseline file does), the newest group is
    the reference, and the value is its geometric mean; the environment and date are those of its first run."""
    by_row: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        by_row.setdefault((r["model"], r["entry"]), []).append(r)
    out = {}
    for (model, entry), found in by_row.items():
        group, runs = 0, []
        for r in found:
            group += r["role"] == START
            runs.append(Run(float(r["median_ms"]), str(r["time"])[:10], r["gpu_uuid"] or "", r["sm_mhz"], group))
        first = next(r for r, run in zip(found, runs, strict=True) if run.group == group)
        reference = [run.median_ms for run in runs if run.group == group]
        key = BaselineKey(*where, model, first["precision"], int(first["batch"]), entry.endswith("/cold"))
        out[(model, entry)] = Baseline(
            key, "median", math.exp(math.fsum(map(math.log, reference)) / len(reference)),
            environment=_environment(first["environment"]),
            provenance={"kind": "store", "source": source, "date": str(first["time"])},
            runs=tuple(runs),
        )  # fmt: skip
    return out


def _environment(text: str | None) -> dict[str, Any]:
    """A run's stored environment; one that another writer left unreadable lends no "driver X -> Y" note."""
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _run(when: datetime | None, by: str) -> dict[str, str]:
    """A new `runs` row: a fresh UUID (so a run lands once), the time, the host and what wrote it."""
    stamp = (when or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    return {"uid": str(uuid.uuid4()), "time": stamp, "host": socket.gethostname(), "tool": by}


def _row(m: Measurement) -> dict[str, Any]:
    key = key_for(m)
    e = entry_of(m)
    return {"backend": key.backend, "backend_version": key.backend_version, "gpu": key.gpu, "model": key.model,
            "gpu_uuid": m.spec.gpu_uuid or "", "entry": key.entry, "precision": key.precision, "batch": key.batch,
            "median_ms": e["median"], "cov": e["cov"], "n": e["n"], "sm_mhz": e["sm_mhz"]}  # fmt: skip


def _judged(r: Mapping[str, Any] | None) -> dict[str, Any]:
    """A row's record (verdicts/rows.RowVerdict.to_dict) as the summary shows it; every row names the same columns:
    one insert takes them all."""
    if r is None:
        return dict.fromkeys(("reference", "speedup", "floor", "floor_set_on", "verdict", "speedup_low",
                              "speedup_high"))  # fmt: skip
    i = r["time"] or {}
    # With rounds, the speedup is the interval's own estimate, as the summary prints it: the ratio of the two
    # medians can fall just outside the interval of the rounds' ratios.
    return {"reference": r["reference"], "speedup": i.get("estimate", r["speedup"]), "floor": r["floor"],
            "floor_set_on": r.get("set_on") or None, "verdict": r["outcome"], "speedup_low": i.get("low"),
            "speedup_high": i.get("high")}  # fmt: skip


def _ab_row(r: Mapping[str, Any]) -> dict[str, Any]:
    i = r["interval"] or {}
    return {"name": r["name"], "what": r["what"], "gpu": r["gpu"], "rounds": r["rounds"], "verdict": r["verdict"],
            "ratio": i.get("estimate"), "ratio_low": i.get("low"), "ratio_high": i.get("high"),
            "detectable": r["detectable"]}  # fmt: skip


def _first_line(exc: BaseException) -> str:
    return (str(getattr(exc, "orig", None) or exc).splitlines() or [type(exc).__name__])[0][:300]


def open_history(where: str | Path) -> History:
    """A database (--vitperf-store's URL, or a SQLite file) or a folder (--vitperf-history)."""
    if "://" in str(where) or Path(where).is_file():
        return SqlStore(where)
    return Folder(Path(where))
