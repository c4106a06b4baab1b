"""Write the Python API of a TensorRT release, read from its pybind11 sources, as JSON: for each class or enum its
members, and for each method the parameter names of each overload (None where the source names none).

    python tools/trt_signatures.py TENSORRT_GIT_DIR release/10.8 --out tests/data/tensorrt-api/10.8.json

TENSORRT_GIT_DIR is a clone of NVIDIA/TensorRT. The bindings wheels cannot be imported without TensorRT's libraries,
so their signatures cannot be read from them; these sources are what pybind11 compiled them from
(python/src/**/*.cpp). tests/test_trt_api.py holds the backend's calls against the files this writes.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path
from typing import Any

# `py::class_<Derived, Base, Trampoline> var(m, "Name"` or `py::enum_<Outer::Kind>(var, "Kind"`; groups: the template
# arguments, the variable, the scope, the Python name.
_OPEN = re.compile(r'py::(?:class_|enum_)<([^;{]*?)>\s*(\w+)?\s*[({]\s*(\w+)\s*,\s*"(\w+)"')
_CALL = re.compile(r"\.\s*(def|def_property|def_property_readonly|def_readwrite|def_readonly|def_static|value)\s*\(")
_NAMED = re.compile(r'^"(\w+)"_a(\s*=.*)?$', re.S)


def _split(args: str) -> list[str]:
    """The top-level, comma-separated arguments of a call's (or a template's) text."""
    out, depth, start, quote = [], 0, 0, ""
    for i, c in enumerate(args):
        if quote:
            quote = "" if c == quote and args[i - 1] != "\\" else quote
        elif c in "\"'":
            quote = c
        elif c in "([{<":
            depth += 1
        elif c in ")]}>" and not (c == ">" and args[i - 1] == "-"):
            depth -= 1
        elif c == "," and depth == 0:
            out.append(args[start:i].strip())
            start = i + 1
    return [*out, args[start:].strip()]


def _close(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one before `start`."""
    depth, quote, i = 1, "", start
    while depth and i < len(text):
        c = text[i]
        if quote:
            quote = "" if c == quote and text[i - 1] != "\\" else quote
        elif c == '"':
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        i += 1
    return i - 1


def _statement(text: str, start: int) -> str:
    """The statement from `start` to its `;` outside parentheses, braces and strings (lambdas hold `;` of their own)."""
    depth, quote, i = 0, "", start
    while i < len(text):
        c = text[i]
        if quote:
            quote = "" if c == quote and text[i - 1] != "\\" else quote
        elif c == '"':
            quote = c
        elif c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
        elif c == ";" and depth <= 0:
            break
        i += 1
    return text[start:i]


API = dict[str, dict[str, Any]]  # class -> {"cpp": C++ type, "bases": [C++ types], "members": {name: overloads}}


def members(source: str) -> API:
    """Class or enum name -> its C++ type, bases and members; a member's overloads are lists of parameter names
    (a defaulted one ends in "="), or None where the source names none. An enum's values exported into its scope
    (`export_values`) are members of that scope's class too."""
    source = re.sub(r"//[^\n]*", "", source)
    classes: API = {}
    found = [(m.start(), m[4], m[2], m[3], m[1]) for m in _OPEN.finditer(source)]
    owners = {var: name for _, name, var, _, _ in found if var}  # `py::class_<X> x(m, "X")`: later `x.def(...)`
    found += [(m.start(), owners[m[1]], None, None, None)
              for m in re.finditer(r"(?m)^\s*(\w+)\s*\.\s*(?:def|value)", source) if m[1] in owners]  # fmt: skip
    for start, name, _, scope, template in found:
        statement = _statement(source, start)
        entry = classes.setdefault(name, {"cpp": "", "bases": [], "members": {}})
        if template:
            cpp, *bases = (t.strip() for t in _split(template))
            entry["cpp"], entry["bases"] = cpp, [b for b in bases if not b.startswith(("Py", "std::"))]
        targets = [entry["members"]]
        if scope in owners and ".export_values()" in statement:
            targets.append(classes.setdefault(owners[scope], {"cpp": "", "bases": [], "members": {}})["members"])
        for call in _CALL.finditer(statement):
            end = _close(statement, call.end())
            args = _split(statement[call.end() : end])
            if call[1] == "def" and args[0].startswith("py::init"):
                member = "__init__"
            elif args[0].startswith('"'):
                member = args[0].strip('"')
            else:
                continue
            named = [m[1] + ("=" if m[2] else "") for m in (_NAMED.match(a) for a in args[1:]) if m]
            for target in targets:
                target.setdefault(member, []).append(named if named or call[1] != "def" else None)
    return classes


def read(git_dir: Path, branch: str) -> API:
    files = subprocess.run(["git", "-C", str(git_dir), "ls-tree", "-r", "--name-only", branch, "--", "python/src"],
                           capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    out: API = {}
    for path in (f for f in files if f.endswith(".cpp")):
        text = subprocess.run(["git", "-C", str(git_dir), "show", f"{branch}:{path}"], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
        for cls, found in members(text).items():
            entry = out.setdefault(cls, {"cpp": "", "bases": [], "members": {}})
            entry["cpp"], entry["bases"] = entry["cpp"] or found["cpp"], entry["bases"] or found["bases"]
            for member, overloads in found["members"].items():
                entry["members"].setdefault(member, []).extend(overloads)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", type=Path, help="a clone of NVIDIA/TensorRT")
    parser.add_argument("branch", help="release/10.8, release/11.1, ...")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args()
    api = read(args.git_dir, args.branch)
    doc = {"source": f"NVIDIA/TensorRT {args.branch}: python/src/**/*.cpp", "classes": api}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(api)} classes to {args.out}")


if __name__ == "__main__":
    main()
