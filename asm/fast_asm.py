"""Assembling straight to bytes: one function per mnemonic, compiled once from the opcode's builder plan, that
turns a line written as llvm-mc prints it ('v_add_f32_e32 v0, v1, v2', 'global_load_b32 v1, v2, s[2:3]
offset:16') into its bytes with no Instruction object between.

What a token means is worked out once, by the same assigners and modifier code the builder runs
(hcq.asm.fast_build, hcq.asm.build), and remembered as the field value or bits it gives: per operand kind of a
format for registers, sources and addresses (shared by every opcode with that operand), per opcode for numbers
and modifiers. A line in any other spelling (tabs, no space after a comma, |abs| written as abs(), ...), a token
whose meaning reads other fields, and every error go to the line parser (hcq.asm.fast_parse), which builds the
instruction or raises its AsmError. tests/test_asm_fast.py checks both give the same bytes on every opcode's
samples and on bad lines.
"""
from __future__ import annotations
import re
from typing import Any

from hcq.asm import build as generic
from hcq.asm import constant_bus, parser
from hcq.asm.build import Modified
from hcq.asm.codegen import make_function
from hcq.asm.fast_build import Builder, _WritesOnly, builder_of
from hcq.asm.fast_parse import LineParser, line_parser
from hcq.asm.isa import ISA, Opcode

_MEMO_LIMIT = 1 << 16  # tokens remembered per operand kind; past that a token is worked out each time
_INTEGER = re.compile(r"0x[0-9a-fA-F]+|[0-9]+", re.ASCII)  # what parse_number reads as a non-negative integer


def _no_encoder(rest: str) -> None:
  return None


class Assembler:
  """Per-arch line -> bytes: mnemonic as written -> compiled encoder, made on first use."""

  def __init__(self, isa: ISA) -> None:
    self.isa = isa
    self.lines: LineParser = line_parser(isa)
    self.builder: Builder = builder_of(isa)
    self.encoders: dict[str, Any] = {}  # mnemonic -> fn(rest of the line) -> bytes, or None for the line parser
    self.kinds: dict[tuple, dict] = {}  # operand kind -> token -> field value | effect tuple | False (not here)

  def encoder(self, mnemonic: str):
    """fn(the text after the mnemonic) -> bytes or None, for a mnemonic as written."""
    fn = self.encoders.get(mnemonic)
    if fn is None:
      try: fn = self._compile(mnemonic)
      except Exception: fn = None  # noqa: BLE001 - an opcode this path cannot plan: the line parser takes it
      fn = fn or _no_encoder
      if len(self.encoders) < _MEMO_LIMIT: self.encoders[mnemonic] = fn
    return fn

  def encode(self, body: str) -> bytes | None:
    """The bytes of one stripped line (no label, no comment), or None where the line parser must decide."""
    mnemonic, _, rest = body.partition(" ")
    return self.encoder(mnemonic)(rest)

  def _vopd_pair(self, mx: str, rest: str) -> bytes | None:
    """A VOPD line ('v_dual_max_f32 v0, v1, v2 :: v_dual_mov_b32 v3, v4') as the parser reads a pair: the pair's
    opcode (x::y) with X's operands, '::' and Y's."""
    x, sep, y = rest.partition(" :: ")
    if not sep: return None
    my, _, ry = y.partition(" ")
    return self.encoder(f"{mx}::{my}")(f"{x}, ::, {ry}")

  # --- compiling ------------------------------------------------------------------------------------------

  def _compile(self, mnemonic: str):
    opcodes = parser.candidates(self.isa, mnemonic.lower())
    # the first candidate is the one the line parser tries first (a branch to a label is no number: it comes back
    # None and text.assemble places it)
    if not opcodes: return (lambda rest: self._vopd_pair(mnemonic, rest)) if mnemonic.lower().startswith("v_dual_") else None
    opc = opcodes[0]
    fmt = opc.fmt
    plan = self.builder.plans.get(id(opc), False)
    if plan is False: plan = self.builder.plans[id(opc)] = self.builder._plan(opc)
    if plan is None or fmt.name == "EXP": return None  # EXP's second operand follows a space
    if parser.required_modifiers(opc): return None  # a DPP form's lane control, an image's dim: the parser checks they are there
    base, assigns = plan[:2]
    specs = opc.operands
    npos = len(specs)
    op = fmt.places.get("op")
    env: dict = {"W0": fmt.pack(base) | ((opc.op & op[1]) << op[0] if op else 0), "MODS": self._modifiers(opc)}
    code = ["def encode(rest):"]
    if fmt.name == "SOPP":  # the whole rest is one operand, as the line parser takes it
      if npos > 1: return None
      code += ["  mods = None"] + (["  if rest: return None"] if npos == 0 else ["  p0 = rest.strip()", "  if not p0: return None"])
    elif npos == 0: code.append("  mods = rest.split(' ') if rest else None")
    else:
      last = f"p{npos - 1}"
      code += ["  parts = rest.split(', ')", f"  if len(parts) != {npos}: return None", f"  {', '.join(f'p{k}' for k in range(npos))}, = parts",
               "  mods = None", f"  if ' ' in {last}:", f"    mods = {last}.split(' ')", f"    {last} = mods[0]", "    del mods[0]"]
    code += ["  w = W0", "  if mods:", "    w = MODS(mods, w)", "    if w is None: return None", "  lit = None", "  ors = 0"]
    for k, (spec, (assign, name, valid)) in enumerate(zip(specs, assigns)):
      if isinstance(spec, str):
        generic._assign(self.isa, opc, spec, parser.operand_value(spec), {}, [None])  # llvm-mc's own spelling must do
        code.append(f"  if p{k} != {spec!r}: return None")
        continue
      f = fmt.fields.get(spec[0])
      if f is not None and f.kind == "vdsty":  # VOPD: Y's destination is odd where X's is even and the reverse
        vdstx = fmt.fields["vdstx"]
        env[f"D{k}"], env[f"M{k}"] = self._vdsty()
        code += [f"  x = D{k}.get(p{k})", f"  if x is None: x = M{k}(p{k})",
                 f"  if type(x) is not int or not (x ^ w >> {vdstx.lo}) & 1: return None", f"  w = w & {~(f.mask << f.lo)} | (x >> 1 & {f.mask}) << {f.lo}"]
        continue
      if spec[3] == "smem9":  # gfx9 SMEM's offset operand reads soe, which only offset:X sets: remembered where it is 0
        soe = fmt.fields["soe"]
        code.append(f"  if w >> {soe.lo} & {soe.mask}: return None")
      memo, env[f"M{k}"], env[f"E{k}"] = self._operand(opc, spec, assign, valid, frozenset({"soe"}) if spec[3] == "smem9" else frozenset())
      env[f"D{k}"] = memo
      code += [f"  x = D{k}.get(p{k})", f"  if x is None: x = M{k}(p{k})",
               f"  if type(x) is int: w = w & {~(f.mask << f.lo)} | (x & {f.mask}) << {f.lo}" if f else "  if type(x) is int: return None",
               "  else:", "    if not x: return None", f"    w, lit, ors = E{k}(x, w, lit, ors)", "    if w is None: return None"]
    size = fmt.size
    code.append("  w |= ors")
    if constant_bus.plan(self.isa, opc) is not None:  # too many scalar values: the line parser says which
      isa, read = self.isa, [(f, fmt.fields[f].lo, fmt.fields[f].mask) for f in constant_bus.fields_read(self.isa, opc)]
      env["BUS"] = lambda w, lit: constant_bus.violation(isa, opc, {f: w >> lo & m for f, lo, m in read}, lit)
      code.append("  if BUS(w, lit) is not None: return None")
    code += [f"  return w.to_bytes({size}, 'little') if lit is None else (w | lit << {8 * size}).to_bytes({size + 4}, 'little')"]
    return make_function(code, env, "encode")  # one compile per shape of opcode: names and numbers from its plan

  def _operand(self, opc: Opcode, spec: tuple, assign, valid: int | None, zero: frozenset = frozenset()) -> tuple:
    """(memo token -> value, fn(token) filling it, fn(effect, word, literal, ors) applying a non-int value) for one
    operand. What a register, source or address assigner makes of a token depends on its parameters alone, so
    their memo is shared by every operand with the same ones; what the generic assigner makes of it (where the
    fast one hands over, as for 'off') is remembered per format and operand; numbers and other operands have a
    memo per opcode. The assigners may read the fields in `zero`, as 0 (the encoder checks they are)."""
    isa, fmt, name = self.isa, opc.fmt, spec[0]
    kind = fmt.fields[name].kind if name in fmt.fields else "literal"
    how = getattr(assign, "how", None)
    if how and how[0] in ("vgpr", "scalar", "addr"): key = how[:1] + how[2:] + (spec[1], valid)
    elif how and how[0] == "src": key = ("src", how[2], how[3], how[4], how[5].ctype, valid, how[5].width)  # how numbers read: not the printed type alone
    else: key = (id(opc), name)
    memo = self.kinds.setdefault(key, {})
    # gfx90a+ acc bits: an AGPR operand sets one, and the whole instruction's operands must agree (build's
    # _check_acc): such tokens go to the line parser, and what the generic assigner says is kept per opcode
    acc = frozenset(f for f, syn in opc.mods.items() if syn.startswith("acc:"))
    handed = memo if len(key) == 2 else self.kinds.setdefault((id(opc), name, "generic") if acc else (fmt.name, kind) + tuple(spec) + (valid,), {})
    source = kind in ("src", "ssrc")
    values_of = self.lines._value
    constant = how[5] if how and how[0] == "src" else None
    f = fmt.fields.get(name)
    place = (~(f.mask << f.lo), f.lo, f.mask) if f else None

    def work_out(token: str):
      """What the builder's assigners do with the token: the field's value when that is all they write, else
      (value, literal, neg, abs) in a shared memo or (clear mask, bits, literal, neg, abs) in the others; False
      where this path cannot say."""
      known = handed.get(token)
      if known is not None: return known
      try:
        if constant is not None and _INTEGER.fullmatch(token):  # a plain integer source: the assigner's int case
          code, literal = constant(int(token, 16) if token[:2] == "0x" else int(token))
          if valid is not None and code < 256 and not valid >> code & 1: return _keep(handed, token, False)
          return _keep(memo, token, code if literal is None else (code, literal, False, False))
        arg = values_of(token)
        neg = absm = False
        if source and type(arg) is Modified: arg, neg, absm = arg.operand, arg.neg, arg.abs  # their bits: per opcode
        try: (writes, literal), into = _writes(assign, arg, zero), memo
        except Exception: (writes, literal), into = _writes(lambda a, v, lit: generic._assign(isa, opc, spec, a, v, lit), arg, zero), handed  # noqa: BLE001
        if valid is not None and not (name in writes and (writes[name] >= 256 or valid >> writes[name] & 1)): return _keep(into, token, False)
        if acc & writes.keys(): return _keep(handed, token, False)
        if list(writes) == [name]:
          if literal is None and not neg and not absm: return _keep(into, token, writes[name])
          return _keep(into, token, (writes[name], literal, neg, absm))
        if into is memo and memo is not handed: into = handed  # other fields: where this format's places hold
        clear, bits = _word_bits(fmt, writes)
        return _keep(into, token, (~clear, bits, literal, neg, absm))
      except Exception:  # noqa: BLE001 - the line parser says what is wrong with it
        return _keep(handed, token, False)
    neg_abs: dict = {}

    def apply(effect: tuple, w: int, lit, ors: int):
      if len(effect) == 4:  # this operand's own field
        value, literal, neg, absm = effect
        keep, bits = place[0], (value & place[2]) << place[1]
      else: keep, bits, literal, neg, absm = effect
      if literal is not None:
        if source and lit is not None and lit != literal: return None, lit, ors  # one literal per instruction
        lit = literal
      if neg or absm:
        extra = neg_abs.get((neg, absm))
        if extra is None:
          try:
            scratch = {f: 0 for f in opc.mods}
            generic._source_modifier(opc, name, neg, absm, scratch)
            extra = _word_bits(fmt, {f: v for f, v in scratch.items() if v})[1]
          except Exception: extra = False  # noqa: BLE001 - the line parser raises the error
          neg_abs[(neg, absm)] = extra
        if extra is False: return None, lit, ors
        ors |= extra
      return w & keep | bits, lit, ors
    return memo, work_out, apply

  def _vdsty(self) -> tuple[dict, Any]:
    """(memo token -> VGPR number, fn(token) filling it) for VOPD's second destination, as its assigner reads it
    before checking the low bit against the first's."""
    memo = self.kinds.setdefault(("vdsty",), {})
    values_of = self.lines._value

    def work_out(token: str):
      try: return _keep(memo, token, generic._vgpr(values_of(token), 1, "vdsty"))
      except Exception: return _keep(memo, token, False)  # noqa: BLE001 - the line parser says what is wrong with it
    return memo, work_out

  def _modifiers(self, opc: Opcode):
    """fn(modifier tokens, word) -> the word with them applied in order, or None (a token this path cannot take,
    or a keyword given twice)."""
    memo: dict[str, tuple | bool] = {}
    fmt = opc.fmt
    order = parser.modifier_order(opc)

    def work_out(token: str):
      try:
        key, value = parser._modifier(opc, token)
        writes, _ = _writes(lambda a, v, lit: generic._modifier(opc, key, a, v), value)
        clear, bits = _word_bits(fmt, writes)
        return _keep(memo, token, (~clear, bits, key, order.get(key, -1)))
      except Exception:  # noqa: BLE001 - the line parser says what is wrong with it
        return _keep(memo, token, False)

    def apply(tokens: list[str], w: int) -> int | None:
      keys, place = [], -1
      for t in tokens:
        e = memo.get(t)
        if e is None: e = work_out(t)
        if not e or e[3] < place: return None  # out of llvm-mc's order: the line parser says so
        place = e[3]
        w = w & e[0] | e[1]
        keys.append(e[2])
      return w if len(keys) == 1 or len(set(keys)) == len(keys) else None  # a repeated keyword: the line parser's
    return apply


class _ZeroReads(_WritesOnly):
  """A scratch values dict that records writes and reads the fields in `zero` as 0; any other read raises."""

  def __init__(self, zero: frozenset) -> None:
    super().__init__()
    self.zero = zero

  def __getitem__(self, key: str) -> int:
    if key in self.zero and not dict.__contains__(self, key): return 0
    return _WritesOnly.__getitem__(self, key)


def _writes(assign, arg, zero: frozenset = frozenset()) -> tuple[dict, int | None]:
  """The fields and literal an assigner fn(arg, values, literal) writes; reading a field raises (but for those in
  `zero`, read as 0), so a value that depends on others is never remembered."""
  scratch, literal = _ZeroReads(zero), [None]
  assign(arg, scratch, literal)
  return dict(dict.items(scratch)), literal[0]


def _word_bits(fmt, writes: dict) -> tuple[int, int]:
  """(mask of the written fields, their bits), as Format.pack places values; KeyError for a field fmt lacks."""
  clear = bits = 0
  for f, v in writes.items():
    lo, mask = fmt.places[f]
    clear |= mask << lo
    bits = bits & ~(mask << lo) | (v & mask) << lo
  return clear, bits


def _keep(memo: dict, token: str, value):
  if len(memo) < _MEMO_LIMIT: memo[token] = value
  return value


def assembler(isa: ISA) -> Assembler:
  """The line-to-bytes assembler of an arch (made once per process)."""
  return isa.helper(Assembler)
