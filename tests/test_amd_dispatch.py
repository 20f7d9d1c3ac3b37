"""Kernels on each emulated board (gfx1100, gfx1201, gfx942; clang-19 and hcq.asm code for it) through the whole driver: dispatch shapes, ordering with SDMA, replay, many launches, faults.

Every launch here goes through KFD ioctls, PM4 written by the driver, the strict mock command processor and the
wavefront emulator, exactly as on a real GPU except the last step.
"""
from __future__ import annotations
import os

import numpy as np
import pytest

import hcq
from hcq.asm.kernel import Kernel
from hcq.errors import GPUFault, HCQError, ProgramArgumentError
from hcq.sym import Variable
from tests.amd_boards import arch, arch_of, asm_for, heavy  # noqa: F401 (arch: the board fixture)
from tests.tools import compile_opencl

IDS = r"""
__attribute__((amdgpu_flat_work_group_size(1, 1024)))  // OpenCL kernels are built for 256 threads without it
__kernel void ids(__global uint *out, uint ngx, uint ngy, uint lx, uint ly, uint lz) {
  uint tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y(), tz = __builtin_amdgcn_workitem_id_z();
  uint gx = __builtin_amdgcn_workgroup_id_x(), gy = __builtin_amdgcn_workgroup_id_y(), gz = __builtin_amdgcn_workgroup_id_z();
  uint lid = (tz * ly + ty) * lx + tx;
  uint group = (gz * ngy + gy) * ngx + gx;
  out[group * lx * ly * lz + lid] = group * 4096 + lid;
}
__kernel void scale(__global float *x, float k) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  x[i] = x[i] * k + 1.0f;
}
"""


@pytest.fixture(scope="module")
def dev(arch):
  return hcq.Device(f"MOCKKFD+AMD::{arch}")


@pytest.fixture(scope="module")
def code_object(tmp_path_factory, arch):
  return compile_opencl(IDS, tmp_path_factory.mktemp("k"), mcpu=arch_of(arch))


@pytest.mark.parametrize("grid,block", [((1, 1, 1), (1, 1, 1)), ((7, 1, 1), (64, 1, 1)), ((33, 1, 1), (32, 1, 1)), ((1, 1, 1), (1024, 1, 1)),
                                        ((3, 5, 1), (8, 8, 1)), ((2, 3, 4), (4, 4, 4)), ((2, 2, 2), (3, 5, 7)), ((4, 1, 1), (65, 1, 1))])
def test_dispatch_shapes(dev, code_object, grid, block):
  prg = dev.program(code_object, "ids")
  groups, local = grid[0] * grid[1] * grid[2], block[0] * block[1] * block[2]
  out = dev.alloc(4 * groups * local)
  out.copyin(np.full(groups * local, 0xffffffff, np.uint32))
  prg(out, global_size=grid, local_size=block, vals=(grid[0], grid[1], *block), wait=True)
  got = out.copyout(np.empty(groups * local, np.uint32)).reshape(groups, local)
  want = np.arange(groups, dtype=np.uint32)[:, None] * 4096 + np.arange(local, dtype=np.uint32)[None, :]
  np.testing.assert_array_equal(got, want)


def test_kernel_waits_for_sdma_and_sdma_for_the_kernel(dev, code_object):
  """host -> SDMA copy in -> kernel -> SDMA copy out, ordered only by signals between the two queues."""
  prg = dev.program(code_object, "scale")
  n = 256
  x = np.arange(n, dtype=np.float32)
  staging, work, result = dev.alloc(4 * n, "host"), dev.alloc(4 * n), dev.alloc(4 * n, "host")
  staging.view(np.float32)[:] = x
  copied, computed = dev.new_signal(0), dev.new_signal(0)
  kargs = dev.kernargs.write(prg.kernargs([work], (2.0,), (n // 64, 1, 1), (64, 1, 1)), dev.timeline_value)
  dev.compute_queue().wait(copied, 1).exec(prg, kargs, (n // 64, 1, 1), (64, 1, 1)).signal(computed, 1).submit(dev)
  dev.copy_queue().copy(work.addr, staging.addr, 4 * n).signal(copied, 1).wait(computed, 1).copy(result.addr, work.addr, 4 * n) \
    .signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  np.testing.assert_array_equal(result.view(np.float32), x * 2 + 1)
  for s in (copied, computed): dev.release_signal(s)


def test_graph_replay_with_new_buffers_and_values(dev, code_object):
  prg = dev.program(code_object, "scale")
  n = 128
  bufs = [dev.alloc(4 * n).copyin(np.full(n, i, np.float32)) for i in range(3)]
  q = dev.compute_queue().wait(dev.timeline_signal, Variable("w")).exec(prg, Variable("ka"), (n // 64, 1, 1), (64, 1, 1))
  q.signal(dev.timeline_signal, Variable("t")).bind(dev)
  for i, (buf, k) in enumerate(zip(bufs, (2.0, 3.0, 0.5))):
    t = dev.next_timeline()
    q.submit(dev, {"w": t - 1, "t": t, "ka": dev.kernargs.write(prg.kernargs([buf], (k,), (n // 64, 1, 1), (64, 1, 1)), t)})
    dev.synchronize()
    assert set(buf.copyout(np.empty(n, np.float32)).tolist()) == {i * k + 1}


def resident_bytes() -> int:
  with open("/proc/self/statm") as f: return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@heavy
def test_ten_thousand_launches_do_not_leak(dev):
  empty = dev.program(Kernel("empty", dev.arch, args=[("x", "buffer")]).add("s_endpgm").to_elf())
  buf = dev.alloc(64)
  for _ in range(500): empty(buf, global_size=2, local_size=32)
  dev.synchronize()
  rss, signals, wraps, last = resident_bytes(), len(dev._signal_pool), 0, dev.kernargs.pos
  for i in range(10_000):
    empty(buf, global_size=2, local_size=32)
    wraps += dev.kernargs.pos < last
    last = dev.kernargs.pos
  dev.synchronize()
  assert wraps >= 1, "the kernarg ring never wrapped"
  assert len(dev._signal_pool) == signals
  assert resident_bytes() - rss < 16 << 20, f"resident memory grew by {(resident_bytes() - rss) >> 20} MiB"


def test_bad_programs_and_arguments(dev, code_object):
  prg = dev.program(code_object, "scale")
  with pytest.raises(ProgramArgumentError, match="scale takes 1 buffers"):
    prg(global_size=1, local_size=64, vals=(1.0,))
  with pytest.raises(ProgramArgumentError, match=r"scale: argument arg1 \(f32\) cannot take str 'x'"):
    prg(dev.alloc(256), global_size=1, local_size=64, vals=("x",))
  with pytest.raises(HCQError, match="invalid code object: not an ELF file"):
    dev.program(b"\x00" * 64)
  with pytest.raises(HCQError, match="no kernel 'nope' in the code object; it has ids, scale"):
    dev.program(code_object, "nope")
  with pytest.raises(ValueError, match="do not fit"):
    dev.alloc(16).copyin(np.zeros(5, np.float32))


def test_faulting_kernel_then_the_next_launch_works(dev, code_object):
  bad = Kernel("bad", dev.arch, args=[("p", "u64")]).add(asm_for(dev.arch, """s_load_b64 s[4:5], s[0:1], null
v_mov_b32_e32 v1, 7
v_mov_b32_e32 v0, 0
s_waitcnt lgkmcnt(0)
global_store_b32 v0, v1, s[4:5]
s_endpgm""", """s_load_dwordx2 s[4:5], s[0:1], 0x0
v_mov_b32_e32 v1, 7
v_mov_b32_e32 v0, 0
s_waitcnt lgkmcnt(0)
global_store_dword v0, v1, s[4:5]
s_endpgm"""))
  prg = dev.program(bad.to_elf())
  address = dev._range.base + (1 << 39) + 0x1230  # inside hcq's reservation, never mapped for the GPU
  with pytest.raises(GPUFault, match=f"GPU page fault at {address & ~0xfff:#x}|GPU page fault at {address:#x}") as e:
    prg(global_size=1, local_size=32, vals=(address,), wait=True)
  assert e.value.queue == "compute"
  test_dispatch_shapes(dev, code_object, (2, 1, 1), (64, 1, 1))


def test_kernel_that_never_ends_times_out_and_the_device_recovers(dev, code_object):
  forever = dev.program(Kernel("forever", dev.arch).add("loop:", "s_branch loop").to_elf())
  with pytest.raises(hcq.GPUTimeout, match=r"compute rptr \d+ wptr \d+"):
    forever(global_size=1, local_size=32)
    dev.synchronize(timeout=1.0)
  test_dispatch_shapes(dev, code_object, (3, 1, 1), (32, 1, 1))
