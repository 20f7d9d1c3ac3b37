"""gfx11 unified buffer formats (the 7-bit FORMAT of a buffer resource or an MTBUF instruction): element layout and the
conversions formatted loads and stores apply between memory and 32-bit (or d16: 16-bit) register values; gfx9's
DATA_FORMAT/NUM_FORMAT pairs map onto them by name.

A format name lists its components from the most significant bits down (AMD's naming: 2_10_10_10 has X in bits 9:0
and W in bits 31:30), then the numeric format. tests/test_emu_formats.py checks the numbering against llvm-mc-19's
`format:[BUF_FMT_...]` spelling.
"""
from __future__ import annotations
from dataclasses import dataclass

import numpy as np

u16, u32, u64, i64, f32, f64 = np.uint16, np.uint32, np.uint64, np.int64, np.float32, np.float64

# gfx11 BUF_FMT numbers 0..63 (64..127 are reserved)
NAMES = ["INVALID", "8_UNORM", "8_SNORM", "8_USCALED", "8_SSCALED", "8_UINT", "8_SINT", "16_UNORM", "16_SNORM", "16_USCALED",
         "16_SSCALED", "16_UINT", "16_SINT", "16_FLOAT", "8_8_UNORM", "8_8_SNORM", "8_8_USCALED", "8_8_SSCALED", "8_8_UINT", "8_8_SINT",
         "32_UINT", "32_SINT", "32_FLOAT", "16_16_UNORM", "16_16_SNORM", "16_16_USCALED", "16_16_SSCALED", "16_16_UINT", "16_16_SINT",
         "16_16_FLOAT", "10_11_11_FLOAT", "11_11_10_FLOAT", "10_10_10_2_UNORM", "10_10_10_2_SNORM", "10_10_10_2_UINT", "10_10_10_2_SINT",
         "2_10_10_10_UNORM", "2_10_10_10_SNORM", "2_10_10_10_USCALED", "2_10_10_10_SSCALED", "2_10_10_10_UINT", "2_10_10_10_SINT",
         "8_8_8_8_UNORM", "8_8_8_8_SNORM", "8_8_8_8_USCALED", "8_8_8_8_SSCALED", "8_8_8_8_UINT", "8_8_8_8_SINT", "32_32_UINT",
         "32_32_SINT", "32_32_FLOAT", "16_16_16_16_UNORM", "16_16_16_16_SNORM", "16_16_16_16_USCALED", "16_16_16_16_SSCALED",
         "16_16_16_16_UINT", "16_16_16_16_SINT", "16_16_16_16_FLOAT", "32_32_32_UINT", "32_32_32_SINT", "32_32_32_FLOAT",
         "32_32_32_32_UINT", "32_32_32_32_SINT", "32_32_32_32_FLOAT"]


@dataclass(frozen=True)
class BufferFormat:
  name: str
  bits: tuple[int, ...]   # component widths, X first
  kind: str               # UNORM SNORM USCALED SSCALED UINT SINT FLOAT

  @property
  def size(self) -> int: return sum(self.bits) // 8

  @property
  def integer(self) -> bool: return self.kind in ("UINT", "SINT")


def buffer_format(number: int) -> BufferFormat:
  """The format with this BUF_FMT number; ValueError for INVALID and the reserved numbers."""
  if not 0 < number < len(NAMES): raise ValueError(f"buffer format {number} is {'INVALID' if number == 0 else 'reserved'} on gfx11 (valid: 1-{len(NAMES) - 1})")
  *widths, kind = NAMES[number].split("_")
  return BufferFormat(NAMES[number], tuple(int(b) for b in reversed(widths)), kind)


# gfx9 (GCN) spells a format as two fields: DATA_FORMAT (the layout, 4 bits) and NUM_FORMAT (the conversion, 3 bits).
# An MTBUF instruction's 7-bit format is DATA_FORMAT | NUM_FORMAT << 4; a V#'s dword 3 holds them at 18:15 and 14:12.
# tests/test_emu_gfx942.py checks both lists against llvm-mc-19's gfx942 spelling.
GFX9_DATA = ["INVALID", "8", "16", "8_8", "32", "16_16", "10_11_11", "11_11_10", "10_10_10_2", "2_10_10_10", "8_8_8_8", "32_32",
             "16_16_16_16", "32_32_32", "32_32_32_32", "RESERVED_15"]
GFX9_NUM = ["UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT", "RESERVED_6", "FLOAT"]


def gfx9_format(field: int) -> int:
  """The gfx11 BUF_FMT number of a gfx9 DATA_FORMAT | NUM_FORMAT << 4 pair: the same layout and conversion under
  gfx11's name. ValueError for INVALID/reserved fields and for pairs gfx11 has no format for (32_UNORM, 8_FLOAT, ...)."""
  data, num = GFX9_DATA[field & 15], GFX9_NUM[(field >> 4) & 7]
  if f"{data}_{num}" not in NAMES:
    raise ValueError(f"gfx9 buffer format {field} (DATA_FORMAT_{data}, NUM_FORMAT_{num}) is not modelled: the emulator runs "
                     f"the pairs gfx11 has a format for ({', '.join(NAMES[1:4])}, ...)")
  return NAMES.index(f"{data}_{num}")


# ---- small unsigned floats (10_11_11 / 11_11_10): 5-bit exponent, 6- or 5-bit mantissa, no sign --------------------
def _ufloat_to_f32(x: np.ndarray, mbits: int) -> np.ndarray:
  e, m = (x >> mbits) & 31, x & ((1 << mbits) - 1)
  v = np.where(e == 0, np.ldexp(m.astype(f64), -14 - mbits), np.ldexp((m | (1 << mbits)).astype(f64), e.astype(np.int32) - 15 - mbits))
  v = np.where(e == 31, np.where(m == 0, np.inf, np.nan), v)
  return v.astype(f32)


def _f32_to_ufloat(x: np.ndarray, mbits: int) -> np.ndarray:
  """Round to nearest even; negatives (and -0) go to 0, NaN stays NaN, overflow to +inf (as f32 -> f16 does)."""
  x = np.asarray(x, f32)
  h = np.maximum(x, f32(0)).astype(np.float16)   # f16 has the same exponent range; only the mantissa is shorter
  b = h.view(u16).astype(u32)
  shift = 10 - mbits
  r = (b + ((1 << (shift - 1)) - 1) + ((b >> shift) & 1)) >> shift   # RNE on the dropped mantissa bits
  r = np.where(np.isnan(x), u32((31 << mbits) | 1), np.minimum(r, u32(31 << mbits)))
  return np.where(x > 0, r, np.where(np.isnan(x), r, u32(0))).astype(u32)


# ---- loads ---------------------------------------------------------------------------------------------------------
def unpack(fmt: BufferFormat, raw: np.ndarray) -> list[np.ndarray]:
  """(n, size) uint8 records -> the raw unsigned bits of each component (uint64 arrays)."""
  if all(b == 32 for b in fmt.bits): return [raw[:, 4 * i:4 * i + 4].copy().view(u32)[:, 0].astype(u64) for i in range(len(fmt.bits))]
  word = np.zeros(raw.shape[0], u64)
  for i in range(fmt.size): word |= raw[:, i].astype(u64) << u64(8 * i)
  out, off = [], 0
  for b in fmt.bits:
    out.append((word >> u64(off)) & u64((1 << b) - 1)); off += b
  return out


def _signed(c: np.ndarray, b: int) -> np.ndarray:
  c = c.astype(i64)
  return np.where(c >= 1 << (b - 1), c - (1 << b), c)


def to_value(fmt: BufferFormat, c: np.ndarray, b: int, d16: bool) -> np.ndarray:
  """One component's raw bits -> register bits: a 32-bit float or integer, or (d16) a 16-bit half float or integer."""
  k = fmt.kind
  if k == "UINT": return (c & u64(0xffff) if d16 else c).astype(u32)
  if k == "SINT": return (_signed(c, b) & (0xffff if d16 else 0xffffffff)).astype(u32)
  if k == "UNORM": v = c.astype(f64) / ((1 << b) - 1)
  elif k == "SNORM": v = np.maximum(_signed(c, b).astype(f64) / ((1 << (b - 1)) - 1), -1.0)
  elif k == "USCALED": v = c.astype(f64)
  elif k == "SSCALED": v = _signed(c, b).astype(f64)
  elif b == 32: v = c.astype(u32).view(f32)
  elif b == 16: v = c.astype(u16).view(np.float16)
  else: v = _ufloat_to_f32(c.astype(u32), b - 5)
  if d16: return np.asarray(v).astype(np.float16).view(u16).astype(u32)   # f64 -> f16 rounds once
  return v.astype(f32).view(u32)


def default(fmt: BufferFormat, component: int, d16: bool) -> int:
  """What a load returns for a component the format lacks: 0, and 1 (1.0 for non-integer formats) for W."""
  if component < 3: return 0
  if fmt.integer: return 1
  return 0x3c00 if d16 else 0x3f800000


# ---- stores --------------------------------------------------------------------------------------------------------
def from_value(fmt: BufferFormat, x: np.ndarray, b: int, d16: bool) -> np.ndarray:
  """Register bits (uint32; d16: the low 16 bits) -> one component's raw bits (uint64). Integers keep their low bits;
  normalized and scaled formats clamp to the range and round to nearest even; NaN stores 0."""
  k = fmt.kind
  if k in ("UINT", "SINT"):
    v = x.astype(u64)
    if d16 and k == "SINT": v = (_signed(v & u64(0xffff), 16) & 0xffffffff).astype(u64)
    return v & u64((1 << b) - 1)
  fx = (x & u32(0xffff)).astype(u16).view(np.float16).astype(f64) if d16 else x.astype(u32).view(f32).astype(f64)
  if k == "FLOAT":
    if b == 32: return fx.astype(f32).view(u32).astype(u64)
    if b == 16: return fx.astype(f32).astype(np.float16).view(u16).astype(u64)
    return _f32_to_ufloat(fx.astype(f32), b - 5).astype(u64)
  fx = np.nan_to_num(fx, nan=0.0)
  if k == "UNORM": v = np.rint(np.clip(fx, 0, 1) * ((1 << b) - 1))
  elif k == "SNORM": v = np.rint(np.clip(fx, -1, 1) * ((1 << (b - 1)) - 1))
  elif k == "USCALED": v = np.rint(np.clip(fx, 0, (1 << b) - 1))
  else: v = np.rint(np.clip(fx, -(1 << (b - 1)), (1 << (b - 1)) - 1))
  return (v.astype(i64) & ((1 << b) - 1)).astype(u64)


def pack(fmt: BufferFormat, comps: list[np.ndarray]) -> np.ndarray:
  """Component bits (missing ones 0) -> (n, size) uint8 records."""
  n = comps[0].shape[0]
  if all(b == 32 for b in fmt.bits):
    return np.stack([c.astype(u32) for c in comps], axis=1).view(np.uint8).reshape(n, -1)
  word, off = np.zeros(n, u64), 0
  for c, b in zip(comps, fmt.bits):
    word |= (c & u64((1 << b) - 1)) << u64(off); off += b
  return word.view(np.uint8).reshape(n, 8)[:, :fmt.size].copy()
