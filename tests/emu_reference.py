"""Reference semantics of AMD GPU instructions, written from the ISA guides' definitions (RDNA3 / RDNA4 / CDNA3
instruction pseudocode) one lane at a time in plain Python, for the opcode tests in test_emu_reference.py.

Deliberately independent of hcq.asm.emu: nothing here imports it or shares its helpers, so a bug in a handler cannot
hide behind the same bug in its reference. Values are register bits (Python ints); floats go through numpy scalars,
whose IEEE arithmetic is the reference for rounding, infinities, NaN and denormals.
"""
from __future__ import annotations
import functools
import itertools
import math
from fractions import Fraction

import numpy as np

M32, M16, M64 = 0xffffffff, 0xffff, (1 << 64) - 1
WIDTH = {"u32": 32, "i32": 32, "b32": 32, "f32": 32, "u16": 16, "i16": 16, "b16": 16, "f16": 16, "u64": 64, "i64": 64, "b64": 64, "f64": 64}
FLOAT = {"f16": (np.float16, np.uint16), "f32": (np.float32, np.uint32), "f64": (np.float64, np.uint64)}


def sx(x: int, bits: int) -> int:
  """x's low `bits` bits as a two's complement number."""
  x &= (1 << bits) - 1
  return x - (1 << bits) if x >> (bits - 1) else x


@functools.lru_cache(maxsize=1 << 16)
def to_value(bits: int, t: str):
  """Register bits -> the operand value the ISA pseudocode names (int for integer types, numpy scalar for floats)."""
  if t in FLOAT: return FLOAT[t][1](bits).view(FLOAT[t][0])
  return sx(bits, WIDTH[t]) if t[0] == "i" else bits & ((1 << WIDTH[t]) - 1)


def to_bits(x, t: str) -> int:
  if t in FLOAT: return int(np.asarray(x, FLOAT[t][0]).view(FLOAT[t][1]))
  return int(x) & ((1 << WIDTH[t]) - 1)


def is_nan_bits(bits: int, t: str) -> bool:
  return t in FLOAT and bool(np.isnan(to_value(bits, t)))


# ---- edge values per type (register bits) ----------------------------------------------------------------------------
EDGES = {
  32: [0, 1, 2, 3, 0x1f, 0x20, 0x21, 0x3f, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x10000, 0x7fffff, 0x800000, 0xffffff,
       0x1000000, 0x7fffffff, 0x80000000, 0x80000001, 0xfffffffe, 0xffffffff, 0x12345678, 0xdeadbeef, 0xa5a5a5a5, 0x00ff00ff, 0xff00ff80],
  16: [0, 1, 2, 0xf, 0x10, 0x11, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0x8001, 0xfffe, 0xffff, 0x1234, 0xbeef],
  64: [0, 1, 0x1f, 0x3f, 0x40, 0xffffffff, 0x100000000, 0x7fffffffffffffff, 0x8000000000000000, M64, M64 - 1, 0x123456789abcdef0,
       0x80000000, 0x7fffffff, 0xffffffff00000000],
}
# +-0, +-1, halves (rounding ties), denormals (smallest, largest), smallest/largest normal, +-inf, quiet and signalling NaNs
# of both signs, 2**23 / 2**31 / 2**32 (integer conversion limits), and a few ordinary values
FLOAT_EDGES = {
  "f32": [0, 0x80000000, 0x3f800000, 0xbf800000, 0x3f000000, 0x3fc00000, 0x40200000, 0xc0200000, 0x40400000, 1, 0x807fffff,
          0x00800000, 0x80800000, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc00000, 0xff800001,
          0x3effffff, 0x4b000000, 0x4b7fffff, 0x4f000000, 0xcf000000, 0x4f800000, 0x3e2aaaab, 0x42f60000, 0xc2f70000, 0xbf7fffff, 0x3f800001],
  "f16": [0, 0x8000, 0x3c00, 0xbc00, 0x3800, 0x3e00, 0x4100, 0xc100, 0x4200, 1, 0x83ff, 0x0400, 0x8400, 0x7bff, 0xfbff, 0x7c00,
          0xfc00, 0x7e00, 0x7c01, 0xfe00, 0x37ff, 0x6400, 0x57b0, 0xd7b8, 0x3c01, 0x7800],
  "f64": [0, 1 << 63, 0x3ff0000000000000, 0xbff0000000000000, 0x3fe0000000000000, 0x3ff8000000000000, 0x4004000000000000,
          0xc004000000000000, 1, 0x800fffffffffffff, 0x0010000000000000, 0x7fefffffffffffff, 0xffefffffffffffff, 0x7ff0000000000000,
          0xfff0000000000000, 0x7ff8000000000000, 0x7ff0000000000001, 0xfff8000000000000, 0x41e0000000000000, 0xc1e0000000000000,
          0x41f0000000000000, 0x4330000000000000, 0x3fd5555555555555, 0x405ec00000000000, 0x3ff0000000000001],
}


def edges(t: str) -> list[int]:
  return FLOAT_EDGES[t] if t in FLOAT else EDGES[WIDTH[t]]


@functools.lru_cache(maxsize=None)
def operand_tuples(types: tuple[str, ...], count: int, seed: int = 0) -> tuple[tuple[int, ...], ...]:
  """`count` source tuples: every edge of each source against edges of the others (the full cross product when it fits),
  the same value in every source (equality boundaries), and random bits."""
  rng = np.random.default_rng(seed)
  pools = [edges(t) for t in types]
  out: list[tuple[int, ...]] = []
  if len(types) == 1:
    out = [(x,) for x in pools[0]]
  elif len(types) == 2 and len(pools[0]) * len(pools[1]) <= count:
    out = [(a, b) for a in pools[0] for b in pools[1]]
  else:
    same = [tuple(x & ((1 << WIDTH[t]) - 1) for t in types) for x in pools[0]] if len({WIDTH[t] for t in types}) == 1 else []
    out = same[:count // 4]
  while len(out) < count:
    picks, coins = rng.integers(0, 1 << 30, len(types)), rng.random(len(types))
    rand = rng.integers(0, 1 << 63, len(types), dtype=np.uint64) * 2 + rng.integers(0, 2, len(types), dtype=np.uint64)
    out.append(tuple(pool[int(k) % len(pool)] if c < 0.8 else int(r) & ((1 << WIDTH[t]) - 1)
                     for t, pool, k, c, r in zip(types, pools, picks, coins, rand)))
  return tuple(out[:count])


# ---- VALU: name -> (dst type, source types, fn(*values) -> value) -------------------------------------------------------
def _f(t):
  return FLOAT[t][0]


def fmin_ieee(a, b):
  """minNum: a NaN operand yields the other; -0 is less than +0 (the RDNA3 ISA's V_MIN_F32 pseudocode)."""
  if np.isnan(a): return b if not np.isnan(b) else a
  if np.isnan(b): return a
  if a == 0 and b == 0: return a if np.signbit(a) else b
  return a if a < b else b


def fmax_ieee(a, b):
  if np.isnan(a): return b if not np.isnan(b) else a
  if np.isnan(b): return a
  if a == 0 and b == 0: return b if np.signbit(a) else a
  return a if a > b else b


def fminimum(a, b):
  """IEEE 754-2019 minimum: NaN propagates, -0 < +0 (RDNA4 V_MINIMUM_F32)."""
  if np.isnan(a) or np.isnan(b): return a + b
  return fmin_ieee(a, b)


def fmaximum(a, b):
  if np.isnan(a) or np.isnan(b): return a + b
  return fmax_ieee(a, b)


def med3_f(a, b, c):
  """V_MED3_F32: with a NaN input min3 of the inputs, else the max of the two that are not the max of all (ISA pseudocode)."""
  if np.isnan(a) or np.isnan(b) or np.isnan(c): return fmin_ieee(fmin_ieee(a, b), c)
  mx = fmax_ieee(fmax_ieee(a, b), c)
  if mx == a: return fmax_ieee(b, c)
  if mx == b: return fmax_ieee(a, c)
  return fmax_ieee(a, b)


def round_fraction(x, t: str):
  """An exact rational rounded once to float type t, to nearest even, overflowing to infinity."""
  f = _f(t)
  info = np.finfo(f)
  big = Fraction(float(info.max)) + Fraction(float(info.max) - float(np.nextafter(info.max, f(0)))) / 2
  if abs(x) >= big: return f(np.inf) if x > 0 else f(-np.inf)
  r = f(float(x))   # near the answer (at most one step off after the double rounding through f64)
  best = None
  for c in (np.nextafter(r, f(-np.inf)), r, np.nextafter(r, f(np.inf))):
    if not np.isfinite(c): continue
    d = abs(Fraction(float(c)) - x)
    if best is None or d < best[0] or (d == best[0] and int(np.asarray(c).view(FLOAT[t][1])) & 1 == 0): best = (d, c)
  return best[1]


def fma_exact(a, b, c, t):
  """a*b+c rounded once (V_FMA_F32): exact rational arithmetic, one rounding; specials through f64 arithmetic."""
  if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)):
    return _f(t)(np.float64(a) * np.float64(b) + np.float64(c))
  exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
  if exact == 0:   # an exact zero: -0 only when the product and the addend are both -0 (round to nearest)
    prod_neg = bool(np.signbit(a)) != bool(np.signbit(b))
    return _f(t)(-0.0) if prod_neg and np.signbit(c) and (a == 0 or b == 0) else _f(t)(0.0)
  return round_fraction(exact, t)


F32, U, I = "f32", "u32", "i32"


def _bytes(x):
  return [(x >> (8 * k)) & 0xff for k in range(4)]


def _bfe(x, off, n, signed):
  off, n = off & 31, n & 31
  if n == 0: return 0
  r = ((sx(x, 32) if signed else x) >> off) & ((1 << n) - 1)   # S0.i32 >> offset: arithmetic for the signed extract
  return sx(r, n) if signed else r


def _bfe64s(a, off, n):
  if n == 0: return 0
  return sx((a >> off) & ((1 << n) - 1), n)   # a is signed: Python's shift is arithmetic


def _perm(a, b, sel):
  """V_PERM_B32: each selector byte picks a byte of {a, b} (b is bytes 0-3), a sign fill, or a constant."""
  data = b | (a << 32)
  out = 0
  for k in range(4):
    s = (sel >> (8 * k)) & 0xff
    if s <= 7: byte = (data >> (8 * s)) & 0xff
    elif s == 8: byte = 0xff if (data >> 15) & 1 else 0
    elif s == 9: byte = 0xff if (data >> 31) & 1 else 0
    elif s == 10: byte = 0xff if (data >> 47) & 1 else 0
    elif s == 11: byte = 0xff if (data >> 63) & 1 else 0
    elif s == 12: byte = 0
    else: byte = 0xff
    out |= byte << (8 * k)
  return out


def _abs_diff(x, y):
  return x - y if x > y else y - x


INT_OPS: dict[str, tuple] = {
  "v_mov_b32": (U, (U,), lambda a: a), "v_not_b32": (U, (U,), lambda a: ~a), "v_bfrev_b32": (U, (U,), lambda a: int(f"{a:032b}"[::-1], 2)),
  "v_ctz_i32_b32": (I, (U,), lambda a: -1 if a == 0 else (a & -a).bit_length() - 1),
  "v_ffbl_b32": (I, (U,), lambda a: -1 if a == 0 else (a & -a).bit_length() - 1),
  "v_add_nc_u32": (U, (U, U), lambda a, b: a + b), "v_sub_nc_u32": (U, (U, U), lambda a, b: a - b),
  "v_subrev_nc_u32": (U, (U, U), lambda a, b: b - a), "v_add_u32": (U, (U, U), lambda a, b: a + b),
  "v_sub_u32": (U, (U, U), lambda a, b: a - b), "v_subrev_u32": (U, (U, U), lambda a, b: b - a),
  "v_add_nc_i32": (I, (I, I), lambda a, b: a + b), "v_sub_nc_i32": (I, (I, I), lambda a, b: a - b),
  "v_and_b32": (U, (U, U), lambda a, b: a & b), "v_or_b32": (U, (U, U), lambda a, b: a | b), "v_xor_b32": (U, (U, U), lambda a, b: a ^ b),
  "v_xnor_b32": (U, (U, U), lambda a, b: ~(a ^ b)),
  "v_lshlrev_b32": (U, (U, U), lambda a, b: b << (a & 31)), "v_lshrrev_b32": (U, (U, U), lambda a, b: b >> (a & 31)),
  "v_ashrrev_i32": (I, (U, I), lambda a, b: b >> (a & 31)),
  "v_lshl_b32": (U, (U, U), lambda a, b: a << (b & 31)), "v_lshr_b32": (U, (U, U), lambda a, b: a >> (b & 31)),
  "v_min_i32": (I, (I, I), min), "v_max_i32": (I, (I, I), max), "v_min_u32": (U, (U, U), min), "v_max_u32": (U, (U, U), max),
  "v_min3_i32": (I, (I,) * 3, min), "v_max3_i32": (I, (I,) * 3, max), "v_min3_u32": (U, (U,) * 3, min), "v_max3_u32": (U, (U,) * 3, max),
  "v_med3_i32": (I, (I,) * 3, lambda a, b, c: sorted((a, b, c))[1]), "v_med3_u32": (U, (U,) * 3, lambda a, b, c: sorted((a, b, c))[1]),
  "v_minmax_i32": (I, (I,) * 3, lambda a, b, c: max(min(a, b), c)), "v_maxmin_i32": (I, (I,) * 3, lambda a, b, c: min(max(a, b), c)),
  "v_minmax_u32": (U, (U,) * 3, lambda a, b, c: max(min(a, b), c)), "v_maxmin_u32": (U, (U,) * 3, lambda a, b, c: min(max(a, b), c)),
  "v_mul_lo_u32": (U, (U, U), lambda a, b: a * b), "v_mul_hi_u32": (U, (U, U), lambda a, b: (a * b) >> 32),
  "v_mul_hi_i32": (I, (I, I), lambda a, b: (a * b) >> 32),
  "v_mul_u32_u24": (U, (U, U), lambda a, b: (a & 0xffffff) * (b & 0xffffff)),
  "v_mul_hi_u32_u24": (U, (U, U), lambda a, b: ((a & 0xffffff) * (b & 0xffffff)) >> 32),
  "v_mul_i32_i24": (I, (U, U), lambda a, b: sx(a, 24) * sx(b, 24)),
  "v_mul_hi_i32_i24": (I, (U, U), lambda a, b: (sx(a, 24) * sx(b, 24)) >> 32),
  "v_mad_u32_u24": (U, (U, U, U), lambda a, b, c: (a & 0xffffff) * (b & 0xffffff) + c),
  "v_mad_i32_i24": (I, (U, U, I), lambda a, b, c: sx(a, 24) * sx(b, 24) + c),
  "v_mad_u32_u16": (U, ("u16", "u16", U), lambda a, b, c: a * b + c), "v_mad_i32_i16": (I, ("i16", "i16", I), lambda a, b, c: a * b + c),
  "v_bfe_u32": (U, (U, U, U), lambda a, o, n: _bfe(a, o, n, False)), "v_bfe_i32": (I, (U, U, U), lambda a, o, n: _bfe(a, o, n, True)),
  "v_bfi_b32": (U, (U, U, U), lambda a, b, c: (a & b) | (~a & c)), "v_bfm_b32": (U, (U, U), lambda a, b: ((1 << (a & 31)) - 1) << (b & 31)),
  "v_alignbit_b32": (U, (U, U, U), lambda a, b, c: ((a << 32) | b) >> (c & 31)),
  "v_alignbyte_b32": (U, (U, U, U), lambda a, b, c: ((a << 32) | b) >> (8 * (c & 3))),
  "v_lshl_or_b32": (U, (U, U, U), lambda a, b, c: (a << (b & 31)) | c), "v_and_or_b32": (U, (U, U, U), lambda a, b, c: (a & b) | c),
  "v_or3_b32": (U, (U, U, U), lambda a, b, c: a | b | c), "v_xor3_b32": (U, (U, U, U), lambda a, b, c: a ^ b ^ c),
  "v_lshl_add_u32": (U, (U, U, U), lambda a, b, c: (a << (b & 31)) + c), "v_add_lshl_u32": (U, (U, U, U), lambda a, b, c: ((a + b) & M32) << (c & 31)),
  "v_add3_u32": (U, (U, U, U), lambda a, b, c: a + b + c), "v_xad_u32": (U, (U, U, U), lambda a, b, c: (a ^ b) + c),
  "v_bcnt_u32_b32": (U, (U, U), lambda a, b: bin(a).count("1") + b), "v_perm_b32": (U, (U, U, U), _perm),
  "v_sad_u32": (U, (U, U, U), lambda a, b, c: _abs_diff(a, b) + c),
  "v_sad_u8": (U, (U, U, U), lambda a, b, c: sum(_abs_diff(x, y) for x, y in zip(_bytes(a), _bytes(b))) + c),
  "v_sad_hi_u8": (U, (U, U, U), lambda a, b, c: (sum(_abs_diff(x, y) for x, y in zip(_bytes(a), _bytes(b))) << 16) + c),
  "v_sad_u16": (U, (U, U, U), lambda a, b, c: _abs_diff(a & M16, b & M16) + _abs_diff(a >> 16, b >> 16) + c),
  "v_msad_u8": (U, (U, U, U), lambda a, b, c: sum(0 if y == 0 else _abs_diff(x, y) for x, y in zip(_bytes(a), _bytes(b))) + c),
  # V_LERP_U8: per byte (a + b + (c & 1)) >> 1, the rounding bit from each byte of c
  "v_lerp_u8": (U, (U, U, U), lambda a, b, c: sum(((x + y + (z & 1)) >> 1) << (8 * k) for k, (x, y, z) in enumerate(zip(_bytes(a), _bytes(b), _bytes(c))))),
  "v_cvt_pk_u16_u32": (U, (U, U), lambda a, b: min(a, M16) | (min(b, M16) << 16)),
  "v_cvt_pk_i16_i32": (U, (I, I), lambda a, b: (max(min(a, 32767), -32768) & M16) | ((max(min(b, 32767), -32768) & M16) << 16)),
  "v_lshlrev_b64": ("u64", (U, "u64"), lambda a, b: b << (a & 63)), "v_lshrrev_b64": ("u64", (U, "u64"), lambda a, b: b >> (a & 63)),
  "v_ashrrev_i64": ("i64", (U, "i64"), lambda a, b: b >> (a & 63)),
  "v_lshl_add_u64": ("u64", ("u64", U, "u64"), lambda a, b, c: (a << (b & 7)) + c),
  "v_mov_b64": ("u64", ("u64",), lambda a: a),
  # 16-bit (VOP3 forms on gfx11/12; results in the low half)
  "v_add_nc_u16": ("u16", ("u16", "u16"), lambda a, b: a + b), "v_sub_nc_u16": ("u16", ("u16", "u16"), lambda a, b: a - b),
  "v_add_nc_i16": ("i16", ("i16", "i16"), lambda a, b: a + b), "v_sub_nc_i16": ("i16", ("i16", "i16"), lambda a, b: a - b),
  "v_add_u16": ("u16", ("u16", "u16"), lambda a, b: a + b), "v_sub_u16": ("u16", ("u16", "u16"), lambda a, b: a - b),
  "v_subrev_u16": ("u16", ("u16", "u16"), lambda a, b: b - a),
  "v_mul_lo_u16": ("u16", ("u16", "u16"), lambda a, b: a * b),
  "v_lshlrev_b16": ("u16", ("u16", "u16"), lambda a, b: b << (a & 15)), "v_lshrrev_b16": ("u16", ("u16", "u16"), lambda a, b: b >> (a & 15)),
  "v_ashrrev_i16": ("i16", ("u16", "i16"), lambda a, b: b >> (a & 15)),
  "v_max_u16": ("u16", ("u16", "u16"), max), "v_min_u16": ("u16", ("u16", "u16"), min),
  "v_max_i16": ("i16", ("i16", "i16"), max), "v_min_i16": ("i16", ("i16", "i16"), min),
  "v_mad_u16": ("u16", ("u16",) * 3, lambda a, b, c: a * b + c), "v_mad_i16": ("i16", ("i16",) * 3, lambda a, b, c: a * b + c),
  "v_min3_i16": ("i16", ("i16",) * 3, min), "v_max3_i16": ("i16", ("i16",) * 3, max),
  "v_min3_u16": ("u16", ("u16",) * 3, min), "v_max3_u16": ("u16", ("u16",) * 3, max),
  "v_med3_i16": ("i16", ("i16",) * 3, lambda a, b, c: sorted((a, b, c))[1]), "v_med3_u16": ("u16", ("u16",) * 3, lambda a, b, c: sorted((a, b, c))[1]),
}


def _float_ops(t: str) -> dict[str, tuple]:
  f = _f(t)
  ops = {
    f"v_add_{t}": (t, (t, t), lambda a, b: a + b), f"v_sub_{t}": (t, (t, t), lambda a, b: a - b),
    f"v_subrev_{t}": (t, (t, t), lambda a, b: b - a), f"v_mul_{t}": (t, (t, t), lambda a, b: a * b),
    f"v_min_{t}": (t, (t, t), fmin_ieee), f"v_max_{t}": (t, (t, t), fmax_ieee),
    f"v_min_num_{t}": (t, (t, t), fmin_ieee), f"v_max_num_{t}": (t, (t, t), fmax_ieee),
    f"v_minimum_{t}": (t, (t, t), fminimum), f"v_maximum_{t}": (t, (t, t), fmaximum),
    f"v_fma_{t}": (t, (t, t, t), lambda a, b, c: fma_exact(a, b, c, t)),
    f"v_floor_{t}": (t, (t,), np.floor), f"v_ceil_{t}": (t, (t,), np.ceil), f"v_trunc_{t}": (t, (t,), np.trunc),
    f"v_rndne_{t}": (t, (t,), np.rint),
    f"v_med3_{t}": (t, (t,) * 3, med3_f), f"v_med3_num_{t}": (t, (t,) * 3, med3_f),
    # V_FRACT: S0 - floor(S0), kept below 1.0 (ISA pseudocode; an infinity gives inf - inf = NaN, as LLVM's constant folding of llvm.amdgcn.fract)
    f"v_fract_{t}": (t, (t,), lambda a: a - np.floor(a) if not np.isfinite(a) else f(min(a - np.floor(a), np.nextafter(f(1), f(0))))),
  }
  if t != "f64":
    ops.update({f"v_min3_{t}": (t, (t,) * 3, lambda a, b, c: fmin_ieee(fmin_ieee(a, b), c)),
                f"v_max3_{t}": (t, (t,) * 3, lambda a, b, c: fmax_ieee(fmax_ieee(a, b), c)),
                f"v_minmax_{t}": (t, (t,) * 3, lambda a, b, c: fmax_ieee(fmin_ieee(a, b), c)),
                f"v_maxmin_{t}": (t, (t,) * 3, lambda a, b, c: fmin_ieee(fmax_ieee(a, b), c)),
                f"v_min3_num_{t}": (t, (t,) * 3, lambda a, b, c: fmin_ieee(fmin_ieee(a, b), c)),
                f"v_max3_num_{t}": (t, (t,) * 3, lambda a, b, c: fmax_ieee(fmax_ieee(a, b), c)),
                f"v_minmax_num_{t}": (t, (t,) * 3, lambda a, b, c: fmax_ieee(fmin_ieee(a, b), c)),
                f"v_maxmin_num_{t}": (t, (t,) * 3, lambda a, b, c: fmin_ieee(fmax_ieee(a, b), c)),
                f"v_minimum3_{t}": (t, (t,) * 3, lambda a, b, c: fminimum(fminimum(a, b), c)),
                f"v_maximum3_{t}": (t, (t,) * 3, lambda a, b, c: fmaximum(fmaximum(a, b), c)),
                f"v_minimummaximum_{t}": (t, (t,) * 3, lambda a, b, c: fmaximum(fminimum(a, b), c)),
                f"v_maximumminimum_{t}": (t, (t,) * 3, lambda a, b, c: fminimum(fmaximum(a, b), c)),
                f"v_fmac_{t}": (t, (t, t, t), lambda a, b, c: fma_exact(a, b, c, t))})
  return ops


def _cvt_int(x, signed: bool, bits: int = 32):
  """Float -> integer, truncating toward zero, saturating; NaN gives 0 (V_CVT_I32_F32)."""
  if np.isnan(x): return 0
  lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
  if np.isinf(x): return hi if x > 0 else lo
  return max(lo, min(hi, int(math.trunc(float(x)))))


CVT_OPS: dict[str, tuple] = {
  "v_cvt_f32_i32": (F32, (I,), lambda a: np.float32(a)), "v_cvt_f32_u32": (F32, (U,), lambda a: np.float32(a)),
  "v_cvt_i32_f32": (I, (F32,), lambda a: _cvt_int(a, True)), "v_cvt_u32_f32": (U, (F32,), lambda a: _cvt_int(a, False)),
  "v_cvt_i32_f64": (I, ("f64",), lambda a: _cvt_int(a, True)), "v_cvt_u32_f64": (U, ("f64",), lambda a: _cvt_int(a, False)),
  "v_cvt_f64_i32": ("f64", (I,), lambda a: np.float64(a)), "v_cvt_f64_u32": ("f64", (U,), lambda a: np.float64(a)),
  "v_cvt_f32_f64": (F32, ("f64",), lambda a: np.float32(a)), "v_cvt_f64_f32": ("f64", (F32,), lambda a: np.float64(a)),
  "v_cvt_f16_f32": ("f16", (F32,), lambda a: np.float16(a)), "v_cvt_f32_f16": (F32, ("f16",), lambda a: np.float32(a)),
  "v_cvt_f16_i16": ("f16", ("i16",), lambda a: np.float16(a)), "v_cvt_f16_u16": ("f16", ("u16",), lambda a: np.float16(a)),
  "v_cvt_i16_f16": ("i16", ("f16",), lambda a: _cvt_int(a, True, 16)), "v_cvt_u16_f16": ("u16", ("f16",), lambda a: _cvt_int(a, False, 16)),
  "v_cvt_i32_i16": (I, ("i16",), lambda a: a), "v_cvt_u32_u16": (U, ("u16",), lambda a: a),
  "v_cvt_f32_ubyte0": (F32, (U,), lambda a: np.float32(a & 0xff)), "v_cvt_f32_ubyte1": (F32, (U,), lambda a: np.float32((a >> 8) & 0xff)),
  "v_cvt_f32_ubyte2": (F32, (U,), lambda a: np.float32((a >> 16) & 0xff)), "v_cvt_f32_ubyte3": (F32, (U,), lambda a: np.float32(a >> 24)),
  "v_cvt_floor_i32_f32": (I, (F32,), lambda a: _cvt_int(np.floor(a), True)),
  "v_cvt_flr_i32_f32": (I, (F32,), lambda a: _cvt_int(np.floor(a), True)),
}

# V_MUL_DX9_ZERO_F32: DX9 rules, a zero operand gives +0 whatever the other (infinity and NaN included)
SPECIAL_FLOAT_OPS = {"v_mul_dx9_zero_f32": (F32, (F32, F32), lambda a, b: np.float32(0) if a == 0 or b == 0 else a * b)}


def ldexp(a, e: int, t: str):
  """S0 * 2**S1 rounded once; NaN, infinities and zeros pass (ISA V_LDEXP_F32)."""
  if not np.isfinite(a) or a == 0: return a
  lim = 400 if t != "f64" else 2300   # beyond this the result is 0 or infinity whatever S0 is
  return round_fraction(Fraction(float(a)) * Fraction(2) ** max(-lim, min(lim, e)), t)


def frexp_mant(a):
  """V_FREXP_MANT: the significand in [0.5, 1) with S0's sign; NaN and infinities pass."""
  return a if not np.isfinite(a) else np.frexp(a)[0].astype(a.dtype)


def frexp_exp(a) -> int:
  """V_FREXP_EXP: the exponent that goes with frexp_mant; 0 for NaN, infinities and zeros."""
  return 0 if not np.isfinite(a) or a == 0 else int(np.frexp(a)[1])


def f16_toward_zero(x):
  """f32 -> f16 rounding toward zero (V_CVT_PK_RTZ_F16_F32): nearest, then one step back if that went outward."""
  h = np.float16(x)
  if np.isnan(x) or np.isinf(x): return h
  return np.nextafter(h, np.float16(0)) if abs(float(h)) > abs(float(x)) else h


def norm16(x, signed: bool) -> int:
  """V_CVT_PK_NORM_{I16,U16}_F32 per half: clamp to [-1, 1] / [0, 1], scale by 32767 / 65535, round to nearest even; NaN 0."""
  if np.isnan(x): return 0
  lo, scale = (-1.0, 32767) if signed else (0.0, 65535)
  return int(np.rint(min(max(float(x), lo), 1.0) * scale)) & M16


SPECIAL_FLOAT_OPS.update({
  "v_ldexp_f32": (F32, (F32, I), lambda a, e: ldexp(a, e, F32)), "v_ldexp_f64": ("f64", ("f64", I), lambda a, e: ldexp(a, e, "f64")),
  "v_frexp_mant_f32": (F32, (F32,), frexp_mant), "v_frexp_mant_f64": ("f64", ("f64",), frexp_mant), "v_frexp_mant_f16": ("f16", ("f16",), frexp_mant),
  "v_frexp_exp_i32_f32": (I, (F32,), frexp_exp), "v_frexp_exp_i32_f64": (I, ("f64",), frexp_exp), "v_frexp_exp_i16_f16": ("i16", ("f16",), frexp_exp),
  "v_pack_b32_f16": (U, ("f16", "f16"), lambda a, b: to_bits(a, "f16") | (to_bits(b, "f16") << 16)),
  "v_cvt_pk_rtz_f16_f32": (U, (F32, F32), lambda a, b: to_bits(f16_toward_zero(a), "f16") | (to_bits(f16_toward_zero(b), "f16") << 16)),
  "v_sat_pk_u8_i16": ("u16", (U,), lambda a: max(0, min(255, sx(a, 16))) | (max(0, min(255, sx(a >> 16, 16))) << 8)),
  "v_cvt_off_f32_i4": (F32, (U,), lambda a: np.float32(sx(a & 15, 4) / 16)),
  "v_cvt_pk_norm_i16_f32": (U, (F32, F32), lambda a, b: norm16(a, True) | (norm16(b, True) << 16)),
  "v_cvt_pk_norm_u16_f32": (U, (F32, F32), lambda a, b: norm16(a, False) | (norm16(b, False) << 16)),
})

VALU_OPS: dict[str, tuple] = {**INT_OPS, **SPECIAL_FLOAT_OPS, **_float_ops("f32"), **_float_ops("f16"), **_float_ops("f64"), **CVT_OPS}

# ---- VALU with a lane mask in or out: name -> (carry in?, fn(a, b, cin) -> (result, carry out or None)) -------------------
CARRY_OPS: dict[str, tuple] = {
  "v_add_co_u32": (False, lambda a, b, c: ((a + b) & M32, (a + b) >> 32)),
  "v_sub_co_u32": (False, lambda a, b, c: ((a - b) & M32, int(b > a))),
  "v_subrev_co_u32": (False, lambda a, b, c: ((b - a) & M32, int(a > b))),
  "v_add_co_ci_u32": (True, lambda a, b, c: ((a + b + c) & M32, (a + b + c) >> 32)),
  "v_sub_co_ci_u32": (True, lambda a, b, c: ((a - b - c) & M32, int(b + c > a))),
  "v_subrev_co_ci_u32": (True, lambda a, b, c: ((b - a - c) & M32, int(a + c > b))),
  "v_addc_co_u32": (True, lambda a, b, c: ((a + b + c) & M32, (a + b + c) >> 32)),
  "v_subb_co_u32": (True, lambda a, b, c: ((a - b - c) & M32, int(b + c > a))),
  "v_subbrev_co_u32": (True, lambda a, b, c: ((b - a - c) & M32, int(a + c > b))),
  "v_cndmask_b32": (True, lambda a, b, c: (b if c else a, None)),
}

# ---- compares: VOPC / VOP3 v_cmp_*, v_cmpx_* (the ISA's table of the 16 float and 8 integer conditions) ---------------
FLOAT_CONDITIONS = {
  "f": lambda a, b: False, "lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
  "lg": lambda a, b: a < b or a > b, "ge": lambda a, b: a >= b, "o": lambda a, b: not (np.isnan(a) or np.isnan(b)),
  "u": lambda a, b: bool(np.isnan(a) or np.isnan(b)), "nge": lambda a, b: not a >= b, "nlg": lambda a, b: not (a < b or a > b),
  "ngt": lambda a, b: not a > b, "nle": lambda a, b: not a <= b, "neq": lambda a, b: not a == b, "nlt": lambda a, b: not a < b,
  "tru": lambda a, b: True, "t": lambda a, b: True,
}
INT_CONDITIONS = {"f": lambda a, b: False, "lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "le": lambda a, b: a <= b,
                  "gt": lambda a, b: a > b, "ne": lambda a, b: a != b, "lg": lambda a, b: a != b, "ge": lambda a, b: a >= b,
                  "t": lambda a, b: True}


def float_class(x, mask: int) -> bool:
  """V_CMP_CLASS: bit 0 signalling NaN, 1 quiet NaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf."""
  t = {2: "f16", 4: "f32", 8: "f64"}[x.dtype.itemsize]
  bits, w = to_bits(x, t), WIDTH[t]
  mant = {16: 10, 32: 23, 64: 52}[w]
  if np.isnan(x): k = 1 if (bits >> (mant - 1)) & 1 else 0
  elif np.isinf(x): k = 2 if x < 0 else 9
  elif x == 0: k = 5 if np.signbit(x) else 6
  elif ((bits >> mant) & ((1 << (w - 1 - mant)) - 1)) == 0: k = 4 if x < 0 else 7
  else: k = 3 if x < 0 else 8
  return bool((mask >> k) & 1)


def compare(name: str):
  """(source types, fn(a, b) -> bool) of v_cmp[x]_COND_TYPE / v_cmp[x]_class_TYPE, or None."""
  parts = name.split("_")
  if len(parts) != 4 or parts[0] != "v" or parts[1] not in ("cmp", "cmpx"): return None
  cond, t = parts[2], parts[3]
  if t not in WIDTH: return None
  if cond == "class": return (t, "u32"), float_class
  table = FLOAT_CONDITIONS if t in FLOAT else INT_CONDITIONS
  return ((t, t), table[cond]) if cond in table else None


# ---- SALU: name -> (dst type, source types, fn(*values) -> (result, scc or None)) -------------------------------------
def _scc_nz(r, bits=32):
  return (r, int(r & ((1 << bits) - 1) != 0))


def _sop_logic(fn, bits):
  return lambda a, b: _scc_nz(fn(a, b) & ((1 << bits) - 1), bits)


SOP2_OPS: dict[str, tuple] = {
  "s_add_u32": (U, (U, U), lambda a, b: ((a + b) & M32, (a + b) >> 32)),
  "s_sub_u32": (U, (U, U), lambda a, b: ((a - b) & M32, int(b > a))),
  "s_add_i32": (I, (I, I), lambda a, b: (a + b, int(not -(1 << 31) <= a + b < (1 << 31)))),
  "s_sub_i32": (I, (I, I), lambda a, b: (a - b, int(not -(1 << 31) <= a - b < (1 << 31)))),
  "s_add_co_i32": (I, (I, I), lambda a, b: (a + b, int(not -(1 << 31) <= a + b < (1 << 31)))),
  "s_sub_co_i32": (I, (I, I), lambda a, b: (a - b, int(not -(1 << 31) <= a - b < (1 << 31)))),
  "s_add_co_u32": (U, (U, U), lambda a, b: ((a + b) & M32, (a + b) >> 32)),
  "s_sub_co_u32": (U, (U, U), lambda a, b: ((a - b) & M32, int(b > a))),
  "s_min_i32": (I, (I, I), lambda a, b: (min(a, b), int(a < b))), "s_min_u32": (U, (U, U), lambda a, b: (min(a, b), int(a < b))),
  "s_max_i32": (I, (I, I), lambda a, b: (max(a, b), int(a > b))), "s_max_u32": (U, (U, U), lambda a, b: (max(a, b), int(a > b))),
  "s_lshl_b32": (U, (U, U), lambda a, b: _scc_nz((a << (b & 31)) & M32)), "s_lshr_b32": (U, (U, U), lambda a, b: _scc_nz(a >> (b & 31))),
  "s_ashr_i32": (I, (I, U), lambda a, b: _scc_nz((a >> (b & 31)) & M32)),
  "s_lshl_b64": ("u64", ("u64", U), lambda a, b: _scc_nz((a << (b & 63)) & M64, 64)),
  "s_lshr_b64": ("u64", ("u64", U), lambda a, b: _scc_nz(a >> (b & 63), 64)),
  "s_ashr_i64": ("i64", ("i64", U), lambda a, b: _scc_nz((a >> (b & 63)) & M64, 64)),
  # S_LSHLn_ADD_U32: SCC is the unsigned overflow of the 64-bit (S0 << n) + S1
  **{f"s_lshl{n}_add_u32": (U, (U, U), (lambda n: lambda a, b: ((((a << n) + b) & M32, int((a << n) + b >= 1 << 32))))(n)) for n in (1, 2, 3, 4)},
  "s_bfm_b32": (U, (U, U), lambda a, b: ((((1 << (a & 31)) - 1) << (b & 31)) & M32, None)),
  "s_bfm_b64": ("u64", (U, U), lambda a, b: ((((1 << (a & 63)) - 1) << (b & 63)) & M64, None)),
  "s_mul_i32": (I, (I, I), lambda a, b: (a * b, None)),
  "s_mul_hi_u32": (U, (U, U), lambda a, b: ((a * b) >> 32, None)), "s_mul_hi_i32": (I, (I, I), lambda a, b: ((a * b) >> 32, None)),
  "s_bfe_u32": (U, (U, U), lambda a, b: _scc_nz(_bfe(a, b & 31, (b >> 16) & 0x7f, False) if (b >> 16) & 0x7f < 32 else a >> (b & 31))),
  "s_bfe_i32": (I, (U, U), lambda a, b: _scc_nz(_bfe(a, b & 31, (b >> 16) & 0x7f, True) & M32 if (b >> 16) & 0x7f < 32 else (sx(a, 32) >> (b & 31)) & M32)),
  "s_bfe_u64": ("u64", ("u64", U), lambda a, b: _scc_nz((a >> (b & 63)) & ((1 << min((b >> 16) & 0x7f, 64)) - 1), 64)),
  "s_bfe_i64": ("i64", ("i64", U), lambda a, b: _scc_nz(_bfe64s(a, b & 63, min((b >> 16) & 0x7f, 64)) & M64, 64)),
  "s_absdiff_i32": (I, (I, I), lambda a, b: _scc_nz(abs(a - b) & M32)),
  "s_pack_ll_b32_b16": (U, (U, U), lambda a, b: ((a & M16) | ((b & M16) << 16), None)),
  "s_pack_lh_b32_b16": (U, (U, U), lambda a, b: ((a & M16) | (b & 0xffff0000), None)),
  "s_pack_hh_b32_b16": (U, (U, U), lambda a, b: ((a >> 16) | (b & 0xffff0000), None)),
  "s_pack_hl_b32_b16": (U, (U, U), lambda a, b: ((a >> 16) | ((b & M16) << 16), None)),
}
_LOGIC = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "nand": lambda a, b: ~(a & b),
          "nor": lambda a, b: ~(a | b), "xnor": lambda a, b: ~(a ^ b), "andn2": lambda a, b: a & ~b, "orn2": lambda a, b: a | ~b,
          "and_not1": lambda a, b: a & ~b, "or_not1": lambda a, b: a | ~b}
for _k, _fn in _LOGIC.items():
  SOP2_OPS[f"s_{_k}_b32"] = (U, (U, U), _sop_logic(_fn, 32))
  SOP2_OPS[f"s_{_k}_b64"] = ("u64", ("u64", "u64"), _sop_logic(_fn, 64))
# with SCC in: s_addc/s_subb/s_cselect read SCC (passed as a third source)
SOP2_SCC_OPS: dict[str, tuple] = {
  "s_addc_u32": (U, (U, U), lambda a, b, c: ((a + b + c) & M32, (a + b + c) >> 32)),
  "s_subb_u32": (U, (U, U), lambda a, b, c: ((a - b - c) & M32, int(b + c > a))),
  "s_add_co_ci_u32": (U, (U, U), lambda a, b, c: ((a + b + c) & M32, (a + b + c) >> 32)),
  "s_sub_co_ci_u32": (U, (U, U), lambda a, b, c: ((a - b - c) & M32, int(b + c > a))),
  "s_cselect_b32": (U, (U, U), lambda a, b, c: (a if c else b, None)),
  "s_cselect_b64": ("u64", ("u64", "u64"), lambda a, b, c: (a if c else b, None)),
}

SOP1_OPS: dict[str, tuple] = {
  "s_mov_b32": (U, (U,), lambda a: (a, None)), "s_mov_b64": ("u64", ("u64",), lambda a: (a, None)),
  "s_not_b32": (U, (U,), lambda a: _scc_nz(~a & M32)), "s_not_b64": ("u64", ("u64",), lambda a: _scc_nz(~a & M64, 64)),
  "s_brev_b32": (U, (U,), lambda a: (int(f"{a:032b}"[::-1], 2), None)), "s_brev_b64": ("u64", ("u64",), lambda a: (int(f"{a:064b}"[::-1], 2), None)),
  "s_bcnt0_i32_b32": (U, (U,), lambda a: _scc_nz(32 - bin(a).count("1"))), "s_bcnt1_i32_b32": (U, (U,), lambda a: _scc_nz(bin(a).count("1"))),
  "s_bcnt0_i32_b64": (U, ("u64",), lambda a: _scc_nz(64 - bin(a).count("1"))), "s_bcnt1_i32_b64": (U, ("u64",), lambda a: _scc_nz(bin(a).count("1"))),
  "s_ff0_i32_b32": (I, (U,), lambda a: (-1 if a == M32 else ((~a & (a + 1)).bit_length() - 1), None)),
  "s_ff1_i32_b32": (I, (U,), lambda a: (-1 if a == 0 else (a & -a).bit_length() - 1, None)),
  "s_ctz_i32_b32": (I, (U,), lambda a: (-1 if a == 0 else (a & -a).bit_length() - 1, None)),
  "s_ff0_i32_b64": (I, ("u64",), lambda a: (-1 if a == M64 else ((~a & (a + 1)).bit_length() - 1), None)),
  "s_ff1_i32_b64": (I, ("u64",), lambda a: (-1 if a == 0 else (a & -a).bit_length() - 1, None)),
  "s_ctz_i32_b64": (I, ("u64",), lambda a: (-1 if a == 0 else (a & -a).bit_length() - 1, None)),
  "s_sext_i32_i8": (I, (U,), lambda a: (sx(a, 8), None)), "s_sext_i32_i16": (I, (U,), lambda a: (sx(a, 16), None)),
  "s_abs_i32": (I, (I,), lambda a: _scc_nz(abs(a) & M32)),
  "s_quadmask_b32": (U, (U,), lambda a: _scc_nz(sum(((a >> (4 * k)) & 0xf != 0) << k for k in range(8)))),
  "s_quadmask_b64": ("u64", ("u64",), lambda a: _scc_nz(sum(((a >> (4 * k)) & 0xf != 0) << k for k in range(16)), 64)),
  "s_wqm_b32": (U, (U,), lambda a: _scc_nz(sum((0xf if (a >> (4 * k)) & 0xf else 0) << (4 * k) for k in range(8)))),
  "s_wqm_b64": ("u64", ("u64",), lambda a: _scc_nz(sum((0xf if (a >> (4 * k)) & 0xf else 0) << (4 * k) for k in range(16)), 64)),
}

SOPC_OPS: dict[str, tuple] = {}
for _t in ("i32", "u32", "u64"):
  for _c, _fn in INT_CONDITIONS.items():
    if _c in ("f", "t", "ne"): continue
    SOPC_OPS[f"s_cmp_{_c}_{_t}"] = ((_t, _t), _fn)
SOPC_OPS.update({
  "s_bitcmp0_b32": ((U, U), lambda a, b: not (a >> (b & 31)) & 1), "s_bitcmp1_b32": ((U, U), lambda a, b: bool((a >> (b & 31)) & 1)),
  "s_bitcmp0_b64": (("u64", U), lambda a, b: not (a >> (b & 63)) & 1), "s_bitcmp1_b64": (("u64", U), lambda a, b: bool((a >> (b & 63)) & 1)),
})
for _t in ("f32", "f16"):
  for _c, _fn in FLOAT_CONDITIONS.items():
    if _c in ("f", "tru", "t"): continue
    SOPC_OPS[f"s_cmp_{_c}_{_t}"] = ((_t, _t), _fn)

# SOPK: name -> (fn(s, imm16) -> (result or None, scc or None)); the 16-bit immediate is sign-extended unless the op says otherwise
SOPK_OPS: dict[str, tuple] = {
  "s_movk_i32": lambda s, k: (sx(k, 16) & M32, None),
  "s_cmovk_i32": None,   # reads SCC: the test passes it
  "s_addk_i32": lambda s, k: ((sx(s, 32) + sx(k, 16)) & M32, int(not -(1 << 31) <= sx(s, 32) + sx(k, 16) < (1 << 31))),
  "s_addk_co_i32": lambda s, k: ((sx(s, 32) + sx(k, 16)) & M32, int(not -(1 << 31) <= sx(s, 32) + sx(k, 16) < (1 << 31))),
  "s_mulk_i32": lambda s, k: ((sx(s, 32) * sx(k, 16)) & M32, None),
}
for _c, _fn in INT_CONDITIONS.items():
  if _c in ("f", "t", "ne"): continue
  SOPK_OPS[f"s_cmpk_{_c}_i32"] = (lambda fn: lambda s, k: (None, int(fn(sx(s, 32), sx(k, 16)))))(_fn)
  SOPK_OPS[f"s_cmpk_{_c}_u32"] = (lambda fn: lambda s, k: (None, int(fn(s, k & M16))))(_fn)   # unsigned compares zero-extend


# ---- VOPD halves: v_dual_X -> (source types, fn(a, b, acc_or_vcc_bit, K)) ----------------------------------------------
def vopd_part(name: str):
  """(source types, uses the accumulator (vdst), fn(srcs, acc, vcc_bit, k)) of one VOPD half, or None."""
  op = "v_" + name.removeprefix("v_dual_")
  if op == "v_fmaak_f32": return (F32, F32), False, lambda s, d, c, k: fma_exact(s[0], s[1], k, F32)
  if op == "v_fmamk_f32": return (F32, F32), False, lambda s, d, c, k: fma_exact(s[0], k, s[1], F32)
  if op == "v_fmac_f32": return (F32, F32), True, lambda s, d, c, k: fma_exact(s[0], s[1], d, F32)
  if op == "v_cndmask_b32": return (U, U), False, lambda s, d, c, k: s[1] if c else s[0]
  if op == "v_dot2acc_f32_f16": return (U, U), True, lambda s, d, c, k: dot2_f32_f16(s[0], s[1], d)
  if op in VALU_OPS and len(VALU_OPS[op][1]) <= 2:
    dt, types, fn = VALU_OPS[op]
    return types, False, lambda s, d, c, k: fn(*s)
  return None


# ---- VOP3P packed 16-bit math: v_pk_X -> (half type, the op on one half); each half of the result from its own halves --
def _pk_ops() -> dict[str, tuple]:
  h = "f16"
  ops = {"v_pk_add_u16": ("u16", lambda a, b: a + b), "v_pk_sub_u16": ("u16", lambda a, b: a - b),
         "v_pk_add_i16": ("i16", lambda a, b: a + b), "v_pk_sub_i16": ("i16", lambda a, b: a - b),
         "v_pk_mul_lo_u16": ("u16", lambda a, b: a * b), "v_pk_lshlrev_b16": ("u16", lambda a, b: b << (a & 15)),
         "v_pk_lshrrev_b16": ("u16", lambda a, b: b >> (a & 15)), "v_pk_ashrrev_i16": ("i16", lambda a, b: b >> (a & 15)),
         "v_pk_max_i16": ("i16", max), "v_pk_min_i16": ("i16", min), "v_pk_max_u16": ("u16", max), "v_pk_min_u16": ("u16", min),
         "v_pk_mad_u16": ("u16", lambda a, b, c: a * b + c), "v_pk_mad_i16": ("i16", lambda a, b, c: a * b + c),
         "v_pk_add_f16": (h, lambda a, b: a + b), "v_pk_mul_f16": (h, lambda a, b: a * b),
         "v_pk_fma_f16": (h, lambda a, b, c: fma_exact(a, b, c, h)),
         "v_pk_max_f16": (h, fmax_ieee), "v_pk_min_f16": (h, fmin_ieee), "v_pk_max_num_f16": (h, fmax_ieee), "v_pk_min_num_f16": (h, fmin_ieee),
         "v_pk_maximum_f16": (h, fmaximum), "v_pk_minimum_f16": (h, fminimum)}
  return ops


PK_OPS = _pk_ops()


def _lanes_of(x: int, width: int, count: int, signed: bool) -> list[int]:
  return [(sx if signed else (lambda v, w: v))((x >> (width * k)) & ((1 << width) - 1), width) for k in range(count)]


# integer dot products (no modifiers): name -> fn(a, b, c) on 32-bit registers
DOT_OPS = {
  "v_dot4_u32_u8": lambda a, b, c: sum(x * y for x, y in zip(_lanes_of(a, 8, 4, False), _lanes_of(b, 8, 4, False))) + c,
  "v_dot8_u32_u4": lambda a, b, c: sum(x * y for x, y in zip(_lanes_of(a, 4, 8, False), _lanes_of(b, 4, 8, False))) + c,
  "v_dot2_u32_u16": lambda a, b, c: sum(x * y for x, y in zip(_lanes_of(a, 16, 2, False), _lanes_of(b, 16, 2, False))) + c,
  "v_dot4_i32_i8": lambda a, b, c: sum(x * y for x, y in zip(_lanes_of(a, 8, 4, True), _lanes_of(b, 8, 4, True))) + sx(c, 32),
  "v_dot8_i32_i4": lambda a, b, c: sum(x * y for x, y in zip(_lanes_of(a, 4, 8, True), _lanes_of(b, 4, 8, True))) + sx(c, 32),
  "v_dot2_i32_i16": lambda a, b, c: sum(x * y for x, y in zip(_lanes_of(a, 16, 2, True), _lanes_of(b, 16, 2, True))) + sx(c, 32),
}


# ---- DS (LDS): atomics as read-modify-write of one element, loads and stores by width ----------------------------------
def _ds_atomics(bits: int) -> dict[str, object]:
  m = (1 << bits) - 1
  return {"add": lambda x, d: x + d, "sub": lambda x, d: x - d, "rsub": lambda x, d: d - x,
          "inc": lambda x, d: 0 if x >= d else x + 1, "dec": lambda x, d: d if x == 0 or x > d else x - 1,
          "min_u": min, "max_u": max, "min_i": lambda x, d: min(sx(x, bits), sx(d, bits)) & m,
          "max_i": lambda x, d: max(sx(x, bits), sx(d, bits)) & m, "and": lambda x, d: x & d, "or": lambda x, d: x | d,
          "xor": lambda x, d: x ^ d, "xchg": lambda x, d: d}


def _round_bf16(x: Fraction):
  """An exact rational rounded once to bf16 (8-bit exponent, 8-bit significand), to nearest even; as an np.float32."""
  if x == 0: return np.float32(0)
  e = max(math.floor(math.log2(abs(x))), -126)
  while Fraction(2) ** e > abs(x): e -= 1   # log2 of a huge rational may be off by one
  while Fraction(2) ** (e + 1) <= abs(x): e += 1
  e = max(e, -126)
  q = x / Fraction(2) ** (e - 7)
  r = round(q)   # Python rounds halves to even
  v = Fraction(r) * Fraction(2) ** (e - 7)
  return np.float32(np.inf if v > 0 else -np.inf) if abs(v) >= 2 ** 128 else np.float32(float(v))


def _add_exact(a, b, t: str):
  """a + b rounded once to t (f16 / bf16 / f32 / f64); an exact zero is -0 only when both are -0."""
  if not (np.isfinite(a) and np.isfinite(b)): return (np.float32 if t == "bf16" else _f(t))(np.float64(a) + np.float64(b))
  x = Fraction(float(a)) + Fraction(float(b))
  if x == 0: return (np.float32 if t == "bf16" else _f(t))(-0.0 if np.signbit(a) and np.signbit(b) else 0.0)
  return _round_bf16(x) if t == "bf16" else round_fraction(x, t)


def _half(bits: int, t: str):
  return np.uint32(bits << 16).view(np.float32) if t == "bf16" else to_value(bits, "f16")


def _half_bits(x, t: str) -> int:
  return int(np.float32(x).view(np.uint32)) >> 16 if t == "bf16" else to_bits(x, "f16")


def _pk_add_atomic(t: str):
  """DS/GLOBAL_PK_ADD_F16 / _BF16: each 16-bit half of memory plus the same half of the data, rounded once."""
  return lambda x, d: sum(_half_bits(_add_exact(_half((x >> k) & M16, t), _half((d >> k) & M16, t), t), t) << k for k in (0, 16))


def _float_atomic(fn, t: str):
  return lambda x, d: to_bits(fn(to_value(x, t), to_value(d, t)), t)


def atomic_fn(op: str, t: str):
  """fn(old, data) -> new of a one-operand atomic (the ISA's DS_/GLOBAL_/BUFFER_ATOMIC_* pseudocode), or None."""
  bits = 64 if t.endswith("64") else 32
  if t in ("f32", "f64"):
    return {"add": _float_atomic(lambda a, b: _add_exact(a, b, t), t), "min": _float_atomic(fmin_ieee, t),
            "max": _float_atomic(fmax_ieee, t), "min_num": _float_atomic(fmin_ieee, t), "max_num": _float_atomic(fmax_ieee, t),
            "swap": lambda x, d: d, "storexchg": lambda x, d: d}.get(op)
  if t in ("f16", "bf16"): return _pk_add_atomic(t) if op == "pk_add" else None
  ops = _ds_atomics(bits)
  ops.update({"cond_sub": lambda x, d: x - d if x >= d else x, "sub_clamp": lambda x, d: x - d if x >= d else 0,
              "csub": lambda x, d: x - d if x >= d else 0})
  op = {"storexchg": "xchg", "wrxchg": "xchg", "swap": "xchg", "smin": "min_i", "smax": "max_i", "umin": "min_u", "umax": "max_u"}.get(op, op)
  if op in ("min", "max"): op += "_i" if t[0] == "i" else "_u"
  return ops.get(op)


def atomic2_fn(op: str, t: str, gfx9_order: bool = False):
  """fn(old, data0, data1) -> new of the two-operand atomics: compare-and-store (data0 the value, data1 the compare
  value; GCN's ds_cmpst reads the compare value first), mask-or (clear data0's bits, set data1's), wrap."""
  if op in ("cmpstore", "cmpswap", "cmpst"):
    eq = (lambda x, c: to_value(x, t) == to_value(c, t)) if t[0] == "f" else (lambda x, c: x == c)   # .f32: +0 == -0, NaN never equal
    if op == "cmpst" or gfx9_order: return lambda x, d0, d1: d1 if eq(x, d0) else x
    return lambda x, d0, d1: d0 if eq(x, d1) else x
  if op == "mskor": return lambda x, d0, d1: (x & ~d0) | d1
  if op == "wrap": return lambda x, d0, d1: x - d0 if x >= d0 else x + d1
  return None


def _split_atomic(rest: str):
  """'add_rtn_f32' -> ('add', 'f32', True); 'min_num_f32' -> ('min_num', 'f32', False); x2 names get their 64-bit type."""
  parts = rest.split("_")
  rtn = "rtn" in parts
  parts = [p for p in parts if p != "rtn"]
  if parts[-1] == "x2": parts = parts[:-1] + ["b64"]
  if len(parts) == 1: parts.append("b32")   # gfx9: global_atomic_add
  return "_".join(parts[:-1]), parts[-1], rtn


def ds_atomic(name: str):
  """(bits, returns the old value?, fn(old, data) -> new) of a one-operand DS atomic, or None."""
  op, t, rtn = _split_atomic(name.removeprefix("ds_"))
  if t not in ("u32", "i32", "b32", "u64", "i64", "b64", "f32", "f64", "f16", "bf16") or op in ("load", "store", "read", "write"): return None
  fn = atomic_fn(op, t)
  return None if fn is None else (64 if t.endswith("64") else 32, rtn, fn)


def ds_atomic2(name: str):
  """(bits, returns?, fn(old, data0, data1)) of ds_cmpstore / ds_cmpst / ds_mskor / ds_wrap, or None."""
  op, t, rtn = _split_atomic(name.removeprefix("ds_"))
  fn = atomic2_fn(op, t) if t in ("b32", "b64", "f32", "f64") else None
  return None if fn is None else (64 if t.endswith("64") else 32, rtn or name == "ds_wrap_rtn_b32", fn)


DS_LOADS = {"u8": (8, False), "i8": (8, True), "u16": (16, False), "i16": (16, True), "b32": (32, False), "b64": (64, False),
            "b96": (96, False), "b128": (128, False)}
DS_STORES = {"b8": 8, "b16": 16, "b32": 32, "b64": 64, "b96": 96, "b128": 128}


def ds_access(name: str):
  """("load", bits, signed, d16 half or None) / ("store", bits, False, "hi" or None) of ds_load_* / ds_read_* /
  ds_store_* / ds_write_* (DS spells d16 as a suffix: ds_load_u8_d16_hi, ds_store_b16_d16_hi), or None."""
  half = "hi" if name.endswith("_d16_hi") else "lo" if name.endswith("_d16") else None
  core = name.removesuffix("_hi").removesuffix("_d16") if half else name
  for pre in ("ds_load_", "ds_read_"):
    if core.startswith(pre) and core[len(pre):] in DS_LOADS: return ("load", *DS_LOADS[core[len(pre):]], half)
  for pre in ("ds_store_", "ds_write_"):
    if core.startswith(pre) and core[len(pre):] in DS_STORES: return ("store", DS_STORES[core[len(pre):]], False, half)
  return None


# ---- SOP1 ops on EXEC: name -> (new EXEC from (s0, exec), D is the new EXEC (wrexec) rather than the old) -------------
_EXEC_FNS = {"and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e, "nand": lambda s, e: ~(s & e),
             "nor": lambda s, e: ~(s | e), "xnor": lambda s, e: ~(s ^ e), "and_not0": lambda s, e: ~s & e, "and_not1": lambda s, e: s & ~e,
             "or_not0": lambda s, e: ~s | e, "or_not1": lambda s, e: s | ~e,
             "andn1": lambda s, e: ~s & e, "andn2": lambda s, e: s & ~e, "orn1": lambda s, e: ~s | e, "orn2": lambda s, e: s | ~e}


def exec_op(name: str):
  """(bits, fn(s0, exec) -> new exec, writes the new EXEC to D?) of s_*_saveexec_* / s_*_wrexec_*, or None."""
  for kind in ("_saveexec_b", "_wrexec_b"):
    if kind in name:
      op, bits = name[2:].split(kind)
      fn = _EXEC_FNS.get(op)
      return None if fn is None else (int(bits), fn, kind == "_wrexec_b")
  return None


# ---- global / flat loads and stores: the width and extension a mnemonic names, on either spelling (gfx11+ and gfx9) -----
VMEM_LOADS = {"u8": (8, False), "i8": (8, True), "u16": (16, False), "i16": (16, True), "b32": (32, False), "b64": (64, False),
              "b96": (96, False), "b128": (128, False), "ubyte": (8, False), "sbyte": (8, True), "ushort": (16, False),
              "sshort": (16, True), "dword": (32, False), "dwordx2": (64, False), "dwordx3": (96, False), "dwordx4": (128, False)}
VMEM_STORES = {"b8": 8, "b16": 16, "b32": 32, "b64": 64, "b96": 96, "b128": 128, "byte": 8, "short": 16, "dword": 32,
               "dwordx2": 64, "dwordx3": 96, "dwordx4": 128}


# d16 forms: (bits, signed, half written) — the loaded value goes into the low or high 16 bits, the other half is kept
VMEM_D16_LOADS = {"d16_u8": (8, False, "lo"), "d16_i8": (8, True, "lo"), "d16_b16": (16, False, "lo"), "d16_hi_u8": (8, False, "hi"),
                  "d16_hi_i8": (8, True, "hi"), "d16_hi_b16": (16, False, "hi"), "ubyte_d16": (8, False, "lo"), "sbyte_d16": (8, True, "lo"),
                  "short_d16": (16, False, "lo"), "ubyte_d16_hi": (8, False, "hi"), "sbyte_d16_hi": (8, True, "hi"), "short_d16_hi": (16, False, "hi")}
VMEM_D16_STORES = {"d16_hi_b8": 8, "d16_hi_b16": 16, "byte_d16_hi": 8, "short_d16_hi": 16}   # the data from bits 31:16
SEGMENTS = ("global_", "flat_", "scratch_", "buffer_")


def vmem_access(name: str):
  """("load", bits, signed, d16 half or None) / ("store", bits, False, "hi" or None) of a global_/flat_/scratch_/buffer_
  load or store mnemonic on either spelling (gfx11+: b32, d16_hi_u8; gfx9: dword, ubyte_d16_hi), or None."""
  for seg in SEGMENTS:
    if not name.startswith(seg): continue
    rest = name[len(seg):]
    if rest.startswith("load_"):
      k = rest[5:]
      if k in VMEM_LOADS: return ("load", *VMEM_LOADS[k], None)
      if k in VMEM_D16_LOADS: return ("load", *VMEM_D16_LOADS[k])
    if rest.startswith("store_"):
      k = rest[6:]
      if k in VMEM_STORES: return ("store", VMEM_STORES[k], False, None)
      if k in VMEM_D16_STORES: return ("store", VMEM_D16_STORES[k], False, "hi")
  return None


def vmem_loaded(old: int, x: int, bits: int, signed: bool, half) -> int:
  """The VGPR after a load of `bits` bits x: extended to 32 bits, or (d16) extended to 16 bits into one half of old."""
  if half is None: return (sx(x, bits) & M32) if signed else x
  h = (sx(x, bits) if signed else x) & M16
  return (old & 0xffff0000) | h if half == "lo" else (old & M16) | (h << 16)


def vmem_atomic(name: str):
  """(bits, fn(old, data) -> new, data registers per element) of a global_/flat_/buffer_atomic_* on either spelling
  (add_u32 / add, add_u64 / add_x2, min_i32 / smin, cmpswap_b32 / cmpswap ...), or None. cmpswap's data is a pair:
  the value in the low half, the compare value in the high half."""
  for seg in ("global_atomic_", "flat_atomic_", "buffer_atomic_"):
    if name.startswith(seg):
      op, t, _ = _split_atomic(name[len(seg):])
      break
  else:
    return None
  bits = 64 if t.endswith("64") else 32
  if op == "cmpswap":
    fn2 = atomic2_fn(op, t)
    return bits, (lambda x, d: fn2(x, d & ((1 << bits) - 1), d >> bits)), 2
  fn = atomic_fn(op, t)
  return None if fn is None else (bits, fn, 1)


# gfx12's SALU float and 64-bit ops: the VALU definitions on one value per wave, SCC untouched
for _t in ("f32", "f16"):
  _n = lambda a, b, op: (op(a, b), None)
  SOP2_OPS.update({f"s_add_{_t}": (_t, (_t, _t), lambda a, b: (a + b, None)), f"s_sub_{_t}": (_t, (_t, _t), lambda a, b: (a - b, None)),
                   f"s_mul_{_t}": (_t, (_t, _t), lambda a, b: (a * b, None)),
                   f"s_min_num_{_t}": (_t, (_t, _t), lambda a, b: (fmin_ieee(a, b), None)),
                   f"s_max_num_{_t}": (_t, (_t, _t), lambda a, b: (fmax_ieee(a, b), None)),
                   f"s_minimum_{_t}": (_t, (_t, _t), lambda a, b: (fminimum(a, b), None)),
                   f"s_maximum_{_t}": (_t, (_t, _t), lambda a, b: (fmaximum(a, b), None))})
  SOP1_OPS.update({f"s_ceil_{_t}": (_t, (_t,), lambda a: (np.ceil(a), None)), f"s_floor_{_t}": (_t, (_t,), lambda a: (np.floor(a), None)),
                   f"s_trunc_{_t}": (_t, (_t,), lambda a: (np.trunc(a), None)), f"s_rndne_{_t}": (_t, (_t,), lambda a: (np.rint(a), None))})
SOP2_OPS.update({"s_add_nc_u64": ("u64", ("u64", "u64"), lambda a, b: ((a + b) & M64, None)),
                 "s_sub_nc_u64": ("u64", ("u64", "u64"), lambda a, b: ((a - b) & M64, None)),
                 "s_mul_u64": ("u64", ("u64", "u64"), lambda a, b: ((a * b) & M64, None))})
SOP1_OPS.update({name: (dt, types, (lambda fn: lambda *a: (fn(*a), None))(fn)) for name, (dt, types, fn) in
                 {"s_cvt_f32_i32": CVT_OPS["v_cvt_f32_i32"], "s_cvt_f32_u32": CVT_OPS["v_cvt_f32_u32"], "s_cvt_i32_f32": CVT_OPS["v_cvt_i32_f32"],
                  "s_cvt_u32_f32": CVT_OPS["v_cvt_u32_f32"], "s_cvt_f16_f32": CVT_OPS["v_cvt_f16_f32"],
                  "s_cvt_f32_f16": CVT_OPS["v_cvt_f32_f16"]}.items()})


# ---- transcendentals: the exact function, rounded; the test accepts results within ULP_BOUND of it ---------------------
# The bound: 1 ulp, what the RDNA3/RDNA4/CDNA3 guides and ROCm's device libraries (ocml's "1ulp sqrt" built on the raw
# v_sqrt_f32) give for v_rcp/rsq/sqrt/exp/log/sin/cos of f32 and f16. For f64 rcp/rsq/sqrt the guides allow more; the
# test holds them to 1 ulp too (stricter: the emulator promises that). Specials (NaN, ±inf, ±0 results) are exact.
def _sin_rev(x: Fraction) -> float:
  """sin(2*pi*x) with x reduced exactly: r = x - round(x) in [-1/2, 1/2], folded by sin(pi - y) = sin(y) into
  [-1/4, 1/4], so the one inexact step (the fraction to f64) keeps full relative precision."""
  r = x - round(x)
  a = abs(r)
  if a > Fraction(1, 4): a = Fraction(1, 2) - a
  return math.copysign(math.sin(2 * math.pi * float(a)), float(r)) if a else 0.0


def _trig(a, t: str, cos: bool):
  """V_SIN_F32 / V_COS_F32: D = sin(S0 * 2 * PI) / cos(...); an infinity or NaN gives NaN."""
  if not np.isfinite(a): return _f(t)(np.nan)
  x = Fraction(float(a)) + (Fraction(1, 4) if cos else 0)
  if a == 0 and not cos: return a   # sin(±0) = ±0
  return _f(t)(_sin_rev(x))


def _rsq64(a):
  """1/sqrt(a) for f64 to 40 digits (decimal), rounded once."""
  import decimal
  with decimal.localcontext() as ctx:
    ctx.prec = 40
    return np.float64(float(1 / decimal.Decimal(float(a)).sqrt()))


def _via(fn, t):
  """A function evaluated on f64 (exact inputs, 53-bit results: within 2**-29 ulp of f32 / f16) and rounded to t."""
  def g(a):
    with np.errstate(all="ignore"): return _f(t)(fn(np.float64(a)))
  return g


TRANSCENDENTAL_OPS: dict[str, tuple] = {}
for _t in ("f32", "f16"):
  TRANSCENDENTAL_OPS.update({
    f"v_rcp_{_t}": (_t, (_t,), _via(lambda x: 1.0 / x, _t)), f"v_rsq_{_t}": (_t, (_t,), _via(lambda x: 1.0 / np.sqrt(x), _t)),
    f"v_sqrt_{_t}": (_t, (_t,), _via(np.sqrt, _t)), f"v_exp_{_t}": (_t, (_t,), _via(np.exp2, _t)),
    f"v_log_{_t}": (_t, (_t,), _via(np.log2, _t)),
    f"v_sin_{_t}": (_t, (_t,), (lambda t: lambda a: _trig(a, t, False))(_t)),
    f"v_cos_{_t}": (_t, (_t,), (lambda t: lambda a: _trig(a, t, True))(_t))})
TRANSCENDENTAL_OPS.update({
  "v_rcp_iflag_f32": TRANSCENDENTAL_OPS["v_rcp_f32"],
  "v_rcp_f64": ("f64", ("f64",), lambda a: round_fraction(1 / Fraction(float(a)), "f64") if np.isfinite(a) and a != 0 else np.float64(1.0) / a),
  "v_sqrt_f64": ("f64", ("f64",), lambda a: np.sqrt(a)),   # IEEE sqrt is correctly rounded on the host
  "v_rsq_f64": ("f64", ("f64",), lambda a: _rsq64(a) if np.isfinite(a) and a > 0 else np.float64(1.0) / np.sqrt(a)),
})
ULP_BOUND = {name: 1 for name in TRANSCENDENTAL_OPS}
# sin/cos: the guides define the input domain as [-256, 256] revolutions; operands outside it are folded into it
DOMAIN = {name: 256.0 for name in TRANSCENDENTAL_OPS if name.startswith(("v_sin_", "v_cos_"))}
VALU_OPS.update(TRANSCENDENTAL_OPS)


def ulp_distance(a: int, b: int, t: str) -> int:
  """How many representable values of t lie between register bits a and b (ordered by value; -0 and +0 are one step)."""
  w = WIDTH[t]
  key = lambda x: (x & ((1 << (w - 1)) - 1)) * (-1 if x >> (w - 1) else 1)
  return abs(key(a) - key(b))


# ---- more VALU definitions (ISA pseudocode): 16-bit logic, leading-bit counts, rounding conversions, gfx9 names ------
def clz32(a: int) -> int:
  """V_CLZ_I32_U32 (gfx9 V_FFBH_U32): leading zeros counted from bit 31; -1 when no bit is set."""
  return -1 if a == 0 else 32 - a.bit_length()


def cls32(a: int) -> int:
  """V_CLS_I32 (gfx9 V_FFBH_I32): how many bits below bit 31 equal it before the first that differs; -1 when all do."""
  for i in range(1, 32):
    if (a >> (31 - i)) & 1 != a >> 31: return i
  return -1


def _unfused_mad(a, b, c, t):
  """V_MAD_F16 / V_MAC_F16 (gfx9, not fused): the product rounded to t, then the sum rounded to t (each step exact first)."""
  f = _f(t)
  if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(c)): return f(np.float64(f(np.float64(a) * np.float64(b))) + np.float64(c))
  p = f(np.float64(a) * np.float64(b))   # f16 x f16 is exact in f64; one rounding
  if not np.isfinite(p): return f(np.float64(p) + np.float64(c))
  return f(np.float64(p) + np.float64(c))   # two f16 values sum exactly in f64; one rounding


def _f32_to_int16(x, signed: bool) -> int:
  """f32_to_i16 / f32_to_u16 (V_CVT_PK_I16_F32): truncate toward zero, saturate, NaN 0."""
  return _cvt_int(x, signed, 16) & M16


VALU_OPS.update({
  "v_and_b16": ("u16", ("u16", "u16"), lambda a, b: a & b), "v_or_b16": ("u16", ("u16", "u16"), lambda a, b: a | b),
  "v_xor_b16": ("u16", ("u16", "u16"), lambda a, b: a ^ b), "v_not_b16": ("u16", ("u16",), lambda a: ~a),
  "v_mov_b16": ("u16", ("u16",), lambda a: a),
  "v_clz_i32_u32": (I, (U,), clz32), "v_ffbh_u32": (I, (U,), clz32), "v_cls_i32": (I, (U,), cls32), "v_ffbh_i32": (I, (U,), cls32),
  # V_CVT_NEAREST_I32_F32 (gfx9 V_CVT_RPI_I32_F32): f32_to_i32(floor(S0 + 0.5)), the sum rounded in f32 as the pseudocode reads
  "v_cvt_nearest_i32_f32": (I, (F32,), lambda a: _cvt_int(np.floor(np.float32(a + np.float32(0.5))), True)),
  "v_cvt_rpi_i32_f32": (I, (F32,), lambda a: _cvt_int(np.floor(np.float32(a + np.float32(0.5))), True)),
  "v_cvt_norm_i16_f16": ("i16", ("f16",), lambda a: sx(norm16(a, True), 16)), "v_cvt_norm_u16_f16": ("u16", ("f16",), lambda a: norm16(a, False)),
  "v_cvt_pk_norm_i16_f16": (U, ("f16", "f16"), lambda a, b: norm16(a, True) | (norm16(b, True) << 16)),
  "v_cvt_pk_norm_u16_f16": (U, ("f16", "f16"), lambda a, b: norm16(a, False) | (norm16(b, False) << 16)),
  "v_cvt_pknorm_i16_f16": (U, ("f16", "f16"), lambda a, b: norm16(a, True) | (norm16(b, True) << 16)),
  "v_cvt_pknorm_u16_f16": (U, ("f16", "f16"), lambda a, b: norm16(a, False) | (norm16(b, False) << 16)),
  "v_cvt_pknorm_i16_f32": (U, (F32, F32), lambda a, b: norm16(a, True) | (norm16(b, True) << 16)),
  "v_cvt_pknorm_u16_f32": (U, (F32, F32), lambda a, b: norm16(a, False) | (norm16(b, False) << 16)),
  "v_cvt_pkrtz_f16_f32": SPECIAL_FLOAT_OPS["v_cvt_pk_rtz_f16_f32"],
  "v_cvt_pk_i16_f32": (U, (F32, F32), lambda a, b: _f32_to_int16(a, True) | (_f32_to_int16(b, True) << 16)),
  "v_cvt_pk_u16_f32": (U, (F32, F32), lambda a, b: _f32_to_int16(a, False) | (_f32_to_int16(b, False) << 16)),
  "v_ldexp_f16": ("f16", ("f16", I), lambda a, e: ldexp(a, e, "f16")),
  "v_add_i32": (I, (I, I), lambda a, b: a + b), "v_sub_i32": (I, (I, I), lambda a, b: a - b),
  "v_add_i16": ("i16", ("i16", "i16"), lambda a, b: a + b), "v_sub_i16": ("i16", ("i16", "i16"), lambda a, b: a - b),
  "v_mul_legacy_f32": SPECIAL_FLOAT_OPS["v_mul_dx9_zero_f32"],
  "v_mad_legacy_u16": VALU_OPS["v_mad_u16"], "v_mad_legacy_i16": VALU_OPS["v_mad_i16"],
  "v_mad_f16": ("f16", ("f16",) * 3, lambda a, b, c: _unfused_mad(a, b, c, "f16")),
  "v_mac_f16": ("f16", ("f16",) * 3, lambda a, b, c: _unfused_mad(a, b, c, "f16")),
  "v_fmac_f64": ("f64", ("f64",) * 3, lambda a, b, c: fma_exact(a, b, c, "f64")),
})
SOP1_OPS.update({
  "s_clz_i32_u32": (I, (U,), lambda a: (clz32(a), None)), "s_flbit_i32_b32": (I, (U,), lambda a: (clz32(a), None)),
  "s_cls_i32": (I, (U,), lambda a: (cls32(a), None)), "s_flbit_i32": (I, (U,), lambda a: (cls32(a), None)),
  "s_clz_i32_u64": (I, ("u64",), lambda a: (-1 if a == 0 else 64 - a.bit_length(), None)),
  "s_flbit_i32_b64": (I, ("u64",), lambda a: (-1 if a == 0 else 64 - a.bit_length(), None)),
  "s_cls_i32_i64": (I, ("u64",), lambda a: (next((i for i in range(1, 64) if (a >> (63 - i)) & 1 != a >> 63), -1), None)),
  "s_flbit_i32_i64": (I, ("u64",), lambda a: (next((i for i in range(1, 64) if (a >> (63 - i)) & 1 != a >> 63), -1), None)),
})


# ---- 8-bit floats: OCP (gfx12: E4M3FN, E5M2) and FNUZ (gfx942: E4M3FNUZ, E5M2FNUZ, ROCm's amd_hip_fp8.h) -------------
def fp8_value(b: int, kind: str, fnuz: bool) -> np.float32:
  """One 8-bit float's value, from the format's definition: sign, exponent (bias 7/15, FNUZ 8/16), 3/2 mantissa bits,
  subnormals at exponent 0. OCP E4M3FN: only S.1111.111 is NaN, no infinities; E5M2: IEEE-style infinities and NaNs.
  FNUZ: 0x80 (negative zero's pattern) is the only NaN; no infinities."""
  ebits, mbits = (4, 3) if kind == "fp8" else (5, 2)
  bias = (7 if kind == "fp8" else 15) + (1 if fnuz else 0)
  s, e, m = b >> 7 & 1, (b >> mbits) & ((1 << ebits) - 1), b & ((1 << mbits) - 1)
  if fnuz and b == 0x80: return np.float32(np.nan)
  if not fnuz and kind == "fp8" and e == 15 and m == 7: return np.float32(np.nan)
  if not fnuz and kind == "bf8" and e == 31: return np.float32(np.inf if m == 0 else np.nan) * (-1 if s else 1)
  x = Fraction(m, 1 << mbits) * Fraction(2) ** (1 - bias) if e == 0 else (1 + Fraction(m, 1 << mbits)) * Fraction(2) ** (e - bias)
  return np.float32(math.copysign(float(x), -1.0 if s else 1.0))


def fp8_ops(fnuz: bool) -> dict[str, tuple]:
  """v_cvt_f32_fp8/bf8 (byte 0 of S0) and v_cvt_pk_f32_fp8/bf8 (bytes 0 and 1 into a VGPR pair)."""
  out = {}
  for k in ("fp8", "bf8"):
    out[f"v_cvt_f32_{k}"] = (F32, (U,), (lambda k: lambda a: fp8_value(a & 0xff, k, fnuz))(k))
    out[f"v_cvt_pk_f32_{k}"] = ("f32x2", (U,), (lambda k: lambda a: to_bits(fp8_value(a & 0xff, k, fnuz), F32) |
                                             (to_bits(fp8_value((a >> 8) & 0xff, k, fnuz), F32) << 32))(k))
  return out


WIDTH["f32x2"] = 64   # two f32 results in a VGPR pair (compared as two f32 values)
VALU_OPS.update(fp8_ops(False))
ARCH_VALU_OPS = {"gfx942": fp8_ops(True)}   # where an arch defines an op differently


def valu_op(arch: str, name: str):
  return ARCH_VALU_OPS.get(arch, {}).get(name) or VALU_OPS[name]


# V_FMA_DX9_ZERO_F32 / V_FMAC_DX9_ZERO_F32 (RDNA3 ISA): DX9 rules, a zero in either factor makes the product +0, so the
# result is S2 itself; else an ordinary fused multiply-add
VALU_OPS.update({n: (F32, (F32,) * 3, lambda a, b, c: c if a == 0 or b == 0 else fma_exact(a, b, c, F32))
                 for n in ("v_fma_dx9_zero_f32", "v_fmac_dx9_zero_f32")})
# gfx12 SALU conversions: S_CVT_HI_F32_F16 reads the high half; S_CVT_PK_RTZ_F16_F32 packs two f32 rounded toward zero
SOP1_OPS["s_cvt_hi_f32_f16"] = (F32, (U,), lambda a: (np.float32(to_value(a >> 16, "f16")), None))
SOP2_OPS["s_cvt_pk_rtz_f16_f32"] = (U, (F32, F32), lambda a, b: (to_bits(f16_toward_zero(a), "f16") | (to_bits(f16_toward_zero(b), "f16") << 16), None))


# ---- cube map, lighting multiply, quad SADs: the RDNA3 ISA pseudocode, branch for branch ----------------------------
def _cube(x, y, z, what: str):
  """V_CUBEID/SC/TC/MA_F32: the major axis is z when |z| >= |x| and |z| >= |y|, else y when |y| >= |x|, else x."""
  f = np.float32
  if abs(z) >= abs(x) and abs(z) >= abs(y):
    return {"id": f(5.0) if z < 0 else f(4.0), "sc": -x if z < 0 else x, "tc": -y, "ma": z * f(2.0)}[what]
  if abs(y) >= abs(x):
    return {"id": f(3.0) if y < 0 else f(2.0), "sc": x, "tc": -z if y < 0 else z, "ma": y * f(2.0)}[what]
  return {"id": f(1.0) if x < 0 else f(0.0), "sc": z if x < 0 else -z, "tc": -y, "ma": x * f(2.0)}[what]


def _mullit(a, b, c):
  """V_MULLIT_F32: -MAX_FLOAT when S1 is -MAX_FLOAT, -inf or NaN, or S2 <= 0 or NaN; else S0 * S1."""
  mx = np.float32(np.finfo(np.float32).max)
  if b == -mx or b == -np.inf or np.isnan(b) or c <= 0 or np.isnan(c): return -mx
  return a * b


def _sad_u8(x: int, y: int, acc: int, masked: bool) -> int:
  """v_sad_u8 / v_msad_u8 on 4 bytes: acc + the absolute byte differences (msad: bytes where y is 0 are skipped)."""
  return acc + sum(0 if masked and b == 0 else abs(a - b) for a, b in zip(_bytes(x & M32), _bytes(y)))


def _qsad(s0: int, s1: int, s2: int, masked: bool) -> int:
  """V_QSAD_PK_U16_U8 / V_MQSAD_PK_U16_U8: four SADs of S1 against S0's byte windows 0, 1, 2, 3, each accumulated on a
  16-bit field of S2 and truncated to 16 bits."""
  return sum((_sad_u8(s0 >> (8 * k), s1, (s2 >> (16 * k)) & M16, masked) & M16) << (16 * k) for k in range(4))


VALU_OPS.update({f"v_cube{w}_f32": (F32, (F32,) * 3, (lambda w: lambda x, y, z: _cube(x, y, z, w))(w)) for w in ("id", "sc", "tc", "ma")})
VALU_OPS.update({"v_mullit_f32": (F32, (F32,) * 3, _mullit),
                 "v_qsad_pk_u16_u8": ("u64", ("u64", U, "u64"), lambda a, b, c: _qsad(a, b, c, False)),
                 "v_mqsad_pk_u16_u8": ("u64", ("u64", U, "u64"), lambda a, b, c: _qsad(a, b, c, True))})


# V_DOT4_I32_IU8 / V_DOT8_I32_IU4 (RDNA3): NEG[0] / NEG[1] make A / B signed; without them both are unsigned, S2 is i32
DOT_OPS.update({
  "v_dot4_i32_iu8": lambda a, b, c: sum(x * y for x, y in zip(_lanes_of(a, 8, 4, False), _lanes_of(b, 8, 4, False))) + sx(c, 32),
  "v_dot8_i32_iu4": lambda a, b, c: sum(x * y for x, y in zip(_lanes_of(a, 4, 8, False), _lanes_of(b, 4, 8, False))) + sx(c, 32),
})
# gfx9's accumulating VOP2 dots (D = D + dot(S0, S1), signed): as VALU ops whose third source is the destination
for _n, _w, _k in (("v_dot2c_i32_i16", 16, 2), ("v_dot4c_i32_i8", 8, 4), ("v_dot8c_i32_i4", 4, 8)):
  VALU_OPS[_n] = (I, (U, U, I), (lambda w, k: lambda a, b, c: sum(x * y for x, y in zip(_lanes_of(a, w, k, True), _lanes_of(b, w, k, True))) + c)(_w, _k))


# ---- float dot of packed f16 into f32: V_DOT2ACC_F32_F16 (RDNA3/4, VOP2 and VOPD) / V_DOT2C_F32_F16 (CDNA3) --------------
# The RDNA3 ISA's pseudocode: tmp = 32'F(S0.lo.f16) * 32'F(S1.lo.f16); tmp += 32'F(S0.hi.f16) * 32'F(S1.hi.f16);
# tmp += S2.f; D0.f = tmp -- read literally, f32 arithmetic rounding at each +=. LLVM folds the fused chain
# fma(a.lo*b.lo, fma(a.hi*b.hi, c)) into the same instruction under fp-contract, a single-rounding reading, and its
# SIISelLowering notes that the f32 denormals are flushed whatever the mode. No source settles the rounding, so the
# reference is the pseudocode as written and the operands (dot2_operands) keep to where every reading agrees.
def dot2_f32_f16(a: int, b: int, c):
  """The pseudocode, f32 step by step (products of f16 values are exact in f32)."""
  h = lambda x, k: np.float32(to_value((x >> (16 * k)) & M16, "f16"))
  tmp = h(a, 0) * h(b, 0)
  tmp = np.float32(tmp + h(a, 1) * h(b, 1))
  return np.float32(tmp + np.float32(c))


_F16_NORMAL_STEPS = [0x3c00, 0x3e00, 0x3800, 0x4000, 0x4200, 0x3a00, 0x6400, 0x7bff, 0x0400, 0x1000, 0x5640, 0x4d00]   # 1, 1.5, 0.5, ...


def dot2_f16_f16(a: int, b: int, c):
  """V_DOT2_F16_F16 (RDNA3): tmp = S0.lo.f16 * S1.lo.f16; tmp += S0.hi.f16 * S1.hi.f16; tmp += S2.f16; D0.f16 = tmp --
  f16 step by step, as written (the same reading question as dot2_f32_f16)."""
  h = lambda x, k: to_value((x >> (16 * k)) & M16, "f16")
  tmp = np.float16(h(a, 0) * h(b, 0))
  tmp = np.float16(tmp + np.float16(h(a, 1) * h(b, 1)))
  return np.float16(tmp + np.float16(c))


def _exact_normal(x: Fraction, t: str) -> bool:
  """x is 0 or a normal value of float type t exactly (no rounding and no denormal: the readings of the dot differ there)."""
  if x == 0: return True
  f, info = float(x), np.finfo(FLOAT[t][0])
  return Fraction(f) == x and float(info.tiny) <= abs(f) <= float(info.max) and Fraction(float(FLOAT[t][0](f))) == x


# S2 values (register bits) by accumulator type: zeros, +-1, powers of two, +-inf, a quiet NaN, a few integers
_DOT2_ACC = {"f32": [0, 0x80000000, 0x3f800000, 0xbf800000, 0x4b800000, 0xc0400000, 0x30800000, 0x7f800000, 0xff800000,
                     0x7fc00000, 0x4f000000, 0x3e000000],
             "f16": [0, 0x8000, 0x3c00, 0xbc00, 0x6400, 0xc200, 0x2000, 0x7c00, 0xfc00, 0x7e00, 0x7800, 0x3000]}


@functools.lru_cache(maxsize=None)
def dot2_operands(count: int, seed: int = 0, acc: str = "f32") -> tuple[tuple[int, int, int], ...]:
  """`count` (S0, S1, S2) register tuples for the f16 dots (into an `acc` accumulator) on which the pseudocode's
  step-by-step rounding and a single rounding give the same bits: finite operands whose products and partial sums, in
  any order, are exact normal `acc` values (or zeros), no denormal operand; plus infinities and NaNs (IEEE's rules for
  them do not depend on the order), and cancellations to exact zeros. S0 is the same in each group of 8 lanes, so a
  DPP16 quad_perm or DPP8 source lane (or the 0 an inactive one gives) keeps the lane in that domain."""
  rng = np.random.default_rng(seed)
  pos = _F16_NORMAL_STEPS + [0, 0x7c00, 0x7e00]                 # +0, +inf, quiet NaN among the f16 halves
  halves = pos + [x | 0x8000 for x in pos]
  value = lambda bits, t: Fraction(float(to_value(bits, t)))
  pick = lambda: halves[int(rng.integers(0, len(halves)))]
  def in_domain(a: int, b: int, c: int) -> bool:
    hs = [(a >> 16 * k) & M16 for k in (0, 1)] + [(b >> 16 * k) & M16 for k in (0, 1)]
    finite = lambda *xs: all(np.isfinite(to_value(x, t)) for x, t in xs)
    # the finite terms (products of finite halves, S2); with an infinity or NaN elsewhere these must still not round
    terms = [value(hs[k], "f16") * value(hs[k + 2], "f16") for k in (0, 1) if finite((hs[k], "f16"), (hs[k + 2], "f16"))]
    terms += [value(c, acc)] if finite((c, acc)) else []
    return all(_exact_normal(sum(sub), acc) for n in range(1, len(terms) + 1) for sub in itertools.combinations(terms, n))
  def random_acc() -> int:
    x = float(rng.integers(-4096, 4096)) * 2.0 ** int(rng.integers(-20, 20)) if acc == "f32" else \
      float(rng.integers(-64, 64)) * 2.0 ** int(rng.integers(-6, 6))
    return to_bits(FLOAT[acc][0](x), acc)
  out: list[tuple[int, int, int]] = []
  while len(out) < count:
    lo = pick()
    a = lo | ((lo ^ 0x8000 if rng.random() < 0.3 else pick()) << 16)   # a.hi = -a.lo: with b.hi = b.lo, an exact zero
    group: list[tuple[int, int, int]] = []
    for _ in range(4000):   # S1, S2 for the group's 8 lanes (an S0 too large for any of them is drawn again)
      b = pick() | (pick() << 16)
      if rng.random() < 0.3: b = (b & 0xffff) | ((b & 0xffff) << 16)
      c = _DOT2_ACC[acc][int(rng.integers(0, len(_DOT2_ACC[acc])))] if rng.random() < 0.7 else random_acc()
      if in_domain(a, b, c): group.append((a, b, c))
      if len(group) == 8: break
    if len(group) == 8: out += group
  return tuple(out[:count])


VALU_OPS["v_dot2acc_f32_f16"] = (F32, (U, U, F32), dot2_f32_f16)
VALU_OPS["v_dot2c_f32_f16"] = VALU_OPS["v_dot2acc_f32_f16"]   # CDNA3's name for it (VOP2, D = D + dot)
OPERANDS = {"v_dot2acc_f32_f16": dot2_operands, "v_dot2c_f32_f16": dot2_operands}   # ops whose operands keep to a domain
FLOAT_DOT_OPS = {"v_dot2_f32_f16": dot2_f32_f16}   # VOP3P, on dot2_operands: fn(S0 bits, S1 bits, S2 value)


def operands_for(name: str, types: tuple[str, ...], count: int) -> tuple[tuple[int, ...], ...]:
  """The operand tuples an opcode's test runs: its domain's (OPERANDS) or the edge values and random bits of its types."""
  return OPERANDS[name](count) if name in OPERANDS else operand_tuples(types, count)


# ---- gfx90a+ packed f32 on VGPR pairs (CDNA3 V_PK_ADD/MUL/FMA_F32, V_PK_MOV_B32): each dword of D is the f32 op on the
# dwords of the sources that op_sel (low dword) / op_sel_hi (high dword) pick, neg_lo / neg_hi negating them; LLVM
# selects fadd/fmul/fma on <2 x float> to them (VOP3PInstructions.td, gfx90a+). V_PK_MOV_B32: D.lo = S0[op_sel[0]],
# D.hi = S1[op_sel[1]] (LLVM's SIInstrInfo expands 64-bit VGPR copies with it). name -> (sources, fn on f32 values)
PK_F32_OPS = {"v_pk_add_f32": (2, lambda a, b: a + b), "v_pk_mul_f32": (2, lambda a, b: a * b),
              "v_pk_fma_f32": (3, lambda a, b, c: fma_exact(a, b, c, F32)), "v_pk_mov_b32": (2, None)}
