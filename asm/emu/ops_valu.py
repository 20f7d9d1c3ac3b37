"""VALU semantics (VOP1, VOP2, VOP3, VOP3SD, VOPC, VOP3P, VOPD), keyed by mnemonic without its _e32/_e64 suffix.

OPS[name] = (dst type, source types, fn): fn takes typed numpy arrays (broadcasting over waves x lanes) and returns
the typed result; the builder reads the sources, applies VOP3 modifiers (abs, neg, opsel, omod, clamp) and writes
the active lanes. Ops that need lanes, masks or carries have their own builders (SPECIAL).
"""
from __future__ import annotations
import re

import numpy as np

from hcq.asm.emu import numerics as N
from hcq.asm.emu.numerics import FLOATS, bits_to, to_bits, width
from hcq.asm.emu.operands import DPP_SOURCE, scalar_reader, scalar_writer, vector_reader, write_vgpr, write_vgpr64
from hcq.asm.emu.wave import EXEC, VCC, Waves

u16, u32, u64, i32, i64 = np.uint16, np.uint32, np.uint64, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64
I24 = lambda x: ((x.astype(i32) << 8) >> 8)
U24 = lambda x: x & u32(0xffffff)


def _fmin(a, b): return np.where((a == 0) & (b == 0), np.where(np.signbit(a), a, b), np.fmin(a, b))
def _fmax(a, b): return np.where((a == 0) & (b == 0), np.where(np.signbit(a), b, a), np.fmax(a, b))
def _med3(a, b, c, mn, mx): return mx(mn(a, b), mn(mx(a, b), c))
def _sh(b, bits): return b & b.dtype.type(bits - 1)


def _transc(fn, dt):
  return lambda a: fn(a.astype(f64)).astype(dt)


def _rcp(a): return (1.0 / a.astype(f64)).astype(a.dtype)
def _rsq(a): return (1.0 / np.sqrt(a.astype(f64))).astype(a.dtype)
def _bfe(a, off, n, signed):
  off, n = off & u32(31), n & u32(31)
  sh = (a >> off).astype(u64) & ((u64(1) << n.astype(u64)) - u64(1))
  if signed: sh = np.where((n > 0) & ((sh >> (n.astype(u64) - u64(1)).clip(0)) & u64(1)).astype(bool), sh | ~((u64(1) << n.astype(u64)) - u64(1)), sh)
  return sh.astype(u32) if not signed else sh.astype(u32).view(i32)


def _clz(a):
  a = np.asarray(a, u32)
  r = np.full(a.shape, 32, np.int64)
  nz = a != 0
  r[nz] = 31 - np.floor(np.log2(a[nz].astype(f64))).astype(np.int64)
  return np.where(nz, r, -1).astype(i32)


def _ctz(a):
  a = np.asarray(a, u32)
  low = a & (~a + u32(1))
  return np.where(a != 0, np.log2(np.where(a != 0, low, 1).astype(f64)).astype(np.int64), -1).astype(i32)


def _cls(a):
  a = np.asarray(a).view(i32)
  x = np.where(a < 0, ~a, a).view(u32)
  c = _clz(x)
  return np.where((a == 0) | (a == -1), -1, c - 1 + 1 - 1 + (c >= 0) * 0).astype(i32)


def _popc(a):
  a = np.asarray(a, u32)
  return np.unpackbits(np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (4,)), axis=-1).sum(-1).astype(u32)


def _bitrev(a):
  a = np.ascontiguousarray(np.asarray(a, u32))
  b = np.unpackbits(a.view(np.uint8).reshape(a.shape + (4,)), axis=-1, bitorder="little")
  return np.packbits(b[..., ::-1], axis=-1, bitorder="little").view(u32).reshape(a.shape)


def _perm(s0, s1, sel):
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


def _cvt_pk_rtz(a, b):
  def rtz(x):
    h = x.astype(f16)
    over = np.abs(h.astype(f32)) > np.abs(x)
    toward = np.nextafter(h, f16(0)).astype(f16)
    return np.where(over & np.isfinite(x), toward, h).view(u16).astype(u32)
  return rtz(a) | (rtz(b) << u32(16))


def _absdiff(a, b): return np.where(a > b, a - b, b - a)
def _pk16(a, b): return (np.asarray(a).astype(np.int64).astype(u32) & u32(0xffff)) | ((np.asarray(b).astype(np.int64).astype(u32) & u32(0xffff)) << u32(16))


def _norm(x, signed):
  """Float -> 16-bit normalized integer: clamp to [-1, 1] ([0, 1]) and scale by 32767 (65535), round to nearest even."""
  x = np.nan_to_num(np.asarray(x).astype(f64), nan=0.0)
  return np.rint(np.clip(x, -1.0, 1.0) * 32767) if signed else np.rint(np.clip(x, 0.0, 1.0) * 65535)


def _f16_to_int(x, signed):
  lo, hi = (-32768, 32767) if signed else (0, 65535)
  t = np.trunc(np.nan_to_num(x.astype(f64), nan=0.0))
  return np.clip(t, lo, hi).astype(np.int64).astype(np.int16 if signed else np.uint16)


def _div_scale(s0, s1, s2, bits):
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


def _div_fmas(a, b, c, vcc, bits):
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


def _div_fixup(q, d, n):
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


def _trig_preop(x, sel):
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

F, I, U = "f32", "i32", "u32"
OPS: dict[str, tuple] = {
  # f32
  "v_add_f32": (F, (F, F), np.add), "v_sub_f32": (F, (F, F), np.subtract), "v_subrev_f32": (F, (F, F), lambda a, b: b - a),
  "v_mul_f32": (F, (F, F), np.multiply), "v_min_f32": (F, (F, F), _fmin), "v_max_f32": (F, (F, F), _fmax),
  "v_mul_dx9_zero_f32": (F, (F, F), lambda a, b: np.where((a == 0) | (b == 0), f32(0), a * b)),
  "v_fma_f32": (F, (F, F, F), N.fma32), "v_fmac_f32": (F, (F, F, F), N.fma32),
  "v_fma_dx9_zero_f32": (F, (F, F, F), lambda a, b, c: np.where((a == 0) | (b == 0), c + f32(0), N.fma32(a, b, c))),
  "v_fmac_dx9_zero_f32": (F, (F, F, F), lambda a, b, c: np.where((a == 0) | (b == 0), c + f32(0), N.fma32(a, b, c))),
  "v_ldexp_f32": (F, (F, I), lambda a, e: N.ldexp(a, e, f32)),
  "v_min3_f32": (F, (F, F, F), lambda a, b, c: _fmin(_fmin(a, b), c)), "v_max3_f32": (F, (F, F, F), lambda a, b, c: _fmax(_fmax(a, b), c)),
  "v_med3_f32": (F, (F, F, F), lambda a, b, c: _med3(a, b, c, _fmin, _fmax)),
  "v_minmax_f32": (F, (F, F, F), lambda a, b, c: _fmax(_fmin(a, b), c)), "v_maxmin_f32": (F, (F, F, F), lambda a, b, c: _fmin(_fmax(a, b), c)),
  "v_floor_f32": (F, (F,), np.floor), "v_ceil_f32": (F, (F,), np.ceil), "v_trunc_f32": (F, (F,), np.trunc), "v_rndne_f32": (F, (F,), np.rint),
  "v_fract_f32": (F, (F,), N.fract), "v_sqrt_f32": (F, (F,), np.sqrt), "v_rcp_f32": (F, (F,), _rcp), "v_rcp_iflag_f32": (F, (F,), _rcp),
  "v_rsq_f32": (F, (F,), _rsq), "v_exp_f32": (F, (F,), _transc(np.exp2, f32)), "v_log_f32": (F, (F,), _transc(np.log2, f32)),
  "v_sin_f32": (F, (F,), _transc(lambda x: np.sin(x * 2 * np.pi), f32)), "v_cos_f32": (F, (F,), _transc(lambda x: np.cos(x * 2 * np.pi), f32)),
  "v_frexp_mant_f32": (F, (F,), N.frexp_mant), "v_frexp_exp_i32_f32": (I, (F,), N.frexp_exp),
  "v_div_fixup_f32": (F, (F, F, F), _div_fixup),
  # f16
  "v_add_f16": ("f16", ("f16", "f16"), np.add), "v_sub_f16": ("f16", ("f16", "f16"), np.subtract),
  "v_subrev_f16": ("f16", ("f16", "f16"), lambda a, b: b - a), "v_mul_f16": ("f16", ("f16", "f16"), np.multiply),
  "v_min_f16": ("f16", ("f16", "f16"), _fmin), "v_max_f16": ("f16", ("f16", "f16"), _fmax),
  "v_fma_f16": ("f16", ("f16",) * 3, N.fma16), "v_fmac_f16": ("f16", ("f16",) * 3, N.fma16),
  "v_ldexp_f16": ("f16", ("f16", I), lambda a, e: N.ldexp(a, e, f16)),
  "v_min3_f16": ("f16", ("f16",) * 3, lambda a, b, c: _fmin(_fmin(a, b), c)), "v_max3_f16": ("f16", ("f16",) * 3, lambda a, b, c: _fmax(_fmax(a, b), c)),
  "v_med3_f16": ("f16", ("f16",) * 3, lambda a, b, c: _med3(a, b, c, _fmin, _fmax)),
  "v_minmax_f16": ("f16", ("f16",) * 3, lambda a, b, c: _fmax(_fmin(a, b), c)), "v_maxmin_f16": ("f16", ("f16",) * 3, lambda a, b, c: _fmin(_fmax(a, b), c)),
  "v_floor_f16": ("f16", ("f16",), np.floor), "v_ceil_f16": ("f16", ("f16",), np.ceil), "v_trunc_f16": ("f16", ("f16",), np.trunc),
  "v_rndne_f16": ("f16", ("f16",), np.rint), "v_fract_f16": ("f16", ("f16",), N.fract), "v_sqrt_f16": ("f16", ("f16",), _transc(np.sqrt, f16)),
  "v_rcp_f16": ("f16", ("f16",), _rcp), "v_rsq_f16": ("f16", ("f16",), _rsq), "v_exp_f16": ("f16", ("f16",), _transc(np.exp2, f16)),
  "v_log_f16": ("f16", ("f16",), _transc(np.log2, f16)), "v_sin_f16": ("f16", ("f16",), _transc(lambda x: np.sin(x * 2 * np.pi), f16)),
  "v_cos_f16": ("f16", ("f16",), _transc(lambda x: np.cos(x * 2 * np.pi), f16)),
  "v_frexp_mant_f16": ("f16", ("f16",), N.frexp_mant), "v_frexp_exp_i16_f16": ("i16", ("f16",), N.frexp_exp),
  "v_div_fixup_f16": ("f16", ("f16",) * 3, _div_fixup),
  # f64
  "v_add_f64": ("f64", ("f64", "f64"), np.add), "v_mul_f64": ("f64", ("f64", "f64"), np.multiply),
  "v_min_f64": ("f64", ("f64", "f64"), _fmin), "v_max_f64": ("f64", ("f64", "f64"), _fmax), "v_fma_f64": ("f64", ("f64",) * 3, N.fma64),
  "v_ldexp_f64": ("f64", ("f64", I), lambda a, e: N.ldexp(a, e, f64)),
  "v_floor_f64": ("f64", ("f64",), np.floor), "v_ceil_f64": ("f64", ("f64",), np.ceil), "v_trunc_f64": ("f64", ("f64",), np.trunc),
  "v_rndne_f64": ("f64", ("f64",), np.rint), "v_fract_f64": ("f64", ("f64",), N.fract), "v_sqrt_f64": ("f64", ("f64",), np.sqrt),
  "v_rcp_f64": ("f64", ("f64",), _rcp), "v_rsq_f64": ("f64", ("f64",), _rsq),
  "v_frexp_mant_f64": ("f64", ("f64",), N.frexp_mant), "v_frexp_exp_i32_f64": (I, ("f64",), N.frexp_exp),
  "v_div_fixup_f64": ("f64", ("f64",) * 3, _div_fixup), "v_trig_preop_f64": ("f64", ("f64", U), _trig_preop),
  # conversions
  "v_cvt_f32_i32": (F, (I,), lambda a: a.astype(f32)), "v_cvt_f32_u32": (F, (U,), lambda a: a.astype(f32)),
  "v_cvt_i32_f32": (I, (F,), lambda a: N.f32_to_int(a, True)), "v_cvt_u32_f32": (U, (F,), lambda a: N.f32_to_int(a, False)),
  "v_cvt_i32_f64": (I, ("f64",), lambda a: N.f32_to_int(a, True)), "v_cvt_u32_f64": (U, ("f64",), lambda a: N.f32_to_int(a, False)),
  "v_cvt_f64_i32": ("f64", (I,), lambda a: a.astype(f64)), "v_cvt_f64_u32": ("f64", (U,), lambda a: a.astype(f64)),
  "v_cvt_f32_f64": (F, ("f64",), lambda a: a.astype(f32)), "v_cvt_f64_f32": ("f64", (F,), lambda a: a.astype(f64)),
  "v_cvt_f16_f32": ("f16", (F,), lambda a: a.astype(f16)), "v_cvt_f32_f16": (F, ("f16",), lambda a: a.astype(f32)),
  "v_cvt_f16_i16": ("f16", ("i16",), lambda a: a.astype(f16)), "v_cvt_f16_u16": ("f16", ("u16",), lambda a: a.astype(f16)),
  "v_cvt_i16_f16": ("i16", ("f16",), lambda a: _f16_to_int(a, True)), "v_cvt_u16_f16": ("u16", ("f16",), lambda a: _f16_to_int(a, False)),
  "v_cvt_i32_i16": (I, ("i16",), lambda a: a.astype(i32)), "v_cvt_u32_u16": (U, ("u16",), lambda a: a.astype(u32)),
  "v_cvt_floor_i32_f32": (I, (F,), lambda a: N.f32_to_int(np.floor(a), True)),
  "v_cvt_nearest_i32_f32": (I, (F,), lambda a: N.f32_to_int(np.floor(a + f32(0.5)), True)),
  "v_cvt_f32_ubyte0": (F, (U,), lambda a: (a & u32(0xff)).astype(f32)), "v_cvt_f32_ubyte1": (F, (U,), lambda a: ((a >> u32(8)) & u32(0xff)).astype(f32)),
  "v_cvt_f32_ubyte2": (F, (U,), lambda a: ((a >> u32(16)) & u32(0xff)).astype(f32)), "v_cvt_f32_ubyte3": (F, (U,), lambda a: (a >> u32(24)).astype(f32)),
  "v_cvt_off_f32_i4": (F, (U,), lambda a: ((((a & u32(15)).astype(i32) ^ 8) - 8).astype(f32) / f32(16))),
  "v_cvt_pk_rtz_f16_f32": (U, (F, F), _cvt_pk_rtz),
  "v_cvt_pk_u16_u32": (U, (U, U), lambda a, b: np.minimum(a, u32(0xffff)) | (np.minimum(b, u32(0xffff)) << u32(16))),
  "v_cvt_pk_i16_i32": (U, (I, I), lambda a, b: (np.clip(a, -32768, 32767).astype(u32) & u32(0xffff)) | ((np.clip(b, -32768, 32767).astype(u32) & u32(0xffff)) << u32(16))),
  "v_cvt_pk_u8_f32": (U, (F, U, U), lambda a, b, c: (c & ~(u32(0xff) << ((b & u32(3)) * u32(8)))) | ((N.f32_to_int(np.rint(a), False).clip(0, 255).astype(u32)) << ((b & u32(3)) * u32(8)))),
  "v_pack_b32_f16": (U, ("b16", "b16"), lambda a, b: a.astype(u32) | (b.astype(u32) << u32(16))),
  "v_cvt_pk_norm_i16_f32": (U, (F, F), lambda a, b: _pk16(_norm(a, True), _norm(b, True))),
  "v_cvt_pk_norm_u16_f32": (U, (F, F), lambda a, b: _pk16(_norm(a, False), _norm(b, False))),
  "v_cvt_pk_norm_i16_f16": (U, ("f16", "f16"), lambda a, b: _pk16(_norm(a, True), _norm(b, True))),
  "v_cvt_pk_norm_u16_f16": (U, ("f16", "f16"), lambda a, b: _pk16(_norm(a, False), _norm(b, False))),
  "v_cvt_norm_i16_f16": ("i16", ("f16",), lambda a: _norm(a, True).astype(np.int16)),
  "v_cvt_norm_u16_f16": ("u16", ("f16",), lambda a: _norm(a, False).astype(np.uint16)),
  "v_cvt_pk_u16_f32": (U, (F, F), lambda a, b: _pk16(_f16_to_int(a, False), _f16_to_int(b, False))),
  "v_cvt_pk_i16_f32": (U, (F, F), lambda a, b: _pk16(_f16_to_int(a, True), _f16_to_int(b, True))),
  "v_sad_u8": (U, (U, U, U), lambda a, b, c: sum(_absdiff((a >> u32(8 * k)) & u32(255), (b >> u32(8 * k)) & u32(255)) for k in range(4)) + c),
  "v_sad_hi_u8": (U, (U, U, U), lambda a, b, c: (sum(_absdiff((a >> u32(8 * k)) & u32(255), (b >> u32(8 * k)) & u32(255)) for k in range(4)) << u32(16)) + c),
  "v_sad_u16": (U, (U, U, U), lambda a, b, c: sum(_absdiff((a >> u32(16 * k)) & u32(0xffff), (b >> u32(16 * k)) & u32(0xffff)) for k in range(2)) + c),
  "v_msad_u8": (U, (U, U, U), lambda a, b, c: sum(np.where(((b >> u32(8 * k)) & u32(255)) == 0, u32(0), _absdiff((a >> u32(8 * k)) & u32(255), (b >> u32(8 * k)) & u32(255))) for k in range(4)) + c),
  "v_sat_pk_u8_i16": ("u16", (U,), lambda a: (np.clip((a & u32(0xffff)).astype(u16).view(np.int16), 0, 255).astype(u16) | (np.clip((a >> u32(16)).astype(u16).view(np.int16), 0, 255).astype(u16) << u16(8)))),
  # 32-bit integer
  "v_mov_b32": (U, (U,), lambda a: a), "v_not_b32": (U, (U,), np.invert), "v_bfrev_b32": (U, (U,), _bitrev),
  "v_clz_i32_u32": (I, (U,), _clz), "v_ctz_i32_b32": (I, (U,), _ctz), "v_cls_i32": (I, (I,), lambda a: _clz(np.where(a < 0, ~a, a).view(u32)) - 1),
  "v_add_nc_u32": (U, (U, U), np.add), "v_sub_nc_u32": (U, (U, U), np.subtract), "v_subrev_nc_u32": (U, (U, U), lambda a, b: b - a),
  "v_add_nc_i32": (I, (I, I), np.add), "v_sub_nc_i32": (I, (I, I), np.subtract),
  "v_and_b32": (U, (U, U), np.bitwise_and), "v_or_b32": (U, (U, U), np.bitwise_or), "v_xor_b32": (U, (U, U), np.bitwise_xor),
  "v_xnor_b32": (U, (U, U), lambda a, b: ~(a ^ b)),
  "v_lshlrev_b32": (U, (U, U), lambda a, b: b << _sh(a, 32)), "v_lshrrev_b32": (U, (U, U), lambda a, b: b >> _sh(a, 32)),
  "v_ashrrev_i32": (I, (U, I), lambda a, b: b >> _sh(a, 32).astype(i32)),
  "v_min_i32": (I, (I, I), np.minimum), "v_max_i32": (I, (I, I), np.maximum), "v_min_u32": (U, (U, U), np.minimum), "v_max_u32": (U, (U, U), np.maximum),
  "v_min3_i32": (I, (I,) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)), "v_max3_i32": (I, (I,) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
  "v_min3_u32": (U, (U,) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)), "v_max3_u32": (U, (U,) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
  "v_med3_i32": (I, (I,) * 3, lambda a, b, c: _med3(a, b, c, np.minimum, np.maximum)), "v_med3_u32": (U, (U,) * 3, lambda a, b, c: _med3(a, b, c, np.minimum, np.maximum)),
  "v_minmax_i32": (I, (I,) * 3, lambda a, b, c: np.maximum(np.minimum(a, b), c)), "v_maxmin_i32": (I, (I,) * 3, lambda a, b, c: np.minimum(np.maximum(a, b), c)),
  "v_minmax_u32": (U, (U,) * 3, lambda a, b, c: np.maximum(np.minimum(a, b), c)), "v_maxmin_u32": (U, (U,) * 3, lambda a, b, c: np.minimum(np.maximum(a, b), c)),
  "v_mul_lo_u32": (U, (U, U), np.multiply), "v_mul_hi_u32": (U, (U, U), lambda a, b: ((a.astype(u64) * b.astype(u64)) >> u64(32)).astype(u32)),
  "v_mul_hi_i32": (I, (I, I), lambda a, b: ((a.astype(i64) * b.astype(i64)) >> 32).astype(i32)),
  "v_mul_u32_u24": (U, (U, U), lambda a, b: U24(a) * U24(b)), "v_mul_hi_u32_u24": (U, (U, U), lambda a, b: ((U24(a).astype(u64) * U24(b).astype(u64)) >> u64(32)).astype(u32)),
  "v_mul_i32_i24": (I, (U, U), lambda a, b: (I24(a) * I24(b)).astype(i32)), "v_mul_hi_i32_i24": (I, (U, U), lambda a, b: ((I24(a).astype(i64) * I24(b).astype(i64)) >> 32).astype(i32)),
  "v_mad_u32_u24": (U, (U, U, U), lambda a, b, c: U24(a) * U24(b) + c), "v_mad_i32_i24": (I, (U, U, I), lambda a, b, c: I24(a) * I24(b) + c),
  "v_mad_u32_u16": (U, ("u16", "u16", U), lambda a, b, c: a.astype(u32) * b.astype(u32) + c),
  "v_mad_i32_i16": (I, ("i16", "i16", I), lambda a, b, c: a.astype(i32) * b.astype(i32) + c),
  "v_bfe_u32": (U, (U, U, U), lambda a, o, n: _bfe(a, o, n, False)), "v_bfe_i32": (I, (U, U, U), lambda a, o, n: _bfe(a, o, n, True)),
  "v_bfi_b32": (U, (U, U, U), lambda a, b, c: (a & b) | (~a & c)),
  "v_bfm_b32": (U, (U, U), lambda a, b: (((u64(1) << (a & u32(31)).astype(u64)) - u64(1)).astype(u32)) << (b & u32(31))),
  "v_alignbit_b32": (U, (U, U, U), lambda a, b, c: (((a.astype(u64) << u64(32)) | b.astype(u64)) >> (c & u32(31)).astype(u64)).astype(u32)),
  "v_alignbyte_b32": (U, (U, U, U), lambda a, b, c: (((a.astype(u64) << u64(32)) | b.astype(u64)) >> ((c & u32(3)) * u32(8)).astype(u64)).astype(u32)),
  "v_lshl_or_b32": (U, (U, U, U), lambda a, b, c: (a << _sh(b, 32)) | c), "v_and_or_b32": (U, (U, U, U), lambda a, b, c: (a & b) | c),
  "v_or3_b32": (U, (U, U, U), lambda a, b, c: a | b | c), "v_xor3_b32": (U, (U, U, U), lambda a, b, c: a ^ b ^ c),
  "v_lshl_add_u32": (U, (U, U, U), lambda a, b, c: (a << _sh(b, 32)) + c), "v_add_lshl_u32": (U, (U, U, U), lambda a, b, c: (a + b) << _sh(c, 32)),
  "v_add3_u32": (U, (U, U, U), lambda a, b, c: a + b + c), "v_xad_u32": (U, (U, U, U), lambda a, b, c: (a ^ b) + c),
  "v_bcnt_u32_b32": (U, (U, U), lambda a, b: _popc(a) + b), "v_perm_b32": (U, (U, U, U), _perm),
  "v_sad_u32": (U, (U, U, U), lambda a, b, c: np.where(a > b, a - b, b - a) + c),
  "v_lerp_u8": (U, (U, U, U), lambda a, b, c: sum(((((a >> u32(8 * k)) & u32(255)) + ((b >> u32(8 * k)) & u32(255)) + ((c >> u32(8 * k)) & u32(1))) >> u32(1)) << u32(8 * k) for k in range(4))),
  # 64-bit integer shifts
  "v_lshlrev_b64": ("u64", (U, "u64"), lambda a, b: b << (a & u32(63)).astype(u64)),
  "v_lshrrev_b64": ("u64", (U, "u64"), lambda a, b: b >> (a & u32(63)).astype(u64)),
  "v_ashrrev_i64": ("i64", (U, "i64"), lambda a, b: b >> (a & u32(63)).astype(i64)),
  # 16-bit integer
  "v_mov_b16": ("b16", ("b16",), lambda a: a), "v_not_b16": ("b16", ("b16",), np.invert),
  "v_add_nc_u16": ("u16", ("u16", "u16"), np.add), "v_sub_nc_u16": ("u16", ("u16", "u16"), np.subtract),
  "v_add_nc_i16": ("i16", ("i16", "i16"), np.add), "v_sub_nc_i16": ("i16", ("i16", "i16"), np.subtract),
  "v_mul_lo_u16": ("u16", ("u16", "u16"), np.multiply),
  "v_lshlrev_b16": ("u16", ("u16", "u16"), lambda a, b: b << _sh(a, 16)), "v_lshrrev_b16": ("u16", ("u16", "u16"), lambda a, b: b >> _sh(a, 16)),
  "v_ashrrev_i16": ("i16", ("u16", "i16"), lambda a, b: b >> _sh(a, 16).astype(np.int16)),
  "v_max_u16": ("u16", ("u16", "u16"), np.maximum), "v_min_u16": ("u16", ("u16", "u16"), np.minimum),
  "v_max_i16": ("i16", ("i16", "i16"), np.maximum), "v_min_i16": ("i16", ("i16", "i16"), np.minimum),
  "v_and_b16": ("b16", ("b16", "b16"), np.bitwise_and), "v_or_b16": ("b16", ("b16", "b16"), np.bitwise_or), "v_xor_b16": ("b16", ("b16", "b16"), np.bitwise_xor),
  "v_mad_u16": ("u16", ("u16",) * 3, lambda a, b, c: a * b + c), "v_mad_i16": ("i16", ("i16",) * 3, lambda a, b, c: a * b + c),
  "v_min3_i16": ("i16", ("i16",) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)), "v_max3_i16": ("i16", ("i16",) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
  "v_min3_u16": ("u16", ("u16",) * 3, lambda a, b, c: np.minimum(np.minimum(a, b), c)), "v_max3_u16": ("u16", ("u16",) * 3, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
  "v_med3_i16": ("i16", ("i16",) * 3, lambda a, b, c: _med3(a, b, c, np.minimum, np.maximum)), "v_med3_u16": ("u16", ("u16",) * 3, lambda a, b, c: _med3(a, b, c, np.minimum, np.maximum)),
}

# compares: VOPC (to VCC), VOP3 (to an SGPR), v_cmpx (to EXEC)
_FCMP = {"f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater,
         "lg": lambda a, b: (a < b) | (a > b), "ge": np.greater_equal, "o": lambda a, b: ~np.isnan(a) & ~np.isnan(b),
         "u": lambda a, b: np.isnan(a) | np.isnan(b), "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)),
         "ngt": lambda a, b: ~(a > b), "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
         "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool)}
_ICMP = {"f": _FCMP["f"], "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ne": np.not_equal, "lg": np.not_equal,
         "ge": np.greater_equal, "t": _FCMP["t"]}
CMPS: dict[str, tuple] = {}
for _t in ("f16", "f32", "f64"):
  for _k, _f in _FCMP.items(): CMPS[f"v_cmp_{_k}_{_t}"] = ((_t, _t), _f)
  CMPS[f"v_cmp_class_{_t}"] = ((_t, U), N.float_class)
for _t in ("i16", "u16", "i32", "u32", "i64", "u64"):
  for _k, _f in _ICMP.items(): CMPS[f"v_cmp_{_k}_{_t}"] = ((_t, _t), _f)
CMPS.update({"v_cmpx" + k[5:]: v for k, v in list(CMPS.items())})

# packed 16-bit math (VOP3P): (lane type, n sources, fn)
PK = {
  "v_pk_add_f16": ("f16", 2, np.add), "v_pk_mul_f16": ("f16", 2, np.multiply), "v_pk_fma_f16": ("f16", 3, N.fma16),
  "v_pk_max_f16": ("f16", 2, _fmax), "v_pk_min_f16": ("f16", 2, _fmin),
  "v_pk_add_u16": ("u16", 2, np.add), "v_pk_add_i16": ("i16", 2, np.add), "v_pk_sub_u16": ("u16", 2, np.subtract), "v_pk_sub_i16": ("i16", 2, np.subtract),
  "v_pk_mul_lo_u16": ("u16", 2, np.multiply), "v_pk_mad_u16": ("u16", 3, lambda a, b, c: a * b + c), "v_pk_mad_i16": ("i16", 3, lambda a, b, c: a * b + c),
  "v_pk_max_i16": ("i16", 2, np.maximum), "v_pk_min_i16": ("i16", 2, np.minimum), "v_pk_max_u16": ("u16", 2, np.maximum), "v_pk_min_u16": ("u16", 2, np.minimum),
  "v_pk_lshlrev_b16": ("u16", 2, lambda a, b: b << _sh(a, 16)), "v_pk_lshrrev_b16": ("u16", 2, lambda a, b: b >> _sh(a, 16)),
  "v_pk_ashrrev_i16": ("i16", 2, lambda a, b: b >> _sh(a.view(u16) if a.dtype != u16 else a, 16).astype(np.int16)),
}


def base_name(mnemonic: str) -> str:
  return mnemonic[:-4] if mnemonic.endswith(("_e32", "_e64")) else mnemonic


def _sources(ins) -> list[int]:
  v, fmt = ins.values, ins.opcode.fmt.name
  if fmt == "VOP1": return [v["src0"]]
  if fmt in ("VOP2", "VOPC"): return [v["src0"], v["vsrc1"] + 256]
  return [v["src0"], v["src1"], v["src2"]]


# True16 (how the hardware reads 16-bit VOP1/VOP2/VOPC operands; LLVM >= 20 emits it, LLVM 19's "fake16" keeps to
# the low halves of v0-v127 so it reads the same): bit 7 of an 8-bit VGPR field selects the high half of v0-v127.
def _is_hi16(enc: int, t: str) -> bool:
  return width(t) == 16 and enc >= 256 + 128


def _true16_sources(srcs: list[int], types) -> list[int]:
  return [e - 128 if _is_hi16(e, t) else e for e, t in zip(srcs, types)] + srcs[len(types):]


def _true16_dst(vdst: int, t: str) -> tuple[int, bool]:
  return (vdst - 128, True) if width(t) == 16 and vdst >= 128 else (vdst, False)


def _typed_reader(enc: int, t: str, lit, hi: bool, absv: bool, neg: bool, flush: bool = True):
  bits = width(t)
  raw = vector_reader(enc, 64 if bits == 64 else 32, t in FLOATS, lit)
  fp = t in FLOATS
  ftz_in = N.ftz_bits(t)[0] if flush else 0
  def read(st, w):
    x = bits_to(raw(st, w), t, hi)
    if st.ftz & ftz_in: x = N.flush_denormals(x)
    if fp and absv: x = np.abs(x)
    if fp and neg: x = -x
    return x
  return read


def _saturating(fn, dt: str):
  """Integer clamp: the op computed wide (int64) and saturated to the destination's range (v_add_nc_i32 clamp ...)."""
  info = np.iinfo(N.TYPES[dt][1])
  def sat(*xs):
    r = fn(*(np.asarray(x).astype(np.int64) for x in xs))
    return np.clip(r, info.min, info.max).astype(N.TYPES[dt][1])
  return sat


def _output(t: str, clamp: bool, omod: int):
  """Post-processing of a float result: output modifier then clamp to [0, 1]; integer clamp is per-op."""
  scale = {1: 2.0, 2: 4.0, 3: 0.5}.get(omod)
  def post(x):
    if t in FLOATS and scale is not None: x = (x * x.dtype.type(scale)).astype(x.dtype)
    if t in FLOATS and clamp: x = np.clip(x, 0, 1).astype(x.dtype)
    return x
  return post if (scale is not None or clamp) else None


def _dst_writer(t: str, vdst: int, hi: bool):
  """Write typed results to VGPR vdst on the active lanes: 64-bit over a pair, 16-bit into one half (the other kept);
  float results are flushed when MODE says so."""
  inner = _dst_writer_raw(t, vdst, hi)
  ftz_out = N.ftz_bits(t)[1]
  if not ftz_out: return inner
  def write(st, w, x, ex):
    inner(st, w, N.flush_denormals(x) if st.ftz & ftz_out else x, ex)
  return write


def _dst_writer_raw(t: str, vdst: int, hi: bool):
  bits = width(t)
  if bits == 64: return lambda st, w, x, ex: write_vgpr64(st, vdst, w, to_bits(x, t), ex)
  if bits == 16:
    def w16(st, w, x, ex):
      b = to_bits(x, t) & u32(0xffff)
      cur = st.v[vdst][w]
      new = (cur & u32(0x0000ffff)) | (b << u32(16)) if hi else (cur & u32(0xffff0000)) | b
      write_vgpr(st, vdst, w, new, ex)
    return w16
  return lambda st, w, x, ex: write_vgpr(st, vdst, w, to_bits(x, t), ex)


def build(ins, pc: int):
  """A closure running one VALU instruction on waves `w` of a Waves batch."""
  name, fmt, v = base_name(ins.opcode.mnemonic), ins.opcode.fmt.name, ins.values
  if fmt == "VOP3P": return _build_vop3p(ins, name)
  if name in SPECIAL: return SPECIAL[name](ins, name)
  if name in CMPS: return _build_cmp(ins, name)
  if name not in OPS: return None
  dt, sts, fn = OPS[name]
  srcs = _sources(ins)
  lit = ins.literal
  absm, negm, opsel = v.get("abs", 0), v.get("neg", 0), v.get("opsel", 0)
  vdst, dst_hi = v["vdst"], bool(opsel >> 3 & 1)
  his = [bool(opsel >> i & 1) for i in range(3)]
  if fmt in ("VOP1", "VOP2"):
    srcs, his[:len(srcs)], (vdst, dst_hi) = _true16_sources(srcs, sts), [_is_hi16(e, t) for e, t in zip(srcs, sts)], _true16_dst(vdst, dt)
  if name in ("v_fmac_f32", "v_fmac_f16", "v_fmac_dx9_zero_f32"):
    srcs, his = srcs[:2] + [vdst + 256], his[:2] + [dst_hi]
  readers = [_typed_reader(srcs[i], t, lit, his[i], bool(absm >> i & 1), bool(negm >> i & 1)) for i, t in enumerate(sts)]
  post = _output(dt, bool(v.get("clamp", 0)), v.get("omod", 0))
  if v.get("clamp", 0) and dt not in FLOATS and width(dt) <= 32:
    fn = _saturating(fn, dt)
  write = _dst_writer(dt, vdst, dst_hi)
  if len(readers) == 1:
    r0, = readers
    def op1(st: Waves, w):
      x = fn(r0(st, w))
      write(st, w, post(x) if post else x, st.exec_lanes(w))
    return op1
  if len(readers) == 2:
    r0, r1 = readers
    def op2(st: Waves, w):
      x = fn(r0(st, w), r1(st, w))
      write(st, w, post(x) if post else x, st.exec_lanes(w))
    return op2
  r0, r1, r2 = readers
  def op3(st: Waves, w):
    x = fn(r0(st, w), r1(st, w), r2(st, w))
    write(st, w, post(x) if post else x, st.exec_lanes(w))
  return op3


def _build_cmp(ins, name):
  (ta, tb), fn = CMPS[name]
  v, fmt = ins.values, ins.opcode.fmt.name
  srcs = _sources(ins)
  absm, negm, opsel = v.get("abs", 0), v.get("neg", 0), v.get("opsel", 0)
  his = [bool(opsel & 1), bool(opsel & 2)]
  if fmt == "VOPC": srcs, his = _true16_sources(srcs, (ta, tb)), [_is_hi16(e, t) for e, t in zip(srcs, (ta, tb))]
  flush = "class" not in name   # v_cmp_class reports denormals whatever the mode
  ra = _typed_reader(srcs[0], ta, ins.literal, his[0], bool(absm & 1), bool(negm & 1), flush)
  rb = _typed_reader(srcs[1], tb, ins.literal, his[1], bool(absm & 2), bool(negm & 2), flush)
  cmpx = name.startswith("v_cmpx")
  sdst = EXEC if cmpx else (VCC if fmt == "VOPC" else v["vdst"])
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    res = np.broadcast_to(fn(ra(st, w), rb(st, w)), ex.shape) & ex
    st.set_mask(sdst, w, st.mask_of(res))
  return op


def _lane_mask_reader(ins, idx: int):
  """The carry-in / select mask operand: VCC for VOP2, src2 (an SGPR or pair) for VOP3."""
  if ins.opcode.fmt.name in ("VOP2", "VOPD"): return lambda st, w: st.mask(VCC, w)
  enc = ins.values[("src0", "src1", "src2")[idx]]
  rd = scalar_reader(enc, 64, False, ins.literal)
  return lambda st, w: (rd(st, w) & (u64(0xffffffff) if st.lanes == 32 else u64(0xffffffffffffffff)))


def _sdst_of(ins) -> int:
  return VCC if ins.opcode.fmt.name == "VOP2" else ins.values["sdst"]


def _build_cndmask(ins, name):
  srcs = _sources(ins)
  v = ins.values
  absm, negm, opsel = v.get("abs", 0), v.get("neg", 0), v.get("opsel", 0)
  sel = _lane_mask_reader(ins, 2)
  bits16 = name == "v_cndmask_b16"
  def rd(i):
    r = vector_reader(srcs[i], 32, False, ins.literal)
    if bits16 and opsel >> i & 1: r = (lambda r: lambda st, w: r(st, w) >> u32(16))(r)   # op_sel: the high half
    sign = u32(0x8000) if bits16 else u32(0x80000000)
    a, n = bool(absm >> i & 1), bool(negm >> i & 1)
    if not (a or n): return r
    return lambda st, w: ((r(st, w) & ~sign) if a else r(st, w)) ^ (sign if n else u32(0))
  r0, r1 = rd(0), rd(1)
  vdst, hi = v["vdst"], bool(opsel >> 3 & 1)
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    m = st.lanes_of(sel(st, w))
    x = np.where(m, r1(st, w), r0(st, w))
    if bits16:
      x = x & u32(0xffff)
      cur = st.v[vdst][w]
      x = (cur & u32(0xffff)) | (x << u32(16)) if hi else (cur & u32(0xffff0000)) | x
    write_vgpr(st, vdst, w, x, ex)
  return op


def _build_carry(ins, name):
  """v_add_co_u32, v_sub_co_u32, v_subrev_co_u32 and the _ci forms: 32-bit add/sub with a carry mask per lane."""
  srcs = _sources(ins)
  ra, rb = vector_reader(srcs[0], 32, False, ins.literal), vector_reader(srcs[1], 32, False, ins.literal)
  cin = _lane_mask_reader(ins, 2) if "_ci_" in name else None
  sub, rev = "sub" in name, "subrev" in name
  vdst, sdst = ins.values["vdst"], _sdst_of(ins)
  clamp = bool(ins.values.get("clamp", 0))
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    a, b = ra(st, w), rb(st, w)
    if rev: a, b = b, a
    if cin is not None:
      c = st.lanes_of(cin(st, w))
      ci = c.view(np.uint8).astype(u32)
    if sub:
      r = a - b
      carry = a < b
      if cin is not None: carry = carry | ((a == b) & c); r = r - ci
    else:
      r = a + b
      carry = r < a
      if cin is not None: r = r + ci; carry = carry | ((r == 0) & c)   # a+b wrapped to 0xffffffff, +1 carries
    carry = np.broadcast_to(carry, ex.shape)
    if clamp: r = np.where(carry, u32(0) if sub else u32(0xffffffff), r)
    write_vgpr(st, vdst, w, r, ex)
    st.set_mask(sdst, w, st.mask_of(carry & ex))
  return op


def _build_mad64(ins, name):
  """v_mad_u64_u32 / v_mad_i64_i32: 32x32 -> 64 multiply plus a 64-bit addend, carry-out to sdst."""
  v = ins.values
  ra, rb = vector_reader(v["src0"], 32, False, ins.literal), vector_reader(v["src1"], 32, False, ins.literal)
  rc = vector_reader(v["src2"], 64, False, ins.literal)
  signed = "i64" in name
  vdst, sdst = v["vdst"], v["sdst"]
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    a, b, c = ra(st, w), rb(st, w), rc(st, w)
    if signed:
      p = a.view(i32).astype(object) if False else a.view(i32).astype(i64) * b.view(i32).astype(i64)
      r = p.view(u64) + c
      # signed overflow of p + c
      cs = c.view(i64)
      rs = r.view(i64)
      carry = ((p >= 0) == (cs >= 0)) & ((rs >= 0) != (p >= 0))
    else:
      p = a.astype(u64) * b.astype(u64)
      r = p + c
      carry = r < p
    write_vgpr64(st, vdst, w, r, ex)
    st.set_mask(sdst, w, st.mask_of(np.broadcast_to(carry, ex.shape) & ex))
  return op


def _build_div_scale(ins, name):
  v = ins.values
  t = "f32" if name.endswith("f32") else "f64"
  negm = v.get("neg", 0)
  rs = [_typed_reader(v[f], t, ins.literal, False, False, bool(negm >> i & 1)) for i, f in enumerate(("src0", "src1", "src2"))]
  write = _dst_writer(t, v["vdst"], False)
  sdst = v["sdst"]
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    d, vcc = _div_scale(*(np.broadcast_to(r(st, w), ex.shape) for r in rs), width(t))
    write(st, w, d, ex)
    st.set_mask(sdst, w, st.mask_of(vcc & ex))
  return op


def _build_div_fmas(ins, name):
  v = ins.values
  t = "f32" if name.endswith("f32") else "f64"
  absm, negm = v.get("abs", 0), v.get("neg", 0)
  rs = [_typed_reader(v[f], t, ins.literal, False, bool(absm >> i & 1), bool(negm >> i & 1)) for i, f in enumerate(("src0", "src1", "src2"))]
  write = _dst_writer(t, v["vdst"], False)
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    vcc = st.lanes_of(st.mask(VCC, w))
    a, b, c = (np.broadcast_to(r(st, w), ex.shape) for r in rs)
    write(st, w, _div_fmas(a, b, c, vcc, width(t)), ex)
  return op


def _build_fmak(ins, name):
  """v_fmamk (src0 * K + vsrc1) and v_fmaak (src0 * vsrc1 + K), K the literal."""
  t = "f16" if name.endswith("f16") else "f32"
  v = ins.values
  fma = N.fma16 if t == "f16" else N.fma32
  (s0, s1), (vdst, dst_hi) = _true16_sources([v["src0"], v["vsrc1"] + 256], (t, t)), _true16_dst(v["vdst"], t)
  r0 = _typed_reader(s0, t, ins.literal, _is_hi16(v["src0"], t), False, False)
  r1 = _typed_reader(s1, t, ins.literal, _is_hi16(v["vsrc1"] + 256, t), False, False)
  k = bits_to(np.array(ins.literal & (0xffff if t == "f16" else 0xffffffff), u32), t)
  mk = "fmamk" in name
  write = _dst_writer(t, vdst, dst_hi)
  def op(st: Waves, w):
    a, b = r0(st, w), r1(st, w)
    write(st, w, fma(a, k, b) if mk else fma(a, b, k), st.exec_lanes(w))
  return op


def _build_readlane(ins, name):
  v = ins.values
  src = v["src0"] - 256
  lane = scalar_reader(v["src1"], 32, False, ins.literal)
  sdst = scalar_writer(v["vdst"])
  def op(st: Waves, w):
    l = lane(st, w).astype(np.int64) % st.lanes
    k = np.arange(len(l))
    sdst(st, w, st.v[src][w][k, l])
  return op


def _build_readfirstlane(ins, name):
  v = ins.values
  src = v["src0"]
  sdst = scalar_writer(v["vdst"])
  rd = vector_reader(src, 32, False, ins.literal)
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    first = np.where(ex.any(1), ex.argmax(1), 0)
    x = np.broadcast_to(rd(st, w), ex.shape)
    sdst(st, w, x[np.arange(len(first)), first])
  return op


def _build_writelane(ins, name):
  v = ins.values
  val = scalar_reader(v["src0"], 32, False, ins.literal)
  lane = scalar_reader(v["src1"], 32, False, ins.literal)
  vdst = v["vdst"]
  def op(st: Waves, w):
    l = lane(st, w).astype(np.int64) % st.lanes
    sel = st.lane_ids[None, :] == l[:, None]
    write_vgpr(st, vdst, w, val(st, w)[:, None], sel)  # writes regardless of EXEC
  return op


def _build_mbcnt(ins, name):
  v = ins.values
  srcs = _sources(ins)
  rm, ra = vector_reader(srcs[0], 32, False, ins.literal), vector_reader(srcs[1], 32, False, ins.literal)
  hi = "hi" in name
  vdst = v["vdst"]
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    lanes = st.lane_ids.astype(np.int64)
    lo_bits = lanes - (32 if hi else 0)
    below = np.where(lo_bits <= 0, u64(0), np.where(lo_bits >= 32, u64(0xffffffff), (u64(1) << np.clip(lo_bits, 0, 63).astype(u64)) - u64(1)))
    m = np.broadcast_to(rm(st, w), ex.shape).astype(u64) & below[None, :]
    write_vgpr(st, vdst, w, _popc(m.astype(u32)) + ra(st, w), ex)
  return op


def _build_swap(ins, name):
  a, b = ins.values["vdst"], ins.values["src0"] - 256
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    x, y = st.v[a][w].copy(), st.v[b][w].copy()
    write_vgpr(st, a, w, y, ex); write_vgpr(st, b, w, x, ex)
  return op


def _build_nop(ins, name):
  return lambda st, w: None


def _build_permlane64(ins, name):
  vdst, src = ins.values["vdst"], ins.values["src0"] - 256
  def op(st, w):
    x = st.v[src][w]
    write_vgpr(st, vdst, w, np.roll(x, 32, axis=1) if st.lanes == 64 else x, st.exec_lanes(w))
  return op


def _build_permlane16(ins, name):
  """v_permlane16 / v_permlanex16: lane i of each row of 16 reads lane sel[i] (a nibble of src2:src1) of the same row,
  or of the other row of its 32 for x16. op_sel[0] fetches inactive lanes, op_sel[1] is bound_ctrl."""
  v = ins.values
  src, vdst = v["src0"] - 256, v["vdst"]
  lo, hi = scalar_reader(v["src1"], 32, False, ins.literal), scalar_reader(v["src2"], 32, False, ins.literal)
  fi, bound = bool(v.get("opsel", 0) & 1), bool(v.get("opsel", 0) & 2)
  cross = "x16" in name
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    sel = (lo(st, w).astype(u64) | (hi(st, w).astype(u64) << u64(32)))[:, None]
    lane = np.arange(st.lanes)
    nib = ((sel >> (u64(4) * (lane & 15).astype(u64))[None, :]) & u64(15)).astype(np.int64)
    row = (lane & ~15) ^ (16 if cross else 0)
    srcl = row[None, :] + nib
    k = np.arange(ex.shape[0])[:, None]
    val = st.v[src][w][k, srcl]
    ok = np.ones(ex.shape, bool) if fi else ex[k, srcl]
    if bound: val, write = np.where(ok, val, u32(0)), ex
    else: write = ex & ok
    write_vgpr(st, vdst, w, val, write)
  return op


def _build_movrel(ins, name):
  """v_movrels (read v[src + M0]), v_movreld (write v[dst + M0]), v_movrelsd (both): per-wave register indexing."""
  v = ins.values
  src, dst = v["src0"], v["vdst"]
  rel_s, rel_d = name in ("v_movrels_b32", "v_movrelsd_b32"), name in ("v_movreld_b32", "v_movrelsd_b32")
  rd = None if rel_s else vector_reader(src, 32, False, ins.literal)
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    waves = np.arange(st.count)[w]
    m0 = st.s[125, w].astype(np.int64)
    if rel_s: x = st.v[(src - 256) + m0, waves]
    else: x = np.broadcast_to(rd(st, w), ex.shape)
    regs = dst + m0 if rel_d else np.full(len(waves), dst)
    if regs.max() >= st.v.shape[0] or (rel_s and (src - 256 + m0).max() >= st.v.shape[0]):
      raise IndexError(f"{name}: M0 indexes past the {st.v.shape[0]} VGPRs the kernel allocated")
    cur = st.v[regs, waves]
    st.v[regs, waves] = np.where(ex, x, cur)
  return op


def _build_dot2_16(ins, name):
  """v_dot2_f16_f16 / v_dot2_bf16_bf16 (VOP3): a.lo*b.lo + a.hi*b.hi + c.lo into a 16-bit result."""
  v = ins.values
  t = "f16" if "f16" in name else "bf16"
  ra, rb, rc = (vector_reader(v[f], 32, True, ins.literal) for f in ("src0", "src1", "src2"))
  write = _dst_writer(t, v["vdst"], bool(v.get("opsel", 0) >> 3 & 1))
  def op(st: Waves, w):
    a, b, c = ra(st, w), rb(st, w), rc(st, w)
    r = sum(bits_to(a, t, h).astype(f64) * bits_to(b, t, h).astype(f64) for h in (False, True)) + bits_to(c, t, False).astype(f64)
    write(st, w, r.astype(f16) if t == "f16" else r.astype(np.float32), st.exec_lanes(w))
  return op


def _build_vop2_packed_acc(ins, name):
  """v_dot2acc_f32_f16 (D += a.lo*b.lo + a.hi*b.hi) and v_pk_fmac_f16 (D.lo/hi = fma(a, b, D) per half)."""
  v = ins.values
  ra, rb = vector_reader(v["src0"], 32, True, ins.literal), vector_reader(v["vsrc1"] + 256, 32, True, ins.literal)
  vdst = v["vdst"]
  def op(st: Waves, w):
    a, b, d = ra(st, w), rb(st, w), st.v[vdst][w]
    if name == "v_dot2acc_f32_f16":
      r = sum(bits_to(a, "f16", h).astype(f64) * bits_to(b, "f16", h).astype(f64) for h in (False, True)) + d.view(np.float32).astype(f64)
      out = r.astype(np.float32).view(u32)
    else:
      lo, hi = (N.fma16(bits_to(a, "f16", h), bits_to(b, "f16", h), bits_to(d, "f16", h)) for h in (False, True))
      out = to_bits(lo, "f16") | (to_bits(hi, "f16") << u32(16))
    write_vgpr(st, vdst, w, out, st.exec_lanes(w))
  return op


SPECIAL = {
  "v_dot2acc_f32_f16": _build_vop2_packed_acc, "v_pk_fmac_f16": _build_vop2_packed_acc,
  "v_movrels_b32": _build_movrel, "v_movreld_b32": _build_movrel, "v_movrelsd_b32": _build_movrel,
  "v_dot2_f16_f16": _build_dot2_16, "v_dot2_bf16_bf16": _build_dot2_16,
  "v_permlane16_b32": _build_permlane16, "v_permlanex16_b32": _build_permlane16,
  "v_cndmask_b32": _build_cndmask, "v_cndmask_b16": _build_cndmask,
  "v_add_co_u32": _build_carry, "v_sub_co_u32": _build_carry, "v_subrev_co_u32": _build_carry,
  "v_add_co_ci_u32": _build_carry, "v_sub_co_ci_u32": _build_carry, "v_subrev_co_ci_u32": _build_carry,
  "v_mad_u64_u32": _build_mad64, "v_mad_i64_i32": _build_mad64,
  "v_div_scale_f32": _build_div_scale, "v_div_scale_f64": _build_div_scale,
  "v_div_fmas_f32": _build_div_fmas, "v_div_fmas_f64": _build_div_fmas,
  "v_fmamk_f32": _build_fmak, "v_fmaak_f32": _build_fmak, "v_fmamk_f16": _build_fmak, "v_fmaak_f16": _build_fmak,
  "v_readlane_b32": _build_readlane, "v_readfirstlane_b32": _build_readfirstlane, "v_writelane_b32": _build_writelane,
  "v_mbcnt_lo_u32_b32": _build_mbcnt, "v_mbcnt_hi_u32_b32": _build_mbcnt, "v_swap_b32": _build_swap,
  "v_nop": _build_nop, "v_pipeflush": _build_nop, "v_permlane64_b32": _build_permlane64,
}


def _build_vop3p(ins, name):
  """Packed math: each 16-bit half of the result reads the halves opsel (low result) / opsel_hi (high result) pick."""
  v = ins.values
  srcs = [v["src0"], v["src1"], v["src2"]]
  opsel, opsel_hi = v.get("opsel", 0), v.get("opsel_hi", 0) | (v.get("opsel_hi2", 0) << 2)
  neg, neg_hi = v.get("neg", 0), v.get("neg_hi", 0)
  vdst = v["vdst"]
  raws = [vector_reader(e, 32, True, ins.literal) for e in srcs]
  if name in PK:
    t, n, fn = PK[name]
    def half(raw_bits, i, hi_sel, negate):
      x = bits_to(raw_bits, t, hi_sel)
      return -x if (negate and t == "f16") else x
    clamp = bool(v.get("clamp", 0))
    def op(st: Waves, w):
      ex = st.exec_lanes(w)
      r = [raws[i](st, w) for i in range(n)]
      lo = fn(*(half(r[i], i, bool(opsel >> i & 1), bool(neg >> i & 1)) for i in range(n)))
      hi = fn(*(half(r[i], i, bool(opsel_hi >> i & 1), bool(neg_hi >> i & 1)) for i in range(n)))
      if clamp and t == "f16": lo, hi = np.clip(lo, 0, 1).astype(f16), np.clip(hi, 0, 1).astype(f16)
      write_vgpr(st, vdst, w, (to_bits(lo, t) & u32(0xffff)) | (to_bits(hi, t) << u32(16)), ex)
    return op
  if name.startswith("v_fma_mix"):
    # opsel_hi bit i: source i is f16 (opsel bit i picks its half); else f32
    def src(r, i):
      if opsel_hi >> i & 1: x = bits_to(r, "f16", bool(opsel >> i & 1)).astype(f32)
      else: x = r.view(f32)
      if v.get("neg_hi", 0) >> i & 1: x = np.abs(x)  # neg_hi is abs for mix ops
      return -x if neg >> i & 1 else x
    def op(st: Waves, w):
      ex = st.exec_lanes(w)
      a, b, c = (src(raws[i](st, w), i) for i in range(3))
      if name == "v_fma_mix_f32":
        r = N.fma32(a, b, c)
        if v.get("clamp", 0): r = np.clip(r, 0, 1).astype(f32)
        write_vgpr(st, vdst, w, r.view(u32), ex)
      else:
        r = (a.astype(f64) * b.astype(f64))
        r = N.round_to_odd_sum(r, c.astype(f64)).astype(f16)
        if v.get("clamp", 0): r = np.clip(r, 0, 1).astype(f16)
        b16 = r.view(u16).astype(u32)
        cur = st.v[vdst][w]
        new = (cur & u32(0xffff)) | (b16 << u32(16)) if name.endswith("hi_f16") else (cur & u32(0xffff0000)) | b16
        write_vgpr(st, vdst, w, new, ex)
    return op
  if name in ("v_dot2_f32_f16", "v_dot2_f32_bf16"):
    t = "f16" if name.endswith("f16") else "bf16"
    def op(st: Waves, w):
      ex = st.exec_lanes(w)
      a, b, c = (raws[i](st, w) for i in range(3))
      pa = [bits_to(a, t, h).astype(f64) for h in (False, True)]
      pb = [bits_to(b, t, h).astype(f64) for h in (False, True)]
      r = (pa[0] * pb[0] + pa[1] * pb[1] + c.view(f32).astype(f64)).astype(f32)
      write_vgpr(st, vdst, w, r.view(u32), ex)
    return op
  if name.startswith("v_wmma_"): return _build_wmma(ins, name)
  if name in ("v_dot8_i32_iu4", "v_dot8_u32_u4"):
    signed = name == "v_dot8_i32_iu4"
    def op8(st: Waves, w):
      ex = st.exec_lanes(w)
      a, b, c = (np.broadcast_to(raws[i](st, w), ex.shape) for i in range(3))
      acc = c.view(i32).astype(i64)
      for k in range(8):
        x, y = ((a >> u32(4 * k)) & u32(15)).astype(i64), ((b >> u32(4 * k)) & u32(15)).astype(i64)
        if signed and neg & 1: x = np.where(x > 7, x - 16, x)
        if signed and neg & 2: y = np.where(y > 7, y - 16, y)
        acc = acc + x * y
      write_vgpr(st, vdst, w, acc.astype(u32), ex)
    return op8
  if name in ("v_dot4_i32_iu8", "v_dot4_u32_u8"):
    signed = name == "v_dot4_i32_iu8"
    def op(st: Waves, w):
      ex = st.exec_lanes(w)
      a, b, c = (np.broadcast_to(raws[i](st, w), ex.shape) for i in range(3))
      acc = c.view(i32).astype(i64)
      for k in range(4):
        x, y = ((a >> u32(8 * k)) & u32(255)).astype(i64), ((b >> u32(8 * k)) & u32(255)).astype(i64)
        if signed and neg & 1: x = np.where(x > 127, x - 256, x)
        if signed and neg & 2: y = np.where(y > 127, y - 256, y)
        acc = acc + x * y
      write_vgpr(st, vdst, w, acc.astype(u32), ex)
    return op
  return None


def build_vopd(ins, pc: int):
  """VOPD: two VOP2-style ops (X and Y) that read their sources before either writes."""
  halves = []
  for opname, s0, s1, d in vopd_parts(ins):
    halves.append(_vopd_half(opname, s0, s1, d, ins.literal))
  if any(h is None for h in halves): return None
  (cx, wx), (cy, wy) = halves
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    x, y = cx(st, w), cy(st, w)
    wx(st, w, x, ex); wy(st, w, y, ex)
  return op


def vopd_parts(ins) -> list[tuple[str, int, int, int]]:
  """(mnemonic, src0, vsrc1, vdst) of the X and Y halves, from hcq.asm's VOPD decode or the emulator's own."""
  if hasattr(ins, "parts"): return ins.parts
  v = ins.values
  nx, ny = ins.opcode.mnemonic.split("::")
  vdsty = (v["vdsty"] << 1) | ((v["vdstx"] & 1) ^ 1)   # the encoding drops vdsty's low bit: it is the opposite of vdstx's
  return [(nx, v["src0x"], v["vsrc1x"], v["vdstx"]), (ny, v["src0y"], v["vsrc1y"], vdsty)]


def _vopd_half(name, s0, s1, d, lit):
  f = lambda enc: vector_reader(enc, 32, True, lit)
  r0, r1 = f(s0), f(s1 + 256)
  write = lambda st, w, x, ex: write_vgpr(st, d, w, x, ex)
  if name == "v_dual_cndmask_b32":
    return (lambda st, w: np.where(st.lanes_of(st.mask(VCC, w)), r1(st, w), r0(st, w))), write
  if name in ("v_dual_fmamk_f32", "v_dual_fmaak_f32"):
    k = np.array(lit, u32).view(f32)
    if name == "v_dual_fmamk_f32": return (lambda st, w: N.fma32(r0(st, w).view(f32), k, r1(st, w).view(f32)).view(u32)), write
    return (lambda st, w: N.fma32(r0(st, w).view(f32), r1(st, w).view(f32), k).view(u32)), write
  if name == "v_dual_fmac_f32":
    rd = f(d + 256)
    return (lambda st, w: N.fma32(r0(st, w).view(f32), r1(st, w).view(f32), rd(st, w).view(f32)).view(u32)), write
  if name == "v_dual_dot2acc_f32_f16":
    rd = f(d + 256)
    def dot(st, w):
      a, b = r0(st, w), r1(st, w)
      r = sum(bits_to(a, "f16", h).astype(f64) * bits_to(b, "f16", h).astype(f64) for h in (False, True)) + rd(st, w).view(f32).astype(f64)
      return r.astype(f32).view(u32)
    return dot, write
  base = "v_" + name[len("v_dual_"):]
  if base not in OPS: return None
  dt, sts, fn = OPS[base]
  return (lambda st, w: to_bits(fn(*(bits_to(r(st, w), t) for r, t in zip((r0, r1), sts))), dt)), write


# ---- DPP: src0 read from another lane of the row (DPP16) or of the group of 8 (DPP8) ------------------------------
def dpp16_lanes(ctrl: int, lanes: int) -> tuple[np.ndarray, np.ndarray]:
  """(source lane, source in range) for every lane under a DPP16 dpp_ctrl (gfx10+ encodings)."""
  lane = np.arange(lanes)
  row, r = lane & ~15, lane & 15
  if ctrl <= 0xff: src = (lane & ~3) | ((ctrl >> (2 * (lane & 3))) & 3); return src, np.ones(lanes, bool)
  if 0x101 <= ctrl <= 0x10f: s = r + (ctrl & 15); return row | (s & 15), s <= 15           # row_shl: read the lane n above
  if 0x111 <= ctrl <= 0x11f: s = r - (ctrl & 15); return row | (s & 15), s >= 0            # row_shr: read the lane n below
  if 0x121 <= ctrl <= 0x12f: return row | ((r - (ctrl & 15)) & 15), np.ones(lanes, bool)  # row_ror
  if ctrl == 0x140: return row | (15 - r), np.ones(lanes, bool)                              # row_mirror
  if ctrl == 0x141: return row | (r & 8) | (7 - (r & 7)), np.ones(lanes, bool)               # row_half_mirror
  if 0x150 <= ctrl <= 0x15f: return row | (ctrl & 15), np.ones(lanes, bool)                  # row_share
  if 0x160 <= ctrl <= 0x16f: return row | (r ^ (ctrl & 15)), np.ones(lanes, bool)           # row_xmask
  raise ValueError(f"dpp_ctrl {ctrl:#x} is reserved on gfx11")


def build_dpp(ins, pc: int):
  """VOP1/VOP2/VOPC with DPP16 or DPP8: permute src0 across lanes into a scratch register, narrow EXEC to the lanes
  that may be written (row/bank masks, bound_ctrl), run the plain op on it, restore EXEC."""
  from hcq.asm.emu.decode import ExtraInstruction, _Fmt, _Opcode
  fmt, v = ins.opcode.fmt.name, ins.values
  base_fmt = fmt.split("_")[0]
  name = re.sub(r"_dpp(16|8)?(_fi)?$", "", ins.opcode.mnemonic.replace("_e32", ""))
  values = {k: v[k] for k in ("vdst", "vsrc1") if k in v}
  values["src0"] = DPP_SOURCE
  values["abs"] = v.get("abs0", 0) | (v.get("abs1", 0) << 1)
  values["neg"] = v.get("neg0", 0) | (v.get("neg1", 0) << 1)
  inner = build(ExtraInstruction(_Opcode(name, _Fmt(base_fmt)), values, None, ins.size), pc)
  if inner is None: return None
  src0 = v["src0"] - 256 if v["src0"] >= 256 else v["src0"]
  if "dpp8" in v:
    sel = v["dpp8"]
    fetch_inactive, bound_zero = fmt.endswith("FI"), False
    row_bank = None
    def lanes_for(n):
      lane = np.arange(n)
      return (lane & ~7) | ((sel >> (3 * (lane & 7))) & 7), np.ones(n, bool)
  else:
    ctrl, fetch_inactive, bound_zero = v["dpp_ctrl"], bool(v.get("fi", 0)), bool(v.get("bound_ctrl", 0))
    rm, bm = v.get("row_mask", 0xf), v.get("bank_mask", 0xf)
    lanes_for = lambda n: dpp16_lanes(ctrl, n)
    row_bank = lambda n: np.array([(rm >> (l // 16) & 1) and (bm >> ((l & 15) // 4) & 1) for l in range(n)], bool)
  cache = {}
  def op(st: Waves, w):
    if st.lanes not in cache: cache[st.lanes] = (*lanes_for(st.lanes), None if row_bank is None else row_bank(st.lanes))
    idx, valid, enable = cache[st.lanes]
    ex = st.exec_lanes(w)
    src = st.v[src0][w][:, idx]
    ok = valid[None, :] & (True if fetch_inactive else ex[:, idx])
    if bound_zero: src = np.where(ok, src, u32(0)); write = ex
    else: write = ex & ok
    if enable is not None: write = write & enable[None, :]
    dpp = st.dpp
    if isinstance(w, slice): dpp[...] = src
    else: dpp[w] = src
    saved = st.mask(EXEC, w).copy()
    st.set_mask(EXEC, w, st.mask_of(write))
    try:
      inner(st, w)
    finally:
      st.set_mask(EXEC, w, saved)
  return op


def _build_wmma(ins, name):
  """gfx11 WMMA 16x16x16 (wave32): lane l holds row l%16 of A and column l%16 of B (both half-waves hold the same
  data); D/C register k holds row 2k + l//16, column l%16 (f16/bf16 results in the half opsel[2] picks).
  Products are exact and summed in f64 (the hardware's summation order is not specified), then rounded once."""
  v = ins.values
  a_reg, b_reg, c_enc, vdst = v["src0"] - 256, v["src1"] - 256, v["src2"], v["vdst"]
  m = re.match(r"v_wmma_(\w+?)_16x16x16_(\w+)$", name)
  out_t, in_t = m.group(1), m.group(2)
  neg, opsel, clamp = v.get("neg", 0), v.get("opsel", 0), bool(v.get("clamp", 0))
  hi_half = bool(opsel & 4)
  per_reg = {"f16": 2, "bf16": 2, "iu8": 4, "iu4": 8}[in_t]
  nregs = 16 // per_reg
  def elems(st, w, reg, signed):
    """(k, 32 lanes, 16) values of A rows / B columns."""
    words = np.stack([st.v[reg + i][w] for i in range(nregs)], axis=-1)   # (k, L, nregs)
    if in_t in ("f16", "bf16"):
      lo, hi = bits_to(words, in_t, False), bits_to(words, in_t, True)
      return np.stack([lo, hi], axis=-1).reshape(words.shape[:2] + (16,)).astype(f64)
    bits = 8 if in_t == "iu8" else 4
    parts = [((words >> u32(bits * j)) & u32((1 << bits) - 1)).astype(i64) for j in range(per_reg)]
    x = np.stack(parts, axis=-1).reshape(words.shape[:2] + (16,))
    return np.where(x >= (1 << (bits - 1)), x - (1 << bits), x) if signed else x
  def op(st: Waves, w):
    if st.lanes != 32: raise NotImplementedError("WMMA in wave64 is not modelled yet")
    ex = st.exec_lanes(w)
    A = elems(st, w, a_reg, bool(neg & 1))[:, :16, :]          # (k, row, kdim)
    B = elems(st, w, b_reg, bool(neg & 2))[:, :16, :]          # (k, col, kdim)
    D = np.einsum("wrk,wck->wrc", A, B)                         # exact for these sizes in f64 / int64
    k = D.shape[0]
    rows = 2 * np.arange(8)[:, None] + (np.arange(32) // 16)[None, :]   # (reg, lane) -> row
    cols = np.broadcast_to(np.arange(32) % 16, (8, 32))
    if out_t in ("f32", "i32"):
      Cr = np.stack([vector_reader(c_enc + i if c_enc >= 256 else c_enc, 32)(st, w) for i in range(8)], axis=1) if True else None
      Cr = np.broadcast_to(Cr, (k, 8, 32))
      Cv = Cr.view(np.float32).astype(f64) if out_t == "f32" else Cr.view(i32).astype(i64)
      res = D[:, rows, cols] + Cv
      if out_t == "f32": bits = res.astype(np.float32).view(u32)
      else:
        if clamp: res = np.clip(res, -2**31, 2**31 - 1)
        bits = res.astype(i64).astype(u32)
      for i in range(8): write_vgpr(st, vdst + i, w, bits[:, i], ex)
    else:
      Cr = np.broadcast_to(np.stack([vector_reader(c_enc + i if c_enc >= 256 else c_enc, 32)(st, w) for i in range(8)], axis=1), (k, 8, 32))
      Cv = bits_to(Cr, out_t, hi_half).astype(f64)
      res = D[:, rows, cols] + Cv
      b16 = to_bits(res.astype(f16) if out_t == "f16" else res.astype(np.float32), out_t) & u32(0xffff)
      for i in range(8):
        cur = st.v[vdst + i][w]
        new = (cur & u32(0xffff)) | (b16[:, i] << u32(16)) if hi_half else (cur & u32(0xffff0000)) | b16[:, i]
        write_vgpr(st, vdst + i, w, new, ex)
  return op
