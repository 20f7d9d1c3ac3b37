"""The emulated GPU's caches (hcq.drivers.mock.amdgpu.cache): a missing invalidate or write-back gives stale data.

Driver-level tests run the AMD driver's own packets; mock-level ones write raw PM4 (the Board of test_amd_queues) to
show each GCR bit has its consequence and that coherent (MTYPE UC) memory bypasses the caches.
"""
from __future__ import annotations

import numpy as np
import pytest

from hcq.asm.kernel import Kernel
from hcq.autogen.am import nvd
from hcq.devstring import parse_dev
from hcq.drivers.amd.device import AMDDevice
from hcq.drivers.amd.pm4 import AMDComputeQueue, gfx9_dialect, gfx11_dialect
from hcq.drivers.mock.amdgpu.gpu import BOARDS
from tests.amd_boards import asm_for
from tests.test_amd_queues import GC_BASE, VA, Board, FakeSignal

ADD_ONE = """s_load_b128 s[4:7], s[0:1], null
v_mov_b32_e32 v0, 0
s_waitcnt lgkmcnt(0)
global_load_b32 v1, v0, s[6:7]
s_waitcnt vmcnt(0)
v_add_nc_u32_e32 v1, 1, v1
global_store_b32 v0, v1, s[4:5]
s_endpgm"""


ADD_ONE_GFX9 = """s_load_dwordx4 s[4:7], s[0:1], 0x0
v_mov_b32_e32 v0, 0
s_waitcnt lgkmcnt(0)
global_load_dword v1, v0, s[6:7]
s_waitcnt vmcnt(0)
v_add_u32_e32 v1, 1, v1
global_store_dword v0, v1, s[4:5]
s_endpgm"""


@pytest.fixture(scope="module", params=["gfx1100", "gfx942"])
def dev(request):
  """The RX 7900 XTX (GCR_CNTL cache actions) and the MI300X (gfx9's CP_COHER_CNTL and EOP_* actions)."""
  return AMDDevice(parse_dev(f"MOCKKFD+AMD::{request.param}"))


def add_one(dev):
  """out[0] = inp[0] + 1."""
  return dev.program(Kernel("add_one", dev.arch, args=[("out", "buffer"), ("inp", "buffer")]).add(asm_for(dev.arch, ADD_ONE, ADD_ONE_GFX9)).to_elf())


def test_a_replayed_launch_sees_new_input_and_the_host_sees_its_output(dev):
  """Device memory is MTYPE NC: the kernel's input written by SDMA between two launches of the same (replayed) queue
  reaches the second only through ACQUIRE_MEM's GL2 invalidate, and the output the host copies back (SDMA) only
  through RELEASE_MEM's GL2 write-back."""
  prg, out, inp = add_one(dev), dev.alloc(256, "device"), dev.alloc(256, "device")
  got = np.zeros(1, np.uint32)
  for value in (5, 41, 1000):
    dev.copy_from_host(inp, np.array([value], np.uint32))
    prg(out, inp)
    dev.copy_to_host(got, out)
    assert int(got[0]) == value + 1, f"input {value}: the kernel saw or left stale data"


def test_host_writes_to_uncached_memory_need_no_invalidate(dev):
  """Coherent host memory (KFD_IOC_ALLOC_MEM_FLAGS_COHERENT: MTYPE UC) bypasses the caches: the CPU's writes and reads
  meet the kernel's directly."""
  prg, out, inp = add_one(dev), dev.alloc(256, "host"), dev.alloc(256, "host")
  for value in (7, 70):
    inp.view(np.uint32)[0] = value
    prg(out, inp, wait=True)
    assert int(out.view(np.uint32)[0]) == value + 1


# ---- raw PM4 on the mock GPU: each GCR action on its own ----
GCR_ALL = gfx11_dialect(GC_BASE).acquire_mem()[-1]


def acquire(gcr: int) -> list[int]:
  return AMDComputeQueue(gfx11_dialect(GC_BASE)).pkt3(nvd.PACKET3_ACQUIRE_MEM, 0, 0xffffffff, 0xffffff, 0, 0, 0xA, gcr)._q


@pytest.fixture
def cached():
  """A Board whose 1 MiB at VA + 64 MiB is cached memory the test drives the cache over directly."""
  b = Board()
  host = np.zeros(1 << 20, np.uint8)
  b.gpu.mem.map(VA + (64 << 20), host.size, host, cached=True)
  yield b, host, b.gpu.cache.view
  b.close()


def test_a_wave_store_stays_in_the_cache_until_a_gl2_write_back(cached):
  b, host, view = cached
  view.write_u32(VA + (64 << 20), 0x1234)
  assert host[:4].view(np.uint32)[0] == 0, "a store reached memory without a write-back"
  b.submit("compute", acquire(GCR_ALL & ~nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(1)))
  b.idle("compute")
  assert host[:4].view(np.uint32)[0] == 0 and view.read_u32(VA + (64 << 20)) == 0x1234, "an invalidate lost or wrote dirty data"
  b.submit("compute", AMDComputeQueue(gfx11_dialect(GC_BASE)).signal(FakeSignal(b.addr(3 << 20)), 1)._q)  # RELEASE_MEM GL2_WB
  b.idle("compute")
  assert not b.errors and host[:4].view(np.uint32)[0] == 0x1234


@pytest.mark.parametrize("missing", ["GL2_INV", "GL1_INV", "GLV_INV", "GLK_INV", "GLI_INV"])
def test_an_acquire_without_every_level_invalidated_leaves_stale_lines(cached, missing):
  b, host, view = cached
  addr = VA + (64 << 20) + 64
  assert view.read_u32(addr) == 0  # the line is now in the cache
  host[64:68].view(np.uint32)[0] = 99  # the host writes behind it
  bit = getattr(nvd, f"PACKET3_ACQUIRE_MEM_GCR_CNTL_{missing}")(1)
  b.submit("compute", acquire(GCR_ALL & ~bit))
  b.idle("compute")
  assert view.read_u32(addr) == 0, f"ACQUIRE_MEM without {missing} refreshed the line"
  b.submit("compute", acquire(GCR_ALL))
  b.idle("compute")
  assert not b.errors and view.read_u32(addr) == 99


def test_engines_and_uncached_mappings_bypass_the_cache(cached):
  b, host, view = cached
  assert view.read_u32(b.addr(3 << 20)) == 0
  b.mem[3 << 20:(3 << 20) + 4] = np.frombuffer(np.uint32(5).tobytes(), np.uint8)
  assert view.read_u32(b.addr(3 << 20)) == 5  # the Board's own memory is mapped uncached
  assert b.gpu.mem.read_u32(VA + (64 << 20)) == 0 and view.read_u32(VA + (64 << 20)) == 0
  host[:4] = 1
  assert b.gpu.mem.read_u32(VA + (64 << 20)) == 0x01010101  # what the CP and SDMA read is memory


def test_a_ranged_acquire_is_refused(cached):
  b, _, _ = cached
  b.submit("compute", AMDComputeQueue(gfx11_dialect(GC_BASE)).pkt3(nvd.PACKET3_ACQUIRE_MEM, 0, 0x1000, 0, 0x100, 0, 0xA, GCR_ALL)._q)
  b.idle("compute")
  assert "ACQUIRE_MEM of a range" in str(b.errors[0][1])


def test_a_write_back_writes_only_the_bytes_the_wave_changed(cached):
  """The host's write to a byte the wave did not store survives the write-back of the same page."""
  b, host, view = cached
  base = VA + (64 << 20)
  view.write_u32(base, 0xAABBCCDD)      # the wave's store: page 0, bytes 0..3
  host[100] = 7                          # the host writes byte 100 of that page meanwhile
  b.submit("compute", acquire(GCR_ALL))  # GL2_WB, then every level invalidated
  b.idle("compute")
  assert not b.errors and host[:4].view(np.uint32)[0] == 0xAABBCCDD and host[100] == 7
  assert view.read_u32(base) == 0xAABBCCDD and view.read(base + 100, 1) == b"\x07"


def test_the_dirty_lines_of_unmapped_memory_are_dropped(cached):
  b, host, view = cached
  view.write_u32(VA + (64 << 20), 5)
  b.gpu.mem.unmap(VA + (64 << 20))
  b.gpu.cache.write_back()  # nothing written to memory no longer mapped
  assert host[:4].view(np.uint32)[0] == 0
  b.gpu.mem.map(VA + (64 << 20), host.size, host, cached=True)  # the same VA mapped again: a new line, filled from memory
  assert view.read_u32(VA + (64 << 20)) == 0


# ---- gfx9.4.3 (MI300X): CP_COHER_CNTL and EOP_* actions on the same cache model ----
GFX9 = gfx9_dialect(BOARDS["gfx942"].gc_bases)
COHER_ALL = GFX9.acquire_mem()[0]


def acquire9(coher: int) -> list[int]:
  return AMDComputeQueue(GFX9).pkt3(nvd.PACKET3_ACQUIRE_MEM, coher, 0xffffffff, 0xffffff, 0, 0, 0xA)._q


@pytest.fixture
def cached9():
  b = Board(board=BOARDS["gfx942"])
  host = np.zeros(1 << 20, np.uint8)
  b.gpu.mem.map(VA + (64 << 20), host.size, host, cached=True)
  yield b, host, b.gpu.cache.view
  b.close()


def test_gfx9_a_wave_store_stays_in_the_cache_until_a_tc_write_back(cached9):
  """gfx_v9_4_3_emit_mem_sync's TC_WB_ACTION_ENA and gfx_v9_4_3_ring_emit_fence's EOP_TC_WB_ACTION_EN write L2 back."""
  from hcq.autogen.am import soc15d
  b, host, view = cached9
  view.write_u32(VA + (64 << 20), 0x1234)
  b.submit("compute", acquire9(COHER_ALL & ~soc15d.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_WB_ACTION_ENA(1)))
  b.idle("compute")
  assert host[:4].view(np.uint32)[0] == 0 and view.read_u32(VA + (64 << 20)) == 0x1234, "an invalidate lost or wrote dirty data"
  b.submit("compute", AMDComputeQueue(GFX9).signal(FakeSignal(b.addr(3 << 20)), 1)._q)  # RELEASE_MEM EOP_TC_WB
  b.idle("compute")
  assert not b.errors and host[:4].view(np.uint32)[0] == 0x1234


@pytest.mark.parametrize("missing", ["TC_ACTION_ENA", "TCL1_ACTION_ENA", "SH_KCACHE_ACTION_ENA", "SH_ICACHE_ACTION_ENA"])
def test_gfx9_an_acquire_without_every_level_invalidated_leaves_stale_lines(cached9, missing):
  from hcq.autogen.am import soc15d
  b, host, view = cached9
  addr = VA + (64 << 20) + 64
  assert view.read_u32(addr) == 0
  host[64:68].view(np.uint32)[0] = 99
  b.submit("compute", acquire9(COHER_ALL & ~getattr(soc15d, f"PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_{missing}")(1)))
  b.idle("compute")
  assert view.read_u32(addr) == 0, f"ACQUIRE_MEM without {missing} refreshed the line"
  b.submit("compute", acquire9(COHER_ALL))
  b.idle("compute")
  assert not b.errors and view.read_u32(addr) == 99
