"""Reading AMDGPU code objects made by clang/lld (ET_DYN and ET_REL), judged against llvm-nm and llvm-readelf."""
from __future__ import annotations
import json
import subprocess

import pytest

from hcq.asm.codeobject import CodeObjectError, read_code_object
from hcq.asm.msgpack import pack, unpack
from tests.tools import compile_opencl, require_tool

KERNELS = r"""
__kernel void add(__global float *a, __global const float *b, float k, int n) {
  int i = __builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x();
  if (i < n) a[i] += b[i] * k;
}
__constant int table[4] = {1, 2, 3, 4};
__kernel void lookup(__global int *out) { out[__builtin_amdgcn_workitem_id_x()] = table[__builtin_amdgcn_workitem_id_x() & 3]; }
"""


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
  d = tmp_path_factory.mktemp("co")
  compile_opencl(KERNELS, d)
  return d


def nm(path) -> dict[str, int]:
  out = subprocess.run([require_tool("llvm-nm-19"), "--defined-only", str(path)], capture_output=True, text=True, check=True).stdout
  return {parts[2]: int(parts[0], 16) for parts in (line.split() for line in out.splitlines()) if len(parts) == 3}


def test_linked_code_object(objects):
  co = read_code_object((objects / "k.so").read_bytes())
  syms = nm(objects / "k.so")
  assert co.arch == "gfx1100" and set(co.kernels) == {"add", "lookup"}
  for name, k in co.kernels.items():
    assert k.descriptor_offset == syms[f"{name}.kd"] and k.code_offset == syms[name]
    assert k.wavefront_size == 32
  add = co.kernels["add"]
  assert [(a.offset, a.size, a.value_kind) for a in add.args[:4]] == [(0, 8, "global_buffer"), (8, 8, "global_buffer"), (16, 4, "by_value"), (20, 4, "by_value")]
  notes = subprocess.run([require_tool("llvm-readelf-19"), "--notes", str(objects / "k.so")], capture_output=True, text=True, check=True).stdout
  assert f".kernarg_segment_size: {add.kernarg_size}" in notes


def test_relocatable_object_is_laid_out(objects):
  """An ET_REL object: sections placed by us, the descriptor's REL64 to its code resolved, the rest kept for load time."""
  co = read_code_object((objects / "k.o").read_bytes())
  syms = nm(objects / "k.o")
  linked = read_code_object((objects / "k.so").read_bytes())
  for name, k in co.kernels.items():
    assert bytes(k.descriptor)[48:60] == bytes(linked.kernels[name].descriptor)[48:60]  # rsrc3, rsrc1, rsrc2
  add, ladd = co.kernels["add"], linked.kernels["add"]  # no relocations in add: the same bytes wherever it is placed
  assert co.image[add.code_offset:add.code_offset + 96] == linked.image[ladd.code_offset:ladd.code_offset + 96]
  # lookup reaches `table` PC-relatively (s_getpc_b64 + REL32_LO/HI): the offsets must land on the table in our layout
  import struct
  code = co.image[co.kernels["lookup"].code_offset:]
  words = [struct.unpack_from("<I", code, i)[0] for i in range(0, 64, 4)]
  getpc = 4 * next(i for i, w in enumerate(words) if w >> 23 == 0x17D and (w >> 8) & 0xff == 0x47)  # SOP1 s_getpc_b64
  lo = struct.unpack_from("<i", code, getpc + 8)[0]  # s_add_u32 sX, sX, literal: the literal follows the opcode word
  table = co.kernels["lookup"].code_offset + getpc + 4 + lo
  assert struct.unpack_from("<4i", co.image, table) == (1, 2, 3, 4), (getpc, lo)
  assert "lookup" in syms


@pytest.mark.parametrize("data,message", [
  (b"hello", "not an ELF file"), (b"\x7fELF\x01\x01" + bytes(58), "not a 64-bit little-endian ELF"),
  (b"\x7fELF\x02\x01\x01" + bytes(11) + (62).to_bytes(2, "little") + bytes(44), "ELF machine 62 is not AMDGPU"),
])
def test_bad_input(data, message):
  with pytest.raises(CodeObjectError, match=message):
    read_code_object(data)


def test_msgpack_round_trip():
  obj = {"amdhsa.version": [1, 2], "amdhsa.kernels": [{".name": "k", ".args": [{".offset": 0, ".size": 8}] * 20, ".x": -70000, ".f": 0.5}],
         "big": 1 << 40, "s": "x" * 300, "b": b"\x00\x01", "n": None, "t": True}
  assert unpack(pack(obj)) == obj
  assert json.loads(json.dumps(unpack(pack({"a": 1}))))["a"] == 1
