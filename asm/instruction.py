"""Instruction objects: an opcode plus its field values (and literal), the one form encoder, decoder, printer,
parser and DSL all meet in."""
from __future__ import annotations

from hcq.asm.isa import ISA, Opcode, load


class DecodeError(ValueError):
  """Bytes that are not a valid instruction of the arch."""


class Instruction:
  """One machine instruction. `values` holds every non-opcode field of its format; `literal` the extra dword."""
  __slots__ = ("opcode", "values", "literal", "isa")

  def __init__(self, isa: ISA, opcode: Opcode, values: dict[str, int], literal: int | None = None) -> None:
    self.isa, self.opcode, self.values, self.literal = isa, opcode, values, literal

  @property
  def mnemonic(self) -> str: return self.opcode.mnemonic

  @property
  def size(self) -> int:
    return self.opcode.fmt.size + (4 if self.literal is not None else 0)

  def encode(self) -> bytes:
    """The instruction's bytes: its format's words, then the literal dword if it has one."""
    fmt = self.opcode.fmt
    word = fmt.pack(self.values)
    op = fmt.places.get("op")
    if op is not None: word |= (self.opcode.op & op[1]) << op[0]
    data = word.to_bytes(fmt.size, "little")
    return data + self.literal.to_bytes(4, "little") if self.literal is not None else data

  def __bytes__(self) -> bytes: return self.encode()

  def __str__(self) -> str:
    from hcq.asm.fast_print import render
    return render(self)

  def __repr__(self) -> str:
    from hcq.asm.dsl import instruction_repr
    return instruction_repr(self)

  def __eq__(self, other: object) -> bool:
    return isinstance(other, Instruction) and self.isa.arch == other.isa.arch and self.encode() == other.encode()

  def __hash__(self) -> int: return hash((self.isa.arch, self.encode()))

  @classmethod
  def decode(cls, data: bytes, arch: str = "gfx1100") -> "Instruction":
    """The first instruction in `data`; DecodeError if the bytes are not one llvm-mc would accept."""
    return decode(load(arch), data)


def uses_literal(opcode: Opcode, values: dict[str, int]) -> bool:
  """Whether the instruction reads a literal dword: a source field set to 255, or a literal operand (v_fmamk_f32)."""
  if opcode.has_literal_operand: return True
  kinds = opcode.fmt.fields
  return any(values.get(f) == 255 for f in opcode.operand_fields if kinds[f].kind in ("src", "ssrc"))


def decode(isa: ISA, data: bytes) -> Instruction:
  """The first instruction in `data` (DecodeError if llvm-mc would reject it): per-opcode plans where they cover
  the opcode (hcq.asm.fast_decode), else decode_generic."""
  from hcq.asm.fast_decode import decoder
  return decoder(isa).decode_at(data)


def decode_generic(isa: ISA, data: bytes) -> Instruction:
  """The reference decoder: unpack the word and prove it valid by rendering it."""
  if len(data) < 4: raise DecodeError(f"need at least 4 bytes, got {len(data)}")
  first = int.from_bytes(data[:4], "little")
  for fmt in isa.decode_order:
    if first & fmt.fixed_mask & 0xffffffff != fmt.fixed_value & 0xffffffff: continue
    # fixed bits past the first dword (VOP3 DPP's src0 = 250/233/234), as far as the bytes go
    seen = (1 << 8 * min(len(data), fmt.size)) - 1
    if int.from_bytes(data[:fmt.size], "little") & fmt.fixed_mask & seen != fmt.fixed_value & seen: continue
    if len(data) < fmt.size: raise DecodeError(f"{fmt.name} needs {fmt.size} bytes, got {len(data)}")
    word = int.from_bytes(data[:fmt.size], "little")
    values = fmt.unpack(word)
    op = values.pop("op", 0)  # EXP has no opcode field
    opcode = isa.by_op[fmt.name].get(op)
    if opcode is None: continue  # VOP3 and VOP3SD share fixed bits: the opcode says which
    for f, required in opcode.fixed.items():
      if values[f] != required: raise DecodeError(f"{opcode.mnemonic}: field {f} must be {required}, is {values[f]}")
    literal = None
    if uses_literal(opcode, values):
      if len(data) < fmt.size + 4: raise DecodeError(f"{opcode.mnemonic} needs a literal dword after its {fmt.size} bytes")
      literal = int.from_bytes(data[fmt.size:fmt.size + 4], "little")
    inst = Instruction(isa, opcode, values, literal)
    from hcq.asm.printer import check
    check(inst)
    return inst
  raise DecodeError(f"no {isa.arch} instruction has encoding 0x{first:08x}")
