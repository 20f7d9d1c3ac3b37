"""Operand values <-> text: registers, special registers, inline constants and literals.

A field holds an encoded value; an operand spec from the table, (field, file, count, type), says how to read it:
file 'v' VGPRs, 's' scalar encodings (SGPRs, specials, constants), count registers (or 'l' for a 16-bit half),
type how constants print ('' 32-bit, 'd' 64-bit, 'h' 16-bit literal, 'H' 16-bit integer)."""
from __future__ import annotations
import re
import struct

from hcq.asm.isa import ISA

LITERAL = 255
INLINE_FLOATS = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0}
INV_2PI = 248
_INV_2PI_BITS = {"": 0x3E22F983, "d": 0x3FC45F306DC9C882, "h": 0x3118, "H": 0x3118, "p": 0x3118}
_SGPR_RANGE = re.compile(r"^(s|ttmp)\[(\d+):(\d+)\]$")
_VGPR = re.compile(r"^v(?:(\d+)(\.[lh])?|\[(\d+):(\d+)\])$")
_SGPR_FIRST = {"s": 0, "ttmp": 108}
_SGPR_LIMIT = {"s": 106, "ttmp": 124}


class OperandError(ValueError):
  """An operand that does not fit its field: the message says what was expected; index is the operand's position."""

  def __init__(self, message: str, index: int | None = None) -> None:
    super().__init__(message)
    self.index = index


def vgpr_text(index: int, count: int | str) -> str:
  if count == "l": return f"v{index & 127}.{'h' if index >> 7 else 'l'}"
  return f"v{index}" if count == 1 else f"v[{index}:{index + count - 1}]"


def _alignment(count: int) -> int:
  return 1 if count == 1 else 2 if count == 2 else 4


def scalar_text(isa: ISA, value: int, count: int | str, ctype: str = "", valu: bool = False) -> str | None:
  """Text of a scalar source/destination value below 255, or None where llvm-mc rejects it."""
  if value in INLINE_FLOATS or value == INV_2PI:
    if ctype == "H": return f"0x{_f16_bits(value):x}"
    if ctype == "d": return isa.scalars[2].get(value)
  if count == "l" or count == 1:
    return isa.scalars["v" if valu else 1].get(value)
  if count == 2: return isa.scalars[2].get(value)
  if value == 124 and isa.scalars[1].get(124) == "null": return "null"  # a null buffer resource or base of any width (gfx10+)
  for file, first in _SGPR_FIRST.items():
    if first <= value < _SGPR_LIMIT[file]:
      start = (value - first) & ~(_alignment(count) - 1)
      if first + start + count > _SGPR_LIMIT[file]: return None
      return f"{file}[{start}:{start + count - 1}]"
  return isa.scalars[2].get(value) if value >= 128 else None


def _f16_bits(value: int) -> int:
  if value == INV_2PI: return _INV_2PI_BITS["h"]
  return struct.unpack("<H", struct.pack("<e", INLINE_FLOATS[value]))[0]


def literal_text(literal: int, ctype: str) -> str:
  return f"0x{literal & 0xffff:x}" if ctype in ("h", "H") else f"0x{literal:x}"


def source_text(isa: ISA, value: int, spec: tuple, literal: int | None, valu: bool) -> str | None:
  """Text of a 9-bit (or 8-bit) source field value."""
  count, ctype = spec[2], spec[3]
  if value >= 256:  # a VGPR; none in an SGPR-only source (v_cndmask_b32_e64's lane mask)
    return None if spec[1] == "s" else vgpr_text(value - 256, count) if count == "l" or value - 256 + count <= 256 else None
  if value == LITERAL: return None if literal is None else literal_text(literal, ctype)
  return scalar_text(isa, value, count, ctype, valu)


# --- text -> value ---------------------------------------------------------------------------------------------

def parse_vgpr(token: str, count: int | str) -> int:
  """'v5' / 'v[4:5]' / 'v5.h' -> the VGPR field value, checked against the operand's register count."""
  m = _VGPR.match(token)
  if not m: raise OperandError(f"expected a VGPR ({vgpr_text(0, count)}), got {token!r}")
  if m.group(3) is not None:
    first, last = int(m.group(3)), int(m.group(4))
    n = last - first + 1
  else:
    first, n = int(m.group(1)), 1
  if count == "l":
    if m.group(2) is None: raise OperandError(f"expected a 16-bit VGPR half such as v{first}.l or v{first}.h, got {token!r}")
    return first | (128 if m.group(2) == ".h" else 0)
  if m.group(2) is not None: raise OperandError(f"expected a 32-bit VGPR, got the 16-bit half {token!r}")
  if n != count: raise OperandError(f"expected {count} VGPR{'s' if count != 1 else ''} ({vgpr_text(first, count)}), got {token!r}")
  if first + n > 256: raise OperandError(f"VGPR {token!r} is out of range (v0..v255)")
  return first


def parse_scalar(isa: ISA, token: str, count: int | str, valu: bool = False) -> int | None:
  """A register or special name -> its scalar encoding; None if the token is not a scalar register name."""
  n = 1 if count == "l" else count
  if n in (1, 2):
    v = isa.scalar_values["v" if valu and n == 1 else n].get(token)
    if v is not None and v < 128 or v is not None and 235 <= v <= 254: return v
  m = _SGPR_RANGE.match(token)
  if m:
    first, last = int(m.group(2)), int(m.group(3))
    if last - first + 1 != n: raise OperandError(f"expected {n} scalar registers, got {token!r}")
    if first % _alignment(n): raise OperandError(f"{token!r} must start at a multiple of {_alignment(n)}")
    value = _SGPR_FIRST[m.group(1)] + first
    if value + n > _SGPR_LIMIT[m.group(1)]: raise OperandError(f"{token!r} is out of range")
    return value
  if re.fullmatch(r"(s|ttmp)\d+", token) or token in ("vcc", "exec", "vcc_lo", "exec_lo", "vcc_hi", "exec_hi", "m0", "null"):
    if any(token in isa.scalar_values[k] for k in (1, 2)):
      raise OperandError(f"expected {n} scalar register{'s' if n != 1 else ''}, got {token!r}")
  return None


def parse_number(token: str) -> int | float | None:
  """An integer (decimal, hex, negative) or float literal; None if the token is not a number."""
  t = token.strip()
  try:
    if re.fullmatch(r"-?0x[0-9a-fA-F]+", t): return int(t, 16)
    if re.fullmatch(r"-?\d+", t): return int(t)
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", t): return float(t)
  except ValueError: return None
  return None


def literal_width(family: str, mnemonic: str, count: int | str, ctype: str, name: str = "") -> int:
  """How llvm-mc 19 reads an integer written for a source (AMDGPUOperand::addLiteralImmOperand): 64 (an f64 source),
  -64 (a 64-bit integer source: its literal is the low dword), 16 (f16/i16, gfx9's VOP3 f16), or 32 (the rest, packed
  16-bit pairs and gfx940's packed f32 pairs included)."""
  if count == 2 and family != "VOP3P": return 64 if "f64" in mnemonic else -64
  if name in ("src0", "src1") and re.match(r"v_(pk_\w+_f16|dot2\w*_f16)(_e32|_e64)?$", mnemonic): return 32  # an f16 pair, typed 16-bit
  if ctype in ("h", "H") or ctype == "p" and family != "VOP3P": return 16
  if family.endswith("_SDWA"):  # gfx9 SDWA prints 32-bit constants: the source type is the mnemonic's last (v_cvt_f32_f16: f16)
    types = re.findall(r"_[fiub](16|32|64)", mnemonic)
    if types and types[-1] == "16": return 16
  return 32


def source_ctype(mnemonic: str, name: str, ctype: str) -> str:
  """The constant type llvm-mc reads an integer with: 'b' for a bf16 source (v_dot2_f32_bf16's src0/src1, all of
  v_dot2_bf16_bf16's), whose inline floats are bf16 bit patterns (0x3f00 is 0.5) though it prints 32-bit ones."""
  if ctype or not mnemonic.split("_e64")[0].endswith("_bf16"): return ctype
  return "b" if name in ("src0", "src1") or name == "src2" and mnemonic.split("_")[2] == "bf16" else ctype


def constant_value(number: int | float, ctype: str, width: int = 32) -> tuple[int, int | None]:
  """(field value, literal) for a number used as a source: an inline constant when one encodes it, else a literal.
  An integer is read as llvm-mc 19 reads it (addLiteralImmOperand): 64-bit two's complement (0xfffffffffffffff0 is
  -16), then in the operand's `width` (literal_width): 0xffffffff is -1 in a 32-bit operand, 0xffff -1 in an f16
  one; a 64-bit operand takes -16..64 and the inline doubles' bit patterns, else a 32-bit literal."""
  if isinstance(number, float):
    for code, f in INLINE_FLOATS.items():
      if number == f: return code, None
    if abs(number - 0.15915494309189532) < 1e-8:
      return INV_2PI, None
    if ctype in ("h", "H", "p"): return LITERAL, struct.unpack("<H", struct.pack("<e", number))[0]
    if ctype == "d":
      bits = struct.unpack("<Q", struct.pack("<d", number))[0]
      if bits & 0xffffffff: raise OperandError(f"{number!r} is not exact as a 64-bit literal (low 32 bits must be zero)")
      return LITERAL, bits >> 32
    return LITERAL, struct.unpack("<I", struct.pack("<f", number))[0]
  if not -(1 << 63) <= number < 1 << 64: raise OperandError(f"{number} does not fit 64 bits")
  if number >= 1 << 63: number -= 1 << 64
  if -16 <= number <= 64: return (128 + number if number >= 0 else 192 - number), None
  if abs(width) == 64:
    inline = _inline_of_bits(number & (1 << 64) - 1, "d")
    if inline is not None: return inline, None
  if abs(width) == 16:
    if not -0x8000 <= number <= 0xffff: raise OperandError(f"{number} does not fit a 16-bit literal")
    bits = number & 0xffff
    if ctype == "H": return LITERAL, bits  # i16: inline only as -16..64 written
    if bits >= 0xfff0: return 192 + (0x10000 - bits), None  # f16: 0xffff is the integer -1
    inline = _inline_of_bits(bits, "h")
    return (inline, None) if inline is not None else (LITERAL, bits)
  if not -0x80000000 <= number <= 0xffffffff: raise OperandError(f"{number} does not fit a 32-bit literal")
  bits = number & 0xffffffff
  if width == -64: return LITERAL, bits  # a 64-bit integer: the literal is its low dword, no float pattern
  if width == 32 and bits >= 0xfffffff0: return 192 + (0x100000000 - bits), None  # 0xffffffff is the integer -1
  if ctype == "b":  # bf16: the inline floats' f32 bits less their low half (0x3f00 is 0.5), and 1/(2*pi) as 0x3e22
    if bits == 0x3e22: return INV_2PI, None
    inline = _inline_of_bits(bits << 16, "") if bits >> 16 == 0 else None
    return (inline, None) if inline is not None else (LITERAL, bits)
  # 'p' (packed f16): the f16 patterns (0x3800) are inline, other bits a 32-bit literal (LLVM's getInlineEncodingV216)
  inline = _inline_of_bits(bits << 32 if width == 64 else bits, "h" if ctype == "p" else "d" if width == 64 else ctype)
  return (inline, None) if inline is not None else (LITERAL, bits)


def _inline_of_bits(bits: int, ctype: str) -> int | None:
  """The inline float constant whose bit pattern (f32, f64 or f16 per ctype) is `bits`, if any."""
  for code, f in list(INLINE_FLOATS.items()) + [(INV_2PI, None)]:
    if ctype == "d": b = _INV_2PI_BITS["d"] if f is None else struct.unpack("<Q", struct.pack("<d", f))[0]
    elif ctype in ("h", "H"): b = _INV_2PI_BITS["h"] if f is None else struct.unpack("<H", struct.pack("<e", f))[0]
    else: b = _INV_2PI_BITS[""] if f is None else struct.unpack("<I", struct.pack("<f", f))[0]
    if b == bits: return code
  return None
