"""Reading the project's JSON files (floors, baselines, trtexec traces) with errors that name the file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


class FileError(ValueError):
    """A project file that cannot be used; the message names the file and what is wrong."""

    kind = "file"

    def __init__(self, path: Path, what: str) -> None:
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
    try:
        return json.loads(prepare(text) if prepare is not None else text)
    except json.JSONDecodeError as exc:
        raise error(path, f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
