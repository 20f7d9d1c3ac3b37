"""CDNA3 (gfx942): wave64 GCN code in the emulator — SDWA selects, gfx9 DPP controls (wave shifts, row broadcasts),
v_cmpx's double write, 16-bit results zeroing the high half, M0's encoding, ds_cmpst's operand order, AGPRs,
packed f32; MFMA for every f32/f16/bf16/i8 shape clang-19's __builtin_amdgcn_mfma_* emit against numpy matmul; and
the OpenCL differential corpus compiled for gfx942. Encodings come from llvm-mc-19, kernels from clang-19."""
from __future__ import annotations

import numpy as np
import pytest

from hcq.asm.emu.snippet import run_snippet
from tests.tools import require_tool

f16, f32, f64, u16, u32, i32 = np.float16, np.float32, np.float64, np.uint16, np.uint32, np.int32
ARCH = "gfx942"
rng = np.random.default_rng(942)
LANES = np.arange(64)


def encode(lines: list[str]) -> bytes:
  """llvm-mc-19's encodings of `lines` for gfx942 (an error message fails the test)."""
  from hcq.asm.llvm import assemble_each
  require_tool("llvm-mc-19")
  out = assemble_each(lines, ARCH)
  bad = [(l, e) for l, e in zip(lines, out) if isinstance(e, str)]
  assert not bad, bad
  return b"".join(out)


def snip(lines: list[str], **kw):
  return run_snippet(encode(lines), arch=ARCH, lanes=64, **kw)


def sel(x, s, sext=False):
  """An SDWA source select written from the ISA's table: BYTE_0..3, WORD_0..1, DWORD."""
  x = np.asarray(x, u32)
  if s == "DWORD": return x
  n, bits = (int(s[-1]), 8) if s.startswith("BYTE") else (int(s[-1]), 16)
  v = (x >> u32(n * bits)) & u32((1 << bits) - 1)
  if sext: v = np.where(v >> u32(bits - 1), v | u32((0xffffffff << bits) & 0xffffffff), v)
  return v


def test_sdwa_selects():
  a = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(u32)
  b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(u32)
  ha, hb = rng.uniform(-4, 4, 64).astype(f16), rng.uniform(-4, 4, 64).astype(f16)
  old = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(u32)
  st = snip(["v_mov_b32_sdwa v2, v0 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_2",
             "v_add_u32_sdwa v3, v0, v1 dst_sel:BYTE_1 dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:BYTE_0",
             "v_mov_b32_sdwa v4, sext(v0) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_3",
             "v_mov_b32_sdwa v5, v0 dst_sel:WORD_0 dst_unused:UNUSED_SEXT src0_sel:WORD_1",
             "v_sub_u32_sdwa v7, s2, v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_0 src1_sel:WORD_1",
             "v_cmp_gt_u32_sdwa s[10:11], v0, v1 src0_sel:BYTE_0 src1_sel:BYTE_0",
             "v_cmp_gt_u32_sdwa vcc, v0, v1 src0_sel:WORD_0 src1_sel:WORD_1",
             "v_add_f16_sdwa v6, v20, v21 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_1 src1_sel:WORD_0",
             "v_mul_f32_sdwa v8, v22, -v1 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:DWORD"],
            v={0: a, 1: b, 2: old, 6: old, 20: ha.view(u16).astype(u32) << u32(16), 21: hb.view(u16).astype(u32),
               22: np.full(64, 0x3fc00000, u32)}, s={2: 0x12345678})   # v22 WORD_1 -> the f32 bits 0x00003fc0 (a denormal)
  mask = lambda b_: int(sum(1 << l for l in range(64) if b_[l]))
  assert (st.v[2, 0] == ((old & u32(0xffff)) | (sel(a, "BYTE_2") << u32(16)))).all()
  assert (st.v[3, 0] == (((sel(a, "WORD_1") + sel(b, "BYTE_0")) & u32(0xff)) << u32(8))).all()
  assert (st.v[4, 0] == sel(a, "BYTE_3", True)).all()
  assert (st.v[5, 0] == sel(sel(a, "WORD_1"), "WORD_0", True)).all()   # the 16-bit field's sign fills bits 31:16
  assert (st.v[7, 0] == u32(0x78) - sel(b, "WORD_1")).all()
  assert int(st.s[10, 0]) | int(st.s[11, 0]) << 32 == mask(sel(a, "BYTE_0") > sel(b, "BYTE_0"))
  assert int(st.s[106, 0]) | int(st.s[107, 0]) << 32 == mask(sel(a, "WORD_0") > sel(b, "WORD_1"))
  assert (st.v[6, 0] & u32(0xffff) == old & u32(0xffff)).all()
  assert ((st.v[6, 0] >> u32(16)).astype(u16).view(f16) == (ha.astype(f32) + hb.astype(f32)).astype(f16)).all()
  assert (st.v[8, 0].view(f32) == np.uint32(0x3fc0).view(f32) * -b.view(f32)).all()


def test_dpp_gfx9_controls():
  """wave_shl/shr/rol/ror by one lane, row_bcast:15 / :31 under their row masks, bound_ctrl, bank_mask, row_newbcast
  (gfx90a+: lane N of each row to the whole row) on a 32-bit op."""
  a, b = (LANES * 10 + 1).astype(u32), (LANES * 1000).astype(u32)
  old = np.full(64, 0xdead, u32)
  st = snip(["v_mov_b32_dpp v2, v0 wave_shl:1 row_mask:0xf bank_mask:0xf",
             "v_mov_b32_dpp v3, v0 wave_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:0",
             "v_mov_b32_dpp v4, v0 wave_rol:1 row_mask:0xf bank_mask:0xf",
             "v_mov_b32_dpp v5, v0 wave_ror:1 row_mask:0xf bank_mask:0xf",
             "v_mov_b32_dpp v6, v0 row_bcast:15 row_mask:0xa bank_mask:0xf",
             "v_mov_b32_dpp v7, v0 row_bcast:31 row_mask:0xc bank_mask:0xf",
             "v_add_u32_dpp v8, v0, v1 row_shr:1 row_mask:0xf bank_mask:0x5",
             "v_mov_b32_dpp v9, v0 row_newbcast:13 row_mask:0xb bank_mask:0xf"],
            v={0: a, 1: b, **{r: old for r in range(2, 10)}})
  g = lambda r: st.v[r, 0]
  assert (g(2) == np.where(LANES < 63, a[np.minimum(LANES + 1, 63)], old)).all()   # lane 63 has no source: unwritten
  assert (g(3) == np.where(LANES > 0, a[LANES - 1], 0)).all()                       # bound_ctrl: lane 0 reads 0
  assert (g(4) == a[(LANES + 1) % 64]).all() and (g(5) == a[(LANES - 1) % 64]).all()
  row = LANES // 16
  assert (g(6) == np.where((row == 1) | (row == 3), a[np.maximum(row * 16 - 1, 0)], old)).all()
  assert (g(7) == np.where(row >= 2, a[31], old)).all()
  bank = (LANES % 16) // 4
  shr = np.where(LANES % 16 >= 1, a[LANES - 1] + b, old)   # row_shr:1 without bound_ctrl: a row's lane 0 is not written
  assert (g(8) == np.where((bank == 0) | (bank == 2), shr, old)).all()
  assert (g(9) == np.where(row != 2, a[row * 16 + 13], old)).all()


def test_gfx9_vop_rules_m0_and_agprs():
  """v_cmpx writes its SGPR pair and EXEC; a 16-bit result zeroes bits 31:16 (gfx10+ keep them); M0 is operand 124;
  v_accvgpr_write/read go through AGPR a1 = v[agpr_base + 1]; v_pk_mov_b32 picks dwords by op_sel; v_lshl_add_u64."""
  a, b = rng.integers(0, 100, 64).astype(u32), rng.integers(0, 100, 64).astype(u32)
  st = snip(["v_add_f16_e32 v4, v5, v6", "s_mov_b32 m0, s2", "s_mov_b32 s3, m0", "v_accvgpr_write_b32 a1, v0", "v_accvgpr_read_b32 v9, a1",
             "v_pk_mov_b32 v[10:11], v[0:1], v[2:3] op_sel:[1,0]", "v_lshl_add_u64 v[12:13], v[0:1], 3, v[2:3]",
             "v_readlane_b32 m0, v0, 3", "s_mov_b32 s7, m0", "v_cmpx_gt_u32_e64 s[20:21], v0, v1"],
            v={0: a, 1: b, 2: b + 7, 3: a + 9, 4: np.full(64, 0xdead0000, u32), 5: np.full(64, 0xffff3c00, u32), 6: np.full(64, 0x12343c00, u32)},
            s={2: 77}, vgprs=64)
  assert (st.v[4, 0] == 0x4000).all()   # 1.0 + 1.0, high half zeroed (LLVM relies on it: no mask before a zext)
  assert st.s[3, 0] == 77 and st.s[7, 0] == a[3]   # M0 written by SALU and by v_readlane (VOP3's SGPR vdst)
  assert st.s[125, 0] == a[3]   # the emulator's file keeps M0 at gfx11's index 125
  assert (st.v[9, 0] == a).all() and (st.v[32 + 1, 0] == a).all()   # snippets put the AGPRs after their `vgprs // 2` VGPRs
  assert (st.v[10, 0] == b).all() and (st.v[11, 0] == b + 7).all()   # D.lo = src0[op_sel[0]], D.hi = src1[op_sel[1]]
  x = (a.astype(np.uint64) | b.astype(np.uint64) << np.uint64(32)) * np.uint64(8) + ((b + 7).astype(np.uint64) | (a + 9).astype(np.uint64) << np.uint64(32))
  assert (st.v[12, 0] == (x & np.uint64(0xffffffff)).astype(u32)).all() and (st.v[13, 0] == (x >> np.uint64(32)).astype(u32)).all()
  m = sum(1 << l for l in range(64) if a[l] > b[l])
  assert int(st.s[20, 0]) | int(st.s[21, 0]) << 32 == m and int(st.s[126, 0]) | int(st.s[127, 0]) << 32 == m


def test_memtime_counts_up():
  st = snip(["s_memtime s[4:5]", "s_memrealtime s[6:7]", "s_waitcnt lgkmcnt(0)"])
  t = lambda r: int(st.s[r, 0]) | int(st.s[r + 1, 0]) << 32
  assert 0 < t(4) <= t(6)


def test_ds_cmpst_operand_order():
  """GCN's ds_cmpst_rtn_b32 vdst, addr, cmp, src (gfx11's ds_cmpstore swaps the data operands)."""
  st = snip(["ds_cmpst_rtn_b32 v1, v0, v2, v3", "s_waitcnt lgkmcnt(0)", "ds_read_b32 v4, v0"],
            v={0: LANES * 4, 2: np.where(LANES % 2 == 0, 0, 5), 3: LANES + 100}, lds_bytes=256)
  assert (st.v[1, 0] == 0).all() and (st.v[4, 0] == np.where(LANES % 2 == 0, LANES + 100, 0)).all()


DOT_SRC = """typedef short s2 __attribute__((ext_vector_type(2))); typedef unsigned short u2 __attribute__((ext_vector_type(2)));
__kernel void dots(__global int* o, __global const int* a, __global const int* b, __global const int* c) {
  uint i = __builtin_amdgcn_workitem_id_x(); int x = a[i], y = b[i], z = c[i]; __global int* d = o + 12 * i;
  d[0] = __builtin_amdgcn_sdot2(__builtin_astype(x, s2), __builtin_astype(y, s2), z, false);
  d[1] = __builtin_amdgcn_sdot2(__builtin_astype(x, s2), __builtin_astype(y, s2), z, true);
  d[2] = __builtin_amdgcn_udot2(__builtin_astype(x, u2), __builtin_astype(y, u2), z, false);
  d[3] = __builtin_amdgcn_udot2(__builtin_astype(x, u2), __builtin_astype(y, u2), z, true);
  d[4] = __builtin_amdgcn_sdot4(x, y, z, false); d[5] = __builtin_amdgcn_sdot4(x, y, z, true);
  d[6] = __builtin_amdgcn_udot4(x, y, z, false); d[7] = __builtin_amdgcn_udot4(x, y, z, true);
  d[8] = __builtin_amdgcn_sdot8(x, y, z, false); d[9] = __builtin_amdgcn_sdot8(x, y, z, true);
  d[10] = __builtin_amdgcn_udot8(x, y, z, false); d[11] = __builtin_amdgcn_udot8(x, y, z, true); }"""


def test_integer_dots(tmp_path):
  """clang-19's sdot/udot 2/4/8 builtins (v_dot*_i32/u32 and the accumulating v_dot*c forms), with and without clamp,
  against numpy's sums of products."""
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  from tests.test_emu_corpus import compile_cl
  (tmp_path / "d.cl").write_text(DOT_SRC)
  co = read_code_object(compile_cl(str(tmp_path / "d.cl"), str(tmp_path), ["-mcpu=gfx942"]))
  n = 64
  a, b = (rng.integers(0, 2**32, n, dtype=np.uint64).astype(u32) for _ in range(2))
  c = rng.integers(-2**31, 2**31, n).astype(np.int64)
  c[:8] = 2**31 - 5; c[8:16] = -2**31 + 3   # near the ends, where clamp matters
  o = np.zeros(12 * n, i32)
  run(co, [o, a.view(i32), b.view(i32), c.astype(i32)], (1,), (n,), kernel="dots")
  got = o.reshape(n, 12).astype(np.int64)
  def dot(bits, signed):
    s = np.zeros(n, np.int64)
    for k in range(32 // bits):
      x, y = (((t >> u32(bits * k)) & u32((1 << bits) - 1)).astype(np.int64) for t in (a, b))
      if signed: x, y = ((z ^ (1 << (bits - 1))) - (1 << (bits - 1)) for z in (x, y))
      s += x * y
    return s
  for j, (bits, signed) in enumerate([(16, True), (16, False), (8, True), (8, False), (4, True), (4, False)]):
    cc = c if signed else c & 0xffffffff
    full = dot(bits, signed) + cc
    wrap = (full & 0xffffffff).astype(u32).view(i32).astype(np.int64)
    sat = np.clip(full, -2**31, 2**31 - 1) if signed else np.clip(full, 0, 2**32 - 1).astype(np.uint64).astype(u32).view(i32).astype(np.int64)
    assert (got[:, 2 * j] == wrap).all(), (bits, signed)
    assert (got[:, 2 * j + 1] == sat).all(), (bits, signed, "clamp")


# ---- MFMA: every f32/f16/bf16/i8 shape through clang-19's builtins, against numpy ------------------------------------
# (builtin, A/B element type, elements per lane, C/D registers, emulator's M, K, blocks)
MFMA = [("32x32x1f32", "f32", 1, 32, 32, 1, 2), ("16x16x1f32", "f32", 1, 16, 16, 1, 4), ("4x4x1f32", "f32", 1, 4, 4, 1, 16),
        ("32x32x2f32", "f32", 1, 16, 32, 2, 1), ("16x16x4f32", "f32", 1, 4, 16, 4, 1),
        ("32x32x4f16", "f16", 4, 32, 32, 4, 2), ("16x16x4f16", "f16", 4, 16, 16, 4, 4), ("4x4x4f16", "f16", 4, 4, 4, 4, 16),
        ("32x32x8f16", "f16", 4, 16, 32, 8, 1), ("16x16x16f16", "f16", 4, 4, 16, 16, 1),
        ("32x32x4bf16_1k", "bf16", 4, 32, 32, 4, 2), ("16x16x4bf16_1k", "bf16", 4, 16, 16, 4, 4), ("4x4x4bf16_1k", "bf16", 4, 4, 4, 4, 16),
        ("32x32x8bf16_1k", "bf16", 4, 16, 32, 8, 1), ("16x16x16bf16_1k", "bf16", 4, 4, 16, 16, 1),
        ("32x32x4i8", "i8", 4, 32, 32, 4, 2), ("16x16x4i8", "i8", 4, 16, 16, 4, 4), ("4x4x4i8", "i8", 4, 4, 4, 4, 16),
        ("32x32x16_i8", "i8", 8, 16, 32, 16, 1), ("16x16x32_i8", "i8", 8, 4, 16, 32, 1)]
_CT = {"f32": "float", "f16": "half", "bf16": "short", "i8": "char"}


def _mfma_source() -> str:
  lines = ["#pragma OPENCL EXTENSION cl_khr_fp16 : enable"]
  for n in (4, 8, 16, 32): lines += [f"typedef float f{n} __attribute__((ext_vector_type({n})));", f"typedef int i{n} __attribute__((ext_vector_type({n})));"]
  lines += ["typedef half h4 __attribute__((ext_vector_type(4)));", "typedef short s4 __attribute__((ext_vector_type(4)));"]
  for name, t, e, regs, *_ in MFMA:
    acc = ("i" if t == "i8" else "f") + str(regs)
    ab = {("f32", 1): "float", ("f16", 4): "h4", ("bf16", 4): "s4", ("i8", 4): "int", ("i8", 8): "long"}[(t, e)]
    lines.append(f"__kernel void mfma_{name}(__global const {ab}* a, __global const {ab}* b, __global const {acc}* c, __global {acc}* d) {{"
                 f" uint l = __builtin_amdgcn_workitem_id_x(); d[l] = __builtin_amdgcn_mfma_{'i32' if t == 'i8' else 'f32'}_{name}(a[l], b[l], c[l], 0, 0, 0); }}")
  return "\n".join(lines)


@pytest.fixture(scope="module")
def mfma_co(tmp_path_factory):
  from hcq.asm.codeobject import read_code_object
  from tests.test_emu_corpus import compile_cl
  d = tmp_path_factory.mktemp("mfma")
  (d / "mfma.cl").write_text(_mfma_source())
  return read_code_object(compile_cl(str(d / "mfma.cl"), str(d), ["-mcpu=gfx942"]))


def test_mfma_layout_matches_amd_calculator():
  """Spot checks of hcq.asm.emu.ops_mai.Layout against AMD's matrix instruction calculator (CDNA3, --matrix-layout);
  the whole layouts of all 20 shapes were compared with it when the layout was written."""
  from hcq.asm.emu.ops_mai import Layout
  l = Layout(32, 8, 1)   # v_mfma_f32_32x32x8_f16: D lane 0 v4 = D[8][0]; lane 33 v1 = D[5][1]; A lane 40 v1.[15:0] = A[8][6]
  assert (l.cd_row[0, 4], l.cd_col[0, 4]) == (8, 0) and (l.cd_row[33, 1], l.cd_col[33, 1]) == (5, 1)
  assert (l.ab_idx[40], l.ab_k[40, 2]) == (8, 6)
  l = Layout(4, 1, 16)   # v_mfma_f32_4x4x1_16b_f32: A lane 57 = A[1][0].B14; D lane 6 v3 = D[3][2].B1
  assert (l.ab_block[57, 0], l.ab_idx[57]) == (14, 1) and (l.cd_block[6, 3], l.cd_row[6, 3], l.cd_col[6, 3]) == (1, 3, 2)


@pytest.mark.parametrize("shape", MFMA, ids=[m[0] for m in MFMA])
def test_mfma_against_numpy(mfma_co, shape):
  from hcq.asm.emu import run
  from hcq.asm.emu.ops_mai import Layout
  name, t, e, regs, m, k, blocks = shape
  lay = Layout(m, k, blocks)
  r = np.random.default_rng(len(name) * 1000 + m + k)
  if t == "i8": A, B = (r.integers(-128, 128, (blocks, m, k)), r.integers(-128, 128, (blocks, k, m)))
  else: A, B = (r.uniform(-2, 2, (blocks, m, k)), r.uniform(-2, 2, (blocks, k, m)))
  if t == "f16": A, B = A.astype(f16).astype(f64), B.astype(f16).astype(f64)
  if t == "bf16": A, B = ((x.astype(f32).view(u32) & u32(0xffff0000)).view(f32).astype(f64) for x in (A, B))
  if t == "f32": A, B = A.astype(f32).astype(f64), B.astype(f32).astype(f64)
  C = r.integers(-1000, 1000, (blocks, m, m)) if t == "i8" else r.uniform(-4, 4, (blocks, m, m)).astype(f32).astype(f64)
  # per lane: A row / B column l % M, elements by (block, k); C/D by (block, row, column) of each register
  a_lane = A[lay.ab_block, lay.ab_idx[:, None], lay.ab_k]
  b_lane = B[lay.ab_block, lay.ab_k, lay.ab_idx[:, None]]
  dt = {"f32": f32, "f16": f16, "bf16": None, "i8": np.int8}[t]
  pack = (lambda x: (x.astype(f32).view(u32) >> u32(16)).astype(u16)) if t == "bf16" else (lambda x: x.astype(dt))
  ddt = i32 if t == "i8" else f32
  c_lane = C[lay.cd_block, lay.cd_row, lay.cd_col].astype(ddt)
  d = np.zeros((64, regs), ddt)
  run(mfma_co, [np.ascontiguousarray(pack(a_lane)), np.ascontiguousarray(pack(b_lane)), c_lane, d], (1,), (64,), kernel=f"mfma_{name}")
  ref = (np.matmul(A, B) + C)[lay.cd_block, lay.cd_row, lay.cd_col]
  if t == "i8": assert (d == ref.astype(np.int64).astype(i32)).all()
  else: assert np.array_equal(d, ref.astype(f32))   # exact products, one rounding (see ops_mai)


def test_mfma_on_agprs_matches_vgprs():
  """The same MFMA with C/D in AGPRs (acc_cd, the unified file's upper part) and in VGPRs, and A/B from AGPRs
  (acc0/acc1), after v_accvgpr_write moves; llvm-mc-19 encodes both forms."""
  a, b = rng.uniform(-2, 2, 64).astype(f32), rng.uniform(-2, 2, 64).astype(f32)
  c = [rng.uniform(-2, 2, 64).astype(f32) for _ in range(4)]
  st = snip(["v_accvgpr_write_b32 a0, v4", "v_accvgpr_write_b32 a1, v5", "v_accvgpr_write_b32 a2, v6", "v_accvgpr_write_b32 a3, v7",
             "v_accvgpr_write_b32 a8, v0", "v_accvgpr_write_b32 a9, v1",
             "v_mfma_f32_4x4x1_16b_f32 a[0:3], a8, a9, a[0:3]", "v_mfma_f32_4x4x1_16b_f32 v[4:7], v0, v1, v[4:7]",
             *(f"v_accvgpr_read_b32 v{10 + i}, a{i}" for i in range(4))],
            v={0: a, 1: b, **{4 + i: c[i] for i in range(4)}}, vgprs=64)
  for i in range(4):
    assert (st.v[10 + i, 0] == st.v[4 + i, 0]).all() and (st.v[32 + i, 0] == st.v[4 + i, 0]).all()
  # block b = lane // 4 of 4x4x1_16b: D[i][j] = A[i] * B[j] + C, A[i] in lane 4b + i, B[j] in lane 4b + j
  blk = (LANES // 4) * 4
  assert np.array_equal(st.v[4, 0].view(f32), (a[blk].astype(f64) * b[blk + LANES % 4] + c[0]).astype(f32))


# ---- the OpenCL corpus, compiled for gfx942 (wave64) ----------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus942(tmp_path_factory):
  from hcq.asm.codeobject import read_code_object
  from tests.test_emu_corpus import compile_cl, corpus_source
  return read_code_object(compile_cl(corpus_source(tmp_path_factory), str(tmp_path_factory.mktemp("emu942")), ["-mcpu=gfx942"]))


def _cases():
  from tests.test_emu_corpus import CASES
  return [c for c in CASES if not c.name.startswith("wmma")]   # WMMA is RDNA's; gfx942 has MFMA (above)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_corpus_gfx942(corpus942, case):
  from tests.test_emu_corpus import test_corpus
  assert corpus942.arch == ARCH and corpus942.kernels[case.name].wavefront_size == 64
  test_corpus(corpus942, case)


@pytest.fixture(scope="module")
def corpus942_dpp(tmp_path_factory):
  """LLVM's DPP atomic optimizer on gfx942: wave reductions through row_shr, row_bcast:15 and row_bcast:31."""
  from hcq.asm.codeobject import read_code_object
  from tests.test_emu_corpus import compile_cl, corpus_source
  return read_code_object(compile_cl(corpus_source(tmp_path_factory), str(tmp_path_factory.mktemp("emu942dpp")),
                                     ["-mcpu=gfx942", "-mllvm", "-amdgpu-atomic-optimizer-strategy=DPP"]))


@pytest.mark.parametrize("case", [c for c in _cases() if c.name.startswith("atom_")], ids=lambda c: c.name)
def test_corpus_gfx942_dpp_atomics(corpus942_dpp, case):
  from tests.test_emu_corpus import test_corpus
  test_corpus(corpus942_dpp, case)


@pytest.fixture(scope="module")
def corpus942_llvmlite(tmp_path_factory):
  """The corpus through clang-19's IR and llvmlite's newer LLVM for gfx942 (an ET_REL object)."""
  from tests.test_emu_corpus import llvmlite_corpus
  return llvmlite_corpus(tmp_path_factory, "gfx942")


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_corpus_gfx942_llvmlite(corpus942_llvmlite, case):
  from tests.test_emu_corpus import test_corpus
  assert corpus942_llvmlite.arch == ARCH
  test_corpus(corpus942_llvmlite, case)


def test_coverage_of_gfx942():
  """What of the gfx942 table runs (coverage() lists the rest): every compare, the 20 MFMA shapes above (not fp8/bf8,
  xf32, f64, sparse smfmac), every DS and FLAT opcode, every MUBUF and MTBUF opcode."""
  from hcq.asm.emu.engine import coverage
  cov = coverage(ARCH)
  assert cov["VOPC"][2] == [] and cov["DS"][2] == [] and cov["FLAT"][2] == [] and cov["VOP3SD"][2] == []
  assert cov["VOP3P_MAI"][0] == len(MFMA)
  assert all(any(k in m for k in ("fp8", "bf8", "xf32", "f64", "smfmac")) for m in cov["VOP3P_MAI"][2])
  assert cov["MUBUF"][2] == [] and cov["MTBUF"][2] == []
  assert sum(c[0] for c in cov.values()) >= 1699   # of 1,844 opcodes


# ---- buffer instructions (MUBUF) with the V#: gfx942's range check, and the same kernels on gfx1100 ----------------
# dword 3 of the V#: gfx942 DATA_FORMAT 32 (what untyped buffers carry there); gfx1100 OOB_SELECT 2 (raw: offset) for
# the raw kernels, 0 (structured: index, and offset within the stride) for the structured one
BUF_FLAGS = {"gfx942": (0x20000, 0x20000), "gfx1100": (2 << 28, 0)}
BUF_CL = """
typedef __amdgpu_buffer_rsrc_t rsrc;
#define L __builtin_amdgcn_workitem_id_x()
kernel void raw_load(global uint *out, global uchar *in, uint n) {
  rsrc r = __builtin_amdgcn_make_buffer_rsrc(in, 0, n, RAW_FLAGS);
  uint l = L; global uint *o = out + l * 14;
  o[0] = __builtin_amdgcn_raw_buffer_load_b8(r, l * 5, 0, 0);
  o[1] = __builtin_amdgcn_raw_buffer_load_b16(r, l * 6, 0, 0);
  o[2] = __builtin_amdgcn_raw_buffer_load_b32(r, l * 4 + 16, 0, 0);     /* the 16 in the instruction's offset */
  o[3] = __builtin_amdgcn_raw_buffer_load_b32(r, l * 4, 8, 0);          /* soffset: added, not range-checked */
  v2u a = __builtin_amdgcn_raw_buffer_load_b64(r, l * 8 + 4, 0, 0);
  v3u b = __builtin_amdgcn_raw_buffer_load_b96(r, l * 12, 0, 0);
  v4u c = __builtin_amdgcn_raw_buffer_load_b128(r, l * 16 + 4, 0, 0);
  o[4] = a[0]; o[5] = a[1]; o[6] = b[0]; o[7] = b[1]; o[8] = b[2]; o[9] = c[0]; o[10] = c[2]; o[11] = c[3];
  o[12] = (int)(char)__builtin_amdgcn_raw_buffer_load_b8(r, l * 5 + 1, 0, 0);     /* sbyte */
  o[13] = (int)(short)__builtin_amdgcn_raw_buffer_load_b16(r, l * 6 + 2, 0, 0);   /* sshort */
}
kernel void raw_store(global uchar *out, global uint *in, uint n) {
  rsrc r = __builtin_amdgcn_make_buffer_rsrc(out, 0, n, RAW_FLAGS);
  uint l = L; global uint *x = in + l * 4;
  __builtin_amdgcn_raw_buffer_store_b8((uchar)x[0], r, l, 0, 0);
  __builtin_amdgcn_raw_buffer_store_b16((ushort)x[1], r, 64 + l * 2, 0, 0);
  __builtin_amdgcn_raw_buffer_store_b32(x[2], r, 192 + l * 4, 0, 0);
  __builtin_amdgcn_raw_buffer_store_b128((v4u)(x[0], x[1], x[2], x[3]), r, 448 + l * 16, 0, 0);
}
"""
BUF_IR = """
declare i32 @llvm.amdgcn.workitem.id.x()
declare ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p1(ptr addrspace(1), i16, i32, i32)
declare i32 @llvm.amdgcn.struct.ptr.buffer.load.i32(ptr addrspace(8), i32, i32, i32, i32)
declare void @llvm.amdgcn.struct.ptr.buffer.store.i32(i32, ptr addrspace(8), i32, i32, i32, i32)
declare i32 @llvm.amdgcn.raw.ptr.buffer.atomic.add.i32(i32, ptr addrspace(8), i32, i32, i32)
declare i32 @llvm.amdgcn.raw.ptr.buffer.atomic.cmpswap.i32(i32, i32, ptr addrspace(8), i32, i32, i32)
; records of 12 bytes: out[2l] = field at 4 of record l, out[2l+1] = field at (l&1)*8; record l of %st gets l+1 at 4
define amdgpu_kernel void @structured(ptr addrspace(1) %out, ptr addrspace(1) %in, ptr addrspace(1) %st, i32 %n) {
  %l = call i32 @llvm.amdgcn.workitem.id.x()
  %r = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p1(ptr addrspace(1) %in, i16 12, i32 %n, i32 STRUCT_FLAGS)
  %s = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p1(ptr addrspace(1) %st, i16 12, i32 %n, i32 STRUCT_FLAGS)
  %a = call i32 @llvm.amdgcn.struct.ptr.buffer.load.i32(ptr addrspace(8) %r, i32 %l, i32 4, i32 0, i32 0)
  %odd = and i32 %l, 1
  %vo = mul i32 %odd, 8
  %b = call i32 @llvm.amdgcn.struct.ptr.buffer.load.i32(ptr addrspace(8) %r, i32 %l, i32 %vo, i32 0, i32 0)
  %i0 = mul i32 %l, 2
  %i1 = add i32 %i0, 1
  %p0 = getelementptr i32, ptr addrspace(1) %out, i32 %i0
  %p1 = getelementptr i32, ptr addrspace(1) %out, i32 %i1
  store i32 %a, ptr addrspace(1) %p0
  store i32 %b, ptr addrspace(1) %p1
  %v = add i32 %l, 1
  call void @llvm.amdgcn.struct.ptr.buffer.store.i32(i32 %v, ptr addrspace(8) %s, i32 %l, i32 4, i32 0, i32 0)
  ret void
}
; old[l] = atomic add of l+1 at byte 4l (returned: sc0/glc); cas[l] = cmpswap(l == 3 mod 4 ? 7 : mem, 7 -> 100+l)
; at byte 256+4l; cnt = 64 atomic adds of 1 at byte 512, each returning its old value
define amdgpu_kernel void @atomics(ptr addrspace(1) %old, ptr addrspace(1) %cas, ptr addrspace(1) %cnt, ptr addrspace(1) %m, i32 %n) {
  %l = call i32 @llvm.amdgcn.workitem.id.x()
  %r = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p1(ptr addrspace(1) %m, i16 0, i32 %n, i32 RAW_FLAGS)
  %o = mul i32 %l, 4
  %v = add i32 %l, 1
  %a = call i32 @llvm.amdgcn.raw.ptr.buffer.atomic.add.i32(i32 %v, ptr addrspace(8) %r, i32 %o, i32 0, i32 0)
  %v2 = add i32 %l, 100
  %c = call i32 @llvm.amdgcn.raw.ptr.buffer.atomic.cmpswap.i32(i32 %v2, i32 7, ptr addrspace(8) %r, i32 %o, i32 256, i32 0)
  %k = call i32 @llvm.amdgcn.raw.ptr.buffer.atomic.add.i32(i32 1, ptr addrspace(8) %r, i32 0, i32 512, i32 0)
  %pa = getelementptr i32, ptr addrspace(1) %old, i32 %l
  %pc = getelementptr i32, ptr addrspace(1) %cas, i32 %l
  %pk = getelementptr i32, ptr addrspace(1) %cnt, i32 %l
  store i32 %a, ptr addrspace(1) %pa
  store i32 %c, ptr addrspace(1) %pc
  store i32 %k, ptr addrspace(1) %pk
  ret void
}
"""


@pytest.fixture(scope="module", params=["gfx942", "gfx1100"])
def buffer_kernels(request, tmp_path_factory):
  """(arch, the OpenCL kernels, the IR kernels), both through clang-19 for `arch`."""
  import subprocess
  from hcq.asm.codeobject import read_code_object
  from tests.tools import compile_opencl
  arch, (raw, struct) = request.param, BUF_FLAGS[request.param]
  d = tmp_path_factory.mktemp(f"buf{arch}")
  vec = "typedef uint v2u __attribute__((ext_vector_type(2))); typedef uint v3u __attribute__((ext_vector_type(3)));\n" \
        "typedef uint v4u __attribute__((ext_vector_type(4)));\n"
  cl = read_code_object(compile_opencl(vec + BUF_CL.replace("RAW_FLAGS", str(raw)), d, mcpu=arch))
  (d / "b.ll").write_text(BUF_IR.replace("RAW_FLAGS", str(raw)).replace("STRUCT_FLAGS", str(struct)))
  subprocess.run([require_tool("clang-19"), "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib", "-O2", "-c",
                  str(d / "b.ll"), "-o", str(d / "b.o")], check=True)
  subprocess.run([require_tool("ld.lld-19"), "-shared", str(d / "b.o"), "-o", str(d / "b.so")], check=True)
  return arch, cl, read_code_object((d / "b.so").read_bytes())


def _inside(arch: str, off, size: int, n: int):
  """Whether a raw access of `size` bytes at byte `off` (soffset excluded) is in range: gfx942 (GCN) checks the offset
  < num_records, gfx1100's OOB_SELECT 2 offset + size <= num_records; wider than a dword, each dword on its own."""
  off = np.asarray(off, np.int64)
  return off < n if arch == "gfx942" else off + size <= n


def _raw_ref(arch, data: np.ndarray, off, size: int, n: int) -> np.ndarray:
  """The little-endian value of `size` bytes at each of `off` (0 out of range), as uint32."""
  v = np.zeros(len(off), np.uint64)
  for k in range(size): v |= data[np.asarray(off) + k].astype(np.uint64) << np.uint64(8 * k)
  return np.where(_inside(arch, off, size, n), v, 0).astype(u32)


@pytest.mark.parametrize("n", [4096, 200, 0])
def test_buffer_raw_load(buffer_kernels, n):
  """buffer_load_ubyte/sbyte/ushort/sshort/dword/dwordx2/x3/x4 (offen, instruction offset, soffset) under num_records `n` bytes:
  whole, cutting through the lanes (x2/x3/x4 keep their inside dwords), and empty; compared with numpy."""
  from hcq.asm.emu import run
  arch, cl, _ = buffer_kernels
  data = rng.integers(0, 256, 1200, dtype=np.uint8)
  out = np.zeros(64 * 14, u32)
  run(cl, [out, data, np.uint32(n)], (1,), (64,), kernel="raw_load")
  got, L = out.reshape(64, 14), LANES.astype(np.int64)
  dw = lambda off: _raw_ref(arch, data, off, 4, n)
  assert (got[:, 0] == _raw_ref(arch, data, L * 5, 1, n)).all()
  assert (got[:, 1] == _raw_ref(arch, data, L * 6, 2, n)).all()
  assert (got[:, 2] == dw(L * 4 + 16)).all()
  assert (got[:, 3] == np.where(_inside(arch, L * 4, 4, n), _raw_ref(arch, data, L * 4 + 8, 4, 1 << 20), 0)).all()
  for col, off in ((4, L * 8 + 4), (5, L * 8 + 8), (6, L * 12), (7, L * 12 + 4), (8, L * 12 + 8), (9, L * 16 + 4),
                   (10, L * 16 + 12), (11, L * 16 + 16)):
    assert (got[:, col] == dw(off)).all(), col
  assert (got[:, 12] == _raw_ref(arch, data, L * 5 + 1, 1, n).astype(np.int8).astype(i32).view(u32)).all()
  assert (got[:, 13] == _raw_ref(arch, data, L * 6 + 2, 2, n).astype(np.int16).astype(i32).view(u32)).all()
  if n == 200: assert 0 < (got[:, 9:12] != 0).sum() < got[:, 9:12].size   # the cut went through the x4 loads


@pytest.mark.parametrize("n", [4096, 300, 700])
def test_buffer_raw_store(buffer_kernels, n):
  """buffer_store_byte/short/dword/dwordx4: in-range bytes written, out-of-range dwords dropped (the rest untouched)."""
  from hcq.asm.emu import run
  arch, cl, _ = buffer_kernels
  x = rng.integers(0, 2**32, (64, 4), dtype=np.uint64).astype(u32)
  out = np.full(1472, 0xee, np.uint8)
  run(cl, [out, x.reshape(-1), np.uint32(n)], (1,), (64,), kernel="raw_store")
  want = np.full(1472, 0xee, np.uint8)
  def put(off, vals, size):
    for o, v in zip(off.tolist(), vals.tolist()):
      if _inside(arch, o, size, n): want[o:o + size] = np.frombuffer(int(v).to_bytes(8, "little")[:size], np.uint8)
  put(LANES, x[:, 0] & 0xff, 1)
  put(64 + LANES * 2, x[:, 1] & 0xffff, 2)
  put(192 + LANES * 4, x[:, 2], 4)
  for c in range(4): put(448 + LANES * 16 + 4 * c, x[:, c], 4)
  assert (out == want).all()


def test_buffer_structured(buffer_kernels):
  """idxen (+offen): record index × stride 12, index >= num_records out of range (loads 0, stores dropped)."""
  from hcq.asm.emu import run
  arch, _, ir = buffer_kernels
  n = 40
  data = rng.integers(0, 2**32, 64 * 3, dtype=np.uint64).astype(u32)
  out, st = np.zeros(128, u32), np.zeros(64 * 3, u32)
  run(ir, [out, data, st, np.uint32(n)], (1,), (64,), kernel="structured")
  rec, ok = data.reshape(64, 3), LANES < n
  assert (out[0::2] == np.where(ok, rec[:, 1], 0)).all()
  assert (out[1::2] == np.where(ok, rec[LANES, (LANES & 1) * 2], 0)).all()
  assert (st.reshape(64, 3)[:, 1] == np.where(ok, LANES + 1, 0)).all() and not st.reshape(64, 3)[:, 0::2].any()


def test_buffer_atomics_return_old(buffer_kernels):
  """buffer_atomic_add / cmpswap with sc0 (glc) return the old value; out-of-range lanes leave memory alone; 64 adds
  on one dword return each of 0..63 once."""
  from hcq.asm.emu import run
  arch, _, ir = buffer_kernels
  n = 160   # lanes 40.. of the add are outside; the cmpswap (soffset 256) and counter (soffset 512) are checked at 4l / 0
  m = rng.integers(0, 1000, 192, dtype=np.uint64).astype(u32)
  m[64:128][LANES % 4 == 3] = 7
  m0 = m.copy()
  old, cas, cnt = (np.zeros(64, u32) for _ in range(3))
  run(ir, [old, cas, cnt, m, np.uint32(n)], (1,), (64,), kernel="atomics")
  ok = LANES * 4 < n if arch == "gfx942" else LANES * 4 + 4 <= n
  assert (m[:64] == np.where(ok, m0[:64] + LANES + 1, m0[:64])).all() and (old[ok] == m0[:64][ok]).all()
  swapped = ok & (m0[64:128] == 7)
  assert (m[64:128] == np.where(swapped, LANES + 100, m0[64:128])).all() and (cas[ok] == m0[64:128][ok]).all()
  assert m[128] == m0[128] + 64 and sorted((cnt - m0[128]).tolist()) == list(range(64))


def test_buffer_refusals_are_clear():
  """What is not modelled stops the wave with a reason: the lds bit, and a V# asking for swizzled or ADD_TID
  addressing."""
  from hcq.asm.emu.errors import IllegalInstruction
  from hcq.asm.emu.memory import VirtualMemory
  with pytest.raises(IllegalInstruction, match="LDS"): snip(["buffer_load_dword v0, s[4:7], 0 offen lds"])
  mem = VirtualMemory()
  mem.map(0x10000, 256, np.zeros(256, np.uint8))
  for d1, d3 in ((1 << 31, 0x20000), (0, 0x20000 | 1 << 23)):
    with pytest.raises(IllegalInstruction, match="SWIZZLE_ENABLE or ADD_TID_ENABLE"):
      snip(["buffer_load_dword v1, v0, s[4:7], 0 offen"], v={0: LANES * 4}, s={4: 0x10000, 5: d1, 6: 256, 7: d3}, mem=mem)
  st = snip(["buffer_load_dword v1, v0, s[4:7], 0 offen"], v={0: LANES * 4}, s={4: 0x10000, 5: 0, 6: 256, 7: 0x20000}, mem=mem)
  assert not st.v[1, 0].any()


# ---- formatted buffer access: gfx9's DATA_FORMAT/NUM_FORMAT pairs on the gfx11 formats ---------------------------------
def test_gfx9_format_fields_match_llvm_mc(tmp_path):
  """GFX9_DATA / GFX9_NUM as llvm-mc-19 spells the MTBUF format field DATA_FORMAT | NUM_FORMAT << 4 for gfx942."""
  import re
  import subprocess
  from hcq.asm.emu.buffer_formats import GFX9_DATA, GFX9_NUM
  src = tmp_path / "f.s"
  src.write_text("".join(f"tbuffer_load_format_x v0, off, s[0:3], 0 format:{f}\n" for f in range(128)))
  out = subprocess.run([require_tool("llvm-mc-19"), "-triple=amdgcn", f"-mcpu={ARCH}", str(src)], capture_output=True, text=True,
                       check=True).stdout
  printed = [l for l in out.splitlines() if "tbuffer_load" in l]
  for f, line in enumerate(printed):   # the defaults (DATA_FORMAT_8, NUM_FORMAT_UNORM) are not printed
    data, num = re.search(r"BUF_DATA_FORMAT_(\w+)", line), re.search(r"BUF_NUM_FORMAT_(\w+)", line)
    data, num = data[1] if data else "8", num[1] if num else "UNORM"
    assert (GFX9_DATA[f & 15], GFX9_NUM[f >> 4]) == (data, num), line
  assert len(printed) == 128


def _gfx9_format_kernels(n: int, field: int) -> str:
  """ld: tbuffer_load_format_xyzw with `field`; fmt: buffer_load_format_xyzw with it in the V#; st: tbuffer_store."""
  from tests.test_emu_formats import _size
  size, d3 = _size(n), ((field & 15) << 15) | ((field >> 4) << 12)
  rsrc = "call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p1(ptr addrspace(1) %{}, i16 0, i32 4096, i32 {})"
  head = "%l = call i32 @llvm.amdgcn.workitem.id.x()\n  %off = mul i32 %l, {}\n  %p = getelementptr <4 x i32>, ptr addrspace(1) %{}, i32 %l"
  sig = "(ptr addrspace(1) %out, ptr addrspace(1) %in)"
  return f"""
define amdgpu_kernel void @ld{n}{sig} {{
  {head.format(size, "out")}
  %r = {rsrc.format("in", 0x20000)}
  %v = call <4 x i32> @llvm.amdgcn.raw.ptr.tbuffer.load.v4i32(ptr addrspace(8) %r, i32 %off, i32 0, i32 {field}, i32 0)
  store <4 x i32> %v, ptr addrspace(1) %p
  ret void
}}
define amdgpu_kernel void @fmt{n}{sig} {{
  {head.format(size, "out")}
  %r = {rsrc.format("in", d3)}
  %v = call <4 x i32> @llvm.amdgcn.raw.ptr.buffer.load.format.v4i32(ptr addrspace(8) %r, i32 %off, i32 0, i32 0)
  store <4 x i32> %v, ptr addrspace(1) %p
  ret void
}}
define amdgpu_kernel void @st{n}{sig} {{
  {head.format(size, "in")}
  %o = {rsrc.format("out", 0x20000)}
  %v = load <4 x i32>, ptr addrspace(1) %p
  call void @llvm.amdgcn.raw.ptr.tbuffer.store.v4i32(<4 x i32> %v, ptr addrspace(8) %o, i32 %off, i32 0, i32 {field}, i32 0)
  ret void
}}"""


def _gfx9_field(n: int) -> int:
  """The gfx9 DATA_FORMAT | NUM_FORMAT << 4 of gfx11 format n, from the names."""
  from hcq.asm.emu.buffer_formats import GFX9_DATA, GFX9_NUM, NAMES
  data, num = NAMES[n].rsplit("_", 1)
  return GFX9_DATA.index(data) | GFX9_NUM.index(num) << 4


@pytest.fixture(scope="module")
def gfx9_format_kernels(tmp_path_factory):
  import subprocess
  from hcq.asm.codeobject import read_code_object
  from tests.test_emu_formats import FORMATS, IR_HEAD
  d = tmp_path_factory.mktemp("fmt942")
  (d / "k.ll").write_text(IR_HEAD + "".join(_gfx9_format_kernels(n, _gfx9_field(n)) for n in FORMATS))
  subprocess.run([require_tool("clang-19"), "-target", "amdgcn-amd-amdhsa", f"-mcpu={ARCH}", "-nogpulib", "-O2", "-c", str(d / "k.ll"),
                  "-o", str(d / "k.o")], check=True)
  subprocess.run([require_tool("ld.lld-19"), "-shared", str(d / "k.o"), "-o", str(d / "k.so")], check=True)
  return read_code_object((d / "k.so").read_bytes())


def test_gfx9_formats_load_store(gfx9_format_kernels):
  """Every gfx11 format under its gfx9 DATA_FORMAT/NUM_FORMAT pair: tbuffer_load (MTBUF) and buffer_load_format (the
  V#'s pair) of 64 random records against test_emu_formats' scalar reference, then tbuffer_store gives records that
  load the same."""
  from hcq.asm.emu import run
  from tests.test_emu_formats import FORMATS, _parts, _records, _size, ref_load
  for n in FORMATS:
    r = np.random.default_rng(n)
    raw = _records(r, n)
    exp = np.array([ref_load(n, x.tobytes()) for x in raw], u32)
    nan_ok = _parts(n)[1] not in ("UINT", "SINT")
    for kname in (f"ld{n}", f"fmt{n}"):
      out = np.zeros((64, 4), u32)
      run(gfx9_format_kernels, [out, raw.reshape(-1).copy()], (1,), (64,), kernel=kname)
      same = (out == exp) | (np.isnan(out.view(f32)) & np.isnan(exp.view(f32)) & nan_ok)
      assert same.all(), (kname, np.nonzero(~same.all(1))[0][:4].tolist())
    stored = np.zeros(64 * _size(n), np.uint8)
    run(gfx9_format_kernels, [stored, exp.reshape(-1).copy()], (1,), (64,), kernel=f"st{n}")
    again = np.array([ref_load(n, x.tobytes()) for x in stored.reshape(64, -1)], u32)
    assert ((again == exp) | (np.isnan(again.view(f32)) & np.isnan(exp.view(f32)) & nan_ok)).all(), n


def test_gfx9_format_without_gfx11_counterpart_is_refused():
  from hcq.asm.emu.errors import IllegalInstruction
  from hcq.asm.emu.memory import VirtualMemory
  with pytest.raises(IllegalInstruction, match=r"DATA_FORMAT_32, NUM_FORMAT_UNORM\) is not modelled"):
    snip(["tbuffer_load_format_x v1, v0, s[4:7], 0 format:[BUF_DATA_FORMAT_32,BUF_NUM_FORMAT_UNORM] offen"])
  mem = VirtualMemory()
  mem.map(0x10000, 256, np.zeros(256, np.uint8))
  with pytest.raises(IllegalInstruction, match=r"DATA_FORMAT_INVALID"):   # the V#'s pair, read when the wave runs
    snip(["buffer_load_format_x v1, v0, s[4:7], 0 offen"], v={0: LANES * 4}, s={4: 0x10000, 5: 0, 6: 256, 7: 0}, mem=mem)


def test_gfx9_format_d16_spelling():
  """GCN's d16 spelling (tbuffer_load_format_d16_xyzw, buffer_load_format_d16_hi_x) packs as gfx11's d16 forms do."""
  from hcq.asm.emu.memory import VirtualMemory
  mem = VirtualMemory()
  mem.map(0x10000, 16, np.array([0, 255, 51, 0] * 4, np.uint8))
  d3 = (3 << 15) | (0 << 12)   # the V#'s pair: DATA_FORMAT_8_8, NUM_FORMAT_UNORM
  st = snip(["tbuffer_load_format_d16_xyzw v[2:3], off, s[0:3], 0 format:[BUF_DATA_FORMAT_8_8,BUF_NUM_FORMAT_UNORM]",
             "buffer_load_format_d16_hi_x v8, off, s[4:7], 0 offset:1"],
            s={0: 0x10000, 1: 0, 2: 16, 3: 0x20000, 4: 0x10000, 5: 0, 6: 16, 7: d3}, v={8: np.full(64, 0x1234, u32)}, mem=mem)
  h = lambda x: int(np.float16(x).view(np.uint16))
  assert int(st.v[2, 0, 0]) == h(0.0) | (h(1.0) << 16) and int(st.v[3, 0, 0]) == 0 | (h(1.0) << 16)
  assert int(st.v[8, 0, 0]) == 0x1234 | (h(1.0) << 16)


# out[0] = in[0] + in[1] + in[2]: the 12-byte uniform read as one s_load_dwordx4 (clang's way with a 3-int struct)
UNIFORM_SUM = """s_load_dwordx4 s[4:7], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
s_load_dwordx4 s[8:11], s[4:5], {offset:#x}
s_waitcnt lgkmcnt(0)
s_add_u32 s8, s8, s9
s_add_u32 s8, s8, s10
v_mov_b32 v0, 0
v_mov_b32 v1, s8
global_store_dword v0, v1, s[6:7]
s_endpgm"""


@pytest.mark.parametrize("offset", [0, 4096 - 16, 4096])
def test_run_maps_whole_pages(offset):
  """hcq.asm.emu.run maps each array in whole 4 KiB pages, as the GPU maps the driver's buffers: a 16-byte scalar read of
  a 12-byte array (legal, within its page) runs; one past the page-rounded mapping still faults."""
  from hcq.asm.emu.memory import PageFault
  from hcq.asm.emu.run import run
  from hcq.asm.kernel import Kernel
  elf = Kernel("uniform_sum", ARCH, args=[("src", "buffer"), ("dst", "buffer")]).add(UNIFORM_SUM.format(offset=offset)).to_elf()
  src, dst = np.array([3, 40, 500], np.int32), np.zeros(1, np.int32)
  if offset + 16 > 4096:
    with pytest.raises(PageFault, match="read of 16 bytes"):
      run(elf, [src, dst], (1, 1, 1), (64, 1, 1))
  else:
    run(elf, [src, dst], (1, 1, 1), (64, 1, 1))
    assert dst[0] == (543 if offset == 0 else 0)
