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
  """wave_shl/shr/rol/ror by one lane, row_bcast:15 / :31 under their row masks, bound_ctrl, bank_mask."""
  a, b = (LANES * 10 + 1).astype(u32), (LANES * 1000).astype(u32)
  old = np.full(64, 0xdead, u32)
  st = snip(["v_mov_b32_dpp v2, v0 wave_shl:1 row_mask:0xf bank_mask:0xf",
             "v_mov_b32_dpp v3, v0 wave_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:0",
             "v_mov_b32_dpp v4, v0 wave_rol:1 row_mask:0xf bank_mask:0xf",
             "v_mov_b32_dpp v5, v0 wave_ror:1 row_mask:0xf bank_mask:0xf",
             "v_mov_b32_dpp v6, v0 row_bcast:15 row_mask:0xa bank_mask:0xf",
             "v_mov_b32_dpp v7, v0 row_bcast:31 row_mask:0xc bank_mask:0xf",
             "v_add_u32_dpp v8, v0, v1 row_shr:1 row_mask:0xf bank_mask:0x5"],
            v={0: a, 1: b, **{r: old for r in range(2, 9)}})
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
  xf32, f64, sparse smfmac), every DS and FLAT opcode; gfx9 buffer instructions are refused (V# not modelled)."""
  from hcq.asm.emu.engine import coverage
  cov = coverage(ARCH)
  assert cov["VOPC"][2] == [] and cov["DS"][2] == [] and cov["FLAT"][2] == [] and cov["VOP3SD"][2] == []
  assert cov["VOP3P_MAI"][0] == len(MFMA)
  assert all(any(k in m for k in ("fp8", "bf8", "xf32", "f64", "smfmac")) for m in cov["VOP3P_MAI"][2])
  assert sum(c[0] for c in cov.values()) >= 1612   # of 1,844 opcodes
