"""Classify raw probe results into table records: how each number field prints, and what each modifier field is."""
from __future__ import annotations
import re

from hcq.asm.generator.shapes_gfx9 import gcn_special
from hcq.asm.generator.probe import LITERAL, RawShape, register_shape

_NAMED = re.compile(r"^(?:[a-z_0-9]+:)?([a-z_0-9]+)\(")


def number_syntax(raw: RawShape, f: str, bits: int) -> str | None:
  """How a number field prints: '[prefix:]{fmt}[,z]' with fmt hex (always hex), ihex (decimal up to 64, else hex),
  dec, sdec (signed decimal); ',z' when a zero value prints nothing; 'named:<word>' for symbolic syntaxes such as
  hwreg(...); None when the field never prints."""
  seen = raw.numbers.get(f, {})
  base = seen.get(0)
  mask = (1 << bits) - 1

  def token_for(v: int) -> str | None:
    """The token the field prints for probe value v (the field holds v masked to its width)."""
    toks = seen.get(v)
    if toks is None: return None
    new = [t for t in toks if base is None or t not in base or toks.count(t) != base.count(t)]
    if len(toks) == len(base or []) and base is not None:
      new = [t for t, b in zip(toks, base) if t != b]
    return new[0] if len(new) == 1 else None

  if "|" in (token_for(0xe000) or "") and "(" not in (token_for(0x1234) or "("): return "named:bits"  # s_version 72|UC_VERSION_MDP_BIT
  if bits <= 3:  # a small field printed by name (gfx12's th:TH_LOAD_NT, scope:SCOPE_SE): every value's token, in order
    texts = {}
    for v in sorted(seen, key=lambda v: v & mask):
      if seen[v] is None: continue
      t = token_for(v) if v & mask else ""
      texts.setdefault(v & mask, t or "")
    if len(texts) == 1 << bits and any(t and not re.fullmatch(r"[\w]*:?-?(0x)?[0-9a-f]+", t) for t in texts.values()):
      return "enum:" + "|".join(texts[i] for i in range(1 << bits))
  for v in (0x1234, 0, 1, 7):
    t = token_for(v) if v else next((x for x in base or [] if "(" in x), None)
    m = _NAMED.match(t or "")
    if m: return f"named:{m.group(1)}"
  # a value the field can hold: 0x1234 masks to 0 in a 1-bit field (gfx12's wait_vm_vsrc), 7 does not
  probe_value = next((v for v in (0x1234, 7) if v & mask and token_for(v) is not None), 0x1234)
  t = token_for(probe_value)
  if t is None: return None
  prefix = t[:t.index(":") + 1] if ":" in t else ""
  body = t[len(prefix):]
  neg = token_for(-16)
  small = token_for(7)
  value = probe_value & mask
  signed = value - (1 << bits) if value >> (bits - 1) else value
  if body in (f"0x{value:x}", f"-0x{-signed:x}"):
    fmt = "hex" if small is not None and small.endswith("0x7") else "ihex"
    if body.startswith("-") or (neg is not None and neg.endswith("-0x10")): fmt = "s" + fmt
  elif body in (str(value), str(signed)): fmt = "sdec" if body == str(signed) != str(value) or (neg is not None and neg.endswith("-16")) else "dec"
  elif body.startswith("["): return f"named:{prefix.rstrip(':')}"  # format:[BUF_FMT_32_FLOAT]
  else: return f"named:{body.split('(')[0]}"
  zero_printed = base is not None and any(x == f"{prefix}0" or x == f"{prefix}0x0" for x in base)
  positional = any(isinstance(o, tuple) and o[0] == f for o in raw.operands)
  if prefix and base is not None and not any(x.startswith(prefix) for x in base):
    positional = False  # a keyword that vanishes at zero (MIMG's dmask:0x1 in the base word) is no positional operand
  return f"{prefix}{{{fmt}}}" + ("" if zero_printed or positional else ",z")


def modifier_syntax(f: str, tokens: list[tuple[str, str]], grew: int) -> str:
  """What a modifier field is, from the tokens printed when it is set to 1 (grew: how many tokens it added)."""
  words = [t for _, t in tokens]
  if not words: return "unknown"
  w = words[-1]
  if w.startswith(("-", "sext(")): return "neg"
  if w.startswith("|"): return "abs"
  if w.startswith(("op_sel:", "op_sel_hi:", "neg_lo:", "neg_hi:")):
    name, _, lst = w.partition(":")
    return f"{name}:{lst.count(',') + 1}"
  if w.startswith("mul:"): return "omod"
  if re.fullmatch(r"[a-z_0-9]+:1", w) and len(words) == 1: return f"flag:{w}"  # DPP's fi:1, bound_ctrl:1
  if re.fullmatch(r"[a-z_0-9]+", w):
    if len(words) == 1: return f"flag:{w}"
    # an atomic's glc returns the old value: a destination register appears in front
    if grew == 2 and register_shape(words[0]): return f"flag:{w},ret:{register_shape(words[0])[1]}"
  return "unknown"


def record(raw: RawShape, fields: dict[str, tuple[int, int, str]]) -> tuple:
  """(op, mnemonic, operands, fixed fields, modifiers in print order, defaults, refused) for the generated table.

  fixed fields: ((field, value), ...) that llvm-mc rejects unless the field holds that value.
  defaults: ((field, value), ...) that print nothing, or that text may leave out, and that llvm-mc's assembler sets.
  refused: ((field, 'value', valid index) | (field, 'bits', mask), ...): operand values (a VALID mask) or modifier bits
  llvm-mc's disassembler prints but its assembler refuses; the builder refuses them too.

  operands: fixed text, or (field, file, count, type) with file v, v128 (VGPRs up to v127 only), s, or i for a number, count an int or 'l' (a 16-bit
  half), type a constant type (sources, see const_type) or a number syntax (numbers, see number_syntax).
  modifiers: (field, syntax) with syntax flag:<word>[,ret:<count>], neg, abs, omod, op_sel:<n>, op_sel_hi:<n>[:0],
  neg_lo:<n>, neg_hi:<n>, or a number syntax."""
  operands = list(raw.operands)
  mods: list[tuple[str, str]] = []
  for f, toks in raw.mods.items():
    hi, lo, kind = fields[f]
    if kind in ("imm", "simm16") or any(isinstance(o, tuple) and o[0] == f for o in operands): continue
    if raw.fmt == "GLOBAL" and f == "saddr": continue  # an address operand, see _addressing
    mods.append((f, modifier_syntax(f, toks, raw.grew.get(f, 0))))
  numbers: dict[str, str] = {}
  for f in raw.numbers:
    hi, lo, kind = fields[f]
    if f in raw.zero or f == "th" and raw.th_names: continue
    if kind == "ssrc" and not any(isinstance(o, tuple) and o[0] == f and o[1] == "i" for o in operands): continue
    syn = "offset:{ds16},z" if f in ("offset0", "offset1") and _ds_offset16(raw) else number_syntax(raw, f, hi - lo + 1)
    if syn is None: continue
    numbers[f] = syn
    if syn.startswith("named:") and not any(isinstance(o, tuple) and o[0] == f for o in operands):
      # a symbolic immediate such as depctr_...(0) owns the operand text printed for its default value
      operands = [o for o in operands if not isinstance(o, str)] + [(f, "i", 1)]
  if raw.th_names:  # gfx12 VMEM th: names per (th, scope), interned into NAMES by the generator
    numbers["th"] = "thscope:" + "|".join(raw.th_names) + ("" if raw.th_ret is None else f",ret:{raw.th_ret}")
  for i, o in enumerate(operands):
    if isinstance(o, tuple) and o[0] == "opsel_hi" and raw.fmt.split("_DPP")[0] == "VOP3P":
      # v_fma_mix*: op_sel_hi defaults to all zeros, so the base word's all-ones printed as a positional token
      mods.append(("opsel_hi", f"op_sel_hi:{raw.tokens[i][1].count(',') + 1}:0")); operands[i] = None
  operands = [o for o in operands if o is not None]
  mods = [(f, "abs" if syn.startswith("neg_hi") and raw.mods.get(f, [("", "")])[-1][1].startswith("|") else syn) for f, syn in mods]
  mods += [(f, syn) for f, syn in numbers.items() if not any(isinstance(o, tuple) and o[0] == f for o in operands)]
  # op_sel bits an opcode ignores (v_dot2_f16_f16 reads only the destination's): ',bits:<mask>' of those it reads
  mods = [(f, f"neg,sext:{raw.sext}" if syn == "neg" and f == "neg" and raw.sext else syn) for f, syn in mods]
  # DPP's per-source neg0/neg1: an integer source prints sext(v1)
  mods = [(f, f"neg,sext:{1 << int(f[-1])}" if syn == "neg" and f[-1].isdigit() and raw.mods[f][-1][1].startswith("sext(") else syn)
          for f, syn in mods]
  sources = sum(1 for o in operands if isinstance(o, tuple) and o[0] in ("src0", "src1", "src2"))
  mods = [(f, f"abs,only:{raw.abs_read}" if syn == "abs" and f == "abs" and raw.abs_read != (1 << sources) - 1 else syn) for f, syn in mods]
  # neg/abs bits whose word llvm-mc rejects, some but not all: 'neg,zero:4,sext:2' (first after the head, so that
  # 'only:'/'sext:' stay last)
  mods = [(f, f"{f},zero:{raw.rejected_bits[f]}{syn[len(f):]}" if syn.split(",")[0] == f and raw.rejected_bits.get(f) else syn)
          for f, syn in mods]
  full = (1 << 4) - 1 if raw.fmt.split("_DPP")[0] != "VOP3P" else (1 << 3) - 1
  mods = [(f, syn + f",bits:{raw.opsel_bits}" if f == "opsel" and raw.opsel_bits & full != full else syn) for f, syn in mods]
  operands = [(*o, numbers[o[0]]) if isinstance(o, tuple) and o[0] in numbers else o for o in operands]
  literal = ("literal", "i", 1, "{ihex}" if raw.small_literal == "17" else "{hex}")
  operands = [literal if o == f"0x{int.from_bytes(LITERAL, 'little'):x}" else o for o in operands]
  operands = [(*o, const_type(raw.consts.get(o[0]), o[0] in raw.f16_sources)) if isinstance(o, tuple) and len(o) == 3 and o[0] in raw.consts else o
              for o in operands]
  # VGPRs limited to v0..v127 (16-bit operands of 32-bit encodings) are file 'v128'
  operands = [(o[0], "v128", *o[2:]) if isinstance(o, tuple) and o[1] == "v" and o[0] in raw.low_vgprs else o for o in operands]
  # every operand: (field, file, count, type or syntax, valid scalar values: bitmask or None)
  operands = [(*o, *([""] if len(o) < 4 else []), raw.valid.get(o[0])) if isinstance(o, tuple) else o
              for o in _addressing(raw.fmt, operands)]
  fixed = tuple((f, raw.base.get(f, 0)) for f in raw.zero)
  operands, mods = _special(raw, operands, mods)
  operands, mods = gcn_special(raw, fields, operands, mods)
  if raw.image:  # MIMG: widths from the per-opcode tables (interned into NAMES by the generator), dim by name
    operands = [(*o[:3], f"image:{raw.image[o[0]]}", o[4]) if isinstance(o, tuple) and o[0] in ("vdata", "vaddr") else o for o in operands]
    if any(raw.image["dims"]):
      mods = [(f, "enum:" + "|".join(raw.image["dims"]) if f == "dim" else syn) for f, syn in mods]
      if "dim" not in dict(mods): mods.append(("dim", "enum:" + "|".join(raw.image["dims"])))
  order = {f: _print_position(raw, f, syn) for f, syn in mods}
  mods.sort(key=lambda m: order[m[0]])
  mnemonic = raw.mnemonic + (" " if raw.image.get("wide") else "")  # llvm-mc prints 'image_sample  v0, [v0, v1], ...'
  defaults = {**raw.canonical, **raw.omitted}  # unprinted fields and modifiers text leaves out, as llvm-mc's assembler sets them
  refused = tuple(sorted((f, kind, mask) for f, (kind, mask) in raw.refused.items()))
  return (raw.op, mnemonic, tuple(operands), fixed, tuple(mods), tuple(sorted(defaults.items())), refused)


def _keyword(syntax: str) -> bool:
  return not syntax.startswith("named:") and ":" in syntax.split("{")[0]


def _special(raw: RawShape, operands: list, mods: list) -> tuple[list, list]:
  """Formats whose operands the printer builds from several fields (hcq.asm.printer's special cases):
  buffer vaddr (off / v / v[a:b] from offen and idxen) with idxen, offen and format as modifiers; exp's enable
  bits (off); lds_param_load's attrN.c from attr and attrchan."""
  if raw.fmt in ("MUBUF", "MTBUF"):
    fmt_mod = [(o[0], o[3]) for o in operands if isinstance(o, tuple) and o[0] == "format"]
    operands = [o for o in operands if not (o == "offen" or isinstance(o, tuple) and o[0] == "format")]
    tfe = [("tfe", "flag:tfe")] if any(m[0] == "tfe" for m in mods) else []  # tfe widens vdata by one register
    addressing = [("idxen", "flag:idxen"), ("offen", "flag:offen")] if any(isinstance(o, tuple) and o[0] == "vaddr" for o in operands) else []
    mods = fmt_mod + addressing + [m for m in mods if m[0] not in ("idxen", "offen", "tfe")] + tfe
  # what prints after a space is a modifier (DPP's quad_perm:[...], dpp8:[...], fi:1), not a positional operand
  spaced = []
  for i, (sep, tok) in enumerate(raw.tokens):
    if i >= len(raw.operands): continue
    o = raw.operands[i]
    # DS's gds prints after offset:N even where it is the only token (ds_gws_sema_v gds): a modifier, not an operand
    if sep != " " and not (raw.fmt == "DS" and o == "gds"): continue
    if isinstance(o, str) and raw.fmt in ("MUBUF", "MTBUF") or raw.fmt == "EXP": continue  # the rules below handle these
    if isinstance(o, tuple) and not any(isinstance(x, tuple) and x[0] == o[0] for x in operands): continue
    spaced.append(o)
  leading = []
  for o in spaced:
    if isinstance(o, str): leading.append((f"_text{len(leading)}", f"text:{o}"))
    else:
      match = next((x for x in operands if isinstance(x, tuple) and x[0] == o[0]), None)
      if match is not None: leading.append((o[0], {"dpp_ctrl": "named:dpp_ctrl"}.get(o[0], match[3])))
  operands = [o for o in operands if not any(o == x or isinstance(o, tuple) and isinstance(x, tuple) and o[0] == x[0] for x in spaced)]
  mods = leading + [m for m in mods if m[0] not in {f for f, _ in leading}]
  # a number printed with a keyword (wait_vdst:3, wait_exp:2) is a modifier, whatever position the probe saw it in
  keyed = [(o[0], o[3]) for o in operands if isinstance(o, tuple) and o[1] == "i" and _keyword(o[3])]
  operands = [o for o in operands if not (isinstance(o, tuple) and o[1] == "i" and _keyword(o[3]))]
  mods = mods + keyed
  if raw.fmt == "DS":  # ds_swizzle_b32's offset:swizzle(...) is a modifier (it prints nothing at zero)
    mods += [(o[0], o[3]) for o in operands if isinstance(o, tuple) and o[3] == "named:swizzle"]
    operands = [o for o in operands if not (isinstance(o, tuple) and o[3] == "named:swizzle")]
  if raw.fmt == "SMEM" and any(isinstance(o, tuple) and o[0] == "offset" for o in operands):
    mods = [m for m in mods if m[0] != "soffset"]  # gfx12 prints soffset in the offset's place: the printer's SMEM rule
  if raw.fmt == "EXP":
    operands = [(o[0], o[1], o[2], "named:exp_target", o[4]) if isinstance(o, tuple) and o[0] == "target" else o for o in operands]
    mods = [m for m in mods if m[0] != "en"]
  if raw.fmt == "LDSDIR":
    operands = [(o[0], o[1], o[2], "named:attr", o[4]) if isinstance(o, tuple) and o[0] == "attr" else o for o in operands]
    mods = [m for m in mods if m[0] != "attrchan"]
  return operands, mods


def _print_position(raw: RawShape, f: str, syn: str) -> int:
  """Where a modifier prints among the others, from the probe that set them all."""
  if syn in ("named:dpp_ctrl", "named:dpp8") and raw.fmt.split("_DPP")[0] in ("VOP3", "VOP3SD", "VOP3P"):
    # VOP3 DPP: clamp, mul:2, op_sel:[...] print before the lane controls
    return next((i for i, t in enumerate(raw.all_mods) if t.startswith(("quad_perm:", "row_", "dpp8:"))), -1)
  if syn.startswith("named:"): return -1  # quad_perm:[...], dpp8:[...], format:[...] print first
  if syn.startswith("sel:"): syn = syn.split(":")[1] + ":"  # SDWA dst_sel:WORD_1
  if syn.startswith("text:"): return next((i for i, t in enumerate(raw.all_mods) if t == syn[5:]), len(raw.all_mods))
  head = syn.split(":")[0] if not syn.startswith("flag:") else syn.split(":")[1].split(",")[0]
  head = {"omod": "mul", "neg_lo": "neg_lo", "neg": "-", "abs": "|", "thscope": "th:"}.get(head, head)
  if syn.startswith("enum:"): head = next((t for t in syn[5:].split("|") if t), ":").split(":")[0] + ":"  # scope:SCOPE_SE
  for i, t in enumerate(raw.all_mods):
    if t.startswith(head) or (head == "{ds16}" and t.startswith("offset")): return i
  if raw.fmt.split("_DPP")[0] in ("VOP3", "VOP3SD", "VOP3P") and "_DPP" in raw.fmt and f not in ("row_mask", "bank_mask", "bound_ctrl", "fi"):
    # a VOP3 modifier the all-modifier probe did not show (v_dot2_f16_f16's op_sel reads only the dst bit): before the lane controls
    return _print_position(raw, "dpp8" if raw.fmt.endswith(("DPP8", "DPP8FI")) else "dpp_ctrl", "named:dpp8") - 0.5
  return len(raw.all_mods)


def _ds_offset16(raw: RawShape) -> bool:
  """DS opcodes with one 16-bit offset print offset1:offset0 together as offset:N."""
  toks = raw.numbers.get("offset1", {}).get(0x1234)
  return toks is not None and "offset:13312" in toks


def _addressing(fmt: str, operands: list) -> tuple:
  """GLOBAL and SCRATCH address operands as the printer treats them: addr and saddr, whose widths and 'off'
  depend on each other at run time (a 64-bit VGPR address when saddr is off)."""
  out = []
  for o in operands:
    if fmt == "GLOBAL" and o == "off": o = ("saddr", "s", 2)
    elif fmt == "SCRATCH" and isinstance(o, tuple) and o[0] == "sve": o = ("addr", "v", 1)
    elif fmt == "SCRATCH" and o == "off": o = ("addr", "v", 1)
    out.append(tuple(o) if isinstance(o, (tuple, list)) else o)
  return tuple(out)


def const_type(texts: tuple | None, f16_bits: bool = False) -> str:
  """How a source prints constants, from the texts of 0.5, 1/(2*pi) and the literal 0x12345678:
  '' 32-bit, 'd' 64-bit (1/(2*pi) in double precision), 'h' 16-bit literal, 'H' 16-bit integer (inline floats
  print as their f16 bits), 'p' printed as 32-bit but read as f16 by the assembler (`f16_bits`: packed f16, gfx9's
  VOP3 f16: 0x3800 is the inline 0.5, 2.5 the literal 0x4100)."""
  if not texts: return "p" if f16_bits else ""
  half, inv2pi, lit = texts
  if half == "0x3800": return "H"
  if lit == "0x5678": return "h"
  if inv2pi is not None and len(inv2pi) > 12: return "d"
  return "p" if f16_bits else ""
