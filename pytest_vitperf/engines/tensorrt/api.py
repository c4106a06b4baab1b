"""The TensorRT API this project calls, read from its own source, held against a TensorRT's real bindings.

TensorRT cannot be installed where the tests run, but its bindings wheels can be downloaded, and the code that drives
TensorRT (backends/tensorrt.py, plan.py) can be read. `usages` walks that code's syntax tree and returns every
attribute reached from the `trt` module: a name is TensorRT's when it is `trt` or `self.trt`, or was assigned from an
expression that starts at one (`builder = trt.Builder(...)`, `network = builder.create_network(...)`,
`self._engine = runtime.deserialize_cuda_engine(...)`), and a method defined in a class derived from one of TensorRT's
is an override TensorRT calls.

Two checks:
- `missing_from_bindings`: a bindings library (`tensorrt_bindings/tensorrt.so`) cannot be imported without
  libnvinfer, but pybind11 keeps every class, method, property, enum member and keyword name as a C string in it,
  and the wheel's Python files define the rest (`nptype`). A name found in neither is missing from that TensorRT.
  This proves that the names exist somewhere in that TensorRT's Python API, not on which class, nor how many
  arguments they take.
- `mismatched_in_module`: against an importable module (`tensorrt_rtx` imports on a CPU) the name must be an
  attribute of the module or of one of its classes, and a call must fit the argument count of at least one of the
  signatures pybind11 wrote into that name's docstrings.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOTS = frozenset({"trt", "self.trt"})
_IDENT = re.compile(rb"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Usage:
    name: str
    where: str  # file:line
    positional: int | None = None  # arguments of a call (None: not called here)
    keywords: tuple[str, ...] = ()
    guarded: bool = False  # only reached under hasattr/getattr with a default: absence is handled
    rtx_only: bool = False  # inside `if rtx ...:`, a TensorRT-RTX path (plan.build_plan's flag)
    owner: str | None = None  # the class it is looked up on ("" the module); None where the walker cannot tell


def _key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def _is_trt(node: ast.AST, known: set[str]) -> bool:
    """Whether `node` evaluates to something of TensorRT's: it starts at a known key, through attributes, calls and
    subscripts."""
    while True:
        key = _key(node)
        if key is not None and key in known:
            return True
        if isinstance(node, ast.Attribute):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            return False


def _walk(scope: ast.AST) -> Iterable[ast.AST]:
    """The nodes of one scope: not those of the functions defined inside it, which are scopes of their own."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))


def _guarded_names(tree: ast.AST) -> set[str]:
    """Names the code asks about before using: hasattr(x, "name"), getattr(x, "name", default)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2:
            literal = node.args[1]
            asks = node.func.id == "hasattr" or (node.func.id == "getattr" and len(node.args) == 3)
            if asks and isinstance(literal, ast.Constant) and isinstance(literal.value, str):
                out.add(literal.value)
    return out


def _functions(tree: ast.Module) -> tuple[list[ast.AST], dict[str, ast.FunctionDef]]:
    """The module and its functions (the scopes), and the functions by name."""
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    return [tree, *functions], {f.name: f for f in functions}


def _passed(node: ast.AST, by_name: dict[str, ast.FunctionDef]) -> list[tuple[ast.FunctionDef, str, ast.AST]]:
    """For a call of one of the module's own methods (`self._bind(context, t)`): each parameter with its argument."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _key(node.func.value) == "self"):
        return []
    called = by_name.get(node.func.attr)
    if called is None:
        return []
    params = [a.arg for a in called.args.args if a.arg != "self"]
    return [(called, p, arg) for p, arg in zip(params, node.args, strict=False)]


def _known(tree: ast.Module) -> dict[ast.AST, set[str]]:
    """For each function (and the module), the keys that hold TensorRT objects: assignments, and the parameters of
    this module's functions called with one (`self._bind(context, t)`), followed to a fixed point; `self.x` keys are
    shared by all of a module's functions."""
    scopes, by_name = _functions(tree)
    shared = set(ROOTS)
    local: dict[ast.AST, set[str]] = {s: set(ROOTS) for s in scopes}
    changed = True
    while changed:
        changed = False
        for scope in scopes:
            known = local[scope] | shared
            for node in _walk(scope):
                targets: list[ast.AST] = []
                for called, param, arg in _passed(node, by_name):
                    if _is_trt(arg, known) and param not in local[called]:
                        local[called].add(param)
                        changed = True
                if isinstance(node, ast.Assign):
                    targets, value = list(node.targets), node.value
                elif isinstance(node, ast.With):
                    for item in node.items:
                        if item.optional_vars is not None and _is_trt(item.context_expr, known):
                            targets.append(item.optional_vars)
                    value = None
                else:
                    continue
                if value is not None and not _is_trt(value, known):
                    continue
                for t in targets:
                    key = _key(t)
                    if key is None or key in known:
                        continue
                    (shared if key.startswith("self.") else local[scope]).add(key)
                    known.add(key)
                    changed = True
    return {s: local[s] | shared for s in scopes}


def _rtx_lines(tree: ast.AST) -> set[int]:
    """Lines in the body of an `if` whose test requires `rtx` (a Name, alone or in an `and`)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            terms = (
                node.test.values
                if isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And)
                else [node.test]
            )
            if any(isinstance(t, ast.Name) and t.id == "rtx" for t in terms):
                for stmt in node.body:
                    lines |= set(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines


Returns = dict[tuple[str, str], str]  # (class, method or property) -> the TensorRT class it returns


def _class_of(node: ast.AST, types: dict[str, str], returns: Returns) -> str | None:
    """The TensorRT class `node` evaluates to: `trt.Cls(...)` is a Cls, `x.method(...)` what the method of x's class
    returns, a key what it was assigned."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute) and _key(node.value) in ROOTS:
        return node.attr  # trt.Cls, or trt.Cls(...)
    if isinstance(node, ast.Attribute) and _key(node) not in types:
        owner = _class_of(node.value, types, returns)
        return returns.get((owner, node.attr)) if owner else None
    key = _key(node)
    return types.get(key) if key is not None else None


def _types(tree: ast.Module, returns: Returns) -> dict[ast.AST, dict[str, str]]:
    """For each function, the TensorRT class of each key whose class can be told: assignments and the parameters of
    the module's own methods, followed to a fixed point like `_known`."""
    scopes, by_name = _functions(tree)
    shared: dict[str, str] = {}
    local: dict[ast.AST, dict[str, str]] = {s: {} for s in scopes}
    changed = True
    while changed:
        changed = False
        for scope in scopes:
            for node in _walk(scope):
                types = {**shared, **local[scope]}
                # (value, where the key goes, key)
                pairs = [(arg, local[called], p) for called, p, arg in _passed(node, by_name)]
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        key = _key(target)
                        if key is not None:
                            pairs.append((node.value, shared if key.startswith("self.") else local[scope], key))
                for value, where, key in pairs:
                    cls = _class_of(value, types, returns)
                    if cls is not None and where.get(key) != cls:
                        where[key] = cls
                        changed = True
    return {s: {**shared, **local[s]} for s in scopes}


def _owner(node: ast.Attribute, types: dict[str, str], returns: Returns) -> str | None:
    if _key(node.value) in ROOTS:
        return ""
    return _class_of(node.value, types, returns)


def usages(path: Path, returns: Returns | None = None) -> list[Usage]:
    """Every TensorRT attribute the module at `path` reaches, with how it is called there; with `returns` (what each
    method returns, `returns_of`), the class each is looked up on, where it can be told."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    guarded, rtx = _guarded_names(tree), _rtx_lines(tree)
    typed = _types(tree, returns) if returns is not None else {}
    found: dict[tuple[str, int, int], Usage] = {}
    for scope, known in _known(tree).items():
        calls = {id(n.func): n for n in _walk(scope) if isinstance(n, ast.Call)}
        types = typed.get(scope, {})
        for node in _walk(scope):
            if isinstance(node, ast.Attribute) and _is_trt(node.value, known):
                call = calls.get(id(node))
                u = Usage(
                    node.attr,
                    f"{path.name}:{node.lineno}",
                    None if call is None else len(call.args),
                    () if call is None else tuple(k.arg for k in call.keywords if k.arg is not None),
                    node.attr in guarded,
                    node.lineno in rtx,
                    _owner(node, types, returns) if returns is not None else None,
                )
                found[(node.attr, node.lineno, node.col_offset)] = u
            elif isinstance(node, ast.ClassDef) and any(_is_trt(b, known) for b in node.bases):
                base = next((b.attr for b in node.bases if isinstance(b, ast.Attribute)), None)
                for item in node.body:  # overrides: TensorRT calls them by these names
                    if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                        where, positional = f"{path.name}:{item.lineno}", len(item.args.args) - 1  # without self
                        owner = base if returns is not None else None
                        found[(item.name, item.lineno, 0)] = Usage(item.name, where, positional, owner=owner)
    return sorted(found.values(), key=lambda u: (u.name, u.where))


_RETURNS = re.compile(r"^(?:\d+\. )?(\w+)\(self: [\w.]+(?:, [^)]*)?\) -> (?:[\w.]+\.)?(\w+)\s*$", re.M)


def returns_of(module: ModuleType) -> Returns:
    """What each method of `module`'s classes returns, where it is one of the module's classes, read from the
    signatures pybind11 wrote into their docstrings (TensorRT-RTX imports on a CPU; its classes are TensorRT's)."""
    classes = {n for n, v in vars(module).items() if isinstance(v, type)}
    out: Returns = {}
    for name in classes:
        for attr, value in vars(getattr(module, name)).items():
            doc = getattr(value, "__doc__", None) or getattr(getattr(value, "fget", None), "__doc__", None) or ""
            for m in _RETURNS.finditer(doc):
                if m[2] in classes and m[1] in (attr, "fget", "<lambda>", ""):
                    out[(name, attr)] = m[2]
    return out


def mismatched_in_api(used: Iterable[Usage], api: dict[str, Any], version: str) -> list[str]:
    """One line per unguarded usage, outside TensorRT-RTX's own paths, that a TensorRT's Python API (tools/
    trt_signatures.py's JSON of its pybind11 sources) does not have on the class it is looked up on, with an
    overload that takes its arguments. Where the class cannot be told, any class that has the name will do."""
    by_cpp = {entry["cpp"]: name for name, entry in api.items()}

    def inherited(cls: str) -> dict[str, list[list[str] | None]]:
        entry = api.get(cls, {"bases": [], "members": {}})
        out = dict(entry["members"])
        for base in entry["bases"]:
            out = {**inherited(by_cpp.get(base, "")), **out}
        return out

    members = {cls: inherited(cls) for cls in api}
    out = []
    for u in used:
        if u.guarded or u.rtx_only:
            continue
        if u.owner == "":
            if u.name not in api:
                out.append(f"{u.where}: {u.name} is not in TensorRT {version}")
                continue
            overloads = members[u.name].get("__init__")
        elif u.owner:
            overloads = members.get(u.owner, {}).get(u.name)
            if overloads is None:
                out.append(f"{u.where}: {u.owner}.{u.name} is not in TensorRT {version}")
                continue
        else:
            found = [m[u.name] for m in members.values() if u.name in m]
            if not found:
                out.append(f"{u.where}: {u.name} is on no class of TensorRT {version}")
                continue
            overloads = [o for f in found for o in f]
        if u.positional is None or overloads is None or any(o is None for o in overloads):
            continue  # not called here, or an overload whose parameters the source does not name
        given = u.positional + len(u.keywords)
        fits = [o for o in overloads if o is not None and sum(not p.endswith("=") for p in o) <= given <= len(o)
                and set(u.keywords) <= {p.rstrip("=") for p in o}]  # fmt: skip
        if not fits:
            shown = "; ".join(f"({', '.join(o)})" for o in overloads if o is not None)
            where = f"{u.owner}.{u.name}" if u.owner else u.name
            out.append(f"{u.where}: {where} called with {given} argument(s) {list(u.keywords)}; TensorRT {version} "
                       f"takes {shown}")  # fmt: skip
    return out


def binding_names(library: bytes, python_sources: Iterable[str] = ()) -> set[str]:
    """The identifiers a bindings library keeps as C strings, and those its Python files define."""
    names = {s.decode() for s in library.split(b"\x00") if _IDENT.match(s)}
    for text in python_sources:
        names |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    return names


def missing_from_bindings(used: Iterable[Usage], names: set[str]) -> list[str]:
    """One line per unguarded name or keyword, outside TensorRT-RTX's own paths, that the bindings do not hold. A
    linker may keep a name only as the tail of a longer string (suffix merging), so a name ending another counts as
    present."""
    ordered = sorted(names)

    def present(name: str) -> bool:
        return name in names or any(s.endswith(name) for s in ordered)

    out = []
    for u in used:
        if u.guarded or u.rtx_only:
            continue
        for name in (u.name, *u.keywords):
            if not present(name):
                out.append(f"{u.where}: {name}")
    return out


_SIGNATURE = re.compile(r"^\s*(?:\d+\.\s*)?([A-Za-z_]\w*)\((.*)\)\s*->", re.M)


def _arities(doc: str, name: str) -> list[tuple[int, int, set[str]]]:
    """(least, most, keyword names) per signature of `name` in a pybind11 docstring, `self` left out."""
    out = []
    for m in _SIGNATURE.finditer(doc or ""):
        if m[1] != name:
            continue
        params = [p.strip() for p in re.split(r",\s*(?![^\[]*\])", m[2]) if p.strip()]
        params = [p for p in params if not p.startswith("self")]
        names = {p.split(":")[0].split("=")[0].strip() for p in params}
        out.append((sum("=" not in p for p in params), len(params), names))
    return out


def mismatched_in_module(used: Iterable[Usage], module: ModuleType) -> list[str]:
    """One line per unguarded usage whose name no class of `module` (nor the module) has, or whose call fits none of
    the name's pybind11 signatures."""
    owners: list[Any] = [module, *(v for v in vars(module).values() if isinstance(v, type))]
    out = []
    for u in used:
        if u.guarded:
            continue
        attrs = [getattr(o, u.name) for o in owners if u.name in dir(o)]
        if not attrs:
            out.append(f"{u.where}: {u.name} is not in {module.__name__}")
            continue
        if u.positional is None:
            continue
        sigs = [s for a in attrs for s in _arities(getattr(a, "__doc__", "") or "", u.name)]
        given = u.positional + len(u.keywords)
        fits = any(lo <= given <= hi and set(u.keywords) <= kw for lo, hi, kw in sigs)
        if sigs and not fits:
            shown = "; ".join(f"{lo}-{hi} argument(s)" for lo, hi, _ in sigs)
            out.append(
                f"{u.where}: {u.name} called with {given} argument(s) {list(u.keywords)}, signatures take {shown}"
            )
    return out
