"""VOP3P: packed 16-bit math (each half of the result reads the halves op_sel / op_sel_hi pick), mixed-precision fma,
dot products and WMMA."""
from __future__ import annotations
import re

import numpy as np

from hcq.asm.emu import numerics as N
from hcq.asm.emu.numerics import bits_to, to_bits
from hcq.asm.emu.operands import vector_reader, write_vgpr
from hcq.asm.emu.valu_math import fmax, fmin, shift_mask
from hcq.asm.emu.wave import Waves

u16, u32, u64, i32, i64 = np.uint16, np.uint32, np.uint64, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64


# packed 16-bit math (VOP3P): (lane type, n sources, fn)
PK = {
  "v_pk_add_f16": ("f16", 2, np.add), "v_pk_mul_f16": ("f16", 2, np.multiply), "v_pk_fma_f16": ("f16", 3, N.fma16),
  "v_pk_max_f16": ("f16", 2, fmax), "v_pk_min_f16": ("f16", 2, fmin),
  "v_pk_add_u16": ("u16", 2, np.add), "v_pk_add_i16": ("i16", 2, np.add), "v_pk_sub_u16": ("u16", 2, np.subtract), "v_pk_sub_i16": ("i16", 2, np.subtract),
  "v_pk_mul_lo_u16": ("u16", 2, np.multiply), "v_pk_mad_u16": ("u16", 3, lambda a, b, c: a * b + c), "v_pk_mad_i16": ("i16", 3, lambda a, b, c: a * b + c),
  "v_pk_max_i16": ("i16", 2, np.maximum), "v_pk_min_i16": ("i16", 2, np.minimum), "v_pk_max_u16": ("u16", 2, np.maximum), "v_pk_min_u16": ("u16", 2, np.minimum),
  "v_pk_lshlrev_b16": ("u16", 2, lambda a, b: b << shift_mask(a, 16)), "v_pk_lshrrev_b16": ("u16", 2, lambda a, b: b >> shift_mask(a, 16)),
  "v_pk_ashrrev_i16": ("i16", 2, lambda a, b: b >> shift_mask(a.view(u16) if a.dtype != u16 else a, 16).astype(np.int16)),
}


def build(ins, pc: int):
  """Packed math: each 16-bit half of the result reads the halves opsel (low result) / opsel_hi (high result) pick."""
  name, v = ins.opcode.mnemonic, ins.values
  srcs = [v["src0"], v["src1"], v["src2"]]
  opsel, opsel_hi = v.get("opsel", 0), v.get("opsel_hi", 0) | (v.get("opsel_hi2", 0) << 2)
  neg, neg_hi = v.get("neg", 0), v.get("neg_hi", 0)
  vdst = v["vdst"]
  raws = [vector_reader(e, 32, True, ins.literal) for e in srcs]
  if name in PK:
    t, n, fn = PK[name]
    def half(raw_bits, i, hi_sel, negate):
      x = bits_to(raw_bits, t, hi_sel)
      return -x if (negate and t == "f16") else x
    clamp = bool(v.get("clamp", 0))
    def op(st: Waves, w):
      ex = st.exec_lanes(w)
      r = [raws[i](st, w) for i in range(n)]
      lo = fn(*(half(r[i], i, bool(opsel >> i & 1), bool(neg >> i & 1)) for i in range(n)))
      hi = fn(*(half(r[i], i, bool(opsel_hi >> i & 1), bool(neg_hi >> i & 1)) for i in range(n)))
      if clamp and t == "f16": lo, hi = np.clip(lo, 0, 1).astype(f16), np.clip(hi, 0, 1).astype(f16)
      write_vgpr(st, vdst, w, (to_bits(lo, t) & u32(0xffff)) | (to_bits(hi, t) << u32(16)), ex)
    return op
  if name.startswith("v_fma_mix"):
    # opsel_hi bit i: source i is f16 (opsel bit i picks its half); else f32
    def src(r, i):
      if opsel_hi >> i & 1: x = bits_to(r, "f16", bool(opsel >> i & 1)).astype(f32)
      else: x = r.view(f32)
      if v.get("neg_hi", 0) >> i & 1: x = np.abs(x)  # neg_hi is abs for mix ops
      return -x if neg >> i & 1 else x
    def op(st: Waves, w):
      ex = st.exec_lanes(w)
      a, b, c = (src(raws[i](st, w), i) for i in range(3))
      if name == "v_fma_mix_f32":
        r = N.fma32(a, b, c)
        if v.get("clamp", 0): r = np.clip(r, 0, 1).astype(f32)
        write_vgpr(st, vdst, w, r.view(u32), ex)
      else:
        r = (a.astype(f64) * b.astype(f64))
        r = N.round_to_odd_sum(r, c.astype(f64)).astype(f16)
        if v.get("clamp", 0): r = np.clip(r, 0, 1).astype(f16)
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
      pa = [bits_to(a, t, h).astype(f64) for h in (False, True)]
      pb = [bits_to(b, t, h).astype(f64) for h in (False, True)]
      r = (pa[0] * pb[0] + pa[1] * pb[1] + c.view(f32).astype(f64)).astype(f32)
      write_vgpr(st, vdst, w, r.view(u32), ex)
    return op
  if name.startswith("v_wmma_"): return _build_wmma(ins, name)
  if name in ("v_dot8_i32_iu4", "v_dot8_u32_u4"):
    signed = name == "v_dot8_i32_iu4"
    def op8(st: Waves, w):
      ex = st.exec_lanes(w)
      a, b, c = (np.broadcast_to(raws[i](st, w), ex.shape) for i in range(3))
      acc = c.view(i32).astype(i64)
      for k in range(8):
        x, y = ((a >> u32(4 * k)) & u32(15)).astype(i64), ((b >> u32(4 * k)) & u32(15)).astype(i64)
        if signed and neg & 1: x = np.where(x > 7, x - 16, x)
        if signed and neg & 2: y = np.where(y > 7, y - 16, y)
        acc = acc + x * y
      write_vgpr(st, vdst, w, acc.astype(u32), ex)
    return op8
  if name in ("v_dot4_i32_iu8", "v_dot4_u32_u8"):
    signed = name == "v_dot4_i32_iu8"
    def op(st: Waves, w):
      ex = st.exec_lanes(w)
      a, b, c = (np.broadcast_to(raws[i](st, w), ex.shape) for i in range(3))
      acc = c.view(i32).astype(i64)
      for k in range(4):
        x, y = ((a >> u32(8 * k)) & u32(255)).astype(i64), ((b >> u32(8 * k)) & u32(255)).astype(i64)
        if signed and neg & 1: x = np.where(x > 127, x - 256, x)
        if signed and neg & 2: y = np.where(y > 127, y - 256, y)
        acc = acc + x * y
      write_vgpr(st, vdst, w, acc.astype(u32), ex)
    return op
  return None


def _build_wmma(ins, name):
  """gfx11 WMMA 16x16x16 (wave32): lane l holds row l%16 of A and column l%16 of B (both half-waves hold the same
  data); D/C register k holds row 2k + l//16, column l%16 (f16/bf16 results in the half opsel[2] picks).
  Products are exact and summed in f64 (the hardware's summation order is not specified), then rounded once."""
  v = ins.values
  a_reg, b_reg, c_enc, vdst = v["src0"] - 256, v["src1"] - 256, v["src2"], v["vdst"]
  m = re.match(r"v_wmma_(\w+?)_16x16x16_(\w+)$", name)
  out_t, in_t = m.group(1), m.group(2)
  neg, opsel, clamp = v.get("neg", 0), v.get("opsel", 0), bool(v.get("clamp", 0))
  hi_half = bool(opsel & 4)
  per_reg = {"f16": 2, "bf16": 2, "iu8": 4, "iu4": 8}[in_t]
  nregs = 16 // per_reg
  def elems(st, w, reg, signed):
    """(k, 32 lanes, 16) values of A rows / B columns."""
    words = np.stack([st.v[reg + i][w] for i in range(nregs)], axis=-1)   # (k, L, nregs)
    if in_t in ("f16", "bf16"):
      lo, hi = bits_to(words, in_t, False), bits_to(words, in_t, True)
      return np.stack([lo, hi], axis=-1).reshape(words.shape[:2] + (16,)).astype(f64)
    bits = 8 if in_t == "iu8" else 4
    parts = [((words >> u32(bits * j)) & u32((1 << bits) - 1)).astype(i64) for j in range(per_reg)]
    x = np.stack(parts, axis=-1).reshape(words.shape[:2] + (16,))
    return np.where(x >= (1 << (bits - 1)), x - (1 << bits), x) if signed else x
  def op(st: Waves, w):
    if st.lanes != 32: raise NotImplementedError("WMMA in wave64 is not modelled yet")
    ex = st.exec_lanes(w)
    A = elems(st, w, a_reg, bool(neg & 1))[:, :16, :]          # (k, row, kdim)
    B = elems(st, w, b_reg, bool(neg & 2))[:, :16, :]          # (k, col, kdim)
    D = np.einsum("wrk,wck->wrc", A, B)                         # exact for these sizes in f64 / int64
    k = D.shape[0]
    rows = 2 * np.arange(8)[:, None] + (np.arange(32) // 16)[None, :]   # (reg, lane) -> row
    cols = np.broadcast_to(np.arange(32) % 16, (8, 32))
    if out_t in ("f32", "i32"):
      Cr = np.broadcast_to(np.stack([vector_reader(c_enc + i if c_enc >= 256 else c_enc, 32)(st, w) for i in range(8)], axis=1), (k, 8, 32))
      Cv = Cr.view(np.float32).astype(f64) if out_t == "f32" else Cr.view(i32).astype(i64)
      res = D[:, rows, cols] + Cv
      if out_t == "f32": bits = res.astype(np.float32).view(u32)
      else:
        if clamp: res = np.clip(res, -2**31, 2**31 - 1)
        bits = res.astype(i64).astype(u32)
      for i in range(8): write_vgpr(st, vdst + i, w, bits[:, i], ex)
    else:
      Cr = np.broadcast_to(np.stack([vector_reader(c_enc + i if c_enc >= 256 else c_enc, 32)(st, w) for i in range(8)], axis=1), (k, 8, 32))
      Cv = bits_to(Cr, out_t, hi_half).astype(f64)
      res = D[:, rows, cols] + Cv
      b16 = to_bits(res.astype(f16) if out_t == "f16" else res.astype(np.float32), out_t) & u32(0xffff)
      for i in range(8):
        cur = st.v[vdst + i][w]
        new = (cur & u32(0xffff)) | (b16[:, i] << u32(16)) if hi_half else (cur & u32(0xffff0000)) | b16[:, i]
        write_vgpr(st, vdst + i, w, new, ex)
  return op
