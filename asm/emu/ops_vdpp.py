"""VOPD (two VOP2-style ops issued together) and DPP16/DPP8 (src0 read from another lane), on top of ops_valu's ops."""
from __future__ import annotations
import re

import numpy as np

from hcq.asm.emu import numerics as N
from hcq.asm.emu.numerics import bits_to, to_bits
from hcq.asm.emu.operands import DPP_SOURCE, SDWA_SOURCE1, vector_reader, write_vgpr
from hcq.asm.emu.ops_valu import OPS, ROUNDED, build, directed
from hcq.asm.emu.wave import EXEC, VCC, Waves

u16, u32, u64, i32, i64 = np.uint16, np.uint32, np.uint64, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64


def build_vopd(ins, pc: int):
  """VOPD: two VOP2-style ops (X and Y) that read their sources before either writes."""
  halves = []
  for opname, s0, s1, d in vopd_parts(ins):
    halves.append(_vopd_half(opname, s0, s1, d, ins.literal))
  if any(h is None for h in halves): return None
  (cx, wx), (cy, wy) = halves
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    x, y = cx(st, w), cy(st, w)
    wx(st, w, x, ex); wy(st, w, y, ex)
  return op


def vopd_parts(ins) -> list[tuple[str, int, int, int]]:
  """(mnemonic, src0, vsrc1, vdst) of the X and Y halves, from hcq.asm's VOPD decode or the emulator's own."""
  if hasattr(ins, "parts"): return ins.parts
  v = ins.values
  nx, ny = ins.opcode.mnemonic.split("::")
  vdsty = (v["vdsty"] << 1) | ((v["vdstx"] & 1) ^ 1)   # the encoding drops vdsty's low bit: it is the opposite of vdstx's
  return [(nx, v["src0x"], v["vsrc1x"], v["vdstx"]), (ny, v["src0y"], v["vsrc1y"], vdsty)]


_VOPD_INTEGER = ("v_dual_mov_b32", "v_dual_cndmask_b32", "v_dual_add_nc_u32", "v_dual_lshlrev_b32", "v_dual_and_b32")


def _vopd_half(name, s0, s1, d, lit):
  """(compute, write) of one VOPD half; the f32 ops flush denormal inputs and results as MODE.FP_DENORM says."""
  parts = _vopd_half_raw(name, s0, s1, d, lit)
  if parts is None or name in _VOPD_INTEGER: return parts
  compute, write = parts
  def flushed(st, w):   # the raw half reads its own sources: flush the result here, the inputs in _vopd_reader
    x = compute(st, w)
    if not st.ftz & 2: return x
    return N.flush_denormals(np.asarray(x).view(f32)).view(u32)
  return flushed, write


def _vopd_reader(enc, lit):
  """An f32 VOPD source with MODE's input flushing (bits, as vector_reader)."""
  raw = vector_reader(enc, 32, True, lit)
  def read(st, w):
    x = raw(st, w)
    return N.flush_denormals(np.asarray(x).view(f32)).view(u32) if st.ftz & 1 else x
  return read


def _vopd_half_raw(name, s0, s1, d, lit):
  raw_sources = name in _VOPD_INTEGER or "dot2acc" in name   # dot2acc reads f16 pairs (flushed below)
  f = (lambda enc: vector_reader(enc, 32, True, lit)) if raw_sources else (lambda enc: _vopd_reader(enc, lit))
  r0, r1 = f(s0), f(s1 + 256)
  write = lambda st, w, x, ex: write_vgpr(st, d, w, x, ex)
  if name == "v_dual_cndmask_b32":
    return (lambda st, w: np.where(st.lanes_of(st.mask(VCC, w)), r1(st, w), r0(st, w))), write
  fma = _rounded_f32("v_fma_f32", N.fma32)
  if name in ("v_dual_fmamk_f32", "v_dual_fmaak_f32"):
    k = np.array(lit, u32).view(f32)
    if name == "v_dual_fmamk_f32": return (lambda st, w: fma(st, r0(st, w).view(f32), k, r1(st, w).view(f32)).view(u32)), write
    return (lambda st, w: fma(st, r0(st, w).view(f32), r1(st, w).view(f32), k).view(u32)), write
  if name == "v_dual_fmac_f32":
    rd = f(d + 256)
    return (lambda st, w: fma(st, r0(st, w).view(f32), r1(st, w).view(f32), rd(st, w).view(f32)).view(u32)), write
  if name == "v_dual_dot2acc_f32_f16":
    rd = f(d + 256)
    def dot(st, w):
      a, b = r0(st, w), r1(st, w)
      half = lambda x, h: (N.flush_denormals(bits_to(x, "f16", h)) if st.ftz & 4 else bits_to(x, "f16", h)).astype(f64)
      r = sum(half(a, h) * half(b, h) for h in (False, True)) + rd(st, w).view(f32).astype(f64)
      return r.astype(f32).view(u32)
    return dot, write
  base = "v_" + name[len("v_dual_"):]
  if base not in OPS: return None
  dt, sts, fn = OPS[base]
  if base in ROUNDED: fn = _rounded_f32(base, fn)
  else: fn = (lambda fn: lambda st, *xs: fn(*xs))(fn)
  return (lambda st, w: to_bits(N.canonical_nan(fn(st, *(bits_to(r(st, w), t) for r, t in zip((r0, r1), sts)))), dt)), write


def _rounded_f32(name: str, fn):
  """(st, *f32 sources) -> fn's result under MODE.FP_ROUND's f32 field (VOPD's f32 halves round as VOP2's do)."""
  dfn = directed(name, "f32", fn)
  return lambda st, *xs: fn(*xs) if not st.round & 3 else dfn(st.round & 3, *xs)


# ---- DPP: src0 read from another lane of the row (DPP16) or of the group of 8 (DPP8) ------------------------------
def dpp16_lanes(ctrl: int, lanes: int, gfx9: bool = False) -> tuple[np.ndarray, np.ndarray]:
  """(source lane, source in range) for every lane under a DPP16 dpp_ctrl (gfx10+ encodings; gfx9's wave shifts and
  row broadcasts with `gfx9`, row_newbcast where gfx10 has row_share, and no row_xmask)."""
  lane = np.arange(lanes)
  row, r = lane & ~15, lane & 15
  if gfx9 and ctrl >= 0x130:
    if ctrl in (0x130, 0x134): s = lane + 1; return s % lanes, (s < lanes) | (ctrl == 0x134)   # wave_shl1 / wave_rol1
    if ctrl in (0x138, 0x13c): s = lane - 1; return s % lanes, (s >= 0) | (ctrl == 0x13c)      # wave_shr1 / wave_ror1
    if ctrl == 0x142: return np.maximum(row - 1, 0), row > 0      # row_bcast15: lane 15 of the previous row
    if ctrl == 0x143: return np.full(lanes, 31), lane >= 32       # row_bcast31: lane 31 to rows 2 and 3
    # gfx90a+ (gfx942): row_newbcast:N, lane N of each row to the whole row (LLVM SIDefines.h DppCtrl
    # ROW_NEWBCAST_FIRST/LAST 0x150-0x15f, AMDGPUModifierSyntax.rst dpp_ctrl / dpp64_ctrl); the row_share slots of gfx10
    if 0x150 <= ctrl <= 0x15f: return row | (ctrl & 15), np.ones(lanes, bool)
    if ctrl not in (0x140, 0x141): raise ValueError(f"dpp_ctrl {ctrl:#x} is reserved on gfx9")
  if ctrl <= 0xff: src = (lane & ~3) | ((ctrl >> (2 * (lane & 3))) & 3); return src, np.ones(lanes, bool)
  if 0x101 <= ctrl <= 0x10f: s = r + (ctrl & 15); return row | (s & 15), s <= 15           # row_shl: read the lane n above
  if 0x111 <= ctrl <= 0x11f: s = r - (ctrl & 15); return row | (s & 15), s >= 0            # row_shr: read the lane n below
  if 0x121 <= ctrl <= 0x12f: return row | ((r - (ctrl & 15)) & 15), np.ones(lanes, bool)  # row_ror
  if ctrl == 0x140: return row | (15 - r), np.ones(lanes, bool)                              # row_mirror
  if ctrl == 0x141: return row | (r & 8) | (7 - (r & 7)), np.ones(lanes, bool)               # row_half_mirror
  if 0x150 <= ctrl <= 0x15f: return row | (ctrl & 15), np.ones(lanes, bool)                  # row_share
  if 0x160 <= ctrl <= 0x16f: return row | (r ^ (ctrl & 15)), np.ones(lanes, bool)           # row_xmask
  raise ValueError(f"dpp_ctrl {ctrl:#x} is reserved on gfx11")


def build_dpp(ins, pc: int):
  """VOP1/VOP2/VOPC and VOP3/VOP3SD/VOP3P (gfx11's e64 DPP) with DPP16 or DPP8: permute src0 across lanes into a
  scratch register, narrow EXEC to the lanes that may be written (row/bank masks, bound_ctrl), run the plain op on it,
  restore EXEC."""
  from hcq.asm.emu import ops_vpacked
  from hcq.asm.emu.decode import ExtraInstruction, _Fmt, _Opcode
  fmt, v = ins.opcode.fmt.name, ins.values
  base_fmt = fmt.split("_")[0]
  name = re.sub(r"_dpp(16|8)?(_fi)?$", "", ins.opcode.mnemonic.replace("_e32", ""))
  if base_fmt.startswith("VOP3"):   # the VOP3 fields as they are; src0 (an 8-bit VGPR number) becomes the permuted copy
    values = {k: x for k, x in v.items() if k not in ("dpp8", "dpp_ctrl", "fi", "bound_ctrl", "row_mask", "bank_mask")}
  else:
    values = {k: v[k] for k in ("vdst", "vsrc1") if k in v}
    values["abs"] = v.get("abs0", 0) | (v.get("abs1", 0) << 1)
    values["neg"] = v.get("neg0", 0) | (v.get("neg1", 0) << 1)
  values["src0"] = DPP_SOURCE
  if base_fmt == "VOP3P": name = name.removesuffix("_e64")
  inner_ins = ExtraInstruction(_Opcode(name, _Fmt(base_fmt)), values, None, ins.size)
  inner_ins.gfx9 = getattr(ins, "gfx9", False)
  inner = (ops_vpacked.build if base_fmt == "VOP3P" else build)(inner_ins, pc)
  if inner is None: return None
  src0 = v["src0"] - 256 if v["src0"] >= 256 else v["src0"]
  # gfx942's DP-ALU DPP (v_*_f64, v_mov_b64, ...): a 64-bit src0 moves across lanes as a pair (the high dword in Waves.dpp1)
  wide = name in OPS and N.width(OPS[name][1][0]) == 64
  writes_exec = name.startswith("v_cmpx") and not getattr(ins, "gfx9", False)
  if "dpp8" in v:
    sel = v["dpp8"]
    fetch_inactive, bound_zero = fmt.endswith("FI"), True   # fi:0 fetches zero from an inactive lane (LLVM AMDGPUModifierSyntax, fi for dpp8)
    row_bank = None
    def lanes_for(n):
      lane = np.arange(n)
      return (lane & ~7) | ((sel >> (3 * (lane & 7))) & 7), np.ones(n, bool)
  else:
    ctrl, fetch_inactive, bound_zero = v["dpp_ctrl"], bool(v.get("fi", 0)), bool(v.get("bound_ctrl", 0))
    rm, bm = v.get("row_mask", 0xf), v.get("bank_mask", 0xf)
    gfx9 = getattr(ins, "gfx9", False)
    lanes_for = lambda n: dpp16_lanes(ctrl, n, gfx9)
    row_bank = lambda n: np.array([(rm >> (l // 16) & 1) and (bm >> ((l & 15) // 4) & 1) for l in range(n)], bool)
  cache = {}
  def op(st: Waves, w):
    if st.lanes not in cache: cache[st.lanes] = (*lanes_for(st.lanes), None if row_bank is None else row_bank(st.lanes))
    idx, valid, enable = cache[st.lanes]
    ex = st.exec_lanes(w)
    ok = valid[None, :] & (True if fetch_inactive else ex[:, idx])
    write = ex if bound_zero else ex & ok
    if enable is not None: write = write & enable[None, :]
    for reg, buf in ((src0, st.dpp), (src0 + 1, st.dpp1))[:2 if wide else 1]:
      src = st.v[reg][w][:, idx]
      if bound_zero: src = np.where(ok, src, u32(0))
      if isinstance(w, slice): buf[...] = src
      else: buf[w] = src
    saved = st.mask(EXEC, w).copy()
    st.set_mask(EXEC, w, st.mask_of(write))
    try:
      inner(st, w)
    finally:
      if not writes_exec: st.set_mask(EXEC, w, saved)   # v_cmpx's result is the new EXEC
  return op


# ---- SDWA (gfx9): sub-dword selects of the sources and the destination ---------------------------------------------
SDWA_SELECTS = ("BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD")


def sdwa_select(x: np.ndarray, sel: int, sext: bool) -> np.ndarray:
  """A source's selected byte/word moved to bit 0, zero- or sign-extended to 32 bits (DWORD: unchanged)."""
  if sel >= 6: return x
  shift, bits = (8 * sel, 8) if sel < 4 else (16 * (sel - 4), 16)
  v = (x >> u32(shift)) & u32((1 << bits) - 1)
  return (((v.astype(i32) << (32 - bits)) >> (32 - bits)).view(u32)) if sext else v


def sdwa_place(new: np.ndarray, old: np.ndarray, sel: int, unused: int) -> np.ndarray:
  """The result's low bits written into the selected byte/word of the destination; the other bits are zeroed
  (UNUSED_PAD), filled with the field's sign (UNUSED_SEXT, above it) or kept (UNUSED_PRESERVE)."""
  if sel >= 6: return new
  shift, bits = (8 * sel, 8) if sel < 4 else (16 * (sel - 4), 16)
  field_mask = u32(((1 << bits) - 1) << shift)
  placed = (new << u32(shift)) & field_mask
  if unused == 2: return (old & ~field_mask) | placed
  if unused == 1:
    top = 32 - shift - bits
    return ((placed.astype(u32).view(i32) << top) >> top).view(u32) & ~u32((1 << shift) - 1)
  return placed


def build_sdwa(ins, pc: int):
  """VOP1/VOP2/VOPC with SDWA: each source is its selected byte/word (extended), the op runs on those, and the
  result lands in the destination's selected field with dst_unused deciding the rest (gfx9 ISA, section 6.3)."""
  from hcq.asm.emu.decode import ExtraInstruction, _Fmt, _Opcode
  fmt, v = ins.opcode.fmt.name, ins.values
  base_fmt = fmt.split("_")[0]
  name = re.sub(r"_sdwa$", "", ins.opcode.mnemonic)
  values = {"src0": DPP_SOURCE, "abs": v.get("abs0", 0) | (v.get("abs1", 0) << 1), "neg": v.get("neg0", 0) | (v.get("neg1", 0) << 1),
            "clamp": v.get("clamp", 0), "omod": v.get("omod", 0)}
  if base_fmt != "VOP1": values["vsrc1"] = SDWA_SOURCE1 - 256
  if base_fmt != "VOPC": values["vdst"] = v["vdst"]
  if base_fmt == "VOPC":   # sd: the compare's mask goes to sdst rather than VCC (a VOP3-style compare does that)
    if v.get("sd", 0):
      values.update(vdst=v["sdst"], src1=SDWA_SOURCE1, src2=0)
      base_fmt = "VOP3"
    name = name.replace("_e32", "")
  inner_ins = ExtraInstruction(_Opcode(name, _Fmt(base_fmt)), values, None, ins.size)
  inner_ins.gfx9 = True
  inner = build(inner_ins, pc)
  if inner is None: return None
  reads = [vector_reader(v["src0"] if v.get("s0", 0) else v["src0"] + 256)]
  if base_fmt != "VOP1" and "vsrc1" in v: reads.append(vector_reader(v["vsrc1"] if v.get("s1", 0) else v["vsrc1"] + 256))
  sels = [(v.get("src0_sel", 6), bool(v.get("sext0", 0))), (v.get("src1_sel", 6), bool(v.get("sext1", 0)))]
  dst_sel, unused = v.get("dst_sel", 6), v.get("dst_unused", 0)
  vdst = None if fmt == "VOPC_SDWA" or name == "v_nop" else values.get("vdst")   # v_nop's vdst field names no register
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    shape = ex.shape
    for i, (rd, (sel, sext)) in enumerate(zip(reads, sels)):
      x = np.broadcast_to(sdwa_select(np.asarray(rd(st, w)), sel, sext), shape)
      buf = st.dpp if i == 0 else st.dpp1
      if isinstance(w, slice): buf[...] = x
      else: buf[w] = x
    if vdst is None or dst_sel >= 6: return inner(st, w)
    old = st.v[vdst][w].copy()
    inner(st, w)
    write_vgpr(st, vdst, w, sdwa_place(st.v[vdst][w], old, dst_sel, unused), ex)
  return op
