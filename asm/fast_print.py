"""Printing without re-reading the table: per-opcode printers, made on first use from the opcode's operand and
modifier specs, with each operand's text memoised per field value through the printer's own helpers.

A printer covers the opcodes whose operands and modifiers it knows; for any other opcode, and whenever a field
value has no memoised text (llvm-mc would reject it), it hands the instruction to hcq.asm.printer.render, which
prints it or raises its own error. A decoded instruction whose fields were not read yet is printed by a function
compiled once per opcode from the same printers, straight from the word. tests/test_asm_fast.py checks that all
of these give render's text on random words and every opcode's samples.
"""
from __future__ import annotations

from hcq.asm import named, printer
from hcq.asm.codegen import make_function
from hcq.asm.fast_decode import NULL, NUMBER_FORMATS, VALU, DecodedInstruction, _Probe, covered
from hcq.asm.instruction import Instruction
from hcq.asm.isa import ISA, Opcode
from hcq.asm.numbers import number_text, split_syntax
from hcq.asm.operands import literal_text, scalar_text, source_text, vgpr_text


class _Texts(dict):
  """value -> an operand's text, or None where the printer rejects the value (computed once by `text`).
  `registers`: the texts are operands that are never empty (registers, sources)."""
  __slots__ = ("text", "registers")

  def __init__(self, text, registers: bool = False) -> None:
    super().__init__()
    self.text, self.registers = text, registers

  def __missing__(self, value: int) -> str | None:
    try: t = self.text(value)
    except Exception: t = None  # the generic printer raises its own error
    self[value] = t
    return t


class _Fallback(Exception):
  """This instruction needs the generic printer."""


class Printer:
  """Per-arch printers, one per opcode, made on first use."""

  def __init__(self, isa: ISA) -> None:
    self.isa = isa
    self.texts: dict[tuple, _Texts] = {}
    self.plans: dict[int, tuple | None] = {}  # by id(opcode): opcodes live as long as their ISA
    self.word_printers: dict[int, object] = {}  # by id(opcode): _compile_word_printer's, or None; made on first use

  def render(self, inst: Instruction) -> str:
    opc = inst.opcode
    plan = self.plans.get(id(opc), False)
    if plan is False: plan = self.plan_of(opc)
    if plan is None: return printer.render(inst)
    if type(inst) is DecodedInstruction and inst._values is None:  # straight from the word, when it can
      wp = self.word_printers.get(id(opc), False)
      if wp is False: wp = self.word_printers[id(opc)] = _compile_word_printer(opc, plan)
      if wp:
        t = wp(inst.word, inst.literal, inst)
        if t is not None: return t
    operands, mods, head, vopd = plan
    v = inst.values
    try:
      out = []
      for f in operands:
        t = f(v, inst)
        if t: out.append(t)
      tail = []
      for f in mods:
        t = f(v)
        if t: tail.append(t)
    except (_Fallback, KeyError):
      return printer.render(inst)
    if vopd:
      i = out.index("::")
      x, y = head
      text = f"{x} {', '.join(out[:i])} :: {y} {', '.join(out[i + 1:])}"
    else: text = head + " " + ", ".join(out) if out else head
    return text + " " + " ".join(tail) if tail else text

  def plan_of(self, opc: Opcode) -> tuple | None:
    """The opcode's printer plan (None: render prints it), made on first use."""
    plan = self.plans.get(id(opc), False)
    if plan is False: plan = self.plans[id(opc)] = self._plan(opc)
    return plan

  def _table(self, key: tuple, text) -> _Texts:
    t = self.texts.get(key)
    if t is None: t = self.texts[key] = _Texts(text, key[0] in ("src", "srsrc", "sbase", "vgpr", "saddr", "scalar", "smem-soffset"))
    return t

  # --- plans ------------------------------------------------------------------------------------------------

  def _plan(self, opc: Opcode) -> tuple | None:
    fmt = opc.fmt
    if not covered(opc) or fmt.name == "EXP" or opc.returned is not None: return None  # returned vdst: generic
    neg_abs = [(f, syn.split(",")[0], int(f[-1]) if f[-1].isdigit() else 0, int(syn.split("only:")[1]) if "only:" in syn else -1)
               for f, syn in opc.mods.items() if syn.split(",")[0] in ("neg", "abs")]
    sext = printer.sext_mask(opc)
    operands = []
    src_index = 0
    for spec in opc.operands:
      if isinstance(spec, str):
        operands.append(_word(lambda v, inst, s=spec: s, ("const", spec)))
        continue
      f = self._operand(opc, spec, src_index, neg_abs, sext)
      if f is None: return None
      operands.append(f)
      if spec[0] in fmt.fields and fmt.fields[spec[0]].kind in ("src", "ssrc"): src_index += 1
    mods = []
    if fmt.name == "SMEM" and "offset" in opc.mods:  # before glc/dlc
      bits = fmt.fields["offset"].bits
      mods.append(_word(lambda v: "offset:" + number_text(v["offset"], "shex", bits) if v.get("offset") and v.get("soffset") != NULL else "",
                        ("smem_offset_mod", "offset", bits)))
    ds16 = False
    for name, syn in opc.mods.items():
      if ("{ds16}" in syn or syn == "named:swizzle") and ds16: continue
      m = self._modifier(opc, name, syn)
      if m is None: return None
      if m is not _NOTHING: mods.append(m)
      ds16 = ds16 or "{ds16}" in syn
    vopd = fmt.name == "VOPD"
    head = tuple(opc.mnemonic.split("::")) if vopd else opc.mnemonic
    return tuple(operands), tuple(mods), head, vopd

  def _operand(self, opc: Opcode, spec: tuple, src_index: int, neg_abs: list, sext: int):
    """fn(values, inst) -> the operand's text, mirroring hcq.asm.printer.render's branch for it; None if not covered."""
    isa, fmt = self.isa, opc.fmt
    name, file, count, ctype, valid = spec[0], spec[1], spec[2], spec[3], spec[4]
    fields = fmt.fields
    if file == "a": return None  # gfx9 AGPR operands: the printer's own branch
    if ctype == "smem9":
      if not {"soe", "imm", "soffset"} <= fields.keys(): return None
      sgprs = self._table(("smem-soffset",), lambda x: scalar_text(isa, x, 1))
      return _word(lambda v, inst: printer._smem9_offset(inst), ("smem9", name, sgprs, fields[name].bits))
    if name == "literal":
      if valid is not None: return None
      nfmt = split_syntax(ctype)[1]
      return _word(lambda v, inst: number_text(inst.literal, nfmt, 32), ("literal", nfmt))
    if name not in fields: return None
    kind = fields[name].kind
    smem_gfx11 = fmt.name == "SMEM" and name == "soffset" and "offset" not in opc.operand_fields
    if fmt.name == "SMEM" and name in ("offset", "soffset"):
      soffset = self._table(("smem-soffset",), lambda x: scalar_text(isa, x, 1))
      if smem_gfx11:  # the printer skips the valid mask here
        return _word(lambda v, inst: printer._smem_offset(inst), ("smem_offset", "soffset", soffset, fields["offset"].bits, False))
      if name == "offset" and "soffset" not in opc.operand_fields and valid is None:
        return _word(lambda v, inst: printer._smem_offset12(inst), ("smem_offset", "soffset", soffset, fields["offset"].bits, True))
      return None

    def table(key, text):
      t = self._table(key + (valid,), lambda x: None if valid is not None and x < 256 and not valid >> x & 1 else text(x))

      def f(v, inst):
        s = t[v[name]]
        if s is None: raise _Fallback
        return s
      f.word = ("table", name, t)
      return f, t
    if file == "i":
      syntax = ctype or "{ihex}"
      bits = fields[name].bits
      if syntax.startswith("named:"):
        what = syntax[6:]
        if what == "attr": return None
        probe = _Probe(isa, opc)
        return table(("named", what, opc.name), lambda x: named.render(what, x, probe))[0]
      prefix, nfmt, _ = split_syntax(syntax)
      if nfmt not in NUMBER_FORMATS: return None
      return table(("number", prefix, nfmt, bits), lambda x: prefix + number_text(x, nfmt, bits))[0]
    if kind in ("src", "ssrc"):
      valu = getattr(fmt, "family", fmt.name) in VALU  # as the printer: a DPP form reads like its base encoding
      v128 = file == "v128" and count != "l"
      _, t = table(("src", count, ctype, valu, v128),
                   lambda x: None if v128 and x >= 384 else source_text(isa, x, spec, None, valu))
      i = int(name[-1]) if name[-1].isdigit() else src_index
      is_sext = sext >> i & 1
      literal_ok = valid is None or valid >> 255 & 1

      def src(v, inst):
        x = v[name]
        if x == 255:
          if inst.literal is None or not literal_ok: raise _Fallback
          s = literal_text(inst.literal, ctype)
        else:
          s = t[x]
          if s is None: raise _Fallback
        if not neg_abs: return s
        neg = absm = 0  # as printer.source_modifiers: each field shifted to its source
        for f, k, shift, read in neg_abs:
          if k == "neg": neg |= v.get(f, 0) << shift
          else: absm |= (v.get(f, 0) & read) << shift
        if absm >> i & 1: s = f"|{s}|"
        if neg >> i & 1:
          if is_sext: s = f"sext({s})"
          else:
            constant = 128 <= x <= 208 or 240 <= x <= 248 or x == 255
            s = f"neg({s})" if constant and not absm >> i & 1 else f"-{s}"
        return s
      src.word = ("src", name, t, ctype, literal_ok, i, is_sext, neg_abs)
      return src
    if kind == "srsrc": return table(("srsrc",), lambda x: scalar_text(isa, x * 4, 4))[0]
    if valid is not None and (kind == "vdsty" or fmt.name in ("GLOBAL", "SCRATCH") and name == "addr"): return None
    if kind == "vdsty":  # VOPD: the second destination's low bit is the opposite of the first's
      texts = self._table(("vgpr", 1, False), lambda x: vgpr_text(x, 1))
      return _word(lambda v, inst: vgpr_text(v[name] << 1 | (v["vdstx"] & 1 ^ 1), 1), ("vdsty", name, texts))
    if kind == "sbase": return table(("sbase", count), lambda x: scalar_text(isa, x * 2 & ~(count - 1 if count > 2 else 1), count))[0]
    if file[0] == "v":
      if name in ("src0", "vsrc1") and neg_abs: return None  # DPP sources with neg/abs: the generic printer
      if fmt.name in ("GLOBAL", "SCRATCH") and name == "addr":
        texts = tuple(self._table(("vgpr", n, False), lambda x, n=n: vgpr_text(x, n)) for n in (1, 2))
        return _word(lambda v, inst: printer._flat_addr(inst, count), ("flat_addr", "addr", texts, fmt.name == "GLOBAL", isa.saddr_off))
      v128 = file == "v128" and count != "l"
      return table(("vgpr", count, v128),
                   lambda x: None if v128 and x >= 128 or count != "l" and x + count > 256 else vgpr_text(x, count))[0]
    if fmt.name in ("GLOBAL", "SCRATCH") and name == "saddr":
      n = 2 if fmt.name == "GLOBAL" else 1
      return table(("saddr", n), lambda x: "off" if x == isa.saddr_off else scalar_text(isa, x, n))[0]
    return table(("scalar", count), lambda x: scalar_text(isa, x, count))[0]

  def _modifier(self, opc: Opcode, name: str, syn: str):
    """fn(values) -> the modifier's text ('' for none), mirroring hcq.asm.printer._modifiers; None if not covered."""
    head = syn.split(",")[0]
    fields = opc.fmt.fields
    if syn.startswith("text:"):
      word = syn[5:]
      return _word(lambda v: word, ("const", word))
    if syn.startswith("flag:"):
      word = syn[5:].split(",")[0]
      return _word(lambda v: word if v.get(name, 0) else "", ("flag", name, word))
    if syn == "omod": return _word(lambda v: printer.OMOD[v["omod"]] if v.get("omod") else "", ("omod", "omod"))
    if head in ("neg", "abs"): return _NOTHING
    if syn.startswith(("op_sel:", "op_sel_hi:", "neg_lo:", "neg_hi:")):
      # the text depends on this field alone (op_sel_hi: on opsel_hi and opsel_hi2): a table keyed by their bits
      layout, at = [], 0
      for f in (("opsel_hi", "opsel_hi2") if syn.startswith("op_sel_hi:") else (name,)):
        if f in fields: layout.append((f, at, fields[f].mask)); at += fields[f].bits
      texts = self._table(("bits", opc.name, name, tuple(layout)),
                          lambda key: printer._bit_list(_Values({f: key >> a & m for f, a, m in layout}, opc), name, syn))
      return _word(lambda v: printer._bit_list(_Values(v, opc), name, syn), ("bits", name, texts, tuple(layout)))
    if syn == "named:swizzle": return None
    if syn.startswith("acc:"):  # gfx90a+: the bit makes operands AGPRs, which the generic printer names
      return _word(lambda v: _or_fallback(None) if v.get(name, 0) else "", ("zero", name))
    if "{ds16}" in syn:
      return _word(lambda v: (lambda off: f"offset:{off}" if off else "")(v.get("offset1", 0) << 8 | v.get("offset0", 0)), ("ds16", "offset0"))
    if syn.startswith("named:"):
      what = syn[6:]
      if what == "attr": return None
      probe = _Probe(self.isa, opc)
      t = self.texts.get(("named", what, opc.name, None))
      if t is None: t = self.texts[("named", what, opc.name, None)] = _Texts(lambda x: named.render(what, x, probe))
      return _word(lambda v: _or_fallback(t[v.get(name, 0)]), ("table", name, t))
    if opc.fmt.name == "SMEM" and name == "offset": return _NOTHING
    if syn.startswith("thscope:") or syn.startswith("enum:") and name == "th" and "th_scope" in self.isa.names:
      # gfx12: th's name is looked up by th and scope together (the printer's names table): keyed by their bits
      table = self.isa.names[syn[8:].split(",")[0] if syn.startswith("thscope:") else "th_scope"]
      n = len(syn[5:].split("|")) if syn.startswith("enum:") else 1 << 30
      layout = tuple((f, a, fields[f].mask) for f, a in ((name, 2), ("scope", 0)) if f in fields)
      texts = self._table(("thscope", opc.name, name, layout), lambda key: table[key] if key >> 2 < n else None)
      return _word(lambda v: _or_fallback(texts[v.get(name, 0) << 2 | v.get("scope", 0)]), ("bits", name, texts, layout))
    if syn.startswith("enum:"):
      words = syn[5:].split("|")
      return _word(lambda v: words[v.get(name, 0)] if v.get(name, 0) < len(words) else _or_fallback(None), ("enum", name, words))
    if head == "unknown": return _word(lambda v: _or_fallback(None) if v.get(name, 0) else "", ("zero", name))
    prefix, nfmt, omit_zero = split_syntax(syn)
    if name not in fields or nfmt not in NUMBER_FORMATS: return None
    bits = fields[name].bits
    return _word(lambda v: prefix + number_text(v.get(name, 0), nfmt, bits) if v.get(name, 0) or not omit_zero else "",
                 ("number", name, prefix, nfmt, bits, omit_zero))


_NOTHING = object()  # a modifier that prints nothing of its own


def _word(f, how: tuple):
  """f, labelled with how a word printer does the same from the instruction word (see _compile_word_printer)."""
  f.word = how
  return f


def _compile_word_printer(opc: Opcode, plan: tuple):
  """fn(word, literal, inst) -> the text render gives, or None (the caller then renders from the values), compiled
  once per opcode from its plan when every part of the plan says how to work from the word: the fields are read
  by shift and mask, no values dict is made. None when some part needs the values."""
  env: dict = {"FAIL": None}
  body = word_text_code(opc, plan, env, values_ok=True)
  if body is None: return None
  return make_function(["def word_text(w, lit, inst):"] + body + ["  return text"], env, "word_text")


def word_text_code(opc: Opcode, plan: tuple, env: dict, values_ok: bool, wrap=None) -> list[str] | None:
  """Lines of a function body that set `text` to what render gives for the instruction word `w` and literal `lit`
  (or return FAIL, a name the caller puts in `env`, where render must decide), made from a printer plan, with
  the names they use put in `env`. Parts of the plan that read the values call them through `inst` when
  values_ok, else the answer is None. wrap(table, field, unseen) may stand in another table for a field's texts
  (`unseen`: values the code never looks up in it)."""
  operands, mods, head, vopd = plan
  fields = opc.fmt.fields
  env.update({"literal_text": literal_text, "number_text": number_text, "OMOD": printer.OMOD, "HEAD": head, "_Fallback": _Fallback})
  code: list[str] = []
  ops: list[tuple[str, bool]] = []  # each operand's variable, and whether its text may be empty (then not printed)
  tail_at: int | None = None  # where the modifiers' lines start: they add to the text the operands make

  def field(name: str) -> str | None:
    f = fields.get(name)
    return None if f is None else f"(w >> {f.lo} & {f.mask})"

  def lookup(k: int, table: _Texts, name: str, at: str, indent: str = "  ", unseen: tuple = ()) -> list[str]:
    """t = the table's text at `at` (never one of the values `unseen`), returning FAIL where it has none (or, for
    register texts, an empty one)."""
    env[f"A{k}"] = wrap(table, name, unseen) if wrap else table
    return [f"{indent}t = A{k}[{at}]", f"{indent}if {'not t' if table.registers else 't is None'}: return FAIL"]

  def emit(k: int, out: str, empty: bool) -> None:
    """The part's text `t` becomes operand p<k>, or is added to the modifiers when not empty."""
    if out == "ops": code.append(f"  p{k} = t"); ops.append((f"p{k}", empty))
    else: code.append("  if t: text += ' ' + t" if empty else "  text += ' ' + t")

  for k, (part, out) in enumerate([(f, "ops") for f in operands] + [(f, "tail") for f in mods]):
    if out == "tail" and tail_at is None: tail_at = len(code)
    how = getattr(part, "word", None)
    if how is None:  # this part reads the values (and the printer's helpers): unpacked for it alone
      if not values_ok: return None
      env[f"F{k}"] = part
      code += ["  try:", f"    t = F{k}(inst.values, inst)" if out == "ops" else f"    t = F{k}(inst.values)",
               "  except (_Fallback, KeyError): return FAIL"]
      emit(k, out, True)
      continue
    kind, name = how[0], how[1]
    x = None if kind in ("const", "literal") else field(name)
    if kind not in ("const", "literal") and x is None: return None
    if kind == "const":
      if name: code.append(f"  t = {name!r}"); emit(k, out, False)
    elif kind == "table":
      code += lookup(k, how[2], name, x)
      emit(k, out, not how[2].registers)
    elif kind == "src":
      _, _, _, ctype, literal_ok, i, is_sext, neg_abs = how
      env[f"B{k}"], env[f"C{k}"] = ctype, literal_ok
      code += [f"  x = {x}", "  if x == 255:", f"    if lit is None or not C{k}: return FAIL", f"    t = literal_text(lit, B{k})",
               "  else:"] + lookup(k, how[2], name, "x", "    ", (255,))
      if neg_abs:  # as printer.source_modifiers: each neg/abs field shifted to its source
        negs = [f"{field(f)} << {shift}" for f, kd, shift, _ in neg_abs if kd == "neg" and field(f)] or ["0"]
        abss = [f"({field(f)} & {read}) << {shift}" for f, kd, shift, read in neg_abs if kd == "abs" and field(f)] or ["0"]
        code += [f"  neg = {' | '.join(negs)}", f"  absm = {' | '.join(abss)}", f"  if absm >> {i} & 1: t = '|' + t + '|'",
                 f"  if neg >> {i} & 1:"]
        if is_sext: code.append("    t = 'sext(' + t + ')'")
        else: code.append(f"    t = 'neg(' + t + ')' if (128 <= x <= 208 or 240 <= x <= 248 or x == 255) and not absm >> {i} & 1 else '-' + t")
      emit(k, out, not how[2].registers)
    elif kind == "literal":
      code += ["  if lit is None: return FAIL", f"  t = number_text(lit, {name!r}, 32)"]
      emit(k, out, True)
    elif kind == "flag": code.append(f"  if {x}: text += {' ' + how[2]!r}")
    elif kind == "omod": code += [f"  x = {x}", "  if x: text += ' ' + OMOD[x]"]
    elif kind == "enum":
      env[f"A{k}"] = how[2]
      code += [f"  x = {x}", f"  if x >= {len(how[2])}: return FAIL", f"  t = A{k}[x]"]
      emit(k, out, True)
    elif kind == "zero": code.append(f"  if {x}: return FAIL")
    elif kind == "number":
      _, _, prefix, nfmt, bits, omit_zero = how
      code += [f"  x = {x}", f"  t = {prefix!r} + number_text(x, {nfmt!r}, {bits})" + (" if x else ''" if omit_zero else "")]
      emit(k, out, True)
    elif kind == "smem_offset":  # printer._smem_offset(12): the offset when soffset is null, else the register
      soffset, offset = x, field("offset")
      code += [f"  if {soffset} == {NULL}: t = number_text({offset}, 'shex', {how[3]})" + ("" if how[4] else " if " + offset + " else 'null'"),
               "  else:"] + lookup(k, how[2], "soffset", soffset, "    ", (NULL,))
      if how[4]: code.append(f"    t += ' offset:' + number_text({offset}, 'shex', {how[3]})")
      emit(k, out, False)
    elif kind == "smem9":  # printer._smem9_offset: soffset (and the offset with imm) with soe, else the offset or
      env[f"A{k}"] = how[2]  # its low bits as an SGPR
      bits = how[3]
      code += [f"  if {field('soe')}:", f"    t = A{k}[{field('soffset')}]", "    if not t: return FAIL",
               f"    if {field('imm')}: t += ' offset:' + number_text({x}, 'shex', {bits})",
               f"  elif {field('imm')}: t = number_text({x}, 'shex', {bits})", "  else:", f"    t = A{k}[{x} & 127]", "    if not t: return FAIL"]
      emit(k, out, False)
    elif kind == "smem_offset_mod":
      soffset = field("soffset")
      code.append(f"  if {x}{'' if soffset is None else f' and {soffset} != {NULL}'}: text += ' offset:' + number_text({x}, 'shex', {how[2]})")
    elif kind == "flat_addr":  # printer._flat_addr: GLOBAL's address is 64-bit without saddr; SCRATCH's is 'off' without sve
      env[f"B{k}"], env[f"C{k}"] = how[2]
      if field("saddr" if how[3] else "sve") is None: return None
      if how[3]: code.append(f"  t = (C{k} if {field('saddr')} == {how[4]} else B{k})[{x}]")
      else: code.append(f"  t = B{k}[{x}] if {field('sve')} else 'off'")
      code.append("  if not t: return FAIL")
      emit(k, out, False)
    elif kind == "vdsty":
      if field("vdstx") is None: return None
      env[f"A{k}"] = how[2]  # keyed by two fields' bits: no one field's verdicts fold into it
      code += [f"  t = A{k}[{x} << 1 | ({field('vdstx')} & 1 ^ 1)]", "  if not t: return FAIL"]
      emit(k, out, False)
    elif kind == "bits":
      if not how[3]: return None
      env[f"A{k}"] = how[2]  # keyed by several fields' bits: no one field's verdicts fold into it
      code += [f"  t = A{k}[{' | '.join(f'{field(f)} << {a}' for f, a, _ in how[3])}]", "  if t is None: return FAIL"]
      emit(k, out, True)
    elif kind == "ds16":
      hi = field("offset1")
      code += [f"  x = {x}" + ("" if hi is None else f" | {hi} << 8"), "  if x: text += ' offset:' + str(x)"]
    else: return None
  at = len(code) if tail_at is None else tail_at
  if vopd:
    made = ["  ops = [" + ", ".join(p for p, _ in ops) + "]", "  i = ops.index('::')",
            "  text = f\"{HEAD[0]} {', '.join(o for o in ops[:i] if o)} :: {HEAD[1]} {', '.join(o for o in ops[i + 1:] if o)}\""]
  elif not ops: made = ["  text = HEAD"]
  elif not any(empty for _, empty in ops): made = ["  text = f'{HEAD} " + ", ".join("{" + p + "}" for p, _ in ops) + "'"]
  else: made = ["  ops = [o for o in (" + "".join(p + ", " for p, _ in ops) + ") if o]", "  text = HEAD + ' ' + ', '.join(ops) if ops else HEAD"]
  return code[:at] + made + code[at:]  # names and numbers from the opcode's plan only
def _or_fallback(t: str | None) -> str:
  if t is None: raise _Fallback
  return t


class _Values:
  """What printer._bit_list reads of an instruction: its values and opcode."""
  __slots__ = ("values", "opcode")

  def __init__(self, values: dict, opcode: Opcode) -> None: self.values, self.opcode = values, opcode


def printer_of(isa: ISA) -> Printer:
  """The fast printer of an arch (made once per process)."""
  return isa.helper(Printer)


def render(inst: Instruction) -> str:
  """The instruction as llvm-mc prints it (hcq.asm.printer.render's text, or its DecodeError)."""
  return printer_of(inst.isa).render(inst)


def render_all(insts: list[Instruction]) -> list[str]:
  if not insts: return []
  p = printer_of(insts[0].isa)
  return [p.render(i) for i in insts]
