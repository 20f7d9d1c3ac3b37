"""VOPD (two VOP2-style ops issued together) and DPP16/DPP8 (src0 read from another lane), on top of ops_valu's ops."""
from __future__ import annotations
import re

import numpy as np

from hcq.asm.emu import numerics as N
from hcq.asm.emu.numerics import bits_to, to_bits
from hcq.asm.emu.operands import DPP_SOURCE, vector_reader, write_vgpr
from hcq.asm.emu.ops_valu import OPS, build
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


def _vopd_half(name, s0, s1, d, lit):
  f = lambda enc: vector_reader(enc, 32, True, lit)
  r0, r1 = f(s0), f(s1 + 256)
  write = lambda st, w, x, ex: write_vgpr(st, d, w, x, ex)
  if name == "v_dual_cndmask_b32":
    return (lambda st, w: np.where(st.lanes_of(st.mask(VCC, w)), r1(st, w), r0(st, w))), write
  if name in ("v_dual_fmamk_f32", "v_dual_fmaak_f32"):
    k = np.array(lit, u32).view(f32)
    if name == "v_dual_fmamk_f32": return (lambda st, w: N.fma32(r0(st, w).view(f32), k, r1(st, w).view(f32)).view(u32)), write
    return (lambda st, w: N.fma32(r0(st, w).view(f32), r1(st, w).view(f32), k).view(u32)), write
  if name == "v_dual_fmac_f32":
    rd = f(d + 256)
    return (lambda st, w: N.fma32(r0(st, w).view(f32), r1(st, w).view(f32), rd(st, w).view(f32)).view(u32)), write
  if name == "v_dual_dot2acc_f32_f16":
    rd = f(d + 256)
    def dot(st, w):
      a, b = r0(st, w), r1(st, w)
      r = sum(bits_to(a, "f16", h).astype(f64) * bits_to(b, "f16", h).astype(f64) for h in (False, True)) + rd(st, w).view(f32).astype(f64)
      return r.astype(f32).view(u32)
    return dot, write
  base = "v_" + name[len("v_dual_"):]
  if base not in OPS: return None
  dt, sts, fn = OPS[base]
  return (lambda st, w: to_bits(N.canonical_nan(fn(*(bits_to(r(st, w), t) for r, t in zip((r0, r1), sts)))), dt)), write


# ---- DPP: src0 read from another lane of the row (DPP16) or of the group of 8 (DPP8) ------------------------------
def dpp16_lanes(ctrl: int, lanes: int) -> tuple[np.ndarray, np.ndarray]:
  """(source lane, source in range) for every lane under a DPP16 dpp_ctrl (gfx10+ encodings)."""
  lane = np.arange(lanes)
  row, r = lane & ~15, lane & 15
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
  """VOP1/VOP2/VOPC with DPP16 or DPP8: permute src0 across lanes into a scratch register, narrow EXEC to the lanes
  that may be written (row/bank masks, bound_ctrl), run the plain op on it, restore EXEC."""
  from hcq.asm.emu.decode import ExtraInstruction, _Fmt, _Opcode
  fmt, v = ins.opcode.fmt.name, ins.values
  base_fmt = fmt.split("_")[0]
  name = re.sub(r"_dpp(16|8)?(_fi)?$", "", ins.opcode.mnemonic.replace("_e32", ""))
  values = {k: v[k] for k in ("vdst", "vsrc1") if k in v}
  values["src0"] = DPP_SOURCE
  values["abs"] = v.get("abs0", 0) | (v.get("abs1", 0) << 1)
  values["neg"] = v.get("neg0", 0) | (v.get("neg1", 0) << 1)
  inner = build(ExtraInstruction(_Opcode(name, _Fmt(base_fmt)), values, None, ins.size), pc)
  if inner is None: return None
  src0 = v["src0"] - 256 if v["src0"] >= 256 else v["src0"]
  if "dpp8" in v:
    sel = v["dpp8"]
    fetch_inactive, bound_zero = fmt.endswith("FI"), False
    row_bank = None
    def lanes_for(n):
      lane = np.arange(n)
      return (lane & ~7) | ((sel >> (3 * (lane & 7))) & 7), np.ones(n, bool)
  else:
    ctrl, fetch_inactive, bound_zero = v["dpp_ctrl"], bool(v.get("fi", 0)), bool(v.get("bound_ctrl", 0))
    rm, bm = v.get("row_mask", 0xf), v.get("bank_mask", 0xf)
    lanes_for = lambda n: dpp16_lanes(ctrl, n)
    row_bank = lambda n: np.array([(rm >> (l // 16) & 1) and (bm >> ((l & 15) // 4) & 1) for l in range(n)], bool)
  cache = {}
  def op(st: Waves, w):
    if st.lanes not in cache: cache[st.lanes] = (*lanes_for(st.lanes), None if row_bank is None else row_bank(st.lanes))
    idx, valid, enable = cache[st.lanes]
    ex = st.exec_lanes(w)
    src = st.v[src0][w][:, idx]
    ok = valid[None, :] & (True if fetch_inactive else ex[:, idx])
    if bound_zero: src = np.where(ok, src, u32(0)); write = ex
    else: write = ex & ok
    if enable is not None: write = write & enable[None, :]
    dpp = st.dpp
    if isinstance(w, slice): dpp[...] = src
    else: dpp[w] = src
    saved = st.mask(EXEC, w).copy()
    st.set_mask(EXEC, w, st.mask_of(write))
    try:
      inner(st, w)
    finally:
      st.set_mask(EXEC, w, saved)
  return op
