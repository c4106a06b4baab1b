"""A fleet's history in a database (--vitperf-store URL): every run's rows written through SQLAlchemy, SQLite by
default (a file, no server), PostgreSQL where many hosts write (`postgresql+psycopg://...`).

A run is one transaction: its `runs` row and all of its `rows` commit together or not at all, so a writer killed
mid-run leaves nothing that a reader could take for a whole run. A run's id is a fresh UUID, unique in the table,
so a run lands once. The schema is Alembic's (migrations/, applied on open, under a lock so that writers opening a
new store at once do not race to create it).

`series()` gives the same points as a --vitperf-history folder, so `vitperf history` and its change points read
either.
"""

from __future__ import annotations

import importlib.util
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
from pytest_vitperf.verdicts.baselines.gate import key_for, tool
from pytest_vitperf.verdicts.baselines.history import Point, entry_of

if TYPE_CHECKING:
    from collections.abc import Iterator

    import sqlalchemy as sa

    from pytest_vitperf.verdicts.ab import Row
    from pytest_vitperf.verdicts.floors import Verdict

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


class SqlStore:
    """The runs and rows of a database, through SQLAlchemy Core."""

    def __init__(self, where: str | Path) -> None:
        import sqlalchemy as sa

        self.url = url_of(where)
        sqlite = self.url.startswith("sqlite")
        # SQLite: wait for another writer's transaction rather than fail at once.
        self.engine = sa.create_engine(self.url, connect_args={"timeout": 120} if sqlite else {})
        self.where = sa.engine.make_url(self.url).render_as_string(hide_password=True)
        with self._said():
            self._migrate()

    @contextmanager
    def _said(self) -> Iterator[None]:
        """A database's error as one line naming the store (its password hidden)."""
        import sqlalchemy as sa

        try:
            yield
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(self.where, _first_line(exc)) from None

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
        self, measurements: Iterable[Measurement], when: datetime | None = None, verdicts: Iterable[Verdict] = ()
    ) -> list[str]:
        """One run with a row per measurement, each with its speedup and floor verdict where it has one, in one
        transaction; what was written, for the summary."""
        import sqlalchemy as sa

        judged = {v.candidate.spec.key: v for v in verdicts}
        rows = [{**_row(m), **_judged(judged.get(m.spec.key))} for m in measurements]
        run = _run(when, tool())
        with self._said(), self.engine.begin() as connection:
            (key,) = connection.execute(sa.insert(self.runs).values(**run)).inserted_primary_key or (None,)
            if rows:
                connection.execute(sa.insert(self.rows), [{"run_id": key, **r} for r in rows])
        return [f"run {run['uid']} ({len(rows)} rows)"]

    def append_ab(self, rows: Iterable[Row], facts: dict[str, Any], when: datetime | None = None) -> str:
        """One `vitperf ab` run: a `runs` row and its verdicts (B over A with its interval, per row and GPU), in one
        transaction; its id."""
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

    def counts(self) -> tuple[int, int]:
        """How many runs and rows the store holds."""
        import sqlalchemy as sa

        with self.engine.connect() as connection:
            runs, rows = (connection.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                          for t in (self.runs, self.rows))  # fmt: skip
        return int(runs), int(rows)


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


def _judged(v: Verdict | None) -> dict[str, Any]:
    """Every row names the same columns: one insert takes them all."""
    if v is None:
        return dict.fromkeys(("reference", "speedup", "floor", "verdict", "speedup_low", "speedup_high"))
    interval = v.interval()
    return {"reference": v.reference.spec.precision, "speedup": v.speedup, "floor": v.floor, "verdict": v.outcome,
            "speedup_low": interval.low if interval else None, "speedup_high": interval.high if interval else None}


def _ab_row(r: Row) -> dict[str, Any]:
    i = r.interval
    return {"name": r.name, "what": r.what, "gpu": r.gpu, "rounds": r.rounds, "verdict": r.verdict,
            "ratio": i.estimate if i else None, "ratio_low": i.low if i else None, "ratio_high": i.high if i else None,
            "detectable": r.detectable if math.isfinite(r.detectable) else None}  # fmt: skip


def _first_line(exc: BaseException) -> str:
    return (str(getattr(exc, "orig", None) or exc).splitlines() or [type(exc).__name__])[0][:300]
