"""IEEE arithmetic with PTX's rounding modifiers (.rn/.rz/.rm/.rp), .ftz and .sat, vectorised with numpy.

f16, bf16 and f32 results are computed exactly enough in f64 and rounded once: an f64 result rounded to odd
(RO: truncate, set the last bit if inexact) keeps every rounding to a format of p <= 51 bits correct (Boldo &
Melquiond, "When double rounding is odd", 2005). Round-to-odd needs the sign of the exact error, which TwoSum
(add), an exact product (f32 and narrower multiply exactly in f64), and exact residuals (div, sqrt) give.
f64 results with a directed mode use the same error terms; an f64 fma whose product is inexact is computed with
Python fractions (float(Fraction) rounds correctly), since numpy has no fused multiply-add.
f16 values live as numpy float16, bf16 as its uint16 bits, f32/f64 as numpy floats.
"""
from __future__ import annotations
import math
from fractions import Fraction

import numpy as np

from .scratch import scratch

_TINY32 = np.float32(np.finfo(np.float32).tiny)
_LOW29 = (1 << 29) - 1   # the f64 mantissa bits below an f32's


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
  return (np.asarray(bits, np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def from_fmt(v: np.ndarray, fmt: str) -> np.ndarray:
  """A format's values (bf16 as bits) as f64."""
  return bf16_to_f32(v).astype(np.float64) if fmt == "bf16" else np.asarray(v).astype(np.float64)


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """s = RN(a+b) and the exact error e = a + b - s (Knuth)."""
  with np.errstate(all="ignore"):
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
  return s, np.where(np.isfinite(s), e, 0.0)


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """p = RN(a*b) and the exact error (Dekker's split; exact unless the product under- or overflows)."""
  with np.errstate(all="ignore"):
    p = a * b
    def split(x):
      c = x * 134217729.0
      hi = c - (c - x)
      return hi, x - hi
    ah, al = split(a)
    bh, bl = split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
  return p, np.where(np.isfinite(p) & np.isfinite(e), e, 0.0)


def round_odd(v: np.ndarray, err_sign: np.ndarray) -> np.ndarray:
  """Round-to-odd of an f64 RN result `v` whose exact value is v + (something of sign err_sign)."""
  v = np.asarray(v, np.float64)
  bits = v.view(np.uint64)
  fix = (err_sign != 0) & ((bits & np.uint64(1)) == 0) & np.isfinite(v)
  if not fix.any(): return v
  return np.where(fix, np.nextafter(v, np.where(err_sign > 0, np.inf, -np.inf)), v)


def adjust_f64(v: np.ndarray, err_sign: np.ndarray, mode: str, finite_in: np.ndarray | bool = False) -> np.ndarray:
  """An f64 RN result `v` (exact value v + err of sign err_sign) rounded by `mode` instead; where the inputs were
  finite (`finite_in`) an infinite v is an overflow, which .rz gives as the largest finite value, and .rm/.rp on
  the side they round toward zero (IEEE 754 7.4)."""
  if mode == "rn": return v
  if mode == "rm": step = err_sign < 0
  elif mode == "rp": step = err_sign > 0
  else: step = (err_sign != 0) & (np.sign(err_sign) != np.sign(v)) & (v != 0)
  target = {"rm": -np.inf, "rp": np.inf, "rz": 0.0}[mode]
  r = np.where(step & np.isfinite(v), np.nextafter(v, target), v)
  ovf = np.isinf(v) & finite_in & ((mode == "rz") | ((mode == "rm") & (v > 0)) | ((mode == "rp") & (v < 0)))
  return np.where(ovf, np.copysign(np.finfo(np.float64).max, v), r)


def _narrow(v: np.ndarray, dtype, mode: str) -> np.ndarray:
  """f64 -> f32 or f16 by mode: numpy's conversion rounds to nearest; a directed mode steps one ulp where the
  conversion went the wrong way (the difference is exact: the two are within a factor of 2)."""
  with np.errstate(all="ignore"):
    r = v.astype(dtype)
    if mode == "rn": return r
    d = v - r.astype(np.float64)
  if mode == "rm": step, tgt = d < 0, -np.inf
  elif mode == "rp": step, tgt = d > 0, np.inf
  else: step, tgt = (d != 0) & (np.sign(d) != np.sign(r)) & (r != 0), 0.0
  return np.where(step, np.nextafter(r, dtype(tgt)), r)


def _ro32(v: np.ndarray) -> np.ndarray:
  """f64 -> f32 rounded to odd (for a following rounding to bf16)."""
  r = _narrow(v, np.float32, "rz")
  with np.errstate(all="ignore"): inexact = (r.astype(np.float64) != v) & np.isfinite(v)
  bits = r.view(np.uint32)
  return np.where(inexact, bits | np.uint32(1), bits).view(np.float32)


def _bf16_from_f32(x: np.ndarray, mode: str) -> np.ndarray:
  b = np.asarray(x, np.float32).view(np.uint32)
  low, hi = b & np.uint32(0xffff), b >> np.uint32(16)
  neg = (b >> np.uint32(31)) == 1
  if mode == "rn": up = (low > 0x8000) | ((low == 0x8000) & ((hi & np.uint32(1)) == 1))
  elif mode == "rz": up = np.zeros(b.shape, bool)
  elif mode == "rp": up = (low != 0) & ~neg
  else: up = (low != 0) & neg
  out = (hi + up.astype(np.uint32)).astype(np.uint16)
  nan = np.isnan(np.asarray(x, np.float32))
  return np.where(nan, np.uint16(0x7fff), out).astype(np.uint16)


def to_fmt(v: np.ndarray, fmt: str, mode: str = "rn") -> np.ndarray:
  """f64 values (rounded to odd where inexact) rounded to fmt by mode; bf16 comes back as uint16 bits."""
  v = np.asarray(v, np.float64)
  if fmt == "f64": return v
  if fmt == "f32": return _narrow(v, np.float32, mode)
  if fmt == "f16": return _narrow(v, np.float16, mode)
  if fmt == "bf16": return _bf16_from_f32(_ro32(v), mode)
  raise ValueError(fmt)


def ftz(x: np.ndarray, fmt: str) -> np.ndarray:
  """Subnormal inputs/results to sign-preserving zero (PTX .ftz; f32 and f16 only)."""
  if fmt == "f32":
    return np.where(np.abs(x) < _TINY32, np.copysign(np.float32(0), x), x).astype(np.float32)
  if fmt == "f16":
    return np.where(np.abs(x) < np.float16(6.104e-05), np.copysign(np.float16(0), x), x).astype(np.float16)
  return x


def saturate(x: np.ndarray, fmt: str) -> np.ndarray:
  """.sat: clamp to [0.0, 1.0], NaN to +0.0 (PTX ISA 9.7.3, add.f32 and others)."""
  v = from_fmt(x, fmt)
  v = np.where(np.isnan(v), 0.0, np.clip(v, 0.0, 1.0))
  return to_fmt(v, fmt)


def _f64_fma_exact(a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: str, idx: np.ndarray) -> np.ndarray:
  """fma.f64 for finite inputs with rationals: the exact a*b+c rounded by mode (IEEE 754 signed zeros)."""
  out = np.empty(idx.size, np.float64)
  big = np.finfo(np.float64).max
  for j, i in enumerate(idx.tolist()):
    x, y, z = float(a[i]), float(b[i]), float(c[i])
    prod = Fraction(x) * Fraction(y)
    exact = prod + Fraction(z)
    if exact == 0:   # both addends zero: -0 only if both are; an exact cancellation: -0 only rounding down
      both_neg = prod == 0 and z == 0 and math.copysign(1, x) * math.copysign(1, y) < 0 and math.copysign(1, z) < 0
      out[j] = -0.0 if both_neg or (mode == "rm" and not (prod == 0 and z == 0 and not both_neg and
                                                            (math.copysign(1, x) * math.copysign(1, y) > 0) == (math.copysign(1, z) > 0))) else 0.0
      continue
    try: r = float(exact)   # correctly rounded to nearest
    except OverflowError: r = math.inf if exact > 0 else -math.inf
    if math.isinf(r):
      if mode == "rz" or (mode == "rm" and r > 0) or (mode == "rp" and r < 0): r = math.copysign(big, r)
    elif mode != "rn" and Fraction(r) != exact:
      above = Fraction(r) > exact
      if mode == "rm" and above: r = float(np.nextafter(r, -np.inf))
      elif mode == "rp" and not above: r = float(np.nextafter(r, np.inf))
      elif mode == "rz" and (r > 0) == above: r = float(np.nextafter(r, 0.0))
    out[j] = r
  return out


def fma_f32_rn(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
  """fma.rn.f32 fast: a*b is exact in f64, so RN32(RN64(a*b + c)) is right unless RN64 lands on an f32 midpoint
  (low 29 mantissa bits 1 followed by zeros) or the result is a nonzero at most f32's smallest normal in magnitude
  (the subnormal grid's midpoints sit elsewhere); those few take the exact path. An f64 zero is the exact sum's zero
  with its sign (the product and the sum are exact there)."""
  shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c)) or (1,)
  n = math.prod(shape)
  s = scratch("fma.sum", n, np.float64).reshape(shape)
  np.multiply(a, b, out=s, dtype=np.float64)
  np.add(s, c, out=s)
  r = s.astype(np.float32).reshape(-1)
  s = s.reshape(-1)
  t, hard, tiny = scratch("fma.low", n, np.uint64), scratch("fma.hard", n, np.bool_), scratch("fma.tiny", n, np.bool_)
  np.bitwise_and(s.view(np.uint64), np.uint64(_LOW29), out=t)   # contiguous: faster than the strided low word
  np.equal(t, np.uint64(1 << 28), out=hard)   # the low 29 bits are 1 followed by zeros: an f32 midpoint
  np.less_equal(np.abs(r, out=scratch("fma.abs", n, np.float32)), _TINY32, out=tiny)   # |RN64| < 2^-126 gives |r| <= 2^-126
  hard |= tiny
  if hard.any():
    i = np.nonzero(hard)[0]
    i = i[s[i] != 0]   # an exact zero is right already
    a, b, c = (np.broadcast_to(x, shape)[np.unravel_index(i, shape)] for x in (a, b, c))
    r[i] = arith("fma", "f32", "rn", a, b, c)
  return r.reshape(shape)


def arith(op: str, fmt: str, mode: str, *xs: np.ndarray) -> np.ndarray:
  """add/sub/mul/fma/div/sqrt in fmt with rounding `mode`, correctly rounded; inputs in fmt, result in fmt."""
  v = np.broadcast_arrays(*[from_fmt(x, fmt) for x in xs])
  with np.errstate(all="ignore"):
    if op in ("add", "sub"):
      s, e = two_sum(v[0], -v[1] if op == "sub" else v[1])
      if fmt == "f64": return adjust_f64(s, np.sign(e), mode, np.isfinite(v[0]) & np.isfinite(v[1]))
      r = round_odd(s, np.sign(e))
    elif op == "mul":
      if fmt == "f64":
        p, e = two_prod(v[0], v[1])
        return adjust_f64(p, np.sign(e), mode, np.isfinite(v[0]) & np.isfinite(v[1]))
      r = v[0] * v[1]
    elif op == "fma":
      if fmt == "f64":
        p, pe = two_prod(v[0], v[1])
        s, e = two_sum(p, v[2])
        r = adjust_f64(s, np.sign(e), mode)
        fin = np.isfinite(v[0]) & np.isfinite(v[1])
        r = np.where(fin & np.isinf(v[2]), v[2], r)   # finite*finite + inf is that inf, even when a*b overflows in f64
        hard = np.nonzero(((pe != 0) | np.isinf(p)) & fin & np.isfinite(v[2]))[0]
        if hard.size:
          r = r.copy()
          r[hard] = _f64_fma_exact(v[0], v[1], v[2], mode, hard)
        return r
      s, e = two_sum(v[0] * v[1], v[2])
      r = round_odd(s, np.sign(e))
    elif op == "div":
      q = v[0] / v[1]
      h, l = two_prod(q, v[1])
      rs = np.sign((v[0] - h) - l) * np.sign(v[1])
      rs = np.where(np.isfinite(q) & (q != 0) | ((q == 0) & (v[0] != 0) & np.isfinite(v[1])), rs, 0)
      if fmt == "f64": return adjust_f64(q, rs, mode, np.isfinite(v[0]) & np.isfinite(v[1]) & (v[1] != 0))
      r = round_odd(q, rs)
    elif op == "sqrt":
      q = np.sqrt(v[0])
      h, l = two_prod(q, q)
      rs = np.where(np.isfinite(q) & (q > 0), np.sign((v[0] - h) - l), 0)
      if fmt == "f64": return adjust_f64(q, rs, mode)
      r = round_odd(q, rs)
    else: raise ValueError(op)
  return to_fmt(r, fmt, mode)
