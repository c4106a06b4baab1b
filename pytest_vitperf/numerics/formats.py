"""Element formats E2M1, E4M3FN, E5M2 and the scale format E8M0: exact encode/decode in float64.

Rounding is to nearest, ties to even, saturating: with a = |y|, m mantissa bits and emin = 1 - bias,
the spacing is d(a) = 2^(max(floor(log2 a), emin) - m) and Q(y) = sign(y) * min(MAX, d * rint(a / d)).
`a / d` and `d * k` are exact in float64 (d is a power of two), so the only rounding is `rint`'s.

Non-finite policy (saturating conversion, as TensorRT and Model Optimizer quantize):
- finite values beyond MAX saturate to +-MAX;
- +-Inf saturates to +-MAX in E4M3FN (which has no Inf) and stays +-Inf in E5M2;
- NaN encodes as the format's NaN (sign kept) in E4M3FN and E5M2; E2M1 has no NaN, so a NaN input is a
  ValueError;
- -0.0 encodes with its sign bit set (IEEE, as torch's float8 casts do).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
U8 = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class ElementFormat:
    name: str
    ebits: int
    mbits: int
    bias: int
    max: float
    has_inf: bool
    has_nan: bool

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def min_normal(self) -> float:
        return float(2.0**self.emin)

    @property
    def min_subnormal(self) -> float:
        return float(2.0 ** (self.emin - self.mbits))

    @property
    def emax(self) -> int:
        """Exponent of the largest binade (OCP's emax_elem): 8 for E4M3, 15 for E5M2, 2 for E2M1."""
        return int(np.floor(np.log2(self.max)))

    @property
    def bits(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def sign_mask(self) -> int:
        return 1 << (self.ebits + self.mbits)

    @property
    def nan_code(self) -> int:
        return (1 << (self.ebits + self.mbits)) - 1  # all exponent and mantissa bits: 0x7F for both FP8s

    def round(self, y: npt.ArrayLike) -> F64:
        """Nearest representable value, ties to even, saturating (see the module docstring for specials)."""
        with np.errstate(invalid="ignore"):
            y = np.asarray(y, dtype=np.float64)
        if not self.has_nan and np.isnan(y).any():
            raise ValueError(f"y holds NaN, which {self.name} cannot encode")
        a = np.abs(y)
        with np.errstate(invalid="ignore", over="ignore"):
            _, e = np.frexp(a)  # a = f * 2^e with f in [0.5, 1): floor(log2 a) = e - 1
            d = np.ldexp(1.0, np.maximum(e - 1, self.emin) - self.mbits)
            q = np.minimum(d * np.rint(a / d), self.max)
        if self.has_inf:
            q = np.where(np.isinf(a), np.inf, q)
        q = np.where(np.isnan(a), np.nan, q)
        return np.copysign(q, y)

    def encode(self, y: npt.ArrayLike) -> U8:
        """Codes of the rounded values, one per byte (sign in bit ebits+mbits).

        Found by binary search over the midpoints of the grid, independently of `round`'s closed form (the
        tests hold the two against each other). Ties go to the even code: the midpoint above an odd code is
        lowered by one ulp, so that a value exactly on it counts as past it.
        """
        with np.errstate(invalid="ignore"):
            y = np.asarray(y, dtype=np.float64)
        nan = np.isnan(y)
        has_nan = bool(nan.any())
        if has_nan and not self.has_nan:
            raise ValueError(f"y holds NaN, which {self.name} cannot encode")
        codes = np.searchsorted(self._tie_even_midpoints(), np.abs(y), side="left").astype(np.uint8)
        if self.has_inf:
            codes[np.isinf(y)] = ((1 << self.ebits) - 1) << self.mbits
        if has_nan:
            codes[nan] = self.nan_code
        codes |= np.signbit(y).view(np.uint8) << np.uint8(self.ebits + self.mbits)
        return codes

    def _tie_even_midpoints(self) -> F64:
        g = self.grid()  # codes 0..len(g)-1 hold these values in order (sign-magnitude layout)
        mids = (g[:-1] + g[1:]) / 2
        mids[1::2] = np.nextafter(mids[1::2], -np.inf)  # mids[i] sits between codes i and i+1
        return mids

    def decode(self, codes: npt.ArrayLike) -> F64:
        c = np.asarray(codes).astype(np.int64)
        if c.size and (c.min() < 0 or c.max() >= (1 << self.bits)):
            raise ValueError(f"codes must lie in [0, {1 << self.bits}) for {self.name}")
        sign = np.where(c & self.sign_mask, -1.0, 1.0)
        biased = (c >> self.mbits) & ((1 << self.ebits) - 1)
        mant = (c & ((1 << self.mbits) - 1)).astype(np.float64)
        normal = np.ldexp(1.0 + mant / (1 << self.mbits), biased - self.bias)
        sub = mant * self.min_subnormal
        v = np.where(biased == 0, sub, normal)
        top = biased == (1 << self.ebits) - 1
        if self.has_inf:  # IEEE-like: all-ones exponent is Inf (mantissa 0) or NaN
            v = np.where(top & (mant == 0), np.inf, np.where(top, np.nan, v))
        elif self.has_nan:  # FN: only all-ones exponent and mantissa is NaN
            v = np.where((c & ~self.sign_mask) == self.nan_code, np.nan, v)
        return sign * v

    def grid(self) -> F64:
        """Every non-negative finite value, ascending."""
        codes = np.arange(self.sign_mask)
        v = self.decode(codes)
        return np.unique(v[np.isfinite(v)])


E2M1 = ElementFormat("e2m1", ebits=2, mbits=1, bias=1, max=6.0, has_inf=False, has_nan=False)
E4M3 = ElementFormat("e4m3fn", ebits=4, mbits=3, bias=7, max=448.0, has_inf=False, has_nan=True)
E5M2 = ElementFormat("e5m2", ebits=5, mbits=2, bias=15, max=57344.0, has_inf=True, has_nan=True)
ELEMENTS = {f.name: f for f in (E2M1, E4M3, E5M2)}
ELEMENTS["e4m3"] = E4M3


def element_format(name: str) -> ElementFormat:
    try:
        return ELEMENTS[name.lower()]
    except KeyError:
        raise ValueError(f"element must be one of {', '.join(sorted(ELEMENTS))}, got {name!r}") from None


# -- E8M0: the shared power-of-two scale of the MX formats -------------------------------------------
E8M0_BIAS = 127
E8M0_NAN = 0xFF


def e8m0_decode(codes: npt.ArrayLike) -> F64:
    """2^(b - 127) for b = 0..254; 0xFF is NaN. There is no zero and no sign."""
    c = np.asarray(codes).astype(np.int64)
    if c.size and (c.min() < 0 or c.max() > 0xFF):
        raise ValueError("codes must lie in [0, 255] for e8m0")
    return np.where(c == E8M0_NAN, np.nan, np.ldexp(1.0, c - E8M0_BIAS))


def e8m0_encode_exponent(exponent: npt.ArrayLike) -> U8:
    """Code of 2^exponent, the exponent clamped to the representable [-127, 127]."""
    e = np.clip(np.asarray(exponent, dtype=np.int64), -E8M0_BIAS, E8M0_BIAS)
    return (e + E8M0_BIAS).astype(np.uint8)


# -- FP4 packing: two E2M1 codes per byte, even element in the low nibble ---------------------------
def pack_fp4(codes: npt.ArrayLike) -> U8:
    """byte[i] = code[2i+1] << 4 | code[2i] along the last axis (ONNX FLOAT4E2M1, torch float4_e2m1fn_x2)."""
    c = np.asarray(codes)
    if c.shape[-1] % 2:
        raise ValueError(f"codes must have an even last axis to pack two per byte, got {c.shape[-1]}")
    if c.size and (c.min() < 0 or c.max() > 0xF):
        raise ValueError("codes must be 4-bit values in [0, 15]")
    c = c.astype(np.uint8)
    return ((c[..., 1::2] << 4) | c[..., 0::2]).astype(np.uint8)


def unpack_fp4(packed: npt.ArrayLike) -> U8:
    p = np.asarray(packed, dtype=np.uint8)
    out = np.empty((*p.shape[:-1], p.shape[-1] * 2), dtype=np.uint8)
    out[..., 0::2] = p & 0x0F
    out[..., 1::2] = p >> 4
    return out
