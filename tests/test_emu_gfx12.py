"""RDNA4 (gfx1201): the instructions gfx12 adds or renames (SALU floats, 64-bit SALU, split wait counters, split
barriers, sub-dword scalar loads with 24-bit offsets, IEEE 754-2019 minimum/maximum, per-lane permlane selects, VALU
transcendentals into SGPRs, renamed atomics, 8-bit floats), and the OpenCL differential corpus compiled for gfx1201
(wave32, wave64, LLVM 22)."""
from __future__ import annotations

import numpy as np
import pytest

from hcq.asm.emu import VirtualMemory
from hcq.asm.emu.snippet import run_snippet

f16, f32, u32, i32 = np.float16, np.float32, np.uint32, np.int32
ARCH = "gfx1201"
rng = np.random.default_rng(12)


def snip(code, **kw): return run_snippet(code, arch=ARCH, **kw)
def fbits(x): return int(np.float32(x).view(u32))


def test_salu_float_ops_match_the_valu():
  """s_add/sub/mul/fmac/fmaak/fmamk/min_num/max_num/minimum/maximum/cvt on SGPRs, against numpy per wave."""
  a, b = rng.uniform(-8, 8, 4).astype(f32), rng.uniform(-8, 8, 4).astype(f32)
  a[0], b[1] = np.nan, -0.0
  st = snip("s_add_f32 s10, s0, s1\ns_sub_f32 s11, s0, s1\ns_mul_f32 s12, s0, s1\ns_max_num_f32 s13, s0, s1\ns_minimum_f32 s14, s0, s1\n"
            "s_mov_b32 s15, s1\ns_fmac_f32 s15, s0, s1\ns_fmaak_f32 s16, s0, s1, 0x40000000\ns_fmamk_f32 s17, s0, 0x40000000, s1\n"
            "s_cvt_i32_f32 s18, s0\ns_cvt_f16_f32 s19, s0\ns_cvt_hi_f32_f16 s20, s21\ns_ceil_f32 s22, s0",
            s={0: a.view(u32), 1: b.view(u32), 21: [0x3c000000, 0xc0000000, 0, 0x7c000000]}, waves=4)
  F = lambda r: st.s[r].view(f32)
  same = lambda x, y: np.array_equal(np.asarray(x, f32), np.asarray(y, f32), equal_nan=True)
  fma = (a.astype(np.float64) * b + b).astype(f32)
  assert same(F(10), a + b) and same(F(11), a - b) and same(F(12), a * b) and same(F(15), fma)
  assert same(F(13), np.fmax(a, b)) and same(F(14), np.where(np.isnan(a), np.nan, np.minimum(a, b)))
  assert same(F(16), (a.astype(np.float64) * b + 2).astype(f32)) and same(F(17), (a.astype(np.float64) * 2 + b).astype(f32))
  assert st.s[18].view(i32).tolist() == [0] + np.trunc(a[1:]).astype(i32).tolist()   # NaN -> 0
  assert (st.s[19] >> 16 == 0).all() and same(st.s[19].astype(np.uint16).view(f16).astype(f32), a.astype(f16).astype(f32))
  assert F(20).tolist()[:2] == [1.0, -2.0] and same(F(22), np.ceil(a))


def test_salu_float_compares_and_64bit():
  st = snip("s_cmp_lt_f32 s0, s1\ns_cselect_b32 s2, 1, 0\ns_cmp_u_f32 s0, s3\ns_cselect_b32 s4, 1, 0\n"
            "s_add_nc_u64 s[6:7], s[8:9], s[10:11]\ns_mul_u64 s[12:13], s[8:9], s[10:11]\ns_add_co_u32 s14, s8, s10\ns_add_co_ci_u32 s15, s9, s11",
            s={0: fbits(-1.0), 1: fbits(0.5), 3: fbits(np.nan), 8: 0xffffffff, 9: 5, 10: 3, 11: 7})
  x, y = (5 << 32) | 0xffffffff, (7 << 32) | 3
  s64 = lambda r: int(st.s[r, 0]) | int(st.s[r + 1, 0]) << 32
  assert st.s[2, 0] == 1 and st.s[4, 0] == 1
  assert s64(6) == (x + y) % 2**64 and s64(12) == (x * y) % 2**64 and st.s[14, 0] == 2 and st.s[15, 0] == 13


def test_smem_subdword_and_24bit_offsets():
  mem = VirtualMemory()
  buf = (np.arange(256) ^ 0x5a).astype(np.uint8)
  mem.map(0x40000, 256, buf)
  st = snip("s_load_u8 s4, s[0:1], 0x7\ns_load_i8 s5, s[0:1], 0x8\ns_load_u16 s6, s[0:1], 0xa\ns_load_i16 s7, s[0:1], 0xc\n"
            "s_load_b32 s8, s[2:3], -0x100\ns_wait_kmcnt 0", s={0: 0x40000, 1: 0, 2: 0x40100, 3: 0}, mem=mem)
  assert st.s[4:9, 0].tolist() == [buf[7], int(buf[8].view(np.int8)) & 0xffffffff, int(buf[10:12].view(np.uint16)[0]),
                                   int(buf[12:14].view(np.int16)[0]) & 0xffffffff, int(buf[0:4].view(u32)[0])]


def test_minimum_maximum_and_num():
  """v_minimum/v_maximum propagate NaN and order -0 < +0; v_min_num/v_max_num drop a NaN (IEEE 754-2019)."""
  a = np.array([np.nan, 1, -0.0, 0.0, 3, -np.inf] + [1] * 26, f32)
  b = np.array([1, np.nan, 0.0, -0.0, 2, 5] + [2] * 26, f32)
  st = snip("v_minimum_f32 v2, v0, v1\nv_maximum_f32 v3, v0, v1\nv_min_num_f32 v4, v0, v1\nv_max_num_f32 v5, v0, v1\n"
            "v_minimum3_f32 v6, v0, v1, 4.0\nv_maximumminimum_f32 v7, v0, v1, 2.5", v={0: a, 1: b})
  g = lambda r: st.v[r, 0, :6].view(f32)
  s = lambda x: [("nan" if np.isnan(v) else float(v), np.signbit(v)) for v in x]
  assert s(g(2)) == s(np.array([np.nan, np.nan, -0.0, -0.0, 2, -np.inf], f32))
  assert s(g(3)) == s(np.array([np.nan, np.nan, 0.0, 0.0, 3, 5], f32))
  assert s(g(4)) == s(np.array([1, 1, -0.0, -0.0, 2, -np.inf], f32)) and s(g(5)) == s(np.array([1, 1, 0.0, 0.0, 3, 5], f32))
  assert s(g(6)) == s(np.array([np.nan, np.nan, -0.0, -0.0, 2, -np.inf], f32))
  assert s(g(7)) == s(np.array([np.nan, np.nan, 0.0, 0.0, 2.5, 2.5], f32))


def test_permlane16_var_and_scalar_transcendentals():
  sel = rng.integers(0, 16, 32).astype(u32)
  st = snip("v_permlane16_var_b32 v2, v0, v1\nv_permlanex16_var_b32 v3, v0, v1\nv_s_sqrt_f32 s2, s0\nv_s_rcp_f32 s3, 4.0\nv_s_exp_f16 s4, s1",
            v={0: np.arange(32) * 10, 1: sel}, s={0: fbits(2.0), 1: 0x4000})
  lane = np.arange(32)
  assert (st.v[2, 0] == ((lane & ~15) + sel) * 10).all() and (st.v[3, 0] == (((lane & ~15) ^ 16) + sel) * 10).all()
  assert st.s[2, 0] == fbits(np.sqrt(f32(2))) and st.s[3, 0] == fbits(0.25) and st.s[4, 0] == int(f16(4).view(np.uint16))


def test_split_barrier_and_wait_counters():
  """s_barrier_signal + s_barrier_wait synchronise a workgroup's waves: each wave reads what the other stored."""
  st = snip("v_lshl_add_u32 v1, v0, 2, s0\nds_store_b32 v1, v1\ns_wait_dscnt 0\ns_barrier_signal -1\ns_barrier_wait 0xffff\n"
            "v_xor_b32 v2, 0x80, v1\nds_load_b32 v3, v2\ns_wait_loadcnt_dscnt 0", v={0: np.arange(32)}, s={0: [0, 128]}, waves=2, lds_bytes=256)
  lane = np.arange(32) * 4
  assert (st.v[3, 0] == lane + 128).all() and (st.v[3, 1] == lane).all()


def test_sparse_wmma_is_not_guessed():
  from hcq.asm.emu import IllegalInstruction
  with pytest.raises(IllegalInstruction, match="v_swmmac_f32_16x16x32_f16"):
    snip("v_swmmac_f32_16x16x32_f16 v[0:7], v[8:11], v[12:19], v20")


# ---- the OpenCL corpus, compiled for gfx1201 ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus12(tmp_path_factory):
  from hcq.asm.codeobject import read_code_object
  from tests.test_emu_corpus import compile_cl, corpus_source
  return read_code_object(compile_cl(corpus_source(tmp_path_factory), str(tmp_path_factory.mktemp("emu12")), ["-mcpu=gfx1201"]))


def _cases():
  from tests.test_emu_corpus import CASES
  return CASES


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_corpus_gfx1201(corpus12, case):
  from tests.test_emu_corpus import test_corpus
  assert corpus12.arch == ARCH
  test_corpus(corpus12, case)


@pytest.fixture(scope="module")
def corpus12_w64(tmp_path_factory):
  from hcq.asm.codeobject import read_code_object
  from tests.test_emu_corpus import compile_cl, corpus_source
  return read_code_object(compile_cl(corpus_source(tmp_path_factory), str(tmp_path_factory.mktemp("emu12w64")), ["-mcpu=gfx1201", "-mwavefrontsize64"]))


def _wave64_names():
  from tests.test_emu_corpus import WAVE64
  return WAVE64


@pytest.mark.parametrize("name", _wave64_names())
def test_corpus_gfx1201_wave64(corpus12_w64, name):
  from tests.test_emu_corpus import test_corpus, wave64_case
  assert corpus12_w64.kernels[name].wavefront_size == 64
  test_corpus(corpus12_w64, wave64_case(name))


@pytest.fixture(scope="module")
def corpus12_llvmlite(tmp_path_factory):
  """clang-19's gfx1201 IR through llvmlite's newer LLVM (true16 gfx12 code, an ET_REL object)."""
  from tests.test_emu_corpus import llvmlite_corpus
  return llvmlite_corpus(tmp_path_factory, "gfx1201")


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_corpus_gfx1201_llvmlite(corpus12_llvmlite, case):
  from tests.test_emu_corpus import test_corpus
  test_corpus(corpus12_llvmlite, case)


def test_gfx12_atomics():
  """global_atomic_pk_add_f16 / max_num_f32 / sub_clamp_u32 (gfx12 spellings) return the old values with
  TH_ATOMIC_RETURN; ds_pk_add_f16 adds both halves."""
  mem = VirtualMemory()
  buf = np.zeros(16, np.uint8)
  buf[0:4] = np.array([1.5, -2.0], f16).view(np.uint8)
  buf[4:8] = np.array([3.0], f32).view(np.uint8)
  buf[8:12] = np.array([5], u32).view(np.uint8)
  mem.map(0x50000, 16, buf)
  h = lambda *x: int(np.array(x, f16).view(u32)[0])
  st = snip("global_atomic_pk_add_f16 v1, v0, v2, s[0:1] th:TH_ATOMIC_RETURN\nglobal_atomic_max_num_f32 v3, v0, v4, s[0:1] offset:4 th:TH_ATOMIC_RETURN\n"
            "global_atomic_sub_clamp_u32 v5, v0, v6, s[0:1] offset:8 th:TH_ATOMIC_RETURN\n"
            "v_mov_b32 v9, 0\nds_store_b32 v9, v2\nds_pk_add_rtn_f16 v10, v9, v2\nds_load_b32 v11, v9",
            s={0: 0x50000, 1: 0}, v={0: 0, 2: h(0.25, 1.0), 4: fbits(7.0), 6: 9}, mem=mem, exec_mask=1, lds_bytes=16)
  assert st.v[1, 0, 0] == h(1.5, -2.0) and buf[0:4].view(f16).tolist() == [1.75, -1.0]
  assert st.v[3, 0, 0] == fbits(3.0) and buf[4:8].view(f32)[0] == 7.0
  assert st.v[5, 0, 0] == 5 and buf[8:12].view(u32)[0] == 0   # 5 - 9 clamps at 0
  assert st.v[10, 0, 0] == h(0.25, 1.0) and st.v[11, 0, 0] == h(0.5, 2.0)


FP8_SRC = r"""
typedef int int2v __attribute__((ext_vector_type(2)));
typedef float float8v __attribute__((ext_vector_type(8)));
__kernel void cvt(__global float* o, __global const int* a) { int l = __builtin_amdgcn_workitem_id_x();
  o[6*l] = __builtin_amdgcn_cvt_f32_fp8(a[l], 0); o[6*l+1] = __builtin_amdgcn_cvt_f32_fp8(a[l], 3);
  o[6*l+2] = __builtin_amdgcn_cvt_f32_bf8(a[l], 1); o[6*l+3] = __builtin_amdgcn_cvt_f32_bf8(a[l], 2);
  float2 p = __builtin_amdgcn_cvt_pk_f32_fp8(a[l], true); o[6*l+4] = p.x; o[6*l+5] = p.y; }
__kernel void dot4(__global float* o, __global const int* a, __global const int* b, __global const float* c) {
  int l = __builtin_amdgcn_workitem_id_x();
  o[2*l] = __builtin_amdgcn_dot4_f32_fp8_fp8(a[l], b[l], c[l]); o[2*l+1] = __builtin_amdgcn_dot4_f32_bf8_fp8(a[l], b[l], c[l]); }
__kernel void wmma8(__global float* d, __global const uchar* a, __global const uchar* b) {
  int l = __builtin_amdgcn_workitem_id_x(), g = l / 16; uint av[2] = {0, 0}, bv[2] = {0, 0}; float8v c = 0;
  for (int j = 0; j < 8; j++) { int k = (j / 8) * 16 + g * 8 + j % 8;
    av[j / 4] |= (uint)a[(l % 16) * 16 + k] << (8 * (j % 4)); bv[j / 4] |= (uint)b[k * 16 + (l % 16)] << (8 * (j % 4)); }
  float8v r = __builtin_amdgcn_wmma_f32_16x16x16_fp8_bf8_w32_gfx12((int2v)(av[0], av[1]), (int2v)(bv[0], bv[1]), c);
  for (int e = 0; e < 8; e++) d[(e + 8 * g) * 16 + (l % 16)] = r[e]; }
"""


def _f8(byte: int, kind: str) -> float:
  """OCP E4M3FN (fp8) / E5M2 (bf8) from the definitions."""
  eb, mb, bias = (4, 3, 7) if kind == "fp8" else (5, 2, 15)
  s, e, m = byte >> 7, (byte >> mb) & ((1 << eb) - 1), byte & ((1 << mb) - 1)
  if kind == "fp8" and e == 15 and m == 7: return float("nan")
  if kind == "bf8" and e == 31: return float("nan") if m else (-1) ** s * float("inf")
  v = m * 2.0 ** (1 - bias - mb) if e == 0 else (1 + m / 2 ** mb) * 2.0 ** (e - bias)
  return -v if s else v


def test_fp8_bf8(tmp_path):
  """gfx12's 8-bit floats through clang-19's builtins: byte/word selects of the conversions, v_dot4 (one rounding),
  and fp8 x bf8 WMMA, against the OCP definitions."""
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  from tests.test_emu_corpus import compile_cl
  (tmp_path / "f.cl").write_text(FP8_SRC)
  co = read_code_object(compile_cl(str(tmp_path / "f.cl"), str(tmp_path), ["-mcpu=gfx1201"]))
  a = rng.integers(0, 2**32, 64, dtype=np.int64).astype(u32)
  a[:4] = [0x7f7e0180, 0xff7c00fe, 0x7b7f7d01, 0x80000000]   # NaN, max, subnormals, infinities, -0
  o = np.zeros(6 * 64, f32)
  run(co, [o, a], (1,), (64,), kernel="cvt")
  byte = lambda x, i: (int(x) >> (8 * i)) & 255
  want = np.array([[_f8(byte(x, 0), "fp8"), _f8(byte(x, 3), "fp8"), _f8(byte(x, 1), "bf8"), _f8(byte(x, 2), "bf8"),
                    _f8(byte(x, 2), "fp8"), _f8(byte(x, 3), "fp8")] for x in a], f32).reshape(-1)
  assert np.array_equal(o, want, equal_nan=True)
  b = rng.integers(0, 2**32, 64, dtype=np.int64).astype(u32) & u32(0x7f7f7f7f) & ~u32(0x78787878)   # finite, small
  a2 = a & ~u32(0x78787878)
  c = rng.uniform(-4, 4, 64).astype(f32)
  o = np.zeros(2 * 64, f32)
  run(co, [o, a2, b, c], (1,), (64,), kernel="dot4")
  from fractions import Fraction as F
  exact = lambda x, y, ka, z: float(sum(F(_f8(byte(x, j), ka)) * F(_f8(byte(y, j), "fp8")) for j in range(4)) + F(float(z)))
  assert o[0::2].tolist() == [float(f32(exact(x, y, "fp8", z))) for x, y, z in zip(a2, b, c)]
  assert o[1::2].tolist() == [float(f32(exact(x, y, "bf8", z))) for x, y, z in zip(a2, b, c)]
  A, B = rng.integers(0, 256, 256).astype(np.uint8) & 0x77, rng.integers(0, 256, 256).astype(np.uint8) & 0x7b   # finite
  d = np.zeros(256, f32)
  run(co, [d, A, B], (1,), (32,), kernel="wmma8")
  Af = np.array([_f8(int(x), "fp8") for x in A]).reshape(16, 16)
  Bf = np.array([_f8(int(x), "bf8") for x in B]).reshape(16, 16)
  assert np.array_equal(d.reshape(16, 16), (Af @ Bf).astype(f32))
