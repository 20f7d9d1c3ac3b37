"""SALU semantics (SOP1, SOP2, SOPC, SOPK): per-wave scalar ops on (k,) arrays, setting SCC as the ISA says."""
from __future__ import annotations

import numpy as np

from hcq.asm.emu.operands import scalar_reader, scalar_writer
from hcq.asm.emu.wave import EXEC, Waves

u32, u64, i32, i64 = np.uint32, np.uint64, np.int32, np.int64
M32 = u64(0xffffffff)


def _nz(x): return (np.asarray(x) != 0).astype(u32)


def _popc64(x):
  x = np.ascontiguousarray(np.asarray(x, u64))
  return np.unpackbits(x.view(np.uint8).reshape(-1, 8), axis=1).sum(1).astype(u32)


def _ctz(x, bits):
  x = np.asarray(x, u64)
  low = x & (~x + u64(1))
  r = np.zeros(x.shape, i64)
  for k in range(bits): r += ((low >> u64(k)) & u64(1)).astype(i64) * k
  return np.where(x != 0, r, -1).astype(i32).view(u32)


def _clz(x, bits):
  x = np.asarray(x, u64)
  r = np.full(x.shape, -1, i64)
  for k in range(bits):
    r = np.where((r < 0) & (((x >> u64(bits - 1 - k)) & u64(1)) != 0), k, r)
  return r.astype(i32).view(u32)


def _brev(x, bits):
  x = np.asarray(x, u64)
  r = np.zeros(x.shape, u64)
  for k in range(bits): r |= ((x >> u64(k)) & u64(1)) << u64(bits - 1 - k)
  return r


def _sext(x, bits): return (x.astype(u64).astype(i64) << (64 - bits)) >> (64 - bits)


def _bfe(a, b, bits, signed):
  off = (b & u64(bits - 1))
  n = (b >> u64(16)) & u64(0x7f)
  n = np.minimum(n, u64(bits))
  mask = np.where(n >= 64, u64(0xffffffffffffffff), (u64(1) << np.minimum(n, u64(63))) - u64(1))
  # signed: the shift is arithmetic (ISA pseudocode S0.i32 >> offset; LLVM's constantFoldBFE gives Src0 >> Offset once
  # offset + width reach the register width), so bits above the source are its sign
  r = ((_sext(a, bits) >> off.astype(i64)).view(u64) if signed else a >> off) & mask
  if signed:
    top = np.where(n > 0, (r >> np.maximum(n, u64(1)) - u64(1)) & u64(1), u64(0))
    r = np.where(top.astype(bool), r | ~mask, r)
  return r & (M32 if bits == 32 else u64(0xffffffffffffffff))


# SOP2: name -> (bits, fn(a, b, scc) -> (result, scc or None)); a, b are uint64 holding 32- or 64-bit values
def _add_u32(a, b, c): r = a + b; return r & M32, (r > M32).astype(u32)
def _sub_u32(a, b, c): return (a - b) & M32, (b > a).astype(u32)
def _addc(a, b, c): r = a + b + c; return r & M32, (r > M32).astype(u32)
def _subb(a, b, c): return (a - b - c) & M32, ((b + c) > a).astype(u32)
def _add_i32(a, b, c):
  r = (a + b) & M32
  sa, sb, sr = a >> u64(31), b >> u64(31), r >> u64(31)
  return r, ((sa == sb) & (sr != sa)).astype(u32)
def _sub_i32(a, b, c):
  r = (a - b) & M32
  sa, sb, sr = a >> u64(31), b >> u64(31), r >> u64(31)
  return r, ((sa != sb) & (sr != sa)).astype(u32)
def _s32(x): return x.astype(u32).view(i32).astype(i64)


def _lshl_add(n):
  def f(a, b, c):
    r = (a << u64(n)) + b
    return r & M32, (r > M32).astype(u32)
  return f


def _logic(fn, bits):
  m = M32 if bits == 32 else u64(0xffffffffffffffff)
  def f(a, b, c):
    r = fn(a, b) & m
    return r, _nz(r)
  return f


SOP2 = {
  "s_add_u32": (32, _add_u32), "s_sub_u32": (32, _sub_u32), "s_addc_u32": (32, _addc), "s_subb_u32": (32, _subb),
  "s_add_i32": (32, _add_i32), "s_sub_i32": (32, _sub_i32),
  "s_min_i32": (32, lambda a, b, c: (np.where(_s32(a) < _s32(b), a, b), (_s32(a) < _s32(b)).astype(u32))),
  "s_max_i32": (32, lambda a, b, c: (np.where(_s32(a) > _s32(b), a, b), (_s32(a) > _s32(b)).astype(u32))),
  "s_min_u32": (32, lambda a, b, c: (np.minimum(a, b), (a < b).astype(u32))),
  "s_max_u32": (32, lambda a, b, c: (np.maximum(a, b), (a > b).astype(u32))),
  "s_cselect_b32": (32, lambda a, b, c: (np.where(c != 0, a, b), None)), "s_cselect_b64": (64, lambda a, b, c: (np.where(c != 0, a, b), None)),
  "s_lshl1_add_u32": (32, _lshl_add(1)), "s_lshl2_add_u32": (32, _lshl_add(2)), "s_lshl3_add_u32": (32, _lshl_add(3)), "s_lshl4_add_u32": (32, _lshl_add(4)),
  "s_bfm_b32": (32, lambda a, b, c: ((((u64(1) << (a & u64(31))) - u64(1)) << (b & u64(31))) & M32, None)),
  "s_bfm_b64": (64, lambda a, b, c: ((((u64(1) << (a & u64(63))) - u64(1)) << (b & u64(63))), None)),
  "s_mul_i32": (32, lambda a, b, c: ((a * b) & M32, None)),
  "s_mul_hi_u32": (32, lambda a, b, c: ((a * b) >> u64(32), None)),
  "s_mul_hi_i32": (32, lambda a, b, c: (((_s32(a) * _s32(b)) >> 32).astype(u64) & M32, None)),
  "s_bfe_u32": (32, lambda a, b, c: (lambda r: (r, _nz(r)))(_bfe(a, b, 32, False))),
  "s_bfe_i32": (32, lambda a, b, c: (lambda r: (r, _nz(r)))(_bfe(a, b, 32, True))),
  "s_bfe_u64": (64, lambda a, b, c: (lambda r: (r, _nz(r)))(_bfe(a, b & M32, 64, False))),
  "s_bfe_i64": (64, lambda a, b, c: (lambda r: (r, _nz(r)))(_bfe(a, b & M32, 64, True))),
  "s_absdiff_i32": (32, lambda a, b, c: (lambda r: (r, _nz(r)))(np.abs(_s32(a) - _s32(b)).astype(u64) & M32)),
  "s_pack_ll_b32_b16": (32, lambda a, b, c: ((a & u64(0xffff)) | ((b & u64(0xffff)) << u64(16)), None)),
  "s_pack_lh_b32_b16": (32, lambda a, b, c: ((a & u64(0xffff)) | (b & u64(0xffff0000)), None)),
  "s_pack_hl_b32_b16": (32, lambda a, b, c: ((a >> u64(16)) | ((b & u64(0xffff)) << u64(16)), None)),
  "s_pack_hh_b32_b16": (32, lambda a, b, c: ((a >> u64(16)) | (b & u64(0xffff0000)), None)),
}
for _bits in (32, 64):
  _m = M32 if _bits == 32 else u64(0xffffffffffffffff)
  for _n, _f in {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "nand": lambda a, b: ~(a & b),
                 "nor": lambda a, b: ~(a | b), "xnor": lambda a, b: ~(a ^ b), "and_not1": lambda a, b: a & ~b, "or_not1": lambda a, b: a | ~b}.items():
    SOP2[f"s_{_n}_b{_bits}"] = (_bits, _logic(_f, _bits))
  SOP2[f"s_lshl_b{_bits}"] = (_bits, _logic(lambda a, b, bb=_bits: a << (b & u64(bb - 1)), _bits))
  SOP2[f"s_lshr_b{_bits}"] = (_bits, _logic(lambda a, b, bb=_bits: a >> (b & u64(bb - 1)), _bits))
# gfx12 spellings of gfx11 ops, and its 64-bit adds and multiply
SOP2.update({"s_add_co_u32": SOP2["s_add_u32"], "s_sub_co_u32": SOP2["s_sub_u32"], "s_add_co_ci_u32": SOP2["s_addc_u32"],
             "s_sub_co_ci_u32": SOP2["s_subb_u32"], "s_add_co_i32": SOP2["s_add_i32"], "s_sub_co_i32": SOP2["s_sub_i32"],
             "s_add_nc_u64": (64, lambda a, b, c: (a + b, None)), "s_sub_nc_u64": (64, lambda a, b, c: (a - b, None)),
             "s_mul_u64": (64, lambda a, b, c: (a * b, None))})
SOP2["s_ashr_i32"] = (32, _logic(lambda a, b: (_s32(a) >> (b & u64(31)).astype(i64)).astype(u64), 32))
SOP2["s_ashr_i64"] = (64, _logic(lambda a, b: (a.astype(i64) >> (b & u64(63)).astype(i64)).astype(u64), 64))

# SOPC: name -> (bits, compare(a, b) -> bool) on uint64 values
_CMP = {"eq": np.equal, "lg": np.not_equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal}
SOPC = {}
for _n, _f in _CMP.items():
  SOPC[f"s_cmp_{_n}_u32"] = (32, _f)
  SOPC[f"s_cmp_{_n}_i32"] = (32, lambda a, b, f=_f: f(_s32(a), _s32(b)))
SOPC["s_cmp_eq_u64"], SOPC["s_cmp_lg_u64"] = (64, np.equal), (64, np.not_equal)
for _bits in (32, 64):
  SOPC[f"s_bitcmp0_b{_bits}"] = (_bits, lambda a, b, bb=_bits: ((a >> (b & u64(bb - 1))) & u64(1)) == 0)
  SOPC[f"s_bitcmp1_b{_bits}"] = (_bits, lambda a, b, bb=_bits: ((a >> (b & u64(bb - 1))) & u64(1)) == 1)


# SOP1: name -> (dst bits, src bits, fn(a, d, scc) -> (result, scc or None)); d is the current destination value
def _saveexec(fn):
  return lambda src, ex: fn(src, ex)


SAVEEXEC = {"and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e, "nand": lambda s, e: ~(s & e),
            "nor": lambda s, e: ~(s | e), "xnor": lambda s, e: ~(s ^ e), "and_not0": lambda s, e: ~s & e, "or_not0": lambda s, e: ~s | e,
            "and_not1": lambda s, e: s & ~e, "or_not1": lambda s, e: s | ~e}
SOP1 = {
  "s_mov_b32": (32, 32, lambda a, d, c: (a, None)), "s_mov_b64": (64, 64, lambda a, d, c: (a, None)),
  "s_cmov_b32": (32, 32, lambda a, d, c: (np.where(c != 0, a, d), None)), "s_cmov_b64": (64, 64, lambda a, d, c: (np.where(c != 0, a, d), None)),
  "s_not_b32": (32, 32, lambda a, d, c: (lambda r: (r, _nz(r)))(~a & M32)), "s_not_b64": (64, 64, lambda a, d, c: (lambda r: (r, _nz(r)))(~a)),
  "s_brev_b32": (32, 32, lambda a, d, c: (_brev(a, 32), None)), "s_brev_b64": (64, 64, lambda a, d, c: (_brev(a, 64), None)),
  "s_bcnt0_i32_b32": (32, 32, lambda a, d, c: (lambda r: (r, _nz(r)))((32 - _popc64(a & M32)).astype(u64))),
  "s_bcnt0_i32_b64": (32, 64, lambda a, d, c: (lambda r: (r, _nz(r)))((64 - _popc64(a)).astype(u64))),
  "s_bcnt1_i32_b32": (32, 32, lambda a, d, c: (lambda r: (r, _nz(r)))(_popc64(a & M32).astype(u64))),
  "s_bcnt1_i32_b64": (32, 64, lambda a, d, c: (lambda r: (r, _nz(r)))(_popc64(a).astype(u64))),
  "s_ctz_i32_b32": (32, 32, lambda a, d, c: (_ctz(a, 32), None)), "s_ctz_i32_b64": (32, 64, lambda a, d, c: (_ctz(a, 64), None)),
  # gfx9 only (CDNA3 ISA S_FF0_I32_B32/B64: the first zero from the LSB, -1 if none); gfx11 dropped them
  "s_ff0_i32_b32": (32, 32, lambda a, d, c: (_ctz(~a & M32, 32), None)), "s_ff0_i32_b64": (32, 64, lambda a, d, c: (_ctz(~a, 64), None)),
  "s_clz_i32_u32": (32, 32, lambda a, d, c: (_clz(a, 32), None)), "s_clz_i32_u64": (32, 64, lambda a, d, c: (_clz(a, 64), None)),
  "s_cls_i32": (32, 32, lambda a, d, c: (_cls(a, 32), None)),
  "s_sext_i32_i8": (32, 32, lambda a, d, c: (_sext(a & u64(0xff), 8).astype(u64) & M32, None)),
  "s_sext_i32_i16": (32, 32, lambda a, d, c: (_sext(a & u64(0xffff), 16).astype(u64) & M32, None)),
  "s_bitset0_b32": (32, 32, lambda a, d, c: (d & ~(u64(1) << (a & u64(31))), None)), "s_bitset0_b64": (64, 32, lambda a, d, c: (d & ~(u64(1) << (a & u64(63))), None)),
  "s_bitset1_b32": (32, 32, lambda a, d, c: (d | (u64(1) << (a & u64(31))), None)), "s_bitset1_b64": (64, 32, lambda a, d, c: (d | (u64(1) << (a & u64(63))), None)),
  "s_cls_i32_i64": (32, 64, lambda a, d, c: (_cls(a, 64), None)),
  "s_wqm_b32": (32, 32, lambda a, d, c: (lambda r: (r, _nz(r)))(_wqm(a, 32))), "s_wqm_b64": (64, 64, lambda a, d, c: (lambda r: (r, _nz(r)))(_wqm(a, 64))),
  "s_quadmask_b32": (32, 32, lambda a, d, c: (lambda r: (r, _nz(r)))(_quadmask(a, 32))),
  "s_quadmask_b64": (64, 64, lambda a, d, c: (lambda r: (r, _nz(r)))(_quadmask(a, 64))),
  "s_bitreplicate_b64_b32": (64, 32, lambda a, d, c: (_bitrep(a), None)),
  "s_abs_i32": (32, 32, lambda a, d, c: (lambda r: (r, _nz(r)))(np.abs(_s32(a)).astype(u64) & M32)),
}


def _wqm(a, bits):
  """Whole quad mode: a quad's 4 bits are all set if any is."""
  r = np.zeros(np.shape(a), u64)
  for q in range(bits // 4):
    any_ = ((a >> u64(4 * q)) & u64(15)) != 0
    r |= np.where(any_, u64(15) << u64(4 * q), u64(0))
  return r


def _quadmask(a, bits):
  r = np.zeros(np.shape(a), u64)
  for q in range(bits // 4): r |= (((a >> u64(4 * q)) & u64(15)) != 0).astype(u64) << u64(q)
  return r


def _bitrep(a):
  r = np.zeros(np.shape(a), u64)
  for k in range(32): r |= ((a >> u64(k)) & u64(1)) * (u64(3) << u64(2 * k))
  return r


def _cls(a, bits):
  """s_cls_i32 / s_cls_i32_i64 (gfx9 s_flbit_i32*): as v_cls_i32, the index from the MSB of the first bit that differs
  from the sign bit (the sign bit is index 0), -1 when every bit equals it: clz of the value with its sign folded away."""
  mask = M32 if bits == 32 else ~u64(0)
  return _clz(np.where((a >> u64(bits - 1)) & u64(1) == 1, ~a & mask, a), bits)


def _exec_bits(st: Waves) -> int: return st.lanes


def build(ins, pc: int):
  name, fmt, v = ins.opcode.mnemonic, ins.opcode.fmt.name, ins.values
  lit = ins.literal
  if name in SALU_FLOAT: return _build_float(ins, name, fmt, v, lit)
  if fmt == "SOP2" and name in SOP2:
    bits, fn = SOP2[name]
    ra, rb = scalar_reader(v["ssrc0"], bits, False, lit), scalar_reader(v["ssrc1"], bits, False, lit)
    wd = scalar_writer(v["sdst"], bits)
    def sop2(st: Waves, w):
      r, scc = fn(ra(st, w).astype(u64), rb(st, w).astype(u64), st.scc[w].astype(u64))
      wd(st, w, r)
      if scc is not None: st.scc[w] = scc
    return sop2
  if fmt == "SOPC" and name in SOPC:
    bits, fn = SOPC[name]
    ra, rb = scalar_reader(v["ssrc0"], bits, False, lit), scalar_reader(v["ssrc1"], bits, False, lit)
    def sopc(st: Waves, w):
      st.scc[w] = fn(ra(st, w).astype(u64), rb(st, w).astype(u64)).astype(u32)
    return sopc
  if fmt == "SOP1": return _build_sop1(ins, name, v, lit)
  if fmt == "SOPK": return _build_sopk(ins, name, v, lit, pc)
  return None


def _build_sop1(ins, name, v, lit):
  if name in SOP1:
    dbits, sbits, fn = SOP1[name]
    ra = scalar_reader(v["ssrc0"], sbits, False, lit)
    rd = scalar_reader(v["sdst"], dbits) if v["sdst"] <= 127 else (lambda st, w: np.zeros(1, u64))
    wd = scalar_writer(v["sdst"], dbits)
    def sop1(st: Waves, w):
      r, scc = fn(ra(st, w).astype(u64), rd(st, w).astype(u64), st.scc[w].astype(u64))
      wd(st, w, r)
      if scc is not None: st.scc[w] = scc
    return sop1
  for kind in ("saveexec", "wrexec"):
    for bits in (32, 64):
      suffix = f"_{kind}_b{bits}"
      if name.startswith("s_") and name.endswith(suffix) and name[2:-len(suffix)] in SAVEEXEC:
        fn = SAVEEXEC[name[2:-len(suffix)]]
        ra = scalar_reader(v["ssrc0"], bits, False, lit)
        wd = scalar_writer(v["sdst"], bits)
        m = u64(0xffffffff) if bits == 32 else u64(0xffffffffffffffff)
        wrexec = kind == "wrexec"
        def saveexec(st: Waves, w):
          src = ra(st, w).astype(u64)
          old = st.mask(EXEC, w) & m
          new = fn(src, old) & m
          st.set_mask(EXEC, w, new)
          wd(st, w, new if wrexec else old)
          st.scc[w] = _nz(new)
        return saveexec
  if name in ("s_movrels_b32", "s_movrels_b64", "s_movreld_b32", "s_movreld_b64"):
    bits = 64 if name.endswith("64") else 32
    src, dst, reads = v["ssrc0"], v["sdst"], name.startswith("s_movrels")
    ra = None if reads else scalar_reader(src, bits, False, lit)
    def movrel(st: Waves, w):
      waves = np.arange(st.count)[w]
      m0 = st.s[125, w].astype(np.int64)
      for j in range(bits // 32):
        val = st.s[src + m0 + j, waves] if reads else ((ra(st, w).astype(u64) >> u64(32 * j)) & M32).astype(u32)
        st.s[(dst + m0 + j) if not reads else np.full(len(waves), dst + j), waves] = val
      st.exec_written()
    return movrel
  if name == "s_barrier_signal": return lambda st, w: st.signal(w)   # gfx12: the wave parks at s_barrier_wait (ops_flow)
  if name == "s_barrier_signal_isfirst":   # SCC = 1 for the first wave of its workgroup to signal
    def isfirst(st: Waves, w):
      st.scc[w] = st.first_to_signal(w).astype(u32)
      st.signal(w)
    return isfirst
  if name == "s_movrelsd_2_b32":   # s[sdst + M0[25:16]] = s[ssrc0 + M0[9:0]]
    src, dst = v["ssrc0"], v["sdst"]
    def movrel2(st: Waves, w):
      waves = np.arange(st.count)[w]
      m0 = st.s[125, w].astype(np.int64)
      st.s[dst + ((m0 >> 16) & 0x3ff), waves] = st.s[src + (m0 & 0x3ff), waves]
      st.exec_written()
    return movrel2
  if name in ("s_sendmsg_rtn_b32", "s_sendmsg_rtn_b64"):
    msg, bits = v["ssrc0"], 64 if name.endswith("64") else 32
    wd = scalar_writer(v["sdst"], bits)
    def sendmsg_rtn(st: Waves, w):
      import time
      # MSG_RTN_GET_REALTIME (131): the 100 MHz timestamp the mock GPU also uses; other messages return 0
      val = (time.perf_counter_ns() // 10) if msg == 131 else 0
      wd(st, w, np.full(st.scc[w].shape, val & ((1 << bits) - 1), u64))
    return sendmsg_rtn
  if name == "s_getpc_b64":
    wd = scalar_writer(v["sdst"], 64)
    return lambda st, w: wd(st, w, st.pc[w].astype(u64))   # pc already points at the next instruction
  if name in ("s_setpc_b64", "s_swappc_b64"):
    ra = scalar_reader(v["ssrc0"], 64, False, lit)
    wd = scalar_writer(v["sdst"], 64) if name == "s_swappc_b64" else None
    def setpc(st: Waves, w):
      target = ra(st, w).astype(np.int64)
      if wd is not None: wd(st, w, st.pc[w].astype(u64))
      st.next_pc(w, target)
    setpc.branch = True
    return setpc
  return None


HW_REG_MODE = 1


def _build_sopk(ins, name, v, lit, pc):
  k = v["simm16"]
  ks = k - 0x10000 if k & 0x8000 else k
  sd = v["sdst"]
  if name in ("s_movk_i32", "s_cmovk_i32"):
    wd = scalar_writer(sd)
    val = np.uint32(ks & 0xffffffff)
    if name == "s_movk_i32": return lambda st, w: wd(st, w, np.full(st.scc[w].shape, val))
    rd = scalar_reader(sd)
    return lambda st, w: wd(st, w, np.where(st.scc[w] != 0, val, rd(st, w)))
  if name.startswith("s_cmpk_"):
    op, t = name[7:9], name[-3:]
    f = _CMP[op]
    ra = scalar_reader(sd)
    kk = ks if t == "i32" else k
    def cmpk(st: Waves, w):
      a = ra(st, w)
      st.scc[w] = f(a.view(i32).astype(i64) if t == "i32" else a.astype(i64), kk).astype(u32)
    return cmpk
  if name == "s_addk_i32":
    ra, wd = scalar_reader(sd), scalar_writer(sd)
    def addk(st: Waves, w):
      a = ra(st, w).astype(u64)
      r, scc = _add_i32(a, u64(ks & 0xffffffff), None)
      wd(st, w, r); st.scc[w] = scc
    return addk
  if name == "s_addk_co_i32": return _build_sopk(ins, "s_addk_i32", v, lit, pc)
  if name == "s_mulk_i32":
    ra, wd = scalar_reader(sd), scalar_writer(sd)
    return lambda st, w: wd(st, w, (ra(st, w).astype(u64) * u64(ks & 0xffffffff)) & M32)
  if name in ("s_version", "s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_expcnt", "s_waitcnt_lgkmcnt"):
    return lambda st, w: None   # an in-order machine has nothing outstanding
  hw_id, off, size = k & 0x3f, (k >> 6) & 0x1f, ((k >> 11) & 0x1f) + 1
  fmask = ((1 << size) - 1) << off
  if name == "s_getreg_b32":
    wd = scalar_writer(sd)
    def getreg(st: Waves, w):
      val = st.mode[w] if hw_id == HW_REG_MODE else np.zeros(st.scc[w].shape, u32)
      wd(st, w, (val.astype(u64) & u64(fmask)) >> u64(off))
    return getreg
  if name in ("s_setreg_b32", "s_setreg_imm32_b32"):
    ra = scalar_reader(sd) if name == "s_setreg_b32" else (lambda st, w: np.full(st.scc[w].shape, u32(lit)))
    def setreg(st: Waves, w):
      if hw_id == HW_REG_MODE:
        x = (ra(st, w).astype(u64) << u64(off)) & u64(fmask)
        st.mode[w] = ((st.mode[w].astype(u64) & ~u64(fmask)) | x).astype(u32)
        st.mode_changed()
      # other hardware registers (FLAT_SCR, TRAPSTS...) are not modelled: writes are ignored
    return setreg
  if name == "s_call_b64":
    wd = scalar_writer(sd, 64)
    def call(st: Waves, w):
      wd(st, w, np.full(st.scc[w].shape, u64(pc + 4)))
      st.next_pc(w, np.full(st.scc[w].shape, pc + 4 + ks * 4, np.int64))
    call.branch = True
    return call
  return None


# ---- gfx12 SALU float ops: the VALU's semantics (ops_valu.OPS, MODE's denormal flushing) on one value per wave ----
_SALU_FROM_VALU = {f"s_{op}_{t}": f"v_{op}_{t}" for t in ("f32", "f16") for op in ("add", "sub", "mul", "min_num", "max_num", "minimum",
                                                                                      "maximum", "ceil", "floor", "trunc", "rndne")}
_SALU_FROM_VALU.update({"s_cvt_f32_i32": "v_cvt_f32_i32", "s_cvt_f32_u32": "v_cvt_f32_u32", "s_cvt_i32_f32": "v_cvt_i32_f32",
                        "s_cvt_u32_f32": "v_cvt_u32_f32", "s_cvt_f16_f32": "v_cvt_f16_f32", "s_cvt_f32_f16": "v_cvt_f32_f16",
                        "s_cvt_pk_rtz_f16_f32": "v_cvt_pk_rtz_f16_f32", "s_cvt_hi_f32_f16": "v_cvt_f32_f16",
                        "s_fmac_f32": "v_fma_f32", "s_fmac_f16": "v_fma_f16", "s_fmaak_f32": "v_fma_f32", "s_fmamk_f32": "v_fma_f32"})
_SCMP = {f"s_cmp_{c}_{t}": (f"v_cmp_{c}_{t}") for t in ("f32", "f16") for c in ("lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge",
                                                                                 "nlg", "ngt", "nle", "neq", "nlt")}
SALU_FLOAT = set(_SALU_FROM_VALU) | set(_SCMP)


def _build_float(ins, name, fmt, v, lit):
  from hcq.asm.emu import numerics as N
  from hcq.asm.emu.ops_valu import CMPS, OPS, ROUNDED, directed, round_shift
  if name in _SCMP:
    (ta, tb), fn = CMPS[_SCMP[name]]
    ra, rb = _float_reader(v["ssrc0"], ta, lit), _float_reader(v["ssrc1"], tb, lit)
    def scmp(st: Waves, w): st.scc[w] = fn(ra(st, w), rb(st, w)).astype(u32)
    return scmp
  vname = _SALU_FROM_VALU[name]
  dt, sts, fn = OPS[vname]
  hi = name == "s_cvt_hi_f32_f16"
  shift = round_shift(dt)
  rmask, dfn = (3 << shift, directed(vname, dt, fn)) if vname in ROUNDED else (0, None)
  rfn = lambda st, *xs: fn(*xs) if not st.round & rmask else dfn((st.round >> shift) & 3, *xs)
  k = N.bits_to(np.array((lit or 0) & (0xffffffff if sts[0] == "f32" else 0xffff), u32), sts[0]) if name in ("s_fmaak_f32", "s_fmamk_f32") else None
  srcs = [v["ssrc0"]] + ([v["ssrc1"]] if "ssrc1" in v else [])
  readers = [_float_reader(e, t, lit, hi) for e, t in zip(srcs, sts)]
  if name.startswith("s_fmac"): readers.append(_float_reader(v["sdst"], sts[0], None))
  if name == "s_fmaak_f32": readers.append(lambda st, w: k)
  if name == "s_fmamk_f32": readers = [readers[0], lambda st, w: k, readers[1]]
  wd = scalar_writer(v["sdst"])
  ftz_out = N.ftz_bits(dt)[1]
  def sfloat(st: Waves, w):
    x = N.canonical_nan(rfn(st, *(r(st, w) for r in readers)))
    if st.ftz & ftz_out: x = N.flush_denormals(x)
    wd(st, w, np.broadcast_to(N.to_bits(x, dt), np.shape(st.scc[w])).astype(u32))   # 16-bit results: high half zero
  return sfloat


def _float_reader(enc, t, lit, hi=False):
  from hcq.asm.emu import numerics as N
  raw = scalar_reader(enc, 32, t in N.FLOATS, lit)
  ftz_in = N.ftz_bits(t)[0]
  def read(st: Waves, w):
    x = N.bits_to(raw(st, w), t, hi)
    return N.flush_denormals(x) if st.ftz & ftz_in else x
  return read
