"""The project's files: JSON read with errors that name the file (floors, baselines, trtexec traces), and written
atomically (baselines, history, plans, caches)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


class FileError(ValueError):
    """A project file that cannot be used; the message names the file and what is wrong."""

    kind = "file"

    def __init__(self, path: Path | str, what: str) -> None:  # str: a URL, which a Path would mangle
        super().__init__(f"{self.kind} {path}: {what}")
        self.path = path


def read_json(
    path: Path, error: Callable[[Path, str], Exception], prepare: Callable[[str], str] | None = None
) -> Any:
    """Parsed JSON of `path` (its text passed through `prepare` first, if given); an unreadable or malformed file
    raises `error(path, what is wrong)`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise error(path, f"cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise error(path, f"is not UTF-8 text (byte {exc.start}), so not JSON") from None
    try:
        return json.loads(prepare(text) if prepare is not None else text)
    except json.JSONDecodeError as exc:
        what = exc.msg.removesuffix(" at")  # "Unterminated string starting at" would read "at at line"
        raise error(path, f"is not valid JSON: {what} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise error(path, "is not valid JSON: nested too deeply") from None


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace `path` with `data` so that a crash at any point leaves the old file or the new one whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file private; keep the old file's mode, or an ordinary readable one.
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
