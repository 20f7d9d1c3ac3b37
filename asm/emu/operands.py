"""Operand decode: a source field (9-bit encoding) becomes a reader closure `read(st, w)`, a destination a writer.

Readers return register bits, uint32 (uint64 for 64-bit operands), shaped to broadcast over (waves, lanes):
(k, lanes) for a VGPR, (k, 1) for an SGPR, a 0-d array for a constant. Scalar readers return (k,).
"""
from __future__ import annotations
from typing import Callable

import numpy as np

from hcq.asm.emu.wave import EXEC, NULL, VCC, Waves

u32, u64 = np.uint32, np.uint64
Reader = Callable[[Waves, object], np.ndarray]

# aperture bases (high dword) that flat addresses use for LDS and scratch; far above any buffer the map holds
SHARED_APERTURE_HI, PRIVATE_APERTURE_HI = 0x10000000, 0x20000000
SHARED_BASE, SHARED_LIMIT, PRIVATE_BASE, PRIVATE_LIMIT = 235, 236, 237, 238
VCCZ, EXECZ, SCC, LITERAL = 251, 252, 253, 255
_FLOAT_CONSTS = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0}
_INV_2PI = {16: 0x3118, 32: 0x3e22f983, 64: 0x3fc45f306dc9c882}


class OperandError(ValueError):
  """An operand encoding the emulator does not support in this position (DPP, LDS direct, ...)."""


def constant_bits(enc: int, bits: int, fp: bool, literal: int | None) -> int | None:
  """The value of a constant operand encoding as `bits`-wide register bits, or None if `enc` is not a constant."""
  m = (1 << bits) - 1
  if 128 <= enc <= 192: return enc - 128
  if 193 <= enc <= 208: return (192 - enc) & m
  if enc in _FLOAT_CONSTS:
    v = _FLOAT_CONSTS[enc]
    if bits == 16: return int(np.array(v, np.float16).view(np.uint16))
    if bits == 64: return int(np.array(v, np.float64).view(np.uint64))
    return int(np.array(v, np.float32).view(np.uint32))
  if enc == 248: return _INV_2PI[bits] if bits in _INV_2PI else _INV_2PI[32]
  if enc == SHARED_BASE: return SHARED_APERTURE_HI << 32 if bits == 64 else SHARED_APERTURE_HI
  if enc == PRIVATE_BASE: return PRIVATE_APERTURE_HI << 32 if bits == 64 else PRIVATE_APERTURE_HI
  if enc in (SHARED_LIMIT, PRIVATE_LIMIT):
    hi = SHARED_APERTURE_HI if enc == SHARED_LIMIT else PRIVATE_APERTURE_HI
    return ((hi << 32) | 0xffffffff) if bits == 64 else hi
  if enc == LITERAL:
    if literal is None: raise OperandError("literal operand with no literal dword")
    if bits == 64: return (literal << 32) if fp else literal  # an f64 literal is the high dword (LLVM's encoding)
    return literal & m
  return None


DPP_SOURCE = 512   # pseudo encoding: the lane-permuted src0 a DPP instruction prepared in Waves.dpp
SDWA_SOURCE1 = 513   # pseudo encoding: SDWA's selected src1 (Waves.dpp1); src0 goes through DPP_SOURCE


def vector_reader(enc: int, bits: int = 32, fp: bool = False, literal: int | None = None) -> Reader:
  """A VALU source: VGPR, SGPR (broadcast over lanes) or constant."""
  if enc == DPP_SOURCE and bits == 64:   # gfx942's DP-ALU DPP: the permuted pair (Waves.dpp, Waves.dpp1)
    return lambda st, w: np.stack((st.dpp[w], st.dpp1[w]), axis=-1).view(u64)[..., 0]
  if enc == DPP_SOURCE: return lambda st, w: st.dpp[w]
  if enc == SDWA_SOURCE1: return lambda st, w: st.dpp1[w]
  if enc >= 256:
    r = enc - 256
    if bits == 64:   # interleave the pair and view it as uint64 (little-endian): one pass instead of four
      return lambda st, w: np.stack((st.v[r][w], st.v[r + 1][w]), axis=-1).view(u64)[..., 0]
    return lambda st, w: st.v[r][w]
  sc = scalar_reader(enc, bits, fp, literal)
  const = constant_bits(enc, bits, fp, literal)
  if const is not None:
    c = np.array(const, u64 if bits == 64 else u32)
    return lambda st, w: c
  return lambda st, w: sc(st, w)[:, None]


def scalar_reader(enc: int, bits: int = 32, fp: bool = False, literal: int | None = None) -> Reader:
  """An SALU source (also the SGPR sources of VALU ops): (k,) register bits per wave."""
  const = constant_bits(enc, bits, fp, literal)
  if const is not None:
    c = np.array(const, u64 if bits == 64 else u32)
    return lambda st, w: np.broadcast_to(c, (_k(st, w),))
  if enc == NULL: return lambda st, w: np.zeros(_k(st, w), u64 if bits == 64 else u32)
  if enc == SCC:
    return lambda st, w: st.scc[w].astype(u64 if bits == 64 else u32)
  if enc == VCCZ: return lambda st, w: (st.mask(VCC, w) == 0).astype(u64 if bits == 64 else u32)
  if enc == EXECZ: return lambda st, w: (st.mask(EXEC, w) == 0).astype(u64 if bits == 64 else u32)
  if enc <= 127:
    if bits == 64: return lambda st, w: st.s[enc, w].astype(u64) | (st.s[enc + 1, w].astype(u64) << u64(32))
    return lambda st, w: st.s[enc, w]
  if enc >= 256:
    raise OperandError(f"VGPR v{enc - 256} where only a scalar operand is allowed")
  raise OperandError(f"source operand encoding {enc} (DPP/SDWA/LDS-direct) is not supported")


def _k(st: Waves, w) -> int:
  return st.count if isinstance(w, slice) else len(w)


def scalar_writer(enc: int, bits: int = 32) -> Callable[[Waves, object, np.ndarray], None]:
  """An SALU destination: writes (k,) values (uint64 split over a register pair for 64-bit)."""
  if enc == NULL: return lambda st, w, x: None
  if enc > 127: raise OperandError(f"scalar destination encoding {enc} is not writable")
  touches_exec = enc >= EXEC - (1 if bits == 64 else 0)
  if bits == 64:
    def write64(st: Waves, w, x: np.ndarray) -> None:
      x = np.asarray(x).astype(u64, copy=False)
      st.s[enc, w] = (x & u64(0xffffffff)).astype(u32)
      st.s[enc + 1, w] = (x >> u64(32)).astype(u32)
      if touches_exec: st.exec_written()
    return write64
  def write32(st: Waves, w, x: np.ndarray) -> None:
    st.s[enc, w] = np.asarray(x).astype(u32, copy=False)
    if touches_exec: st.exec_written()
  return write32


def write_vgpr(st: Waves, r: int, w, x: np.ndarray, ex: np.ndarray) -> None:
  """Write (k, lanes) bits to VGPR r on the lanes whose EXEC bit is set."""
  x = np.asarray(x).astype(u32, copy=False)
  if isinstance(w, slice):
    if st.exec_full(w, ex): st.v[r][...] = x
    else: np.copyto(st.v[r], np.broadcast_to(x, st.v[r].shape), where=ex)
  else:
    cur = st.v[r][w]
    st.v[r][w] = np.where(ex, x, cur)


def write_vgpr64(st: Waves, r: int, w, x: np.ndarray, ex: np.ndarray) -> None:
  """Write (k, lanes) 64-bit values to the pair r, r+1: the low and high dwords are strided views of x."""
  x = np.ascontiguousarray(np.broadcast_to(np.asarray(x).astype(u64, copy=False), ex.shape))
  halves = x.view(u32).reshape(ex.shape + (2,))
  write_vgpr(st, r, w, halves[..., 0], ex)
  write_vgpr(st, r + 1, w, halves[..., 1], ex)
