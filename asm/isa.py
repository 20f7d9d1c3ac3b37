"""The ISA of one arch, loaded from its generated table: formats, opcodes, and the lookups every part uses."""
from __future__ import annotations
import functools
import importlib
from dataclasses import dataclass, field

ARCHS = ("gfx1100", "gfx1201")


@dataclass(frozen=True)
class Field:
  """A bit field of an encoding: bits hi..lo over the whole instruction (bit 32 is bit 0 of the second dword)."""
  name: str
  hi: int
  lo: int
  kind: str

  @property
  def mask(self) -> int: return (1 << (self.hi - self.lo + 1)) - 1

  @property
  def bits(self) -> int: return self.hi - self.lo + 1


@dataclass(frozen=True, eq=False)
class Format:
  """An encoding format, e.g. Format("VOP2", size=4, fixed={(31, 31): 0}, fields={"op": (30, 25), ...})."""
  name: str
  size: int
  fixed_mask: int
  fixed_value: int
  fields: dict[str, Field]

  def matches(self, word: int) -> bool:
    return word & self.fixed_mask == self.fixed_value

  def pack(self, values: dict[str, int]) -> int:
    """The instruction word with the fixed bits and the given field values (masked to their widths)."""
    w = self.fixed_value
    for name, v in values.items():
      f = self.fields[name]
      w |= (v & f.mask) << f.lo
    return w

  def unpack(self, word: int) -> dict[str, int]:
    return {name: (word >> lo) & mask for name, lo, mask in self.layout}

  @functools.cached_property
  def layout(self) -> tuple[tuple[str, int, int], ...]:
    """(name, lo, mask) of every field, for unpacking without attribute lookups."""
    return tuple((name, f.lo, f.mask) for name, f in self.fields.items())


@dataclass(frozen=True)
class Opcode:
  """One opcode of a format, as the generator found it: operands in print order, fields that must be zero,
  and modifier fields in print order with how they print (see hcq.asm.generator.shapes.record)."""
  fmt: Format
  op: int
  mnemonic: str
  operands: tuple          # str (fixed text) | (field, file, count, constant type or number syntax)
  fixed: dict[str, int]    # fields llvm-mc accepts only with this value
  mods: dict[str, str]
  defaults: dict[str, int]  # fields that print nothing, as llvm-mc's assembler sets them
  operand_fields: frozenset = field(default=frozenset())
  isa: "ISA | None" = field(default=None, compare=False, repr=False)
  name: str = ""           # the unique name the DSL and assembler use (mnemonic, or mnemonic_e64 for a VOP3 twin)

  @property
  def has_literal_operand(self) -> bool:
    return any(isinstance(o, tuple) and o[0] == "literal" for o in self.operands)


class ISA:
  """Lookups over one arch's generated table."""

  def __init__(self, arch: str, table) -> None:
    self.arch = arch
    self.formats: dict[str, Format] = {}
    for name, (size, fixed, fields, kinds) in table.FORMATS.items():
      mask = value = 0
      for hi, lo, v in fixed:
        m = ((1 << (hi - lo + 1)) - 1) << lo
        mask |= m; value |= v << lo
      self.formats[name] = Format(name, size, mask, value, {f: Field(f, hi, lo, k) for (f, hi, lo), k in zip(fields, kinds)})
    self.by_mnemonic: dict[str, Opcode] = {}
    self.variants: dict[str, list[Opcode]] = {}  # printed mnemonic or DSL name -> the opcodes text may mean
    self.by_op: dict[str, dict[int, Opcode]] = {}
    for fname, recs in table.OPCODES.items():
      fmt = self.formats[fname]
      ops = self.by_op.setdefault(fname, {})
      for op, mnemonic, operands, fixed, mods, defaults in recs:
        # the last element of an operand spec indexes VALID: keep the bitmask itself
        operands = tuple(o[:4] + (None if o[4] is None else table.VALID[o[4]],) if isinstance(o, tuple) else o for o in operands)
        opc = Opcode(fmt, op, mnemonic, operands, dict(fixed), dict(mods), dict(defaults),
                     frozenset(o[0] for o in operands if isinstance(o, tuple)), self)
        name = mnemonic.replace("::", "__")  # a VOPD pair v_dual_add_f32::v_dual_mul_f32 is v_dual_add_f32__v_dual_mul_f32
        if mnemonic in self.by_mnemonic:
          # encodings that print alike get DSL names of their own: v_nop's VOP3 twin is v_nop_e64 (llvm-mc's name
          # for it), DPP8 forms are <mnemonic>8 and <mnemonic>8_fi; text picks among them by operands and modifiers
          stem = mnemonic[:-4] if mnemonic.endswith("_dpp") else mnemonic
          name = stem + next((suffix for tail, suffix in (("DPP8FI", "_dpp8_fi"), ("DPP8", "_dpp8"), ("DPP16", "_dpp16"))
                              if fname.endswith(tail)), "_e64")
        opc = Opcode(fmt, op, mnemonic, opc.operands, opc.fixed, opc.mods, opc.defaults, opc.operand_fields, self, name)
        ops[op] = opc
        self.by_mnemonic[name] = opc
        self.variants.setdefault(mnemonic, []).append(opc)
        if name != mnemonic: self.variants.setdefault(name, []).append(opc)
    self.scalars: dict = table.SCALARS
    self.names: dict = table.NAMES
    self.scalar_values: dict = {k: {t: v for v, t in names.items()} for k, names in table.SCALARS.items()}
    # decode tries the formats with the most fixed bits first (SOPP before SOPK before SOP2)
    order = sorted(self.formats.values(), key=lambda f: -bin(f.fixed_mask).count("1"))
    self.decode_order = [f for f in order if f.name in self.by_op]


@functools.cache
def load(arch: str) -> ISA:
  """The ISA of `arch` (e.g. 'gfx1100'), from hcq.asm.tables.<arch>."""
  if arch not in ARCHS:
    raise ValueError(f"unknown arch {arch!r}: valid archs are {', '.join(ARCHS)}")
  return ISA(arch, importlib.import_module(f"hcq.asm.tables.{arch}"))
