"""Number formats and IEEE helpers the VALU semantics share: register bits <-> typed numpy arrays, fused
multiply-add without double rounding, and the f16/bf16 conversions.

numpy computes f32 in f32 and f16 through f32 (exact for +,-,*,/,sqrt: f32 has more than 2*11+2 bits), so those
round to nearest even exactly as the ISA says. Fused multiply-add is done in f64 with round-to-odd, which makes
the final rounding to f32 correct.
"""
from __future__ import annotations

import numpy as np

u16, u32, u64 = np.uint16, np.uint32, np.uint64
F32_QNAN = 0x7fc00000

# type name -> (register width in bits, numpy dtype of the value)
TYPES = {
  "f32": (32, np.float32), "i32": (32, np.int32), "u32": (32, np.uint32), "b32": (32, np.uint32),
  "f16": (16, np.float16), "i16": (16, np.int16), "u16": (16, np.uint16), "b16": (16, np.uint16), "bf16": (16, np.float32),
  "f64": (64, np.float64), "i64": (64, np.int64), "u64": (64, np.uint64), "b64": (64, np.uint64),
  "i8": (8, np.int8), "u8": (8, np.uint8),
}
FLOATS = frozenset({"f32", "f16", "f64", "bf16"})


def width(t: str) -> int: return TYPES[t][0]


def bits_to(bits: np.ndarray, t: str, hi: bool = False) -> np.ndarray:
  """Register bits (uint32, or uint64 for 64-bit types) -> values of type t; `hi` picks the upper half of a 16-bit operand."""
  if t in ("u32", "b32"): return bits
  if t == "f32": return bits.view(np.float32)
  if t == "i32": return bits.view(np.int32)
  if t in ("f64", "i64", "u64", "b64"): return bits.view(TYPES[t][1])
  h = (bits >> u32(16)) if hi else (bits & u32(0xffff))
  if t == "bf16": return (h << u32(16)).view(np.float32)
  return h.astype(u16).view(TYPES[t][1])


def to_bits(x, t: str) -> np.ndarray:
  """Values of type t -> register bits: uint32 for 32- and 16-bit types (16-bit in the low half), uint64 for 64-bit."""
  x = np.asarray(x)
  if t in ("f64", "i64", "u64", "b64"): return x.astype(TYPES[t][1], copy=False).view(u64)
  if t == "f32": return x.astype(np.float32, copy=False).view(u32)
  if t in ("i32", "u32", "b32"): return x.astype(TYPES[t][1], copy=False).view(u32)
  if t == "bf16": return f32_to_bf16(x.astype(np.float32)).astype(u32)
  if t in ("i8", "u8"): return x.astype(TYPES[t][1]).view(np.uint8).astype(u32)
  return x.astype(TYPES[t][1], copy=False).view(u16).astype(u32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
  """f32 -> bf16 bits (uint16), round to nearest even, NaN kept quiet."""
  b = np.asarray(x, np.float32).view(u32)
  r = (b + u32(0x7fff) + ((b >> u32(16)) & u32(1))) >> u32(16)
  return np.where(np.isnan(x), (b >> u32(16)) | u32(0x40), r).astype(u16)


def round_to_odd_sum(p: np.ndarray, c: np.ndarray) -> np.ndarray:
  """p + c (f64) rounded to odd: the f64 nearest the exact sum, with the last bit set when it is inexact, so that a
  later rounding to f32 or f16 is correctly rounded (no double rounding)."""
  with np.errstate(all="ignore"):
    s = p + c
    bp = s - c
    e = (p - bp) + (c - (s - bp))   # TwoSum: the exact error of s
    even = (s.view(u64) & u64(1)) == 0
    fix = (e != 0) & even & np.isfinite(s)
    if fix.any(): s = np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
  return s


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
  """IEEE fused multiply-add in f32: the f64 product is exact; the f64 sum rounds to f32 correctly unless it landed
  exactly on an f32 halfway point (or in f32's subnormal range), and only those lanes are redone with round-to-odd."""
  with np.errstate(all="ignore"):
    p = np.multiply(a, b, dtype=np.float64)
    s = np.add(p, c, dtype=np.float64)
    suspect = (s.view(u64) & u64(0x1fffffff)) == u64(0x10000000)
    if s.size and np.abs(s).min() < 2.0 ** -125:   # rare: only then look for f32-subnormal results
      suspect |= (np.abs(s) < 2.0 ** -125) & (s != 0)   # an exact 0 needs no care (p == -c exactly)
    if suspect.any():
      pb, cb = np.broadcast_arrays(p, np.asarray(c, np.float64))
      s = s.copy()
      s[suspect] = round_to_odd_sum(pb[suspect], cb[suspect])
    return s.astype(np.float32)


def fma16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
  p = a.astype(np.float64) * b.astype(np.float64)
  with np.errstate(all="ignore"):
    return round_to_odd_sum(p, np.asarray(c, np.float64)).astype(np.float16)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  t = a * 134217729.0  # 2**27 + 1 (Veltkamp)
  hi = t - (t - a)
  return hi, a - hi


def fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
  """f64 fused multiply-add, correctly rounded by Boldo and Melquiond's emulation with rounding to odd: the exact
  product (Dekker) uh + ul, (th, tl) = TwoSum(c, uh), result = RN(th + RO(tl + ul)). Lanes whose result is subnormal
  or non-finite are recomputed exactly with fractions (the algorithm assumes no underflow)."""
  a, b, c = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (a, b, c)))
  with np.errstate(all="ignore"):
    uh = a * b
    ah, al = _split(a); bh, bl = _split(b)
    ul = ((ah * bh - uh) + ah * bl + al * bh) + al * bl
    th = c + uh
    bp = th - uh
    tl = (c - bp) + (uh - (th - bp))
    r = th + round_to_odd_sum(tl, ul)
    # Dekker's error term must be representable: products below 2^-969 (and results near underflow) go exact
    odd = ~np.isfinite(r) | (np.abs(r) < 2.0 ** -1021) | ~np.isfinite(uh) | ((np.abs(uh) < 2.0 ** -969) & (a != 0) & (b != 0))
    if odd.any():
      r = np.array(r, copy=True)
      for i in zip(*np.nonzero(odd)): r[i] = _exact_fma(float(a[i]), float(b[i]), float(c[i]))
    return r


def _exact_fma(a: float, b: float, c: float, scale: int = 0) -> float:
  """a*b+c (times 2**scale) rounded once, with IEEE specials (fractions for the finite case)."""
  import math
  from fractions import Fraction
  if not all(math.isfinite(x) for x in (a, b, c)) or (a * b == 0 and c == 0):
    return (a * b + c) * 2.0 ** scale
  x = (Fraction(a) * Fraction(b) + Fraction(c)) * Fraction(2) ** scale
  if x == 0: return 0.0 if not (math.copysign(1, a * b) < 0 and math.copysign(1, c) < 0) else -0.0
  try:
    return float(x)
  except OverflowError:   # beyond f64's range (copysign would convert the Fraction and overflow again)
    return math.inf if x > 0 else -math.inf


def ldexp(x: np.ndarray, e: np.ndarray, dtype) -> np.ndarray:
  with np.errstate(all="ignore"):
    # past +-2200 every result is 0 or infinity (f64 spans 2**-1074 .. 2**1024); a narrower clip made finite garbage
    return np.ldexp(x.astype(np.float64), np.clip(e.astype(np.int64), -2200, 2200).astype(np.int32)).astype(dtype)


def f32_to_int(x: np.ndarray, signed: bool) -> np.ndarray:
  """v_cvt_{i,u}32_f32/f64: truncate, saturate to the range, NaN -> 0 (as the ISA says)."""
  lo, hi = (-2.0**31, 2.0**31 - 1) if signed else (0.0, 2.0**32 - 1)
  with np.errstate(all="ignore"):
    t = np.trunc(np.nan_to_num(np.asarray(x, np.float64), nan=0.0))
    return np.clip(t, lo, hi).astype(np.int64).astype(np.int32 if signed else np.uint32)


def frexp_exp(x: np.ndarray) -> np.ndarray:
  """v_frexp_exp_i32: the exponent of frexp; 0 for 0, inf and NaN."""
  m, e = np.frexp(x)
  return np.where(np.isfinite(x), e, 0).astype(np.int32)


def frexp_mant(x: np.ndarray) -> np.ndarray:
  m, e = np.frexp(x)
  return np.where(np.isfinite(x), m, x).astype(x.dtype)


def fract(x: np.ndarray) -> np.ndarray:
  """v_fract: x - floor(x), clamped below 1 (the largest float under 1); NaN in, NaN out; inf -> NaN... (gfx11: inf -> 0? ISA: NaN)."""
  with np.errstate(all="ignore"):
    f = x - np.floor(x)
    f = np.minimum(f, np.nextafter(x.dtype.type(1), x.dtype.type(0)))
    return np.where(np.isinf(x), x.dtype.type(np.nan), f).astype(x.dtype)


def float_class(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
  """v_cmp_class: bit 0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf."""
  x = np.asarray(x)
  fi = np.finfo(x.dtype)
  nan = np.isnan(x)
  bits = x.view({2: u16, 4: u32, 8: u64}[x.itemsize])
  quiet_bit = {2: 1 << 9, 4: 1 << 22, 8: 1 << 51}[x.itemsize]
  quiet = (bits & bits.dtype.type(quiet_bit)) != 0
  neg = np.signbit(x)
  ax = np.abs(x)
  zero, inf = x == 0, np.isinf(x)
  den = (ax < fi.tiny) & ~zero & ~nan
  norm = ~nan & ~inf & ~zero & ~den
  cls = np.select([nan & ~quiet, nan & quiet, inf & neg, norm & neg, den & neg, zero & neg, zero & ~neg, den & ~neg, norm & ~neg, inf & ~neg],
                  list(range(10)), 0)
  return ((np.asarray(mask).astype(np.int64) >> cls) & 1).astype(bool)


def flush_denormals(x: np.ndarray) -> np.ndarray:
  """Denormals to zero of the same sign (MODE.FP_DENORM flushing)."""
  x = np.asarray(x)
  return np.where(np.abs(x) < np.finfo(x.dtype).tiny, np.copysign(x.dtype.type(0), x), x).astype(x.dtype)


def ftz_bits(t: str) -> tuple[int, int]:
  """The Waves.ftz bits (inputs, outputs) that apply to float type t."""
  return (1, 2) if t == "f32" else (4, 8) if t in ("f16", "f64") else (0, 0)


# x86's default NaN (what numpy produces for inf-inf, 0*inf, sqrt(-1)) has the sign bit set; the ISA's is positive
_X86_DEFAULT_NAN = {2: (np.uint16(0xfe00), np.uint16(0x7e00)), 4: (u32(0xffc00000), u32(0x7fc00000)),
                    8: (u64(0xfff8000000000000), u64(0x7ff8000000000000))}


def canonical_nan(x: np.ndarray) -> np.ndarray:
  """Replace the host's default NaN by the ISA's quiet NaN (0x7fc00000 / 0x7e00 / 0x7ff8...): results of invalid
  operations then carry the hardware's bits; NaNs propagated from inputs keep theirs."""
  x = np.asarray(x)
  if x.dtype.kind != "f" or x.dtype.itemsize not in _X86_DEFAULT_NAN: return x
  host, isa = _X86_DEFAULT_NAN[x.dtype.itemsize]
  b = x.view(host.dtype)
  hit = b == host
  if not hit.any(): return x
  return np.where(hit, isa, b).view(x.dtype)


# ---- directed rounding (MODE.FP_ROUND: 0 nearest even, 1 toward +inf, 2 toward -inf, 3 toward zero) ----------------
def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """f64 a + b as hi + err exactly (Knuth's TwoSum); err is 0 where an input is not finite."""
  with np.errstate(all="ignore"):
    s = a + b
    ap = s - b
    bp = s - ap
    err = (a - ap) + (b - bp)
    return s, np.where(np.isfinite(a) & np.isfinite(b), err, 0.0)


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """f64 a * b as hi + err (Dekker); where the product is near underflow (Dekker's error term is not representable)
  err is only the sign of the exact error, from fractions."""
  with np.errstate(all="ignore"):
    p = a * b
    ah, al = _split(a); bh, bl = _split(b)
    err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    err = np.where(np.isfinite(a) & np.isfinite(b), err, 0.0)
    # near underflow, or an operand so large that Veltkamp's split overflows: the sign from fractions instead
    tiny = (((np.abs(p) < 2.0 ** -969) & (a != 0) & (b != 0)) | (np.maximum(np.abs(a), np.abs(b)) > 2.0 ** 995) | ~np.isfinite(err)) \
        & np.isfinite(a) & np.isfinite(b)
    if tiny.any():
      a_, b_, p_ = np.broadcast_arrays(a, b, p)
      err = np.array(np.broadcast_to(err, p_.shape))
      err[tiny] = fma64_residual_sign(a_[tiny], b_[tiny], np.zeros(int(tiny.sum())), p_[tiny])
    return p, err


def fma64_residual_sign(a: np.ndarray, b: np.ndarray, c: np.ndarray, r: np.ndarray) -> np.ndarray:
  """sign(a*b + c - r) for the f64 fma result r (exact, with fractions: only the directed-rounding path uses it);
  NaN where the exact value is infinite and r is not (overflow), 0 where an input is not finite."""
  import math
  from fractions import Fraction
  a, b, c, r = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (a, b, c, r)))
  out = np.zeros(r.shape)
  for i in np.ndindex(r.shape):
    x, y, z, v = float(a[i]), float(b[i]), float(c[i]), float(r[i])
    if not all(math.isfinite(t) for t in (x, y, z)): continue
    if not math.isfinite(v): out[i] = np.nan; continue
    d = Fraction(x) * Fraction(y) + Fraction(z) - Fraction(v)
    out[i] = (d > 0) - (d < 0)
  return out


def round_directed(hi: np.ndarray, err: np.ndarray, dtype, mode: int) -> np.ndarray:
  """The exact value hi + err (f64 pair) rounded to `dtype` under round mode `mode` (1 up, 2 down, 3 toward zero):
  round to nearest, then step one ulp where that went the wrong way. An exact value that overflowed f64 comes as
  hi = +-inf with err NaN (it lies below +inf / above -inf)."""
  with np.errstate(all="ignore"):
    hi, err = np.broadcast_arrays(np.asarray(hi, np.float64), np.asarray(err, np.float64))
    r = hi.astype(dtype)
    d = r.astype(np.float64) - hi
    ovf = np.isinf(hi) & np.isnan(err)
    err = np.where(np.isnan(err), 0.0, err)
    below = (d < 0) | ((d == 0) & (err > 0)) | (ovf & (hi < 0))   # r < exact
    above = (d > 0) | ((d == 0) & (err < 0)) | (ovf & (hi > 0))   # r > exact
    t = np.dtype(dtype).type
    up, down = np.nextafter(r, t(np.inf)), np.nextafter(r, t(-np.inf))
    if mode == 1: r = np.where(below, up, r)
    elif mode == 2: r = np.where(above, down, r)
    elif mode == 3: r = np.where(above & (hi > 0), down, np.where(below & (hi < 0), up, r))
    return np.asarray(r, dtype)


def fp8_to_f32(b: np.ndarray, kind: str, fnuz: bool = False) -> np.ndarray:
  """OCP 8-bit floats (gfx12's fp8 = E4M3FN: bias 7, no infinities, S.1111.111 is NaN; bf8 = E5M2: bias 15, IEEE
  infinities and NaNs) -> f32, exactly. `fnuz`: gfx942's formats (E4M3FNUZ / E5M2FNUZ, ROCm's amd_hip_fp8.h takes
  gfx940-942's hardware conversions for its _fnuz types): bias 8 / 16, no infinities, 0x80 the only NaN, no -0."""
  b = np.asarray(b).astype(np.int64) & 0xff
  ebits, mbits, bias = (4, 3, 7) if kind == "fp8" else (5, 2, 15)
  bias += fnuz
  s, e, m = b >> 7, (b >> mbits) & ((1 << ebits) - 1), b & ((1 << mbits) - 1)
  with np.errstate(all="ignore"):
    v = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - mbits), np.ldexp((m | (1 << mbits)).astype(np.float64), e - bias - mbits))
    top = e == (1 << ebits) - 1
    if fnuz: return np.where(b == 0x80, np.nan, np.where(s == 1, -v, v)).astype(np.float32)
    if kind == "fp8": v = np.where(top & (m == 7), np.nan, v)
    else: v = np.where(top, np.where(m == 0, np.inf, np.nan), v)
    return np.where(s == 1, -v, v).astype(np.float32)
