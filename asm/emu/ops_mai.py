"""CDNA matrix ops (gfx9 VOP3P_MAI): v_mfma_{f32,i32}_MxNxK[_Bb]_{f32,f16,bf16,i8}, D = A x B + C per block.

Register layouts (AMD's matrix instruction calculator, `--architecture CDNA3 --instruction v_mfma_... --detail-
instruction`, and the CDNA3 ISA guide, section 7.1 "Matrix fused-multiply-add (MFMA)"), wave64, for M = N and B blocks:
- A (M x K per block) and B (K x N): lane l holds row (A) / column (B) l % M, lane group g = l // M (64 / M groups);
  its E = K·B·M / 64 elements (packed in registers, lowest bits first) are q = E·g + e of the B·K (block, k) pairs:
  block q // K, k q % K.
- C and D (M x N per block, one 32-bit value per register): lane l holds column j = l % N; register r holds the row
  chunk t = (r // 4)·G + g (G = 64 / N) of 4 rows: block t // (M / 4), row 4·(t % (M / 4)) + r % 4.
Rounding: the guide gives D = A·B + C with no accumulation order or intermediate precision; products are exact here,
summed in f64 and rounded once to f32 (the most accurate result the description allows). Integer ops wrap at 32 bits.
AGPR operands arrive as unified-file VGPR numbers (hcq.asm.emu.gfx9). CBSZ/ABID/BLGP broadcasts (0 in LLVM's builtins
unless asked) and the f64, xf32, fp8 and sparse (smfmac) forms are refused with a clear error.
"""
from __future__ import annotations
import re

import numpy as np

from hcq.asm.emu.numerics import bits_to
from hcq.asm.emu.operands import constant_bits, write_vgpr
from hcq.asm.emu.wave import Waves

u32, i64, f32, f64 = np.uint32, np.int64, np.float32, np.float64
_IN = {"f32": (32, "f32"), "f16": (16, "f16"), "bf16": (16, "bf16"), "i8": (8, "i8")}


class Layout:
  """Index arrays mapping (lane, element) of A/B and (lane, register) of C/D to matrix coordinates."""

  def __init__(self, m: int, k: int, blocks: int, lanes: int = 64):
    g_count = lanes // m
    self.e = k * blocks * m // lanes                  # A/B elements per lane
    lane = np.arange(lanes)
    q = self.e * (lane // m)[:, None] + np.arange(self.e)[None, :]
    self.ab_idx = lane % m                              # row of A / column of B, per lane
    self.ab_block, self.ab_k = q // k, q % k            # (lanes, e)
    self.regs = m * m * blocks // lanes                 # C/D registers
    r = np.arange(self.regs)
    t = (r // 4)[None, :] * g_count + (lane // m)[:, None]
    self.cd_block, self.cd_row = t // (m // 4), 4 * (t % (m // 4)) + (r % 4)[None, :]
    self.cd_col = np.broadcast_to((lane % m)[:, None], self.cd_row.shape)


def _elements(regs: list[np.ndarray], bits: int, t: str) -> np.ndarray:
  """(k, lanes) register values -> (k, lanes, elements) typed values, lowest bits first."""
  raw = np.stack(regs, axis=-1).astype(u32)
  per = 32 // bits
  parts = [(raw >> u32(bits * p)) & u32((1 << bits) - 1) for p in range(per)]
  vals = np.stack(parts, axis=-1).reshape(raw.shape[:-1] + (raw.shape[-1] * per,))
  if t == "i8": return ((vals.astype(i64) ^ 0x80) - 0x80)
  return bits_to(vals.astype(u32), t).astype(f64)


def build(ins, pc: int):
  name, v = ins.opcode.mnemonic, ins.values
  m = re.match(r"v_mfma_(f32|i32)_(\d+)x(\d+)x(\d+)(?:_(\d+)b)?_(f32|f16|bf16|i8)$", name)
  if not m: return None
  out_t, mm, nn, kk, nb, in_t = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5) or 1), m.group(6)
  if v.get("cbsz", 0) or v.get("abid", 0) or v.get("blgp", 0):
    raise NotImplementedError("MFMA CBSZ/ABID/BLGP broadcast controls are not modelled")
  if mm != nn: return None
  bits, t = _IN[in_t]
  lay = Layout(mm, kk, nb)
  nregs = lay.e * bits // 32
  src0, src1, src2, vdst = v["src0"], v["src1"], v["src2"], v["vdst"]
  if src0 < 256 or src1 < 256: raise NotImplementedError("MFMA A/B must be registers")
  a_regs, b_regs = range(src0 - 256, src0 - 256 + nregs), range(src1 - 256, src1 - 256 + nregs)
  c_const = None if src2 >= 256 else constant_bits(src2, 32, out_t == "f32", ins.literal)
  if src2 < 256 and c_const is None: raise NotImplementedError(f"MFMA C operand {src2} must be registers or an inline constant")
  c_regs = range(src2 - 256, src2 - 256 + lay.regs) if src2 >= 256 else None
  integer = out_t == "i32"

  def op(st: Waves, w):
    k = st.count if isinstance(w, slice) else len(w)
    a = _elements([st.v[r][w] for r in a_regs], bits, t)   # (k, 64, e)
    b = _elements([st.v[r][w] for r in b_regs], bits, t)
    dt = i64 if integer else f64
    am = np.zeros((k, nb, mm, kk), dt); bm = np.zeros((k, nb, kk, nn), dt)
    am[:, lay.ab_block, lay.ab_idx[:, None], lay.ab_k] = a
    bm[:, lay.ab_block, lay.ab_k, lay.ab_idx[:, None]] = b
    d = np.matmul(am, bm)                                   # exact for integers; f64 products of f32/f16/bf16 are exact
    if c_regs is not None: c = np.stack([st.v[r][w] for r in c_regs], axis=-1)   # (k, 64, regs)
    else: c = np.full((k, 64, lay.regs), c_const, u32)
    acc = d[:, lay.cd_block, lay.cd_row, lay.cd_col]        # (k, 64, regs)
    if integer: res = ((acc + c.view(np.int32).astype(i64)) & 0xffffffff).astype(u32)
    else: res = (acc + c.view(f32).astype(f64)).astype(f32).view(u32)
    ex = st.exec_lanes(w)
    for r in range(lay.regs): write_vgpr(st, vdst + r, w, res[:, :, r], ex)
  return op
