"""Formatted buffer access (MTBUF tbuffer_*, MUBUF buffer_*_format_*): the gfx11 format numbering against llvm-mc-19, and
every format's loads and stores through LLVM's own tbuffer intrinsics (clang-19 code, its descriptors and encodings),
compared with a scalar reference written from the format definitions."""
from __future__ import annotations
import math
import re
import subprocess

import numpy as np
import pytest

from tests.tools import require_tool

FORMATS = range(1, 64)


def test_format_numbers_match_llvm_mc(tmp_path):
  """BUF_FMT number -> name as llvm-mc-19 prints it (format 1, the default, prints as nothing)."""
  from hcq.asm.emu.buffer_formats import NAMES
  src = tmp_path / "f.s"
  src.write_text("".join(f"tbuffer_load_format_x v0, off, s[0:3], 0 format:{n}\n" for n in range(64)))
  out = subprocess.run([require_tool("llvm-mc-19"), "-triple=amdgcn", "-mcpu=gfx1100", str(src)], capture_output=True, text=True, check=True).stdout
  lines = [l for l in out.splitlines() if "tbuffer_load" in l]
  printed = [(re.search(r"format:\[BUF_FMT_(\w+)\]", l) or [None, "8_UNORM"])[1] for l in lines]
  assert printed == NAMES


def test_invalid_format_is_a_clear_fault():
  from hcq.asm.emu import IllegalInstruction
  from hcq.asm.emu.snippet import run_snippet
  with pytest.raises(IllegalInstruction, match="buffer format 0 is INVALID"):
    run_snippet("tbuffer_load_format_x v1, v0, s[0:3], 0 format:[BUF_FMT_INVALID] offen")


# ---- a scalar reference: one element at a time, from the format's definition ------------------------------------------
def _parts(n):
  from hcq.asm.emu.buffer_formats import NAMES
  *w, kind = NAMES[n].split("_")
  return [int(b) for b in reversed(w)], kind


def _small_float(bits, mb):
  e, m = bits >> mb, bits & ((1 << mb) - 1)
  if e == 31: return math.inf if m == 0 else math.nan
  return math.ldexp(m, -14 - mb) if e == 0 else math.ldexp(m | (1 << mb), e - 15 - mb)


def ref_load(n, record: bytes) -> list[int]:
  """The 4 dwords a tbuffer_load_format_xyzw writes for one record."""
  widths, kind = _parts(n)
  word, off, out = int.from_bytes(record, "little"), 0, []
  for b in widths:
    c = (word >> off) & ((1 << b) - 1); off += b
    s = c - (1 << b) if c >> (b - 1) else c
    if kind == "UINT": out.append(c)
    elif kind == "SINT": out.append(s & 0xffffffff)
    else:
      v = {"UNORM": lambda: c / ((1 << b) - 1), "SNORM": lambda: max(s / ((1 << (b - 1)) - 1), -1.0), "USCALED": lambda: float(c),
           "SSCALED": lambda: float(s)}.get(kind, lambda: None)()
      if v is None:
        if b == 32: out.append(c); continue
        v = float(np.uint16(c).view(np.float16)) if b == 16 else _small_float(c, b - 5)
      out.append(int(np.float32(v).view(np.uint32)))
  defaults = [0, 0, 0, 1 if kind in ("UINT", "SINT") else 0x3f800000]
  return out + defaults[len(out):]


def _size(n): return sum(_parts(n)[0]) // 8


IR_HEAD = """target triple = "amdgcn-amd-amdhsa"
declare ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p1(ptr addrspace(1), i16, i32, i32)
declare <4 x i32> @llvm.amdgcn.raw.ptr.tbuffer.load.v4i32(ptr addrspace(8), i32, i32, i32, i32)
declare void @llvm.amdgcn.raw.ptr.tbuffer.store.v4i32(<4 x i32>, ptr addrspace(8), i32, i32, i32, i32)
declare <4 x i32> @llvm.amdgcn.raw.ptr.buffer.load.format.v4i32(ptr addrspace(8), i32, i32, i32)
declare i32 @llvm.amdgcn.workitem.id.x()
"""


def _kernel(n):
  """ld<n>: out[l] = tbuffer_load_format_xyzw(in, l*size, format n); st<n>: tbuffer_store(in[l] dwords) at l*size."""
  size = _size(n)
  return f"""
define amdgpu_kernel void @ld{n}(ptr addrspace(1) %out, ptr addrspace(1) %in) {{
  %l = call i32 @llvm.amdgcn.workitem.id.x()
  %r = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p1(ptr addrspace(1) %in, i16 0, i32 4096, i32 u0x30000000)
  %off = mul i32 %l, {size}
  %v = call <4 x i32> @llvm.amdgcn.raw.ptr.tbuffer.load.v4i32(ptr addrspace(8) %r, i32 %off, i32 0, i32 {n}, i32 0)
  %p = getelementptr <4 x i32>, ptr addrspace(1) %out, i32 %l
  store <4 x i32> %v, ptr addrspace(1) %p
  ret void
}}
define amdgpu_kernel void @st{n}(ptr addrspace(1) %out, ptr addrspace(1) %in) {{
  %l = call i32 @llvm.amdgcn.workitem.id.x()
  %o = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p1(ptr addrspace(1) %out, i16 0, i32 4096, i32 u0x30000000)
  %p = getelementptr <4 x i32>, ptr addrspace(1) %in, i32 %l
  %v = load <4 x i32>, ptr addrspace(1) %p
  %off = mul i32 %l, {size}
  call void @llvm.amdgcn.raw.ptr.tbuffer.store.v4i32(<4 x i32> %v, ptr addrspace(8) %o, i32 %off, i32 0, i32 {n}, i32 0)
  ret void
}}
define amdgpu_kernel void @fmt{n}(ptr addrspace(1) %out, ptr addrspace(1) %in) {{
  %l = call i32 @llvm.amdgcn.workitem.id.x()
  %r = call ptr addrspace(8) @llvm.amdgcn.make.buffer.rsrc.p1(ptr addrspace(1) %in, i16 0, i32 4096, i32 {0x30000000 | (n << 12)})
  %off = mul i32 %l, {size}
  %v = call <4 x i32> @llvm.amdgcn.raw.ptr.buffer.load.format.v4i32(ptr addrspace(8) %r, i32 %off, i32 0, i32 0)
  %p = getelementptr <4 x i32>, ptr addrspace(1) %out, i32 %l
  store <4 x i32> %v, ptr addrspace(1) %p
  ret void
}}"""


@pytest.fixture(scope="module")
def format_kernels(tmp_path_factory):
  from hcq.asm.codeobject import read_code_object
  d = tmp_path_factory.mktemp("fmt")
  (d / "k.ll").write_text(IR_HEAD + "".join(_kernel(n) for n in FORMATS))
  clang = require_tool("clang-19")
  subprocess.run([clang, "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib", "-O2", "-c", str(d / "k.ll"), "-o", str(d / "k.o")], check=True)
  subprocess.run([require_tool("ld.lld-19"), "-shared", str(d / "k.o"), "-o", str(d / "k.so")], check=True)
  return read_code_object((d / "k.so").read_bytes())


def _records(rng, n, count=64):
  """Random record bytes, with the float formats' specials (inf, NaN, denormals) among them."""
  raw = rng.integers(0, 256, (count, _size(n)), dtype=np.uint8)
  return raw


@pytest.mark.parametrize("n", FORMATS)
def test_format_load_store(format_kernels, n):
  """tbuffer_load (MTBUF) and buffer_load_format (MUBUF, the format from the V#) of 64 random records, compared with
  the scalar reference; then tbuffer_store of those loaded values must give back records that load the same."""
  from hcq.asm.emu import run
  rng = np.random.default_rng(n)
  raw = _records(rng, n)
  exp = np.array([ref_load(n, r.tobytes()) for r in raw], np.uint32)
  for kname in (f"ld{n}", f"fmt{n}"):
    out = np.zeros((64, 4), np.uint32)
    run(format_kernels, [out, raw.reshape(-1).copy()], (1,), (64,), kernel=kname)
    same = (out == exp) | (np.isnan(out.view(np.float32)) & np.isnan(exp.view(np.float32)) & (_parts(n)[1] not in ("UINT", "SINT")))
    bad = np.nonzero(~same.all(1))[0]
    assert bad.size == 0, f"{kname}: record {raw[bad[0]].tobytes().hex()} loads {out[bad[0]].tolist()}, expected {exp[bad[0]].tolist()}"
  stored = np.zeros(64 * _size(n), np.uint8)
  run(format_kernels, [stored, exp.reshape(-1).copy()], (1,), (64,), kernel=f"st{n}")
  again = np.array([ref_load(n, r.tobytes()) for r in stored.reshape(64, -1)], np.uint32)
  fl = np.isnan(again.view(np.float32)) & np.isnan(exp.view(np.float32)) & (_parts(n)[1] == "FLOAT")
  assert ((again == exp) | fl).all(), f"format {n}: store then load differs at {np.nonzero(~((again == exp) | fl).all(1))[0][:4].tolist()}"


def test_store_conversions():
  """Stores clamp and round: UNORM/SNORM scale with round-to-nearest-even and clamp, NaN stores 0, integers keep their
  low bits, 10/11-bit floats round to nearest even and send negatives to 0."""
  from hcq.asm.emu import VirtualMemory
  from hcq.asm.emu.snippet import run_snippet
  f32 = np.float32
  mem = VirtualMemory()
  buf = np.zeros(64, np.uint8)
  mem.map(0x10000, 64, buf)
  rs = {0: 0x10000, 1: 0, 2: 64, 3: 3 << 28}
  vals = {1: f32(0.5), 2: f32(-2.0), 3: f32(np.nan), 4: f32(1.0)}
  run_snippet("tbuffer_store_format_xyzw v[1:4], off, s[0:3], 0 format:[BUF_FMT_8_8_8_8_UNORM]\n"
              "tbuffer_store_format_xyzw v[1:4], off, s[0:3], 0 format:[BUF_FMT_8_8_8_8_SNORM] offset:4\n"
              "tbuffer_store_format_xy v[5:6], off, s[0:3], 0 format:[BUF_FMT_16_16_UINT] offset:8\n"
              "tbuffer_store_format_xyz v[7:9], off, s[0:3], 0 format:[BUF_FMT_10_11_11_FLOAT] offset:12\n"
              "tbuffer_store_format_x v1, off, s[0:3], 0 format:[BUF_FMT_8_8_8_8_UNORM] offset:16",
              s=rs, v={**vals, 5: 0x12345, 6: 0xfffffffe, 7: f32(1.0 + 2 ** -7), 8: f32(-3.0), 9: f32(65536.0)}, mem=mem, exec_mask=1)
  assert buf[:4].tolist() == [128, 0, 0, 255]              # 0.5*255 = 127.5 -> 128 (even), -2 -> 0, NaN -> 0, 1 -> 255
  assert buf[4:8].view(np.int8).tolist() == [64, -127, 0, 127]   # 0.5*127 = 63.5 -> 64, clamp to -1 -> -127
  assert buf[8:12].view(np.uint16).tolist() == [0x2345, 0xfffe]
  w = int(buf[12:16].view(np.uint32)[0])
  assert (w & 0x7ff, (w >> 11) & 0x7ff, w >> 22) == (0x3c0 | 0, 0, 0x3e0)   # 1+2^-7 rounds to 1.0 (tie, even); -3 -> 0; 65536 -> inf
  assert buf[16:20].tolist() == [128, 0, 0, 0]            # store_format_x: the other components are written as 0


def test_d16_and_defaults():
  """d16 loads pack two 16-bit results per VGPR (f16 for float formats); a component the format lacks reads 0, W 1.0."""
  from hcq.asm.emu import VirtualMemory
  from hcq.asm.emu.snippet import run_snippet
  mem = VirtualMemory()
  buf = np.array([0, 255, 51, 0] * 4, np.uint8)
  mem.map(0x10000, 16, buf)
  st = run_snippet("tbuffer_load_d16_format_xyzw v[2:3], off, s[0:3], 0 format:[BUF_FMT_8_8_UNORM]\n"
                   "tbuffer_load_format_xyzw v[4:7], off, s[0:3], 0 format:[BUF_FMT_8_8_UINT]\n"
                   "buffer_load_d16_hi_format_x v8, off, s[4:7], 0 offset:1",   # MUBUF: the format (8_8_UNORM = 14) from the V#
                   s={0: 0x10000, 1: 0, 2: 16, 3: 3 << 28, 4: 0x10000, 5: 0, 6: 16, 7: (3 << 28) | (14 << 12)}, v={8: 0x1234}, mem=mem, exec_mask=1)
  h = lambda x: int(np.float16(x).view(np.uint16))
  assert int(st.v[2, 0, 0]) == h(0.0) | (h(1.0) << 16) and int(st.v[3, 0, 0]) == 0 | (h(1.0) << 16)
  assert st.v[4:8, 0, 0].tolist() == [0, 255, 0, 1]
  assert int(st.v[8, 0, 0]) == 0x1234 | (h(1.0) << 16)
