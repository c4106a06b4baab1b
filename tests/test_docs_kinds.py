"""The docs by kind stay true: reference pages say what each thing is briefly and date nothing outside links to
records, the options page gives each option's default as the code does, and every sample output is what the code
prints today (tools/doc_samples.py writes them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_vitperf import options as o
from pytest_vitperf.options.table import CHILD_ONLY, FLAGS, OPTIONS
from tests.conftest import load_tool

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
# Reference pages: what each thing is, in a sentence or two. How-tos, explanation and the dated records are others.
REFERENCE = ["options.md", "report.md", "exit-codes.md", "floors.md", "baselines.md", "backends.md", "bad-input.md",
             "fixtures.md", "glossary.md"]  # fmt: skip
HOW_TO = ["gate-an-upgrade.md", "make-floors.md", "own-vit.md", "several-gpus.md"]
EXPLANATION = ["statistics.md", "ab-design.md", "baseline-gate.md", "accuracy.md", "numerics.md", "attention.md",
               "engines.md"]  # fmt: skip
MOST_WORDS = 120
DATE = re.compile(r"\b20\d\d-\d\d(?:-\d\d)?\b")
LINK = re.compile(r"!?\[[^\]]*\]\([^)]*\)")


def _prose(page: Path) -> str:
    """The page without its code blocks and HTML comments: what a reader reads as text."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


def _blocks(text: str) -> list[str]:
    """Each paragraph, list item and table cell."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        out += block.split("|") if block.lstrip().startswith("|") else re.split(r"\n\s*(?:[-*]|\d+\.) ", block)
    return out


def test_every_page_of_the_docs_has_one_kind_and_the_readme_links_it() -> None:
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert sorted(REFERENCE + HOW_TO + EXPLANATION) == pages
    readme = (REPO / "README.md").read_text()
    assert [p for p in pages if f"docs/{p}" not in readme] == []


@pytest.mark.parametrize("name", REFERENCE)
def test_a_reference_page_says_what_each_thing_is_briefly(name: str) -> None:
    long = [" ".join(b.split()[:10]) for b in _blocks(_prose(DOCS / name)) if len(b.split()) > MOST_WORDS]
    assert long == [], f"{name}: paragraphs or cells over {MOST_WORDS} words"


@pytest.mark.parametrize("name", REFERENCE)
def test_a_reference_page_dates_nothing_outside_its_links_to_records(name: str) -> None:
    prose = _prose(DOCS / name)
    for link in LINK.findall(prose):
        target = link.rpartition("(")[2]
        assert not DATE.search(link) or "measurements/" in target, f"{name}: {link}"
    assert DATE.findall(LINK.sub("", prose)) == [], name


def test_the_options_page_is_short_and_gives_each_default_as_the_code_does() -> None:
    page = (DOCS / "options.md").read_text()
    assert len(page.split()) < 1500
    shown = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `--") and len(cells) == 3:
            for flag in re.findall(r"`(--[a-z-]+)`", cells[0]):
                shown[flag] = cells[1]
    code = {opt.flag: opt.default for opt in OPTIONS if opt.flag not in CHILD_ONLY}
    code |= {flag: "off" for flag, _ in FLAGS if flag not in CHILD_ONLY}
    code |= {o.GPU_BENCH: "off", o.CUDA_GRAPH: "on", o.NO_CUDA_GRAPH: "on", o.CLOCKS: "on", o.NO_CLOCKS: "on"}
    assert shown == code


def test_every_sample_output_is_what_the_code_prints() -> None:
    samples = load_tool("doc_samples")
    found = [(page, m, made) for page in [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
             for m, made in samples.blocks(page)]  # fmt: skip
    assert len(found) >= 2
    for page, m, made in found:
        shown = m.group(3).rstrip("\n").splitlines()
        assert samples.agrees(shown, made), (f"{page.name}: the block after '{m.group(1)}: {m.group(2)}' is not what "
                                             "the code prints; write it anew: python tools/doc_samples.py --write")


def test_a_sample_may_leave_lines_out_but_not_change_them() -> None:
    samples = load_tool("doc_samples")
    made = ["head", "a", "b", "c", "tail"]
    assert samples.agrees(made, made) and samples.agrees(["head", "...", "tail"], made)
    assert samples.agrees(["head", "a", "..."], made) and samples.agrees(["...", "c", "tail"], made)
    assert not samples.agrees(["head", "b!", "..."], made) and not samples.agrees(["head", "a"], made)
