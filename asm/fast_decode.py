"""Decoding without rendering: per-opcode plans, made on first use from the table and the printer's own helpers.

The generic decoder (hcq.asm.instruction.decode_generic) proves a word valid by rendering it. A plan instead
checks each field the printer would reject on, through a per-field table of verdicts computed by the same helpers
the printer calls (source_text, scalar_text, named.render), memoised per field value. A plan only ever says
"valid"; anything it is not sure of -- a value whose verdict is no, a format or field the plan does not cover, a
short buffer -- goes to the generic decoder, which accepts or raises its own error. So the fast path is exactly as
strict as the generic one (tests/test_asm_fast.py checks both on random words and on every opcode's samples;
tests/test_asm_llvm.py checks this path against llvm-mc).
"""
from __future__ import annotations

from hcq.asm import named, printer
from hcq.asm.instruction import DecodeError, Instruction, decode_generic
from hcq.asm.isa import ISA, Opcode
from hcq.asm.numbers import split_syntax
from hcq.asm.operands import scalar_text, source_text

NULL = 124
NUMBER_FORMATS = {"hex", "ihex", "shex", "sihex", "dec", "sdec"}  # what numbers.number_text prints
VALU = {"VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P"}
# formats whose printer branches the verdicts below cover; any other format (a new one included) is generic
FAST_FORMATS = {"SOP1", "SOP2", "SOPC", "SOPK", "SOPP", "SMEM", "VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "VOPD", "DS",
                "FLAT", "GLOBAL", "SCRATCH", "VINTERP", "LDSDIR", "EXP"} | \
               {f"{b}_{d}" for b in ("VOP1", "VOP2", "VOPC") for d in ("DPP16", "DPP8", "DPP8FI")}
FAST_ARCHS = {"gfx1100", "gfx1201", "gfx942"}  # the archs whose printer and builder branches the plans were written against
# (gfx942's AGPR operands and SMEM offsets excepted: the plans leave those opcodes to the generic paths)


def covered(opc: Opcode) -> bool:
  """Whether the fast paths may plan this opcode: one of FAST_FORMATS, or one with no operands and no modifiers in
  any format (buffer_gl0_inv); any other (a new format or arch) takes the generic paths."""
  return (opc.fmt.name in FAST_FORMATS or not opc.operands and not opc.mods) and opc.isa is not None and opc.isa.arch in FAST_ARCHS


class DecodedInstruction(Instruction):
  """An Instruction decoded from a word: its field values are unpacked from the word when first read; its literal
  and size are the decoded ones."""
  __slots__ = ("word", "_values", "size")  # size: a slot standing for Instruction.size, fixed at decoding

  def __init__(self, isa: ISA, opcode: Opcode, word: int, literal: int | None, size: int) -> None:
    self.isa, self.opcode, self.word, self.literal, self._values, self.size = isa, opcode, word, literal, None, size

  @property  # type: ignore[override]
  def values(self) -> dict[str, int]:
    v = self._values
    if v is None:
      fmt = self.opcode.fmt
      unpack = _UNPACKERS.get(id(fmt))
      if unpack is None: unpack = _UNPACKERS[id(fmt)] = _unpacker(fmt)
      v = self._values = unpack[1](self.word)
    return v

  @values.setter
  def values(self, v: dict[str, int]) -> None: self._values = v

  def encode(self) -> bytes:
    if self._values is not None: return Instruction.encode(self)
    data = self.word.to_bytes(self.opcode.fmt.size, "little")
    return data if self.literal is None else data + self.literal.to_bytes(4, "little")


_UNPACKERS: dict[int, tuple] = {}  # id(format) -> (the format, kept alive so that its id is not reused; its unpacker)


def _unpacker(fmt) -> tuple:
  """(fmt, word -> {field: value} for every field but op, as Format.unpack gives them): one dict display,
  compiled once per format from its layout (a comprehension over the layout costs three times as much per word)."""
  items = ", ".join(f"{name!r}: w >> {lo} & {mask}" for name, lo, mask in fmt.layout if name != "op")
  return fmt, eval(f"lambda w: {{{items}}}")  # noqa: S307 - text made above from the table's field names and numbers


class _Verdicts(dict):
  """value -> whether the printer accepts it in one operand (a missing value is computed once by `ok`)."""
  __slots__ = ("ok",)

  def __init__(self, ok) -> None:
    super().__init__()
    self.ok = ok

  def __missing__(self, value: int) -> bool:
    try: r = bool(self.ok(value))
    except Exception: r = False  # the generic path will raise whatever the printer raises
    self[value] = r
    return r


class _Probe:
  """The little of an Instruction that named.render reads for opcode-level names (sendmsg's table)."""
  __slots__ = ("isa", "opcode")

  def __init__(self, isa: ISA, opcode: Opcode) -> None: self.isa, self.opcode = isa, opcode


def make_plan(opcode: Opcode, checks: tuple) -> tuple:
  """How to decode one opcode fast: (opcode, mask and value of the bits its fixed fields require, whether it always
  has a literal, (lo, mask) of the fields that bring one when 255, (lo, mask, verdicts) of every field the
  printer could reject)."""
  fmt = opcode.fmt
  need_mask = need_value = 0
  for f, required in opcode.fixed.items():
    fl = fmt.fields[f]
    need_mask |= fl.mask << fl.lo
    need_value |= (required & fl.mask) << fl.lo
  literal_fields = tuple((fmt.fields[f].lo, fmt.fields[f].mask) for f in opcode.operand_fields
                         if f in fmt.fields and fmt.fields[f].kind in ("src", "ssrc"))
  return opcode, need_mask, need_value, opcode.has_literal_operand, literal_fields, checks


_KNOWN = 0x1ff << 23 | 0x1ff  # the first dword's bits that pick candidate formats: the encoding, and src0 (DPP)


class Decoder:
  """Per-arch fast decoder: the first dword's top 9 and low 9 bits pick the candidate formats (those of
  decode_order whose fixed bits agree there), the opcode field the plan."""

  def __init__(self, isa: ISA) -> None:
    self.isa = isa
    self.verdicts: dict[tuple, _Verdicts] = {}
    self.plans: dict[tuple[str, int], tuple | bool] = {}  # (format, op) -> plan, or False: made so far
    top = 0x1ff << 23
    fplans: dict[str, dict] = {}  # format -> op -> plan tuple, or False where the generic decoder decides
    self.by_top: list[tuple] = []
    for t in range(512):
      w = t << 23
      cands = []
      for fmt in isa.decode_order:
        if w & fmt.fixed_mask & top != fmt.fixed_value & top: continue
        op = fmt.fields.get("op")  # EXP has none: its opcode is 0
        cands.append((fmt, fmt.fixed_mask, fmt.fixed_value, op.lo if op else 0, op.mask if op else 0, isa.by_op[fmt.name],
                      fplans.setdefault(fmt.name, {}), fmt.size))
      self.by_top.append(tuple(cands))
    self.by_key: dict[int, tuple] = {}  # (top 9 bits, low 9 bits) -> the by_top candidates that agree there too

  def _candidates(self, first: int) -> tuple:
    key = first >> 23 << 9 | first & 0x1ff
    known = first & _KNOWN
    cands = self.by_key[key] = tuple(c for c in self.by_top[first >> 23] if known & c[1] == c[2] & c[1] & _KNOWN)
    return cands

  def decode_at(self, data: bytes, pos: int = 0) -> Instruction:
    """The instruction at data[pos:], as decode_generic(isa, data[pos:]) returns or raises it."""
    if len(data) - pos >= 4:
      first = int.from_bytes(data[pos:pos + 4], "little")
      cands = self.by_key.get(first >> 23 << 9 | first & 0x1ff)
      if cands is None: cands = self._candidates(first)
      for fmt, fmask, fvalue, op_lo, op_mask, ops, fplans, size in cands:
        if first & fmask & 0xffffffff != fvalue & 0xffffffff: continue
        if len(data) - pos < size: break
        word = first if size == 4 else int.from_bytes(data[pos:pos + size], "little")
        if word & fmask != fvalue: continue  # fixed bits past the first dword (VOP3 DPP's src0 = 250/233/234)
        op = word >> op_lo & op_mask
        plan = fplans.get(op)
        if plan is None:
          opc = ops.get(op)
          if opc is None: continue  # VOP3 and VOP3SD share fixed bits: the opcode says which
          plan = fplans[op] = self.plans[(fmt.name, op)] = self._plan(opc) or False
        if plan is False: break
        opc, need_mask, need_value, literal_always, literal_fields, checks = plan
        if word & need_mask != need_value: break
        literal = None
        need = literal_always
        if not need:
          for lo, m in literal_fields:
            if word >> lo & m == 255: need = True; break
        if need:
          if len(data) - pos < size + 4: break
          literal = int.from_bytes(data[pos + size:pos + size + 4], "little")
        for lo, m, verdicts in checks:
          if not verdicts[word >> lo & m]: break
        else: return DecodedInstruction(self.isa, opc, word, literal, size + 4 if need else size)
        break
    # a window, not the whole rest: no instruction is near 64 bytes, and a shorter rest is passed whole, so the
    # generic decoder sees the same lengths in its checks and messages
    return decode_generic(self.isa, data[pos:pos + 64])

  # --- plans ------------------------------------------------------------------------------------------------

  def _table(self, key: tuple, ok) -> _Verdicts:
    t = self.verdicts.get(key)
    if t is None: t = self.verdicts[key] = _Verdicts(ok)
    return t

  def _plan(self, opc: Opcode) -> tuple | None:
    """The checks that stand for the printer's, or None when some operand or modifier is not covered."""
    if not covered(opc): return None
    checks = []
    for spec in opc.operands:
      if isinstance(spec, str): continue
      c = self._operand_check(opc, spec)
      if c is None: return None
      checks += c
    for name, syn in opc.mods.items():
      c = self._modifier_check(opc, name, syn)
      if c is None: return None
      checks += c
    # a field checked twice (an operand and a modifier) keeps both checks; no two checks interact
    return make_plan(opc, tuple(checks))

  def _field(self, opc: Opcode, name: str, key: tuple, ok) -> list:
    f = opc.fmt.fields[name]
    return [(f.lo, f.mask, self._table(key, ok))]

  def _operand_check(self, opc: Opcode, spec: tuple) -> list | None:
    """Verdicts for one operand, mirroring hcq.asm.printer.render's branch for it; None where it is not covered."""
    isa, fmt = self.isa, opc.fmt
    name, file, count, ctype, valid = spec[0], spec[1], spec[2], spec[3], spec[4]
    if file == "a": return None  # gfx9 AGPR operands: the printer's own branch
    if name == "literal": return [] if valid is None else None  # the printer tests a literal's mask against 0
    if name not in fmt.fields: return None
    kind = fmt.fields[name].kind
    valu = getattr(fmt, "family", fmt.name) in VALU  # as the printer: a DPP form reads like its base encoding
    smem_gfx11 = fmt.name == "SMEM" and name == "soffset" and "offset" not in opc.operand_fields
    out = []
    if valid is not None and not smem_gfx11:
      out += self._field(opc, name, ("valid", valid), lambda v: v >= 256 or valid >> v & 1)
    if ctype == "smem9":  # gfx9 SMEM: the printer reads soffset (with soe) or the offset's low bits (neither imm
      # nor soe) as an SGPR; valid here when both are, which is enough for every soe/imm
      if not {"soe", "imm", "soffset"} <= opc.fmt.fields.keys(): return None
      sgpr = lambda v: scalar_text(isa, v, 1) is not None
      return out + self._field(opc, "soffset", ("smem9", "soffset"), sgpr) + self._field(opc, name, ("smem9", "offset"), lambda v: sgpr(v & 0x7f))
    if fmt.name == "SMEM" and name in ("offset", "soffset"):
      # gfx11 prints soffset or the offset, gfx12 the offset after any soffset: soffset must be null or print
      other = "offset" if name == "soffset" else "soffset"
      if other in opc.operand_fields: return None
      return out + self._field(opc, "soffset", ("smem-soffset",), lambda v: v == NULL or scalar_text(isa, v, 1) is not None)
    if file == "i":
      syntax = ctype or "{ihex}"
      if not syntax.startswith("named:"): return out
      what = syntax[6:]
      if what == "attr": return None
      probe = _Probe(isa, opc)
      return out + self._field(opc, name, ("named", what, opc.name), lambda v: named.render(what, v, probe) is not None)
    if kind in ("src", "ssrc"):
      v128 = file == "v128" and count != "l"
      return out + self._field(opc, name, ("src", file, count, ctype, valu, v128),
                               lambda v: v == 255 or not (v128 and v >= 384) and source_text(isa, v, spec, None, valu) is not None)
    if kind == "srsrc": return out + self._field(opc, name, ("srsrc",), lambda v: scalar_text(isa, v * 4, 4) is not None)
    if kind == "vdsty" or fmt.name == "EXP" and name.startswith("vsrc"): return out
    if kind == "sbase":
      return out + self._field(opc, name, ("sbase", count),
                               lambda v: scalar_text(isa, v * 2 & ~(count - 1 if count > 2 else 1), count) is not None)
    if file[0] == "v":
      if fmt.name in ("GLOBAL", "SCRATCH") and name == "addr": return out
      v128 = file == "v128" and count != "l"
      return out + self._field(opc, name, ("vgpr", count, v128),
                               lambda v: not (v128 and v >= 128) and (count == "l" or v + count <= 256))
    if fmt.name in ("GLOBAL", "SCRATCH") and name == "saddr":
      n = 2 if fmt.name == "GLOBAL" else 1
      return out + self._field(opc, name, ("saddr", n), lambda v: v == isa.saddr_off or scalar_text(isa, v, n) is not None)
    return out + self._field(opc, name, ("scalar", count), lambda v: scalar_text(isa, v, count) is not None)

  def _modifier_check(self, opc: Opcode, name: str, syn: str) -> list | None:
    """Verdicts for one modifier, mirroring hcq.asm.printer._modifiers; None where it is not covered."""
    head = syn.split(",")[0]
    if head in ("neg", "abs"):
      zero = printer.rejected_bits(syn)
      return self._field(opc, name, ("nozero", zero), lambda v: not v & zero) if zero else []
    if syn.startswith(("text:", "flag:")) or syn == "omod": return []
    if syn.startswith(("op_sel:", "op_sel_hi:", "neg_lo:", "neg_hi:")): return []
    if syn == "named:swizzle": return None
    if syn.startswith("acc:"): return self._field(opc, name, ("zero",), lambda v: v == 0)  # gfx90a+ AGPR data: generic
    if "{ds16}" in syn: return []
    if syn.startswith("named:"):
      what = syn[6:]
      if what == "attr" or name not in opc.fmt.fields: return None
      probe = _Probe(self.isa, opc)
      return self._field(opc, name, ("named", what, opc.name), lambda v: named.render(what, v, probe) is not None)
    if opc.fmt.name == "SMEM" and name == "offset": return []
    if syn.startswith("thscope:") or syn.startswith("enum:") and name == "th" and "th_scope" in self.isa.names:
      # gfx12: th's name is looked up by th and scope together; a th valid with every scope is valid
      table = self.isa.names[syn[8:].split(",")[0] if syn.startswith("thscope:") else "th_scope"]
      n = len(syn[5:].split("|")) if syn.startswith("enum:") else 1 << 30
      return self._field(opc, name, ("thscope", id(table), n), lambda v: v < n and all(v * 4 + s in table for s in range(4)))
    if syn.startswith("enum:"):
      n = len(syn[5:].split("|"))
      return self._field(opc, name, ("enum", n), lambda v: v < n)
    if head == "unknown": return self._field(opc, name, ("zero",), lambda v: v == 0)
    if name not in opc.fmt.fields or split_syntax(syn)[1] not in NUMBER_FORMATS: return None
    return []  # a number: prints for every value


def decoder(isa: ISA) -> Decoder:
  """The fast decoder of an arch (made once per process)."""
  return isa.helper(Decoder)


def decode_all_at(isa: ISA, data: bytes) -> list[Instruction]:
  """Every instruction in `data`; DecodeError names the byte offset it cannot decode."""
  decode_at = decoder(isa).decode_at
  out: list[Instruction] = []
  append, pos, n = out.append, 0, len(data)
  while pos < n:
    try: inst = decode_at(data, pos)
    except DecodeError as e: raise DecodeError(f"at byte {pos}: {e}") from None
    append(inst)
    pos += inst.size
  return out
