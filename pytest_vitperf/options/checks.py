"""Every path option checked when the plugin configures, before any model is built: a weights file that is not
one, an accuracy folder without images, a floors file that does not parse, a cache folder that cannot be written.
Each gets one line naming the option and the path, as a usage error (exit 4), instead of a traceback per test
minutes later. Cheap checks only: nothing here imports torch; check_store opens the store, through SQLAlchemy alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_vitperf.core.settings import Settings
from pytest_vitperf.engines.models.zoo import PRETRAINED, weights_problem
from pytest_vitperf.options import (
    ACCURACY_DATA,
    BASELINE_DIR,
    CACHE_DIR,
    EXPORT,
    FLOORS,
    HISTORY,
    RECORD_RUN,
    RELAY,
    REPORT,
    STORE,
    STORE_BASELINES,
    TURN_DONE,
    UNITS,
    UPDATE_BASELINES,
    WAIT_FOR,
    WEIGHTS,
)

# torchvision's ImageFolder takes these (torchvision.datasets.folder.IMG_EXTENSIONS; tests hold them equal)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def check_paths(s: Settings) -> None:
    """Raise a usage error for the first path option that cannot serve."""
    problems = [
        *((WEIGHTS, f"{model}={path}", weights_problem(Path(path))) for model, path in s.weights if path != PRETRAINED),
        (ACCURACY_DATA, s.accuracy_data, s.accuracy_data and image_folder_problem(s.accuracy_data)),
        (FLOORS, s.floors, s.floors and floors_problem(s.floors)),
        (CACHE_DIR, s.cache_dir, s.cache_dir and writable_folder_problem(s.cache_dir)),
        (HISTORY, s.history, s.history and writable_folder_problem(s.history)),
        (STORE, s.store, s.store and _store_problem(s.store)),
        (REPORT, s.report, s.report and writable_folder_problem(s.report)),
        (BASELINE_DIR, s.baseline_dir, s.baseline_dir and not s.store_baselines and baseline_dir_problem(s)),
        (STORE_BASELINES, "", s.store_baselines and not s.store and f"reads {STORE}'s; give both"),
        *((EXPORT, f"{fmt}={path}", writable_folder_problem(Path(path).parent)) for fmt, path in s.export),
        (WAIT_FOR, s.wait_for, s.wait_for and _folder_of_problem(s.wait_for)),
        (TURN_DONE, s.turn_done, s.turn_done and _folder_of_problem(s.turn_done)),
        (RELAY, s.relay, s.relay and _folder_of_problem(s.relay)),
        (UNITS, s.units, s.units and units_problem(s.units, waits=s.wait_for is not None)),
    ]
    for flag, value, problem in problems:
        if problem:
            raise pytest.UsageError(f"{flag} {value}: {problem}" if value != "" else f"{flag}: {problem}")


def units_problem(units: Path, waits: bool) -> str | None:
    """What is wrong with a --vitperf-units file. A process that waits for its turn may be started before the file is
    written (vitperf ab starts a block's processes before the look that names the rows still open): its folder is
    checked now, the file itself once the turn has come."""
    if waits and not units.exists():
        return _folder_of_problem(units)
    return None if units.is_file() else "is not a file; give the units to run, one a line"


def _store_problem(url: str) -> str | None:
    from pytest_vitperf.store.sql import url_problem

    return url_problem(url)


def check_store(s: Settings) -> None:
    """Open --vitperf-store and check its schema, as a usage error now: a run must not measure for an hour and then
    find that it cannot write its rows (store.sql.store_problem)."""
    if s.store:
        from pytest_vitperf.store.sql import store_problem

        problem = store_problem(s.store)
        if problem:
            raise pytest.UsageError(f"{STORE} {s.store}: {problem}")


def check_cache(cache_dir: Path) -> list[str]:
    """The cache folder's compiled parts checked before anything loads them (core/signing.py): each one a key this
    host trusts did not sign is moved aside, one line each (returned, for the header). A folder other users can
    write is refused unless it is signed, as a usage error."""
    from pytest_vitperf.core.signing import (
        KEY_ENV,
        cache_key,
        checked_by_caller,
        key_file,
        others_can_write,
        signed_anywhere,
        trust,
    )

    if checked_by_caller(cache_dir):
        return []
    try:
        key = cache_key()
    except OSError as exc:
        raise pytest.UsageError(f"{CACHE_DIR} {cache_dir}: the key that signs its compiled parts cannot be read or "
                                f"made at {key_file()} ({exc.strerror or exc}); set {KEY_ENV}") from None  # fmt: skip
    if cache_dir.is_dir() and others_can_write(cache_dir) and not signed_anywhere(cache_dir, key):
        raise pytest.UsageError(f"{CACHE_DIR} {cache_dir}: other users can write it and nothing in it is signed with "
                                f"this host's key; chmod o-w {cache_dir}, or give a folder of your own")  # fmt: skip
    try:
        return trust(cache_dir, key)
    except OSError as exc:
        raise pytest.UsageError(f"{CACHE_DIR} {cache_dir}: its compiled parts cannot be checked "
                                f"({exc.strerror or exc}); give a folder of your own") from None  # fmt: skip


def writable_folder_problem(path: Path) -> str | None:
    """Why files cannot be written in folder `path` (made if missing), or None."""
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        return f"{existing} is not a folder; give a folder that can be written"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} cannot be written; give a folder that can be"
    return None


def _folder_of_problem(path: Path) -> str | None:
    return None if path.parent.is_dir() else f"its folder {path.parent} does not exist; give a file in one that does"


def baseline_dir_problem(s: Settings) -> str | None:
    assert s.baseline_dir is not None
    if s.baseline_dir.exists() and not s.baseline_dir.is_dir():
        return "is not a folder; give the baselines folder, e.g. baselines/"
    if s.update_baselines or s.record_run:
        flag = UPDATE_BASELINES if s.update_baselines else RECORD_RUN
        problem = writable_folder_problem(s.baseline_dir)
        return problem and f"{problem} ({flag} writes there)"
    return None


def floors_problem(path: Path) -> str | None:
    """A floors file that does not exist or does not parse: what is wrong, in the floors reader's words."""
    from pytest_vitperf.verdicts.floors import FloorsFile, FloorsFileError

    try:
        FloorsFile.load(path)
    except FloorsFileError as exc:
        return str(exc).split(": ", 1)[-1] + "; fix it (format in docs/floors.md) or name another"
    return None


def image_folder_problem(root: Path) -> str | None:
    """Why `root` is not an ImageFolder: no folder, no class sub-folders, or a class without images."""
    if not root.is_dir():
        return "is not a folder; give one with a sub-folder of images per class"
    classes = sorted(p for p in root.iterdir() if p.is_dir())
    if not classes:
        return "has no class sub-folders; give one with a sub-folder of images per class"
    for c in classes:
        if not any(f.lower().endswith(IMAGE_SUFFIXES) for _, _, files in os.walk(c) for f in files):
            return f"class folder {c.name!r} holds no images ({', '.join(IMAGE_SUFFIXES)}); add some or remove it"
    return None
