"""Number fields <-> text, by the syntax the generator recorded: '[prefix:]{fmt}[,z]' or 'named:<word>'."""
from __future__ import annotations

from hcq.asm.operands import OperandError


def signed(value: int, bits: int) -> int:
  return value - (1 << bits) if value >> (bits - 1) & 1 else value


def split_syntax(syntax: str) -> tuple[str, str, bool]:
  """'offset:{sdec},z' -> ('offset:', 'sdec', True)."""
  body, _, flags = syntax.partition(",")
  prefix, _, rest = body.partition("{")
  return prefix, rest.rstrip("}"), flags == "z"


def number_text(value: int, fmt: str, bits: int) -> str:
  """Text of a field value in one of the generator's number formats."""
  if fmt == "hex": return f"0x{value:x}"
  if fmt == "ihex": return str(value) if value <= 64 else f"0x{value:x}"
  if fmt == "shex":
    v = signed(value, bits)
    return f"-0x{-v:x}" if v < 0 else f"0x{v:x}"
  if fmt == "sihex":
    v = signed(value, bits)
    return str(v) if -16 <= v <= 64 else f"0x{value:x}"
  if fmt == "dec": return str(value)
  if fmt == "sdec": return str(signed(value, bits))
  raise ValueError(f"unknown number format {fmt!r}")


def parse_number_text(text: str, fmt: str, bits: int, strict: bool = False) -> int:
  """A number as written (decimal, hex, negative) -> the field value, checked to fit `bits`: as llvm-mc takes most
  immediates, either signed or unsigned; `strict` (memory offsets) takes a signed field's signed range only and
  an unsigned field's unsigned range only."""
  t = text.strip()
  try:
    v = int(t, 0) if not t.lstrip("-").startswith("0") or t.lstrip("-") == "0" or "x" in t.lower() else int(t, 10)
  except ValueError:
    raise OperandError(f"expected a number, got {text!r}") from None
  if strict:
    signed = fmt.startswith("s")
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not lo <= v <= hi:
      raise OperandError(f"{text} is out of range for {'an' if bits in (8, 11, 18) else 'a'} {bits}-bit {'signed' if signed else 'unsigned'} "
                         f"offset ({lo}..{hi})")
    return v & ((1 << bits) - 1)
  lo = -(1 << (bits - 1)) if fmt.startswith("s") or v < 0 else 0
  if not lo <= v < (1 << bits) or (fmt.startswith("s") and v >= 1 << (bits - 1) and not t.lower().startswith("0x")):
    if not (fmt.startswith("s") and 0 <= v < (1 << bits)):
      raise OperandError(f"{text} is out of range for a {bits}-bit {'signed ' if fmt.startswith('s') else ''}field")
  return v & ((1 << bits) - 1)
