"""The instruction DSL: one callable per mnemonic, registers and modifiers as Python values, and the repr that
writes an instruction back as DSL code (hcq.asm.rdna3 and friends export these per arch)."""
from __future__ import annotations
from typing import Any, Callable

from hcq.asm.build import Modified
from hcq.asm.fast_build import builder_of
from hcq.asm.instruction import Instruction
from hcq.asm.isa import ISA, Opcode
from hcq.asm.numbers import signed, split_syntax
from hcq.asm.operands import INLINE_FLOATS, INV_2PI, LITERAL
from hcq.asm.printer import acc_fields, opsel_positions, source_modifiers
from hcq.asm.registers import SPECIAL_NAMES, Reg, parse_register

NULL = 124


def instruction_function(isa: ISA, opc: Opcode) -> Callable[..., Instruction]:
  """The DSL callable for one opcode: positional operands in assembly order, modifiers as keywords."""
  fast = builder_of(isa).build  # as build(), without its per-call lookups

  def make(*operands: Any, **modifiers: Any) -> Instruction:
    return fast(opc, operands, modifiers)
  make.__name__ = make.__qualname__ = opc.name
  shown = ", ".join(o if isinstance(o, str) else o[0] for o in opc.operands)
  make.__doc__ = f"{opc.mnemonic} ({opc.fmt.name} op {opc.op}): {shown or 'no operands'}"
  return make


def namespace(isa: ISA) -> dict[str, Callable[..., Instruction]]:
  """mnemonic -> DSL callable, for every opcode of the arch."""
  return {m: instruction_function(isa, opc) for m, opc in isa.by_mnemonic.items()}


REGISTER_NAMES = ("v", "s", "ttmp", "Reg", "VCC", "VCC_LO", "VCC_HI", "EXEC", "EXEC_LO", "EXEC_HI", "NULL", "NULL64", "M0", "SCC", "VCCZ",
                  "EXECZ", "LDS_DIRECT", "OFF", "SRC_SHARED_BASE", "SRC_SHARED_LIMIT", "SRC_PRIVATE_BASE", "SRC_PRIVATE_LIMIT",
                  "SRC_POPS_EXITING_WAVE_ID")


def arch_namespace(arch: str) -> dict[str, Any]:
  """What `from hcq.asm.<family> import *` gives: ARCH, ISA, the register names and every instruction of `arch`."""
  from hcq.asm import registers
  from hcq.asm.isa import load
  isa = load(arch)
  return {"ARCH": arch, "ISA": isa, **{n: getattr(registers, n) for n in REGISTER_NAMES}, **namespace(isa)}


def _scalar(value: int, count: int | str) -> Any:
  n = 1 if count == "l" else count
  return Reg("s", value, n if value < 128 else 1)


def _source(inst: Instruction, name: str, spec: tuple, value: int | None = None) -> Any:
  value, count = inst.values[name] if value is None else value, spec[2]
  if value >= 256:
    i = value - 256
    return Reg("v", i & 127, 1, "h" if i >> 7 else "l") if count == "l" else Reg("v", i, count)
  if value == LITERAL: return inst.literal
  if 128 <= value <= 192: return value - 128
  if 193 <= value <= 208: return 192 - value
  if value in INLINE_FLOATS: return INLINE_FLOATS[value]
  if value == INV_2PI: return 0.15915494309189532
  return _scalar(value, count)


def _agpr(x: Any) -> Any:
  """The AGPR of a VGPR operand (gfx90a+ acc bits), through neg/abs wrappers."""
  if isinstance(x, Modified): return Modified(_agpr(x.operand), x.neg, x.abs)
  return Reg("a", x.value, x.count) if isinstance(x, Reg) and x.file == "v" else x


def _arch_scalar(isa: ISA, x: Any) -> Any:
  """gfx9 numbers some special registers apart from the DSL's names (m0 is 124 there): the name llvm-mc prints,
  as the DSL's register (M0) or as text ('flat_scratch') where the DSL has none."""
  if isa.sgprs >= 106 or not isinstance(x, Reg) or x.file != "s" or x.value < isa.sgprs or x.count > 2 or 108 <= x.value < 124: return x
  text = isa.scalars[x.count].get(x.value)
  reg = parse_register(text) if text else None
  return reg if reg is not None and (reg.value, reg.count) in SPECIAL_NAMES else text or x


def operands_of(inst: Instruction) -> tuple[list, dict]:
  """(positional operands, modifiers) that rebuild `inst` through its DSL callable."""
  opc, v = inst.opcode, inst.values
  fmt = opc.fmt.name
  args: list[Any] = []
  mods: dict[str, Any] = {}
  agprs = acc_fields(opc, v)
  if opc.returns(v): args.append(Reg("a" if agprs else "v", v["vdst"], opc.returned[1]))
  neg, absm = source_modifiers(opc, v)
  for spec in opc.operands:
    if isinstance(spec, str): args.append(spec); continue
    name, file, count = spec[0], spec[1], spec[2]
    kind = opc.fmt.fields[name].kind if name in opc.fmt.fields else "literal"
    if file == "a": file = "v"
    if spec[3] == "smem9":  # gfx9 SMEM: a number, the SGPR in the offset field, or soffset (then offset:X)
      x = Reg("s", v["soffset"]) if v["soe"] else signed(v["offset"], opc.fmt.fields["offset"].bits) if v["imm"] else Reg("s", v["offset"])
      if v["soe"] and v["imm"]: mods["offset"] = signed(v["offset"], opc.fmt.fields["offset"].bits)
    elif fmt.endswith("_SDWA") and name == "sdst": x = Reg("s", v["sdst"], 2) if v["sd"] else "vcc"
    elif kind in ("sdwa_src", "sdwa_vsrc1", "avsrc"):  # SDWA: s0/s1 pick the file; MFMA's A/B
      x = _source(inst, name, spec, v[name] if kind == "avsrc" or v["s0" if name == "src0" else "s1"] else 256 + v[name])
      i = int(name[-1]) if name[-1].isdigit() else 0
      if neg >> i & 1 or absm >> i & 1: x = Modified(x, bool(neg >> i & 1), bool(absm >> i & 1))
    elif len(spec) > 3 and spec[3] == "named:attr": x = f"attr{v['attr']}.{'xyzw'[v['attrchan']]}"
    elif fmt == "SMEM" and name == "offset" and "soffset" not in opc.operand_fields:  # gfx12: soffset, or the offset itself
      x = signed(v["offset"], opc.fmt.fields["offset"].bits) if v["soffset"] == NULL else Reg("s", v["soffset"])
    elif file == "i" and name != "literal":
      x = v[name]
      if spec[3].startswith("named:"):  # s_waitcnt("vmcnt(0) lgkmcnt(0)") reads better than s_waitcnt(7)
        from hcq.asm import named
        x = named.render(spec[3][6:], v[name], inst) or v[name]
    elif kind in ("src", "ssrc"):
      x = _source(inst, name, spec)
      i = int(name[-1]) if name[-1].isdigit() else 0
      if neg >> i & 1 or absm >> i & 1: x = Modified(x, bool(neg >> i & 1), bool(absm >> i & 1))
    elif name == "literal": x = inst.literal
    elif fmt in ("MUBUF", "MTBUF") and name == "vaddr":
      n = v["offen"] + v["idxen"]
      x = Reg("v", v["vaddr"], n) if n else "off"
    elif fmt in ("MUBUF", "MTBUF") and name == "vdata": x = Reg("v", v["vdata"], count + v.get("tfe", 0))
    elif fmt == "EXP" and name.startswith("vsrc"): x = Reg("v", v[name]) if v["en"] >> int(name[-1]) & 1 else "off"
    elif kind == "srsrc": x = Reg("s", v[name] * 4, count)
    elif fmt.startswith("MIMG") and name in ("vdata", "vaddr"):
      from hcq.asm.printer import NSA_ADDRESSES, image_address_list
      widths = opc.image_widths(name, v) or (1,)
      x = [Reg("v", v[f], w) for f, w in zip(NSA_ADDRESSES, widths)] if name == "vaddr" and image_address_list(fmt, widths) \
        else Reg("v", v[name], widths[0])
    elif kind == "vdsty": x = Reg("v", v[name] << 1 | (v["vdstx"] & 1 ^ 1))
    elif fmt == "GLOBAL" and name == "addr": x = Reg("v", v["addr"], 2 if v["saddr"] == inst.isa.saddr_off else 1)
    elif fmt == "SCRATCH" and name == "addr": x = Reg("v", v["addr"]) if v["sve"] else "off"
    elif fmt in ("GLOBAL", "SCRATCH") and name == "saddr": x = "off" if v["saddr"] == inst.isa.saddr_off else Reg("s", v["saddr"], 2 if fmt == "GLOBAL" else 1)
    elif fmt == "SMEM" and name == "soffset" and "offset" not in opc.operand_fields:
      x = (signed(v["offset"], opc.fmt.fields["offset"].bits) if v["offset"] else Reg("s", NULL)) if v["soffset"] == NULL else Reg("s", v["soffset"])
    elif file == "i": x = v[name]
    elif kind == "sbase": x = Reg("s", v[name] * 2 & ~(count - 1 if count > 2 else 1), count)
    elif file[0] == "v":
      x = Reg("v", v[name] & 127, 1, "h" if v[name] >> 7 else "l") if count == "l" else Reg("v", v[name], count)
      i = int(name[-1]) if name in ("src0", "vsrc1") else None
      if i is not None and (neg >> i & 1 or absm >> i & 1): x = Modified(x, bool(neg >> i & 1), bool(absm >> i & 1))
    else: x = _scalar(v[name], count)
    if name in agprs or spec[1] == "a": x = _agpr(x)
    args.append(_arch_scalar(inst.isa, x))
  if fmt == "SMEM" and v.get("offset") and v.get("soffset") != NULL and "soe" not in opc.fmt.fields: mods["offset"] = signed(v["offset"], opc.fmt.fields["offset"].bits)
  for name, syn in opc.mods.items():
    value = v.get(name, 0)
    if syn.startswith(("text:", "acc:")): continue
    if syn.startswith("sel:"):  # SDWA selects: given where they differ from what text without them means
      if value != opc.defaults.get(name, 0): mods[name] = syn[4:].split("|")[value].partition(":")[2]
      continue
    if syn.startswith("flag:"):
      if value: mods[syn[5:].split(",")[0].split(":")[0]] = True
    elif syn == "omod":
      if value: mods["omod"] = value
    elif syn.startswith(("op_sel", "neg_lo", "neg_hi", "neg:")):
      syn, _, read = syn.partition(",bits:")
      value &= int(read) if read else -1
      label, n = syn.split(":")[0], int(syn.split(":")[1])
      positions = opsel_positions(fmt, label, n, read)
      if positions is not None:
        if value: mods[label] = [value >> p & 1 for p in positions]
      elif label == "op_sel_hi":
        bits = v.get("opsel_hi", 0) | v.get("opsel_hi2", 0) << 2
        default = 0 if syn.endswith(":0") else (1 << n) - 1
        if bits & ((1 << n) - 1) != default: mods[label] = [bits >> i & 1 for i in range(n)]
      elif label == "op_sel" and opc.fmt.family != "VOP3P":
        if value: mods[label] = [value >> i & 1 for i in range(n - 1)] + [value >> 3 & 1]
      elif value: mods[label] = [value >> i & 1 for i in range(n)]
    elif "{ds16}" in syn:
      off = v.get("offset1", 0) << 8 | v.get("offset0", 0)
      if off: mods["offset"] = off
    elif syn == "named:format":
      text = inst.isa.names["format"].get(value)
      if text: mods["format"] = f"format:{text}"
    elif syn.startswith("thscope:"):
      text = inst.isa.names[syn[8:].split(",")[0]][value * 4 + v.get("scope", 0)].partition(":")[2]
      if text: mods[name] = text
    elif syn.startswith("enum:"):
      if value: mods[name] = syn[5:].split("|")[value].partition(":")[2]
      if value and name == "th" and "th_scope" in inst.isa.names:
        mods[name] = inst.isa.names["th_scope"][value * 4 + v.get("scope", 0)].partition(":")[2]
    elif syn == "named:swizzle":
      from hcq.asm import named
      off = v.get("offset1", 0) << 8 | v.get("offset0", 0)
      if off: mods["offset"] = named.swizzle_text(off)
    elif syn.startswith("named:") and not (fmt == "SMEM"):
      from hcq.asm import named
      text = named.render(syn[6:], value, inst)
      if text: mods[name] = text
    elif syn.startswith("named:") or fmt == "SMEM": continue
    elif syn.split(",")[0] in ("neg", "abs"): continue
    elif value != opc.defaults.get(name, 0):  # DPP's row_mask/bank_mask default to 0xf: 0 is given
      prefix, nfmt, _ = split_syntax(syn)
      mods[prefix.rstrip(":") or name] = signed(value, opc.fmt.fields[name].bits) if nfmt.startswith("s") else value
  return args, mods


def instruction_repr(inst: Instruction) -> str:
  """DSL code that builds an equal instruction, e.g. "v_add_f32_e64(v[0], -v[1], abs(v[2]), clamp=True)"."""
  args, mods = operands_of(inst)
  # implicit operands that assembly spells out (vcc_lo, VOPD's '::') are left for the callable to fill in
  spec_text = [s for s in inst.opcode.operands if isinstance(s, str)]
  if spec_text and len(args) == len(inst.opcode.operands): args = [a for a, s in zip(args, inst.opcode.operands) if not isinstance(s, str)]
  parts = [hex(a) if isinstance(a, int) and not isinstance(a, bool) and a > 64 else repr(a) for a in args] + \
          [f"{k}={val!r}" for k, val in mods.items()]
  return f"{inst.opcode.name}({', '.join(parts)})"
