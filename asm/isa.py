"""The ISA of one arch, loaded from its generated table: formats, opcodes, and the lookups every part uses."""
from __future__ import annotations
import functools
import importlib
from dataclasses import dataclass, field
from typing import Any

ARCHS = ("gfx1100", "gfx1201", "gfx942")


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

  @property
  def family(self) -> str:
    """The encoding a DPP form extends: VOP3P for VOP3P_DPP16, VOP1 for VOP1_DPP8FI; else the name itself."""
    return self.name.split("_DPP")[0]

  def matches(self, word: int) -> bool:
    return word & self.fixed_mask == self.fixed_value

  def pack(self, values: dict[str, int]) -> int:
    """The instruction word with the fixed bits and the given field values (masked to their widths)."""
    packer, n = self.packer
    if len(values) == n:  # every field but op, as build makes them: one expression, compiled per format
      try: return packer(values)
      except KeyError: pass  # the same count of other names: the loop below says which is unknown
    w = self.fixed_value
    places = self.places
    for name, v in values.items():
      lo, mask = places[name]
      w |= (v & mask) << lo
    return w

  @functools.cached_property
  def packer(self) -> tuple:
    """(fn(values) -> word, how many fields it reads): the loop of pack unrolled over every field but op."""
    names = [n for n in self.fields if n != "op"]
    terms = "".join(f" | (v[{n!r}] & {self.fields[n].mask}) << {self.fields[n].lo}" for n in names)
    return eval(f"lambda v: {self.fixed_value}{terms}"), len(names)  # noqa: S307 - from the table's names and numbers

  @functools.cached_property
  def places(self) -> dict[str, tuple[int, int]]:
    """name -> (lo, mask) of every field, for packing without attribute lookups."""
    return {name: (f.lo, f.mask) for name, f in self.fields.items()}

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
  defaults: dict[str, int]  # fields that print nothing or that text leaves out, as llvm-mc's assembler sets them
  operand_fields: frozenset = field(default=frozenset())
  isa: "ISA | None" = field(default=None, compare=False, repr=False)
  name: str = ""           # the unique name the DSL and assembler use (mnemonic, or mnemonic_e64 for a VOP3 twin)
  # field -> ('value', mask of values below 256) or ('bits', modifier bits): what llvm-mc's disassembler prints but
  # its assembler refuses (a literal in a VOP3 DPP source, tfe on a buffer store); the builder refuses them
  refused: dict = field(default_factory=dict)

  def assembly_valid(self, spec: tuple) -> int | None:
    """The scalar values below 256 (bitmask) the assembler takes in operand `spec`: the decoder's mask less refusals."""
    r = self.refused.get(spec[0])
    return spec[4] if r is None or r[0] != "value" or spec[4] is None else spec[4] & ~r[1]

  @property
  def returned(self) -> tuple[str, int] | None:
    """(field, VGPR count) of an atomic's returned value, which prints first when the field's bit 0 is set:
    glc on gfx11, th (TH_ATOMIC_RETURN) on gfx12; None for opcodes that return nothing."""
    for f in ("glc", "th", "sc0"):  # sc0 on gfx940+
      syn = self.mods.get(f, "")
      if ",ret:" in syn: return f, int(syn.rpartition(":")[2])
    return None

  def returns(self, values: dict[str, int]) -> bool:
    """Whether these field values make the atomic return its old value (and print the vdst in front)."""
    ret = self.returned
    return ret is not None and bool(values.get(ret[0], 0) & 1)

  def image_widths(self, name: str, values: dict[str, int]) -> tuple[int, ...] | None:
    """MIMG: the VGPR count of vdata, or of vaddr (one count, or one per address of the NSA form), for these dmask,
    d16, tfe, dim and a16 values, from the opcode's probed table; None where llvm-mc has no encoding."""
    spec = next(o for o in self.operands if isinstance(o, tuple) and o[0] == name)
    v = values.get
    key = v("dmask", 0) | v("d16", 0) << 4 | v("tfe", 0) << 5 | v("dim", 0) << 6 | v("a16", 0) << 9
    widths = _image_table(self.isa.names[spec[3][6:]])[key]
    return None if widths == "0" else tuple(int(w) for w in widths.split(","))

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
    # opcodes share their operand lists and fixed/modifier/default dicts (the table repeats a few hundred of them):
    # made once each, read-only like the opcodes
    shared: dict[tuple, Any] = {}

    def once(kind: str, raw: tuple, make) -> Any:
      v = shared.get((kind, raw))
      if v is None: v = shared[(kind, raw)] = make(raw)
      return v

    def specs(raw: tuple) -> tuple:  # the last element of an operand spec indexes VALID: keep the bitmask itself
      out = tuple(o[:4] + (None if o[4] is None else table.VALID[o[4]],) if isinstance(o, tuple) else o for o in raw)
      return out, frozenset(o[0] for o in out if isinstance(o, tuple))
    def refusals(raw: tuple) -> dict:  # value refusals index VALID like the operands
      return {f: (kind, table.VALID[m] if kind == "value" else m) for f, kind, m in raw}
    new = object.__new__
    for fname, recs in table.OPCODES.items():
      fmt = self.formats[fname]
      ops = self.by_op.setdefault(fname, {})
      for op, mnemonic, operands, fixed, mods, defaults, refused in recs:
        operands, operand_fields = once("specs", operands, specs)
        name = mnemonic.strip().replace("::", "__")  # a VOPD pair v_dual_add_f32::v_dual_mul_f32 is v_dual_add_f32__v_dual_mul_f32
        if name in self.by_mnemonic:  # (image_sample's NSA form prints its mnemonic with a second space: stripped here)
          # encodings that print alike get DSL names of their own: v_nop's VOP3 twin is v_nop_e64 (llvm-mc's name
          # for it), DPP8 forms are <mnemonic>8 and <mnemonic>8_fi; text picks among them by operands and modifiers
          stem = name[:-4] if name.endswith("_dpp") else name
          name = stem + next((suffix for tail, suffix in (("DPP8FI", "_dpp8_fi"), ("DPP8", "_dpp8"), ("DPP16", "_dpp16"), ("NSA", "_nsa"), ("SDWA", "_sdwa"))
                              if fname.endswith(tail)), "_e64")
        opc = new(Opcode)  # Opcode(...) without the frozen dataclass's field-by-field __init__: 3,000 of them at start
        opc.__dict__.update(fmt=fmt, op=op, mnemonic=mnemonic, operands=operands, fixed=once("dict", fixed, dict),
                            mods=once("dict", mods, dict), defaults=once("dict", defaults, dict), operand_fields=operand_fields,
                            isa=self, name=name, refused=once("refused", refused, refusals))
        ops[op] = opc
        self.by_mnemonic[name] = opc
        self.variants.setdefault(mnemonic.strip(), []).append(opc)
        if name != mnemonic.strip(): self.variants.setdefault(name, []).append(opc)
    self.scalars: dict = table.SCALARS
    self.names: dict = table.NAMES
    self.scalar_values: dict = {k: {t: v for v, t in names.items()} for k, names in table.SCALARS.items()}
    # gfx9 (GCN/CDNA): s0..s101 (then flat_scratch, xnack_mask, vcc), m0 at 124, no null; "off" in a global or
    # scratch saddr is 0x7f
    self.sgprs = next(n for n in range(107) if table.SCALARS[1].get(n) != f"s{n}")
    self.saddr_off = 0x7f if arch.startswith("gfx9") else 124
    self.absent: dict = getattr(table, "ABSENT", {})
    self.aliases: dict[str, str] = getattr(table, "ALIASES", {})  # other names llvm-mc takes: {alias: mnemonic}
    self.unprinted: dict[str, str] = getattr(table, "UNPRINTED", {})  # {name table: names ('|') of the value printed as nothing}
    # decode tries the formats with the most fixed bits first (SOPP before SOPK before SOP2)
    order = sorted(self.formats.values(), key=lambda f: -bin(f.fixed_mask).count("1"))
    self.decode_order = [f for f in order if f.name in self.by_op]
    self._helpers: dict = {}

  def unprinted_names(self, key: str) -> list[str]:
    """The names text may write for the value llvm-mc prints as nothing in name table `key` (th:TH_LOAD_RT, TH_DEFAULT)."""
    return self.unprinted[key].split("|") if key in self.unprinted else []

  def helper(self, make):
    """make(self), made once for this ISA: the fast paths' per-arch state (decoder, printer, builder, ...)."""
    h = self._helpers.get(make)
    if h is None: h = self._helpers[make] = make(self)
    return h


@functools.cache
def _image_table(text: str) -> list[str]:
  """A generated MIMG width table ('1|2|0|...', one entry per key) as a list, split once."""
  return text.split("|")


@functools.cache
def load(arch: str) -> ISA:
  """The ISA of `arch` (e.g. 'gfx1100'), from hcq.asm.tables.<arch>."""
  if arch not in ARCHS:
    raise ValueError(f"unknown arch {arch!r}: valid archs are {', '.join(ARCHS)}")
  return ISA(arch, importlib.import_module(f"hcq.asm.tables.{arch}"))
