"""The sample outputs in the docs, made by the code: each fenced block after a marker is what that marker's command
prints today. `tests/test_docs_kinds.py` holds the docs to them; this script writes them.

    <!-- output of: vitperf compare --from tensorrt/10.14.1 --to tensorrt/10.16.0 -->
    <!-- summary of: tests/data/h200-main-job-2026-12-01.json -->

The marker stands on the line before the block, or with one blank line between. `output of` runs a `vitperf`
command in the repository's root; `summary of` renders the terminal summary of a stored `--benchmark-json` (its
table and the notes under it), as the run printed it. In a block, a line `...` stands for any number of lines of the
output left out.

    python tools/doc_samples.py            # say which blocks differ
    python tools/doc_samples.py --write    # write every block from the code
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- (output of|summary of): (.+?) -->\n\n?```text\n(.*?)^```$", re.M | re.S)
SKIP = "..."


def printed(kind: str, what: str) -> list[str]:
    """What the marker's command prints, line by line."""
    if kind == "summary of":
        from pytest_vitperf.measure.measurement import read_benchmark_json
        from pytest_vitperf.report.tables import interval_notes, summary
        from pytest_vitperf.results import stored_rows

        path = REPO / what
        ms = read_benchmark_json(path)
        rows, _ = stored_rows(path, ms, REPO / "suites" / "floors.json")
        return [*summary(ms, rows), *interval_notes(ms, rows, 0.95)]
    from pytest_vitperf.cli import main

    words = shlex.split(what)
    assert words[0] == "vitperf", what
    out = io.StringIO()
    here = Path.cwd()
    os.chdir(REPO)
    try:
        with contextlib.redirect_stdout(out):
            main(words[1:])
    finally:
        os.chdir(here)
    return out.getvalue().rstrip("\n").splitlines()


def agrees(shown: list[str], made: list[str]) -> bool:
    """Whether a block shows the output: line for line, a `...` line standing for any run of lines left out."""
    at = 0
    for i, line in enumerate(shown):
        if line == SKIP:
            following = shown[i + 1] if i + 1 < len(shown) else None
            if following is None:
                return True
            while at < len(made) and made[at] != following:
                at += 1
            continue
        if at >= len(made) or made[at] != line:
            return False
        at += 1
    return at == len(made)


def blocks(page: Path) -> Iterator[tuple[re.Match[str], list[str]]]:
    """Each marked block of a page, with what its command prints."""
    for m in MARKER.finditer(page.read_text()):
        yield m, printed(m.group(1), m.group(2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write every marked block from the code")
    args = parser.parse_args(argv)
    differ = 0
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text()
        for m, made in reversed(list(blocks(page))):
            if agrees(m.group(3).rstrip("\n").splitlines(), made):
                continue
            differ += 1
            print(f"{page.relative_to(REPO)}: the block after '{m.group(1)}: {m.group(2)}' is not what it prints")
            if args.write:
                text = text[: m.start(3)] + "\n".join(made) + "\n" + text[m.end(3) :]
        if args.write:
            page.write_text(text)
    return 1 if differ and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
