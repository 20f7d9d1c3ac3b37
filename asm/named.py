"""Symbolic immediates: s_waitcnt counters, hwreg(...), sendmsg(...) and s_delay_alu's instid/instskip.

Bit layouts are the RDNA3 ISA guide's; the names come from the generated table (NAMES), probed from llvm-mc."""
from __future__ import annotations
import re

# s_waitcnt (gfx11): vmcnt 15:10, lgkmcnt 9:4, expcnt 2:0
WAITCNT = {"vmcnt": (10, 6), "expcnt": (0, 3), "lgkmcnt": (4, 6)}
WAITCNT_ORDER = ("vmcnt", "expcnt", "lgkmcnt")
# s_waitcnt_depctr / s_wait_alu (RDNA3/4): hold_cnt 7, sa_sdst 0, va_vdst 15:12, va_sdst 11:9, va_ssrc 8, va_vcc 1,
# vm_vsrc 4:2, in the order llvm-mc prints them; bits 6:5 are unused (set, the value prints as a number)
DEPCTR = (("depctr_hold_cnt", 7, 1), ("depctr_sa_sdst", 0, 1), ("depctr_va_vdst", 12, 4), ("depctr_va_sdst", 9, 3),
          ("depctr_va_ssrc", 8, 1), ("depctr_va_vcc", 1, 1), ("depctr_vm_vsrc", 2, 3))
DEPCTR_UNUSED = 0b1100000
# hwreg: id 5:0, offset 10:6, size-1 15:11
# s_waitcnt (gfx9): vmcnt 3:0 with its high bits in 15:14, expcnt 6:4, lgkmcnt 11:8; bits 7, 13:12 are unused
WAITCNT9_BITS = {"vmcnt": 6, "expcnt": 3, "lgkmcnt": 4}


def _waitcnt9(value: int) -> dict[str, int]:
  return {"vmcnt": value & 15 | (value >> 14 & 3) << 4, "expcnt": value >> 4 & 7, "lgkmcnt": value >> 8 & 15}


# s_set_gpr_idx_on/_mode (gfx9): which operands are indexed, bits 0-3
GPR_IDX_MODES = ("SRC0", "SRC1", "SRC2", "DST")
# s_delay_alu: instid0 3:0, instskip 6:4, instid1 10:7
DELAY_ALU = (("instid0", 0, 4, "instid"), ("instskip", 4, 3, "instskip"), ("instid1", 7, 4, "instid"))


def load_names(opcode) -> dict:
  """The arch's symbol names (an Opcode knows its ISA through its format's owner)."""
  return opcode.isa.names


def valid_names(kind: str, opcode) -> str:
  """'; valid names: ...' for the kinds whose first argument is a name from the arch's table (hwreg, sendmsg), else ''."""
  table = {"hwreg": "hwreg", "sendmsg": _sendmsg_table(opcode)}.get(kind)
  if table is None or table not in opcode.isa.names: return ""
  return f"; valid {kind} names: " + ", ".join(sorted({n.split(",")[0] for n in opcode.isa.names[table].values()})) + " (or a number)"


def render(kind: str, value: int, inst) -> str | None:
  """Text of a symbolic immediate as llvm-mc prints it, or None where there is none (llvm-mc rejects it)."""
  names = inst.isa.names
  if kind == "vmcnt" and inst.isa.sgprs < 106:  # gfx9: vmcnt 3:0 and 15:14, expcnt 6:4, lgkmcnt 11:8
    counts = _waitcnt9(value)
    every = all(n == (1 << WAITCNT9_BITS[name]) - 1 for name, n in counts.items())
    return " ".join(f"{name}({n})" for name, n in counts.items() if every or n != (1 << WAITCNT9_BITS[name]) - 1)
  if kind == "vmcnt":
    parts, all_max = [], True
    for name in WAITCNT_ORDER:
      lo, bits = WAITCNT[name]
      n = value >> lo & ((1 << bits) - 1)
      parts.append((name, n, n == (1 << bits) - 1))
      all_max &= n == (1 << bits) - 1
    return " ".join(f"{name}({n})" for name, n, at_max in parts if all_max or not at_max)
  if kind == "depctr_hold_cnt":
    if value & DEPCTR_UNUSED: return str(value) if value <= 64 else f"0x{value:x}"
    parts = [(name, value >> lo & ((1 << bits) - 1), bits) for name, lo, bits in DEPCTR]
    every = all(n == (1 << bits) - 1 for _, n, bits in parts)  # all at their maximum: all print
    return " ".join(f"{name}({n})" for name, n, bits in parts if every or n != (1 << bits) - 1)
  if kind == "hwreg":
    reg, offset, size = value & 63, value >> 6 & 31, (value >> 11 & 31) + 1
    name = names["hwreg"].get(reg, str(reg))
    return f"hwreg({name})" if offset == 0 and size == 32 else f"hwreg({name}, {offset}, {size})"
  if kind == "sendmsg":
    msg = names[_sendmsg_table(inst.opcode)].get(value & (0x3ff if inst.isa.sgprs < 106 else 0xff))  # gfx9: the stream in 9:8
    if msg is None and inst.isa.sgprs < 106:  # an unknown id prints as numbers; a known one with a bad op/stream as the value
      known = value & 0xf in names[_sendmsg_table(inst.opcode)]
      return str(value) if known or value >> 10 else f"sendmsg({value & 0xf}, {value >> 4 & 7}, {value >> 8 & 3})"
    if msg is not None: return f"sendmsg({msg})"
    return f"sendmsg({value}, 0, 0)" if value < 256 else str(value)
  if kind == "bits":  # s_version: the number, then each flag bit or-ed on: (69|A)|B
    flags = [name for bit, name in sorted(names["bits"].items()) if value >> bit & 1]
    low = value & ~sum(1 << b for b in names["bits"])
    if not flags or low > 0xff:  # only an 8-bit version number prints symbolically, and in decimal
      return names["version"].get(value) or (str(value) if value <= 0xff else f"0x{value:x}")
    text = names["version"].get(low) or str(low)
    for name in flags: text = f"({text})|{name}" if "|" in text else f"{text}|{name}"
    return text
  if kind == "dpp_ctrl":
    kind_, refused = inst.opcode.refused.get("dpp_ctrl", ("", 0))  # gfx9's 64-bit DPP takes row_newbcast only: llvm-mc decodes no other
    if kind_ == "value" and refused >> value & 1: return None
    return names["dpp_ctrl"].get(value) if "dpp_ctrl" in names else dpp_ctrl_text(value)  # gfx9: probed
  if kind == "dpp8": return "dpp8:[" + ",".join(str(value >> (3 * i) & 7) for i in range(8)) + "]"
  if kind == "exp_target": return names["exp_target"].get(value)
  if kind == "gpr_idx":  # gfx9 s_set_gpr_idx_on/_mode: the enabled index modes, bits 0-3
    if value > 15: return f"0x{value:x}"
    return "gpr_idx(" + ",".join(m for i, m in enumerate(GPR_IDX_MODES) if value >> i & 1) + ")"
  if kind == "format":
    name = names["format"].get(value)
    return None if name is None else (f"format:{name}" if name else "")
  if kind == "attr": return f"attr{value}.{'xyzw'[inst.values['attrchan']]}"
  if kind == "instid0":
    if value & 0x7ff == 0: return "0"
    parts = []
    for label, lo, bits, table in DELAY_ALU:
      n = value >> lo & ((1 << bits) - 1)
      if not n: continue
      name = names[table].get(n)
      if name is None: return None
      parts.append(f"{label}({name})")
    return " | ".join(parts)
  return None


# DPP16 dpp_ctrl (RDNA): quad_perm 0x00-0xff; row_shl/row_shr/row_ror 0x101+/0x111+/0x121+ (1..15);
# row_mirror 0x140, row_half_mirror 0x141; row_share 0x150+ and row_xmask 0x160+ (0..15)
_DPP_ROWS = {"row_shl": 0x100, "row_shr": 0x110, "row_ror": 0x120, "row_share": 0x150, "row_xmask": 0x160}


def swizzle_text(value: int) -> str:
  """ds_swizzle_b32's 16-bit offset: QUAD_PERM (bit 15, lanes in 7:0), else and/or/xor lane masks (4:0, 9:5, 14:10)
  shown as SWAP, REVERSE, BROADCAST or BITMASK_PERM as llvm-mc does; anything else as a number."""
  if value >> 8 == 0x80: return "swizzle(QUAD_PERM," + ",".join(str(value >> (2 * i) & 3) for i in range(4)) + ")"
  if value >> 15: return str(value)
  and_m, or_m, xor_m = value & 31, value >> 5 & 31, value >> 10 & 31
  if and_m == 31 and or_m == 0 and xor_m and xor_m & (xor_m - 1) == 0: return f"swizzle(SWAP,{xor_m})"
  if and_m == 31 and or_m == 0 and xor_m and (xor_m + 1) & xor_m == 0: return f"swizzle(REVERSE,{xor_m + 1})"
  size = 32 - and_m  # BROADCAST keeps the high lane bits: and_mask = ~(size - 1)
  if xor_m == 0 and size >= 2 and size & (size - 1) == 0 and and_m == (~(size - 1)) & 31 and or_m < size:
    return f"swizzle(BROADCAST,{size},{or_m})"
  chars = []
  for bit in range(4, -1, -1):
    a, o, x = and_m >> bit & 1, or_m >> bit & 1, xor_m >> bit & 1
    chars.append(str(o ^ x) if not a or o else "pi"[x])
  return f'swizzle(BITMASK_PERM,"{"".join(chars)}")'


def swizzle_value(text: str) -> int | None:
  t = text.replace(" ", "")
  if t.isdigit(): return int(t) if int(t) < 1 << 16 else None
  m = re.fullmatch(r"swizzle\((\w+),?(.*)\)", t)
  if not m: return None
  mode, args = m.group(1), [a.strip('"') for a in m.group(2).split(",")] if m.group(2) else []
  try:
    if mode == "QUAD_PERM" and len(args) == 4: return 0x8000 | sum(int(a) << (2 * i) for i, a in enumerate(args))
    if mode == "SWAP" and len(args) == 1: return 31 | int(args[0]) << 10
    if mode == "REVERSE" and len(args) == 1: return 31 | (int(args[0]) - 1) << 10
    if mode == "BROADCAST" and len(args) == 2: size, lane = int(args[0]), int(args[1]); return (~(size - 1) & 31) | lane << 5
    if mode == "BITMASK_PERM" and len(args) == 1 and len(args[0]) == 5:
      and_m = or_m = xor_m = 0
      for i, ch in enumerate(args[0]):
        bit = 4 - i
        if ch in "pi": and_m |= 1 << bit; xor_m |= (ch == "i") << bit
        elif ch == "1": or_m |= 1 << bit
        elif ch != "0": return None
      return and_m | or_m << 5 | xor_m << 10
  except ValueError: return None
  return None


def dpp_ctrl_text(value: int) -> str | None:
  if value <= 0xff: return "quad_perm:[" + ",".join(str(value >> (2 * i) & 3) for i in range(4)) + "]"
  if value == 0x140: return "row_mirror"
  if value == 0x141: return "row_half_mirror"
  for name, base in _DPP_ROWS.items():
    n = value - base
    if 0 <= n <= 15 and (n >= 1 or name in ("row_share", "row_xmask")): return f"{name}:{n}"
  return None


def dpp_ctrl_value(text: str) -> int | None:
  t = text.replace(" ", "")
  m = re.fullmatch(r"quad_perm:\[([0-3]),([0-3]),([0-3]),([0-3])\]", t)
  if m: return sum(int(x) << (2 * i) for i, x in enumerate(m.groups()))
  if t == "row_mirror": return 0x140
  if t == "row_half_mirror": return 0x141
  name, _, n = t.partition(":")
  if name in _DPP_ROWS and n.isdigit() and int(n) <= 15 and (int(n) >= 1 or name in ("row_share", "row_xmask")):
    return _DPP_ROWS[name] + int(n)
  return None


def _sendmsg_table(opcode) -> str:
  """s_sendmsg_rtn_* (SOP1) number their messages apart from s_sendmsg's."""
  return "sendmsg_rtn" if opcode.fmt.name == "SOP1" else "sendmsg"


_CALL = re.compile(r"(\w+)\(([^()]*)\)")


def _unified_format(body: str, default: str) -> str:
  """'[BUF_DATA_FORMAT_8,BUF_NUM_FORMAT_UNORM]' -> '[BUF_FMT_8_UNORM]' (gfx10+ name one format for the pair, as
  llvm-mc reads the split form; a part left out is the default format's); other text unchanged."""
  m = re.fullmatch(r"\[((?:BUF_DATA_FORMAT_\w+|BUF_NUM_FORMAT_\w+)(?:,(?:BUF_DATA_FORMAT_\w+|BUF_NUM_FORMAT_\w+))?)\]", body)
  if not m or not default.startswith("BUF_FMT_"): return body
  data, _, num = default[len("BUF_FMT_"):].rpartition("_")
  for part in m.group(1).split(","):
    if part.startswith("BUF_DATA_FORMAT_"): data = part[len("BUF_DATA_FORMAT_"):]
    else: num = part[len("BUF_NUM_FORMAT_"):]
  return f"[BUF_FMT_{data}_{num}]"


def parse(kind: str, text: str, opcode) -> int | None:
  """A symbolic immediate's text -> its 16-bit value; None if it is not in this syntax (hwreg(UNKNOWN) included)."""
  try: return _parse(kind, text, opcode)
  except ValueError: return None  # a word where a number must be: int() refused it


def _parse(kind: str, text: str, opcode) -> int | None:
  names = load_names(opcode)
  t = text.strip()
  if kind == "vmcnt" and opcode.isa.sgprs < 106:
    found = _CALL.findall(t)
    if not found or _CALL.sub("", t).replace("&", "").replace(",", "").strip(): return None
    counts = {name: (1 << bits) - 1 for name, bits in WAITCNT9_BITS.items()}
    for name, arg in found:
      if name not in counts or not 0 <= int(arg, 0) <= counts[name]: return None
      counts[name] = int(arg, 0)
    return counts["vmcnt"] & 15 | counts["vmcnt"] >> 4 << 14 | counts["expcnt"] << 4 | counts["lgkmcnt"] << 8
  if kind == "vmcnt":
    value = 0
    for name, (lo, bits) in WAITCNT.items(): value |= ((1 << bits) - 1) << lo
    found = _CALL.findall(t)
    if not found or _CALL.sub("", t).replace("&", "").replace(",", "").strip(): return None
    for name, arg in found:
      if name not in WAITCNT: return None
      lo, bits = WAITCNT[name]
      n = int(arg, 0)
      if not 0 <= n < 1 << bits: return None
      value = value & ~(((1 << bits) - 1) << lo) | n << lo
    return value
  if kind == "depctr_hold_cnt":
    value = sum(((1 << bits) - 1) << lo for _, lo, bits in DEPCTR)
    found = _CALL.findall(t)  # fields joined by spaces, '&' or ',', as llvm-mc takes them
    if not found or _CALL.sub("", t).replace("&", "").replace(",", "").strip(): return None
    fields = {name: (lo, bits) for name, lo, bits in DEPCTR}
    for name, arg in found:
      if name not in fields: return None
      lo, bits = fields[name]
      n = int(arg, 0)
      if not 0 <= n < 1 << bits: return None
      value = value & ~(((1 << bits) - 1) << lo) | n << lo
    return value
  if kind == "hwreg":
    m = re.fullmatch(r"hwreg\(\s*(\w+)\s*(?:,\s*(\w+)\s*,\s*(\w+)\s*)?\)", t)
    if not m: return None
    by_name = {n: i for i, n in names["hwreg"].items()}
    reg = by_name.get(m.group(1), None)
    if reg is None: reg = int(m.group(1), 0)
    offset, size = (int(m.group(2), 0), int(m.group(3), 0)) if m.group(2) else (0, 32)
    if not (0 <= reg < 64 and 0 <= offset < 32 and 1 <= size <= 32): return None
    return reg | offset << 6 | (size - 1) << 11
  if kind == "sendmsg":
    by_name = {n.replace(" ", ""): i for i, n in sorted(names[_sendmsg_table(opcode)].items(), reverse=True)}  # the least value
    whole = re.fullmatch(r"sendmsg\((.*)\)", t)
    if whole and whole.group(1).replace(" ", "") in by_name: return by_name[whole.group(1).replace(" ", "")]  # gfx9 MSG_GS_DONE, GS_OP_NOP
    m = re.fullmatch(r"sendmsg\(\s*(\w+)\s*(?:,\s*(\w+)\s*,\s*(\w+)\s*)?\)", t)
    if not m or not all(g is None or g in by_name or re.fullmatch(r"(0x)?[0-9a-fA-F]+", g) for g in m.groups()): return None
    msg = by_name.get(m.group(1))
    if msg is None: msg = int(m.group(1), 0)
    op, stream = (int(m.group(2), 0), int(m.group(3), 0)) if m.group(2) else (0, 0)
    return msg | op << 4 | stream << 8
  if kind == "bits":
    by_name = {n: b for b, n in names["bits"].items()}
    parts = [p.strip() for p in t.replace("(", "").replace(")", "").split("|")]
    versions = {n: v for v, n in names["version"].items()}
    try: value = versions[parts[0]] if parts[0] in versions else int(parts[0], 0)
    except ValueError: return None
    for p in parts[1:]:
      if p not in by_name: return None
      value |= 1 << by_name[p]
    return value if 0 <= value < 1 << 16 else None
  if kind == "dpp_ctrl":
    t = re.sub(r":(0x[0-9a-fA-F]+)$", lambda m: f":{int(m.group(1), 16)}", t.replace(" ", ""))  # llvm-mc takes row_shl:0x1
    if "dpp_ctrl" in names: return next((c for c, n in names["dpp_ctrl"].items() if n == t), None)
    return dpp_ctrl_value(t)
  if kind == "dpp8":
    m = re.fullmatch(r"dpp8:\[([0-7](?:,[0-7]){7})\]", t.replace(" ", ""))
    return None if not m else sum(int(x) << (3 * i) for i, x in enumerate(m.group(1).split(",")))
  if kind == "gpr_idx":
    m = re.fullmatch(r"gpr_idx\(([\w,\s]*)\)", t)
    if not m: return None
    modes = [x.strip().upper() for x in m.group(1).split(",") if x.strip()]
    if any(x not in GPR_IDX_MODES for x in modes) or len(set(modes)) != len(modes): return None
    return sum(1 << GPR_IDX_MODES.index(x) for x in modes)
  if kind == "exp_target":
    return next((i for i, n in names["exp_target"].items() if n == t), None)
  if kind == "format":
    body = t.split(":", 1)[1] if t.startswith("format:") else t
    if body.isdigit(): return int(body)
    unprinted = opcode.isa.unprinted_names("format")  # the default format's names (printed as nothing)
    body = _unified_format(body.replace(" ", ""), unprinted[0] if unprinted else "")
    return next((i for i, n in names["format"].items() if n == body or n == f"[{body}]" or not n and body.strip("[]") in unprinted), None)
  if kind == "instid0":
    if t == "0": return 0
    value = 0
    for part in t.split("|"):
      m = re.fullmatch(r"\s*(instid0|instskip|instid1)\((\w+)\)\s*", part)
      if not m: return None
      label, lo, bits, table = next(d for d in DELAY_ALU if d[0] == m.group(1))
      by_name = {n: i for i, n in names[table].items()}
      if m.group(2) not in by_name: return None
      value |= by_name[m.group(2)] << lo
    return value
  return None
