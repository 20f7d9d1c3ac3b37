"""Emulator numerics at the edges: the count-leading/trailing-bits family on gfx1100, gfx1201 and gfx942 against
definitions written from the RDNA3/RDNA4/CDNA3 ISA guides over edge values; the int64 -> f32/f16/f64 conversions
clang-19 emits (they are built on v_cls_i32 / v_ffbh_i32) against numpy."""
from __future__ import annotations

import numpy as np
import pytest

from hcq.asm.emu.snippet import run_snippet
from tests.tools import compile_opencl

u32, i32, i64, u64 = np.uint32, np.int32, np.int64, np.uint64


# ---- reference definitions, one per ISA pseudocode; `bits`-wide unsigned Python ints in, a signed int out ----
def ref_clz(x: int, bits: int) -> int:
  """V_CLZ_I32_U32 / S_CLZ_I32_U32/U64 (gfx9 V_FFBH_U32, S_FLBIT_I32_B32/B64): index from the MSB of the first 1; -1 if none."""
  for i in range(bits):
    if x >> (bits - 1 - i) & 1: return i
  return -1


def ref_ctz(x: int, bits: int) -> int:
  """V_CTZ_I32_B32 / S_CTZ_I32_B32/B64 (gfx9 V_FFBL_B32, S_FF1_I32_B32/B64): index from the LSB of the first 1; -1 if none."""
  for i in range(bits):
    if x >> i & 1: return i
  return -1


def ref_cls(x: int, bits: int) -> int:
  """V_CLS_I32 / S_CLS_I32/_I64 (gfx9 V_FFBH_I32, S_FLBIT_I32/_I64): for i in 1..bits-1, the first i where bit
  [bits-1-i] differs from the sign bit; -1 if every bit equals it."""
  sign = x >> (bits - 1) & 1
  for i in range(1, bits):
    if (x >> (bits - 1 - i) & 1) != sign: return i
  return -1


def ref_ff0(x: int, bits: int) -> int:
  """gfx9 S_FF0_I32_B32/B64: index from the LSB of the first 0; -1 if none."""
  return ref_ctz(~x & ((1 << bits) - 1), bits)


def edge_values(bits: int) -> list[int]:
  """0, -1, 1, each 2^k, 2^k - 1, -2^k, -2^k - 1, the sign bit alone and with each other bit (as `bits`-wide unsigned)."""
  m = (1 << bits) - 1
  vals = {0, m, 1, 1 << (bits - 1), m >> 1}
  for k in range(bits):
    vals |= {1 << k, (1 << k) - 1, -(1 << k) & m, (-(1 << k) - 1) & m, (1 << (bits - 1)) | (1 << k)}
  if bits == 64:   # high half all sign bits with a low half of either sign: the int64 -> float lowering's hard case
    vals |= {0xffffffff_00000000 | lo for lo in (0, 1, 0x7fffffff, 0x80000000, 0xffffffff)}
    vals |= {lo for lo in (0x7fffffff, 0x80000000, 0xffffffff)}
  return sorted(vals)


# name on each arch: (mnemonic, reference, source width)
VALU = {"gfx1100": [("v_cls_i32_e32", ref_cls), ("v_clz_i32_u32_e32", ref_clz), ("v_ctz_i32_b32_e32", ref_ctz)],
        "gfx942": [("v_ffbh_i32_e32", ref_cls), ("v_ffbh_u32_e32", ref_clz), ("v_ffbl_b32_e32", ref_ctz)]}
VALU["gfx1201"] = VALU["gfx1100"]
SALU = {"gfx1100": [("s_cls_i32", ref_cls, 32), ("s_cls_i32_i64", ref_cls, 64), ("s_clz_i32_u32", ref_clz, 32),
                    ("s_clz_i32_u64", ref_clz, 64), ("s_ctz_i32_b32", ref_ctz, 32), ("s_ctz_i32_b64", ref_ctz, 64)],
        "gfx942": [("s_flbit_i32", ref_cls, 32), ("s_flbit_i32_i64", ref_cls, 64), ("s_flbit_i32_b32", ref_clz, 32),
                   ("s_flbit_i32_b64", ref_clz, 64), ("s_ff1_i32_b32", ref_ctz, 32), ("s_ff1_i32_b64", ref_ctz, 64),
                   ("s_ff0_i32_b32", ref_ff0, 32), ("s_ff0_i32_b64", ref_ff0, 64)]}
SALU["gfx1201"] = SALU["gfx1100"]
ARCHS = ["gfx1100", "gfx1201", "gfx942"]


@pytest.mark.parametrize("arch", ARCHS)
def test_valu_leading_bits_match_the_isa(arch):
  lanes = 64 if arch == "gfx942" else 32
  vals = edge_values(32)
  vals += [0] * (-len(vals) % lanes)
  for name, ref in VALU[arch]:
    got = []
    for at in range(0, len(vals), lanes):
      st = run_snippet(f"{name} v1, v0", v={0: np.array(vals[at:at + lanes], np.int64)}, lanes=lanes, arch=arch)
      got += st.v[1, 0].view(i32).tolist()
    bad = [(hex(x), g, ref(x, 32)) for x, g in zip(vals, got) if g != ref(x, 32)]
    assert not bad, f"{arch} {name}: (input, emulator, ISA) {bad[:6]}"


@pytest.mark.parametrize("arch", ARCHS)
def test_salu_leading_bits_match_the_isa(arch):
  for name, ref, bits in SALU[arch]:
    vals = edge_values(bits)
    src = "s4" if bits == 32 else "s[4:5]"
    st = run_snippet(f"{name} s2, {src}", s={4: [x & 0xffffffff for x in vals], 5: [x >> 32 for x in vals]},
                     waves=len(vals), lanes=64 if arch == "gfx942" else 32, arch=arch)
    got = st.s[2].astype(i64).astype(u32).view(i32).tolist()
    bad = [(hex(x), g, ref(x, bits)) for x, g in zip(vals, got) if g != ref(x, bits)]
    assert not bad, f"{arch} {name}: (input, emulator, ISA) {bad[:6]}"


I64_TO_FLOAT = r"""
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void cvt(__global const long* x, __global const ulong* ux, __global float* f, __global half* h, __global double* d,
                  __global float* uf, __global double* ud) {
  size_t i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  f[i] = (float)x[i]; h[i] = (half)x[i]; d[i] = (double)x[i]; uf[i] = (float)ux[i]; ud[i] = (double)ux[i];
}
"""


@pytest.mark.parametrize("arch", ARCHS)
def test_int64_to_float_conversions_match_numpy(tmp_path, arch):
  """clang-19's int64 -> f32/f16/f64 lowering (v_cls_i32 / v_ffbh_i32 on the high half, a shift, a 32-bit convert, an
  ldexp) over every edge value of a 64-bit integer: 2^62 + 1 gave 1.0 and INT64_MAX gave -2.0 with an off-by-one cls."""
  from hcq.asm.emu import run
  co = compile_opencl(I64_TO_FLOAT, tmp_path, mcpu=arch)
  ux = np.array(edge_values(64) + [2**62 + 1, 2**63 - 1, 3 << 61, 12345678901234567], u64)
  n = len(ux) + (-len(ux) % 64)
  ux = np.concatenate([ux, np.zeros(n - len(ux), u64)])
  x = ux.view(i64)
  outs = [np.zeros(n, np.float32), np.zeros(n, np.float16), np.zeros(n, np.float64), np.zeros(n, np.float32), np.zeros(n, np.float64)]
  with np.errstate(over="ignore"):
    want = [x.astype(np.float32), x.astype(np.float16), x.astype(np.float64), ux.astype(np.float32), ux.astype(np.float64)]
  run(co, [x, ux, *outs], global_size=(n // 64,), local_size=(64,), kernel="cvt")
  for what, got, exp in zip(["f32", "f16", "f64", "u64->f32", "u64->f64"], outs, want):
    bad = np.nonzero(got.view(f"u{got.itemsize}") != exp.view(f"u{exp.itemsize}"))[0]
    assert not len(bad), f"{arch} int64 -> {what}: {[(int(x[i]), float(got[i]), float(exp[i])) for i in bad[:6]]}"


TOP = 2**64 - 4
ADDRESS_EDGES = [   # (instruction, registers, the faulting address the ISA's address arithmetic gives)
  ("global_load_b32 v1, v[2:3], off", {"v": {2: TOP & 0xffffffff, 3: TOP >> 32}}, TOP),
  ("global_load_b64 v[4:5], v[2:3], off", {"v": {2: TOP & 0xffffffff, 3: TOP >> 32}}, TOP),
  ("global_store_b32 v[2:3], v1, off", {"v": {2: TOP & 0xffffffff, 3: TOP >> 32}}, TOP),
  ("global_atomic_add_u32 v1, v[2:3], v1, off glc", {"v": {2: TOP & 0xffffffff, 3: TOP >> 32}}, TOP),
  ("global_load_b32 v1, v[2:3], off offset:-4", {"v": {2: 0, 3: 0}}, TOP),                 # 0 - 4 wraps to 2^64 - 4
  ("global_load_b32 v1, v2, s[4:5]", {"s": {4: TOP & 0xffffffff, 5: TOP >> 32}, "v": {2: 0}}, TOP),
  ("global_load_b32 v1, v[2:3], off", {"v": {2: 0xfffffffc, 3: 0xffff}}, 2**48 - 4),
  ("flat_load_b32 v1, v[2:3]", {"v": {2: TOP & 0xffffffff, 3: TOP >> 32}}, TOP),
  ("flat_store_b32 v[2:3], v1", {"v": {2: TOP & 0xffffffff, 3: TOP >> 32}}, TOP),
  ("s_load_b32 s6, s[4:5], 0x0", {"s": {4: TOP & 0xffffffff, 5: TOP >> 32}}, TOP),
  ("s_load_b128 s[8:11], s[4:5], 0x0", {"s": {4: 0xfffffff0, 5: 0xffffffff}}, 2**64 - 16),
  ("s_load_b32 s6, s[4:5], 0x0", {"s": {4: 0xfffffffc, 5: 0xffff}}, 2**48 - 4),
  # a V# with base 2^48 - 4 (the top of its 48-bit field), OOB_SELECT 3 (no range check)
  ("buffer_load_b32 v1, off, s[8:11], 0", {"s": {8: 0xfffffffc, 9: 0xffff, 10: 0xffffffff, 11: 3 << 28}}, 2**48 - 4),
  ("buffer_store_b32 v1, off, s[8:11], 0", {"s": {8: 0xfffffffc, 9: 0xffff, 10: 0xffffffff, 11: 3 << 28}}, 2**48 - 4),
]


@pytest.mark.parametrize("text,regs,address", ADDRESS_EDGES, ids=[f"{t.split()[0]}@{a:#x}" for t, _, a in ADDRESS_EDGES])
def test_addresses_near_the_top_fault_with_the_address(text, regs, address):
  """An access at an unmapped address near 2^64 or 2^48 is a PageFault naming the address (it was an IndexError from a
  negative offset into the mapping below it)."""
  from hcq.asm.emu import PageFault
  with pytest.raises(PageFault) as e:
    run_snippet(text, lanes=32, exec_mask=1, **regs)
  assert e.value.address == address, f"{text}: fault at {e.value.address:#x}, expected {address:#x}"
