"""Per-instruction semantics of the wavefront emulator, written from the RDNA3 ISA's descriptions."""
import sys
import threading

import numpy as np
import pytest

from hcq.asm.emu import IllegalInstruction, InstructionLimit, LDSFault, PageFault, TrapError, VirtualMemory
from hcq.asm.emu.snippet import run_snippet
from hcq.asm.emu.wave import EXEC, VCC

f32, u32, i32 = np.float32, np.uint32, np.int32
LANES = np.arange(32)
rng = np.random.default_rng(4)


def fv(st, r, wave=0): return st.v[r, wave].view(f32)
def uv(st, r, wave=0): return st.v[r, wave]
def iv(st, r, wave=0): return st.v[r, wave].view(i32)


def bits(x): return np.asarray(x, f32).view(u32)


# ---- SALU -------------------------------------------------------------------------------------------------------
def test_scalar_add_carry_chain():
  st = run_snippet("s_add_u32 s2, s0, s1\ns_addc_u32 s3, s4, s5", s={0: 0xffffffff, 1: 2, 4: 7, 5: 1})
  assert st.s[2, 0] == 1 and st.s[3, 0] == 9 and st.scc[0] == 0


def test_scalar_signed_overflow_sets_scc():
  st = run_snippet("s_add_i32 s2, s0, s1", s={0: 0x7fffffff, 1: 1})
  assert st.s[2, 0] == 0x80000000 and st.scc[0] == 1


def test_scalar_compare_and_cselect():
  st = run_snippet("s_cmp_lt_i32 s0, s1\ns_cselect_b32 s2, 10, 20", s={0: (-5) & 0xffffffff, 1: 3})
  assert st.s[2, 0] == 10
  st = run_snippet("s_cmp_lt_u32 s0, s1\ns_cselect_b32 s2, 10, 20", s={0: (-5) & 0xffffffff, 1: 3})
  assert st.s[2, 0] == 20


@pytest.mark.parametrize("text,inputs,expected", [
  ("s_lshl_b64 s[2:3], s[0:1], 36", {0: 5, 1: 0}, (0, 5 << 4)),
  ("s_ashr_i32 s2, s0, 4", {0: 0x80000000}, (0xf8000000,)),
  ("s_bfe_u32 s2, s0, 0x80004", {0: 0xabcd}, (0xbc,)),
  ("s_bfe_i32 s2, s0, 0x40004", {0: 0x80}, (0xfffffff8,)),
  ("s_ctz_i32_b32 s2, s0", {0: 0x50}, (4,)),
  ("s_clz_i32_u32 s2, s0", {0: 0x00010000}, (15,)),
  ("s_bcnt1_i32_b32 s2, s0", {0: 0xf0f0}, (8,)),
  ("s_brev_b32 s2, s0", {0: 1}, (0x80000000,)),
  ("s_mul_hi_u32 s2, s0, s1", {0: 0x80000000, 1: 4}, (2,)),
  ("s_sext_i32_i16 s2, s0", {0: 0x8001}, (0xffff8001,)),
  ("s_pack_ll_b32_b16 s2, s0, s1", {0: 0x1234abcd, 1: 0x5678}, (0x5678abcd,)),
  ("s_movk_i32 s2, 0xfff0", {}, (0xfffffff0,)),
  ("s_and_not1_b32 s2, s0, s1", {0: 0xff, 1: 0x0f}, (0xf0,)),
  ("s_lshl2_add_u32 s2, s0, s1", {0: 3, 1: 1}, (13,)),
])
def test_salu_table(text, inputs, expected):
  st = run_snippet(text, s=inputs)
  assert tuple(int(x) for x in st.s[2:2 + len(expected), 0]) == expected


def test_saveexec_and_restore():
  st = run_snippet("v_cmp_gt_u32_e32 vcc_lo, 8, v0\ns_and_saveexec_b32 s2, vcc_lo\nv_mov_b32 v1, 7\ns_or_b32 exec_lo, exec_lo, s2",
                   v={0: LANES})
  assert st.s[2, 0] == 0xffffffff and st.s[EXEC, 0] == 0xffffffff
  assert (uv(st, 1) == np.where(LANES < 8, 7, 0)).all()


def test_scalar_loop_with_branch():
  st = run_snippet("s_mov_b32 s0, 0\ns_mov_b32 s1, 10\nloop:\ns_add_u32 s0, s0, s1\ns_sub_u32 s1, s1, 1\ns_cmp_lg_u32 s1, 0\ns_cbranch_scc1 loop")
  assert st.s[0, 0] == 55


def test_getpc_and_setpc():
  st = run_snippet("s_getpc_b64 s[0:1]\ns_add_u32 s0, s0, 16\ns_addc_u32 s1, s1, 0\ns_setpc_b64 s[0:1]\ns_mov_b32 s5, 1\ns_mov_b32 s6, 2")
  assert st.s[5, 0] == 0 and st.s[6, 0] == 2


def test_hwreg_mode_roundtrip():
  st = run_snippet("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 3\ns_getreg_b32 s2, hwreg(HW_REG_MODE, 0, 4)")
  assert st.s[2, 0] == 3


# ---- VALU f32 / f16 / f64 -------------------------------------------------------------------------------------
def test_f32_add_mul_exact():
  a, b = rng.standard_normal(32).astype(f32), rng.standard_normal(32).astype(f32)
  st = run_snippet("v_add_f32_e32 v2, v0, v1\nv_mul_f32_e32 v3, v0, v1\nv_sub_f32_e32 v4, v0, v1\nv_subrev_f32_e32 v5, v0, v1", v={0: a, 1: b})
  assert (bits(fv(st, 2)) == bits(a + b)).all() and (bits(fv(st, 3)) == bits(a * b)).all()
  assert (bits(fv(st, 4)) == bits(a - b)).all() and (bits(fv(st, 5)) == bits(b - a)).all()


def test_fma_is_fused():
  # a*b+c where the unfused result rounds differently: a = 1+2^-12, b = 1-2^-12, c = -1 -> exact -2^-24
  a, b = f32(1 + 2**-12), f32(1 - 2**-12)
  st = run_snippet("v_fma_f32 v3, v0, v1, -1.0\nv_fmac_f32_e32 v4, v0, v1", v={0: np.full(32, a), 1: np.full(32, b), 4: np.full(32, -1, f32)})
  assert fv(st, 3)[0] == f32(-2**-24) and fv(st, 4)[0] == f32(-2**-24)


def test_vop3_modifiers_abs_neg_clamp_omod():
  st = run_snippet("v_add_f32_e64 v2, -v0, |v1|\nv_mul_f32_e64 v3, v0, v1 clamp\nv_add_f32_e64 v4, v0, v1 mul:2",
                   v={0: np.full(32, 3, f32), 1: np.full(32, -2, f32)})
  assert fv(st, 2)[0] == -1 and fv(st, 3)[0] == 0 and fv(st, 4)[0] == 2


def test_min_max_nan_and_signed_zero():
  a = np.array([np.nan, 1, -0.0, 2] * 8, f32)
  b = np.array([1, np.nan, 0.0, -3] * 8, f32)
  st = run_snippet("v_min_f32_e32 v2, v0, v1\nv_max_f32_e32 v3, v0, v1", v={0: a, 1: b})
  assert list(fv(st, 2)[:4]) == [1, 1, 0, -3] and np.signbit(fv(st, 2)[2])
  assert list(fv(st, 3)[:4]) == [1, 1, 0, 2] and not np.signbit(fv(st, 3)[2])


def test_f16_ops_and_opsel():
  x = np.float16(1.5).view(np.uint16).astype(np.uint32) | (np.float16(-2.0).view(np.uint16).astype(np.uint32) << 16)
  st = run_snippet("v_fma_f16 v1, v0, v0, v0 op_sel:[1,1,1,0]\nv_mul_f16_e32 v2, v0, v0\nv_cvt_f32_f16_e32 v3, v0",
                   v={0: np.full(32, x, u32), 1: np.full(32, 0xabcd0000, u32), 2: np.full(32, 0x12340000, u32)})
  assert (uv(st, 1)[0] & 0xffff) == np.float16(2.0).view(np.uint16) and uv(st, 1)[0] >> 16 == 0xabcd  # (-2*-2)+-2; high half kept
  assert (uv(st, 2)[0] & 0xffff) == np.float16(2.25).view(np.uint16) and fv(st, 3)[0] == 1.5


def test_f64_ops():
  a, b = rng.standard_normal(32), rng.standard_normal(32)
  lo = lambda x: (x.view(np.uint64) & 0xffffffff).astype(u32)
  hi = lambda x: (x.view(np.uint64) >> 32).astype(u32)
  st = run_snippet("v_add_f64 v[4:5], v[0:1], v[2:3]\nv_mul_f64 v[6:7], v[0:1], v[2:3]\nv_fma_f64 v[8:9], v[0:1], v[2:3], 1.0\nv_cvt_f32_f64_e32 v10, v[0:1]",
                   v={0: lo(a), 1: hi(a), 2: lo(b), 3: hi(b)})
  get = lambda r: (st.v[r, 0].astype(np.uint64) | (st.v[r + 1, 0].astype(np.uint64) << 32)).view(np.float64)
  assert (get(4) == a + b).all() and (get(6) == a * b).all()
  assert np.allclose(get(8), a * b + 1, rtol=1e-15) and (fv(st, 10) == a.astype(f32)).all()


@pytest.mark.parametrize("op,fn,ulp", [("v_rcp_f32", lambda x: 1 / x, 1), ("v_sqrt_f32", np.sqrt, 1), ("v_rsq_f32", lambda x: 1 / np.sqrt(x), 1),
                                       ("v_exp_f32", np.exp2, 1), ("v_log_f32", np.log2, 1),
                                       ("v_sin_f32", lambda x: np.sin(2 * np.pi * x), 2), ("v_cos_f32", lambda x: np.cos(2 * np.pi * x), 2)])
def test_transcendentals_within_ulp(op, fn, ulp):
  x = rng.uniform(0.1, 4, 32).astype(f32)
  st = run_snippet(f"{op}_e32 v1, v0", v={0: x})
  ref = fn(x.astype(np.float64))
  err = np.abs(fv(st, 1).astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(f32)).astype(np.float64)
  assert err.max() <= ulp


@pytest.mark.parametrize("text,x,expected", [
  ("v_cvt_i32_f32_e32 v1, v0", [1.9, -1.9, 3e9, np.nan], [1, -1, 0x7fffffff, 0]),
  ("v_cvt_u32_f32_e32 v1, v0", [1.9, -1.9, 5e9, 7.0], [1, 0, 0xffffffff, 7]),
  ("v_cvt_f32_i32_e32 v1, v0", [bits(0), 0xffffffff, 16777217, 5], [bits(0.0), bits(-1.0), bits(16777216.0), bits(5.0)]),
  ("v_cvt_f32_u32_e32 v1, v0", [0xffffffff, 1, 0, 3], [bits(4294967296.0), bits(1.0), 0, bits(3.0)]),
  ("v_cvt_f16_f32_e32 v1, v0", [1.0, 65520.0, 1e-8, -2.5], [0x3c00, 0x7c00, 0, np.float16(-2.5).view(np.uint16)]),
  ("v_cvt_f32_ubyte2_e32 v1, v0", [0x00ab0000, 0, 0x01000000, 0x00010000], [bits(171.0), 0, 0, bits(1.0)]),
  ("v_floor_f32_e32 v1, v0", [1.5, -1.5, -0.0, 2.0], [bits(1.0), bits(-2.0), bits(-0.0), bits(2.0)]),
  ("v_rndne_f32_e32 v1, v0", [0.5, 1.5, 2.5, -0.5], [bits(0.0), bits(2.0), bits(2.0), bits(-0.0)]),
  ("v_fract_f32_e32 v1, v0", [1.25, -0.25, 3.0, 0.5], [bits(0.25), bits(0.75), bits(0.0), bits(0.5)]),
  ("v_frexp_exp_i32_f32_e32 v1, v0", [8.0, 0.75, 1.0, 0.0], [4, 0, 1, 0]),
  ("v_cvt_pk_rtz_f16_f32_e64 v1, v0, v0", [1.0 + 2**-12, 1.0, -1.0 - 2**-12, 0.0], [0x3c003c00, 0x3c003c00, 0xbc00bc00, 0]),
])
def test_conversions(text, x, expected):
  xs = np.array(x * 8)
  st = run_snippet(text, v={0: xs.astype(f32) if xs.dtype.kind == "f" else xs.astype(np.int64)})
  assert [int(y) for y in uv(st, 1)[:4]] == [int(e) & 0xffffffff for e in expected]


# ---- VALU integer ---------------------------------------------------------------------------------------------
def test_integer_ops():
  a = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(u32)
  b = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(u32)
  st = run_snippet("\n".join(["v_mul_lo_u32 v2, v0, v1", "v_mul_hi_u32 v3, v0, v1", "v_mul_hi_i32 v4, v0, v1", "v_lshlrev_b32_e32 v5, v1, v0",
                              "v_ashrrev_i32_e32 v6, v1, v0", "v_bfe_u32 v7, v0, 4, 8", "v_alignbit_b32 v8, v0, v1, 8", "v_xad_u32 v9, v0, v1, 5",
                              "v_min_i32_e32 v10, v0, v1", "v_med3_u32 v11, v0, v1, 100", "v_perm_b32 v12, v0, v1, 0x07060504",
                              "v_bcnt_u32_b32 v13, v0, 1", "v_lshl_or_b32 v14, v0, 3, v1", "v_sub_nc_u32_e32 v15, v0, v1"]), v={0: a, 1: b})
  a64, b64 = a.astype(np.uint64), b.astype(np.uint64)
  ai, bi = a.view(i32).astype(np.int64), b.view(i32).astype(np.int64)
  assert (uv(st, 2) == (a64 * b64 & 0xffffffff)).all() and (uv(st, 3) == (a64 * b64) >> 32).all()
  assert (iv(st, 4) == ((ai * bi) >> 32)).all() and (uv(st, 5) == a << (b & 31)).all()
  assert (iv(st, 6) == a.view(i32) >> (b & 31).astype(i32)).all() and (uv(st, 7) == (a >> 4) & 0xff).all()
  assert (uv(st, 8) == (((a64 << 32) | b64) >> 8) & 0xffffffff).all() and (uv(st, 9) == (a ^ b) + u32(5)).all()
  assert (iv(st, 10) == np.minimum(a.view(i32), b.view(i32))).all()
  assert (uv(st, 11) == np.sort(np.stack([a, b, np.full(32, 100, u32)]), axis=0)[1]).all()
  assert (uv(st, 12) == a).all()
  assert (uv(st, 13) == np.array([bin(int(x)).count("1") + 1 for x in a])).all()
  assert (uv(st, 14) == (a << 3) | b).all() and (uv(st, 15) == a - b).all()


def test_64bit_add_with_carry_through_vcc():
  a = rng.integers(0, 2**64, 32, dtype=np.uint64); b = rng.integers(0, 2**64, 32, dtype=np.uint64)
  st = run_snippet("v_add_co_u32 v4, vcc_lo, v0, v2\nv_add_co_ci_u32_e32 v5, vcc_lo, v1, v3, vcc_lo",
                   v={0: (a & 0xffffffff).astype(u32), 1: (a >> 32).astype(u32), 2: (b & 0xffffffff).astype(u32), 3: (b >> 32).astype(u32)})
  got = st.v[4, 0].astype(np.uint64) | (st.v[5, 0].astype(np.uint64) << 32)
  assert (got == a + b).all()
  carry = np.array([int(x) + int(y) >= 2**64 for x, y in zip(a, b)])
  assert int(st.s[VCC, 0]) == sum(1 << i for i in range(32) if carry[i])


def test_sub_borrow_and_mad_u64():
  st = run_snippet("v_sub_co_u32 v2, s4, v0, v1\nv_mad_u64_u32 v[4:5], s6, v0, v1, v[6:7]",
                   v={0: np.full(32, 3, u32), 1: LANES.astype(u32), 6: np.full(32, 0xffffffff, u32), 7: np.full(32, 0xffffffff, u32)})
  assert (uv(st, 2) == (3 - LANES) & 0xffffffff).all() and st.s[4, 0] == sum(1 << i for i in range(4, 32))
  full = 3 * LANES.astype(object) + (2**64 - 1)
  assert [int(st.v[4, 0, i]) | int(st.v[5, 0, i]) << 32 for i in range(32)] == [x % 2**64 for x in full]
  assert st.s[6, 0] == sum(1 << i for i in range(32) if full[i] >= 2**64)


def test_64bit_shifts():
  st = run_snippet("v_lshlrev_b64 v[2:3], 36, v[0:1]\nv_ashrrev_i64 v[4:5], 4, v[0:1]", v={0: np.full(32, 0x10, u32), 1: np.full(32, 0x80000000, u32)})
  assert st.v[2, 0, 0] == 0 and st.v[3, 0, 0] == 0x100 and st.v[4, 0, 0] == 1 and st.v[5, 0, 0] == 0xf8000000


def test_mbcnt_readlane_writelane_readfirstlane():
  st = run_snippet("v_mbcnt_lo_u32_b32 v1, -1, 0\nv_readlane_b32 s2, v0, 5\nv_writelane_b32 v3, s2, 9\nv_readfirstlane_b32 s3, v0",
                   v={0: LANES * 10}, exec_mask=0xfffffff0)
  assert (uv(st, 1)[4:] == LANES[4:]).all() and st.s[2, 0] == 50 and uv(st, 3)[9] == 50 and uv(st, 3)[8] == 0 and st.s[3, 0] == 40


def test_compare_writes_sgpr_and_cmpx_writes_exec():
  st = run_snippet("v_cmp_lt_i32_e64 s4, v0, 10\nv_cmpx_gt_u32_e32 20, v0\nv_mov_b32 v1, 1", v={0: LANES})
  assert st.s[4, 0] == (1 << 10) - 1 and st.s[EXEC, 0] == (1 << 20) - 1 and uv(st, 1).sum() == 20


def test_cmp_class():
  x = np.array([np.nan, -np.inf, -1.0, -1e-40, -0.0, 0.0, 1e-40, 1.0, np.inf, 2.0] + [1.0] * 22, f32)
  st = run_snippet("v_cmp_class_f32_e64 s4, v0, 0x3fc\nv_cmp_class_f32_e64 s5, v0, 3", v={0: x})
  assert st.s[4, 0] & 0x3ff == 0b1111111110 and st.s[5, 0] & 0x3ff == 1


def test_cndmask_with_vcc_and_sgpr():
  st = run_snippet("v_cmp_gt_u32_e32 vcc_lo, 16, v0\nv_cndmask_b32_e32 v1, 1, v0, vcc_lo\nv_cndmask_b32_e64 v2, 5, 6, s8", v={0: LANES}, s={8: 0xf})
  assert (uv(st, 1) == np.where(LANES < 16, LANES, 1)).all() and (uv(st, 2) == np.where(LANES < 4, 6, 5)).all()


def test_packed_f16_and_integer():
  h = lambda a, b: np.uint32(np.float16(a).view(np.uint16)) | (np.uint32(np.float16(b).view(np.uint16)) << 16)
  st = run_snippet("v_pk_fma_f16 v2, v0, v1, v1\nv_pk_add_u16 v3, v4, v4\nv_pk_mul_f16 v5, v0, v1 op_sel:[1,0] op_sel_hi:[0,1]",
                   v={0: np.full(32, h(2, 3), u32), 1: np.full(32, h(0.5, -1), u32), 4: np.full(32, 0x8000ffff, u32)})
  assert uv(st, 2)[0] == h(1.5, -4) and uv(st, 3)[0] == 0x0000fffe and uv(st, 5)[0] == h(1.5, -2)


def test_vopd_dual_issue():
  # v_dual_mov_b32 v2, 0 :: v_dual_mov_b32 v3, s2 (bytes as clang-19 emits them)
  code = bytes.fromhex("800010ca") + bytes.fromhex("02000202")
  st = run_snippet(code, v={2: LANES}, s={2: 77})
  assert (uv(st, 2) == 0).all() and (uv(st, 3) == 77).all()


def test_inactive_lanes_untouched():
  st = run_snippet("v_mov_b32_e32 v1, 5", v={1: np.full(32, 9)}, exec_mask=0x0000ffff)
  assert (uv(st, 1) == np.where(LANES < 16, 5, 9)).all()


def test_wave64():
  # the text is wave32 syntax: in wave64 the same encodings name the pairs s[4:5]
  st = run_snippet("v_cmp_gt_u32_e64 s4, 40, v0\nv_cndmask_b32_e64 v1, 0, 1, s4\ns_and_saveexec_b64 s[6:7], s[4:5]\nv_mov_b32 v2, 3",
                   v={0: np.arange(64)}, lanes=64, vgprs=8)
  assert int(st.s[4, 0]) | int(st.s[5, 0]) << 32 == (1 << 40) - 1
  assert (st.v[1, 0] == (np.arange(64) < 40)).all() and st.v[2, 0].sum() == 120 and st.s[6, 0] == 0xffffffff and st.s[7, 0] == 0xffffffff
  assert st.s[EXEC + 1, 0] == (1 << 8) - 1


def test_many_waves_in_lockstep_diverge_and_rejoin():
  # each wave loops s0 (its own count) times: the batch diverges on the scalar branch and all finish
  st = run_snippet("v_mov_b32 v1, 0\nloop:\nv_add_nc_u32_e32 v1, 1, v1\ns_sub_u32 s0, s0, 1\ns_cmp_lg_u32 s0, 0\ns_cbranch_scc1 loop",
                   waves=4, s={0: [3, 1, 7, 2]})
  assert list(st.v[1, :, 0]) == [3, 1, 7, 2] and st.done.all()


# ---- memory ---------------------------------------------------------------------------------------------------
def _buffer(mem, va, arr):
  backing = np.ascontiguousarray(arr).view(np.uint8).reshape(-1).copy()
  mem.map(va, backing.size, backing)
  return backing


def test_global_load_store_with_saddr_and_vaddr64():
  mem = VirtualMemory()
  _buffer(mem, 0x10000, np.arange(64, dtype=u32))
  out = _buffer(mem, 0x20000, np.zeros(32, u32))
  run_snippet("v_lshlrev_b32_e32 v1, 2, v0\nglobal_load_b32 v2, v1, s[0:1] offset:8\nv_add_nc_u32_e32 v2, 1, v2\n"
                   "global_store_b32 v[4:5], v2, off", v={0: LANES, 4: 0x20000 + 4 * LANES, 5: 0}, s={0: 0x10000, 1: 0}, mem=mem)
  assert (out.view(u32) == LANES + 3).all()


def test_global_negative_offsets():
  """GLOBAL offsets are signed (13 bits on gfx11): -4, -8 and the most negative, -4096, reach below the address."""
  mem = VirtualMemory()
  buf = _buffer(mem, 0x10000, np.arange(2048, dtype=u32))  # 8 KiB of word indices
  st = run_snippet("global_load_b32 v1, v0, s[0:1] offset:-4\nglobal_load_b32 v2, v[4:5], off offset:-4096\n"
                   "global_load_b32 v3, v[6:7], off offset:4092\ns_waitcnt vmcnt(0)\nglobal_store_b32 v0, v0, s[0:1] offset:-8",
                   v={0: 4 * LANES, 4: 0x11000 + 4 * LANES, 5: 0, 6: 0x10000 + 4 * LANES, 7: 0}, s={0: 0x11000, 1: 0}, mem=mem)
  assert (uv(st, 1) == 1023 + LANES).all() and (uv(st, 2) == LANES).all() and (uv(st, 3) == 1023 + LANES).all()
  assert (buf.view(u32)[1022:1022 + 32] == 4 * LANES).all()


def test_global_wide_and_subdword():
  mem = VirtualMemory()
  buf = _buffer(mem, 0x10000, np.arange(256, dtype=np.uint8))
  st = run_snippet("global_load_b128 v[2:5], v0, s[0:1]\nglobal_load_i8 v6, v0, s[0:1] offset:255\nglobal_load_u16 v7, v0, s[0:1] offset:2\n"
                   "global_store_b16 v0, v7, s[0:1] offset:100", v={0: 0}, s={0: 0x10000, 1: 0}, mem=mem)
  assert st.v[2, 0, 0] == 0x03020100 and st.v[5, 0, 0] == 0x0f0e0d0c and st.v[6, 0, 0] == 0xffffffff and st.v[7, 0, 0] == 0x0302
  assert buf[100] == 2 and buf[101] == 3


def test_page_fault_names_address_and_pc():
  mem = VirtualMemory()
  _buffer(mem, 0x10000, np.zeros(16, u32))
  with pytest.raises(PageFault) as e:
    run_snippet("v_lshlrev_b32_e32 v1, 2, v0\nglobal_load_b32 v2, v1, s[0:1]", v={0: LANES}, s={0: 0x10000, 1: 0}, mem=mem)
  assert e.value.address == 0x10040 and not e.value.write and e.value.pc is not None


def test_store_to_readonly_faults():
  mem = VirtualMemory()
  mem.map(0x10000, 256, np.zeros(256, np.uint8), writable=False)
  with pytest.raises(PageFault) as e:
    run_snippet("global_store_b32 v0, v0, s[0:1]", v={0: 0}, s={0: 0x10000, 1: 0}, mem=mem)
  assert e.value.write


def test_lookups_while_another_thread_maps_and_unmaps_see_whole_mappings():
  """An engine thread reads a mapping while the host maps and unmaps others below it (a buffer allocated and freed on
  another thread): every read is the mapping's own bytes, never a neighbour's start paired with another's backing."""
  mem, stop, seen = VirtualMemory(), threading.Event(), []
  data = np.arange(128, dtype=np.uint8)
  mem.map(0x100000, 128, data.copy())

  def churn() -> None:
    while not stop.is_set():
      for va in range(0x1000, 0x9000, 0x1000): mem.map(va, 64, np.zeros(64, np.uint8))
      for va in range(0x1000, 0x9000, 0x1000): mem.unmap(va)
  old, t = sys.getswitchinterval(), threading.Thread(target=churn)
  sys.setswitchinterval(1e-6)
  try:
    t.start()
    for _ in range(20000):
      got = mem.view(0x100000 + 16, 64)
      if got.size != 64 or got[0] != 16: seen.append(got[:4].tolist())
  finally:
    stop.set(); t.join(); sys.setswitchinterval(old)
  assert seen == []


def test_global_atomics_return_old_values_in_lane_order():
  mem = VirtualMemory()
  buf = _buffer(mem, 0x10000, np.array([100, 0, 0, 0], u32))
  st = run_snippet("global_atomic_add_u32 v1, v0, v2, s[0:1] glc\nglobal_atomic_max_u32 v0, v2, s[0:1] offset:4",
                   v={0: 0, 2: LANES + 1}, s={0: 0x10000, 1: 0}, mem=mem)
  assert buf.view(u32)[0] == 100 + sum(range(1, 33)) and buf.view(u32)[1] == 32
  assert (uv(st, 1) == 100 + np.cumsum(LANES + 1) - (LANES + 1)).all()


def test_global_cmpswap():
  mem = VirtualMemory()
  buf = _buffer(mem, 0x10000, np.array([5, 0], u32))
  st = run_snippet("global_atomic_cmpswap_b32 v3, v0, v[1:2], s[0:1] glc", v={0: 0, 1: LANES + 100, 2: np.r_[5, 101, np.arange(30)]},
                   s={0: 0x10000, 1: 0}, mem=mem, exec_mask=0x3)
  assert buf.view(u32)[0] == 100 and list(uv(st, 3)[:2]) == [5, 100]


def test_lds_store_load_and_2addr():
  st = run_snippet("v_lshlrev_b32_e32 v1, 2, v0\nds_store_b32 v1, v0\nds_load_2addr_b32 v[2:3], v1 offset1:1\nds_load_b32 v4, v1 offset:8",
                   v={0: LANES}, lds_bytes=256)
  assert (uv(st, 2) == LANES).all() and (uv(st, 3)[:31] == LANES[1:] ).all() and (uv(st, 4)[:30] == LANES[2:]).all()


def test_lds_atomic_and_bounds():
  st = run_snippet("ds_add_rtn_u32 v1, v2, v0", v={0: 1, 2: 0}, lds_bytes=64)
  assert (uv(st, 1) == LANES).all()
  with pytest.raises(LDSFault) as e:
    run_snippet("ds_store_b32 v1, v0", v={1: 64}, lds_bytes=64)
  assert "pc=" in e.value.state and e.value.wave == 0 and e.value.instruction.startswith("ds_store_b32")  # the wave's state, as a page fault has


def test_scratch_is_private_per_lane():
  st = run_snippet("scratch_store_b32 off, v0, off offset:4\nscratch_load_b32 v1, off, off offset:4", v={0: LANES * 3}, private_bytes=16)
  assert (uv(st, 1) == LANES * 3).all()


def test_smem_loads_and_soffset():
  mem = VirtualMemory()
  _buffer(mem, 0x10000, np.arange(32, dtype=u32))
  st = run_snippet("s_load_b64 s[2:3], s[0:1], 0x8\ns_load_b128 s[4:7], s[0:1], s8 offset:0x10\ns_waitcnt lgkmcnt(0)", s={0: 0x10000, 1: 0, 8: 16}, mem=mem)
  assert list(st.s[2:8, 0]) == [2, 3, 8, 9, 10, 11]


# ---- faults -----------------------------------------------------------------------------------------------------
def test_trap_is_an_exception_with_state():
  with pytest.raises(TrapError) as e:
    run_snippet("s_mov_b32 s3, 0x1234\ns_trap 2")
  assert "s3" not in e.value.state or "00001234" in e.value.state
  assert e.value.pc is not None


def test_illegal_instruction():
  with pytest.raises(IllegalInstruction):
    run_snippet(bytes.fromhex("ffffffff"))


def test_instruction_limit_stops_runaway_loop():
  with pytest.raises(InstructionLimit) as e:
    run_snippet("loop:\ns_branch loop", max_instructions=1000)
  assert "pc=" in e.value.state


# ---- DPP and buffers --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ctrl,src", [("row_shr:1", lambda l: np.where(l % 16 >= 1, l - 1, -1)), ("row_shl:2", lambda l: np.where(l % 16 <= 13, l + 2, -1)),
                                      ("row_ror:3", lambda l: (l & ~15) | ((l - 3) & 15)), ("row_mirror", lambda l: (l & ~15) | (15 - l % 16)),
                                      ("quad_perm:[1,0,3,2]", lambda l: l ^ 1), ("row_xmask:5", lambda l: l ^ 5), ("row_share:2", lambda l: (l & ~15) | 2)])
def test_dpp16_mov(ctrl, src):
  st = run_snippet(f"v_mov_b32_dpp v1, v0 {ctrl} row_mask:0xf bank_mask:0xf", v={0: LANES + 100, 1: np.full(32, 7)})
  s = src(LANES)
  assert (uv(st, 1) == np.where(s >= 0, s + 100, 7)).all()   # an out-of-row source leaves the lane unwritten


def test_dpp16_bound_ctrl_and_masks():
  st = run_snippet("v_add_f32_dpp v1, v0, v0 row_shr:1 row_mask:0x1 bank_mask:0xf bound_ctrl:1", v={0: LANES.astype(f32), 1: np.full(32, -1, f32)})
  exp = np.where(LANES < 16, np.where(LANES % 16 >= 1, LANES - 1, 0) + LANES, -1)
  assert (fv(st, 1) == exp).all()


def test_dpp8():
  st = run_snippet("v_mov_b32_dpp v1, v0 dpp8:[7,6,5,4,3,2,1,0]", v={0: LANES})
  assert (uv(st, 1) == (LANES & ~7) | (7 - LANES % 8)).all()


def test_buffer_load_store_and_bounds():
  mem = VirtualMemory()
  buf = _buffer(mem, 0x10000, np.arange(16, dtype=u32))
  # V#: base 0x10000, stride 0, num_records 32 bytes, OOB_SELECT 2 (raw offset check)
  st = run_snippet("buffer_load_b32 v1, v0, s[4:7], 0 offen\nbuffer_store_b32 v2, v0, s[4:7], 0 offen offset:4",
                   v={0: LANES * 4, 2: LANES + 1000}, s={4: 0x10000, 5: 0, 6: 32, 7: 2 << 28}, mem=mem)
  assert (uv(st, 1) == np.where(LANES < 8, LANES, 0)).all()
  assert (buf.view(u32)[1:8] == np.arange(1000, 1007)).all() and buf.view(u32)[8] == 8


def test_denormal_modes():
  tiny = np.full(32, 1e-39, f32)   # an f32 denormal
  keep = run_snippet("v_mul_f32_e32 v1, 1.0, v0\nv_add_f32_e32 v2, v0, v0", v={0: tiny})
  assert fv(keep, 1)[0] == tiny[0] and fv(keep, 2)[0] == tiny[0] * 2
  flush = run_snippet("s_denorm_mode 0\nv_mul_f32_e32 v1, 1.0, v0\nv_add_f32_e32 v2, v0, v0\nv_cmp_class_f32_e64 s4, v0, 0x80", v={0: tiny})
  assert fv(flush, 1)[0] == 0 and fv(flush, 2)[0] == 0 and flush.s[4, 0] == 0xffffffff   # class still sees the denormal
  out_only = run_snippet("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 1\nv_mul_f32_e32 v1, 0x7f000000, v0\nv_mul_f32_e32 v2, 0.5, v0",
                         v={0: tiny})
  assert fv(out_only, 1)[0] > 0 and fv(out_only, 2)[0] == 0   # inputs kept, denormal results flushed


def test_buffer_atomic_returns_old_and_skips_out_of_range():
  mem = VirtualMemory()
  buf = _buffer(mem, 0x10000, np.array([10, 20, 0, 0], u32))
  st = run_snippet("buffer_atomic_add_u32 v1, v0, s[4:7], 0 offen glc", v={0: np.where(LANES < 2, LANES * 4, 64), 1: np.full(32, 1)},
                   s={4: 0x10000, 5: 0, 6: 16, 7: 2 << 28}, mem=mem)
  assert list(buf.view(u32)[:2]) == [11, 21] and list(uv(st, 1)[:2]) == [10, 20]


def test_movrel_indexes_vgprs_by_m0():
  st = run_snippet("s_mov_b32 m0, 2\nv_movrels_b32_e32 v10, v0\nv_movreld_b32_e32 v4, v10", v={2: LANES + 5}, vgprs=16)
  assert (uv(st, 10) == LANES + 5).all() and (uv(st, 6) == LANES + 5).all()


def test_dot2acc_and_pk_fmac():
  h = lambda a, b: np.uint32(np.float16(a).view(np.uint16)) | (np.uint32(np.float16(b).view(np.uint16)) << 16)
  st = run_snippet("v_dot2acc_f32_f16 v2, v0, v1\nv_pk_fmac_f16 v3, v0, v1",
                   v={0: np.full(32, h(2, 3), u32), 1: np.full(32, h(4, 5), u32), 2: np.full(32, 1, f32), 3: np.full(32, h(1, -1), u32)})
  assert fv(st, 2)[0] == 2 * 4 + 3 * 5 + 1 and uv(st, 3)[0] == h(9, 14)


def test_swizzle_and_wqm():
  from hcq.asm.instruction import Instruction
  from hcq.asm.isa import load
  isa = load("gfx1100")
  opc = isa.by_mnemonic["ds_swizzle_b32"]
  swap = 0x1f | (1 << 10)   # bit-mask mode: and 0x1f, or 0, xor 1 -> neighbouring lanes swap
  sw = Instruction(isa, opc, {f: 0 for f in opc.fmt.fields if f != "op"} | {"offset0": swap & 0xff, "offset1": swap >> 8, "addr": 0, "vdst": 1}).encode()
  st = run_snippet(sw, v={0: LANES})
  assert (uv(st, 1) == LANES ^ 1).all()
  st = run_snippet("s_wqm_b32 s2, s3", s={3: 0x10})
  assert st.s[2, 0] == 0xf0


def test_cls_clz_ctz():
  st = run_snippet("v_cls_i32_e32 v1, v0\nv_clz_i32_u32_e32 v2, v0\nv_ctz_i32_b32_e32 v3, v0\ns_cls_i32 s2, s4", v={0: np.array([0, -1, 1, -2, 0x40000000] + [8] * 27, np.int64)},
                   s={4: 0xfffffff0})
  assert list(iv(st, 1)[:5]) == [-1, -1, 31, 31, 1] and list(iv(st, 2)[:5]) == [-1, 0, 31, 0, 1] and list(iv(st, 3)[:5]) == [-1, 0, 0, 1, 30]
  assert st.s[2, 0] == 28   # 0xfffffff0: bit 3 is the first that differs from the sign (ISA: index 28 from the MSB)


def test_sendmsg_rtn_realtime_advances():
  st = run_snippet("s_sendmsg_rtn_b64 s[2:3], sendmsg(MSG_RTN_GET_REALTIME)\ns_nop 0\ns_sendmsg_rtn_b64 s[4:5], sendmsg(MSG_RTN_GET_REALTIME)")
  t0, t1 = int(st.s[2, 0]) | int(st.s[3, 0]) << 32, int(st.s[4, 0]) | int(st.s[5, 0]) << 32
  assert 0 < t0 <= t1


@pytest.mark.parametrize("text,x,expected", [
  ("v_cvt_pk_norm_i16_f32 v1, v0, v2", [0.5, -1.5, 0.0, 1.0], [16384 | 0x7fff << 16, 0x8001 | 0x7fff << 16, 0 | 0x7fff << 16, 0x7fff | 0x7fff << 16]),
  ("v_cvt_pk_norm_u16_f32 v1, v0, v2", [0.5, -1.5, 0.25, 2.0], [32768 | 0xffff << 16, 0 | 0xffff << 16, 16384 | 0xffff << 16, 0xffff | 0xffff << 16]),
  ("v_cvt_pk_u16_u32 v1, v0, v0", [5, 0x10000, 3, 0], [5 | 5 << 16, 0xffff | 0xffff << 16, 3 | 3 << 16, 0]),
  ("v_cvt_pk_u8_f32 v1, v0, 1, 0", [3.0, 255.6, -2.0, 1.5], [3 << 8, 255 << 8, 0, 2 << 8]),
  ("v_sad_u8 v1, v0, 0x01010101, 10", [0x01020304, 0, 0xffffffff, 0x01010101], [10 + 0 + 1 + 2 + 3, 14, 10 + 4 * 254, 10]),
  ("v_cvt_off_f32_i4_e32 v1, v0", [0, 7, 8, 15], [0, bits(7 / 16), bits(-0.5), bits(-1 / 16)]),
])
def test_more_conversions(text, x, expected):
  xs = np.array(x * 8)
  st = run_snippet(text, v={0: xs.astype(f32) if xs.dtype.kind == "f" else xs.astype(np.int64), 2: np.full(32, 1.0, f32)})
  assert [int(y) for y in uv(st, 1)[:4]] == [int(e) & 0xffffffff for e in expected]


def test_invalid_operations_give_the_isa_quiet_nan():
  st = run_snippet("v_sub_f32_e32 v2, v0, v0\nv_mul_f32_e32 v3, 0, v0\nv_add_f32_e32 v4, v1, v1", v={0: np.full(32, np.inf, f32), 1: np.full(32, 0x7fc00123)})
  assert uv(st, 2)[0] == 0x7fc00000 and uv(st, 3)[0] == 0x7fc00000 and uv(st, 4)[0] == 0x7fc00123   # an input NaN propagates


def test_lds_d16_loads_and_stores():
  st = run_snippet("v_mov_b32 v3, 0\nds_store_b32 v3, v0\nds_load_u16_d16_hi v1, v3 offset:2\nds_load_i8_d16 v2, v3 offset:1\nds_store_b16_d16_hi v3, v0 offset:4\n"
                   "ds_load_b32 v4, v3 offset:4", v={0: np.full(32, 0x8281abcd), 1: np.full(32, 0x1111), 2: np.full(32, 0x22220000)}, lds_bytes=64)
  assert uv(st, 1)[0] == 0x82811111 and uv(st, 2)[0] == 0x2222ffab and uv(st, 4)[0] & 0xffff == 0x8281


def test_ds_mskor_and_cmpstore():
  st = run_snippet("v_mov_b32 v3, 0\nds_store_b32 v3, v0\nds_mskor_rtn_b32 v4, v3, v1, v2\nds_load_b32 v5, v3\nds_cmpstore_rtn_b32 v6, v3, v7, v5",
                   v={0: np.full(32, 0xff00ff00), 1: np.full(32, 0x0000ff00), 2: np.full(32, 0x1), 7: np.full(32, 0x42)}, lds_bytes=16, exec_mask=1)
  assert uv(st, 4)[0] == 0xff00ff00 and uv(st, 5)[0] == 0xff000001 and uv(st, 6)[0] == 0xff000001


def test_unsupported_operand_is_an_illegal_instruction():
  # v_add_f32 with src0 = 254 (LDS direct): decodes, but the emulator cannot run it; the fault names it
  from hcq.asm.instruction import Instruction
  from hcq.asm.isa import load
  isa = load("gfx1100")
  opc = isa.by_mnemonic["v_add_f32_e32"]
  try:
    code = Instruction(isa, opc, {"vdst": 1, "vsrc1": 0, "src0": 254}).encode()
  except Exception:
    pytest.skip("the table rejects the operand")
  with pytest.raises(IllegalInstruction) as e:
    run_snippet(code)
  assert "v_add_f32" in str(e.value)


# ---- the remaining gfx1100 compute opcodes (ISA pseudo-code) --------------------------------------------------------
def _cube_ref(x, y, z):
  if abs(z) >= abs(x) and abs(z) >= abs(y): return (5 if z < 0 else 4), (-x if z < 0 else x), -y, 2 * z
  if abs(y) >= abs(x): return (3 if y < 0 else 2), x, (-z if y < 0 else z), 2 * y
  return (1 if x < 0 else 0), (z if x < 0 else -z), -y, 2 * x


def test_cube_map_ops():
  x, y, z = (rng.uniform(-2, 2, 32).astype(f32) for _ in range(3))
  x[:3], y[:3], z[:3] = [1, 0, -1], [1, 2, 0], [1, 2, -1]   # ties: z before y before x
  st = run_snippet("v_cubeid_f32 v3, v0, v1, v2\nv_cubesc_f32 v4, v0, v1, v2\nv_cubetc_f32 v5, v0, v1, v2\nv_cubema_f32 v6, v0, v1, v2",
                   v={0: x, 1: y, 2: z})
  want = np.array([_cube_ref(*map(float, t)) for t in zip(x, y, z)], f32)
  assert (np.stack([fv(st, r) for r in (3, 4, 5, 6)], 1) == want).all()


def test_mullit():
  big = np.finfo(f32).max
  a, b, c = f32(3), np.array([2, -big, 2, 2, np.nan, -np.inf] + [2] * 26, f32), np.array([1, 1, 0, -1, 1, 1] + [1] * 26, f32)
  st = run_snippet("v_mullit_f32 v3, v0, v1, v2", v={0: np.full(32, a), 1: b, 2: c})
  assert fv(st, 3)[:6].tolist() == [6, -big, -big, -big, -big, -big]


def _sad(a, b, masked=False): return sum(0 if masked and (b >> 8 * k) & 255 == 0 else abs(((a >> 8 * k) & 255) - ((b >> 8 * k) & 255)) for k in range(4))


def test_quad_sads():
  s0 = rng.integers(0, 2**64, 32, dtype=np.uint64)
  s1 = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(u32)
  s1[0] = 0x00ff0000   # zero bytes: masked out by mqsad
  acc = rng.integers(0, 2**32, (4, 32), dtype=np.uint64).astype(u32)
  v = {0: (s0 & 0xffffffff).astype(u32), 1: (s0 >> np.uint64(32)).astype(u32), 2: s1, 6: acc[0], 7: acc[1], 8: acc[0], 9: acc[1], 10: acc[2], 11: acc[3]}
  st = run_snippet("v_qsad_pk_u16_u8 v[12:13], v[0:1], v2, v[6:7]\nv_mqsad_pk_u16_u8 v[14:15], v[0:1], v2, v[6:7]\n"
                   "v_mqsad_u32_u8 v[16:19], v[0:1], v2, v[8:11]", v=v)
  for l in range(32):
    q, b = int(s0[l]), int(s1[l])
    accs16 = [(int(acc[i // 2, l]) >> (16 * (i % 2))) & 0xffff for i in range(4)]
    for masked, r in ((False, 12), (True, 14)):
      res = [(_sad((q >> 8 * i) & 0xffffffff, b, masked) + accs16[i]) & 0xffff for i in range(4)]
      assert int(uv(st, r)[l]) == res[0] | res[1] << 16 and int(uv(st, r + 1)[l]) == res[2] | res[3] << 16
    assert [int(uv(st, 16 + i)[l]) for i in range(4)] == [(_sad((q >> 8 * i) & 0xffffffff, b, True) + int(acc[i, l])) & 0xffffffff for i in range(4)]


def test_movrelsd_2_and_swaprel():
  st = run_snippet("v_movrelsd_2_b32 v1, v2\nv_swaprel_b32 v10, v12\ns_movrelsd_2_b32 s1, s2", s={125: (3 << 16) | 2, **{r: 50 + r for r in range(8)}},
                   v={r: np.full(32, r) for r in range(16)})
  assert uv(st, 4)[0] == 4 and uv(st, 13)[0] == 14 and uv(st, 14)[0] == 13   # v[1+3] = v[2+2]; swap v[10+3], v[12+2]
  assert st.s[4, 0] == 54


def test_ds_wrap_condxchg_storexchg2_addtid():
  st = run_snippet("v_mov_b32 v3, 0\nds_store_b32 v3, v0\nds_wrap_rtn_b32 v4, v3, v1, v2\nds_load_b32 v5, v3\n"
                   "ds_wrap_rtn_b32 v6, v3, v1, v2\nds_load_b32 v7, v3",
                   v={0: np.full(32, 10), 1: np.full(32, 7), 2: np.full(32, 100)}, lds_bytes=16, exec_mask=1)
  assert (uv(st, 4)[0], uv(st, 5)[0], uv(st, 6)[0], uv(st, 7)[0]) == (10, 3, 3, 103)   # 10 >= 7: -7; 3 < 7: +100
  st = run_snippet("v_mov_b32 v3, 0\nds_store_2addr_b32 v3, v0, v1 offset1:1\nds_condxchg32_rtn_b64 v[4:5], v3, v[6:7]\n"
                   "ds_load_2addr_b32 v[8:9], v3 offset1:1\nds_storexchg_2addr_rtn_b32 v[10:11], v3, v12, v13 offset1:1\n"
                   "ds_load_2addr_b32 v[14:15], v3 offset1:1",
                   v={0: np.full(32, 5), 1: np.full(32, 6), 6: np.full(32, 0x80000009), 7: np.full(32, 0x0000000a), 12: np.full(32, 1), 13: np.full(32, 2)},
                   lds_bytes=16, exec_mask=1)
  assert [int(uv(st, r)[0]) for r in (4, 5, 8, 9, 10, 11, 14, 15)] == [5, 6, 9, 6, 9, 6, 1, 2]   # bit 31 set: stored (without it)
  st = run_snippet("ds_store_addtid_b32 v0 offset:4\nds_load_addtid_b32 v1 offset:8", s={125: 4}, v={0: LANES * 3}, lds_bytes=256)
  assert (uv(st, 1)[:31] == LANES[1:] * 3).all()   # lane l stored at 8 + 4l, loaded from 12 + 4l


def test_global_addtid():
  mem = VirtualMemory()
  buf = np.zeros(64 * 4 + 8, np.uint8)
  mem.map(0x20000, buf.size, buf)
  st = run_snippet("global_store_addtid_b32 v0, s[0:1] offset:8\nglobal_load_addtid_b32 v1, s[0:1] offset:4", s={0: 0x20000, 1: 0},
                   v={0: LANES + 100}, mem=mem)
  assert (buf[8:8 + 128].view(u32) == LANES + 100).all() and (uv(st, 1)[1:] == LANES[:-1] + 100).all() and uv(st, 1)[0] == 0


@pytest.mark.parametrize("text", ["exp mrt0 v0, v0, v0, v0", "v_interp_p10_f32 v0, v1, v2, v3", "lds_param_load v1, attr0.x",
                                  "image_load v[0:3], v[4:5], s[8:15] dmask:0xf dim:SQ_RSRC_IMG_2D"])
def test_graphics_only_formats_fault_clearly(text):
  from hcq.asm.llvm import assemble_each
  from tests.tools import require_tool
  require_tool("llvm-mc-19")
  code, = assemble_each([text], "gfx1100")   # llvm-mc-19's encoding
  with pytest.raises(IllegalInstruction, match="graphics-only .*not emulated"):
    run_snippet(code)


def test_coverage_of_gfx1100():
  """Every gfx1100 opcode runs except the graphics-only formats (image, export, interpolation, LDS-direct), GDS/GWS ops, LDS DMA
  buffer loads, trap return, subvector loops and ds_bvh_stack_rtn_b32 (coverage() lists them)."""
  from hcq.asm.emu.engine import GRAPHICS_ONLY, coverage
  cov = coverage("gfx1100")
  missing = sorted(m for f, (_, _, ms) in cov.items() if f not in GRAPHICS_ONLY for m in ms)
  allowed = {"s_rfe_b64", "s_subvector_loop_begin", "s_subvector_loop_end", "ds_bvh_stack_rtn_b32",
             # global wave sync, ordered count and the GS registers: the GDS/GWS unit is not emulated
             "ds_gws_init", "ds_gws_barrier", "ds_gws_sema_v", "ds_gws_sema_br", "ds_gws_sema_p", "ds_gws_sema_release_all",
             "ds_ordered_count", "ds_add_gs_reg_rtn", "ds_sub_gs_reg_rtn"}
  # M0-relative reads cannot take DPP's permuted source
  assert all(m in allowed or m.startswith(("buffer_load_lds_", "v_movrels")) for m in missing), missing
  assert all(cov[f][0] == 0 for f in GRAPHICS_ONLY if f in cov)


def test_vop3_dpp():
  """gfx11's VOP3 encodings with DPP: src0 from another lane, then the VOP3 op with its modifiers and extra sources."""
  a, b, c = (rng.uniform(-4, 4, 32).astype(f32) for _ in range(3))
  shr = np.where(LANES % 16 >= 1, LANES - 1, LANES)   # row_shr:1 with bound_ctrl off: lane 0 of a row keeps its old value
  from hcq.asm.llvm import assemble_each
  from tests.tools import require_tool
  require_tool("llvm-mc-19")
  lines = ["v_mov_b32 v3, 0", "v_mov_b32 v4, 0", "v_fma_f32_e64_dpp v3, -v0, v1, v2 row_shr:1", "v_add_f32_e64_dpp v4, |v0|, v1 row_shr:1 bound_ctrl:1",
           "v_cmp_gt_f32_e64_dpp s10, v0, v1 quad_perm:[1,0,3,2]", "v_fma_mix_f32_e64_dpp v5, v0, v1, v2 row_shr:1 bound_ctrl:1"]
  code = assemble_each(lines, "gfx1100")   # llvm-mc-19's encodings (its defaults: row_mask/bank_mask 0xf, op_sel_hi 0)
  assert all(isinstance(c, bytes) for c in code), code
  st = run_snippet(b"".join(code), v={0: a, 1: b, 2: c})
  a_shr = a[shr]
  moved = LANES % 16 >= 1
  want3 = np.where(moved, (-(a_shr.astype(np.float64)) * b + c).astype(f32), 0)
  assert (fv(st, 3) == want3).all()
  assert (fv(st, 4) == np.where(moved, np.abs(a_shr), 0) + b).all()   # bound_ctrl: an out-of-row source reads 0
  quad = LANES ^ 1
  assert int(st.s[10, 0]) == int(sum(1 << l for l in range(32) if a[quad[l]] > b[l]))
  assert (fv(st, 5) == (np.where(moved, a_shr, 0).astype(np.float64) * b + c).astype(f32)).all()


def _wmma_regs(M, per_reg, bits, rows_of_lane):
  """gfx11 wave32 A (or B transposed) registers: lane l holds row l % 16, element k in register k // per_reg."""
  regs = np.zeros((16 // per_reg, 32), np.uint64)
  for l in range(32):
    for k in range(16): regs[k // per_reg, l] |= np.uint64(int(M[rows_of_lane(l), k]) & ((1 << bits) - 1)) << np.uint64(bits * (k % per_reg))
  return regs.astype(u32)


def test_wmma_modifiers_f16_result_and_iu4():
  """WMMA's NEG (float: negate A/B register halves, subtract C; neg_hi[2]: |C|), a 16-bit result in the op_sel[2] half,
  and signed 4-bit integers; llvm-mc-19 encodes the instructions."""
  from hcq.asm.llvm import assemble_each
  from tests.tools import require_tool
  require_tool("llvm-mc-19")
  f16 = np.float16
  A, B = rng.uniform(-2, 2, (16, 16)).astype(f16), rng.uniform(-2, 2, (16, 16)).astype(f16)
  C = rng.uniform(-4, 4, (16, 16)).astype(f32)
  bits16 = lambda M: M.view(np.uint16)
  a_regs, b_regs = _wmma_regs(bits16(A), 2, 16, lambda l: l % 16), _wmma_regs(bits16(B.T.copy()), 2, 16, lambda l: l % 16)
  c_rows = lambda i: 2 * i + LANES // 16
  v = {r: a_regs[r] for r in range(8)} | {8 + r: b_regs[r] for r in range(8)}
  v |= {16 + i: C[c_rows(i), LANES % 16] for i in range(8)} | {24 + i: C[c_rows(i), LANES % 16] for i in range(8)}
  v |= {32 + i: (np.full(32, 0x1234, u32) | (C[c_rows(i), LANES % 16].astype(f16).view(np.uint16).astype(u32) << u32(16))) for i in range(8)}
  Ai, Bi = rng.integers(-8, 8, (16, 16)), rng.integers(-8, 8, (16, 16))
  ai, bi = _wmma_regs(Ai, 8, 4, lambda l: l % 16), _wmma_regs(Bi.T.copy(), 8, 4, lambda l: l % 16)
  v |= {40: ai[0], 41: ai[1], 42: bi[0], 43: bi[1]} | {44 + i: np.zeros(32, u32) for i in range(8)}
  code = assemble_each(["v_wmma_f32_16x16x16_f16 v[16:23], v[0:7], v[8:15], v[16:23] neg_lo:[1,0,1] neg_hi:[1,0,0]",
                        "v_wmma_f32_16x16x16_f16 v[24:31], v[0:7], v[8:15], v[24:31] neg_hi:[0,0,1]",
                        "v_wmma_f16_16x16x16_f16 v[32:39], v[0:7], v[8:15], v[32:39] op_sel:[0,0,1]",
                        "v_wmma_i32_16x16x16_iu4 v[44:51], v[40:41], v[42:43], v[44:51] neg_lo:[1,1,0]"], "gfx1100")
  assert all(isinstance(c, bytes) for c in code), code
  st = run_snippet(b"".join(code), v=v, vgprs=64)
  AB = A.astype(np.float64) @ B.astype(np.float64)
  for i in range(8):
    r, col = c_rows(i), LANES % 16
    assert (fv(st, 16 + i) == (-AB[r, col] - C[r, col]).astype(f32)).all()
    assert (fv(st, 24 + i) == (AB[r, col] + np.abs(C[r, col])).astype(f32)).all()
    hi = (uv(st, 32 + i) >> u32(16)).astype(np.uint16).view(f16)
    assert (uv(st, 32 + i) & u32(0xffff) == 0x1234).all() and (hi == (AB[r, col] + C[r, col].astype(f16)).astype(f16)).all()
    assert (iv(st, 44 + i) == (Ai @ Bi)[r, col]).all()


SUDOT_SRC = """__kernel void sudots(__global int* o, __global const int* a, __global const int* b, __global const int* c) {
  uint i = __builtin_amdgcn_workitem_id_x(); int x = a[i], y = b[i], z = c[i]; __global int* d = o + 10 * i;
  d[0] = __builtin_amdgcn_sudot4(true, x, true, y, z, false); d[1] = __builtin_amdgcn_sudot4(true, x, false, y, z, false);
  d[2] = __builtin_amdgcn_sudot4(false, x, true, y, z, false); d[3] = __builtin_amdgcn_sudot4(false, x, false, y, z, false);
  d[4] = __builtin_amdgcn_sudot8(true, x, true, y, z, false); d[5] = __builtin_amdgcn_sudot8(true, x, false, y, z, false);
  d[6] = __builtin_amdgcn_sudot8(false, x, true, y, z, false); d[7] = __builtin_amdgcn_sudot8(false, x, false, y, z, false);
  d[8] = __builtin_amdgcn_udot4(x, y, z, false); d[9] = __builtin_amdgcn_udot8(x, y, z, false); }"""


def test_gfx11_integer_dots(tmp_path):
  """clang-19's sudot4/sudot8 (v_dot4_i32_iu8, v_dot8_i32_iu4: each source's signedness from its neg bit) and
  udot4/udot8 for gfx1100, against numpy's sums of products wrapped to 32 bits."""
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  from tests.test_emu_corpus import compile_cl
  (tmp_path / "d.cl").write_text(SUDOT_SRC)
  co = read_code_object(compile_cl(str(tmp_path / "d.cl"), str(tmp_path), ["-mcpu=gfx1100"]))
  r = np.random.default_rng(11)
  n = 64
  a, b = (r.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(2))
  c = r.integers(-2**31, 2**31, n).astype(np.int32)
  o = np.zeros(10 * n, np.int32)
  run(co, [o, a.view(np.int32), b.view(np.int32), c], (1,), (n,), kernel="sudots")
  def dot(bits, sa, sb):
    s = c.astype(np.int64)
    for k in range(32 // bits):
      x, y = (((t >> np.uint32(bits * k)) & np.uint32((1 << bits) - 1)).astype(np.int64) for t in (a, b))
      half = 1 << (bits - 1)
      if sa: x = (x ^ half) - half
      if sb: y = (y ^ half) - half
      s += x * y
    return (s & 0xffffffff).astype(np.uint32).view(np.int32)
  want = [dot(bits, sa, sb) for bits in (8, 4) for sa, sb in ((1, 1), (1, 0), (0, 1), (0, 0))] + [dot(8, 0, 0), dot(4, 0, 0)]
  np.testing.assert_array_equal(o.reshape(n, 10), np.stack(want, axis=1))
