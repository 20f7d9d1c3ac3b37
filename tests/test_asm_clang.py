"""hcq.asm on real compiler output: clang-19 compiles a small OpenCL corpus for each arch, every instruction line
of its assembly encodes with our assembler exactly as with llvm-mc, and the whole text (labels, branches)
assembles to bytes that llvm-mc disassembles to our disassembly."""
from __future__ import annotations
import re
import shutil
import subprocess

import pytest

from hcq.asm import assemble, decode_all, llvm
from hcq.asm.fast_asm import assembler
from hcq.asm.fast_decode import FAST_ARCHS
from hcq.asm.isa import load
from hcq.asm.parser import parse_line
from tests.tools import require

ARCHS = ("gfx1100", "gfx1201", "gfx942")
# kernels chosen for instruction variety: scalar and vector ALU, f16/f64, conversions, loops and branches,
# global/LDS memory, atomics, barriers, cross-lane moves
SOURCE = r"""
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define GID() ((int)__builtin_amdgcn_workgroup_id_x() * (int)__builtin_amdgcn_workgroup_size_x() + (int)__builtin_amdgcn_workitem_id_x())
__kernel void saxpy(__global float* y, __global const float* x, float a, int n) { int i = GID(); if (i < n) y[i] = a * x[i] + y[i]; }
__kernel void math(__global float* o, __global const float* a) {
  int i = GID(); float x = a[i];
  o[4*i] = __builtin_sqrtf(x) / (x + 1.5f); o[4*i+1] = __builtin_expf(x); o[4*i+2] = __builtin_sinf(x); o[4*i+3] = __builtin_fmaf(x, 3.0f, -x); }
__kernel void halfs(__global half* o, __global const half* a, __global const half* b) { int i = GID(); o[i] = a[i] * b[i] + (half)1.0; }
__kernel void doubles(__global double* o, __global const double* a) { int i = GID(); o[i] = a[i] * a[i] / 3.0 + 0.5; }
__kernel void ints(__global int* o, __global const int* a, __global const uint* b) {
  int i = GID(); o[3*i] = a[i] / 7 + (a[i] >> 3); o[3*i+1] = (int)(b[i] % 13u) ^ a[i]; o[3*i+2] = (int)(long)a[i] * (long)b[i] >> 32; }
__kernel void cvt(__global int* o, __global float* f, __global const float* a, __global const int* b) {
  int i = GID(); o[i] = (int)a[i]; f[i] = (float)b[i] + (float)(uint)b[i]; }
__kernel void loop(__global float* o, __global const float* a, int n) { float r = 0; for (int k = 0; k < n; k++) r = r * a[k] + (float)k; o[GID()] = r; }
__kernel void lds(__global float* o, __global const float* a) {
  __local float t[256]; int l = (int)__builtin_amdgcn_workitem_id_x(); t[l] = a[GID()];
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  o[GID()] = t[255 - l] + t[(l + 1) & 255]; }
__kernel void atomics(__global int* c, __global const int* a) { __atomic_fetch_add(&c[0], a[GID()], __ATOMIC_RELAXED); __atomic_fetch_max(&c[1], a[GID()], __ATOMIC_RELAXED); }
__kernel void lanes(__global int* o, __global const int* a) { int i = GID(); o[i] = __builtin_amdgcn_ds_bpermute(4 * ((i + 1) & 31), a[i]) + __builtin_amdgcn_readfirstlane(a[i]); }
#if defined(__gfx942__)
__kernel void mfma(__global float16* o, __global const half4* a, __global const half4* b) { int i = GID(); o[i] = __builtin_amdgcn_mfma_f32_32x32x8f16(a[i], b[i], o[i], 1, 2, 3); }
__kernel void mfma_i8(__global int4* o, __global const long* a) { int i = GID(); o[i] = __builtin_amdgcn_mfma_i32_16x16x32_i8(a[i], a[i + 1], o[i], 0, 0, 0); }
#endif
"""
_BRANCH = re.compile(r"^(s_branch|s_cbranch_\w+)\s+(\.?[A-Za-z_][\w.$]*)$")


@pytest.fixture(scope="module", params=ARCHS)
def compiled(request, tmp_path_factory) -> tuple[str, list[str]]:
  require(llvm.available() and shutil.which("clang-19") is not None, "clang-19 and llvm-mc-19")
  d = tmp_path_factory.mktemp("clang")
  (d / "kernels.cl").write_text(SOURCE)
  subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={request.param}", "-O2", "-nogpulib",
                  "-S", "-o", str(d / "kernels.s"), str(d / "kernels.cl")], check=True, capture_output=True)
  return request.param, (d / "kernels.s").read_text().splitlines()


def text_section(lines: list[str]) -> list[str]:
  """The lines of the .text section, comments removed."""
  out, in_text = [], False
  for line in lines:
    body = line.split(";")[0].strip()
    if body.startswith((".text", ".section")): in_text = body.startswith(".text") or ".text" in body.split(",")[0]
    elif in_text and body: out.append(body)
  return out


def instruction_lines(lines: list[str]) -> list[str]:
  """The instructions of the .text section: no directives or labels."""
  return [l for l in text_section(lines) if not l.startswith(".") and not l.endswith(":")]


def test_clang_output_encodes_like_llvm_mc(compiled):
  arch, text = compiled
  isa = load(arch)
  lines = instruction_lines(text)
  assert len(lines) > 300
  # branches name labels: give both assemblers the same numeric target
  lines = [_BRANCH.sub(r"\1 7", l) for l in lines]
  theirs = llvm.assemble_each(lines, arch)
  bad, straight = [], 0
  for line, want in zip(lines, theirs):
    mine = parse_line(isa, line).encode()
    if mine != want: bad.append(f"{line!r}: ours {mine.hex()}, llvm-mc {want.hex() if isinstance(want, bytes) else want}")
    fast = assembler(isa).encode(line)  # straight to bytes, where it answers
    straight += fast is not None
    if fast is not None and fast != want: bad.append(f"{line!r}: ours straight to bytes {fast.hex()}, llvm-mc {want.hex() if isinstance(want, bytes) else want}")
  assert not bad, "\n".join(bad[:20])
  if arch in FAST_ARCHS: assert straight > 0.9 * len(lines)  # compiler output is what the straight path is for


def test_clang_output_assembles_and_disassembles(compiled):
  """The whole .text, labels and branches included, assembles; llvm-mc disassembles our bytes to our disassembly."""
  arch, text = compiled
  code = assemble("\n".join(text_section(text)), arch)
  insts = decode_all(code, arch)
  assert len(insts) == len(instruction_lines(text))
  theirs = llvm.disassemble_each([i.encode() for i in insts], arch)
  bad = [f"{i.encode().hex()}: ours {str(i)!r}, llvm-mc {t.text if t else None!r}" for i, t in zip(insts, theirs) if t is None or t.text != str(i)]
  assert not bad, "\n".join(bad[:20])
