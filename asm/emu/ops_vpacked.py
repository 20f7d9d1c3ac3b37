"""VOP3P: packed 16-bit math (each half of the result reads the halves op_sel / op_sel_hi pick), mixed-precision fma,
dot products and WMMA."""
from __future__ import annotations
import re

import numpy as np

from hcq.asm.emu import numerics as N
from hcq.asm.emu.numerics import bits_to, to_bits
from hcq.asm.emu.operands import vector_reader, write_vgpr
from hcq.asm.emu.valu_math import fmax, fmaximum, fmin, fminimum, shift_mask
from hcq.asm.emu.wave import Waves

u16, u32, u64, i32, i64 = np.uint16, np.uint32, np.uint64, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64


# packed 16-bit math (VOP3P): (lane type, n sources, fn)
PK = {
  "v_pk_add_f16": ("f16", 2, np.add), "v_pk_mul_f16": ("f16", 2, np.multiply), "v_pk_fma_f16": ("f16", 3, N.fma16),
  "v_pk_max_f16": ("f16", 2, fmax), "v_pk_min_f16": ("f16", 2, fmin), "v_pk_max_num_f16": ("f16", 2, fmax),
  "v_pk_min_num_f16": ("f16", 2, fmin), "v_pk_maximum_f16": ("f16", 2, fmaximum), "v_pk_minimum_f16": ("f16", 2, fminimum),
  "v_pk_add_u16": ("u16", 2, np.add), "v_pk_add_i16": ("i16", 2, np.add), "v_pk_sub_u16": ("u16", 2, np.subtract), "v_pk_sub_i16": ("i16", 2, np.subtract),
  "v_pk_mul_lo_u16": ("u16", 2, np.multiply), "v_pk_mad_u16": ("u16", 3, lambda a, b, c: a * b + c), "v_pk_mad_i16": ("i16", 3, lambda a, b, c: a * b + c),
  "v_pk_max_i16": ("i16", 2, np.maximum), "v_pk_min_i16": ("i16", 2, np.minimum), "v_pk_max_u16": ("u16", 2, np.maximum), "v_pk_min_u16": ("u16", 2, np.minimum),
  "v_pk_lshlrev_b16": ("u16", 2, lambda a, b: b << shift_mask(a, 16)), "v_pk_lshrrev_b16": ("u16", 2, lambda a, b: b >> shift_mask(a, 16)),
  "v_pk_ashrrev_i16": ("i16", 2, lambda a, b: b >> shift_mask(a.view(u16) if a.dtype != u16 else a, 16).astype(np.int16)),
}


# gfx90a+ packed f32 on register pairs: (sources, fn); v_pk_mov_b32 moves a dword of src0 and one of src1
PK_F32 = {"v_pk_add_f32": (2, np.add), "v_pk_mul_f32": (2, np.multiply), "v_pk_fma_f32": (3, N.fma32), "v_pk_mov_b32": (2, None)}


def _build_pk_f32(ins, name, srcs, opsel, opsel_hi, neg, neg_hi, vdst):
  """Each dword of the result reads, from every source pair, the dword op_sel (low result) / op_sel_hi (high result)
  picks; neg / neg_hi negate the sources of the low / high result. An SGPR source is a pair; a constant (inline or
  literal) is the same f32 in both dwords."""
  n, fn = PK_F32[name]
  def reader(e):
    if e >= 256 or e < 106:   # a VGPR or SGPR pair
      rd = vector_reader(e, 64, False, None)
      return lambda st, w: rd(st, w)
    c = vector_reader(e, 32, True, ins.literal)
    return lambda st, w: (lambda x: x.astype(np.uint64) | (x.astype(np.uint64) << np.uint64(32)))(np.asarray(c(st, w)))
  rds = [reader(e) for e in srcs[:n]]
  clamp = bool(ins.values.get("clamp", 0))
  def dword(x, hi: bool): return ((x >> np.uint64(32)) if hi else x).astype(np.uint32)
  def op(st: Waves, w):
    ex = st.exec_lanes(w)
    xs = [r(st, w) for r in rds]
    for half, (sel, ng, dst) in enumerate(((opsel, neg, vdst), (opsel_hi, neg_hi, vdst + 1))):
      if fn is None: r = dword(xs[half], bool(opsel >> half & 1))   # v_pk_mov_b32: D.lo = src0[op_sel[0]], D.hi = src1[op_sel[1]]
      else:
        args = [dword(x, bool(sel >> i & 1)).view(f32) for i, x in enumerate(xs)]
        args = [-a if ng >> i & 1 else a for i, a in enumerate(args)]
        r = N.canonical_nan(np.asarray(fn(*args), f32))
        if clamp: r = np.clip(r, 0, 1).astype(f32)
        r = r.view(u32)
      write_vgpr(st, dst, w, np.broadcast_to(r, ex.shape), ex)
  return op


def build(ins, pc: int):
  """Packed math: each 16-bit half of the result reads the halves opsel (low result) / opsel_hi (high result) pick."""
  name, v = ins.opcode.mnemonic, ins.values
  srcs = [v["src0"], v["src1"], v["src2"]]
  opsel, opsel_hi = v.get("opsel", 0), v.get("opsel_hi", 0) | (v.get("opsel_hi2", 0) << 2)
  neg, neg_hi = v.get("neg", 0), v.get("neg_hi", 0)
  vdst = v["vdst"]
  if name in PK_F32: return _build_pk_f32(ins, name, srcs, opsel, opsel_hi, neg, neg_hi, vdst)
  raws = [vector_reader(e, 32, True, ins.literal) for e in srcs]
  if name in PK:
    t, n, fn = PK[name]
    if t == "f16":   # a float inline constant is the f16 value in the low half, 0 in the high half (as LLVM encodes it)
      raws = [vector_reader(e, 16 if 240 <= e <= 248 else 32, True, ins.literal) for e in srcs]
    fp = t == "f16"
    def half(raw_bits, i, hi_sel, negate, flush):
      x = bits_to(raw_bits, t, hi_sel)
      if flush: x = N.flush_denormals(x)
      return -x if (negate and fp) else x
    clamp = bool(v.get("clamp", 0))
    def op(st: Waves, w):
      ex = st.exec_lanes(w)
      r = [raws[i](st, w) for i in range(n)]
      fin, fout = fp and bool(st.ftz & 4), fp and bool(st.ftz & 8)   # MODE.FP_DENORM's f16 field
      lo = fn(*(half(r[i], i, bool(opsel >> i & 1), bool(neg >> i & 1), fin) for i in range(n)))
      hi = fn(*(half(r[i], i, bool(opsel_hi >> i & 1), bool(neg_hi >> i & 1), fin) for i in range(n)))
      if clamp and fp: lo, hi = np.clip(lo, 0, 1).astype(f16), np.clip(hi, 0, 1).astype(f16)
      if fp: lo, hi = N.canonical_nan(lo), N.canonical_nan(hi)
      if fout: lo, hi = N.flush_denormals(lo), N.flush_denormals(hi)
      write_vgpr(st, vdst, w, (to_bits(lo, t) & u32(0xffff)) | (to_bits(hi, t) << u32(16)), ex)
    return op
  if name.startswith("v_fma_mix"):
    # opsel_hi bit i: source i is f16 (opsel bit i picks its half); else f32
    def src(st, r, i):
      if opsel_hi >> i & 1:   # an f16 source follows the f16 denormal mode, an f32 one the f32 mode
        x = bits_to(r, "f16", bool(opsel >> i & 1))
        x = (N.flush_denormals(x) if st.ftz & 4 else x).astype(f32)
      else:
        x = r.view(f32)
        if st.ftz & 1: x = N.flush_denormals(x)
      if v.get("neg_hi", 0) >> i & 1: x = np.abs(x)  # neg_hi is abs for mix ops
      return -x if neg >> i & 1 else x
    def op(st: Waves, w):
      ex = st.exec_lanes(w)
      a, b, c = (src(st, raws[i](st, w), i) for i in range(3))
      if name == "v_fma_mix_f32":
        r = N.canonical_nan(N.fma32(a, b, c))
        if v.get("clamp", 0): r = np.clip(r, 0, 1).astype(f32)
        if st.ftz & 2: r = N.flush_denormals(r)
        write_vgpr(st, vdst, w, r.view(u32), ex)
      else:
        r = (a.astype(f64) * b.astype(f64))
        r = N.canonical_nan(N.round_to_odd_sum(r, c.astype(f64)).astype(f16))
        if v.get("clamp", 0): r = np.clip(r, 0, 1).astype(f16)
        if st.ftz & 8: r = N.flush_denormals(r)
        b16 = r.view(u16).astype(u32)
        cur = st.v[vdst][w]
        new = (cur & u32(0xffff)) | (b16 << u32(16)) if name.endswith("hi_f16") else (cur & u32(0xffff0000)) | b16
        write_vgpr(st, vdst, w, new, ex)
    return op
  if name in ("v_dot2_f32_f16", "v_dot2_f32_bf16"):
    t = "f16" if name.endswith("f16") else "bf16"
    def op(st: Waves, w):
      ex = st.exec_lanes(w)
      a, b, c = (raws[i](st, w) for i in range(3))
      fin = t == "f16" and bool(st.ftz & 4)   # bf16 has no denormal mode
      pa = [(N.flush_denormals(x) if fin else x).astype(f64) for x in (bits_to(a, t, h) for h in (False, True))]
      pb = [(N.flush_denormals(x) if fin else x).astype(f64) for x in (bits_to(b, t, h) for h in (False, True))]
      cc = c.view(f32)
      if st.ftz & 1: cc = N.flush_denormals(cc)
      r = N.canonical_nan((pa[0] * pb[0] + pa[1] * pb[1] + cc.astype(f64)).astype(f32))
      if st.ftz & 2: r = N.flush_denormals(r)
      write_vgpr(st, vdst, w, r.view(u32), ex)
    return op
  if name.startswith("v_wmma_"): return _build_wmma(ins, name, getattr(getattr(ins, "isa", None), "arch", "gfx1100").startswith("gfx12"))
  m8 = re.match(r"v_dot4_f32_(fp8|bf8)_(fp8|bf8)$", name)
  if m8:   # gfx12: four 8-bit float products (exact, and exact as a sum for fp8) plus C, rounded once to f32
    ka, kb = m8.group(1), m8.group(2)
    def op_dot4_f8(st: Waves, w):
      ex = st.exec_lanes(w)
      a, b, c = (np.broadcast_to(raws[i](st, w), ex.shape) for i in range(3))
      acc = sum(N.fp8_to_f32(a >> u32(8 * j), ka).astype(f64) * N.fp8_to_f32(b >> u32(8 * j), kb).astype(f64) for j in range(4))
      cc = c.view(f32)
      if st.ftz & 1: cc = N.flush_denormals(cc)
      r = N.canonical_nan(N.round_to_odd_sum(acc, cc.astype(f64)).astype(f32))
      if st.ftz & 2: r = N.flush_denormals(r)
      write_vgpr(st, vdst, w, r.view(u32), ex)
    return op_dot4_f8
  m = re.match(r"v_dot(2|4|8)_(i|u)32_(iu|i|u)(16|8|4)$", name)
  gfx9 = getattr(ins, "gfx9", False)
  if m and (gfx9 or name in ("v_dot4_i32_iu8", "v_dot4_u32_u8", "v_dot8_i32_iu4", "v_dot8_u32_u4")):
    # gfx9: both sources have the result's signedness and clamp saturates; gfx11+: an iu form takes each source's
    # signedness from its neg bit, and the result wraps
    signed, bits = m.group(2) == "i", int(m.group(4))
    sa, sb = (signed, signed) if gfx9 else (signed and bool(neg & 1), signed and bool(neg & 2))
    clamp = ((-2**31, 2**31 - 1) if signed else (0, 2**32 - 1)) if gfx9 and v.get("clamp", 0) else None
    return _int_dot(raws, vdst, bits, signed, sa, sb, clamp)
  return None


def _int_dot(raws, vdst: int, bits: int, signed: bool, sa: bool, sb: bool, clamp: tuple[int, int] | None):
  """D = C + sum of the products of the `bits`-wide fields of A and B (signed as sa/sb), exact in 64 bits, then
  saturated to `clamp` or wrapped to 32 bits."""
  fields, mask, half = 32 // bits, (1 << bits) - 1, 1 << (bits - 1)
  def op_dot(st: Waves, w):
    ex = st.exec_lanes(w)
    a, b, c = (np.broadcast_to(raws[i](st, w), ex.shape) for i in range(3))
    acc = c.view(i32).astype(i64) if signed else c.astype(i64)
    for k in range(fields):
      x, y = (((t >> u32(bits * k)) & u32(mask)).astype(i64) for t in (a, b))
      if sa: x = (x ^ half) - half
      if sb: y = (y ^ half) - half
      acc = acc + x * y
    if clamp: acc = np.clip(acc, *clamp)
    write_vgpr(st, vdst, w, (acc & 0xffffffff).astype(u32), ex)
  return op_dot


class _WmmaLayout:
  """Where each element of A (16 x K), B (K x 16) and C/D (16 x 16) lives: (register, element within the register,
  lane) for gfx11 and gfx12, wave32 and wave64, as AMD's matrix instruction calculator gives them.

  gfx11: lane l holds row (A) / column (B) l % 16 with all K elements (lanes 16-63 repeat lanes 0-15); C/D register i
  holds row (lanes / 16) * i + l // 16, column l % 16 (16-bit results in the half opsel[2] picks).
  gfx12: A/B are spread over the lanes: in wave32, lane group g = l // 16 holds K elements in blocks of 64 bits,
  element j at K = (j // B) * 2B + g * B + j % B (B = elements per 64 bits, or all of them if fewer); a wave64 lane
  group g is wave32's group g & 1 holding the second half of its elements when g >= 2. C/D element e of lane l (16-bit
  results two per register) is row e + 8 * (g & 1) + 4 * (g >> 1), column l % 16."""

  def __init__(self, gfx12: bool, lanes: int, bits: int, k: int, out_bits: int):
    per_reg = 32 // bits
    groups = lanes // 16
    if gfx12:
      j_lane, j32 = 16 * k // lanes, 16 * k // 32
      block = min(64 // bits, j32)
      lane, j = np.meshgrid(np.arange(lanes), np.arange(j_lane), indexing="ij")
      g = lane // 16
      j32_idx = (g >> 1) * j_lane + j
      kk = (j32_idx // block) * (2 * block) + (g & 1) * block + j32_idx % block
    else:   # every K element in every lane; lanes 0-15 are read
      j_lane = k
      lane, j = np.meshgrid(np.arange(16), np.arange(k), indexing="ij")
      kk = j
    self.ab_regs = j_lane // per_reg
    self.ab = (lane.ravel(), j.ravel(), (lane % 16).ravel(), kk.ravel())   # lane, element in lane, row/col, K
    per_c = 32 // out_bits if gfx12 else 1          # gfx11 keeps 16-bit results in one half of each register
    self.c_regs = 256 // lanes // per_c
    lane_c, e = np.meshgrid(np.arange(lanes), np.arange(256 // lanes), indexing="ij")
    g = lane_c // 16
    row = (e + 8 * (g & 1) + 4 * (g >> 1)) if gfx12 else (groups * e + g)
    self.c = (lane_c.ravel(), e.ravel(), row.ravel(), (lane_c % 16).ravel())   # lane, element in lane, row, column
    self.per_c = per_c


def _build_wmma(ins, name, gfx12: bool):
  """WMMA D = A x B + C for the dense 16x16xK shapes (f16, bf16, iu8, iu4 inputs) on gfx11 and gfx12 in wave32 and
  wave64 (_WmmaLayout). NEG: for float inputs neg[0]/neg[1] negate the low and neg_hi[0]/neg_hi[1] the high halves
  of A/B's registers, neg[2] subtracts C, neg_hi[2] takes |C|; for integer inputs neg[0]/neg[1] make A/B signed.

  Rounding: the ISA guides give WMMA as D = A x B + C without saying in which order or at which precision the
  products and C are accumulated, nor whether an f16/bf16 accumulator (v_wmma_f16/bf16_*) is rounded between steps.
  With nothing documented to model, the products are computed exactly (f16/bf16 products and their sums are exact in
  f64 for these sizes; integer ones in int64), C is added, and the result is rounded once to the destination type
  (round to nearest even). That is the most accurate result the description allows; hardware that rounds
  intermediate f16/bf16 sums may differ from it in the last place, so f16/bf16-result tests allow 1 ulp."""
  v = ins.values
  m = re.match(r"v_wmma_(f32|f16|bf16|i32)_16x16x(16|32)_(f16|bf16|iu8|iu4|fp8_fp8|fp8_bf8|bf8_fp8|bf8_bf8)$", name)
  if m is None: return None   # the sparse swmmac forms are not modelled
  out_t, k, in_t = m.group(1), int(m.group(2)), m.group(3)
  f8 = in_t.split("_") if "8_" in in_t else None   # gfx12's 8-bit floats: A's and B's kinds
  a_reg, b_reg, c_enc, vdst = v["src0"] - 256, v["src1"] - 256, v["src2"], v["vdst"]
  neg, neg_hi, opsel, clamp = v.get("neg", 0), v.get("neg_hi", 0), v.get("opsel", 0), bool(v.get("clamp", 0))
  bits = {"f16": 16, "bf16": 16, "iu8": 8, "iu4": 4}.get(in_t, 8)
  fp_in, out_bits = in_t in ("f16", "bf16"), 16 if out_t in ("f16", "bf16") else 32
  if f8 and (neg & 3 or neg_hi & 3): return None   # no A/B negation for 8-bit floats
  hi_half = bool(opsel & 4)
  layouts = {}
  def elems(st, w, reg, nregs, which, lay):
    """(k, 16, K) values of A (which=0) or (k, K, 16) of B (which=1) from the registers."""
    words = np.stack([st.v[reg + i][w] for i in range(nregs)], axis=-1)   # (k, L, nregs)
    per = 32 // bits
    parts = [(words >> u32(bits * p)) & u32((1 << bits) - 1) for p in range(per)]
    raw = np.stack(parts, axis=-1).reshape(words.shape[:2] + (nregs * per,))   # element j = reg * per + p
    lane, j, rc, kk = lay.ab
    x = raw[:, lane, j]
    if f8: val = N.fp8_to_f32(x, f8[which]).astype(f64)
    elif fp_in:
      val = bits_to(x, in_t, False).astype(f64)
      sign = np.where(j % 2 == 0, (neg >> which) & 1, (neg_hi >> which) & 1)   # low / high half of each register
      val = np.where(sign.astype(bool), -val, val)
    else:
      val = x.astype(i64)
      if (neg >> which) & 1: val = np.where(val >= (1 << (bits - 1)), val - (1 << bits), val)
    out = np.zeros((x.shape[0], 16, k) if which == 0 else (x.shape[0], k, 16), val.dtype)
    if which == 0: out[:, rc, kk] = val
    else: out[:, kk, rc] = val
    return out
  def op(st: Waves, w):
    lay = layouts.get(st.lanes)
    if lay is None: lay = layouts[st.lanes] = _WmmaLayout(gfx12, st.lanes, bits, k, out_bits)
    ex = st.exec_lanes(w)
    A, B = elems(st, w, a_reg, lay.ab_regs, 0, lay), elems(st, w, b_reg, lay.ab_regs, 1, lay)
    D = np.einsum("wrk,wkc->wrc", A, B)     # exact for these sizes in f64 / int64
    nk = D.shape[0]
    lane, e, row, col = lay.c
    creg, cpart = e // lay.per_c, e % lay.per_c
    Cw = np.stack([np.broadcast_to(vector_reader(c_enc + i if c_enc >= 256 else c_enc, 32)(st, w), (nk, st.lanes)) for i in range(lay.c_regs)], axis=1)
    cbits = Cw[:, creg, lane]                                  # (k, elements)
    if out_bits == 16: cbits = (cbits >> u32(16)) if (hi_half and not gfx12) else (cbits >> (u32(16) * cpart.astype(u32)))
    if out_t == "i32": Cv = cbits.astype(u32).view(i32).astype(i64)
    else:
      Cv = bits_to(cbits.astype(u32), out_t if out_bits == 16 else "f32", False).astype(f64)
      if neg_hi & 4: Cv = np.abs(Cv)
      if neg & 4: Cv = -Cv
    res = D[:, row, col] + Cv
    if out_t == "i32":
      rb = (np.clip(res, -2**31, 2**31 - 1) if clamp else res).astype(i64).astype(u32)
    else:
      rb = to_bits(res.astype(f16) if out_t == "f16" else res.astype(np.float32), out_t) & u32(0xffffffff if out_bits == 32 else 0xffff)
    for r in range(lay.c_regs):
      sel = creg == r
      cur = st.v[vdst + r][w].copy()
      if out_bits == 32: cur[:, lane[sel]] = rb[:, sel]
      else:
        for part in range(lay.per_c):
          ps = sel & (cpart == part)
          sh = u32(16) if (hi_half and not gfx12) or part == 1 else u32(0)
          cur[:, lane[ps]] = (cur[:, lane[ps]] & ~(u32(0xffff) << sh)) | (rb[:, ps].astype(u32) << sh)
      write_vgpr(st, vdst + r, w, cur, ex)
  return op
