"""Building without re-reading the table: per-opcode builders, made on first use from the opcode's operand specs.

hcq.asm.build.build_generic walks the spec of every operand on every call to find how to read it. A builder
decides that once per opcode and keeps, per operand, a small function doing what build_generic's branch for it
does with the same helpers (_vgpr, _scalar, _number, constant_value, _source_modifier), and, made from those, one
function compiled per opcode for the common arguments (plain registers, small integers, inline floats, literals,
-x/abs(x), numbers and modifiers seen before), with the helpers' accepting conditions inline. Operands of a kind it
does not specialise go through build_generic's own _assign; and on any error, or an argument it does not
expect (text, Modified registers of a scalar operand, ...), the whole instruction is built again by
build_generic, so errors and every unusual case are the generic path's own. tests/test_asm_fast.py checks both
build the same bytes and raise the same errors.
"""
from __future__ import annotations
import functools
from typing import Any

from hcq.asm import build as generic
from hcq.asm import constant_bus
from hcq.asm.build import Modified, build_generic, initial_values
from hcq.asm.fast_decode import covered
from hcq.asm.instruction import Instruction
from hcq.asm.isa import ISA, Opcode
from hcq.asm.operands import constant_value, literal_width, source_ctype
from hcq.asm.registers import Reg


class _Generic(Exception):
  """This instruction needs build_generic."""


class Builder:
  """Per-arch builders, one per opcode, made on first use."""

  def __init__(self, isa: ISA) -> None:
    self.isa = isa
    self.plans: dict[int, tuple | None] = {}  # by id(opcode): opcodes live as long as their ISA
    self.compiled: dict[int, object] = {}  # by id(opcode): _compile_builder's function, or None

  def build(self, opc: Opcode, args: Any, mods: dict[str, Any]) -> Instruction:
    """As build_generic(isa, opc, args, mods)."""
    plan = self.plans.get(id(opc), False)
    if plan is False: plan = self.plans[id(opc)] = self._plan(opc)
    if plan is None: return build_generic(self.isa, opc, list(args), mods)
    base, assigns, nspecs, nfields, strings, modifier = plan
    compiled = self.compiled.get(id(opc), False)
    if compiled is False:  # made on first build: the text assembler reads the plan alone
      compiled = self.compiled[id(opc)] = _compile_builder(self.isa, opc, opc.operands, assigns, base, modifier)
    if compiled is not None:
      try:
        inst = compiled(args, mods)
        if inst is not None and constant_bus.violation(self.isa, opc, inst.values, inst.literal) is None: return inst
      except Exception: pass  # noqa: BLE001 - the assigners below decide (an unhashable modifier value, ...)
    try:
      values = base.copy()
      literal: list[int | None] = [None]
      if mods:
        for k, value in mods.items(): modifier(k, value, values)
      if len(args) != nspecs:
        if len(args) != nfields or nfields >= nspecs: raise _Generic
        it = iter(args)  # the DSL may leave out implicit operands that assembly spells out (v_cmp_*_e32's vcc_lo)
        args = [s if s is not None else next(it) for s in strings]
      for (assign, name, valid), arg in zip(assigns, args):
        assign(arg, values, literal)
        if valid is not None:
          v = values[name]
          if v < 256 and not valid >> v & 1: raise _Generic
      if constant_bus.violation(self.isa, opc, values, literal[0]) is not None: raise _Generic
      return Instruction(self.isa, opc, values, literal[0])
    except Exception:  # noqa: BLE001 - the generic builder decides, and raises its own error
      return build_generic(self.isa, opc, list(args), mods)

  def _plan(self, opc: Opcode) -> tuple | None:
    # formats whose _assign branches the assigners below mirror; atomics whose returned value comes first: generic
    if not covered(opc) or opc.returned is not None: return None
    if any(kind == "bits" or f not in opc.operand_fields for f, (kind, _) in opc.refused.items()): return None  # refused modifiers: generic checks
    specs = opc.operands
    if any(not isinstance(s, str) and s[0] == "literal" and s[4] is not None for s in specs): return None
    assigns = tuple((self._assign(opc, spec), None if isinstance(spec, str) else spec[0],
                     None if isinstance(spec, str) or spec[0] == "literal" else opc.assembly_valid(spec)) for spec in specs)
    strings = [s if isinstance(s, str) else None for s in specs]
    nfields = sum(1 for s in specs if not isinstance(s, str))
    base, modifier = initial_values(self.isa, opc), _memo_modifier(opc)
    return base, assigns, len(specs), nfields, strings, modifier

  def _assign(self, opc: Opcode, spec: Any):
    """fn(arg, values, literal) doing build_generic's _assign for one operand spec (the valid-value mask is
    checked by the caller)."""
    isa = self.isa
    fmt = opc.fmt.name

    def fallback(arg, values, literal) -> None:
      generic._assign(isa, opc, spec, arg, values, literal)
    if isinstance(spec, str): return fallback
    name, file, count = spec[0], spec[1], spec[2]
    extra = spec[3] if len(spec) > 3 else ""
    kind = opc.fmt.fields[name].kind if name in opc.fmt.fields else "literal"
    if extra == "named:attr" or file == "a" or fmt == "SMEM" and name == "offset" and "soffset" not in opc.operand_fields: return fallback
    if file == "i" and name != "literal":
      syntax = extra or "{ihex}"
      known: dict = {}  # (type, arg) -> field value: _number depends on nothing else (s_waitcnt's text, offsets)

      def number(arg, values, literal) -> None:
        key = (type(arg), arg)
        v = known.get(key)
        if v is None:
          v = generic._number(opc, name, arg, syntax)
          if len(known) < 4096: known[key] = v
        values[name] = v
      number.how = ("number", name, known)
      return number
    if kind in ("src", "ssrc"):
      v128, scalar_count, ssrc = file == "v128", 1 if count == "l" else count, kind == "ssrc" or file == "s"  # no VGPR (a lane mask)
      source_modifier = _memo_source_modifier(opc, name)
      constant = _constant(source_ctype(opc.mnemonic, name, extra), literal_width(opc.fmt.family, opc.mnemonic, count, extra, name))

      def src(arg, values, literal) -> None:
        t = type(arg)
        if t is Reg:
          if arg.file == "v":
            if ssrc: raise _Generic
            values[name] = 256 + generic._vgpr(arg, count, name, v128)
          else: values[name] = generic._scalar(isa, arg, scalar_count, name) if arg.value < 128 else arg.value
          return
        neg = absm = False
        if t is Modified: arg, neg, absm = arg.operand, arg.neg, arg.abs; t = type(arg)
        if t is Reg:
          if arg.file == "v":
            if ssrc: raise _Generic
            values[name] = 256 + generic._vgpr(arg, count, name, v128)
          else: values[name] = generic._scalar(isa, arg, scalar_count, name) if arg.value < 128 else arg.value
        elif t is int or t is float:
          code, lit = constant(arg)
          if lit is not None:
            if literal[0] is not None and literal[0] != lit: raise _Generic
            literal[0] = lit
          values[name] = code
        else: raise _Generic
        if neg or absm: source_modifier(neg, absm, values)
      src.how = ("src", name, count, ssrc, v128, constant, source_modifier)
      return src
    if name == "literal": return fallback
    if fmt in ("GLOBAL", "SCRATCH") and name == "saddr":
      n = 2 if fmt == "GLOBAL" else 1

      def saddr(arg, values, literal) -> None:
        if type(arg) is not Reg: raise _Generic
        values[name] = generic._scalar(isa, arg, n, name)
      saddr.how = ("scalar", name, n, 1)
      return saddr
    if fmt == "GLOBAL" and name == "addr":
      def addr(arg, values, literal) -> None:
        if type(arg) is not Reg or arg.file != "v": raise _Generic
        values[name] = generic._vgpr(arg, arg.count, name)
      addr.how = ("addr", name)
      return addr
    if fmt in ("SCRATCH", "MUBUF", "MTBUF", "EXP") or kind in ("srsrc", "vdsty"): return fallback
    if fmt == "SMEM" and name == "soffset" and "offset" not in opc.operand_fields: return fallback
    if kind == "sbase":
      def sbase(arg, values, literal) -> None:
        if type(arg) is not Reg: raise _Generic
        values[name] = generic._scalar(isa, arg, count, name) // 2
      sbase.how = ("scalar", name, count, 2)
      return sbase
    if file[0] == "v":
      low = file == "v128"
      top = min(127, 256 - count) if low and type(count) is int else 256 - count if type(count) is int else -1

      def vgpr(arg, values, literal) -> None:
        if type(arg) is not Reg: raise _Generic  # Modified DPP sources, text: generic
        # _vgpr's accepting case, inline; anything else goes through _vgpr itself
        if arg.file == "v" and arg.half is None and arg.count == count and arg.value <= top: values[name] = arg.value
        else: values[name] = generic._vgpr(arg, count, name, low)
      vgpr.how = ("vgpr", name, count, top)
      return vgpr

    def scalar(arg, values, literal) -> None:
      if type(arg) is not Reg: raise _Generic
      values[name] = generic._scalar(isa, arg, count, name)
    scalar.how = ("scalar", name, count, 1)
    return scalar


def _compile_builder(isa: ISA, opc: Opcode, specs: tuple, assigns: tuple, base: dict, modifier):
  """fn(args, mods) -> the Instruction the assigners build, or None: one function compiled per opcode for the
  common arguments (plain registers, small integers, numbers and modifiers seen before), with the accepting
  conditions of _vgpr, _scalar and constant_value inline; anything else returns None for the assigners.
  None when some operand has no such form (its assigner reads other fields or special text)."""
  fields_only = [i for i, sp in enumerate(specs) if not isinstance(sp, str)]
  env: dict = {"Reg": Reg, "Instruction": Instruction, "ISA": isa, "OPC": opc, "BASE": base, "EFFECTS": modifier.effects}
  names = [f"a{i}" for i in range(len(fields_only))]
  code = ["def build(args, mods):", f"  if len(args) != {len(fields_only)}: return None"]
  if names: code.append(f"  {', '.join(names)}{',' if len(names) == 1 else ''} = args")
  sets = []
  code.append("  lit = None")
  for a, i in zip(names, fields_only):
    how = getattr(assigns[i][0], "how", None)
    if how is None: return None
    kind, name, valid = how[0], how[1], assigns[i][2]
    x = f"x{i}"
    if kind == "vgpr":
      count, top = how[2], how[3]
      if type(count) is not int: return None
      code += [f"  if not (type({a}) is Reg and {a}.file == 'v' and {a}.half is None and {a}.count == {count} and {a}.value <= {top}): return None",
               f"  {x} = {a}.value"]
    elif kind == "src":
      _, _, count, ssrc, v128, constant, source_modifier = how
      code += _source_case(env, i, a, x, count, ssrc, v128, constant, source_modifier)
    elif kind == "scalar":
      count, div = how[2], how[3]
      if type(count) is not int: return None
      code += _scalar_case(a, x, count, "if", isa.sgprs) + ["  else: return None"]
      if div != 1: code.append(f"  {x} //= {div}")
    elif kind == "addr": code += [f"  if not (type({a}) is Reg and {a}.file == 'v' and {a}.half is None and {a}.value + {a}.count <= 256): return None",
                                  f"  {x} = {a}.value"]
    elif kind == "number":
      env[f"K{i}"] = how[2]
      code += [f"  {x} = K{i}.get((type({a}), {a}))", f"  if {x} is None: return None"]
    else: return None
    if valid is not None: code.append(f"  if {x} < 256 and not {valid} >> {x} & 1: return None")
    sets.append(f"  values[{name!r}] = {x}")
  code += ["  values = BASE.copy()", "  if mods:", "    for k, m in mods.items():", "      if type(m) is list: return None",
           "      eff = EFFECTS.get((k, type(m), m))", "      if not eff: return None", "      for f, v in eff: values[f] = v"]
  code += sets + [f"  for f, b in ors{i}: values[f] |= b" for i in fields_only if f"SM{i}" in env] + ["  return Instruction(ISA, OPC, values, lit)"]
  exec("\n".join(code), env)  # noqa: S102 - code made above from the opcode's specs; names and numbers only
  return env["build"]


def _source_case(env: dict, i: int, a: str, x: str, count, ssrc: bool, v128: bool, constant, source_modifier) -> list[str]:
  """Code for a source operand: a VGPR (not for ssrc), an SGPR, a small integer, an inline float, a 32-bit literal
  (as constant_value makes them) and -x / abs(x) of those (the bits _source_modifier ors in, remembered)."""
  from hcq.asm.operands import INLINE_FLOATS
  env[f"SM{i}"], env["Modified"] = source_modifier.effects, Modified
  env["INLINE_FLOAT"] = {f: code for code, f in reversed(list(INLINE_FLOATS.items()))}  # the first code wins, as there
  code = [f"  ors{i} = ()", f"  if type({a}) is Modified:", f"    ors{i} = SM{i}.get(({a}.neg, {a}.abs))",
          f"    if ors{i} is None: return None", f"    {a} = {a}.operand"]
  n = 1 if count == "l" else count
  if type(count) is int and not ssrc:
    top = min(127, 256 - count) if v128 else 256 - count
    code.append(f"  if type({a}) is Reg and {a}.file == 'v' and {a}.half is None and {a}.count == {count} and {a}.value <= {top}: {x} = 256 + {a}.value")
    code += _scalar_case(a, x, n, "elif", env["ISA"].sgprs)
  else: code += _scalar_case(a, x, n, "if", env["ISA"].sgprs)
  code += [f"  elif type({a}) is int and -16 <= {a} <= 64: {x} = 128 + {a} if {a} >= 0 else 192 - {a}",
           f"  elif type({a}) is float and {a} in INLINE_FLOAT: {x} = INLINE_FLOAT[{a}]"]
  if hasattr(constant, "inline"):  # 32- and 64-bit operands: an integer whose bits are no inline float is a literal
    env[f"INL{i}"] = constant.inline
    code += [f"  elif type({a}) is int and -0x80000000 <= {a} <= {constant.top} and ({a} & 0xffffffff) << {constant.shift} not in INL{i}:",
             f"    if lit is not None and lit != {a} & 0xffffffff: return None", f"    lit = {a} & 0xffffffff", f"    {x} = 255"]
  return code + ["  else: return None"]


def _scalar_case(a: str, x: str, count: int, word: str, sgprs: int) -> list[str]:
  """The case of _scalar that returns the register itself: an aligned range of the arch's SGPRs (s0..s105 on
  gfx11/gfx12, s0..s101 on gfx9)."""
  align = 1 if count == 1 else 2 if count == 2 else 4
  return [f"  {word} type({a}) is Reg and {a}.file == 's' and {a}.count == {count} and {a}.value % {align} == 0 and {a}.value + {count} <= {sgprs}: {x} = {a}.value"]


class _WritesOnly(dict):
  """A scratch values dict that records what a modifier writes and refuses reads (a read means the effect
  depends on other fields, so it cannot be remembered)."""

  def _read(self, *args, **kwargs): raise _Generic
  __getitem__ = __contains__ = __iter__ = __len__ = get = keys = items = values = pop = setdefault = copy = _read


def _memo_modifier(opc: Opcode):
  """fn(key, value, values) doing build's _modifier: the fields a (key, value) sets are remembered when they do
  not depend on other fields (flags, offsets, op_sel lists, enums); other modifiers call _modifier each time."""
  effects: dict = {}

  def modifier(key: str, value: Any, values: dict) -> None:
    try: k = (key, type(value), tuple(value) if type(value) is list else value); hash(k)
    except TypeError: generic._modifier(opc, key, value, values); return
    eff = effects.get(k)
    if eff is None:
      scratch = _WritesOnly()
      try: generic._modifier(opc, key, value, scratch)
      except _Generic: eff = False
      else: eff = tuple(dict.items(scratch))
      if len(effects) < 8192: effects[k] = eff  # bounded: offsets and the like take many values
    if eff is False: generic._modifier(opc, key, value, values)
    else:
      for f, v in eff: values[f] = v
  modifier.effects = effects
  return modifier


def _memo_source_modifier(opc: Opcode, name: str):
  """fn(neg, absm, values) doing build's _source_modifier for one source: the bits it ors in, remembered."""
  effects: dict = {}

  def source_modifier(neg: bool, absm: bool, values: dict) -> None:
    eff = effects.get((neg, absm))
    if eff is None:
      scratch = {f: 0 for f in opc.mods}
      generic._source_modifier(opc, name, neg, absm, scratch)  # OperandError: the caller rebuilds generically
      eff = effects[(neg, absm)] = tuple((f, v) for f, v in scratch.items() if v)
    for f, v in eff: values[f] |= v
  source_modifier.effects = effects
  return source_modifier


@functools.cache
def _constant(ctype: str, width: int):
  """fn(number) -> operands.constant_value(number, ctype, width), skipping its search of the inline float constants
  for an integer literal whose bits are none of theirs (32-bit and f64 operands)."""
  import struct
  from hcq.asm.operands import _INV_2PI_BITS, INLINE_FLOATS, _inline_of_bits
  if ctype not in ("", "d") or width not in (32, 64) or (ctype == "d") != (width == 64):
    def general(n): return constant_value(n, ctype, width)
    general.width, general.ctype = width, ctype
    return general
  pack = (lambda f: struct.unpack("<Q", struct.pack("<d", f))[0]) if ctype == "d" else (lambda f: struct.unpack("<I", struct.pack("<f", f))[0])
  inline = frozenset(b for b in {pack(f) for f in INLINE_FLOATS.values()} | {_INV_2PI_BITS[ctype]} if _inline_of_bits(b, ctype) is not None)
  shift = 32 if ctype == "d" else 0
  top = 0xffffffff if ctype == "d" else 0xffffffef  # 32-bit: 0xfffffff0.. are -16..-1

  def constant(n):
    if type(n) is int and not -16 <= n <= 64 and -0x80000000 <= n <= top and (n & 0xffffffff) << shift not in inline:
      return 255, n & 0xffffffff  # what constant_value returns for a literal
    return constant_value(n, ctype, width)
  constant.inline, constant.shift, constant.top, constant.width, constant.ctype = inline, shift, top, width, ctype
  return constant


def builder_of(isa: ISA) -> Builder:
  """The fast builder of an arch (made once per process)."""
  return isa.helper(Builder)
