"""The emulated AMD GPUs behind the mock kernel interface: memory, engines (compute CPs, SDMA), clock, interrupts.

The boards (BOARDS) are a Radeon RX 7900 XTX (gfx1100), an RX 9070 XT (gfx1201) and an Instinct MI300X (gfx942) as
the kernel would describe them. Engines run in their own threads, so the host really waits on them; dispatches go to
a shader core (the wavefront emulator, running the board's ISA) when one is attached.
"""
from __future__ import annotations
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from hcq.asm.emu.memory import PageFault, VirtualMemory
from hcq.drivers.mock.amdgpu.cache import GPUCache
from hcq.drivers.mock.amdgpu.cp import ComputeCP, DispatchState
from hcq.drivers.mock.amdgpu.engine import Engine, QueueStopped
from hcq.drivers.mock.amdgpu.ring import QueueError, Ring
from hcq.drivers.mock.amdgpu.sdma import SDMAEngine


@dataclass(frozen=True)
class BoardSpec:
  """What the mock presents of the board (KFD topology and amdgpu sysfs are derived from this)."""
  name: str = "AMD Radeon RX 7900 XTX"
  gfx_target: str = "gfx1100"
  gfx_target_version: int = 110000
  vendor_id: int = 0x1002
  device_id: int = 0x744c
  compute_units: int = 96
  shader_engines: int = 6            # Navi31: 6 SEs x 2 shader arrays x 8 CUs (amdgpu gfx config, in the KFD topology as
  shader_arrays_per_engine: int = 2  # array_count = SEs x arrays, simd_arrays_per_engine, cu_per_simd_array: kfd_crat.c)
  simd_per_cu: int = 2
  vram_bytes: int = 24 << 30
  wave_front_size: int = 32
  lds_size_kb: int = 64
  num_sdma_engines: int = 2          # the topology's PCIe SDMA engines and XGMI ones (kfd_device.c kfd_get_num_sdma_engines)
  num_sdma_xgmi_engines: int = 0
  max_waves_per_simd: int = 16
  max_slots_scratch_cu: int = 32     # gc_info's max_scratch_slots_per_cu (kfd_crat.c max_slots_scatch_cu)
  timestamp_hz: int = 100_000_000  # the global timestamp counter: the 100 MHz reference clock (soc21/soc24_get_xclk)
  gc_bases: tuple[int, ...] = (0x00001260, 0x0000A000, 0x0001C000, 0x02402C00)  # GC IP segment bases of Navi31 (IP discovery)
  gc_version: tuple[int, int, int] = (11, 0, 0)    # IP discovery's GC and SDMA0 versions (amdgpu_discovery.c: GC 11.0.0
  sdma_version: tuple[int, int, int] = (6, 0, 0)   # pairs with SDMA 6.0.0, GC 12.0.1 with SDMA 7.0.1)
  max_engine_clk_mhz: int = 2526     # topology max_engine_clk_fcompute (the boost clock)
  vram_bus_width: int = 384          # mem_banks/0 width and mem_clk_max (MHz)
  vram_clk_mhz: int = 1250
  first_kernel: str = "6.1"          # the oldest mock kernel profile whose amdkfd knows this GC (kfd_device.c)
  num_xcc: int = 1                   # XCCs (graphics compute dies) in the node's partition: the topology's num_xcc
  compute_partition: str = ""        # current_compute_partition / available_ (amdgpu_gfx.c) and current_memory_partition
  available_partitions: str = ""     # (amdgpu_gmc.c), where the GPU has partitions: "" on the Radeons
  memory_partition: str = ""
  # KFD's compute queues: MEC 0's queues (pipes x queues per pipe, gfx_v11_0.c sw_init: 4 x 4 on GC 11.0.0) less the
  # 8 amdgpu takes as kernel compute queues (amdgpu_gfx.c amdgpu_gfx_get_num_kcq), the weight of amdgpu_amdkfd.c's
  # cp_queue_bitmap that kfd_topology.c prints (kfd_device_queue_manager.c get_cp_queues_num; Linux 6.12)
  kfd_cp_queues: int = 8
  xcp_id: int = 0                    # which partition of its GPU this KFD node is (amdgpu_xcp.c), of num_xcps
  num_xcps: int = 1

  @property
  def family(self) -> str:
    """gfx9, gfx11, gfx12: the PM4 dialect and register table the command processor decodes with."""
    return f"gfx{self.gfx_target_version // 10000}"

  @property
  def cus_per_array(self) -> int:
    """The topology's cu_per_simd_array: the most CUs an array has (MI300X's 38 per XCC over 4 arrays: 10)."""
    arrays = self.shader_engines * self.shader_arrays_per_engine
    return -(-self.compute_units // arrays)


# Per arch, the boards `MOCKKFD+AMD::<arch>` opens. The gfx1201 facts: Linux 6.12 amdgpu_discovery.c / kfd_device.c
# (GC 12.0.1 -> gfx_target_version 120001, SDMA 7.0.1, 2 SDMA engines), kfd_queue.c (CWSR sizes, as gfx1100's with
# 0x60000 VGPR bytes per CU), and the RX 9070 XT's published configuration (Navi48: 64 CUs in 4 shader engines of
# 2 shader arrays, 16 GiB of 256-bit GDDR6 at 20 Gbps, 2970 MHz boost, PCI id 1002:7550). Not in any source we can
# read: its max_waves_per_simd and max_scratch_slots_per_cu (the firmware's gc_info table) and its GC segment bases
# (IP discovery, also firmware): taken as Navi31's, whose COMPUTE_* offsets gc_12_0_0_offset.h keeps.
BOARDS: dict[str, BoardSpec] = {
  "gfx1100": BoardSpec(),
  "gfx1201": BoardSpec(name="AMD Radeon RX 9070 XT", gfx_target="gfx1201", gfx_target_version=120001, device_id=0x7550,
                       compute_units=64, shader_engines=4, shader_arrays_per_engine=2, vram_bytes=16 << 30,
                       gc_version=(12, 0, 1), sdma_version=(7, 0, 1), max_engine_clk_mhz=2970, vram_bus_width=256,
                       # 2 pipes x 4 queues, of which amdgpu keeps half (gfx_v12_0.c sw_init caps num_compute_rings at 4)
                       first_kernel="6.12", kfd_cp_queues=4),  # 6.1's kfd_device.c has no GC 12.0.1; 6.12's maps it to gfx_target_version 120001
  # MI300X in SPX mode (one partition of all 8 XCCs, one KFD node; NPS1 memory). Linux 6.12: kfd_device.c maps GC 9.4.3
  # (rev_id >= 1; earlier silicon is 90400/90401) to gfx_target_version 90402, with SDMA 4.4.2; kfd_topology.c prints num_xcc and array_count x num_xcc; amdgpu_gfx.c's
  # available_compute_partition for 8 XCCs is "SPX, DPX, QPX, CPX"; soc15_get_xclk gives MP1 13.0.6 a 100 MHz counter;
  # 16 SDMA instances (aqua_vanjaram_init_soc_config: 4 per AID, 4 AIDs), of which kfd_get_num_sdma_engines shows 2 as
  # PCIe and 14 as XGMI (gmc_v9_0.c: GC 9.4.3 has XGMI). Other partition modes: hcq.drivers.mock.amdgpu.partitions.
  # Published: 304 CUs (38 per XCC), 192 GiB HBM3 on an 8192-bit bus, 2100 MHz peak engine clock, PCI id 1002:74a1.
  # Firmware tables (IP discovery's gc_info), so read from what real MI300X nodes report, not from a kernel source: a
  # KFD sysfs capture of an MI300X SPX node (the test fixture of makodevai/gpuq, tests/test_hip_runtime.py: array_count
  # 32, simd_arrays_per_engine 1, cu_per_simd_array 10, max_waves_per_simd 8, max_slots_scratch_cu 32, num_xcc 8, so
  # 4 engines per XCC) and rocminfo on an MI300X (ROCm/rocm-examples#187: Max Waves Per CU 32 = 8 x 4 SIMDs). The
  # memory clock: 1300 MHz is the peak MCLK an AMD maintainer shows for MI300A (ROCm/rocm_smi_lib#209), and 5.3 TB/s
  # on 8192 bits is 5.2 Gbps per pin, 4 x 1300 MHz; not read for an MI300X itself. Still assumed: the GC segment
  # bases, taken from aldebaran_ip_offset.h (MI200), whose COMPUTE_* offsets gc_9_4_3_offset.h keeps.
  "gfx942": BoardSpec(name="AMD Instinct MI300X", gfx_target="gfx942", gfx_target_version=90402, device_id=0x74a1,
                      compute_units=304, shader_engines=32, shader_arrays_per_engine=1, simd_per_cu=4, vram_bytes=192 << 30,
                      wave_front_size=64, max_waves_per_simd=8, gc_bases=(0x00002000, 0x0000A000, 0x02402C00),
                      gc_version=(9, 4, 3), sdma_version=(4, 4, 2), max_engine_clk_mhz=2100, vram_bus_width=8192,
                      vram_clk_mhz=1300, first_kernel="6.12", num_xcc=8, num_sdma_xgmi_engines=14, compute_partition="SPX",
                      available_partitions="SPX, DPX, QPX, CPX", memory_partition="NPS1",
                      kfd_cp_queues=24),  # gfx_v9_4_3.c sw_init: 4 pipes x 8 queues per MEC, less 8 KCQs
}


def board_for(arch: str | None) -> BoardSpec:
  """The emulated board of an arch (None: gfx1100's); HCQError listing the boards for one that is not emulated."""
  from hcq.errors import HCQError
  board = BOARDS.get(arch or "gfx1100")
  if board is None: raise HCQError(f"no emulated AMD board for {arch}; MOCKKFD+AMD emulates {', '.join(BOARDS)}")
  return board


def boards_for(arch: str | None, partition: str | None = None) -> tuple[BoardSpec, ...]:
  """The KFD nodes of the emulated board of `arch` in `partition` mode (None: as the board is, SPX on gfx942)."""
  board = board_for(arch)
  if partition is None: return (board,)
  from hcq.drivers.mock.amdgpu.partitions import partition_boards
  return partition_boards(board, partition)


def default_shader_core(**dispatch_kw):
  """hcq.asm.emu's dispatch as the shader core (with `dispatch_kw`: its max_instructions, trace, ...), or None while
  the emulator is not there."""
  try:
    from hcq.asm.emu import dispatch
  except ImportError:
    return None
  return lambda gpu, state, cancel=None: dispatch(gpu.caches[state.xcc].view, state, cancel=cancel, arch=gpu.board.gfx_target,
                                                  board=gpu.shader_board(), share=state.share,
                                                  vet=lambda d: gpu.claim_scratch(state.xcc, d.scratch), **dispatch_kw)


def share_size(groups: int, share: tuple[int, int, int] | None) -> int:
  """How many of `groups` workgroups one XCC runs under a (chunk, parts, part) split (hcq.asm.emu.dispatch.share_of)."""
  if share is None: return groups
  chunk, parts, part = share
  rounds, rest = divmod(groups, chunk * parts)
  return rounds * chunk + min(chunk, max(0, rest - part * chunk))


class MockAMDGPU:
  """One emulated GPU. `on_interrupt(ctxid)` and `on_queue_error(engine, error, cause)` are how it reaches the kernel side."""

  def __init__(self, board: BoardSpec = BoardSpec(), on_interrupt: Callable[[int], None] | None = None,
               on_queue_error: Callable[[Engine, QueueError, BaseException | None], None] | None = None):
    self.board, self.mem = board, VirtualMemory()
    # each XCC's L2 (one on the Radeons): what its shader core reads and writes through; the engines reach memory directly
    self.caches = [GPUCache(self.mem) for _ in range(board.num_xcc)]
    self.cache = self.caches[0]
    self.xcc_workgroups = [0] * board.num_xcc  # workgroups each XCC ran (tests check that a split dispatch used every XCC)
    self.xcc_packet_delay = [0.0] * board.num_xcc  # extra seconds before each packet per XCC: tests make XCCs drift apart
    self.on_interrupt, self.on_queue_error = on_interrupt, on_queue_error
    self.shader_core = default_shader_core()  # runs DISPATCH_DIRECT: the wavefront emulator
    self.engines: list[Engine] = []
    self.dispatches = 0
    self.running = threading.Event()  # cleared, the engines stop between packets (benchmarks time the host alone)
    self.running.set()
    self.written, self.writes = threading.Condition(), 0  # engines' memory writes, counted: what a polling engine waits on
    self.packet_delay = 0.0  # seconds each engine spends before every packet: tests slow the command processors down with it
    self._t0 = time.perf_counter_ns()
    self.lock = threading.Lock()
    # the scratch ring each XCC took per submission: (ring base, position of the ring packet) -> {XCC: [lo, hi)}
    self._claims: OrderedDict[tuple[int, int], dict[int, tuple[int, int]]] = OrderedDict()
    self._submission = [(0, 0)] * board.num_xcc   # the submission each XCC's CP is running a dispatch of
    self._claims_lock = threading.Lock()

  def claim_scratch(self, xcc: int, ring) -> None:
    """Refuse a dispatch on XCC `xcc` whose scratch ring (hcq.asm.emu.scratch.ScratchRing, None: no scratch) overlaps the
    ring another XCC took for the same submission (the ring packet all of a partition's XCCs run, a split dispatch's
    INDIRECT_BUFFER): those run at once, and on the GPU waves of two XCCs given one ring overwrite each other's private
    memory without a fault (kfd_mqd_manager_v9.c init_mqd_v9_4_3: one MQD per XCC on the queue's ring; ROCr gives each
    XCC its own part of the scratch, scratch_backing_memory_byte_size "per XCC"). Stricter than the GPU, whose XCCs may
    happen not to overlap in time; the emulated XCCs' threads seldom do, so the rule does not depend on timing."""
    if ring is None: return
    lo, hi = ring.base, ring.base + ring.nbytes
    with self._claims_lock:
      taken = self._claims.setdefault(self._submission[xcc], {})
      for other, (olo, ohi) in taken.items():
        if other != xcc and olo < hi and lo < ohi:
          raise ValueError(f"the scratch ring of XCC {xcc} at {lo:#x}..{hi:#x} overlaps XCC {other}'s at {olo:#x}..{ohi:#x} "
                           f"in the same submission: waves of two XCCs would overwrite each other's private memory; give each "
                           f"XCC its own COMPUTE_DISPATCH_SCRATCH_BASE (one XCC's ring apart)")
      taken[xcc] = (lo, hi)
      while len(self._claims) > 256: self._claims.popitem(last=False)   # long past: every XCC has run them

  def clock(self) -> int:
    """The global timestamp counter, in ticks of `board.timestamp_hz`."""
    return (time.perf_counter_ns() - self._t0) * self.board.timestamp_hz // 1_000_000_000

  def shader_board(self):
    """What the shader core reads of the board (hcq.asm.emu.dispatch.Board): where the GC registers the CP holds sit
    (IP discovery's segment 0 base), and one XCC's shader engines with the waves each holds, as it places scratch
    slots (each XCC has its own SPI and scratch ring: the engines are the node's divided by num_xcc)."""
    from hcq.asm.emu.dispatch import Board
    b = self.board
    return Board(b.shader_engines // b.num_xcc, b.compute_units // b.shader_engines * b.simd_per_cu * b.max_waves_per_simd, b.gc_bases[0])

  def start_queue(self, kind: str, ring: Ring, name: str, xcc: int = 0) -> Engine:
    """Start a queue's engine; a compute queue's CP runs on XCC `xcc` of the partition (its MQD's pm4_target_xcc)."""
    engine = ComputeCP(self, ring, name, xcc) if kind == "compute" else SDMAEngine(self, ring, name)
    with self._claims_lock:   # a new queue on this ring counts its packets from 0 again
      for key in [k for k in self._claims if k[0] == ring.base]: del self._claims[key]
    self.engines.append(engine)
    engine.start()
    return engine

  def stop_queue(self, engine: Engine, timeout: float = 5.0) -> bool:
    """Preempt (unmap) a queue: the engine stops between packets, a dispatch between instruction steps of its waves.
    True once its thread has ended and will touch no memory again; False if it did not stop within `timeout`."""
    engine.ring.stopped = True
    engine.ring.doorbell.set()
    self.memory_written()  # a poll in progress sees the stop now
    engine.join(timeout=timeout)
    if engine in self.engines: self.engines.remove(engine)
    return not engine.is_alive()

  def interrupt(self, ctxid: int) -> None:
    if self.on_interrupt: self.on_interrupt(ctxid)

  def memory_written(self) -> None:
    """An engine wrote memory another engine may be polling (Engine.poll): wake the pollers to look again."""
    with self.written:
      self.writes += 1
      self.written.notify_all()

  def queue_error(self, engine: Engine, error: QueueError, cause: BaseException | None = None) -> None:
    if self.on_queue_error: self.on_queue_error(engine, error, cause)

  def dispatch(self, state: DispatchState, cp: ComputeCP) -> None:
    if self.shader_core is None:
      raise QueueError("DISPATCH_DIRECT reached a GPU with no shader core attached (the wavefront emulator)", cp.ring.rptr * 4 % cp.ring.size)
    self.dispatches += 1
    # the ring packet in progress (a split dispatch's INDIRECT_BUFFER): the same for every XCC of the submission
    self._submission[state.xcc] = (cp.ring.base, cp.batch_start + cp.batch_pos * 4 // cp.ring.unit)
    self.xcc_workgroups[state.xcc] += share_size(state.grid[0] * state.grid[1] * state.grid[2], state.share)
    from hcq.asm.emu.errors import Cancelled
    try:
      self.shader_core(self, state, cancel=lambda: cp.ring.stopped)
    except Cancelled:
      raise QueueStopped() from None


__all__ = ["MockAMDGPU", "BoardSpec", "BOARDS", "board_for", "boards_for", "PageFault", "QueueError", "Ring"]
