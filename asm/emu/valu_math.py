"""Elementwise math behind the VALU ops (on typed numpy arrays): IEEE min/max, bit ops, packing, and the division helpers
v_div_scale / v_div_fmas / v_div_fixup implement."""
from __future__ import annotations

import numpy as np

from hcq.asm.emu import numerics as N

u16, u32, u64, i32, i64 = np.uint16, np.uint32, np.uint64, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64


I24 = lambda x: ((x.astype(i32) << 8) >> 8)
U24 = lambda x: x & u32(0xffffff)


def fmin(a, b): return np.where((a == 0) & (b == 0), np.where(np.signbit(a), a, b), np.fmin(a, b))
def fmax(a, b): return np.where((a == 0) & (b == 0), np.where(np.signbit(a), b, a), np.fmax(a, b))
def fminimum(a, b): return np.where(np.isnan(a) | np.isnan(b), a + b, fmin(a, b))   # IEEE 754-2019 minimum: NaN wins
def fmaximum(a, b): return np.where(np.isnan(a) | np.isnan(b), a + b, fmax(a, b))
def med3(a, b, c, mn, mx): return mx(mn(a, b), mn(mx(a, b), c))
def fmed3(a, b, c):
  """V_MED3_F32 as the ISA pseudocode (and LLVM's constant folding of llvm.amdgcn.fmed3) define it: a NaN input gives
  v_min3; else the max of the two sources other than the first one equal (==, so -0 == +0) to the max of all three."""
  m = fmax(fmax(a, b), c)
  r = np.where(m == a, fmax(b, c), np.where(m == b, fmax(a, c), fmax(a, b)))
  return np.where(np.isnan(a) | np.isnan(b) | np.isnan(c), fmin(fmin(a, b), c), r)
def shift_mask(b, bits): return b & b.dtype.type(bits - 1)


def via_f64(fn, dt):
  return lambda a: fn(a.astype(f64)).astype(dt)


def sin_rev(a, cos: bool = False):
  """V_SIN / V_COS: sin(S0 * 2 * PI) of S0 in revolutions, reduced exactly before the f64 sine (r = x - round(x) is exact
  in f64, and sin(pi - y) = sin(y) folds it into [-1/4, 1/4]), so whole and half revolutions give exact zeros."""
  x = a.astype(f64)
  r = x - np.rint(x)   # exact, and so is the quarter turn added to this fraction of at most 24 bits
  if cos: r = r + 0.25 - np.rint(r + 0.25)
  m = np.abs(r)
  m = np.where(m > 0.25, 0.5 - m, m)
  out = np.copysign(np.sin(2 * np.pi * m), r)
  out = np.where(m == 0, 0.0, out) if cos else np.where(a == 0, a.astype(f64), out)   # sin(±0) = ±0
  return out.astype(a.dtype)


def rcp(a): return (1.0 / a.astype(f64)).astype(a.dtype)
def rsq(a): return (1.0 / np.sqrt(a.astype(f64))).astype(a.dtype)
def bfe(a, off, n, signed):
  off, n = off & u32(31), n & u32(31)
  src = a.astype(i32).astype(i64) if signed else a   # signed: an arithmetic shift (ISA pseudocode S0.i32 >> offset)
  sh = (src >> off.astype(src.dtype)).astype(u64) & ((u64(1) << n.astype(u64)) - u64(1))
  if signed: sh = np.where((n > 0) & ((sh >> (n.astype(u64) - u64(1)).clip(0)) & u64(1)).astype(bool), sh | ~((u64(1) << n.astype(u64)) - u64(1)), sh)
  return sh.astype(u32) if not signed else sh.astype(u32).view(i32)


def clz(a):
  a = np.asarray(a, u32)
  r = np.full(a.shape, 32, np.int64)
  nz = a != 0
  r[nz] = 31 - np.floor(np.log2(a[nz].astype(f64))).astype(np.int64)
  return np.where(nz, r, -1).astype(i32)


def ctz(a):
  a = np.asarray(a, u32)
  low = a & (~a + u32(1))
  return np.where(a != 0, np.log2(np.where(a != 0, low, 1).astype(f64)).astype(np.int64), -1).astype(i32)


def cls(a):
  """v_cls_i32 (gfx9 v_ffbh_i32): the index from the MSB of the first bit that differs from the sign bit, the sign bit
  being index 0 (RDNA3 ISA: 0x40000000 -> 1, 0x0fffffff -> 4, 0xfffffffe -> 31); -1 for 0 and -1. That is clz of the
  value with its sign folded away."""
  a = np.asarray(a).view(i32)
  return clz(np.where(a < 0, ~a, a).view(u32))


def popcount(a):
  a = np.asarray(a, u32)
  return np.unpackbits(np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (4,)), axis=-1).sum(-1).astype(u32)


def bitreverse(a):
  a = np.ascontiguousarray(np.asarray(a, u32))
  b = np.unpackbits(a.view(np.uint8).reshape(a.shape + (4,)), axis=-1, bitorder="little")
  return np.packbits(b[..., ::-1], axis=-1, bitorder="little").view(u32).reshape(a.shape)


def perm(s0, s1, sel):
  """v_perm_b32: each selector byte picks a byte of {s0,s1} (s1 is bytes 0-3) or a constant."""
  data = (s0.astype(u64) << u64(32)) | s1.astype(u64)
  out = np.zeros(np.broadcast(s0, s1, sel).shape, u32)
  for k in range(4):
    b = ((sel >> u32(8 * k)) & u32(0xff)).astype(u64)
    byte = (data >> (np.minimum(b, u64(7)) * u64(8))) & u64(0xff)
    sign = lambda bit: np.where(((data >> u64(bit)) & u64(1)).astype(bool), u64(0xff), u64(0))
    r = np.select([b < 8, b == 8, b == 9, b == 10, b == 11, b == 12], [byte, sign(15), sign(31), sign(47), sign(63), u64(0)], u64(0xff))
    out |= (r.astype(u32) << u32(8 * k))
  return out


def cvt_pk_rtz(a, b):
  def rtz(x):
    h = x.astype(f16)
    over = np.abs(h.astype(f32)) > np.abs(x)
    toward = np.nextafter(h, f16(0)).astype(f16)
    return np.where(over & np.isfinite(x), toward, h).view(u16).astype(u32)
  return rtz(a) | (rtz(b) << u32(16))


def absdiff(a, b): return np.where(a > b, a - b, b - a)
def pack16(a, b): return (np.asarray(a).astype(np.int64).astype(u32) & u32(0xffff)) | ((np.asarray(b).astype(np.int64).astype(u32) & u32(0xffff)) << u32(16))


def norm16(x, signed):
  """Float -> 16-bit normalized integer: clamp to [-1, 1] ([0, 1]) and scale by 32767 (65535), round to nearest even."""
  x = np.nan_to_num(np.asarray(x).astype(f64), nan=0.0)
  return np.rint(np.clip(x, -1.0, 1.0) * 32767) if signed else np.rint(np.clip(x, 0.0, 1.0) * 65535)


def float_to_int16(x, signed):
  lo, hi = (-32768, 32767) if signed else (0, 65535)
  t = np.trunc(np.nan_to_num(x.astype(f64), nan=0.0))
  return np.clip(t, lo, hi).astype(np.int64).astype(np.int16 if signed else np.uint16)


def div_scale(s0, s1, s2, bits):
  """v_div_scale: prescale the numerator/denominator of a division so the quotient stays normal; VCC says it did."""
  ebits, bias, mant, scale = (8, 127, 23, 64) if bits == 32 else (11, 1023, 52, 128)
  ut = u32 if bits == 32 else u64
  dt = s0.dtype
  exp = lambda x: ((x.view(ut) >> ut(mant)) & ut((1 << ebits) - 1)).astype(np.int64)
  tiny = np.finfo(dt).tiny
  s0, s1, s2 = np.broadcast_arrays(s0, s1, s2)
  d = s0.copy(); vcc = np.zeros(s0.shape, bool)
  with np.errstate(all="ignore"):
    q = s2.astype(f64) / s1.astype(f64) if bits == 32 else s2 / s1
    inv = 1.0 / s1.astype(f64)
    den = lambda x: (x != 0) & (np.abs(x) < tiny)
    up = lambda x: N.ldexp(x, np.full(x.shape, scale), dt)
    down = lambda x: N.ldexp(x, np.full(x.shape, -scale), dt)
    c_nan = (s2 == 0) | (s1 == 0)
    c_big = ~c_nan & (exp(s2) - exp(s1) >= (96 if bits == 32 else 768))
    c_d1 = ~c_nan & ~c_big & den(s1)
    qd = den(q.astype(dt)) if bits == 32 else den(q)
    invd = (np.abs(inv) < (tiny if bits == 32 else 2.2250738585072014e-308)) & (inv != 0)
    c_both = ~c_nan & ~c_big & ~c_d1 & invd & qd
    c_inv = ~c_nan & ~c_big & ~c_d1 & ~c_both & invd
    c_q = ~c_nan & ~c_big & ~c_d1 & ~c_both & ~c_inv & qd
    c_tiny = ~c_nan & ~c_big & ~c_d1 & ~c_both & ~c_inv & ~c_q & (exp(s2) <= mant)
    d = np.where(c_nan, dt.type(np.nan), d)
    d = np.where(c_big & (s0 == s1), up(s0), d)
    d = np.where(c_both & (s0 == s1), down(s0), d)   # 1/d and n/d subnormal: d is huge, scale it down
    d = np.where(c_d1 | c_tiny, up(s0), d)
    d = np.where(c_inv, down(s0), d)
    d = np.where(c_q & (s0 == s2), up(s0), d)
    vcc = c_big | c_both | c_q
  return d, vcc


def div_fmas(a, b, c, vcc, bits):
  """v_div_fmas: fma(a, b, c), times 2^+-64 (f32) / 2^+-128 (f64) where VCC is set (the sign from c's exponent: the
  scaled quotient's), rounded once: the scale is applied before the rounding, so a subnormal quotient is exact."""
  ut, mant, bias, scale = (u32, 23, 127, 64) if bits == 32 else (u64, 52, 1023, 128)
  e = ((np.asarray(c).view(ut) >> ut(mant)) & ut(0xff if bits == 32 else 0x7ff)).astype(np.int64)
  k = np.where(vcc, np.where(e > bias, scale, -scale), 0)
  if bits == 32:
    with np.errstate(all="ignore"):
      s = N.round_to_odd_sum(a.astype(f64) * b.astype(f64), c.astype(f64))
      return N.ldexp(s, k, f64).astype(np.float32)
  r = N.fma64(a, b, c)
  r = np.where(k != 0, N.ldexp(r, k, f64), r)
  tiny = vcc & (np.abs(r) < 2.0 ** -1021)
  if tiny.any():
    r = np.array(r, copy=True)
    a, b, c = np.broadcast_arrays(a, b, c)
    for i in zip(*np.nonzero(tiny)): r[i] = N._exact_fma(float(a[i]), float(b[i]), float(c[i]), int(k[i]))
  return r


def div_fixup(q, d, n):
  """v_div_fixup: the special cases of n/d (NaN, inf, 0), an exponent gap too wide for the scaled quotient
  (underflow -> 0), an infinite or NaN scaled quotient (overflow -> inf), and the sign; else the quotient's magnitude."""
  dt = np.asarray(q).dtype
  ebits, mant = {2: (5, 10), 4: (8, 23), 8: (11, 52)}[dt.itemsize]
  ut = {2: np.uint16, 4: u32, 8: u64}[dt.itemsize]
  exp = lambda x: ((np.asarray(x).view(ut) >> ut(mant)) & ut((1 << ebits) - 1)).astype(np.int64)
  top = (1 << ebits) - 1
  gap = {2: -25, 4: -150, 8: -1075}[dt.itemsize]
  q, d, n = np.broadcast_arrays(q, d, n)
  with np.errstate(all="ignore"):
    sign = np.signbit(n) ^ np.signbit(d)
    inf, zero = np.where(sign, -np.inf, np.inf).astype(dt), np.where(sign, -0.0, 0.0).astype(dt)
    mag = np.abs(q)
    out = np.where(sign, -mag, mag).astype(dt)
    out = np.where(exp(q) == top, inf, out)                             # overflow
    out = np.where(exp(n) - exp(d) < gap, zero, out)                    # underflow
    out = np.where(np.isinf(d) | (n == 0), zero, out)
    out = np.where((d == 0) | np.isinf(n), inf, out)
    out = np.where(((d == 0) & (n == 0)) | (np.isinf(d) & np.isinf(n)), dt.type(np.nan), out)
    out = np.where(np.isnan(d), d, out)
    return np.where(np.isnan(n), n, out).astype(dt)


def trig_preop(x, sel):
  """v_trig_preop_f64: 53 bits of 2/pi starting at bit (exponent(x) > 1077 ? exponent-1077 : 0) + 53*sel."""
  import fractions
  out = np.empty(np.broadcast(x, sel).shape, f64)
  xs, ss = np.broadcast_arrays(x, sel)
  two_over_pi_bits = _TWO_OVER_PI
  for idx in np.ndindex(out.shape):
    e = int((np.asarray(xs[idx]).view(u64) >> u64(52)) & u64(0x7ff))
    shift = (e - 1077 if e > 1077 else 0) + 53 * int(ss[idx] & 31)
    chunk = (two_over_pi_bits >> max(0, 1200 - 53 - shift)) & ((1 << 53) - 1)
    out[idx] = float(fractions.Fraction(chunk, 1 << (53 + shift)))
  return out


def _two_over_pi(bits: int = 1200) -> int:
  """floor(2/pi * 2**bits), by Machin's formula in integers."""
  prec = bits + 64
  one = 1 << prec
  def atan_inv(n):
    s, t, k, n2 = 0, one // n, 1, n * n
    while t:
      s += t // k if (k // 2) % 2 == 0 else -(t // k)
      t //= n2; k += 2
    return s
  pi = 4 * (4 * atan_inv(5) - atan_inv(239))
  return ((2 * one * one) // pi) >> 64


_TWO_OVER_PI = _two_over_pi()


# ---- cube maps (the ISA's V_CUBE* pseudo-code): the major axis is z if |z| >= |x|, |y|; else y if |y| >= |x|; else x --
def _cube_axis(x, y, z):
  ax, ay, az = np.abs(x), np.abs(y), np.abs(z)
  zmaj = (az >= ax) & (az >= ay)
  return zmaj, ~zmaj & (ay >= ax)


def cubeid(x, y, z):
  zmaj, ymaj = _cube_axis(x, y, z)
  return np.where(zmaj, np.where(z < 0, 5.0, 4.0), np.where(ymaj, np.where(y < 0, 3.0, 2.0), np.where(x < 0, 1.0, 0.0))).astype(f32)


def cubesc(x, y, z):
  zmaj, ymaj = _cube_axis(x, y, z)
  return np.where(zmaj, np.where(z < 0, -x, x), np.where(ymaj, x, np.where(x < 0, z, -z))).astype(f32)


def cubetc(x, y, z):
  zmaj, ymaj = _cube_axis(x, y, z)
  return np.where(zmaj, -y, np.where(ymaj, np.where(y < 0, -z, z), -y)).astype(f32)


def cubema(x, y, z):
  zmaj, ymaj = _cube_axis(x, y, z)
  return (f32(2) * np.where(zmaj, z, np.where(ymaj, y, x))).astype(f32)


def mullit(a, b, c):
  """v_mullit_f32: -MAX_FLOAT where S1 is -MAX_FLOAT, -inf or NaN or S2 <= 0 or NaN; else S0 * S1."""
  lowest = f32(-np.finfo(f32).max)
  bad = (b == lowest) | (b == -np.inf) | np.isnan(b) | ~(c > 0)
  return np.where(bad, lowest, a * b).astype(f32)


def _sad_bytes(a, b, masked):
  """Sum over 4 bytes of |a - b| (masked: skip bytes where b's byte is 0), as int64."""
  total = 0
  for k in range(4):
    x, y = (a >> u64(8 * k)) & u64(255), (b >> u64(8 * k)) & u64(255)
    d = np.where(x > y, x - y, y - x).astype(i64)
    total = total + (np.where(y == 0, 0, d) if masked else d)
  return total


def quad_sad(src0, src1, acc, masked, lane_bits):
  """v_qsad_pk_u16_u8 / v_mqsad_pk_u16_u8 (4 x 16-bit results, accumulators from S2's halves) and v_mqsad_u32_u8
  (4 x 32-bit, S2 a 128-bit quad): result i is the (masked) SAD of S0's bytes i..i+3 against S1 plus accumulator i,
  truncated to its width."""
  out = []
  m = (1 << lane_bits) - 1
  for i in range(4):
    window = (src0 >> u64(8 * i)) & u64(0xffffffff)
    out.append((_sad_bytes(window, src1.astype(u64), masked) + acc[i].astype(i64)) & m)
  return out
