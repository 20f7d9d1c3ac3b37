"""Scratch (private memory) on each emulated board (gfx1100, gfx1201, gfx942): kernels that spill, large private arrays, many waves on every shader
engine (and every XCC of the MI300X), checked against numpy; the ring's layout (slots per engine, lanes interleaved by
dword); and wrong scratch setups faulting as they would on the GPU: the total wave count in gfx11's per-engine WAVES,
and on gfx942 a buffer for one XCC's ring, WAVESIZE in gfx11's 256-byte units, each XCC given its neighbour's ring,
and every XCC given one ring."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import hcq
from hcq.errors import GPUFault
from tests.amd_boards import RDNA_ARCHS, arch, arch_of, board, heavy, only  # noqa: F401 (arch: the board fixture)
from tests.tools import compile_opencl

GID = "(__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x())"
SOURCE = r"""
#define GID """ + GID + r"""
// 16 VGPRs for 48 live values: clang-19 spills about 50 VGPRs to scratch
__attribute__((amdgpu_num_vgpr(16))) __kernel void spill(__global float *out, __global const float *in) {
  int g = GID;
  float v[48];
  for (int i = 0; i < 48; i++) v[i] = in[g * 48 + i];
  float s = 0;
  #pragma unroll
  for (int r = 0; r < 4; r++)
    #pragma unroll
    for (int i = 0; i < 48; i++) s = s * 0.5f + v[i] * v[(i + r + 1) % 48];
  out[g] = s;
}
// 4 KiB of private memory per lane, indexed by data: it cannot live in registers
__kernel void big(__global int *out, __global const int *in) {
  int g = GID;
  volatile int a[1024];
  for (int i = 0; i < 1024; i++) a[i] = in[g] * 3 + i;
  int s = 0;
  for (int i = 0; i < 64; i++) s += a[(in[g] + i * 37) & 1023];
  out[g] = s;
}
// each lane's private dwords hold its id and index, read back after every wave of the workgroup wrote its own
__kernel void mark(__global int *out) {
  int g = GID;
  volatile int a[8];
  for (int i = 0; i < 8; i++) a[i] = g * 8 + i;
  __builtin_amdgcn_s_barrier();
  int s = 0;
  for (int i = 0; i < 8; i++) s += a[i] == g * 8 + i;
  out[g] = s;
}
"""


@pytest.fixture(scope="module")
def dev(arch):
  return hcq.Device(f"MOCKKFD+AMD::{arch}")


@pytest.fixture(scope="module")
def code(tmp_path_factory, arch):
  return compile_opencl(SOURCE, tmp_path_factory.mktemp("scratch"), mcpu=arch_of(arch))


def run(dev, prg, out, *args, groups: int):
  bufs = [dev.alloc(a.nbytes) for a in (out, *args)]
  for b, a in zip(bufs[1:], args): dev.copy_from_host(b, a)
  prg(*bufs, global_size=(groups,), local_size=(64,), wait=True)
  dev.copy_to_host(out, bufs[0])
  for b in bufs: b.free()
  return out


def spill_reference(x: np.ndarray) -> np.ndarray:
  v = x.reshape(-1, 48).astype(np.float32)
  s = np.zeros(len(v), np.float32)
  for r in range(4):
    for i in range(48): s = s * np.float32(0.5) + v[:, i] * v[:, (i + r + 1) % 48]
  return s


def test_topology_is_the_rx7900xtx():
  """The KFD properties the driver sizes scratch from, as a real RX 7900 XTX reports them (rocminfo: 96 CUs, 2 SIMDs per
  CU, 6 shader engines, 2 arrays per engine, 32 waves per CU; kfd_crat.c: array_count = engines x arrays per engine)."""
  p = hcq.Device("MOCKKFD+AMD::gfx1100").node.properties
  assert {k: p[k] for k in ("simd_count", "max_waves_per_simd", "array_count", "simd_arrays_per_engine", "cu_per_simd_array",
                            "simd_per_cu", "max_slots_scratch_cu", "wave_front_size")} == \
    {"simd_count": 192, "max_waves_per_simd": 16, "array_count": 12, "simd_arrays_per_engine": 2, "cu_per_simd_array": 8,
     "simd_per_cu": 2, "max_slots_scratch_cu": 32, "wave_front_size": 32}


def test_slots_per_engine_come_from_each_boards_topology(dev, arch):
  """gfx1100: 6 engines of 16 CUs; gfx1201: 4 engines of 16 CUs (Navi48); 32 scratch slots per CU on both. gfx942: WAVES
  counts one XCC's slots (ROCr FillComputeTmpRingSize: the scratch per XCC), 38 CUs x 32, and hcq's queue runs on one XCC."""
  b = board(arch)
  if b.family == "gfx9":
    assert dev.scratch_slots() == (1, b.compute_units // b.num_xcc * b.max_slots_scratch_cu) == (1, 1216)
  else:
    assert dev.scratch_slots() == (b.shader_engines, b.compute_units // b.shader_engines * b.max_slots_scratch_cu)


def test_slots_come_from_the_topology():
  """A three-engine board (3 engines x 2 arrays x 10 CUs, Navi32's layout): 3 engines of 20 CUs, 32 slots each."""
  from types import SimpleNamespace
  from hcq.drivers.amd.device import AMDDevice
  props = {"array_count": 6, "simd_arrays_per_engine": 2, "cu_per_simd_array": 10, "max_slots_scratch_cu": 32}
  rdna, gfx9 = SimpleNamespace(waves_per_engine=True), SimpleNamespace(waves_per_engine=False)
  assert AMDDevice.scratch_slots(SimpleNamespace(node=SimpleNamespace(properties=props), dialect=rdna)) == (3, 20 * 32)
  # gfx9.4.3: one XCC's slots, its CUs from simd_count / simd_per_cu / num_xcc (an MI300X in DPX: 4 XCCs of 38 CUs)
  props = {"simd_count": 608, "simd_per_cu": 4, "num_xcc": 4, "max_slots_scratch_cu": 32, "array_count": 16, "simd_arrays_per_engine": 1}
  assert AMDDevice.scratch_slots(SimpleNamespace(node=SimpleNamespace(properties=props), dialect=gfx9)) == (1, 38 * 32)


def test_spilling_kernel_on_every_engine(dev, code):
  prg = dev.program(code, "spill")
  assert prg.private_segment_size > 0
  engines, slots = dev.scratch_slots()
  groups = 5 * board(dev.arch).shader_engines   # 5 workgroups on each engine (of every XCC on gfx942: 32 engines)
  x = np.random.default_rng(1).standard_normal(48 * 64 * groups).astype(np.float32)
  out = run(dev, prg, np.empty(64 * groups, np.float32), x, groups=groups)
  np.testing.assert_allclose(out, spill_reference(x), rtol=1e-5, atol=1e-5)
  tmpring = dev.dialect.regs.regCOMPUTE_TMPRING_SIZE.decode(dev.tmpring_size)
  unit = dev.dialect.scratch_unit   # WAVESIZE's unit: 256 bytes on gfx11+, 1 KiB on gfx9 (LLVM's scratch_ps test)
  assert tmpring["waves"] == slots == {"gfx9": 1216}.get(board(dev.arch).family, 512)
  assert tmpring["wavesize"] * unit >= prg.private_segment_size * (32 if prg.wave32 else 64)
  assert dev._scratch.nbytes >= engines * slots * tmpring["wavesize"] * unit


@heavy
def test_large_private_array(dev, code):
  prg = dev.program(code, "big")
  assert prg.private_segment_size >= 4096
  x = np.random.default_rng(2).integers(0, 1 << 20, 64 * 12).astype(np.int32)
  out = run(dev, prg, np.empty(64 * 12, np.int32), x, groups=12)
  g = x[:, None]
  idx = (g + np.arange(64) * 37) & 1023
  np.testing.assert_array_equal(out, (g * 3 + idx).sum(axis=1).astype(np.int32))


def test_many_waves_in_flight_keep_their_own_slots(dev, code):
  """3,600 waves: 600 per engine on gfx1100 (900 on gfx1201), more than its 512 slots, so they run in two turns; every
  lane must read back what it wrote (two waves in flight sharing a slot would not)."""
  prg = dev.program(code, "mark")
  assert prg.private_segment_size > 0
  out = run(dev, prg, np.empty(64 * 1800, np.int32), groups=1800)
  np.testing.assert_array_equal(out, 8)


def slot_bytes(dev) -> int:
  """One wave's scratch slot as the driver programmed it: WAVESIZE in the family's unit (256 bytes on gfx11+, 1 KiB on gfx9)."""
  return dev.dialect.regs.regCOMPUTE_TMPRING_SIZE.decode(dev.tmpring_size)["wavesize"] * dev.dialect.scratch_unit


def test_private_memory_is_interleaved_by_dword_in_the_wave_slot(dev, code):
  """After one workgroup of `mark` (two wave32 waves on the RDNA boards, one wave64 on gfx942; engine 0 of XCC 0, from
  slot 0), lane l's private dword i of wave w sits at slot w + i * 4 * lanes + l * 4 (AMDGPUUsage: the private segment
  is interleaved by dword across the lanes)."""
  prg = dev.program(code, "mark")
  lanes = 32 if prg.wave32 else 64
  waves, slot = 64 // lanes, slot_bytes(dev) // 4
  first = dev._scratch.offset(0, (waves + 1) * slot * 4)   # engine 0's first slots, and the one after
  dev.copy_from_host(first, np.zeros((waves + 1) * slot, np.uint32))
  run(dev, prg, np.empty(64, np.int32), groups=1)
  ring = np.empty((waves + 1) * slot, np.uint32)
  dev.copy_to_host(ring, first)
  for wave in range(waves):
    dwords = ring[wave * slot:wave * slot + 8 * lanes].reshape(8, lanes)   # [private dword, lane]
    ids = wave * lanes + np.arange(lanes)
    found = [np.nonzero((dwords == ids[None, :] * 8 + i).all(axis=1))[0] for i in range(8)]
    assert all(len(f) == 1 for f in found), "every private dword of the wave's lanes lies in one row of the slot"
  assert not ring[waves * slot:].any(), "nothing in the next slot"


@only(*RDNA_ARCHS)   # gfx11+'s WAVES is per engine; gfx942's counts one XCC's slots (the tests below)
def test_total_waves_in_tmpring_faults_past_the_buffer(dev, code):
  """WAVES = every wave of the GPU (the count other GPUs take) with a buffer for that many: on gfx11 WAVES is per
  engine, so engine 1's slots start where the buffer ends, and the dispatch faults there."""
  prg = dev.program(code, "spill")
  p = dev.node.properties
  per_wave = dev._scratch_per_wave
  total = min(p["simd_count"] * p["max_waves_per_simd"], 0xfff)
  with planted_scratch(dev, per_wave * total, waves=total, wavesize=per_wave // 256) as buf:
    with pytest.raises(GPUFault, match="scratch slot 0 of shader engine 1") as e:
      run(dev, prg, np.empty(64 * 6, np.float32), np.ones(48 * 64 * 6, np.float32), groups=6)
    assert e.value.address == buf.addr + per_wave * total
  test_spilling_kernel_on_every_engine(dev, code)   # the device recovered


@contextlib.contextmanager
def planted_scratch(dev, nbytes: int, waves: int, wavesize: int, base_offset: int = 0, xcc_bytes: int | None = None):
  """A wrong scratch setup while the block runs: a new buffer of `nbytes` as the scratch, COMPUTE_TMPRING_SIZE with
  `waves` and `wavesize` (in the register's own units), the scratch base `base_offset` bytes into the buffer, and each
  XCC's ring `xcc_bytes` after the previous one (gfx9.4.3 split over XCCs); the driver's own setup is restored after."""
  saved = dev.tmpring_size, dev.scratch_base, dev._scratch, dev._scratch_per_wave, dev.scratch_xcc_bytes
  buf = dev.alloc(nbytes, "device")
  try:
    dev.tmpring_size = dev.dialect.regs.regCOMPUTE_TMPRING_SIZE.encode(waves=waves, wavesize=wavesize)
    dev.scratch_base = buf.addr + base_offset
    if xcc_bytes is not None: dev.scratch_xcc_bytes = xcc_bytes
    dev.scratch_generation += 1   # queues built for the old setup are rebuilt
    yield buf
  finally:
    dev.tmpring_size, dev.scratch_base, dev._scratch, dev._scratch_per_wave, dev.scratch_xcc_bytes = saved
    dev.scratch_generation += 1
    buf.free()


OVERLAP = r"the scratch ring of XCC \d at .* overlaps XCC \d's"
GFX942_SLOTS = 38 * 32   # one XCC's WAVES: 38 CUs x 32 scratch slots (ROCr FillComputeTmpRingSize: the queue's scratch / NumXcc)


@only("gfx942")
@pytest.mark.parametrize("wrong", ["one XCC's buffer", "256-byte WAVESIZE", "neighbour's ring"])
def test_gfx942_wrong_scratch_setup_faults(dev, code, wrong):
  """Three ways to program gfx9.4.3 scratch wrongly, each caught as the GPU would go wrong: a buffer for one XCC's ring
  while XCC i's ring is placed i rings in (ROCr's per-XCC size taken for the queue's), so XCC 1 on starts past it;
  WAVESIZE in gfx11's 256-byte units where gfx9 counts 1 KiB (ROCr mem_alignment_size), so every slot is four times what
  the buffer holds: XCC 5's ring runs past its end, and each XCC's reaches into the next ones' (refused: whichever XCC
  comes first shows); each XCC given the next one's ring, so XCC 7's starts at its end."""
  prg = dev.program(code, "spill")
  per_wave, xccs = dev._scratch_per_wave, dev.split.xccs
  ring = per_wave * GFX942_SLOTS
  assert dev.scratch_xcc_bytes == ring and dev._scratch.nbytes == ring * xccs == per_wave * 1216 * 8
  nbytes, wavesize, offset = {"one XCC's buffer": (ring, per_wave // 1024, 0), "256-byte WAVESIZE": (ring * xccs, per_wave // 256, 0),
                              "neighbour's ring": (ring * xccs, per_wave // 1024, ring)}[wrong]
  groups = 4 * xccs   # every engine of every XCC
  with planted_scratch(dev, nbytes, GFX942_SLOTS, wavesize, offset) as buf:
    past_end = r"scratch slot \d+ of shader engine \d: the ring at"
    with pytest.raises(GPUFault, match=past_end + (f"|{OVERLAP}" if wrong == "256-byte WAVESIZE" else "")) as e:
      run(dev, prg, np.empty(64 * groups, np.float32), np.ones(48 * 64 * groups, np.float32), groups=groups)
    assert "overlaps" in str(e.value) or e.value.address >= buf.addr + nbytes   # at the buffer's end, or (a ring past it) further on
  test_spilling_kernel_on_every_engine(dev, code)   # the device recovered


@only("gfx942")
def test_gfx942_xccs_sharing_one_ring_is_refused(dev, code):
  """Every XCC given XCC 0's ring (the base written once, not per XCC): on the GPU their waves would overwrite each
  other's private memory without a fault; the mock refuses the second XCC of the submission that takes it."""
  prg = dev.program(code, "spill")
  per_wave, xccs = dev._scratch_per_wave, dev.split.xccs
  groups = 4 * xccs
  with planted_scratch(dev, per_wave * GFX942_SLOTS * xccs, GFX942_SLOTS, per_wave // 1024, xcc_bytes=0):
    with pytest.raises(GPUFault, match=OVERLAP):
      run(dev, prg, np.empty(64 * groups, np.float32), np.ones(48 * 64 * groups, np.float32), groups=groups)
  test_spilling_kernel_on_every_engine(dev, code)   # the driver's own rings (one per XCC) run again


@only("gfx942")
def test_gfx942_waves_the_engines_do_not_divide_is_refused(dev, code):
  """gfx9.4.3's WAVES counts one XCC's slots, which its four engines share: ROCr asserts that the engines divide it."""
  prg = dev.program(code, "spill")
  per_wave = dev._scratch_per_wave
  with planted_scratch(dev, per_wave * GFX942_SLOTS * dev.split.xccs, GFX942_SLOTS - 1, per_wave // 1024):
    with pytest.raises(GPUFault, match="WAVES = 1215 scratch slots per XCC do not divide among its 4 shader engines"):
      run(dev, prg, np.empty(64, np.float32), np.ones(48 * 64, np.float32), groups=1)
  test_spilling_kernel_on_every_engine(dev, code)


@only("gfx942")
def test_gfx942_private_memory_lies_in_each_xccs_ring(dev, code):
  """`mark` over 8 workgroups per XCC (one wave64 each): XCC i's waves hold slots 0 and 1 of each of its four engines
  (its workgroups round robin over them), in XCC i's ring (scratch base + i x one XCC's ring, engine e's slots at
  e x WAVES / 4): exactly those slots are written, and every lane reads back what it wrote."""
  prg = dev.program(code, "mark")
  d = dev.node.properties
  assert prg.private_segment_size and not prg.wave32
  assert d["num_xcc"] == dev.split.xccs == 8
  kd = prg.properties   # architected flat scratch: no private segment buffer, no flat scratch init (AMDGPUUsage)
  from hcq.autogen import amdgpu_kd
  assert not kd & (amdgpu_kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER | amdgpu_kd.KERNEL_CODE_PROPERTY_ENABLE_SGPR_FLAT_SCRATCH_INIT)
  assert dev.dialect.regs.regCOMPUTE_PGM_RSRC2.decode(prg.rsrc2)["scratch_en"]
  slot, per_engine = slot_bytes(dev), GFX942_SLOTS // 4
  where = [(x, e, s) for x in range(8) for e in range(4) for s in range(3)]
  at = lambda x, e, s: dev._scratch.offset(x * dev.scratch_xcc_bytes + (e * per_engine + s) * slot, slot)
  for w in where: dev.copy_from_host(at(*w), np.zeros(slot, np.uint8))
  gpu = next(iter(dev.os.kfd.nodes.values())).gpu
  before = list(gpu.xcc_workgroups)
  out = run(dev, prg, np.empty(64 * 64, np.int32), groups=64)
  np.testing.assert_array_equal(out, 8)
  assert [a - b for a, b in zip(gpu.xcc_workgroups, before)] == [8] * 8
  for x, e, s in where:
    got = np.empty(slot, np.uint8)
    dev.copy_to_host(got, at(x, e, s))
    assert got.any() == (s < 2), f"XCC {x} engine {e} slot {s}"


def test_private_access_without_scratch_en_faults(dev, code):
  """A dispatch whose COMPUTE_PGM_RSRC2 lacks SCRATCH_EN gets no scratch slot, whatever TMPRING_SIZE says."""
  prg = dev.program(code, "spill")
  prg.rsrc2 &= ~dev.dialect.regs.regCOMPUTE_PGM_RSRC2.encode(scratch_en=1)
  with pytest.raises(GPUFault, match="outside the lane's 0-byte private segment"):
    run(dev, prg, np.empty(64, np.float32), np.ones(48 * 64, np.float32), groups=1)


def test_ring_slots_per_engine():
  """The slot model: workgroups round robin over the engines, distinct slots per engine in flight, turning over WAVES."""
  from hcq.asm.emu.scratch import ScratchRing
  ring = ScratchRing(base=1 << 20, waves=8, slot_bytes=256, engines=3, engine_waves=6)
  assert ring.groups_in_flight(2) == 9   # 3 engines x min(8, 6) // 2
  turn = np.zeros(3, np.int64)
  first = ring.slot_addresses(0, 9, 2, turn)
  engine, slot = np.divmod((first.astype(np.int64) - (1 << 20)) // 256, 8)
  assert list(engine) == [0, 0, 1, 1, 2, 2] * 3 and len(set(zip(engine, slot))) == 18
  second = ring.slot_addresses(9, 9, 2, turn)
  slot2 = ((second.astype(np.int64) - (1 << 20)) // 256) % 8
  assert sorted(set(slot2[engine == 0])) == [0, 1, 2, 3, 6, 7]   # the engine's next six slots, wrapping at WAVES


def test_waves_too_few_for_a_workgroup_is_refused():
  from hcq.asm.emu.memory import VirtualMemory
  from hcq.asm.emu.scratch import ScratchRing
  with pytest.raises(ValueError, match=r"1 scratch slots per shader engine \(from COMPUTE_TMPRING_SIZE.WAVES\) cannot hold a workgroup of 2 waves"):
    ScratchRing(base=1 << 20, waves=1, slot_bytes=256, engines=6, engine_waves=512).check(VirtualMemory(), 2)


@pytest.mark.parametrize("size,align", [(1, 1), (2, 2), (2, 1), (4, 4), (4, 1), (8, 4), (12, 4), (16, 4), (16, 2)])
@pytest.mark.parametrize("flat", [False, True])
def test_every_byte_lands_where_the_interleave_puts_it(size, align, flat):
  """Each lane stores `size` random bytes at its own offset (aligned to `align`) into private memory in a scratch slot
  in GPU memory, directly or through the private aperture; every byte must sit at slot + (off / 4) * 128 + lane * 4 +
  off % 4, and loading it back must give what the emulator's per-lane private memory gives."""
  from hcq.asm.emu import VirtualMemory
  from hcq.asm.emu.snippet import run_snippet
  rng = np.random.default_rng(size * 31 + align + flat)
  private, slot_va, lanes, waves = 64, 0x10000, 32, 2
  offs = rng.integers(0, (private - size) // align + 1, lanes) * align
  data = rng.integers(0, 1 << 32, (4, lanes), dtype=np.uint64).astype(np.uint32)
  store, load = {1: ("b8", "u8"), 2: ("b16", "u16"), 4: ("b32",) * 2, 8: ("b64",) * 2, 12: ("b96",) * 2, 16: ("b128",) * 2}[size]
  regs = lambda first: f"v{first}" if size <= 4 else f"v[{first}:{first + size // 4 - 1}]"
  if flat:   # v[10:11] = src_private_base:offset
    code = (f"v_mov_b32 v10, v0\nv_mov_b32 v11, src_private_base\nflat_store_{store} v[10:11], {regs(1)}\n"
            f"s_waitcnt vmcnt(0)\nflat_load_{load} {regs(5)}, v[10:11]\ns_waitcnt vmcnt(0)")
  else:
    code = f"scratch_store_{store} v0, {regs(1)}, off\ns_waitcnt vmcnt(0)\nscratch_load_{load} {regs(5)}, v0, off\ns_waitcnt vmcnt(0)"
  v = {0: offs.astype(np.uint32), **{1 + i: data[i] for i in range(4)}}
  ring = np.zeros(waves * private * lanes, np.uint8)
  mem = VirtualMemory()
  mem.map(slot_va, ring.size, ring)
  slots = slot_va + np.arange(waves) * private * lanes
  st = run_snippet(code, v=v, private_bytes=private, waves=waves, mem=mem, scratch_slots=slots)
  ref = run_snippet(code, v=v, private_bytes=private, waves=waves)
  loaded = range(5, 5 + max(1, size // 4))
  np.testing.assert_array_equal(st.v[loaded], ref.v[loaded])
  raw = data.T.copy().view(np.uint8)   # lane -> its 16 data bytes in register order
  for w in range(waves):
    for lane in range(lanes):
      at = [w * private * lanes + (o >> 2) * 4 * lanes + lane * 4 + (o & 3) for o in range(offs[lane], offs[lane] + size)]
      assert bytes(ring[at]) == bytes(raw[lane, :size]), f"wave {w} lane {lane}"


def test_ring_outside_any_buffer_faults_at_its_base():
  """SCRATCH_EN and a WAVESIZE with no SCRATCH_BASE written (0): the first slot is already unmapped."""
  from hcq.asm.emu.memory import PageFault, VirtualMemory
  from hcq.asm.emu.scratch import ScratchRing
  with pytest.raises(PageFault, match="scratch slot 0 of shader engine 0") as e:
    ScratchRing(base=0, waves=512, slot_bytes=256, engines=6, engine_waves=512).check(VirtualMemory(), 2)
  assert e.value.address == 0 and e.value.write


def test_xccs_of_one_submission_need_their_own_rings():
  """The mock's rule (MockAMDGPU.claim_scratch): the XCCs running one submission (the same ring packet) run at once, so
  XCC 1 may not take a ring overlapping the one XCC 0 took for it; a later submission may hand the rings out anew."""
  from hcq.asm.emu.scratch import ScratchRing
  from hcq.drivers.mock.amdgpu.gpu import BOARDS, MockAMDGPU
  gpu = MockAMDGPU(BOARDS["gfx942"])
  ring = lambda base: ScratchRing(base, waves=304, slot_bytes=1024, engines=4, engine_waves=288)
  size = ring(0).nbytes
  gpu._submission[:2] = [(0x1000, 40)] * 2
  gpu.claim_scratch(0, ring(1 << 32))
  gpu.claim_scratch(1, ring((1 << 32) + size))   # the next ring: fine
  gpu.claim_scratch(0, ring(1 << 32))            # XCC 0 again (a second dispatch of the submission): its own
  with pytest.raises(ValueError, match=r"the scratch ring of XCC 1 at .* overlaps XCC 0's .* in the same submission"):
    gpu.claim_scratch(1, ring((1 << 32) + 1024))
  gpu._submission[1] = (0x1000, 52)              # the next submission, after the barrier: XCC 0's old ring is free
  gpu.claim_scratch(1, ring(1 << 32))
  gpu.claim_scratch(2, None)                     # no scratch: nothing to claim
