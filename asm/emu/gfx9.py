"""gfx9 (CDNA3, gfx942) code on the emulator's gfx11 semantics: each decoded GCN instruction is translated once, at
compile time, into the view the builders already understand — gfx11 mnemonics (global_load_dword -> global_load_b32,
v_add_u32 -> v_add_nc_u32, ds_read2_b32 -> ds_load_2addr_b32, s_andn2_b64 -> s_and_not1_b64, ...), gfx11 operand
numbering (gfx9's M0 is operand 124, where gfx11 has NULL) and gfx11 field names (SMEM imm/soe, VMEM and MUBUF
sc0 = glc, saddr 0x7f = off; MUBUF's V# range check is GCN's, in ops_mem._buffer_address). Accumulation registers
(the acc bits of DS/FLAT/GLOBAL/MUBUF/MAI, v_accvgpr_*) become VGPR numbers in the unified register file: AGPR a[i]
is v[agpr_base + i], agpr_base being the kernel descriptor's accum_offset (AMDGPUUsage, gfx90a+). What the
translation cannot express (SDWA, gfx9 DPP controls, MFMA, v_cmpx's double write, 16-bit results zeroing the high
half, the buffer range check and format pairs) the builders read from `gfx9=True` on the instruction.
"""
from __future__ import annotations
import re

from hcq.asm.emu.wave import M0, NULL

GFX9_ARCHS = ("gfx942",)
OFF = 0x7f            # gfx9 FLAT/GLOBAL/SCRATCH saddr meaning "no SGPR base"
GFX9_M0, GFX9_RESERVED = 124, 125   # gfx9's M0 and the (reserved, unwritten) encoding after it

# SALU / VALU names that changed between GCN and gfx11 (the rest keep their names)
_RENAMES = {
  "v_add_u32": "v_add_nc_u32", "v_sub_u32": "v_sub_nc_u32", "v_subrev_u32": "v_subrev_nc_u32",
  "v_add_i32": "v_add_nc_i32", "v_sub_i32": "v_sub_nc_i32", "v_add_u16": "v_add_nc_u16", "v_sub_u16": "v_sub_nc_u16",
  "v_add_i16": "v_add_nc_i16", "v_sub_i16": "v_sub_nc_i16",
  "v_addc_co_u32": "v_add_co_ci_u32", "v_subb_co_u32": "v_sub_co_ci_u32", "v_subbrev_co_u32": "v_subrev_co_ci_u32",
  "v_ffbh_u32": "v_clz_i32_u32", "v_ffbl_b32": "v_ctz_i32_b32", "v_ffbh_i32": "v_cls_i32",
  "v_mad_legacy_u16": "v_mad_u16", "v_mad_legacy_i16": "v_mad_i16", "v_mad_u32_u16": "v_mad_u32_u16",
  "v_cvt_pkrtz_f16_f32": "v_cvt_pk_rtz_f16_f32", "v_cvt_pknorm_i16_f32": "v_cvt_pk_norm_i16_f32",
  "v_cvt_pknorm_u16_f32": "v_cvt_pk_norm_u16_f32", "v_cvt_pknorm_i16_f16": "v_cvt_pk_norm_i16_f16",
  "v_cvt_pknorm_u16_f16": "v_cvt_pk_norm_u16_f16", "v_mul_legacy_f32": "v_mul_dx9_zero_f32",
  "v_dot2c_f32_f16": "v_dot2acc_f32_f16", "v_cvt_flr_i32_f32": "v_cvt_floor_i32_f32", "v_cvt_rpi_i32_f32": "v_cvt_nearest_i32_f32",
  "s_ff1_i32_b32": "s_ctz_i32_b32", "s_ff1_i32_b64": "s_ctz_i32_b64", "s_flbit_i32_b32": "s_clz_i32_u32",
  "s_flbit_i32_b64": "s_clz_i32_u64", "s_flbit_i32": "s_cls_i32", "s_flbit_i32_i64": "s_cls_i32_i64",
  "s_dcache_wb": "s_dcache_inv", "s_dcache_wb_vol": "s_dcache_inv", "s_dcache_inv_vol": "s_dcache_inv",
  "buffer_wbl2": "s_nop", "buffer_inv": "s_nop", "buffer_wbinvl1": "s_nop", "buffer_wbinvl1_vol": "s_nop",
}
_SALU_NOT = [(r"^s_(and|or)n2_", r"s_\1_not1_"), (r"^s_(and|or)n1_", r"s_\1_not0_"), (r"^v_cmp(x?)_tru_", r"v_cmp\1_t_")]
_SIZES = {"dword": "b32", "dwordx2": "b64", "dwordx3": "b96", "dwordx4": "b128", "dwordx8": "b256", "dwordx16": "b512",
          "ubyte": "u8", "sbyte": "i8", "ushort": "u16", "sshort": "i16", "byte": "b8", "short": "b16"}
_D16 = {"load_short_d16": "load_d16_b16", "load_short_d16_hi": "load_d16_hi_b16", "load_ubyte_d16": "load_d16_u8",
        "load_ubyte_d16_hi": "load_d16_hi_u8", "load_sbyte_d16": "load_d16_i8", "load_sbyte_d16_hi": "load_d16_hi_i8",
        "store_short_d16_hi": "store_d16_hi_b16", "store_byte_d16_hi": "store_d16_hi_b8"}
# atomics: GCN spells the type only where it is not the 32-bit integer default; _x2 is the 64-bit form
_ATOMIC_TYPE = {"swap": "b", "cmpswap": "b", "add": "u", "sub": "u", "smin": "i", "umin": "u", "smax": "i", "umax": "u",
                "and": "b", "or": "b", "xor": "b", "inc": "u", "dec": "u"}
_ATOMIC_GFX11 = {"smin": "min", "umin": "min", "smax": "max", "umax": "max"}
_DS = [(r"^ds_read2st64_", "ds_load_2addr_stride64_"), (r"^ds_write2st64_", "ds_store_2addr_stride64_"),
       (r"^ds_read2_", "ds_load_2addr_"), (r"^ds_write2_", "ds_store_2addr_"), (r"^ds_read_", "ds_load_"),
       (r"^ds_write_", "ds_store_"), (r"^ds_wrxchg2st64_rtn_", "ds_storexchg_2addr_stride64_rtn_"),
       (r"^ds_wrxchg2_rtn_", "ds_storexchg_2addr_rtn_"), (r"^ds_wrxchg_rtn_", "ds_storexchg_rtn_"),
       (r"^ds_cmpst_", "ds_cmpstore_")]


def gfx11_name(name: str) -> str:
  """The emulator's (gfx11) mnemonic for a gfx9 one; suffixes (_e32/_e64) are kept."""
  m = re.search(r"_(e32|e64|dpp|sdwa)$", name)
  suffix = m.group(0) if m else ""
  base = name[:len(name) - len(suffix)]
  if base in _RENAMES: return _RENAMES[base] + suffix
  for pat, rep in _SALU_NOT: base = re.sub(pat, rep, base)
  m = re.match(r"^(global|flat|scratch|buffer)_(.*)$", base)
  if m:
    seg, kind = m.groups()
    if kind in _D16: return f"{seg}_{_D16[kind]}"
    mm = re.match(r"^(load|store)_(\w+)$", kind)
    if mm and mm.group(2) in _SIZES: return f"{seg}_{mm.group(1)}_{_SIZES[mm.group(2)]}"
    mm = re.match(r"^atomic_(\w+?)(_x2)?$", kind)
    if mm and mm.group(1) in _ATOMIC_TYPE:
      op, wide = mm.group(1), bool(mm.group(2))
      return f"{seg}_atomic_{_ATOMIC_GFX11.get(op, op)}_{_ATOMIC_TYPE[op]}{64 if wide else 32}"
    return base
  m = re.match(r"^s_(load|buffer_load|store|buffer_store)_(dword\w*)$", base)
  if m and m.group(2) in _SIZES: return f"s_{m.group(1)}_{_SIZES[m.group(2)]}"
  if base.startswith("ds_"):
    for pat, rep in _DS:
      if re.match(pat, base): return re.sub(pat, rep, base)
  return base + suffix


class _Opcode:
  """The translated opcode: gfx11 mnemonic, the decoded format (its fields and widths stay those of gfx9)."""
  def __init__(self, mnemonic: str, fmt, src):
    self.mnemonic, self.fmt, self._src = mnemonic, fmt, src

  def __getattr__(self, name): return getattr(self._src, name)


class _FmtName:
  def __init__(self, name: str, fields=None): self.name, self.fields = name, fields or {}


class Gfx9Instruction:
  """A decoded gfx9 instruction as the builders see it (mnemonic, values, literal, size, isa) plus `gfx9`."""
  gfx9 = True

  def __init__(self, ins, mnemonic: str, values: dict, fmt=None):
    self.src, self.values, self.literal, self.size = ins, values, ins.literal, ins.size
    self.isa = getattr(ins, "isa", None)
    self.opcode = _Opcode(mnemonic, fmt or ins.opcode.fmt, ins.opcode)

  def __str__(self) -> str: return str(self.src)


def _scalar(enc: int) -> int:
  """gfx9 scalar operand numbering -> the emulator's (gfx11) register file index."""
  return M0 if enc == GFX9_M0 else NULL if enc == GFX9_RESERVED else enc


_SCALAR_KINDS = ("sdst", "ssrc", "src")


def translate(ins, agpr_base: int):
  """The builders' view of a decoded gfx9 instruction (see the module docstring)."""
  fmt = ins.opcode.fmt
  fields = getattr(fmt, "fields", {})
  v = dict(ins.values)
  for name, f in fields.items():
    if f.kind in _SCALAR_KINDS and name in v: v[name] = _scalar(v[name])
  if fmt.name.endswith("_SDWA"):
    for i in (0, 1):
      key = "src0" if i == 0 else "vsrc1"
      if v.get(f"s{i}", 0) and key in v: v[key] = _scalar(v[key])
  name = gfx11_name(ins.opcode.mnemonic)
  fn = fmt.name
  if fn in ("VOP1", "VOP3") and name.startswith(("v_readlane", "v_readfirstlane", "v_cmp")):   # an SGPR in the vdst field
    v["vdst"] = _scalar(v["vdst"])
  if fn == "SMEM" and name in ("s_memtime", "s_memrealtime"):   # a 64-bit clock: the mock GPU's 100 MHz timestamp
    return Gfx9Instruction(ins, "s_sendmsg_rtn_b64", {"ssrc0": 131, "sdst": v["sdata"]}, _FmtName("SOP1"))
  if fn == "SMEM":
    imm, soe, off = v.pop("imm", 1), v.pop("soe", 0), v["offset"]
    if not imm:   # the offset field names an SGPR
      v["soffset"], v["offset"] = _scalar(off & 0x7f), 0
    else:
      v["soffset"] = _scalar(v["soffset"]) if soe else NULL
  elif fn in ("GLOBAL", "FLAT", "SCRATCH"):
    if v.get("saddr") == OFF: v["saddr"] = NULL
    v["glc"] = v.get("sc0", 0)
    if v.get("acc", 0):
      for r in ("data", "vdst"): v[r] += agpr_base
    if v.get("lds", 0): raise NotImplementedError("LDS-direct global/scratch loads (lds bit) are not modelled")
  elif fn == "DS":
    if v.get("gds", 0): raise NotImplementedError("GDS is not modelled")
    if v.get("acc", 0):
      for r in ("data0", "data1", "vdst"): v[r] += agpr_base
    if name.startswith("ds_cmpstore"):   # GCN's ds_cmpst reads (cmp, src); gfx11's ds_cmpstore (src, cmp)
      v["data0"], v["data1"] = v["data1"], v["data0"]
  elif fn in ("MUBUF", "MTBUF"):
    if name == "s_nop": return Gfx9Instruction(ins, "s_nop", {"simm16": 0}, _FmtName("SOPP"))
    # GCN spells d16 after "format" (buffer_load_format_d16_hi_x), gfx11 before it (buffer_load_d16_hi_format_x)
    name = re.sub(r"^(t?buffer_(?:load|store))_format_(d16_)?(hi_)?(x|xy|xyz|xyzw)$", r"\1_\2\3format_\4", name)
    if v.get("lds", 0) or "_lds_" in name: raise NotImplementedError("LDS-direct buffer loads/stores (lds bit) are not modelled")
    v["glc"] = v.get("sc0", 0)
    if v.get("acc", 0): v["vdata"] += agpr_base
  elif fn == "VOP3P" and name.startswith("v_accvgpr_"):   # a move between the two halves of the unified file
    src, dst = v["src0"], v["vdst"]
    if name != "v_accvgpr_write_b32": src = 256 + agpr_base + (src - 256)
    if name != "v_accvgpr_read_b32": dst = agpr_base + dst
    return Gfx9Instruction(ins, "v_mov_b32", {"src0": src, "vdst": dst}, _FmtName("VOP1"))
  elif fn in ("VOP2", "VOP3") and re.match(r"v_dot(2|4|8)c_i32_i(16|8|4)(_e32|_e64)?$", name):   # D += dot(src0, src1)
    base = re.sub(r"c_i32_(\w+?)(_e32|_e64)?$", r"_i32_\1", name)
    src1 = v["vsrc1"] + 256 if fn == "VOP2" else v["src1"]
    return Gfx9Instruction(ins, base, {"src0": v["src0"], "src1": src1, "src2": v["vdst"] + 256, "vdst": v["vdst"],
                                       "clamp": v.get("clamp", 0), "neg": 0, "neg_hi": 0, "opsel": 0, "opsel_hi": 0}, _FmtName("VOP3P"))
  elif fn == "VOP1" and name == "v_accvgpr_mov_b32":
    return Gfx9Instruction(ins, "v_mov_b32", {"src0": 256 + agpr_base + (v["src0"] - 256), "vdst": agpr_base + v["vdst"]}, _FmtName("VOP1"))
  elif fn == "VOP3P_MAI":
    if v.get("acc_cd", 0): v["vdst"] += agpr_base; v["src2"] += agpr_base if v["src2"] >= 256 else 0
    for i in (0, 1):
      if v.get(f"acc{i}", 0) and v[f"src{i}"] >= 256: v[f"src{i}"] += agpr_base
  return Gfx9Instruction(ins, name, v)
