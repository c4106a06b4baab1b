"""The docs hold: every relative link in README.md, CHANGELOG.md, tools/README.md and docs/ resolves (file, and
heading where a link names one), every command example in the README and the user guide parses (`vitperf` through
its own parser, `pytest` by collecting), every option of the plugin is in docs/options.md, and no module of the
package is above 400 lines."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pytest_vitperf import options
from pytest_vitperf.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "tools" / "README.md", *(REPO / "docs").rglob("*.md")]
)
GUIDE = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]  # not the dated records: their commands are history
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped but hyphens and underscores, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)  # no headings inside code
    return {_slug(m[1]) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def _links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def _commands(page: Path, program: str) -> list[list[str]]:
    """The command lines of a page's bash blocks that run `program`, without their comments."""
    found = []
    for block in FENCE.findall(page.read_text()):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words and Path(words[0]).name == program:
                found.append(words[1:])
    return found


def test_the_pages_have_links_and_commands_to_check() -> None:
    assert len(PAGES) > 20 and sum(len(_links(p)) for p in PAGES) > 60
    assert sum(len(_commands(p, "vitperf")) for p in GUIDE) >= 5
    assert sum(len(_commands(p, "pytest")) for p in GUIDE) >= 5


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in _links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no file {target.relative_to(REPO) if target.is_relative_to(REPO) else target}")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)} has broken links:\n" + "\n".join(broken)


def test_every_source_path_named_in_the_pages_exists() -> None:
    """A module named by its path (`pytest_vitperf/verdicts/floors.py`) must still be there after a move."""
    named = {m for page in PAGES for m in re.findall(r"pytest_vitperf/[\w/]+\.py", page.read_text())}
    assert len(named) > 5
    assert not sorted(m for m in named if not (REPO / m).exists())


@pytest.mark.parametrize("page", GUIDE, ids=lambda p: str(p.relative_to(REPO)))
def test_every_vitperf_example_parses(page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    for words in _commands(page, "vitperf"):
        try:
            parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"{page.relative_to(REPO)}: `vitperf {shlex.join(words)}` does not parse: "
                        f"{capsys.readouterr().err.strip()}")  # fmt: skip
        for sub in words[:2]:  # each subcommand's own --help works
            if sub.startswith("-"):
                break
            with pytest.raises(SystemExit) as done:
                parser.parse_args([*words[: words.index(sub) + 1], "--help"])
            assert done.value.code == 0


def test_every_pytest_example_parses(pytester: pytest.Pytester) -> None:
    """pytest parses every example and collects its tests (an unknown or misspelt option exits 4; --help would not
    notice one). They run in an empty folder with suites/ linked in, so that nothing lands in the checkout; xdist's
    `-n auto` becomes `-n 0`, since on a CPU more than one worker is a usage error. The checkpoint and the image folder
    they name are made first. In this process: a fresh
    interpreter for each would import torch, timm and Model Optimizer a dozen times over."""
    (pytester.path / "suites").symlink_to(REPO / "suites")
    # what the examples name as the user's own, since paths are checked as the plugin configures
    import torch
    from PIL import Image
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(1)}, str(pytester.path / "ckpt.safetensors"))
    (pytester.path / "val" / "n01440764").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(pytester.path / "val" / "n01440764" / "0.png")
    examples = {shlex.join(w): w for page in GUIDE for w in _commands(page, "pytest")}
    for line, words in examples.items():
        words = ["0" if w == "auto" and words[i - 1] == "-n" else w for i, w in enumerate(words)]
        done = pytester.runpytest(*words, "--collect-only", "-q", "-p", "no:cacheprovider")
        out = "\n".join(done.outlines + done.errlines)[-2000:]
        assert done.ret == 0, f"`pytest {line}` does not parse:\n{out}"


def test_every_option_is_in_the_options_page() -> None:
    page = (REPO / "docs" / "options.md").read_text()
    flags = [v for k, v in vars(options).items() if k.isupper() and isinstance(v, str) and v.startswith("--")]
    assert len(flags) > 30
    missing = [f for f in flags if f"`{f}`" not in page and f"/ `{f}`" not in page]
    assert not missing, f"docs/options.md does not describe: {', '.join(missing)}"


def test_the_readme_starts_with_the_two_commands_and_stays_short() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    assert lines[2] == "```bash" and "pip install -e" in lines[3] and "--gpu-bench suites/" in lines[4]


def test_every_module_of_the_package_stays_under_400_lines() -> None:
    """Rooms small enough to read: a module that grows past 400 lines is split by what it serves."""
    sizes = {p.relative_to(REPO): len(p.read_text().splitlines()) for p in (REPO / "pytest_vitperf").rglob("*.py")}
    assert len(sizes) > 50
    assert not {p: n for p, n in sizes.items() if n > 400}
