"""Operands (registers, numbers, names) and modifiers -> an Instruction's field values. Shared by the DSL
(Python values) and the text parser (tokens turned into the same values), so the two cannot disagree."""
from __future__ import annotations
import os
import re
from dataclasses import dataclass
from typing import Any

from hcq.asm import constant_bus, named
from hcq.asm.instruction import Instruction
from hcq.asm.isa import ISA, Opcode
from hcq.asm.numbers import parse_number_text, split_syntax
from hcq.asm.operands import OperandError, _inline_of_bits, constant_value, literal_width, parse_number, source_ctype
from hcq.asm.registers import SPECIAL_NAMES, Reg, parse_register

NULL = 124
OMOD_VALUES = {"mul:2": 1, "mul:4": 2, "div:2": 3, "mul:1": 0, "div:1": 0}  # mul:1/div:1: no output modifier, written out


@dataclass(frozen=True)
class Modified:
  """A source operand with neg/abs modifiers: -v[1], abs(v[1]), -abs(v[1])."""
  operand: Any
  neg: bool = False
  abs: bool = False

  def __neg__(self) -> "Modified": return Modified(self.operand, not self.neg, self.abs)

  def __abs__(self) -> "Modified": return Modified(self.operand, False, True)

  def __str__(self) -> str:
    t = str(self.operand)
    t = f"|{t}|" if self.abs else t
    return f"-{t}" if self.neg else t

  def __repr__(self) -> str:
    t = repr(self.operand)
    t = f"abs({t})" if self.abs else t
    return f"-{t}" if self.neg else t


def _vop3p_opsel_hi_default(opc: Opcode, values: dict[str, int]) -> None:
  syn = opc.mods.get("opsel_hi", "")
  if "opsel_hi" not in opc.fmt.fields or "opsel_hi" in opc.fixed: return
  ones = not syn.endswith(":0")
  values["opsel_hi"] = 3 if ones else 0
  if "opsel_hi2" not in opc.fixed: values["opsel_hi2"] = 1 if ones else 0


def build(isa: ISA, opc: Opcode, args: list, mods: dict[str, Any]) -> Instruction:
  """An instruction from positional operands in assembly order and modifiers by name (see MODIFIER_NAMES).
  OperandError names the operand (by position) that does not fit. Per-opcode builders (hcq.asm.fast_build) do
  the common operands; they hand anything else to build_generic."""
  from hcq.asm.fast_build import builder_of
  return builder_of(isa).build(opc, args, mods)


def initial_values(isa: ISA, opc: Opcode) -> dict[str, int]:
  """Every field's value before operands and modifiers: zero, or what the opcode fixes or defaults to."""
  values = {f: 0 for f in opc.fmt.fields if f != "op"}
  values.update(opc.fixed)
  _vop3p_opsel_hi_default(opc, values)
  values.update(opc.defaults)
  if "format" in opc.mods:  # MTBUF: the format that prints nothing
    values["format"] = next((k for k, n in isa.names["format"].items() if n == ""), 0)
  return values


def build_generic(isa: ISA, opc: Opcode, args: list, mods: dict[str, Any]) -> Instruction:
  """The reference builder, for every operand and modifier the table describes."""
  values = initial_values(isa, opc)
  literal: list[int | None] = [None]
  args = list(args)
  # modifiers first: tfe, offen and idxen decide how many registers buffer operands take; glc (gfx11) or th's bit 0
  # (gfx12) whether an atomic's returned value comes first (one operand more than the opcode lists)
  returning = opc.returned is not None and len(args) == len(opc.operands) + 1
  initial = dict(values)
  for key, value in mods.items():
    _modifier(opc, key, value, values, returning)
  if opc.returned is not None and opc.returns(values) != returning:
    asks = "glc" if opc.returned[0] == "glc" else "th:TH_ATOMIC_RETURN (or another odd th)"
    if returning: raise OperandError(f"{opc.mnemonic}: {len(args)} operands means a returned value first, which needs {asks}")
    raise OperandError(f"{opc.mnemonic}: {opc.returned[0]} asks for the old value: give the returned-value register first "
                       f"({len(opc.operands) + 1} operands, got {len(args)})")
  if opc.returns(values):  # the returned value is an AGPR when the data is (one acc bit)
    values["vdst"] = _vgpr_or_agpr(opc, "vdst", args.pop(0), opc.returned[1], values, acc=_acc_field(opc, "data") or _acc_field(opc, "vdata"))
  specs = opc.operands
  if opc.fmt.name == "MUBUF" and values.get("lds") and "lds" in opc.mods and len(args) == len(specs) - 1:
    # gfx9 'lds' loads into LDS (M0 addresses it): no vdata operand, the field stays 0
    args.insert(next(i for i, sp in enumerate(specs) if not isinstance(sp, str) and sp[0] == "vdata"), Reg("v", 0, specs[0][2]))
  fields_only = [sp for sp in specs if not isinstance(sp, str)]
  if len(args) != len(specs) and len(args) == len(fields_only) and len(fields_only) < len(specs):
    # the DSL may leave out implicit operands that assembly spells out (v_cmp_*_e32's vcc_lo)
    it = iter(args)
    args = [sp if isinstance(sp, str) else next(it) for sp in specs]
  if len(args) != len(specs):
    want = ", ".join(s if isinstance(s, str) else s[0] for s in specs)
    raise OperandError(f"{opc.mnemonic} takes {len(specs)} operand{'s' if len(specs) != 1 else ''} ({want}), got {len(args)}")
  for i, (spec, arg) in enumerate(zip(specs, args)):
    try:
      _assign(isa, opc, spec, arg, values, literal)
      valid = None if isinstance(spec, str) else opc.assembly_valid(spec)
      if valid is not None and values[spec[0]] < 256 and not valid >> values[spec[0]] & 1:
        raise OperandError(f"{spec[0]}: {arg} is not allowed in this operand of {opc.mnemonic}")
    except OperandError as e: raise OperandError(str(e), i) from None
  written = {f for key in mods for f in _fields_of(opc, key)}   # written at their default too (op_sel_hi:[1,1,1])
  check_refused_bits(opc, values, written | {f for f in values if values[f] != initial.get(f)})
  if any(syn.startswith("acc:") for syn in opc.mods.values()): _check_acc(opc, specs, args)
  over = constant_bus.violation(isa, opc, values, literal[0])
  if over is not None: raise OperandError(over[1], over[0])
  return Instruction(isa, opc, values, literal[0])


def check_refused_bits(opc: Opcode, values: dict[str, int], given: set[str] | None = None) -> None:
  """Modifier bits and values llvm-mc's assembler refuses on this opcode (tfe on a store, neg on a source without one).
  The generator probed bits as text that writes them, so a field the text left at its default (gfx942 v_dot2's
  op_sel_hi, all ones when omitted) is not judged: `given` names the fields the text wrote or changed."""
  for f, (kind, mask) in opc.refused.items():
    v = values.get(f, 0)
    if kind == "bits" and (given is None or f in given) and v & mask:
      raise OperandError(f"{opc.mnemonic} takes no {f} bit {v & mask:#x} here (llvm-mc's assembler refuses it)")
    if kind == "value" and f not in opc.operand_fields and mask >> v & 1:  # a modifier value (gfx9 64-bit DPP: row_newbcast only)
      raise OperandError(f"{opc.mnemonic} does not take this {f} value ({v:#x}; llvm-mc's assembler refuses it)")


def _fields_of(opc: Opcode, key: str) -> set[str]:
  """The fields modifier `key` writes, as the table's syntax names them (op_sel_hi: opsel_hi; flag:clamp: clamp)."""
  return {f for f, syn in opc.mods.items() if key in (syn.split(":")[0], syn.partition(":")[2])}


def _acc_field(opc: Opcode, name: str) -> str | None:
  """The gfx90a+ bit that makes operand `name` an AGPR (DS/FLAT/buffer acc, MFMA acc_cd/acc0/acc1), if any."""
  return next((f for f, syn in opc.mods.items() if syn.startswith("acc:") and name in syn[4:].split("+")), None)


def _check_acc(opc: Opcode, specs: tuple, args: list) -> None:
  """One acc bit covers several operands (ds_add_rtn_u32's vdst and data0): they must all be AGPRs or all VGPRs."""
  groups: dict[str, dict[str, int]] = {}
  for i, (spec, arg) in enumerate(zip(specs, args)):
    if isinstance(spec, str) or not (f := _acc_field(opc, spec[0])): continue
    reg = arg.operand if isinstance(arg, Modified) else parse_register(arg) if isinstance(arg, str) else arg
    if isinstance(reg, Reg) and reg.file in ("v", "a"): groups.setdefault(f, {}).setdefault(reg.file, i)
  for f, files in groups.items():
    if len(files) > 1:
      names = "/".join(s[0] for s in specs if not isinstance(s, str) and _acc_field(opc, s[0]) == f)
      raise OperandError(f"{names} of {opc.mnemonic} must be all VGPRs or all AGPRs (one acc bit)", max(files.values()))


def _vgpr(arg: Any, count: int | str, name: str, low: bool = False, files: str = "v") -> int:
  """A VGPR operand's index; `files` 'a' (AGPRs only) or 'va' (either) for gfx90a+ accumulation registers."""
  if isinstance(arg, str): arg = parse_register(arg) or arg
  if not isinstance(arg, Reg) or arg.file not in files:
    what = {"v": "a VGPR", "a": "an AGPR", "va": "a VGPR or AGPR"}[files]
    raise OperandError(f"{name}: expected {what}{'' if count in (1, 'l') else f' range of {count}'}, got {arg!s}")
  if count == "l":
    if arg.half is None: raise OperandError(f"{name}: expected a 16-bit VGPR half (v{arg.value}.l or v{arg.value}.h), got {arg}")
    if arg.value > 127: raise OperandError(f"{name}: 16-bit halves reach v127 at most, got {arg}")
    return arg.value | (128 if arg.half == "h" else 0)
  if arg.half is not None: raise OperandError(f"{name}: expected a 32-bit VGPR, got the 16-bit half {arg}")
  if arg.count != count: raise OperandError(f"{name}: expected {count} VGPR{'s' if count != 1 else ''}, got {arg}")
  if arg.value + arg.count > 256: raise OperandError(f"{name}: {arg} is past {arg.file}255")
  if low and arg.value > 127: raise OperandError(f"{name}: this operand reaches v127 at most, got {arg}")
  return arg.value


def _scalar(isa: ISA, arg: Any, count: int, name: str) -> int:
  if isinstance(arg, str):
    named = _arch_name(isa, arg, count)  # flat_scratch, xnack_mask (gfx9)
    if named is not None: return named
    arg = parse_register(arg) or arg
  if not isinstance(arg, Reg) or arg.file != "s":
    raise OperandError(f"{name}: expected {'a scalar register' if count == 1 else f'{count} scalar registers'}, got {arg!s}")
  if isa.sgprs < 106:  # gfx9 numbers some special registers apart (m0 is 124) and has no null
    special = SPECIAL_NAMES.get((arg.value, arg.count))
    if special is not None:
      v = isa.scalar_values[2 if count == 2 and special[1] == "null" else 2 if arg.count == 2 else 1].get(special[1])
      if v is None: raise OperandError(f"{name}: {special[1]} does not exist on {isa.arch}")
      if arg.count != count and not (arg.count == 1 and count == "l") and special[1] != "null":
        raise OperandError(f"{name}: expected {count} scalar register{'s' if count != 1 else ''}, got {special[1]}")
      return v
    if arg.count <= 2 and (isa.sgprs <= arg.value < 106 or arg.value < isa.sgprs < arg.value + arg.count):
      raise OperandError(f"{name}: {arg} is past s{isa.sgprs - 1} (the last SGPR on {isa.arch})")
  if arg.value == NULL: return NULL
  if arg.value >= 128 and arg.count == 1 and count > 2: return arg.value  # src_shared_base in a resource's place: llvm-mc prints it so
  if arg.count != count: raise OperandError(f"{name}: expected {count} scalar register{'s' if count != 1 else ''}, got {arg}")
  if arg.value < 124 and count > 1 and arg.value % (2 if count == 2 else 4) and arg.value not in (106, 126):
    raise OperandError(f"{name}: {arg} must start at a multiple of {2 if count == 2 else 4}")
  if arg.value < 106 and arg.value + count > 106: raise OperandError(f"{name}: {arg} is past s105")
  if 108 <= arg.value < 124 and arg.value + count > 124: raise OperandError(f"{name}: {arg} is past ttmp15")
  if count == 2 and arg.value in (107, 125, 127) or arg.value >= 128 and count > 2:
    raise OperandError(f"{name}: {arg} is not a {count}-register operand")
  return arg.value


def _assign(isa: ISA, opc: Opcode, spec: Any, arg: Any, values: dict, literal: list) -> None:
  if isinstance(spec, str):
    if str(arg) != spec and str(parse_register(str(arg)) or "") != spec:
      raise OperandError(f"expected {spec}, got {arg!s}")
    return
  name, file, count = spec[0], spec[1], spec[2]
  extra = spec[3] if len(spec) > 3 else ""
  fmt = opc.fmt.name
  kind = opc.fmt.fields[name].kind if name in opc.fmt.fields else "literal"
  if extra == "named:attr":  # lds_param_load's attr12.y: attr and attrchan
    m = re.fullmatch(r"attr(\d+)\.([xyzw])", str(arg))
    if not m or int(m.group(1)) > 63: raise OperandError(f"{name}: expected attrN.x/y/z/w with N up to 63, got {arg!s}")
    values["attr"], values["attrchan"] = int(m.group(1)), "xyzw".index(m.group(2))
    return
  if extra == "smem9":  # gfx9: a number (imm), an SGPR in the offset field, or with offset:X the soffset SGPR (soe)
    if isinstance(arg, int) and not isinstance(arg, bool):
      if values["soe"]: raise OperandError(f"{name}: offset:X goes with a register operand, got the number {arg}")
      values["imm"], values["offset"] = 1, _offset(opc, "offset", str(arg), "shex")
    elif values["soe"]: values["soffset"] = _scalar(isa, arg, 1, name)
    else: values["imm"], values["offset"] = 0, _scalar(isa, arg, 1, name)
    return
  if fmt == "SMEM" and name == "offset" and "soffset" not in opc.operand_fields:
    # gfx12: the offset's place holds the soffset register (then offset:X follows) or the offset itself
    if isinstance(arg, int): values["soffset"], values["offset"] = NULL, _offset(opc, "offset", str(arg), "shex")
    else: values["soffset"] = _scalar(isa, arg, 1, name)
    return
  if file == "i" and name != "literal":
    values[name] = _number(opc, name, arg, extra or "{ihex}")
    return
  if fmt.endswith("_SDWA") and name == "sdst":  # VOPC SDWA: vcc, or an SGPR pair with sd set
    if str(arg).lower() == "vcc": values["sd"] = 0
    else: values["sd"], values["sdst"] = 1, _scalar(isa, arg, 2, name)
    return
  if kind in ("src", "ssrc", "avsrc", "sdwa_src", "sdwa_vsrc1"):
    neg = absm = False
    if isinstance(arg, Modified): arg, neg, absm = arg.operand, arg.neg, arg.abs
    named = _arch_name(isa, arg, 1 if count == "l" else count) if isinstance(arg, str) else None
    if isinstance(arg, str): arg = parse_register(arg) or arg
    acc = _acc_field(opc, name)
    if kind == "avsrc" and not (isinstance(arg, Reg) and arg.file in "va"):
      raise OperandError(f"{name}: expected a VGPR or AGPR range of {count}, got {arg!s}")
    if named is not None: values[name] = named
    elif isinstance(arg, Reg) and arg.file in ("v", "a"):
      if kind == "ssrc" or file == "s": raise OperandError(f"{name}: a scalar operand (an SGPR or a constant), got the VGPR {arg}")
      values[name] = 256 + _vgpr(arg, count, name, file == "v128", "a" if file == "a" else "va" if acc else "v")
      if acc and arg.file == "a": values[acc] = 1
    elif isinstance(arg, Reg):
      values[name] = _scalar(isa, arg, 1 if count == "l" else count, name) if arg.value < 128 else arg.value
    elif isinstance(arg, (int, float)) and not isinstance(arg, bool):
      code, lit = constant_value(arg, source_ctype(opc.mnemonic, name, extra), literal_width(opc.fmt.family, opc.mnemonic, count, extra, name))
      if lit is not None and lit >> 16 == 0 and extra == "H" and spec[4] is not None and not spec[4] >> 255 & 1:  # 16-bit patterns only
        code, lit = (_inline_of_bits(lit, "h"), None) if _inline_of_bits(lit, "h") is not None else (code, lit)  # gfx9 VOP3: no literal
      if lit is not None:
        if literal[0] is not None and literal[0] != lit: raise OperandError(f"{name}: only one literal per instruction")
        literal[0] = lit
      values[name] = code
    else: raise OperandError(f"{name}: expected a register or a number, got {arg!s}")
    if neg or absm:
      _source_modifier(opc, name, neg, absm, values)
    if kind.startswith("sdwa"):  # SDWA: an 8-bit field, and s0/s1 set for a scalar source
      if values[name] == 255: raise OperandError(f"{name}: SDWA takes no literal, got {arg!s}")
      values["s0" if name == "src0" else "s1"], values[name] = int(values[name] < 256), values[name] & 0xff
    return
  if name == "literal":
    if not isinstance(arg, int): raise OperandError(f"expected a 32-bit literal number, got {arg!s}")
    if not -0x80000000 <= arg <= 0xffffffff: raise OperandError(f"{arg} does not fit a 32-bit literal (-0x80000000..0xffffffff)")
    literal[0] = arg & 0xffffffff
    return
  if fmt == "GLOBAL" and name == "saddr":
    values["saddr"] = isa.saddr_off if _is_off(arg) else _scalar(isa, arg, 2, name)
    return
  if fmt == "SCRATCH" and name == "saddr":
    values["saddr"] = isa.saddr_off if _is_off(arg) else _scalar(isa, arg, 1, name)
    return
  if fmt == "SCRATCH" and name == "addr":
    if _is_off(arg): values["addr"] = values["sve"] = 0
    else: values["addr"], values["sve"] = _vgpr(arg, 1, name), 1
    return
  if fmt == "GLOBAL" and name == "addr":
    values["addr"] = _vgpr(arg, (parse_register(str(arg)) or arg).count if isinstance(arg, (Reg, str)) and (parse_register(str(arg)) or arg) else 2, name)
    return
  if fmt in ("MUBUF", "MTBUF") and name == "vdata":
    values[name] = _vgpr_or_agpr(opc, name, arg, count + values.get("tfe", 0), values)
    return
  if fmt.startswith("MIMG") and name in ("vdata", "vaddr"):
    _image_vgprs(opc, name, arg, values)
    return
  if fmt in ("MUBUF", "MTBUF") and name == "vaddr":
    n = values["offen"] + values["idxen"]
    if n == 0:
      if not _is_off(arg): raise OperandError(f"vaddr: 'off' without offen or idxen, got {arg!s}")
      values[name] = 0
    else: values[name] = _vgpr(arg, n, name)
    return
  if fmt == "EXP" and name.startswith("vsrc"):
    bit = 1 << int(name[-1])
    if _is_off(arg): values["en"] &= ~bit; values[name] = 0
    else: values["en"] |= bit; values[name] = _vgpr(arg, 1, name)
    return
  if kind == "srsrc":
    values[name] = _scalar(isa, arg, count, name) // 4
    return
  if kind == "vdsty":  # VOPD: the second destination's low bit must differ from the first's
    r = _vgpr(arg, 1, name)
    if (r ^ values["vdstx"]) & 1 == 0: raise OperandError(f"{name}: {arg} must be odd when vdstx is even, and even when it is odd")
    values[name] = r >> 1
    return
  if fmt == "SMEM" and name == "soffset" and "offset" not in opc.operand_fields:  # gfx11: soffset or the offset
    if isinstance(arg, int): values["soffset"], values["offset"] = NULL, _offset(opc, "offset", str(arg), "shex")
    else: values["soffset"] = _scalar(isa, arg, 1, name)
    return
  if file == "i":
    values[name] = _number(opc, name, arg, extra or "{ihex}")
    return
  if kind == "sbase":
    values[name] = _scalar(isa, arg, count, name) // 2
    return
  if file[0] == "v" or file == "a":
    if isinstance(arg, Modified) and name in ("src0", "vsrc1"):  # DPP sources
      _source_modifier(opc, name, arg.neg, arg.abs, values)
      arg = arg.operand
    values[name] = _vgpr_or_agpr(opc, name, arg, count, values, file)
  else: values[name] = _scalar(isa, arg, count, name)


def _vgpr_or_agpr(opc: Opcode, name: str, arg: Any, count: int | str, values: dict, file: str = "v", acc: str | None = None) -> int:
  """A VGPR operand, or on gfx90a+ an AGPR where the operand's file is 'a' or an acc bit covers it (then set)."""
  acc = acc or _acc_field(opc, name)
  index = _vgpr(arg, count, name, file == "v128", "a" if file == "a" else "va" if acc else "v")
  if acc and (parse_register(arg) if isinstance(arg, str) else arg).file == "a": values[acc] = 1
  return index


def _image_vgprs(opc: Opcode, name: str, arg: Any, values: dict) -> None:
  """MIMG vdata/vaddr: widths follow dmask/d16/tfe/lwe and dim/a16 (set by the modifiers); the NSA form's vaddr is a
  list of VGPRs ([v0, v5] in text, a Python list in the DSL)."""
  widths = opc.image_widths(name, values)
  if widths is None: raise OperandError(f"{name}: {opc.mnemonic} has no encoding with these dmask/d16/tfe/lwe/dim/a16 modifiers")
  from hcq.asm.printer import NSA_ADDRESSES, image_address_list
  if name == "vdata" or not image_address_list(opc.fmt.name, widths):
    if name == "vaddr" and isinstance(arg, str) and arg.count(",") and not opc.fmt.name.startswith("MIMG_V"):
      raise OperandError(f"vaddr: a list of addresses is the NSA form, got {arg}")  # as llvm-mc reads [v1, v2]
    values[name] = _vgpr(arg, widths[0], name)
    return
  if isinstance(arg, str) and arg.startswith("[") and arg.endswith("]"): arg = [x.strip() for x in arg[1:-1].split(",")]
  if not isinstance(arg, (list, tuple)) or len(arg) != len(widths):
    raise OperandError(f"{name}: expected a list of {len(widths)} address VGPRs ({', '.join(map(str, widths))} wide), got {arg!s}")
  for f, a, w in zip(NSA_ADDRESSES, arg, widths): values[f] = _vgpr(a, w, f)


def _source_modifier(opc: Opcode, name: str, neg: bool, absm: bool, values: dict) -> None:
  """Set the neg/abs bits of source `name` (src1 is bit 1 of VOP3's neg field, DPP's neg1 field, ...)."""
  i = int(name[-1]) if name[-1].isdigit() else 0
  for wanted, kinds in ((neg, ("neg", "neg_lo")), (absm, ("abs",))):
    if not wanted: continue
    if kinds == ("abs",) and "only:" in opc.mods.get("abs", "") and not int(opc.mods["abs"].split("only:")[1]) >> i & 1:
      raise OperandError(f"{name}: {opc.mnemonic} takes no abs modifier on this operand")
    field = next((f for f, syn in opc.mods.items() if syn.split(":")[0].split(",")[0] in kinds and (f in (f"{kinds[0]}{i}", f"sext{i}") or not f[-1].isdigit())), None)
    if field is None: raise OperandError(f"{name}: {opc.mnemonic} takes no {kinds[0]} modifier on this operand")
    values[field] |= 1 if field[-1].isdigit() else 1 << i


def _arch_name(isa: ISA, text: str, count: int | str) -> int | None:
  """A scalar register name only some archs have (gfx9's flat_scratch, xnack_mask): its value there."""
  if parse_register(text) is not None: return None
  return isa.scalar_values.get(2 if count == 2 else 1, {}).get(text.lower())


def _is_off(arg: Any) -> bool:
  return arg is None or arg == "off"  # llvm-mc reads OFF as a symbol


def _number(opc: Opcode, name: str, arg: Any, syntax: str) -> int:
  bits = opc.fmt.fields[name].bits
  if syntax.startswith("named:"):
    if isinstance(arg, str) and not arg.lstrip("-").replace("x", "").isdigit():
      v = named.parse(syntax[6:], arg, opc)
      if v is None: raise OperandError(f"{name}: cannot read {arg!r} as {syntax[6:]}" + named.valid_names(syntax[6:], opc))
      return v
    syntax = "{ihex}"
  _, fmt, _ = split_syntax(syntax)
  if isinstance(arg, bool) or not isinstance(arg, (int, str)): raise OperandError(f"{name}: expected a number, got {arg!s}")
  return parse_number_text(str(arg), fmt, bits)


# modifier spellings: DSL keyword or assembly word -> field handling
def _modifier(opc: Opcode, key: str, value: Any, values: dict, returning: bool = False) -> None:
  mods = opc.mods
  fields = opc.fmt.fields
  if key == "dmask" and opc.mnemonic.startswith("image_gather4") and (parse_number(value) if isinstance(value, str) else value) not in (1, 2, 4, 8):
    raise OperandError(f"{opc.mnemonic}: dmask picks one channel (0x1, 0x2, 0x4 or 0x8), got {value} (llvm-mc's validateMIMGGatherDMask)")
  if key in ("omod",):
    if "omod" not in mods: raise OperandError(f"{opc.mnemonic} takes no output modifier (mul:/div:)")
    values["omod"] = OMOD_VALUES.get(value, value) if isinstance(value, str) else int(value)
    return
  if key == "neg" and any(syn.startswith("neg:") for syn in mods.values()):  # gfx940 f64 MFMA neg:[a,b,c] (blgp's bits)
    field = next(f for f, syn in mods.items() if syn.startswith("neg:"))
    bits = list(value)
    if len(bits) != int(mods[field][4:]): raise OperandError(f"neg takes {mods[field][4:]} entries, got {len(bits)}")
    values[field] = sum((1 if b else 0) << i for i, b in enumerate(bits))
    return
  if key in ("op_sel", "op_sel_hi", "neg_lo", "neg_hi"):
    field = {"op_sel": "opsel", "op_sel_hi": "opsel_hi", "neg_lo": "neg", "neg_hi": "neg_hi"}[key]
    syn = mods.get(field, "")
    if not syn.startswith(key + ":"): raise OperandError(f"{opc.mnemonic} takes no {key}")
    bits = list(value)
    syn, _, read = syn.partition(",bits:")
    n = int(syn.split(":")[1])
    if len(bits) != n: raise OperandError(f"{key} takes {n} entries, got {len(bits)}")
    word = 0
    for i, b in enumerate(bits): word |= (1 if b else 0) << i
    from hcq.asm.printer import opsel_positions
    positions = opsel_positions(opc.fmt.name, key, n, read)
    if positions is not None: word = sum((1 if b else 0) << p for b, p in zip(bits, positions))
    elif key == "op_sel" and opc.fmt.family != "VOP3P": word = (word & ((1 << (n - 1)) - 1)) | (word >> (n - 1) & 1) << 3
    if read and word & ~int(read): raise OperandError(f"{opc.mnemonic}: op_sel may set only bits {int(read):#b} (as [src..., dst])")
    if key == "op_sel_hi":
      values["opsel_hi"] = word & 3
      if n == 3 and "opsel_hi2" in fields and "opsel_hi2" not in opc.fixed: values["opsel_hi2"] = word >> 2 & 1
      return
    values[field] = word
    return
  if key == "offset" and opc.fmt.name == "DS" and mods.get("offset0") == "named:swizzle":
    off = named.swizzle_value(str(value))
    if off is None: raise OperandError(f"offset: expected swizzle(QUAD_PERM|BITMASK_PERM|BROADCAST|SWAP|REVERSE,...) or a number, got {value}")
    values["offset0"], values["offset1"] = off & 0xff, off >> 8
    return
  if key == "offset" and opc.fmt.name == "DS" and mods.get("offset0", "").startswith("offset:{ds16}"):
    off = parse_number_text(str(value), "dec", 16, strict=True)
    values["offset0"], values["offset1"] = off & 0xff, off >> 8
    return
  if key == "offset" and opc.fmt.name == "SMEM":
    values["offset"] = _offset(opc, "offset", str(value), "shex")
    if "soe" in fields: values["imm"] = values["soe"] = 1  # gfx9: 'sN offset:X' uses soffset and the offset
    return
  if any(syn.startswith("sel:") for syn in mods.values()) and key in mods and mods[key].startswith("sel:"):
    names = [t.partition(":")[2].lower() for t in mods[key][4:].split("|")]  # SDWA dst_sel:WORD_1 (or its number)
    text = str(value).lower()
    if text.isdigit() and int(text) < len(names) and names[int(text)]: values[key] = int(text); return
    if text not in names or not text: raise OperandError(f"{key}: expected one of {', '.join(n.upper() for n in names if n)}, got {value}")
    values[key] = names.index(text)
    return
  if key == "th" and mods.get("th", "").startswith("thscope:"):
    values["th"] = _th_value(opc, value, returning)
    return
  for field, syn in mods.items():
    if syn.startswith("text:") and syn[5:] == key: return  # a fixed word, such as DPP8's fi:1
    if syn.startswith("enum:") and field == key:
      names = [t.partition(":")[2].lower() for t in syn[5:].split("|")]
      text = str(value).lower()
      if text in (n.lower() for n in opc.isa.unprinted_names(field)): values[field] = 0; return  # scope:SCOPE_CU, written out
      if field == "th" and "th_scope" in opc.isa.names:  # a th name that only exists under some scope (TH_LOAD_BYPASS)
        found = [k // 4 for k, t in opc.isa.names["th_scope"].items() if t.partition(":")[2].lower() == text]
        if found and text not in names: values[field] = found[0]; return
      if field == "dim" and text not in names:  # dim:2D for dim:SQ_RSRC_IMG_2D: llvm-mc takes the names without their prefix
        text = os.path.commonprefix([n for n in names if n]) + text
      if text not in names: raise OperandError(f"{key}: expected one of {', '.join(n for n in names if n)}, got {value}")
      values[field] = names.index(text)
      return
    if syn.startswith("flag:") and syn[5:].split(",")[0].split(":")[0] == key:
      word = syn[5:].split(",")[0]
      number = parse_number(value) if isinstance(value, str) and ":" in word else None  # text fi:1, fi:0x1, fi:0
      if isinstance(value, str) and ":" in word and number not in (0, 1):
        raise OperandError(f"{key}: expected {key}:1 or {key}:0, got {key}:{value}")
      if number == 0:  # gfx9's bound_ctrl:0 sets the bit, as llvm-mc reads it (the DSL's 0 and False clear it)
        zero = opc.isa.unprinted.get(f"flag:{key}:0")
        if zero is None: raise OperandError(f"{key}: {opc.isa.arch} takes {word} only, got {key}:{value}")
        values[field] = int(zero)
      else: values[field] = 1 if value not in (False, 0, "0") else 0
      return
    if not syn.startswith(("flag:", "neg", "abs", "omod", "op_sel", "named:", "text:")) and split_syntax(syn)[0] == key + ":":
      if key in ("offset", "offset0", "offset1") and opc.fmt.name in MEMORY: values[field] = _offset(opc, field, str(value), split_syntax(syn)[1])
      else: values[field] = parse_number_text(str(value), split_syntax(syn)[1], fields[field].bits)
      return
    if syn.startswith("{") and key == field:  # a number printed bare (s_endpgm 3)
      values[field] = parse_number_text(str(value), split_syntax(syn)[1], fields[field].bits)
      return
    if syn.startswith("named:") and key == field:
      values[field] = _number(opc, field, value, syn)
      return
  valid = sorted(modifier_names(opc))
  raise OperandError(f"{opc.mnemonic} takes no modifier {key!r}" + (f"; valid: {', '.join(valid)}" if valid else ""))


def _th_value(opc: Opcode, value: Any, returning: bool) -> int:
  """gfx12 VMEM th: a name (TH_LOAD_NT; TH_LOAD_BYPASS, which is TH_LOAD_LU's value under SCOPE_SYS) or a number.
  Some names stand for two values, with and without an atomic's return bit: `returning` picks."""
  syn = opc.mods["th"]
  table = opc.isa.names[syn[8:].split(",")[0]]
  text = str(value).lower()
  if text in (n.lower() for n in opc.isa.unprinted_names(syn[8:].split(",")[0])): return 0  # th:TH_LOAD_RT, written out
  found = sorted({k // 4 for k, t in table.items() if t and t.partition(":")[2].lower() == text})
  if found:
    return next((th for th in found if th & 1 == returning), found[0]) if opc.returned else found[0]
  if parse_number(text) is not None and not isinstance(value, bool):
    return parse_number_text(text, "hex", opc.fmt.fields["th"].bits)
  names = sorted({t.partition(":")[2] for t in table.values() if t and not t.partition(":")[2].startswith(("0x", "TH_ATOMIC_0x"))})
  raise OperandError(f"th: expected one of {', '.join(names)} or a number, got {value}")


MEMORY = {"DS", "FLAT", "GLOBAL", "SCRATCH", "MUBUF", "MTBUF", "SMEM"}  # formats whose offsets llvm-mc range-checks strictly


def _offset(opc: Opcode, field: str, text: str, fmt: str) -> int:
  """A memory instruction's offset, in llvm-mc's range for it: a signed field's signed values, an unsigned field's
  unsigned ones; FLAT's unsigned offset leaves the top bit clear (GLOBAL's and SCRATCH's sign in the same field)."""
  bits = opc.fmt.fields[field].bits
  if opc.fmt.name == "FLAT" and not fmt.startswith("s"): bits -= 1
  return parse_number_text(text, fmt, bits, strict=True)


def modifier_keyword(field: str, syn: str) -> str | None:
  """The keyword text writes a modifier field under (clamp, offset, glc, op_sel, omod for mul:/div:, fi:1 for
  DPP8's fixed word); None for source modifiers (neg, abs) and acc bits."""
  if syn.startswith("text:"): return syn[5:]
  if syn.startswith("flag:"): return syn[5:].split(",")[0].split(":")[0]
  if syn == "omod": return "omod"
  if syn.split(",")[0] in ("neg", "abs") or syn.startswith("acc:"): return None
  if syn.startswith(("op_sel", "neg_lo", "neg_hi", "neg:")): return syn.split(":")[0]
  if syn == "named:swizzle": return "offset"
  if syn.startswith(("named:", "enum:", "thscope:", "sel:")): return field
  return split_syntax(syn)[0].rstrip(":") or field


def modifier_names(opc: Opcode) -> set[str]:
  """The modifier keywords an opcode takes (clamp, offset, glc, op_sel, ...)."""
  out = {k for f, syn in opc.mods.items() if (k := modifier_keyword(f, syn)) is not None}
  if opc.fmt.name == "SMEM": out.add("offset")
  return out
