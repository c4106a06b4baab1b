"""The cache folder's compiled parts, signed (core/signing.py): a part with a file that is unsigned, changed or signed
under another key is moved aside and built again, never loaded; the same key keeps a cache warm; a folder other
users can write is refused unless it is signed. End to end on the CPU with Inductor's real kernels."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_vitperf.core.signing import (
    ASIDE,
    KEY_ENV,
    MANIFEST,
    cache_key,
    key_file,
    problem,
    sign,
    trust,
)
from tests.conftest import FAST

NAMES = st.text("abcdefgh", min_size=1, max_size=6)
TREES = st.dictionaries(st.tuples(NAMES, NAMES).map("/".join), st.binary(max_size=64), min_size=1, max_size=6)


def _plant(root: Path, tree: dict[str, bytes]) -> None:
    for name, data in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


@given(tree=TREES, which=st.integers(0, 100), flip=st.integers(1, 255))
def test_a_signed_part_passes_and_any_change_to_any_file_fails(
    tmp_path_factory: pytest.TempPathFactory, tree: dict[str, bytes], which: int, flip: int
) -> None:
    cache = tmp_path_factory.mktemp("cache")
    _plant(cache / "ready", tree)
    sign(cache, b"k1")
    assert (cache / "ready" / MANIFEST).exists() and problem(cache / "ready", b"k1") is None
    assert problem(cache / "ready", b"k2") == "signed under another key"
    name = sorted(tree)[which % len(tree)]
    path = cache / "ready" / name
    data = path.read_bytes()
    path.write_bytes(bytes([data[0] ^ flip]) + data[1:] if data else b"x")
    assert problem(cache / "ready", b"k1") == f"{name} changed since it was signed"


def test_an_unsigned_file_moves_its_part_aside_and_nothing_else(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _plant(cache, {"inductor/ab/kernel.py": b"pass", "ready/engine.pt2": b"engine", "onnx/m.onnx": b"weights"})
    sign(cache, b"k")
    assert trust(cache, b"k") == []  # the same key: warm
    (cache / "ready" / "planted.pt2").write_bytes(b"payload")
    (said,) = trust(cache, b"k")
    assert said.startswith(f"cache {cache / 'ready'}: planted.pt2 not signed; moved aside to ready{ASIDE}")
    assert not (cache / "ready").exists() and (cache / "inductor" / "ab" / "kernel.py").exists()
    assert [p.name.split(ASIDE)[0] for p in cache.iterdir() if ASIDE in p.name] == ["ready"]
    assert (cache / "onnx" / "m.onnx").exists()  # weights are not code: never signed, never moved
    sign(cache, b"k")  # the moved part stays unsigned and is never read
    assert trust(cache, b"k") == []


def test_a_part_replaced_by_a_link_is_checked_like_any_other(tmp_path: Path) -> None:
    """A part swapped for a link to someone else's folder: the link is moved aside, and the folder it named is left."""
    elsewhere = tmp_path / "theirs"
    _plant(elsewhere, {"kernel.py": b"import os"})
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "inductor").symlink_to(elsewhere, target_is_directory=True)
    (said,) = trust(cache, b"k")
    assert "1 file(s) not signed" in said and not (cache / "inductor").exists()
    assert (elsewhere / "kernel.py").exists()


def test_the_key_comes_from_the_environment_or_a_private_file_made_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv(KEY_ENV, "from a CI secret")
    assert cache_key() == b"from a CI secret" and not key_file().exists()
    monkeypatch.delenv(KEY_ENV)
    first = cache_key()
    assert key_file() == tmp_path / "config" / "pytest-vitperf" / "cache.key"
    assert stat.S_IMODE(key_file().stat().st_mode) == 0o600 and len(first) == 64
    assert cache_key() == first  # made once


def test_a_folder_others_can_write_is_refused_unless_signed(pytester: pytest.Pytester) -> None:
    cache = pytester.path / "shared"
    cache.mkdir()
    os.chmod(cache, 0o777)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("--gpu-bench", f"--vitperf-cache-dir={cache}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = (f"--vitperf-cache-dir {cache}: other users can write it and nothing in it is signed with this host's "
            f"key; chmod o-w {cache}, or give a folder of your own")  # fmt: skip
    assert said in result.stderr.str()
    _plant(cache, {"inductor/kernel.py": b"pass"})
    sign(cache, cache_key())
    assert pytester.runpytest("--gpu-bench", f"--vitperf-cache-dir={cache}", "-p", "no:cacheprovider").ret == 0


def test_a_changed_inductor_kernel_is_not_loaded_and_the_run_compiles_again(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real Inductor kernels on the CPU: the first run compiles and signs them, and with the same key they check
    clean. One kernel is then given a payload that would write a file when imported: the next run moves the part
    aside (one line in the header; with -q, after the summary), the payload never runs, the run compiles again and
    passes, and signs the new part. The part, copied to a host of another key, is rebuilt there."""
    cache = suite.path / "cache"
    args = (*FAST, "--vitperf-precisions=fp32", "--vitperf-compile=default", f"--vitperf-cache-dir={cache}",
            "-p", "no:xdist")  # fmt: skip
    suite.runpytest(*args).assert_outcomes(passed=1)
    assert (cache / "inductor" / MANIFEST).exists()
    assert trust(cache, cache_key()) == []  # what the next run with this key checks first: it stays warm
    kernel = next(p for p in sorted((cache / "inductor").rglob("*.py")))
    pwned = suite.path / "pwned"
    kernel.write_text(kernel.read_text() + f"\nopen({str(pwned)!r}, 'w').write('ran')\n")
    planted = suite.runpytest(*args)
    planted.assert_outcomes(passed=1)
    planted.stdout.fnmatch_lines([f"vitperf: cache {cache / 'inductor'}: * changed since it was signed; moved aside "
                                  f"to inductor{ASIDE}*, not loaded, and built again"])  # fmt: skip
    assert not pwned.exists() and problem(cache / "inductor", cache_key()) is None
    monkeypatch.setenv(KEY_ENV, "another host's key")
    elsewhere = suite.runpytest(*args, "-q")  # as vitperf ab's processes run: no header, so after the summary
    elsewhere.assert_outcomes(passed=1)
    elsewhere.stdout.fnmatch_lines(["*vitperf summary*", "vitperf: *; backend torch *", "vitperf: models: *",
                                    "vitperf: cache *inductor: signed under another key; moved aside *"])  # fmt: skip


def test_a_process_whose_caller_checks_the_folder_leaves_it_to_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`vitperf ab`'s round processes, which borrow their side's parts: the side's prepare checked them, and one round
    checking them while another compiles into them would move that one's files aside."""
    from pytest_vitperf.core.signing import CHECKED_ENV
    from pytest_vitperf.options.checks import check_cache

    _plant(tmp_path, {"inductor/kernel.py": b"pass"})
    monkeypatch.setenv(CHECKED_ENV, str(tmp_path))
    assert check_cache(tmp_path) == [] and (tmp_path / "inductor" / "kernel.py").exists()
    monkeypatch.delenv(CHECKED_ENV)
    assert check_cache(tmp_path)[0].endswith("not loaded, and built again")
