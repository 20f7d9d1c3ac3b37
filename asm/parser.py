"""One line of LLVM AMDGPU assembly -> Instruction, through the same builder the DSL uses."""
from __future__ import annotations
import difflib
from typing import Any

from hcq.asm.build import OMOD_VALUES, Modified, build, modifier_keyword, modifier_names
from hcq.asm.instruction import Instruction
from hcq.asm.isa import ISA, Opcode
from hcq.asm.operands import OperandError, parse_number
from hcq.asm.registers import parse_register, past_file
from hcq.asm.tokens import split_operands_at


class AsmError(ValueError):
  """An assembly error at a line and column (1-based), with what was expected."""

  def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
    super().__init__(f"{line}:{column}: {message}")
    self.line, self.column, self.reason = line, column, message


_LANE_FORMS = ("DPP16", "DPP8", "DPP8FI", "SDWA")


def candidates(isa: ISA, mnemonic: str) -> list[Opcode]:
  """Opcodes a mnemonic may name, in the order llvm-mc 19 picks among them: itself (an alias or old name first
  becomes the table's name), then without an encoding suffix the _e32 form, the _e64 form, and last the lane forms
  (DPP16, DPP8, DPP8 with fi:1, SDWA), which only lane controls choose (v_cmp_class_f32 without them is e32)."""
  mnemonic = _unalias(isa, mnemonic)
  plain, lanes = [], []
  names = (mnemonic,) if mnemonic.endswith(("_e32", "_e64", "_dpp", "_sdwa")) else \
    (mnemonic, mnemonic + "_e32", mnemonic + "_e64", mnemonic + "_dpp", mnemonic + "_e64_dpp", mnemonic + "_sdwa")
  for m in names:
    for opc in isa.variants.get(m, ()):
      if opc not in plain and opc not in lanes: (lanes if opc.fmt.name.endswith(_LANE_FORMS) else plain).append(opc)
  return plain + lanes


def _unalias(isa: ISA, mnemonic: str) -> str:
  """The table's name for an alias or old name llvm-mc takes (flat_atomic_add -> flat_atomic_add_u32), with the
  encoding suffix it was written with (v_cvt_flr_i32_f32_e64 -> v_cvt_floor_i32_f32_e64)."""
  if mnemonic in isa.aliases: return isa.aliases[mnemonic]
  for suffix in ("_e32", "_e64", "_dpp", "_e64_dpp", "_sdwa"):
    if mnemonic.endswith(suffix) and mnemonic[:-len(suffix)] in isa.aliases:
      return isa.aliases[mnemonic[:-len(suffix)]] + suffix
  return mnemonic


def unknown_mnemonic(isa: ISA, mnemonic: str) -> str:
  """The error for a mnemonic the arch lacks: the archs that have it, or the closest names this arch has."""
  from hcq.asm.isa import ARCHS, load
  elsewhere = [a for a in ARCHS if a != isa.arch and candidates(load(a), mnemonic.lower())]
  if elsewhere: return f"{mnemonic!r} is not a {isa.arch} instruction (it is on {', '.join(elsewhere)})"
  names = set(isa.by_mnemonic) | {m[:-4] for m in isa.by_mnemonic if m.endswith(("_e32", "_e64"))}
  close = difflib.get_close_matches(mnemonic, sorted(names), n=4, cutoff=0.6)
  hint = f"; did you mean {', '.join(close)}?" if close else ""
  return f"unknown instruction {mnemonic!r} for {isa.arch}{hint}"


def operand_value(token: str) -> Any:
  """Assembly operand text -> the Python value the builder takes: Reg, Modified, number, or the text itself."""
  t = token
  neg = absm = False
  if t.startswith("-") and len(t) > 1 and not t[1].isdigit() and t[1] != ".":
    neg, t = True, t[1:]
  if t.startswith(("neg(", "sext(")) and t.endswith(")"): neg, t = True, t[t.index("(") + 1:-1]
  if t.startswith("|") and t.endswith("|") and len(t) > 2: absm, t = True, t[1:-1]
  elif t.startswith("abs(") and t.endswith(")"): absm, t = True, t[4:-1]
  reg = parse_register(t, vgpr_lists=False)  # a VGPR list stays text: the builder reads it as a range, or as NSA addresses
  value: Any = reg if reg is not None else parse_number(t)
  if value is None: value = t
  if neg and isinstance(value, (int, float)) and not absm and not token.startswith(("neg(", "sext(")): return -value
  return Modified(value, neg, absm) if neg or absm else value


def parse_line(isa: ISA, text: str, line: int = 1, column: int = 1) -> Instruction:
  """One instruction (no label or comment) -> Instruction; AsmError with line:column otherwise. Lines the fast
  parser (hcq.asm.fast_parse) covers go through it; the rest, and every error, through parse_line_generic."""
  from hcq.asm.fast_parse import line_parser
  return line_parser(isa).parse(text, line, column)


def parse_line_generic(isa: ISA, text: str, line: int = 1, column: int = 1) -> Instruction:
  """The reference parser: tokens -> operand values and modifiers -> build."""
  text = text.replace("\t", " ")  # llvm-mc takes tabs wherever a space goes (one character each: columns stay)
  body = text.strip()
  lead = len(text) - len(text.lstrip())
  if " :: " in body:  # a VOPD pair: one opcode 'x::y', X's operands, a '::' marker, then Y's
    x, y = body.split(" :: ", 1)
    mx, _, rx = x.partition(" ")
    my, _, ry = y.partition(" ")
    body = f"{mx.lower()}::{my.lower()} {rx.strip()}, ::, {ry.strip()}"
  mnemonic, _, rest = body.partition(" ")
  rest_at = lead + len(mnemonic) + 1
  opcodes = candidates(isa, mnemonic.lower())
  if not opcodes: raise AsmError(unknown_mnemonic(isa, mnemonic), line, column + lead)
  error: AsmError | None = None
  for opc in opcodes:
    try: return _parse_with(isa, opc, rest, rest_at, line, column)
    except AsmError as e:  # the first candidate's error, unless it only lacks another form's lane control (dpp8 vs quad_perm)
      if error is None or isinstance(error, _MissingModifier) and not isinstance(e, _MissingModifier): error = e
  raise error  # type: ignore[misc]


class _MissingModifier(AsmError):
  """A form's required modifier (DPP16's lane control) is absent: likely the text meant another form."""


def _parse_with(isa: ISA, opc: Opcode, rest: str, rest_at: int, line: int, column: int) -> Instruction:
  if opc.fmt.name == "SOPP":
    stripped = rest.strip()
    toks = [("", stripped, rest.index(stripped))] if stripped else []
  else:
    toks = split_operands_at(rest)
  npos = len(opc.operands) + (1 if opc.returned else 0)  # an atomic's returned value comes first when glc/th asks for it
  # the positional operands are the comma-separated run from the start; the rest are modifiers
  args = []
  i = 0
  while i < len(toks) and (i == 0 or toks[i][0] == "," or opc.fmt.name == "EXP" and i == 1) and len(args) < npos:
    args.append(toks[i]); i += 1
  mods_toks = toks[i:]
  mods: dict[str, Any] = {}
  order, last = modifier_order(opc), (-1, "")
  for sep, tok, at in mods_toks:
    try: key, value = _modifier(opc, tok)
    except OperandError as e: raise AsmError(str(e), line, column + rest_at + at) from None
    mods[key] = value
    place = order.get(key, last[0])
    if place < last[0]: raise AsmError(f"{tok!r} must come before {last[1]!r} (llvm-mc takes modifiers in its order)", line, column + rest_at + at)
    last = max(last, (place, tok))
  missing = next((f for f in required_modifiers(opc) if f not in mods), None)
  if missing is not None:
    what = {"dpp_ctrl": "a lane control (quad_perm:[...], row_shl:N, ...)", "dpp8": "dpp8:[...]", "dim": "dim:...",
            "dmask": "dmask:..."}.get(missing, repr(missing))
    raise _MissingModifier(f"{opc.mnemonic} needs {what}, as llvm-mc does", line, column + rest_at + len(rest.rstrip()))
  for _, t, at in args:  # s106 would read as vcc_lo: named here (VGPR ranges: the builder names the operand)
    past = past_file(t.lstrip("-|").rstrip("|"), isa.sgprs)
    if past and t.lstrip("-|")[0] in "st": raise AsmError(past, line, column + rest_at + at)
  values = [operand_value(t) for _, t, _ in args]
  try:
    return build(isa, opc, values, mods)
  except OperandError as e:
    at = args[e.index][2] if e.index is not None and e.index < len(args) else (args[-1][2] if args else 0)
    raise AsmError(str(e), line, column + rest_at + at) from None


_CACHE_POLICY = ("glc", "slc", "dlc", "sc0", "sc1", "nt", "th", "scope")  # one operand to llvm-mc: its bits in any order
_ORDERS: dict[int, dict[str, int]] = {}


def modifier_order(opc: Opcode) -> dict[str, int]:
  """keyword -> its place among the opcode's modifiers, as llvm-mc prints them and takes them (the cache-policy
  bits share the place of the first)."""
  got = _ORDERS.get(id(opc))
  if got is None:
    got = {}
    for f, syn in opc.mods.items():
      k = modifier_keyword(f, syn)
      if k is None or k in got: continue
      got[k] = next((got[c] for c in _CACHE_POLICY if c in got), len(got)) if k in _CACHE_POLICY else len(got)
    if "omod" in got: got.update({m: got["omod"] for m in ("mul", "div")})
    if "dim" in got and "dmask" in got: got["dim"] = got["dmask"] + 0.5  # gfx12 images: llvm-mc prints and takes dim after dmask
    if opc.fmt.name == "SMEM": got["offset"] = -1  # printed after the operands, before glc/dlc (the printer's SMEM rule)
    _ORDERS[id(opc)] = got
  return got


def required_modifiers(opc: Opcode) -> tuple[str, ...]:
  """Modifiers text must write (llvm-mc refuses the line without them): a DPP form's lane control, an image's dim, an
  image atomic's or gather4's dmask (llvm-mc's validateMIMGAtomicDMask/validateMIMGGatherDMask refuse the default 0),
  gfx11 GWS/GS-register DS's gds ("too few operands")."""
  return tuple(syn[5:] if syn == "text:gds" else f for f, syn in opc.mods.items()  # a text modifier by its keyword, as _modifier names it
               if syn in ("named:dpp_ctrl", "named:dpp8", "text:gds") or f == "dim" and syn.startswith("enum:")
               or f == "dmask" and opc.fmt.name.startswith("MIMG") and opc.mnemonic.startswith(("image_atomic_", "image_gather4")))


def _modifier(opc: Opcode, tok: str) -> tuple[str, Any]:
  """'offset:16' -> ('offset', 16); 'glc' -> ('glc', True); 'op_sel:[1,0]' -> ('op_sel', [1, 0]); 'mul:2' -> omod."""
  keyword = tok.split(":")[0]
  if keyword != keyword.lower(): raise OperandError(f"unexpected {tok!r}: modifier keywords are lower case")  # as llvm-mc's
  t = tok.lower()
  if t.startswith("format:"): return "format", tok
  if t.startswith("offset:swizzle("): return "offset", tok[len("offset:"):]
  if any(syn == f"text:{t}" for syn in opc.mods.values()): return t, True
  if t.startswith(("quad_perm:", "row_", "dpp8:", "wave_")) and t.split(":")[0] not in ("row_mask",):
    field = "dpp8" if t.startswith("dpp8:") else "dpp_ctrl"
    if field in opc.mods: return field, tok
  if t in OMOD_VALUES: return "omod", OMOD_VALUES[t]
  k, colon, v = t.partition(":")
  if colon and parse_number(v) is not None and any(syn == f"text:{k}:{parse_number(v)}" for syn in opc.mods.values()):
    return f"{k}:{parse_number(v)}", True  # DPP8's fi:0x1
  if parse_number(t) is not None:  # a number with no keyword: s_endpgm 3
    bare = [f for f, syn in opc.mods.items() if syn.startswith("{")]
    if bare: return bare[0], t
  key, colon, value = t.partition(":")
  if not colon:
    if key in modifier_names(opc): return key, True
    if key.startswith("no") and f"no:{key[2:]}:{opc.fmt.name}" in opc.isa.unprinted and opc.refused.get(key[2:], ("", 0))[0] != "bits":
      return key[2:], False  # noglc, nosc0 where llvm-mc takes them in this format (not nodone; not gfx12 buffer notfe)
    valid = sorted(modifier_names(opc))
    raise OperandError(f"unexpected {tok!r}" + (f"; {opc.mnemonic} takes {', '.join(valid)}" if valid else f"; {opc.mnemonic} takes no modifiers"))
  if any(syn == f"flag:{key}" or syn.startswith(f"flag:{key},") for syn in opc.mods.values()):
    raise OperandError(f"{key} takes no value (write {key}, or no{key} for the default), got {tok!r}")  # glc:0, clamp:1
  if value.startswith("[") and value.endswith("]"):
    try: return key, [int(x) for x in value[1:-1].split(",")]
    except ValueError: raise OperandError(f"{key}: expected a list of 0/1, got {value}") from None
  return key, value
