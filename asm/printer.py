"""Instruction -> LLVM AMDGPU assembly text, driven by the opcode's operand and modifier specs."""
from __future__ import annotations

from hcq.asm import named
from hcq.asm.instruction import DecodeError, Instruction
from hcq.asm.numbers import number_text, split_syntax
from hcq.asm.operands import scalar_text, source_text, vgpr_text

NULL = 124
OMOD = {1: "mul:2", 2: "mul:4", 3: "div:2"}
VALU = {"VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P"}


def source_modifiers(opc, v: dict) -> tuple[int, int]:
  """(neg, abs) bitmasks over the sources: VOP3's neg/abs fields, v_fma_mix's neg_hi-as-abs, DPP's neg0/abs1/..."""
  neg = absm = 0
  for f, syn in opc.mods.items():
    if syn.split(",")[0] == "neg": neg |= v.get(f, 0) << (int(f[-1]) if f[-1].isdigit() else 0)
    elif syn.split(",")[0] == "abs":
      read = int(syn.split("only:")[1]) if "only:" in syn else -1  # abs bits of integer sources print nothing
      absm |= (v.get(f, 0) & read) << (int(f[-1]) if f[-1].isdigit() else 0)
  return neg, absm


def rejected_bits(syn: str) -> int:
  """The neg/abs bits a modifier's syntax ('abs,zero:4,only:3') says llvm-mc rejects the word for (v_cndmask's src2)."""
  return int(syn.split("zero:")[1].split(",")[0]) if ",zero:" in syn else 0


def sext_mask(opc) -> int:
  """Sources whose neg bit means sign extension (integer operands of VOP3): printed sext(x)."""
  return sum(int(syn.split("sext:")[1]) for syn in opc.mods.values() if "sext:" in syn)


def check(inst: Instruction) -> None:
  """Raise DecodeError if any operand of the instruction has no valid text (as llvm-mc would reject it)."""
  render(inst)


def _bad(inst: Instruction, what: str) -> DecodeError:
  return DecodeError(f"{inst.opcode.mnemonic}: {what}")


def render(inst: Instruction) -> str:
  """The instruction as llvm-mc prints it."""
  opc, v, isa = inst.opcode, inst.values, inst.isa
  fmt = opc.fmt
  fields = fmt.fields
  neg, absm = source_modifiers(opc, v)
  valu = fmt.family in VALU
  out: list[str] = []
  src_index = 0
  agprs = acc_fields(opc, v)
  for spec in opc.operands:
    if isinstance(spec, str): out.append(spec); continue
    name, file, count = spec[0], spec[1], spec[2]
    kind = fields[name].kind if name in fields else "literal"
    value = v.get(name, 0)
    agpr = file == "a" or name in agprs
    if file == "a": file = "v"  # an AGPR-only operand (v_accvgpr_read's source) reads like a VGPR, printed a<N>
    if kind in ("sdwa_src", "sdwa_vsrc1"):  # SDWA: s0/s1 say whether the 8-bit field is a scalar source or a VGPR
      value, kind = v[name] if v["s0" if name == "src0" else "s1"] else 256 + v[name], "src"
      if value == 255: raise _bad(inst, f"{name}: SDWA takes no literal")
    if kind == "avsrc":  # MFMA's A and B: VGPRs or AGPRs only
      if value < 256: raise _bad(inst, f"{name}={value}: takes VGPRs or AGPRs only")
      kind = "src"
    gfx11_soffset = fmt.name == "SMEM" and name == "soffset" and "offset" not in opc.operand_fields  # may print the offset
    if spec[4] is not None and value < 256 and not spec[4] >> value & 1 and not gfx11_soffset:
      raise _bad(inst, f"{name}={value} is not accepted by this operand")
    if spec[3] == "smem9": t = _smem9_offset(inst)
    elif fmt.name.endswith("_SDWA") and name == "sdst": t = scalar_text(isa, value, 2) if v["sd"] else "vcc"
    elif fmt.name == "SMEM" and name == "offset" and "soffset" not in opc.operand_fields: t = _smem_offset12(inst)
    elif file == "i" and name != "literal": t = _number(inst, name, value, spec[3] or "{ihex}")
    elif kind in ("src", "ssrc"):
      if file == "v128" and value >= 256 + 128 and count != "l": raise _bad(inst, f"{name} takes v0..v127 only")
      t = source_text(isa, value, spec, inst.literal, valu)
      if t is None: raise _bad(inst, f"{name}={value} is not a valid operand")
      i = int(name[-1]) if name[-1].isdigit() else src_index
      if absm >> i & 1: t = f"|{t}|"
      if neg >> i & 1 and sext_mask(opc) >> i & 1: t = f"sext({t})"  # the neg bit of an integer source
      elif neg >> i & 1:  # llvm-mc writes a negated constant as neg(0.5), a negated register or |constant| with '-'
        constant = 128 <= value <= 208 or 240 <= value <= 248 or value == 255
        t = f"neg({t})" if constant and not absm >> i & 1 else f"-{t}"
      src_index += 1
    elif name == "literal": t = number_text(inst.literal, split_syntax(spec[3])[1], 32)
    elif kind == "srsrc":  # a quad index: s[8:11] (buffers) or s[8:15] (MIMG's 256-bit resource)
      t = scalar_text(isa, value * 4, count)
      if t is None: raise _bad(inst, f"{name}={value} is not a valid SGPR quad")
    elif fmt.name in ("MUBUF", "MTBUF") and name in ("vaddr", "vdata"): t = _buffer_vgprs(inst, name, count)
    elif fmt.name.startswith("MIMG") and name in ("vaddr", "vdata"): t = _image_vgprs(inst, name)
    elif kind == "vdsty": t = vgpr_text(value << 1 | (v["vdstx"] & 1 ^ 1), 1)  # the low bit is the opposite of vdstx's
    elif fmt.name == "EXP" and name.startswith("vsrc"): t = vgpr_text(value, 1) if v["en"] >> int(name[-1]) & 1 else "off"
    elif kind == "sbase":
      start = value * 2 & ~(count - 1 if count > 2 else 1)
      t = scalar_text(isa, start, count)
      if t is None: raise _bad(inst, f"{name}={value} is not a valid {count}-register base")
    elif file[0] == "v" and name in ("src0", "vsrc1") and (neg or absm):  # DPP's sources carry neg/abs
      if file == "v128" and value >= 128 and count != "l": raise _bad(inst, f"{name} takes v0..v127 only")
      t = vgpr_text(value, count)
      i = int(name[-1])
      if absm >> i & 1: t = f"|{t}|"
      if neg >> i & 1: t = f"sext({t})" if sext_mask(opc) >> i & 1 else f"-{t}"
    elif file[0] == "v":
      if fmt.name in ("GLOBAL", "SCRATCH") and name == "addr":
        t = _flat_addr(inst, count)
      else:
        if file == "v128" and value >= 128 and count != "l": raise _bad(inst, f"{name} takes v0..v127 only")
        if count != "l" and value + count > 256: raise _bad(inst, f"{name}: v[{value}:{value + count - 1}] is past v255")
        t = vgpr_text(value, count)
    else:
      if fmt.name in ("GLOBAL", "SCRATCH") and name == "saddr":
        t = "off" if value == isa.saddr_off else scalar_text(isa, value, 2 if fmt.name == "GLOBAL" else 1)
      elif fmt.name == "SMEM" and name == "soffset" and "offset" not in opc.operand_fields:
        t = _smem_offset(inst)
      elif fmt.name == "SMEM" and name == "offset":
        t = _smem_offset12(inst)
      else:
        t = scalar_text(isa, value, count)
      if t is None: raise _bad(inst, f"{name}={value} is not a valid {count}-register scalar operand")
    if agpr and t and t[0] in "v-|": t = t.replace("v", "a", 1)
    if t: out.append(t)
  tail = _modifiers(inst)
  head = opc.mnemonic
  if opc.returns(v): out.insert(0, ("a" if agprs else "v") + vgpr_text(v["vdst"], opc.returned[1])[1:])  # with the data
  if fmt.name == "EXP": text = f"{head} {out[0]} {', '.join(out[1:])}"  # exp mrt0 v0, v1, off, off
  elif fmt.name == "VOPD":  # v_dual_add_f32 v1, v2, v3 :: v_dual_mul_f32 v4, v5, v6
    x, y = head.split("::")
    i = out.index("::")
    text = f"{x} {', '.join(out[:i])} :: {y} {', '.join(out[i + 1:])}"
  else: text = head + (" " + ", ".join(out) if out else "")
  return text + ("" if not tail else (" " if out or True else "") + " ".join(tail))


def _buffer_vgprs(inst: Instruction, name: str, count: int) -> str:
  """Buffer vaddr: 'off', one VGPR (offen or idxen) or two (both); vdata has one more register with tfe."""
  v = inst.values
  if name == "vdata" and v.get("lds") and "lds" in inst.opcode.mods:  # gfx9: loads into LDS, no vdata
    if v.get("acc"): raise _bad(inst, "acc with lds")
    return ""
  if name == "vdata":
    n = count + v.get("tfe", 0)
    if v["vdata"] + n > 256: raise _bad(inst, f"vdata v[{v['vdata']}:{v['vdata'] + n - 1}] is past v255")
    return vgpr_text(v["vdata"], n)
  n = v["offen"] + v["idxen"]
  if v["vaddr"] + n > 256: raise _bad(inst, "vaddr is past v255")
  return vgpr_text(v["vaddr"], n) if n else "off"


NSA_ADDRESSES = ("vaddr", "vaddr1", "vaddr2", "vaddr3", "vaddr4")


def _image_vgprs(inst: Instruction, name: str) -> str:
  """MIMG vdata (width from dmask, d16, tfe, lwe) and vaddr (a range, or the NSA form's [v0, v5, v[6:8]] list)."""
  widths = inst.opcode.image_widths(name, inst.values)
  if widths is None: raise _bad(inst, f"{name}: no encoding for these dmask/d16/tfe/lwe/dim/a16 values")
  fields = (name,) if name == "vdata" or not image_address_list(inst.opcode.fmt.name, widths) else NSA_ADDRESSES[:len(widths)]
  for f, w in zip(fields, widths):
    if inst.values[f] + w > 256: raise _bad(inst, f"{f}: v[{inst.values[f]}:{inst.values[f] + w - 1}] is past v255")
  texts = [vgpr_text(inst.values[f], w) for f, w in zip(fields, widths)]
  return f"[{', '.join(texts)}]" if name == "vaddr" and image_address_list(inst.opcode.fmt.name, widths) else texts[0]


def image_address_list(fmt: str, widths: tuple) -> bool:
  """Whether vaddr is a list of address VGPRs: gfx11's NSA form always, gfx12's images when there is more than one."""
  return fmt == "MIMG_NSA" or fmt.startswith("MIMG_V") and len(widths) > 1


def _flat_addr(inst: Instruction, count: int) -> str:
  v = inst.values
  if inst.opcode.fmt.name == "GLOBAL": return vgpr_text(v["addr"], 2 if v["saddr"] == inst.isa.saddr_off else 1)
  return vgpr_text(v["addr"], 1) if v["sve"] else "off"


def acc_fields(opc, v: dict) -> frozenset:
  """gfx90a+: the operand fields an acc bit that is set turns into AGPRs (DS/FLAT/buffer data, MFMA's C/D, A, B)."""
  out: set = set()
  for f, syn in opc.mods.items():
    if syn.startswith("acc:") and v.get(f): out.update(syn[4:].split("+"))
  return frozenset(out)


def _smem9_offset(inst: Instruction) -> str:
  """gfx9 SMEM: imm says the offset field is a number (else its low bits name the soffset SGPR); soe adds the
  soffset field's SGPR, printed 'sN offset:X' (with imm) or 'sN' (the offset field is then ignored)."""
  v = inst.values
  bits = inst.opcode.fmt.fields["offset"].bits
  if v["soe"]:
    reg = scalar_text(inst.isa, v["soffset"], 1)
    if reg is None: raise _bad(inst, f"soffset={v['soffset']} is not a valid scalar register")
    return reg + (" offset:" + number_text(v["offset"], "shex", bits) if v["imm"] else "")
  if v["imm"]: return number_text(v["offset"], "shex", bits)
  reg = scalar_text(inst.isa, v["offset"] & 0x7f, 1)  # llvm-mc reads the low 7 bits: an SGPR number
  if reg is None: raise _bad(inst, f"offset={v['offset'] & 0x7f:#x} is not a valid soffset register")
  return reg


def _smem_offset(inst: Instruction) -> str:
  """SMEM prints soffset, and the offset positionally when there is no soffset register."""
  v = inst.values
  bits = inst.opcode.fmt.fields["offset"].bits
  if v["soffset"] == NULL:
    return number_text(v["offset"], "shex", bits) if v["offset"] else "null"
  t = scalar_text(inst.isa, v["soffset"], 1)
  if t is None: raise _bad(inst, f"soffset={v['soffset']} is not a valid scalar register")
  return t


def _smem_offset12(inst: Instruction) -> str:
  """gfx12 SMEM: the offset in hex, or the soffset register followed by offset:X when there is one."""
  v = inst.values
  bits = inst.opcode.fmt.fields["offset"].bits
  if v["soffset"] == NULL: return number_text(v["offset"], "shex", bits)
  t = scalar_text(inst.isa, v["soffset"], 1)
  if t is None: raise _bad(inst, f"soffset={v['soffset']} is not a valid scalar register")
  return t + " offset:" + number_text(v["offset"], "shex", bits)  # gfx12 prints offset:0x0 too


def _number(inst: Instruction, name: str, value: int, syntax: str) -> str:
  if syntax.startswith("named:"):
    t = named.render(syntax[6:], value, inst)
    if t is None: raise _bad(inst, f"{name}={value:#x} has no {syntax[6:]} text")
    return t
  prefix, fmt, _ = split_syntax(syntax)
  return prefix + number_text(value, fmt, inst.opcode.fmt.fields[name].bits)


def _modifiers(inst: Instruction) -> list[str]:
  """Trailing modifiers in the order llvm-mc prints them."""
  opc, v = inst.opcode, inst.values
  fields = opc.fmt.fields
  out = []
  if opc.fmt.name == "SMEM" and "offset" in opc.mods and v.get("offset") and v.get("soffset") != NULL:  # before glc/dlc
    out.append("offset:" + number_text(v["offset"], "shex", fields["offset"].bits))
  done_ds16 = False
  for name, syn in opc.mods.items():
    value = v.get(name, 0)
    if syn.startswith("text:"): out.append(syn[5:])
    elif syn.startswith("acc:"): continue  # shown by the operands' a<N> registers
    elif syn.startswith("sel:"):  # SDWA dst_sel:WORD_1; '!' marks values llvm-mc rejects
      t = syn[4:].split("|")[value]
      if t == "!": raise _bad(inst, f"{name}={value} is not a valid select")
      out.append(t)
    elif syn.startswith("flag:"):
      if value: out.append(syn[5:].split(",")[0])
    elif syn == "omod":
      if value: out.append(OMOD[value])
    elif syn.split(",")[0] in ("neg", "abs"):
      if value & rejected_bits(syn): raise _bad(inst, f"{name}={value}: llvm-mc decodes no {name} on source bits {rejected_bits(syn):#x}")
    elif syn.startswith(("op_sel:", "op_sel_hi:", "neg_lo:", "neg_hi:", "neg:")):
      t = _bit_list(inst, name, syn)
      if t: out.append(t)
    elif syn == "named:swizzle":  # ds_swizzle_b32: offset1:offset0 as one 16-bit pattern
      if done_ds16: continue
      done_ds16 = True
      off = v.get("offset1", 0) << 8 | v.get("offset0", 0)
      if off: out.append("offset:" + named.swizzle_text(off))
    elif "{ds16}" in syn:
      if done_ds16: continue
      done_ds16 = True
      off = v.get("offset1", 0) << 8 | v.get("offset0", 0)
      if off: out.append(f"offset:{off}")
    elif syn.startswith("named:"):
      t = named.render(syn[6:], value, inst)
      if t is None: raise _bad(inst, f"{name}={value:#x} has no {syn[6:]} text")
      if t: out.append(t)
    elif inst.opcode.fmt.name == "SMEM" and name == "offset": continue
    elif syn.startswith("thscope:"):  # gfx12 VMEM: th's name depends on scope and on the access kind
      t = inst.isa.names[syn[8:].split(",")[0]][value * 4 + v.get("scope", 0)]
      if t: out.append(t)
    elif syn.startswith("enum:"):
      t = syn[5:].split("|")[value]
      if name == "th" and "th_scope" in inst.isa.names: t = inst.isa.names["th_scope"][value * 4 + v.get("scope", 0)]
      if t: out.append(t)
    elif syn.split(",")[0] == "unknown":
      if value: raise _bad(inst, f"{name}={value} has no text we know")
    else:
      prefix, fmt, omit_zero = split_syntax(syn)
      if value or not omit_zero: out.append(prefix + number_text(value, fmt, fields[name].bits))
  return out


def opsel_positions(fmt: str, label: str, n: int, read: str) -> list[int] | None:
  """Which op_sel bits the n printed entries are: the bits the opcode reads, in order, when there are n of them
  (v_permlane16_b32's op_sel:[fi,bound_ctrl] are bits 0 and 1); None for the usual [src..., dst] layout."""
  if label != "op_sel" or not read: return None
  bits = [b for b in range(4) if int(read) >> b & 1]
  return bits if len(bits) == n else None


def _bit_list(inst: Instruction, name: str, syn: str) -> str:
  """op_sel:[a,b,...] and friends; empty when every bit has its default."""
  v = inst.values
  syn, _, read = syn.partition(",bits:")
  parts = syn.split(":")
  label, n = parts[0], int(parts[1])
  if label == "op_sel_hi":
    bits = v.get("opsel_hi", 0) | v.get("opsel_hi2", 0) << 2
    default = 0 if len(parts) > 2 else (1 << n) - 1
    shown = [bits >> i & 1 for i in range(n)]
    return "" if bits & ((1 << n) - 1) == default else f"op_sel_hi:[{','.join(map(str, shown))}]"
  bits = v.get(name, 0) & (int(read) if read else -1)
  positions = opsel_positions(inst.opcode.fmt.name, label, n, read)
  if positions is not None:
    shown = [bits >> p & 1 for p in positions]
  elif label == "op_sel" and inst.opcode.fmt.family != "VOP3P":
    shown = [bits >> i & 1 for i in range(n - 1)] + [bits >> 3 & 1]  # the last entry is the destination, bit 3
  else:
    shown = [bits >> i & 1 for i in range(n)]
  return f"{label}:[{','.join(map(str, shown))}]" if any(shown) else ""
