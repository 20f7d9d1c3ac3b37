"""Integer and bit instructions (PTX ISA 9.7.1, 9.7.8): values are numpy arrays of the instruction's type."""
from __future__ import annotations
import numpy as np

from .types import SINT, UINT, as_uint, int_limits, is_signed
from .parser import type_bytes

M32 = np.uint64(0xffffffff)


def mulhi_u64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """High 64 bits of the 128-bit unsigned product (32-bit halves)."""
  a, b = np.asarray(a, np.uint64), np.asarray(b, np.uint64)
  s32 = np.uint64(32)
  al, ah, bl, bh = a & M32, a >> s32, b & M32, b >> s32
  ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
  mid = (ll >> s32) + (lh & M32) + (hl & M32)
  return hh + (lh >> s32) + (hl >> s32) + (mid >> s32)


def mul(mode: str, t: str, a, b):
  """mul.lo / mul.hi / mul.wide: the product's low half, high half, or the full double-width product."""
  n = type_bytes(t)
  sg = is_signed(t)
  if mode == "wide":
    wt = (SINT if sg else UINT)[2 * n]
    return np.asarray(a).astype(wt, copy=False) * np.asarray(b).astype(wt, copy=False)
  if mode == "lo":
    return (as_uint(a, n) * as_uint(b, n)).view((SINT if sg else UINT)[n])
  if n < 8:
    wt = np.int64 if sg else np.uint64
    p = np.asarray(a).astype(wt) * np.asarray(b).astype(wt)
    return (p >> (8 * n)).astype((SINT if sg else UINT)[n])
  ua, ub = np.asarray(a).view(np.uint64) if np.ndim(a) else np.uint64(np.int64(a).view(np.uint64)), None
  ua = np.asarray(a).astype(np.int64).view(np.uint64) if sg else np.asarray(a, np.uint64)
  ub = np.asarray(b).astype(np.int64).view(np.uint64) if sg else np.asarray(b, np.uint64)
  hi = mulhi_u64(ua, ub)
  if sg:  # signed high half from the unsigned one: subtract b when a < 0 and a when b < 0 (mod 2^64)
    hi = hi - np.where(np.asarray(a) < 0, ub, 0).astype(np.uint64) - np.where(np.asarray(b) < 0, ua, 0).astype(np.uint64)
    return hi.view(np.int64)
  return hi


def saturate_int(v: np.ndarray, t: str) -> np.ndarray:
  lo, hi = int_limits(t)
  return np.clip(v, lo, hi).astype((SINT if is_signed(t) else UINT)[type_bytes(t)])


def div(t: str, a, b, rem: bool):
  """Truncating division; by zero the hardware gives all ones for div (and a for rem), which the PTX ISA leaves
  unspecified (stricter choices would be no better defined; this is what SASS's software division returns)."""
  n = type_bytes(t)
  dt = (SINT if is_signed(t) else UINT)[n]
  a, b = np.broadcast_arrays(np.asarray(a, dt), np.asarray(b, dt))
  zero = b == 0
  bs = np.where(zero, dt(1), b)
  with np.errstate(all="ignore"):
    if is_signed(t):
      wide = a.astype(np.int64), bs.astype(np.int64)
      if n < 8:
        q = np.trunc(wide[0] / wide[1]).astype(np.int64) if False else _tdiv(wide[0], wide[1])
        r = wide[0] - q * wide[1]
      else:
        r = np.fmod(a, bs)
        ovf = (a == np.iinfo(np.int64).min) & (bs == -1)
        q = np.where(ovf, a, (a - r) // np.where(ovf, 1, bs))
        r = np.where(ovf, 0, r)
    else:
      q, r = a // bs, a % bs
  if rem: return np.where(zero, a, r).astype(dt)
  return np.where(zero, dt(-1) if is_signed(t) else np.iinfo(dt).max, q).astype(dt)


def _tdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  q = np.abs(a) // np.abs(b)
  return np.where((a < 0) != (b < 0), -q, q)


def shift(op: str, t: str, a, s):
  """shl/shr: the amount is unsigned and clamps at the width (PTX 9.7.8.7/8: 'shift amounts greater than the
  register width N are clamped to N'); shr.sN fills with the sign."""
  n = type_bytes(t) * 8
  s = np.minimum(np.asarray(s).astype(np.uint64), n)
  if op == "shl":
    u = np.asarray(a).astype(np.uint64)
    r = np.where(s >= n, 0, u << np.minimum(s, n - 1))
    return r.astype(UINT[n // 8])
  if is_signed(t):
    x = np.asarray(a).astype(np.int64)
    return (x >> np.minimum(s, 63).astype(np.int64)).astype(SINT[n // 8])
  u = np.asarray(a).astype(np.uint64)
  return np.where(s >= n, 0, u >> np.minimum(s, 63)).astype(UINT[n // 8])


def popc(t: str, a) -> np.ndarray:
  u = np.asarray(a).astype(np.uint64)
  return np.bitwise_count(u).astype(np.uint32) if hasattr(np, "bitwise_count") else np.array([bin(int(x)).count("1") for x in u.ravel()], np.uint32)


def _bitlen32(u: np.ndarray) -> np.ndarray:
  """Bit length of values below 2^32 (frexp's exponent is exact for them)."""
  return np.frexp(u.astype(np.float64))[1].astype(np.int64)


def clz(t: str, a) -> np.ndarray:
  n = type_bytes(t) * 8
  u = np.asarray(a).astype(UINT[n // 8]).astype(np.uint64)
  if n < 64: return (n - _bitlen32(u)).astype(np.uint32)
  hi, lo = u >> np.uint64(32), u & M32
  return np.where(hi != 0, 32 - _bitlen32(hi), 64 - _bitlen32(lo)).astype(np.uint32)


def bfind(t: str, a, shiftamt: bool) -> np.ndarray:
  """Position of the most significant non-sign bit; 0xffffffff when none (PTX 9.7.1.17)."""
  n = type_bytes(t) * 8
  x = np.asarray(a)
  u = (np.where(x < 0, ~x, x) if is_signed(t) else x).astype(np.uint64) & np.uint64((1 << n) - 1)
  pos = (n - 1 - clz("b64" if n == 64 else "b32", u.astype(UINT[n // 8])).astype(np.int64))
  if n == 64: pos = 63 - clz("b64", u).astype(np.int64)
  r = np.where(u == 0, 0xffffffff, (n - 1 - pos) if shiftamt else pos)
  return r.astype(np.int64).astype(np.uint32)


def brev(t: str, a) -> np.ndarray:
  n = type_bytes(t)
  b = np.ascontiguousarray(np.asarray(a).astype(UINT[n])).view(np.uint8)
  r = np.unpackbits(b, bitorder="little").reshape(-1, 8 * n)[:, ::-1]
  return np.packbits(r, axis=1, bitorder="little").reshape(-1).view(UINT[n])


def bfe(t: str, a, pos, ln) -> np.ndarray:
  """bfe: extract len bits at pos, sign-extending for .s (PTX 9.7.1.19)."""
  n = type_bytes(t) * 8
  pos = np.asarray(pos).astype(np.int64) & 0xff
  ln = np.asarray(ln).astype(np.int64) & 0xff
  u = np.asarray(a).astype(UINT[n // 8]).astype(np.uint64)
  shifted = np.where(pos >= n, 0, u >> np.minimum(pos, 63).astype(np.uint64))
  mask = np.where(ln >= 64, np.uint64(0xffffffffffffffff), (np.uint64(1) << np.minimum(ln, 63).astype(np.uint64)) - np.uint64(1))
  v = shifted & mask
  if is_signed(t):
    sbit_pos = np.minimum(pos + ln - 1, n - 1)
    sbit = np.where(ln == 0, 0, (u >> sbit_pos.astype(np.uint64)) & np.uint64(1))
    ext = np.where(ln >= n, 0, ~mask)
    v = np.where(sbit == 1, v | ext, v)
  return v.astype(UINT[n // 8]).view((SINT if is_signed(t) else UINT)[n // 8])


def bfi(t: str, a, b, pos, ln) -> np.ndarray:
  n = type_bytes(t) * 8
  pos = np.asarray(pos).astype(np.int64) & 0xff
  ln = np.asarray(ln).astype(np.int64) & 0xff
  ua, ub = np.asarray(a).astype(np.uint64), np.asarray(b).astype(UINT[n // 8]).astype(np.uint64)
  ln = np.minimum(ln, np.maximum(n - pos, 0))
  mask = ((np.uint64(1) << ln.astype(np.uint64)) - np.uint64(1)) << np.minimum(pos, 63).astype(np.uint64)
  mask = np.where(pos >= n, 0, mask)
  r = (ub & ~mask) | ((ua << np.minimum(pos, 63).astype(np.uint64)) & mask)
  return r.astype(UINT[n // 8])


def prmt(a, b, c, mode: str | None) -> np.ndarray:
  """prmt.b32 (default mode): pick bytes of {b, a} by c's nibbles, bit 3 replicating the sign (PTX 9.7.8.9)."""
  if mode is not None: raise NotImplementedError(f"prmt.b32.{mode}")
  x = (np.asarray(b).astype(np.uint64) << np.uint64(32)) | np.asarray(a).astype(np.uint64)
  c = np.asarray(c).astype(np.uint64)
  x, c = np.broadcast_arrays(x, c)
  out = np.zeros(x.shape, np.uint64)
  for i in range(4):
    sel = (c >> np.uint64(4 * i)) & np.uint64(0xf)
    byte = (x >> ((sel & np.uint64(7)) * np.uint64(8))) & np.uint64(0xff)
    byte = np.where(sel & np.uint64(8), np.where(byte & np.uint64(0x80), np.uint64(0xff), np.uint64(0)), byte)
    out |= byte << np.uint64(8 * i)
  return out.astype(np.uint32)


def shf(direction: str, mode: str, a, b, c) -> np.ndarray:
  """shf.l/r.clamp/wrap.b32: funnel shift of {b:a} (PTX 9.7.8.10)."""
  x = (np.asarray(b).astype(np.uint64) << np.uint64(32)) | np.asarray(a).astype(np.uint64)
  n = np.asarray(c).astype(np.uint64)
  n = np.minimum(n, np.uint64(32)) if mode == "clamp" else n & np.uint64(31)
  if direction == "l": return ((x << n) >> np.uint64(32)).astype(np.uint32)
  return (x >> n).astype(np.uint32)


def lop3(a, b, c, lut) -> np.ndarray:
  a, b, c = (np.asarray(x).astype(np.uint32) for x in (a, b, c))
  r = np.zeros(np.broadcast(a, b, c).shape, np.uint32)
  ones = np.uint32(0xffffffff)
  for i in range(8):
    if int(lut) >> i & 1:
      r |= (a if i & 4 else ~a & ones) & (b if i & 2 else ~b & ones) & (c if i & 1 else ~c & ones)
  return r
