"""Derive opcodes and operand shapes of each encoding format by sweeping words through llvm-mc's disassembler.

For each format: sweep the opcode field over probe base words and keep what llvm-mc decodes; then, per opcode,
change one field at a time and see what happens to the text: rejected (the field must be zero), unchanged
(ignored), one positional token changed (an operand: its width is read from the register range printed),
or tokens added or decorated (a modifier: the printed forms are kept for `shapes.py` to classify)."""
from __future__ import annotations
import re
from dataclasses import dataclass, field

from hcq.asm import llvm
from hcq.asm.tokens import split_operands
from hcq.asm.generator.layouts import ALTERNATIVES, Layout

# Probe values per field kind: plain registers whose printed range gives the operand width.
# A 9-bit source is tried as v10, then as s10 (operands such as a carry-in take SGPRs only).
ALT = {"vgpr": (10,), "vdsty": (5,), "src": (256 + 10, 10), "ssrc": (10,), "sdst": (10,), "sbase": (5,), "srsrc": (1,), "simm16": (0x1234,), "bit": (1,), "mod": (1,),
       "imm": (0x123,), "unused": (-1, 1), "acc": (1,), "smem": (1,), "sel": (1,), "sdwa_src": (10,), "sdwa_vsrc1": (10,), "sdwa_s": (1,),
       "avsrc": (256 + 10,)}
ALT_NAMED = {"offset0": (0x12,), "offset1": (0x34,), "opsel": (15, 1)}  # every op_sel bit: some opcodes use only the dst's
# Extra values for number fields: how they print (hex/decimal, signed, omitted at zero) is read from these.
NUMBER_PROBES = (0, 0x1234, -16, 7, 1, 64, 65, 0xe000, 2, 5, 6)
# v200: 16-bit operands of 32-bit encodings only reach v0..v127
HIGH_VGPR = {"vgpr": 200, "src": 256 + 200}
# Source values whose printing depends on the operand's type: 0.5, 1/(2*pi) and a literal.
CONST_PROBES = (240, 248, 255)
LITERAL = bytes.fromhex("78563412")  # appended to every probe so that src=255 (literal) opcodes decode
_REG = re.compile(r"^([-|]*)(v|s|ttmp|a)(?:(\d+)|\[(\d+):(\d+)\])(\.[lh])?\|?$")


@dataclass
class RawShape:
  """What probing found for one opcode before classification."""
  fmt: str
  op: int
  mnemonic: str
  base: dict                                      # field values of the base word it decoded from
  tokens: list                                    # [(sep, token)] of the base text
  operands: list = field(default_factory=list)    # str (fixed text) | (field, file, count): file v/s/a or i (number), count int or 'l' (16-bit half)
  zero: list = field(default_factory=list)        # fields llvm-mc rejects unless zero
  mods: dict = field(default_factory=dict)        # field -> tokens printed with the field set
  numbers: dict = field(default_factory=dict)     # number field -> {value: printed tokens, or None where rejected}
  grew: dict = field(default_factory=dict)        # modifier field -> how many tokens setting it added
  consts: dict = field(default_factory=dict)      # source field -> texts printed for CONST_PROBES (None: not printed)
  all_mods: list = field(default_factory=list)    # tokens printed with every modifier set: their order
  low_vgprs: set = field(default_factory=set)     # fields whose VGPRs llvm-mc accepts only up to v127
  valid: dict = field(default_factory=dict)       # scalar-capable field -> bitmask of the values below 256 llvm-mc accepts
  canonical: dict = field(default_factory=dict)   # unprinted field -> the value llvm-mc's assembler puts there (if not 0)
  small_literal: str | None = None                # how a literal operand of 0x11 prints ('17' or '0x11')
  opsel_bits: int = 0                             # the op_sel bits that change the text
  sext: int = 0                                   # sources whose neg bit prints as sext(...)
  abs_read: int = 0                               # sources whose abs bit prints
  acc: dict = field(default_factory=dict)         # acc-kind field -> operand fields it turns into AGPRs (gfx90a+)
  th_names: tuple = ()                            # gfx12 memory: the th token for each th*4+scope ('' prints nothing)
  th_ret: int | str | None = None                 # registers an atomic returns (put in front) when th bit 0 is set
  image: dict = field(default_factory=dict)       # MIMG: vdata/vaddr widths per dmask.../dim..., dim names, wide mnemonic
  omitted: dict = field(default_factory=dict)     # printed modifier field -> the value llvm-mc's assembler writes when text leaves it out
  refused: dict = field(default_factory=dict)     # field -> ('value', mask) / ('bits', mask): what the disassembler prints but the assembler refuses
  f16_sources: set = field(default_factory=set)   # sources whose integer bits llvm-mc's assembler reads as f16 (0x3800 is the inline 0.5)
  rejected_bits: dict = field(default_factory=dict)  # neg/abs -> source bits whose word llvm-mc's disassembler rejects (v_cndmask's src2)


def field_mask(hi: int, lo: int) -> int:
  return (1 << (hi - lo + 1)) - 1


def word(lay: Layout, op: int, values: dict[str, int]) -> bytes:
  """Assemble a probe word from fixed bits, the opcode and field values."""
  w = 0
  for hi, lo, v in lay[1]: w |= v << lo
  for name, hi, lo, kind in lay[2]: w |= ((op if kind == "op" else values.get(name, 0)) & field_mask(hi, lo)) << lo
  return w.to_bytes(lay[0], "little")


def matches(lay: Layout, data: bytes) -> bool:
  w = int.from_bytes(data[:lay[0]], "little")
  return all((w >> lo) & field_mask(hi, lo) == v for hi, lo, v in lay[1])


def fixed_bit_count(lay: Layout) -> int:
  return sum(hi - lo + 1 for hi, lo, _ in lay[1])


def split(text: str, fmt: str = "") -> tuple[str, list[tuple[str, str]]]:
  """Mnemonic and operand tokens; SOPP's one immediate (e.g. 'vmcnt(0) lgkmcnt(0)') is one token."""
  if fmt == "VOPD" and " :: " in text:  # one mnemonic X::Y; X's operands, a '::' marker, then Y's
    x, y = text.split(" :: ")
    mx, _, rx = x.partition(" ")
    my, _, ry = y.partition(" ")
    return f"{mx}::{my}", split_operands(rx.strip()) + [(",", "::")] + [(",", t) for _, t in split_operands(ry.strip())]
  mnemonic, _, rest = text.partition(" ")
  rest = rest.strip()
  if fmt == "SOPP": return mnemonic, [("", rest)] if rest else []
  if fmt.startswith("MIMG"):  # vdata and vaddr by their first VGPR: their widths follow other fields (see _image_shapes)
    return mnemonic, [(sep, _first_vgpr(t) if i < 2 else t) for i, (sep, t) in enumerate(split_operands(rest))]
  return mnemonic, split_operands(rest)


def _first_vgpr(token: str) -> str:
  """'v[4:7]' -> 'v4', '[v0, v5]' -> 'v0'; other tokens unchanged."""
  m = re.match(r"^\[?v\[?(\d+)", token)
  return f"v{m.group(1)}" if m else token


def register_shape(token: str) -> tuple[str, int | str] | None:
  """(register file, count) of a register token: 'v[10:11]' -> ('v', 2); 16-bit halves count 'l'; None if not a register."""
  m = _REG.match(token)
  if not m: return None
  if m.group(6): return m.group(2), "l"
  return m.group(2), (1 if m.group(3) is not None else int(m.group(5)) - int(m.group(4)) + 1)


def _accepted(d: llvm.Decoded | None) -> bool:
  return d is not None and "/*" not in d.text  # llvm-mc comments out operands it finds invalid


def sweep(name: str, layouts: dict[str, Layout], mcpu: str, bases: tuple[dict, ...] | None = None,
          only: set[int] | None = None) -> dict[int, tuple[dict, str]]:
  """op -> (base field values, llvm-mc text) for every opcode value llvm-mc decodes in this format (from `bases`,
  an alternative's own probe bases, or the format's), or for those in `only` (each opcode is judged on its own)."""
  lay = layouts[name]
  op_hi, op_lo = next(((hi, lo) for f, hi, lo, k in lay[2] if k == "op"), (-1, 0))  # EXP has no opcode field: one "opcode" 0
  # a word that a format with more fixed bits also matches belongs to that format
  others = [l for n, l in layouts.items() if n != name and ALTERNATIVES.get(n) != name and ALTERNATIVES.get(name) != n
            and fixed_bit_count(l) > fixed_bit_count(lay)]
  found: dict[int, tuple[dict, str]] = {}
  for base in bases or lay[3]:
    ops = [op for op in (sorted(only) if only is not None else range(1 << (op_hi - op_lo + 1))) if op not in found
           and not any(matches(o, word(lay, op, base)) for o in others)]
    for op, d in zip(ops, llvm.disassemble_each([word(lay, op, base) + LITERAL for op in ops], mcpu)):
      if _accepted(d): found[op] = (base, d.text)
  return dict(sorted(found.items()))


def probe_format(name: str, layouts: dict[str, Layout], mcpu: str, only: set[int] | None = None,
                 exclude: set[int] = frozenset()) -> list[RawShape]:
  """Every opcode of a format (or those in `only`, less those in `exclude`) with its raw shape, derived by
  one-field-at-a-time probes."""
  lay = layouts[name]
  found = {op: v for op, v in sweep(ALTERNATIVES.get(name, name), layouts, mcpu, lay[3], only).items()
           if (only is None or op in only) and op not in exclude}
  fields = [(f, k) for f, hi, lo, k in lay[2] if k != "op"]
  cases, keys = [], []
  for op, (base, _) in found.items():
    for f, k in fields:
      values = list(_alternatives(name, f, k, base)) + (list(NUMBER_PROBES) if k in ("simm16", "imm") else [])
      values += list(CONST_PROBES) if k in ("src", "ssrc") else []
      values += list(NUMBER_PROBES) if k == "ssrc" else []  # s_sendmsg_rtn reads its ssrc0 as a message number
      values += [HIGH_VGPR[k]] if k in HIGH_VGPR else []
      values += [1 << b for b in range(4)] if f == "opsel" else []  # which op_sel bits an opcode reads
      values += [2, 4] if f in ("neg", "neg_hi", "abs") else []  # neg of an integer source prints sext(...); abs is ignored
      values += list(range(8)) if k == "sel" else []  # SDWA selects: every value's name
      for v in values:
        cases.append(word(lay, op, {**base, f: v}) + LITERAL); keys.append((op, f, v))
  probed = dict(zip(keys, llvm.disassemble_each(cases, mcpu, pad=1)))
  out = []
  for op, (base, text) in found.items():
    mnemonic, toks = split(text, name)
    s = RawShape(name, op, mnemonic, base, toks, [t for _, t in toks])
    for f, k in fields:
      if k in HIGH_VGPR and not _accepted(probed[(op, f, HIGH_VGPR[k])]): s.low_vgprs.add(f)
      if f == "neg":
        s.sext = sum(1 << b for b in range(3) if _accepted(probed.get((op, f, 1 << b))) and "sext(" in probed[(op, f, 1 << b)].text)
      if f == "abs":
        s.abs_read = sum(1 << b for b in range(3) if _accepted(probed.get((op, f, 1 << b))) and probed[(op, f, 1 << b)].text != text)
      if f in ("neg", "abs"):  # a bit llvm-mc decodes nothing for: the word is invalid (a lane mask takes no modifier)
        s.rejected_bits[f] = sum(1 << b for b in range(3) if (op, f, 1 << b) in probed and not _accepted(probed[(op, f, 1 << b)]))
      if f == "opsel":
        s.opsel_bits = sum(1 << b for b in range(4) if _accepted(probed[(op, f, 1 << b)]) and probed[(op, f, 1 << b)].text != text)
      if k in ("src", "ssrc"):
        s.consts[f] = tuple(_operand_at(probed[(op, f, v)], name, mnemonic, toks) for v in CONST_PROBES)
      if k in ("simm16", "imm", "ssrc", "sel"):
        s.numbers[f] = {v: ([t for _, t in split(probed[(op, f, v)].text, name)[1]] if _accepted(probed[(op, f, v)]) else None)
                        for v in (range(8) if k == "sel" else NUMBER_PROBES)}
      tries = [probed[(op, f, v)] for v in _alternatives(name, f, k, base)]
      d = next((t for t in tries if _accepted(t) and split(t.text, name)[0] == mnemonic), tries[0])
      if not _accepted(d) or split(d.text, name)[0] != mnemonic: s.zero.append(f); continue
      toks2 = split(d.text, name)[1]
      if toks2 == toks: continue
      if k == "acc" and len(toks2) == len(toks):  # v0 -> a0: which operands the bit moves to the AGPR file
        s.acc[f] = [i for i, ((_, a), (_, b)) in enumerate(zip(toks, toks2)) if a != b and (register_shape(b) or ("",))[0] == "a"]
        continue
      if len(toks2) == len(toks):
        changed = [i for i, (a, b) in enumerate(zip(toks, toks2)) if a != b]
        if len(changed) == 1 and isinstance(s.operands[changed[0]], str):
          i = changed[0]
          old, new = toks[i][1], toks2[i][1]
          decorated = new.startswith(("-", "|", "sext(", "neg(")) and not old.startswith(("-", "|", "sext(", "neg("))
          if not decorated:  # '-v1', '|v1|', 'sext(v1)' decorate an operand: a modifier, not a value
            s.operands[i] = (f, *(register_shape(new) or ("i", 1)))
            continue
      s.mods[f] = [t for t in toks2 if t not in toks]
      s.grew[f] = len(toks2) - len(toks)
      if s.grew[f] == 2 and [t for _, t in toks2[1:len(toks) + 1]] == [t for _, t in toks]:
        s.mods[f] = [toks2[0], toks2[-1]]  # a destination put in front
    out.append(s)
  _valid_values(lay, out, name, mcpu)
  _canonical_values(lay, out, name, mcpu)
  _omitted_values(lay, out, name, mcpu)
  _assembler_limits(lay, out, name, mcpu, probed)
  _f16_bit_patterns(lay, out, name, mcpu)
  if any(k == "sel" for _, k in fields): _sel_defaults(lay, out, name, mcpu)
  _small_literals(lay, out, name, mcpu)
  _th_names(lay, out, name, mcpu)
  if name.startswith("MIMG"): _image_shapes(lay, out, name, mcpu)
  # one more probe per opcode sets every modifier it accepts at once: the order they print in
  every = [word(lay, s.op, {**s.base, **{f: ALT_NAMED.get(f, ALT[k])[-1] for f, k in fields
                                         if f in s.mods and k in ("bit", "mod", "imm")}}) + LITERAL for s in out]
  for s, d in zip(out, llvm.disassemble_each(every, mcpu)):
    s.all_mods = [t for _, t in split(d.text, name)[1]] if _accepted(d) else []
  return out


def _alternatives(fmt: str, f: str, k: str, base: dict) -> tuple:
  """The values a field is changed to, one at a time; a flag an image's base word had to set (gfx12 image_bvh_*'s
  r128) is cleared instead, to find whether llvm-mc requires it."""
  if k == "bit" and base.get(f) and fmt.startswith(("MIMG", "DS")): return (0,)
  if f == "dpp_ctrl": return (0x123, 0x152)  # row_shr:3, or row_newbcast:2 for gfx9's 64-bit DPP (which takes nothing else)
  return ALT_NAMED.get(f, ALT[k])


def _operand_at(d: llvm.Decoded | None, fmt: str, mnemonic: str, base: list) -> str | None:
  """The one token that differs from the base text, if the probe decoded to the same shape."""
  if not _accepted(d): return None
  m, toks = split(d.text, fmt)
  if m != mnemonic or len(toks) != len(base): return None
  diff = [t for (_, t), (_, b) in zip(toks, base) if t != b]
  return diff[0] if len(diff) == 1 else None


SCALAR_KINDS = ("src", "ssrc", "sdst")


def _valid_values(lay: Layout, shapes: list[RawShape], fmt: str, mcpu: str) -> None:
  """For each operand field that can hold a scalar encoding (and SMEM's sbase, and a number in an SGPR field), which
  values below 256 llvm-mc accepts there."""
  kinds = {f: k for f, hi, lo, k in lay[2]}
  width = {f: min(256, 1 << (hi - lo + 1)) for f, hi, lo, k in lay[2]}
  cases, keys = [], []
  # the DPP16, DPP8 and DPP8-with-fi forms of an opcode take the same scalar operands: probed once, in whichever comes first
  family = re.sub(r"_DPP(16|8FI|8)$", "_DPP", fmt)
  for s in shapes:
    for o in s.operands:
      if not isinstance(o, tuple): continue
      f = o[0]
      if o[1] == "i" and kinds.get(f) != "sdst": continue  # numbers, except one in a register field (s_prefetch_data's sdata)
      if kinds.get(f) not in (*SCALAR_KINDS, "sbase") and not (kinds.get(f) == "vgpr" and o[1] == "s"): continue
      if (mcpu, family, s.mnemonic, f) in _VALID_SEEN:
        if _VALID_SEEN[(mcpu, family, s.mnemonic, f)] is not None: s.valid[f] = _VALID_SEEN[(mcpu, family, s.mnemonic, f)]
        continue
      for v in range(width[f]):
        cases.append(word(lay, s.op, {**s.base, f: v}) + LITERAL); keys.append((s, f, v))
  for (s, f, v), d in zip(keys, llvm.disassemble_each(cases, mcpu, pad=1)):  # whole words: little to over-read
    if _accepted(d) and split(d.text, fmt)[0] == s.mnemonic: s.valid[f] = s.valid.get(f, 0) | 1 << v
  if family != fmt:
    for s, f, _ in keys: _VALID_SEEN[(mcpu, family, s.mnemonic, f)] = s.valid.get(f)


_VALID_SEEN: dict[tuple, int | None] = {}  # (mcpu, DPP family, mnemonic, field) -> bitmask, see _valid_values


def _sel_defaults(lay: Layout, shapes: list[RawShape], fmt: str, mcpu: str) -> None:
  """SDWA selects always print, but text may leave them out: the values llvm-mc's assembler then writes."""
  texts = [f"{s.mnemonic} {', '.join(t for sep, t in s.tokens if sep != ' ')}" for s in shapes]
  for s, data in zip(shapes, llvm.assemble_each(texts, mcpu)):
    if not isinstance(data, bytes) or len(data) < lay[0]: continue
    w = int.from_bytes(data[:lay[0]], "little")
    for f, hi, lo, k in lay[2]:
      if k == "sel" and f in s.numbers: s.canonical[f] = (w >> lo) & field_mask(hi, lo)


def _canonical_values(lay: Layout, shapes: list[RawShape], fmt: str, mcpu: str) -> None:
  """Fields that print nothing still get a value from llvm-mc's assembler (v_cmpx_*_e64 puts exec_lo in vdst,
  v_pk_* set op_sel_hi bits of absent sources): assemble each base text and read those fields back."""
  encoded = llvm.assemble_each([_text_of(s, fmt) for s in shapes], mcpu)
  for s, data in zip(shapes, encoded):
    if not isinstance(data, bytes) or len(data) < lay[0]: continue
    w = int.from_bytes(data[:lay[0]], "little")
    printed = {o[0] for o in s.operands if isinstance(o, tuple)} | set(s.mods) | set(s.zero)
    if "opsel_hi" in s.mods or any(isinstance(o, tuple) and o[0] == "opsel_hi" for o in s.operands):
      printed.add("opsel_hi2")  # printed within op_sel_hi:[...] (a modifier, or v_fma_mix's positional token)
    for f, hi, lo, k in lay[2]:
      v = (w >> lo) & field_mask(hi, lo)
      # fields the probe base sets (MUBUF's offen) keep the base; VOP3P's opsel_hi2 is the base's guess at llvm-mc's default
      if k != "op" and f not in printed and v and (v != s.base.get(f, 0) or f == "opsel_hi2"): s.canonical[f] = v


def _omitted_values(lay: Layout, shapes: list[RawShape], fmt: str, mcpu: str) -> None:
  """What llvm-mc's assembler writes into a printed modifier's field when text leaves the modifier out (DPP's
  row_mask/bank_mask are 0xf, not the probe's 0): each base text assembled again without one of its modifiers."""
  cases, keys = [], []
  for s in shapes:
    if fmt in ("SOPP", "VOPD"): continue
    first = next((i for i, (sep, _) in enumerate(s.tokens) if sep == " "), len(s.tokens))
    for i in range(first, len(s.tokens)):
      toks = [t for j, (_, t) in enumerate(s.tokens) if j != i]
      cases.append(f"{s.mnemonic} {', '.join(toks[:first])} {' '.join(toks[first:])}".rstrip()); keys.append((s, i))
  full = {id(s): d for s, d in zip(shapes, llvm.assemble_each([_text_of(s, fmt) for s in shapes], mcpu))}
  fields = [(f, hi, lo) for f, hi, lo, k in lay[2] if k != "op"]
  for (s, i), data in zip(keys, llvm.assemble_each(cases, mcpu)):
    base = full[id(s)]
    if not isinstance(data, bytes) or not isinstance(base, bytes) or len(data) != len(base) or not matches(lay, data): continue
    w, b = int.from_bytes(data[:lay[0]], "little"), int.from_bytes(base[:lay[0]], "little")
    op_field = next((hi, lo) for f, hi, lo, k in lay[2] if k == "op") if any(k == "op" for *_, k in lay[2]) else None
    if op_field and (w ^ b) >> op_field[1] & field_mask(*op_field): continue  # another opcode (suffix-less text)
    # the dropped token's fields: the operand it printed (DPP's row_mask:0xf), or modifiers printed under its keyword
    keyword = s.tokens[i][1].split(":")[0]
    owners = {s.operands[i][0]} if isinstance(s.operands[i], tuple) else set()
    owners |= {f for f, toks in s.mods.items() if any(t.split(":")[0] == keyword for _, t in toks)}
    for f, hi, lo in fields:
      v = (w >> lo) & field_mask(hi, lo)
      if v and f in owners: s.omitted[f] = v


def _assembler_limits(lay: Layout, shapes: list[RawShape], fmt: str, mcpu: str, probed: dict) -> None:
  """What llvm-mc's disassembler prints but its assembler refuses (a literal or an SGPR in a VOP3 DPP source, tfe on a
  buffer store, neg on a source the opcode has no neg for): every scalar value of each operand, and every modifier
  bit, assembled from its printed text. Only opcodes whose base text assembles are judged."""
  kinds = {f: k for f, hi, lo, k in lay[2]}
  ok = {id(s) for s, d in zip(shapes, llvm.assemble_each([_text_of(s, fmt) for s in shapes], mcpu)) if isinstance(d, bytes)}
  words, wkeys = [], []
  for s in shapes:
    if id(s) not in ok: continue
    for f, mask in s.valid.items():
      for v in range(256):
        if mask >> v & 1: words.append(word(lay, s.op, {**s.base, f: v}) + LITERAL); wkeys.append((s, f, "value", v))
  texts, keys = [], []
  for k, d in zip(wkeys, llvm.disassemble_each(words, mcpu, pad=1)):
    if _accepted(d): texts.append(d.text); keys.append(k)
  for s in shapes:
    if id(s) not in ok: continue
    for f in s.mods:
      if kinds.get(f) not in ("bit", "mod"): continue
      for v in sorted({v for (op, g, v) in probed if op == s.op and g == f}):
        d = probed[(s.op, f, v)]
        if v > 0 and v & (v - 1) == 0 and _accepted(d) and split(d.text, fmt)[0] == s.mnemonic: texts.append(d.text); keys.append((s, f, "bits", v))
  for s in shapes:
    if id(s) in ok: _unprinted_negs(s, fmt, probed, texts, keys)
  refusals = [key for key, data in zip(keys, llvm.assemble_each(texts, mcpu)) if not isinstance(data, bytes)]
  refusals = [key for key in refusals if key[2] != "value"] + _refused_in_every_combination(
    lay, [key for key in refusals if key[2] == "value"], fmt, mcpu)
  for s, f, kind, v in refusals:
    k, mask = s.refused.get(f, (kind, 0))
    s.refused[f] = (kind, mask | 1 << v if kind == "value" else mask | v)
  if "dpp_ctrl" in kinds:  # lane controls only some opcodes take (gfx9's 64-bit DPP: row_newbcast alone)
    hi, lo = next((hi, lo) for f, hi, lo, k in lay[2] if f == "dpp_ctrl")
    n = 1 << (hi - lo + 1)
    got = iter(llvm.disassemble_each([word(lay, s.op, {**s.base, "dpp_ctrl": v}) + LITERAL for s in shapes for v in range(n)], mcpu, pad=1))
    taken = {id(s): sum(1 << v for v in range(n) if _accepted(next(got))) for s in shapes}
    masks = list(taken.values())
    every = max(masks, key=masks.count)  # what most opcodes take (opcodes that ignore their source take more)
    for s in shapes:
      if every & ~taken[id(s)]: s.refused["dpp_ctrl"] = ("value", every & ~taken[id(s)])


def _refused_in_every_combination(lay: Layout, refusals: list[tuple], fmt: str, mcpu: str) -> list[tuple]:
  """The (shape, field, 'value', v) refusals that stay refused with the other sources changed. A value refused next to
  the probe base's other operands may only break a limit on their combination (gfx942 v_writelane_b32 s1 next to the
  base's s0: the constant bus), which the assembler checks on its own: it is retried with every other scalar source
  holding the same value (identical scalars count once), and with every other 9-bit source a VGPR. Only other
  sources whose base value takes the bus (an SGPR, a special register or the literal; not a VGPR or an inline
  constant) are changed: with none, nothing was combined."""
  kinds = {f: k for f, hi, lo, k in lay[2]}
  bus = lambda x: x < 128 or 209 <= x < 240 or 249 <= x < 256
  words, keys = [], []
  for key in refusals:
    s, f, _, v = key
    others = [g for g in s.valid if g != f and kinds.get(g) in ("src", "ssrc") and g.startswith("src") and bus(s.base.get(g, 0))]
    if not others: continue
    same = {g: v for g in others if s.valid[g] >> v & 1}
    vgpr = {g: 256 + 10 for g in others if kinds[g] == "src"}
    for retry in (same, vgpr):
      if retry: words.append(word(lay, s.op, {**s.base, **retry, f: v}) + LITERAL); keys.append(key)
  texts, tkeys = [], []
  for key, d in zip(keys, llvm.disassemble_each(words, mcpu, pad=1)):
    if _accepted(d) and split(d.text, fmt)[0] == key[0].mnemonic: texts.append(d.text); tkeys.append(key)
  taken = {(id(k[0]), k[1], k[3]) for k, data in zip(tkeys, llvm.assemble_each(texts, mcpu)) if isinstance(data, bytes)}
  return [key for key in refusals if (id(key[0]), key[1], key[3]) not in taken]


def _f16_bit_patterns(lay: Layout, shapes: list[RawShape], fmt: str, mcpu: str) -> None:
  """Sources llvm-mc prints as 32-bit but whose integer bits its assembler reads as f16 (v_pk_mul_f16, gfx9's
  v_add_f16_e64): 0x3800 written there assembles to the inline 0.5 (240), where a 32-bit source takes a literal."""
  fields = {f: (hi, lo) for f, hi, lo, k in lay[2]}
  texts, keys = [], []
  for s in shapes:
    toks = [t for _, t in s.tokens]
    for i, o in enumerate(s.operands):
      if isinstance(o, tuple) and o[0] in s.consts and o[0] in fields and i < len(toks) and register_shape(toks[i]):
        texts.append(f"{s.mnemonic} {', '.join(toks[:i] + ['0x3800'] + toks[i + 1:])}"); keys.append((s, o[0]))
  for (s, f), data in zip(keys, llvm.assemble_each(texts, mcpu)):
    if isinstance(data, bytes) and len(data) >= lay[0] and matches(lay, data):
      hi, lo = fields[f]
      if int.from_bytes(data[:lay[0]], "little") >> lo & field_mask(hi, lo) == 240: s.f16_sources.add(f)


def _unprinted_negs(s: RawShape, fmt: str, probed: dict, texts: list[str], keys: list[tuple]) -> None:
  """A neg bit llvm-mc's disassembler prints nothing for (or rejects) may still be one its assembler refuses
  (gfx942 v_cvt_sr_fp8_f32's -src1, gfx12 WMMA's neg_lo:[0,0,1] on an integer src2): the text that sets it, written
  the way the opcode's printed neg bits are (-src, or neg_lo:[...] / neg_hi:[...]), goes to the assembler too."""
  base = [t for _, t in s.tokens]
  for f in ("neg", "neg_hi"):
    if f not in s.mods: continue
    listed = next((t for _, t in s.mods[f] if re.fullmatch(r"neg_(lo|hi):\[[01,]+\]", t)), None)
    for b in range(3):
      d = probed.get((s.op, f, 1 << b))
      if d is not None and _accepted(d) and split(d.text, fmt)[0] == s.mnemonic and [t for _, t in split(d.text, fmt)[1]] != base: continue
      if listed is not None:
        n = listed.count(",") + 1
        if b >= n: continue
        toks = base + [f"{listed.split(':')[0]}:[{','.join('1' if i == b else '0' for i in range(n))}]"]
      else:
        at = next((i for i, o in enumerate(s.operands) if isinstance(o, tuple) and o[0] == f"src{b}"), None)
        if at is None or base[at].startswith(("-", "|", "sext(")): continue
        toks = base[:at] + ["-" + base[at]] + base[at + 1:]
      seps = [sep for sep, _ in s.tokens] + [" "] * (len(toks) - len(s.tokens))
      texts.append(s.mnemonic + "".join((" " if i == 0 else ", " if sep == "," else " ") + t for i, (sep, t) in enumerate(zip(seps, toks))))
      keys.append((s, f, "bits", 1 << b))


def _th_names(lay: Layout, shapes: list[RawShape], fmt: str, mcpu: str) -> None:
  """gfx12 VMEM cache policy: the th token printed for every th and scope pair (names depend on the opcode's access
  kind and on scope: TH_LOAD_LU is TH_LOAD_BYPASS under SCOPE_SYS), and whether th bit 0 makes an atomic return."""
  fields = {f: (hi, lo) for f, hi, lo, k in lay[2]}
  if fmt == "SMEM" or "th" not in fields or "scope" not in fields: return
  ths, scopes = 1 << (fields["th"][0] - fields["th"][1] + 1), 1 << (fields["scope"][0] - fields["scope"][1] + 1)
  pairs = [(th, sc) for th in range(ths) for sc in range(scopes)]
  cases = [word(lay, s.op, {**s.base, "th": th, "scope": sc}) + LITERAL for s in shapes for th, sc in pairs]
  got = iter(llvm.disassemble_each(cases, mcpu, pad=1))
  for s in shapes:
    names = []
    for th, sc in pairs:
      d = next(got)
      toks = [t for _, t in split(d.text, fmt)[1]] if _accepted(d) else []
      names.append(next((t for t in toks if t.startswith("th:")), ""))
      if (th, sc) == (1, 0) and len(toks) == len(s.tokens) + 2 and toks[1:len(s.tokens) + 1] == [t for _, t in s.tokens]:
        s.th_ret = (register_shape(toks[0]) or (None, None))[1]
    s.th_names = tuple(names)


def _image_shapes(lay: Layout, shapes: list[RawShape], fmt: str, mcpu: str) -> None:
  """MIMG register widths, per opcode, for every dmask, d16, tfe, dim and a16 (index dmask | d16 << 4 | tfe << 5 |
  dim << 6 | a16 << 9): vdata's count and vaddr's (a count, or the NSA list's widths '1,1,3'), '0' where llvm-mc
  rejects. Both depend on all five: where a size pair has no encoding llvm-mc falls back to the opcode's first one.
  lwe does not change them (llvm-mc widens vdata for tfe only). Also the dim names, and whether llvm-mc pads the
  mnemonic with a second space (image_sample's NSA form)."""
  keys = [(dm, d16, tfe, dim, a16) for a16 in range(2) for dim in range(8) for tfe in range(2) for d16 in range(2) for dm in range(16)]
  # distinct registers: llvm-mc 19 prints a gfx12 image whose registers are all v0 with one VGPR each ('image_load v0, v0');
  # vaddr4 stays 0 (llvm-mc rejects a word that sets it where the opcode reads no fifth address)
  regs = {f: 1 + 8 * i for i, f in enumerate(("vdata", "vaddr", "vaddr1", "vaddr2", "vaddr3")) if f in {g for g, *_ in lay[2]} and fmt.startswith("MIMG_V")}
  cases = []
  for s in shapes:
    cases += [word(lay, s.op, {**s.base, **regs, "dmask": dm, "d16": d16, "tfe": tfe, "dim": dim, "a16": a16}) for dm, d16, tfe, dim, a16 in keys]
    cases.append(word(lay, s.op, s.base))
  decoded = llvm.disassemble_each(cases, mcpu, pad=1)
  if regs:  # where llvm-mc rejects a word for an address field the opcode does not read (VSAMPLE), the all-v0 word decides
    again = [i for i, d in enumerate(decoded) if not _accepted(d)]
    plain = llvm.disassemble_each([_without(cases[i], lay, regs) for i in again], mcpu, pad=1)
    for i, d in zip(again, plain): decoded[i] = d
  got = iter(decoded)

  def width(t: str) -> str:
    if t.startswith("["): return ",".join(str((register_shape(x.strip()) or (None, 0))[1]) for x in t[1:-1].split(","))
    return str((register_shape(t) or (None, 0))[1])

  for s in shapes:
    data, addr, dims = [], [], [""] * 8
    for dm, d16, tfe, dim, a16 in keys:
      d = next(got)
      toks = split_operands(d.text.partition(" ")[2].strip()) if _accepted(d) and d.text.split()[0] == s.mnemonic else []
      data.append(width(toks[0][1]) if len(toks) > 1 else "0")
      addr.append(width(toks[1][1]) if len(toks) > 1 else "0")
      if toks and not dims[dim]: dims[dim] = next((t for _, t in toks if t.startswith("dim:")), "")
    base = next(got)
    s.image = {"vdata": "|".join(data), "vaddr": "|".join(addr), "dims": dims,
               "wide": _accepted(base) and base.text.startswith(s.mnemonic + "  ")}


def _without(data: bytes, lay: Layout, fields: dict) -> bytes:
  """A probe word with `fields` cleared."""
  w = int.from_bytes(data, "little")
  for f, hi, lo, k in lay[2]:
    if f in fields: w &= ~(field_mask(hi, lo) << lo)
  return w.to_bytes(len(data), "little")


def _small_literals(lay: Layout, shapes: list[RawShape], fmt: str, mcpu: str) -> None:
  """How an opcode's literal operand prints a small value (decimal for s_setreg_imm32_b32, hex for v_fmamk_f32)."""
  literal_text = f"0x{int.from_bytes(LITERAL, 'little'):x}"
  with_literal = [s for s in shapes if any(t == literal_text for _, t in s.tokens)]
  for s, d in zip(with_literal, llvm.disassemble_each([word(lay, s.op, s.base) + bytes([0x11, 0, 0, 0]) for s in with_literal], mcpu)):
    if _accepted(d): s.small_literal = "17" if "17" in [t for _, t in split(d.text, fmt)[1]] else "0x11"


def _text_of(s: RawShape, fmt: str) -> str:
  """The base text of a probe again, from its tokens."""
  if fmt == "SOPP": return f"{s.mnemonic} {s.tokens[0][1] if s.tokens else ''}"
  if fmt == "VOPD":
    toks = [t for _, t in s.tokens]
    i = toks.index("::")
    x, y = s.mnemonic.split("::")
    return f"{x} {', '.join(toks[:i])} :: {y} {', '.join(toks[i + 1:])}"
  return f"{s.mnemonic} {', '.join(t for _, t in s.tokens)}"
