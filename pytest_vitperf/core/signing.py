"""The compiled parts of a cache folder, signed: code a later run loads (Inductor's kernels, the ready engines that
torch's precompile loader unpickles, compiled extensions, TensorRT plans and timing caches) runs only if a key this
host trusts signed it. A run checks each part before anything is pointed at it, moves aside a part with a file that is
unsigned, changed or signed under another key (it is built again), and signs what is there when it ends.

The signature is HMAC-SHA256 of each file's content, kept in the part's manifest. The key is never in the cache
folder: VITPERF_CACHE_KEY (CI, from a secret), else a key file made once, mode 0600, in the user's config folder. A
cache restored from another key is rebuilt; restored with the same key, it stays warm (pip's hash-checking, sccache's
and Django's signing; OpenSSH's StrictModes for the folder's permissions).

What is signed when a run ends is what was there: a file planted while the run ran is signed with the rest. Weights-
only parts (exports, calibrations, converted models, references) are not code and are not signed."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pytest_vitperf.core.files import write_atomic

KEY_ENV = "VITPERF_CACHE_KEY"
# Set by `vitperf ab` for its round and profile processes, to the cache folder each is given: the side's (with
# --reuse-compiles), or one of its own whose shared parts link to the side's. The side's prepare checked those, and
# `vitperf ab` signs them after the rounds: a process checking them while another compiles into them would move that
# one's files aside.
CHECKED_ENV = "VITPERF_CACHE_CHECKED"
MANIFEST = ".vitperf-signatures.json"
COMPILED_PARTS = ("inductor", "ready", "torch_extensions", "plans", "trtexec")
ASIDE = ".untrusted-"  # a part moved aside: PART.untrusted-SECONDS, beside it, kept for a look and never loaded


def key_file() -> Path:
    """Where the key this user's runs sign with lives, unless VITPERF_CACHE_KEY gives one."""
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "pytest-vitperf" / "cache.key"


def cache_key() -> bytes:
    """VITPERF_CACHE_KEY, else the key file's, made (32 random bytes, mode 0600) the first time."""
    given = os.environ.get(KEY_ENV)
    if given:
        return given.encode("utf-8")
    path = key_file()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another run made it meanwhile
            return path.read_bytes().strip()
        with os.fdopen(fd, "w") as f:
            f.write(os.urandom(32).hex())
    return path.read_bytes().strip()


def key_id(key: bytes) -> str:
    """What a manifest says of its key, without giving it away."""
    return hashlib.sha256(b"pytest-vitperf cache key " + key).hexdigest()[:16]


def _files(part: Path) -> list[Path]:
    return sorted(p for p in part.rglob("*") if p.is_file() and p.name != MANIFEST and ASIDE not in p.name)


def _mac(key: bytes, path: Path) -> str:
    with path.open("rb") as f:
        return hmac.digest(key, f.read(), "sha256").hex()


def _macs(key: bytes, paths: list[Path]) -> list[str]:
    """Each file's signature, several at once: OpenSSL hashes outside the GIL, and a warm cache is hundreds of MB."""
    if len(paths) < 2:
        return [_mac(key, p) for p in paths]
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda p: _mac(key, p), paths))


def _manifest(part: Path) -> dict[str, object] | None:
    try:
        doc = json.loads((part / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("files"), dict) else None


def problem(part: Path, key: bytes) -> str | None:
    """Why `part` must not be loaded: a file unsigned, changed, or signed under another key; None if every file is
    signed under `key` (or there are none)."""
    files = _files(part)
    if not files:
        return None
    doc = _manifest(part)
    if doc is None:
        return f"{len(files)} file(s) not signed"
    if doc.get("key") != key_id(key):
        return "signed under another key"
    signed: dict = doc["files"]  # type: ignore[assignment]
    names = [path.relative_to(part).as_posix() for path in files]
    unsigned = next((name for name in names if not isinstance(signed.get(name), dict)), None)
    if unsigned is not None:
        return f"{unsigned} not signed"
    for name, mac in zip(names, _macs(key, files), strict=True):
        if not hmac.compare_digest(str(signed[name].get("mac")), mac):
            return f"{name} changed since it was signed"
    return None


def checked_by_caller(cache_dir: Path) -> bool:
    """Whether the process that started this one checks and signs `cache_dir` (CHECKED_ENV)."""
    return os.environ.get(CHECKED_ENV) == str(cache_dir)


def parts(cache_dir: Path) -> list[Path]:
    """The compiled parts of a cache folder, links included: a part replaced by a link to a folder of someone else's
    is checked like any other."""
    return [cache_dir / p for p in COMPILED_PARTS if (cache_dir / p).is_dir()]


def trust(cache_dir: Path, key: bytes) -> list[str]:
    """Check each compiled part; move aside each one that fails. One line a part moved."""
    said = []
    for part in parts(cache_dir):
        why = problem(part, key)
        if why is not None:
            aside = part.with_name(f"{part.name}{ASIDE}{time.time_ns()}")
            part.rename(aside)
            said.append(f"cache {part}: {why}; moved aside to {aside.name}, not loaded, and built again")
    return said


def sign(cache_dir: Path, key: bytes) -> None:
    """Sign every file of each compiled part. A file whose size and time are as the manifest recorded keeps its
    signature (a file changed behind them fails the next check, and is built again)."""
    for part in parts(cache_dir):
        old = _manifest(part)
        before: dict = old["files"] if old is not None and old.get("key") == key_id(key) else {}  # type: ignore[assignment]
        files, fresh = {}, []
        for path in _files(part):
            name, st = path.relative_to(part).as_posix(), path.stat()
            entry, now = before.get(name), (st.st_size, st.st_mtime_ns)
            if isinstance(entry, dict) and (entry.get("size"), entry.get("mtime_ns")) == now:
                files[name] = entry
            else:
                fresh.append((name, path, now))
        for (name, _, (size, mtime_ns)), mac in zip(fresh, _macs(key, [p for _, p, _ in fresh]), strict=True):
            files[name] = {"mac": mac, "size": size, "mtime_ns": mtime_ns}
        write_atomic(part / MANIFEST, json.dumps({"key": key_id(key), "files": files}, indent=0))


def others_can_write(path: Path) -> bool:
    """Whether another user can write `path`: it is writable by all (without the sticky bit), or someone else's."""
    st = path.stat()
    return bool(st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX) or st.st_uid != os.getuid()


def signed_anywhere(cache_dir: Path, key: bytes) -> bool:
    """Whether any compiled part of the folder carries a manifest of `key`."""
    return any((doc := _manifest(p)) is not None and doc.get("key") == key_id(key) for p in parts(cache_dir))
