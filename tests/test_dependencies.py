"""Every import the package makes is declared and installs: a dependency that only some machine happens to have
fails here, naming itself, instead of deep inside a recipe export.

The imports are read from the package's source (top-level and inside functions), so a new lazy import is checked
without editing this file.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections import defaultdict
from functools import cache
from importlib import metadata
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_vitperf"
# Imported by name at run time (importlib), so invisible to the source scan.
DYNAMIC = ("tensorrt_rtx",)
# Optional: the code refuses with the install command when these are missing; they must still be declared as
# extras, and they are imported here when installed.
OPTIONAL = {"tensorrt": "tensorrt", "cudnn": "cudnn", "nvmath": "cublaslt"}  # module -> the extra that installs it
# What Model Optimizer's ONNX export and autocast import, beyond what its own metadata declares (it asks for an
# "[onnx]" extra that would also pull onnxruntime-gpu and cupy): each must be in pyproject.toml.
MODELOPT_ONNX = ("requests", "onnx_graphsurgeon", "onnxconverter_common", "onnxslim", "onnxscript", "lief")


def package_modules() -> list[str]:
    return sorted(
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in PACKAGE.rglob("*.py")
    )


@cache
def third_party_imports() -> tuple[str, ...]:
    """Absolute imports of modules outside the standard library and the package, as written (`a.b` for `from a.b
    import c`)."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
    return tuple(
        sorted(
            m
            for m in found
            if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] not in ("pytest_vitperf", "_pytest")
        )
    )


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> dict[str, set[str]]:
    """Distribution name -> the extras that declare it ('' for the core dependencies), from the installed
    project's metadata."""
    out: dict[str, set[str]] = defaultdict(set)
    for req in metadata.requires("pytest-vitperf") or []:
        name = _normal(re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0])
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        out[name].add(extra.group(1) if extra else "")
    return out


def test_the_scan_finds_the_imports_it_must() -> None:
    found = third_party_imports()
    for module in ("torch", "onnx", "modelopt.torch._deploy.utils", "modelopt.onnx.autocast.convert", "scipy.stats"):
        assert module in found, f"{module} not found by the source scan: {found}"
    assert not any(m.split(".")[0] in ("os", "json", "pytest_vitperf") for m in found)


def test_every_imported_distribution_is_declared() -> None:
    """Checked against metadata, so it holds on any machine, whatever else is installed there."""
    owners = metadata.packages_distributions()
    wanted = declared()
    problems = []
    for top in sorted({m.split(".")[0] for m in third_party_imports()} | set(MODELOPT_ONNX) | set(DYNAMIC)):
        dists = {_normal(d) for d in owners.get(top, [])}
        if not dists:
            if top in OPTIONAL:
                continue  # not installed here; its extra is checked below
            problems.append(f"{top}: imported, but no installed distribution provides it")
            continue
        extras = set().union(*(wanted.get(d, set()) for d in dists))
        if not extras:
            problems.append(f"{top}: provided by {', '.join(sorted(dists))}, which pyproject.toml does not declare")
        elif top not in OPTIONAL and top not in DYNAMIC and "" not in extras:
            problems.append(f"{top}: imported unconditionally but declared only in extra(s) {sorted(extras)}")
    for top, extra in OPTIONAL.items():
        if not any(extra in e for e in wanted.values()):
            problems.append(f"{top}: optional, but pyproject.toml has no [{extra}] extra")
    assert not problems, "\n".join(problems) + '\nDeclare them in pyproject.toml, then: pip install -e ".[dev]"'


def test_every_module_and_dependency_imports_in_a_fresh_interpreter() -> None:
    """One subprocess, so nothing imported by other tests hides a failure; each failure names its module."""
    names = [*package_modules(), *third_party_imports(), *MODELOPT_ONNX, *DYNAMIC]
    script = (
        "import importlib, json, sys\n"
        "bad = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        bad[name] = f'{type(exc).__name__}: {(str(exc) or repr(exc)).splitlines()[0]}'\n"
        "print(json.dumps(bad))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *names], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    bad = json.loads(done.stdout.strip().splitlines()[-1])
    missing_optional = {n for n, e in bad.items() if n.split(".")[0] in OPTIONAL and "ModuleNotFoundError" in e}
    failures = {n: e for n, e in bad.items() if n not in missing_optional}
    assert not failures, (
        "\n".join(f"{n}: {e}" for n, e in sorted(failures.items()))
        + '\nDeclare the missing distribution in pyproject.toml, then: pip install -e ".[dev]"'
    )


def test_a_missing_tensorrt_is_a_reason_with_what_to_do() -> None:
    """A missing optional package is a skip reason saying how to get it, never an ImportError."""
    from pytest_vitperf.engines.backends import get_backend
    from pytest_vitperf.measure.env import probe_device

    reason = get_backend("tensorrt").unavailable_reason(probe_device(0))
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        assert reason is not None and "NGC TensorRT container" in reason, reason
