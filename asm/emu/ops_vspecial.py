"""VALU ops that need more than elementwise math: carries through VCC/SGPRs, lane reads and writes, movrel, permlanes,
the division helpers' VCC, v_cndmask's modifiers, fmamk/fmaak, and the 16-bit dot products."""
from __future__ import annotations

import numpy as np

from hcq.asm.emu import numerics as N
from hcq.asm.emu.numerics import bits_to, to_bits, width
from hcq.asm.emu.operands import scalar_reader, scalar_writer, vector_reader, write_vgpr, write_vgpr64
from hcq.asm.emu.valu_common import dst_writer, is_hi16, lane_mask_reader, sdst_of, sources, true16_dst, true16_sources, typed_reader
from hcq.asm.emu.valu_math import div_fmas, div_scale, popcount
from hcq.asm.emu.wave import VCC, Waves

u16, u32, u64, i32, i64 = np.uint16, np.uint32, np.uint64, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64


def _build_cndmask(ins, name):
  srcs = sources(ins)
  v = ins.values
  absm, negm, opsel = v.get("abs", 0), v.get("neg", 0), v.get("opsel", 0)
  sel = lane_mask_reader(ins, 2)
  bits16 = name == "v_cndmask_b16"
  def rd(i):
    r = vector_reader(srcs[i], 32, False, ins.literal)
    if bits16 and opsel >> i & 1: r = (lambda r: lambda st, w: r(st, w) >> u32(16))(r)   # op_sel: the high half
    sign = u32(0x8000) if bits16 else u32(0x80000000)
    a, n = bool(absm >> i & 1), bool(negm >> i & 1)
    if not (a or n): return r
    return lambda st, w: ((r(st, w) & ~sign) if a else r(st, w)) ^ (sign if n else u32(0))
  r0, r1 = rd(0), rd(1)
  vdst, hi = v["vdst"], bool(opsel >> 3 & 1)
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    m = st.lanes_of(sel(st, w))
    x = np.where(m, r1(st, w), r0(st, w))
    if bits16:
      x = x & u32(0xffff)
      cur = st.v[vdst][w]
      x = (cur & u32(0xffff)) | (x << u32(16)) if hi else (cur & u32(0xffff0000)) | x
    write_vgpr(st, vdst, w, x, ex)
  return op


def _build_carry(ins, name):
  """v_add_co_u32, v_sub_co_u32, v_subrev_co_u32 and the _ci forms: 32-bit add/sub with a carry mask per lane."""
  srcs = sources(ins)
  ra, rb = vector_reader(srcs[0], 32, False, ins.literal), vector_reader(srcs[1], 32, False, ins.literal)
  cin = lane_mask_reader(ins, 2) if "_ci_" in name else None
  sub, rev = "sub" in name, "subrev" in name
  vdst, sdst = ins.values["vdst"], sdst_of(ins)
  clamp = bool(ins.values.get("clamp", 0))
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    a, b = ra(st, w), rb(st, w)
    if rev: a, b = b, a
    if cin is not None:
      c = st.lanes_of(cin(st, w))
      ci = c.view(np.uint8).astype(u32)
    if sub:
      r = a - b
      carry = a < b
      if cin is not None: carry = carry | ((a == b) & c); r = r - ci
    else:
      r = a + b
      carry = r < a
      if cin is not None: r = r + ci; carry = carry | ((r == 0) & c)   # a+b wrapped to 0xffffffff, +1 carries
    carry = np.broadcast_to(carry, ex.shape)
    if clamp: r = np.where(carry, u32(0) if sub else u32(0xffffffff), r)
    write_vgpr(st, vdst, w, r, ex)
    st.set_mask(sdst, w, st.mask_of(carry & ex))
  return op


def _build_mad64(ins, name):
  """v_mad_u64_u32 / v_mad_i64_i32: 32x32 -> 64 multiply plus a 64-bit addend, carry-out to sdst."""
  v = ins.values
  ra, rb = vector_reader(v["src0"], 32, False, ins.literal), vector_reader(v["src1"], 32, False, ins.literal)
  rc = vector_reader(v["src2"], 64, False, ins.literal)
  signed = "i64" in name
  vdst, sdst = v["vdst"], v["sdst"]
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    a, b, c = ra(st, w), rb(st, w), rc(st, w)
    if signed:
      p = a.view(i32).astype(i64) * b.view(i32).astype(i64)
      r = p.view(u64) + c
      # { D1.i1, D0.i64 } = 65'B(65'I(S0.i32) * 65'I(S1.i32) + 65'I(S2.i64)) (CDNA3/RDNA3 ISA pseudocode): the carry
      # is bit 64 of the exact sum, i.e. its sign (where p + c overflowed i64, the sign of p)
      cs = c.view(i64)
      rs = r.view(i64)
      overflow = ((p >= 0) == (cs >= 0)) & ((rs >= 0) != (p >= 0))
      carry = np.where(overflow, p < 0, rs < 0)
    else:
      p = a.astype(u64) * b.astype(u64)
      r = p + c
      carry = r < p
    write_vgpr64(st, vdst, w, r, ex)
    st.set_mask(sdst, w, st.mask_of(np.broadcast_to(carry, ex.shape) & ex))
  return op


def _build_div_scale(ins, name):
  v = ins.values
  t = "f32" if name.endswith("f32") else "f64"
  negm = v.get("neg", 0)
  rs = [typed_reader(v[f], t, ins.literal, False, False, bool(negm >> i & 1)) for i, f in enumerate(("src0", "src1", "src2"))]
  write = dst_writer(t, v["vdst"], False)
  sdst = v["sdst"]
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    d, vcc = div_scale(*(np.broadcast_to(r(st, w), ex.shape) for r in rs), width(t))
    write(st, w, d, ex)
    st.set_mask(sdst, w, st.mask_of(vcc & ex))
  return op


def _build_div_fmas(ins, name):
  v = ins.values
  t = "f32" if name.endswith("f32") else "f64"
  absm, negm = v.get("abs", 0), v.get("neg", 0)
  rs = [typed_reader(v[f], t, ins.literal, False, bool(absm >> i & 1), bool(negm >> i & 1)) for i, f in enumerate(("src0", "src1", "src2"))]
  write = dst_writer(t, v["vdst"], False)
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    vcc = st.lanes_of(st.mask(VCC, w))
    a, b, c = (np.broadcast_to(r(st, w), ex.shape) for r in rs)
    write(st, w, div_fmas(a, b, c, vcc, width(t)), ex)
  return op


def _build_fmak(ins, name):
  """v_fmamk (src0 * K + vsrc1) and v_fmaak (src0 * vsrc1 + K), K the literal."""
  t = "f16" if name.endswith("f16") else "f32"
  v = ins.values
  fma = N.fma16 if t == "f16" else N.fma32
  (s0, s1), (vdst, dst_hi) = true16_sources([v["src0"], v["vsrc1"] + 256], (t, t)), true16_dst(v["vdst"], t)
  r0 = typed_reader(s0, t, ins.literal, is_hi16(v["src0"], t), False, False)
  r1 = typed_reader(s1, t, ins.literal, is_hi16(v["vsrc1"] + 256, t), False, False)
  k = bits_to(np.array(ins.literal & (0xffff if t == "f16" else 0xffffffff), u32), t)
  mk = "fmamk" in name
  write = dst_writer(t, vdst, dst_hi)
  from hcq.asm.emu.ops_valu import directed, round_shift   # MODE.FP_ROUND as for v_fma_*
  shift, dfn = round_shift(t), directed(f"v_fma_{t}", t, fma)
  def op(st: Waves, w):
    a, b = r0(st, w), r1(st, w)
    x, y, z = (a, k, b) if mk else (a, b, k)
    mode = (st.round >> shift) & 3
    write(st, w, fma(x, y, z) if not mode else dfn(mode, x, y, z), st.exec_lanes(w))
  return op


def _build_readlane(ins, name):
  v = ins.values
  src = v["src0"] - 256
  lane = scalar_reader(v["src1"], 32, False, ins.literal)
  sdst = scalar_writer(v["vdst"])
  def op(st: Waves, w):
    l = lane(st, w).astype(np.int64) % st.lanes
    k = np.arange(len(l))
    sdst(st, w, st.v[src][w][k, l])
  return op


def _build_readfirstlane(ins, name):
  v = ins.values
  src = v["src0"]
  sdst = scalar_writer(v["vdst"])
  rd = vector_reader(src, 32, False, ins.literal)
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    first = np.where(ex.any(1), ex.argmax(1), 0)
    x = np.broadcast_to(rd(st, w), ex.shape)
    sdst(st, w, x[np.arange(len(first)), first])
  return op


def _build_writelane(ins, name):
  v = ins.values
  val = scalar_reader(v["src0"], 32, False, ins.literal)
  lane = scalar_reader(v["src1"], 32, False, ins.literal)
  vdst = v["vdst"]
  def op(st: Waves, w):
    l = lane(st, w).astype(np.int64) % st.lanes
    sel = st.lane_ids[None, :] == l[:, None]
    write_vgpr(st, vdst, w, val(st, w)[:, None], sel)  # writes regardless of EXEC
  return op


def _build_mbcnt(ins, name):
  v = ins.values
  srcs = sources(ins)
  rm, ra = vector_reader(srcs[0], 32, False, ins.literal), vector_reader(srcs[1], 32, False, ins.literal)
  hi = "hi" in name
  vdst = v["vdst"]
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    lanes = st.lane_ids.astype(np.int64)
    lo_bits = lanes - (32 if hi else 0)
    below = np.where(lo_bits <= 0, u64(0), np.where(lo_bits >= 32, u64(0xffffffff), (u64(1) << np.clip(lo_bits, 0, 63).astype(u64)) - u64(1)))
    m = np.broadcast_to(rm(st, w), ex.shape).astype(u64) & below[None, :]
    write_vgpr(st, vdst, w, popcount(m.astype(u32)) + ra(st, w), ex)
  return op


def _build_swap(ins, name):
  a, b = ins.values["vdst"], ins.values["src0"] - 256
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    x, y = st.v[a][w].copy(), st.v[b][w].copy()
    write_vgpr(st, a, w, y, ex); write_vgpr(st, b, w, x, ex)
  return op


def _build_nop(ins, name):
  return lambda st, w: None


def _build_permlane64(ins, name):
  vdst, src = ins.values["vdst"], ins.values["src0"] - 256
  def op(st, w):
    x = st.v[src][w]
    write_vgpr(st, vdst, w, np.roll(x, 32, axis=1) if st.lanes == 64 else x, st.exec_lanes(w))
  return op


def _build_permlane16(ins, name):
  """v_permlane16 / v_permlanex16: lane i of each row of 16 reads lane sel[i] (a nibble of src2:src1) of the same row,
  or of the other row of its 32 for x16. op_sel[0] fetches inactive lanes, op_sel[1] is bound_ctrl."""
  v = ins.values
  src, vdst = v["src0"] - 256, v["vdst"]
  lo = hi = None
  if not name.endswith("_var_b32"): lo, hi = scalar_reader(v["src1"], 32, False, ins.literal), scalar_reader(v["src2"], 32, False, ins.literal)
  fi, bound = bool(v.get("opsel", 0) & 1), bool(v.get("opsel", 0) & 2)
  cross = "x16" in name
  var = name.endswith("_var_b32")   # gfx12: each lane's selector is bits 3:0 of its own lane of VGPR src1
  sel_reg = v["src1"] - 256 if var else None
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    lane = np.arange(st.lanes)
    if var: nib = (st.v[sel_reg][w] & u32(15)).astype(np.int64)
    else:
      sel = (lo(st, w).astype(u64) | (hi(st, w).astype(u64) << u64(32)))[:, None]
      nib = ((sel >> (u64(4) * (lane & 15).astype(u64))[None, :]) & u64(15)).astype(np.int64)
    row = (lane & ~15) ^ (16 if cross else 0)
    srcl = row[None, :] + nib
    k = np.arange(ex.shape[0])[:, None]
    val = st.v[src][w][k, srcl]
    ok = np.ones(ex.shape, bool) if fi else ex[k, srcl]
    if bound: val, write = np.where(ok, val, u32(0)), ex
    else: write = ex & ok
    write_vgpr(st, vdst, w, val, write)
  return op


def _build_movrel(ins, name):
  """v_movrels (read v[src + M0]), v_movreld (write v[dst + M0]), v_movrelsd (both): per-wave register indexing."""
  v = ins.values
  src, dst = v["src0"], v["vdst"]
  rel_s, rel_d = name in ("v_movrels_b32", "v_movrelsd_b32"), name in ("v_movreld_b32", "v_movrelsd_b32")
  if rel_s and src >= 512: return None   # DPP's permuted copy cannot be indexed by M0
  rd = None if rel_s else vector_reader(src, 32, False, ins.literal)
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    waves = np.arange(st.count)[w]
    m0 = st.s[125, w].astype(np.int64)
    if rel_s: x = st.v[(src - 256) + m0, waves]
    else: x = np.broadcast_to(rd(st, w), ex.shape)
    regs = dst + m0 if rel_d else np.full(len(waves), dst)
    if regs.max() >= st.v.shape[0] or (rel_s and (src - 256 + m0).max() >= st.v.shape[0]):
      raise IndexError(f"{name}: M0 indexes past the {st.v.shape[0]} VGPRs the kernel allocated")
    cur = st.v[regs, waves]
    st.v[regs, waves] = np.where(ex, x, cur)
  return op


def _build_movrel2(ins, name):
  """v_movrelsd_2_b32 (v[dst + M0[25:16]] = v[src + M0[9:0]]) and v_swaprel_b32 (swap those two), per wave."""
  v = ins.values
  if v["src0"] < 256 or v["src0"] >= 512: return None   # a VGPR source only (not DPP's permuted copy)
  src, dst, swap = v["src0"] - 256, v["vdst"], name == "v_swaprel_b32"
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    waves = np.arange(st.count)[w]
    m0 = st.s[125, w].astype(np.int64)
    rs, rd = src + (m0 & 0x3ff), dst + ((m0 >> 16) & 0x3ff)
    if max(rs.max(), rd.max()) >= st.v.shape[0]: raise IndexError(f"{name}: M0 indexes past the {st.v.shape[0]} VGPRs the kernel allocated")
    a, b = st.v[rs, waves].copy(), st.v[rd, waves].copy()
    st.v[rd, waves] = np.where(ex, a, b)
    if swap: st.v[rs, waves] = np.where(ex, b, st.v[rs, waves])
  return op


def _build_qsad(ins, name):
  """v_qsad_pk_u16_u8, v_mqsad_pk_u16_u8 (64-bit result of four 16-bit SADs) and v_mqsad_u32_u8 (128-bit, four 32-bit)."""
  from hcq.asm.emu.valu_math import quad_sad
  v = ins.values
  wide = name == "v_mqsad_u32_u8"
  r0, r1 = vector_reader(v["src0"], 64, False, ins.literal), vector_reader(v["src1"], 32, False, ins.literal)
  rc = [vector_reader(v["src2"] + i if v["src2"] >= 256 else v["src2"], 32, False, ins.literal) for i in range(4 if wide else 2)]
  vdst, clamp = v["vdst"], bool(v.get("clamp", 0))
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    a, b = np.broadcast_to(r0(st, w), ex.shape), np.broadcast_to(r1(st, w), ex.shape)
    c = [np.broadcast_to(r(st, w), ex.shape).astype(u64) for r in rc]
    acc = c if wide else [c[0] & u64(0xffff), c[0] >> u64(16), c[1] & u64(0xffff), c[1] >> u64(16)]
    bits = 32 if wide else 16
    res = quad_sad(a, b, acc, name != "v_qsad_pk_u16_u8", 62)
    res = [np.minimum(x, (1 << bits) - 1) if clamp else x & ((1 << bits) - 1) for x in res]
    words = res if wide else [res[0] | (res[1] << 16), res[2] | (res[3] << 16)]
    for i, x in enumerate(words): write_vgpr(st, vdst + i, w, x.astype(u32), ex)
  return op


def _build_dot2_16(ins, name):
  """v_dot2_f16_f16 / v_dot2_bf16_bf16 (VOP3): a.lo*b.lo + a.hi*b.hi + c into a 16-bit result; OPSEL[2] picks the half
  of S2 read, OPSEL[3] the half of D written (RDNA3 ISA, the opcodes' notes)."""
  v = ins.values
  t = "f16" if "f16" in name else "bf16"
  ra, rb, rc = (vector_reader(v[f], 32, True, ins.literal) for f in ("src0", "src1", "src2"))
  write = dst_writer(t, v["vdst"], bool(v.get("opsel", 0) >> 3 & 1))
  c_hi = bool(v.get("opsel", 0) >> 2 & 1)
  def op(st: Waves, w):
    a, b, c = ra(st, w), rb(st, w), rc(st, w)
    r = sum(bits_to(a, t, h).astype(f64) * bits_to(b, t, h).astype(f64) for h in (False, True)) + bits_to(c, t, c_hi).astype(f64)
    write(st, w, r.astype(f16) if t == "f16" else r.astype(np.float32), st.exec_lanes(w))
  return op


def _build_vop2_packed_acc(ins, name):
  """v_dot2acc_f32_f16 (D += a.lo*b.lo + a.hi*b.hi) and v_pk_fmac_f16 (D.lo/hi = fma(a, b, D) per half)."""
  v = ins.values
  ra, rb = vector_reader(v["src0"], 32, True, ins.literal), vector_reader(v["vsrc1"] + 256, 32, True, ins.literal)
  vdst = v["vdst"]
  def op(st: Waves, w):
    a, b, d = ra(st, w), rb(st, w), st.v[vdst][w]
    if name == "v_dot2acc_f32_f16":
      r = sum(bits_to(a, "f16", h).astype(f64) * bits_to(b, "f16", h).astype(f64) for h in (False, True)) + d.view(np.float32).astype(f64)
      out = r.astype(np.float32).view(u32)
    else:
      lo, hi = (N.fma16(bits_to(a, "f16", h), bits_to(b, "f16", h), bits_to(d, "f16", h)) for h in (False, True))
      out = to_bits(lo, "f16") | (to_bits(hi, "f16") << u32(16))
    write_vgpr(st, vdst, w, out, st.exec_lanes(w))
  return op


def _build_scalar_trans(ins, name):
  """gfx12 v_s_exp/log/rcp/rsq/sqrt_f32/f16: the VALU transcendental on an SGPR source, written to an SGPR."""
  from hcq.asm.emu.ops_valu import OPS
  dt, (t,), fn = OPS["v_" + name[4:]]
  v = ins.values
  rd = scalar_reader(v["src0"], 32, True, ins.literal)
  wd = scalar_writer(v["vdst"])
  absm, negm = v.get("abs", 0) & 1, v.get("neg", 0) & 1
  fin, fout = N.ftz_bits(t)
  def op(st: Waves, w):
    x = bits_to(rd(st, w), t, bool(v.get("opsel", 0) & 1))
    if st.ftz & fin: x = N.flush_denormals(x)
    if absm: x = np.abs(x)
    if negm: x = -x
    r = N.canonical_nan(fn(x))
    if st.ftz & fout: r = N.flush_denormals(r)
    wd(st, w, to_bits(r, dt))
  return op


def _build_cvt_from_fp8(ins, name):
  """gfx12 / gfx942 v_cvt_f32_fp8/bf8 (one byte: VOP3 byte_sel is op_sel[0] << 1 | op_sel[1]) and v_cvt_pk_f32_fp8/bf8 (two
  bytes of the word op_sel[0] picks, into a VGPR pair); byte 0 / word 0 in the VOP1 and DPP forms."""
  v = ins.values
  kind = "fp8" if name.endswith("_fp8") else "bf8"
  rd = vector_reader(v["src0"], 32, False, ins.literal)
  opsel, vdst = v.get("opsel", 0), v["vdst"]
  pk = name.startswith("v_cvt_pk_")
  fnuz = bool(getattr(ins, "gfx9", False))   # gfx942 converts the FNUZ formats (numerics.fp8_to_f32)
  first = 2 * (opsel & 1) if pk else ((opsel & 1) << 1) | ((opsel >> 1) & 1)
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    x = np.broadcast_to(rd(st, w), ex.shape)
    out = [N.fp8_to_f32(x >> u32(8 * (first + i)), kind, fnuz).view(u32) for i in range(2 if pk else 1)]   # before vdst (may be src) is written
    for i, r in enumerate(out): write_vgpr(st, vdst + i, w, r, ex)
  return op


SPECIAL = {
  "v_cvt_f32_fp8": _build_cvt_from_fp8, "v_cvt_f32_bf8": _build_cvt_from_fp8, "v_cvt_pk_f32_fp8": _build_cvt_from_fp8,
  "v_cvt_pk_f32_bf8": _build_cvt_from_fp8,
  "v_movrelsd_2_b32": _build_movrel2, "v_swaprel_b32": _build_movrel2,
  "v_qsad_pk_u16_u8": _build_qsad, "v_mqsad_pk_u16_u8": _build_qsad, "v_mqsad_u32_u8": _build_qsad,
  "v_s_exp_f32": _build_scalar_trans, "v_s_log_f32": _build_scalar_trans, "v_s_rcp_f32": _build_scalar_trans,
  "v_s_rsq_f32": _build_scalar_trans, "v_s_sqrt_f32": _build_scalar_trans, "v_s_exp_f16": _build_scalar_trans,
  "v_s_log_f16": _build_scalar_trans, "v_s_rcp_f16": _build_scalar_trans, "v_s_rsq_f16": _build_scalar_trans,
  "v_s_sqrt_f16": _build_scalar_trans,
  "v_permlane16_var_b32": _build_permlane16, "v_permlanex16_var_b32": _build_permlane16,
  "v_mad_co_u64_u32": _build_mad64, "v_mad_co_i64_i32": _build_mad64,
  "v_dot2acc_f32_f16": _build_vop2_packed_acc, "v_pk_fmac_f16": _build_vop2_packed_acc,
  "v_movrels_b32": _build_movrel, "v_movreld_b32": _build_movrel, "v_movrelsd_b32": _build_movrel,
  "v_dot2_f16_f16": _build_dot2_16, "v_dot2_bf16_bf16": _build_dot2_16,
  "v_permlane16_b32": _build_permlane16, "v_permlanex16_b32": _build_permlane16,
  "v_cndmask_b32": _build_cndmask, "v_cndmask_b16": _build_cndmask,
  "v_add_co_u32": _build_carry, "v_sub_co_u32": _build_carry, "v_subrev_co_u32": _build_carry,
  "v_add_co_ci_u32": _build_carry, "v_sub_co_ci_u32": _build_carry, "v_subrev_co_ci_u32": _build_carry,
  "v_mad_u64_u32": _build_mad64, "v_mad_i64_i32": _build_mad64,
  "v_div_scale_f32": _build_div_scale, "v_div_scale_f64": _build_div_scale,
  "v_div_fmas_f32": _build_div_fmas, "v_div_fmas_f64": _build_div_fmas,
  "v_fmamk_f32": _build_fmak, "v_fmaak_f32": _build_fmak, "v_fmamk_f16": _build_fmak, "v_fmaak_f16": _build_fmak,
  "v_readlane_b32": _build_readlane, "v_readfirstlane_b32": _build_readfirstlane, "v_writelane_b32": _build_writelane,
  "v_mbcnt_lo_u32_b32": _build_mbcnt, "v_mbcnt_hi_u32_b32": _build_mbcnt, "v_swap_b32": _build_swap,
  "v_nop": _build_nop, "v_pipeflush": _build_nop, "v_permlane64_b32": _build_permlane64,
}
