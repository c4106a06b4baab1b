"""Where a change in time went: two sides' kernel profiles, grouped by kernel, by kind of kernel and, where the
backend can say, by module, with each group's change, its share of the whole change, and an interval over repeated
profiles.

A profile is milliseconds per inference by kernel name (kernels.kernel_times); each side gives several from one
process. Their interval covers what moves within that process, not the process's own draw, so a group counts as
moved only beyond a floor as well: in an A/A with nothing changed (H100, 2026-11-28), groups of one process pair
moved by up to 0.9% of the row's kernel time, beyond intervals taken within each process. Names are normalised
first: the same kernel family launched with another tile or cluster shape, or another Inductor kernel index, is
one group whose time moved, not a kernel gone and another new; block indices in module paths fold the same way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_vitperf.measure.kernels import category

# Kernels that say what they run only in their first template argument: CUTLASS's launchers, ATen's elementwise
# loops (whose argument is the functor, or the function that made the lambda).
_WRAPPERS = re.compile(r"(?:^|::)(?:Kernel2?|device_kernel|\w*elementwise_kernel\w*)$")
_SHAPE = re.compile(r"\d+(?:x\d+)+")  # 128x256, 64x4, 1x2x1: tiles, stages, clusters
_INDUCTOR_INDEX = re.compile(r"^(triton_(?:poi|per|red|tem|for)_\w+?)_\d+$")
_INDEX = re.compile(r"(?<=\.)\d+(?=\.|$)")  # blocks.3.attn: one of a stack of blocks
NEW, GONE = "new in B", "gone in B"


def _depth_zero(text: str, open_: str, close: str) -> tuple[str, list[str]]:
    """`text` without what its `open_`/`close` brackets hold, and the top-level comma-separated parts they held."""
    kept: list[str] = []
    parts: list[str] = []
    part: list[str] = []
    depth = 0
    for ch in text:
        if ch == open_:
            depth += 1
            if depth == 1:
                continue
        elif ch == close and depth:
            depth -= 1
            if depth == 0:
                parts.append("".join(part).strip())
                part = []
                continue
        if depth == 0:
            kept.append(ch)
        elif depth == 1 and ch == ",":
            parts.append("".join(part).strip())
            part = []
        else:
            part.append(ch)
    return "".join(kept).strip(), parts


def _function_name(text: str) -> tuple[str, list[str]]:
    """A kernel's name without `void`, its argument list and its template arguments; and those arguments."""
    text = re.sub(r"^void\s+", "", text.strip()).replace("(anonymous namespace)::", "")
    outer, args = _depth_zero(text, "<", ">")
    return outer.split("(", 1)[0].strip(), args


def normalise(name: str) -> str:
    """A kernel's name without template arguments, argument list and launch shapes (a wrapper keeps what it wraps:
    `cutlass::Kernel2<cutlass_80_tensorop_..._256x128_32x3_nn_align8>` reads `cutlass_80_tensorop_..._*_*_nn_align8`,
    an ATen elementwise loop names its functor)."""
    outer, args = _function_name(name)
    if _WRAPPERS.search(outer):
        inner = next((a for a in args if a and not a.isdigit()), "")
        if inner:
            wrapped = _function_name(inner)[0]
            outer = wrapped if outer.endswith(("Kernel", "Kernel2", "device_kernel")) else f"{outer}[{wrapped}]"
    outer = _SHAPE.sub("*", outer)
    return _INDUCTOR_INDEX.sub(r"\1", outer)


@dataclass(frozen=True)
class Group:
    name: str
    a_ms: float  # mean per inference over side A's profiles
    b_ms: float
    share: float  # of the profiled change; all groups' shares add up to 1
    low: float | None  # interval on b_ms - a_ms; None where it cannot be had (one profile a side)
    high: float | None
    change: str = ""  # NEW, GONE or ""
    moved: bool = False  # its interval excludes no change, and the change reaches the diff's floor

    @property
    def delta_ms(self) -> float:
        return self.b_ms - self.a_ms


@dataclass(frozen=True)
class KernelDiff:
    a_ms: float  # kernel time per inference, mean over A's profiles
    b_ms: float
    profiles: tuple[int, int]
    confidence: float  # each grouping's intervals hold together at this level (Bonferroni over its groups)
    by_kind: list[Group]  # kernels.category: gemm, attention, quantize, norm, elementwise, other
    by_kernel: list[Group]
    by_module: list[Group] = field(default_factory=list)  # empty where the backend cannot say
    floor_ms: float = 0.0  # the least change that counts as moved

    @property
    def delta_ms(self) -> float:
        return self.b_ms - self.a_ms

    @property
    def changed_ms(self) -> float:
        """The change carried by kernels new in B or gone in B."""
        return math.fsum(g.delta_ms for g in self.by_kernel if g.change)

    def as_dict(self) -> dict[str, Any]:
        def rows(groups: list[Group]) -> list[dict[str, Any]]:
            return [{"name": g.name, "a_ms": g.a_ms, "b_ms": g.b_ms, "delta_ms": g.delta_ms, "share": g.share,
                     "interval_ms": None if g.low is None else [g.low, g.high], "change": g.change, "moved": g.moved}
                    for g in groups]  # fmt: skip

        return {"a_ms": self.a_ms, "b_ms": self.b_ms, "delta_ms": self.delta_ms, "profiles": list(self.profiles),
                "confidence": self.confidence, "floor_ms": self.floor_ms, "changed_ms": self.changed_ms,
                "by_kind": rows(self.by_kind), "by_kernel": rows(self.by_kernel),
                "by_module": rows(self.by_module)}  # fmt: skip

    def markdown(self, top: int = 8) -> list[str]:
        """Kinds, then the `top` kernels and modules by the size of their change, for a pull-request comment."""
        head = (f"Kernel time per inference: A {self.a_ms:.3f} ms, B {self.b_ms:.3f} ms ({self.delta_ms:+.3f} ms), "
                f"from {self.profiles[0]} and {self.profiles[1]} profiles; intervals {self.confidence:.0%} "
                f"over each table's rows together; a group moved when beyond its interval and {self.floor_ms:.4f} ms")
        out = [head]
        whole = abs(self.delta_ms) >= self.floor_ms  # below the floor, shares of the change say nothing
        if whole and any(g.change for g in self.by_kernel):
            out.append(f"Kernels new in B or gone in B: {self.changed_ms:+.3f} ms, "
                       f"{self.changed_ms / self.delta_ms:.0%} of the change")  # fmt: skip
        tables = [("kind", self.by_kind), ("kernel", self.by_kernel[:top])]
        tables += [("module", self.by_module[:top])] if self.by_module else []
        for title, groups in tables:
            out += ["", f"| {title} | A ms | B ms | Δ ms | share of Δ | interval | |", "|---|---|---|---|---|---|---|"]
            for g in groups:
                interval = "cannot: one profile a side" if g.low is None else f"[{g.low:+.4f}, {g.high:+.4f}]"
                flag = " ".join(x for x in (g.change, "moved" if g.moved else "") if x)
                share = f"{g.share:.0%}" if whole else "-"
                out.append(f"| `{g.name}` | {g.a_ms:.4f} | {g.b_ms:.4f} | {g.delta_ms:+.4f} | {share} | "
                           f"{interval} | {flag} |")  # fmt: skip
        if not self.by_module:
            out += ["", "By module: not in this backend's profile (a compiled torch engine's kernels are fused "
                        "across modules; --vitperf-compile off profiles an eager one by module)"]  # fmt: skip
        return out


def _interval(a: list[float], b: list[float], confidence: float) -> tuple[float | None, float | None]:
    """Welch's interval on mean(b) - mean(a); exact where neither side varies."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        return None, None
    delta = math.fsum(b) / len(b) - math.fsum(a) / len(a)
    if max(a) == min(a) and max(b) == min(b):
        return delta, delta
    ci = stats.ttest_ind(b, a, equal_var=False).confidence_interval(confidence)
    return float(ci.low), float(ci.high)


def _mean_total(profiles: Sequence[dict[str, float]]) -> float:
    return math.fsum(math.fsum(p.values()) for p in profiles) / len(profiles)


def _groups(a: Sequence[dict[str, float]], b: Sequence[dict[str, float]], key: Callable[[str], str],
            total: float, confidence: float, floor: float) -> list[Group]:  # fmt: skip
    """The profiles' entries grouped by `key`; `total` is the whole change, which the groups' shares divide."""
    keys = {name: key(name) for p in [*a, *b] for name in p}  # a name is parsed once

    def grouped(profiles: Sequence[dict[str, float]]) -> list[dict[str, float]]:
        out = []
        for p in profiles:
            g: dict[str, float] = {}
            for name, ms in p.items():
                g[keys[name]] = g.get(keys[name], 0.0) + ms
            out.append(g)
        return out

    ga, gb = grouped(a), grouped(b)
    names = sorted({n for p in ga + gb for n in p})
    level = 1 - (1 - confidence) / max(1, len(names))
    rows = []
    for n in names:
        xa, xb = [p.get(n, 0.0) for p in ga], [p.get(n, 0.0) for p in gb]
        a_ms, b_ms = math.fsum(xa) / len(xa), math.fsum(xb) / len(xb)
        change = NEW if not any(xa) else GONE if not any(xb) else ""
        low, high = _interval(xa, xb, level)
        moved = low is not None and high is not None and (low > 0 or high < 0) and abs(b_ms - a_ms) >= floor
        rows.append(Group(n, a_ms, b_ms, (b_ms - a_ms) / total if total else 0.0, low, high, change, moved))
    return sorted(rows, key=lambda g: (-abs(g.delta_ms), g.name))


def module_key(path: str) -> str:
    """A module path with its block indices folded: blocks.3.attn.qkv reads blocks.*.attn.qkv."""
    return _INDEX.sub("*", path)


def diff(a: Sequence[dict[str, float]], b: Sequence[dict[str, float]], confidence: float = 0.95,
         floor: float = 0.0, a_modules: Sequence[dict[str, float]] = (),
         b_modules: Sequence[dict[str, float]] = ()) -> KernelDiff:  # fmt: skip
    """Side A's and side B's profiles (ms per inference by kernel name, one dict a profile), compared; `floor` is the
    least change, as a share of A's kernel time, that counts as moved; with both sides' module profiles, by module
    too."""
    if not a or not b:
        raise ValueError("a kernel difference needs at least one profile a side")
    a_ms, b_ms = _mean_total(a), _mean_total(b)
    args = (b_ms - a_ms, confidence, floor * a_ms)
    modules = _groups(a_modules, b_modules, module_key, *args) if a_modules and b_modules else []
    return KernelDiff(a_ms, b_ms, (len(a), len(b)), confidence, _groups(a, b, category, *args),
                      _groups(a, b, normalise, *args), modules, floor * a_ms)  # fmt: skip
