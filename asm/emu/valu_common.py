"""What every VALU builder shares: source fields of each encoding, typed readers with VOP3 modifiers and true16 halves,
result post-processing (omod, clamp, integer saturation) and destination writers (NaN, denormal flushing)."""
from __future__ import annotations

import numpy as np

from hcq.asm.emu import numerics as N
from hcq.asm.emu.numerics import FLOATS, bits_to, to_bits, width
from hcq.asm.emu.operands import scalar_reader, vector_reader, write_vgpr, write_vgpr64
from hcq.asm.emu.wave import VCC

u16, u32, u64, i32, i64 = np.uint16, np.uint32, np.uint64, np.int32, np.int64
f16, f32, f64 = np.float16, np.float32, np.float64


def base_name(mnemonic: str) -> str:
  return mnemonic[:-4] if mnemonic.endswith(("_e32", "_e64")) else mnemonic


def sources(ins) -> list[int]:
  v, fmt = ins.values, ins.opcode.fmt.name
  if fmt == "VOP1": return [v["src0"]]
  if fmt in ("VOP2", "VOPC"): return [v["src0"], v["vsrc1"] + 256]
  return [v["src0"], v["src1"], v["src2"]]


# True16 (how the hardware reads 16-bit VOP1/VOP2/VOPC operands; LLVM >= 20 emits it, LLVM 19's "fake16" keeps to
# the low halves of v0-v127 so it reads the same): bit 7 of an 8-bit VGPR field selects the high half of v0-v127.
def is_hi16(enc: int, t: str) -> bool:
  return width(t) == 16 and 256 + 128 <= enc < 512   # 512 and up: the DPP/SDWA pseudo sources (operands.DPP_SOURCE), whole registers


def true16_sources(srcs: list[int], types) -> list[int]:
  return [e - 128 if is_hi16(e, t) else e for e, t in zip(srcs, types)] + srcs[len(types):]


def true16_dst(vdst: int, t: str) -> tuple[int, bool]:
  return (vdst - 128, True) if width(t) == 16 and vdst >= 128 else (vdst, False)


def typed_reader(enc: int, t: str, lit, hi: bool, absv: bool, neg: bool, flush: bool = True):
  bits = width(t)
  # a 16-bit operand's inline float constant is the f16 value (1.0 = 0x3c00); the high half keeps the 32-bit read
  raw = vector_reader(enc, bits if bits == 64 or (bits == 16 and not hi) else 32, t in FLOATS, lit)
  fp = t in FLOATS
  ftz_in = N.ftz_bits(t)[0] if flush else 0
  def read(st, w):
    x = bits_to(raw(st, w), t, hi)
    if st.ftz & ftz_in: x = N.flush_denormals(x)
    if fp and absv: x = np.abs(x)
    if fp and neg: x = -x
    return x
  return read


def saturating(fn, dt: str):
  """Integer clamp: the op computed wide (int64) and saturated to the destination's range (v_add_nc_i32 clamp ...)."""
  info = np.iinfo(N.TYPES[dt][1])
  def sat(*xs):
    r = fn(*(np.asarray(x).astype(np.int64) for x in xs))
    return np.clip(r, info.min, info.max).astype(N.TYPES[dt][1])
  return sat


def output_modifiers(t: str, clamp: bool, omod: int):
  """Post-processing of a float result: output modifier then clamp to [0, 1]; integer clamp is per-op."""
  scale = {1: 2.0, 2: 4.0, 3: 0.5}.get(omod)
  def post(x, st):
    if t in FLOATS and scale is not None: x = (x * x.dtype.type(scale)).astype(x.dtype)
    if t in FLOATS and clamp:
      x = np.clip(x, 0, 1).astype(x.dtype)
      if st.dx10_clamp: x = np.where(np.isnan(x), x.dtype.type(0), x)   # MODE.DX10_CLAMP: a NaN clamps to 0, else passes
    return x
  return post if (scale is not None or clamp) else None


def dst_writer(t: str, vdst: int, hi: bool):
  """Write typed results to VGPR vdst on the active lanes: 64-bit over a pair, 16-bit into one half (the other kept);
  float results get the ISA's quiet NaN and are flushed when MODE says so."""
  inner = dst_writer_raw(t, vdst, hi)
  ftz_out = N.ftz_bits(t)[1]
  if not ftz_out: return inner
  def write(st, w, x, ex):
    x = N.canonical_nan(x)
    inner(st, w, N.flush_denormals(x) if st.ftz & ftz_out else x, ex)
  return write


def dst_writer_raw(t: str, vdst: int, hi: bool):
  bits = width(t)
  if bits == 64: return lambda st, w, x, ex: write_vgpr64(st, vdst, w, to_bits(x, t), ex)
  if bits == 16:
    def w16(st, w, x, ex):
      b = to_bits(x, t) & u32(0xffff)
      cur = st.v[vdst][w]
      new = (cur & u32(0x0000ffff)) | (b << u32(16)) if hi else (cur & u32(0xffff0000)) | b
      write_vgpr(st, vdst, w, new, ex)
    return w16
  return lambda st, w, x, ex: write_vgpr(st, vdst, w, to_bits(x, t), ex)


def lane_mask_reader(ins, idx: int):
  """The carry-in / select mask operand: VCC for VOP2, src2 (an SGPR or pair) for VOP3."""
  if ins.opcode.fmt.name in ("VOP2", "VOPD"): return lambda st, w: st.mask(VCC, w)
  enc = ins.values[("src0", "src1", "src2")[idx]]
  rd = scalar_reader(enc, 64, False, ins.literal)
  return lambda st, w: (rd(st, w) & (u64(0xffffffff) if st.lanes == 32 else u64(0xffffffffffffffff)))


def sdst_of(ins) -> int:
  return VCC if ins.opcode.fmt.name == "VOP2" else ins.values["sdst"]
