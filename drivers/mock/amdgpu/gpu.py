"""The emulated gfx1100 behind the mock kernel interface: memory, engines (compute CPs, SDMA), clock, interrupts.

The board is a Radeon RX 7900 XTX as the kernel would describe it. Engines run in their own threads, so the
host really waits on them; dispatches go to a shader core (the wavefront emulator) when one is attached.
"""
from __future__ import annotations
import threading
import time
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
  num_sdma_engines: int = 2
  max_waves_per_simd: int = 16
  max_slots_scratch_cu: int = 32     # gc_info's max_scratch_slots_per_cu (kfd_crat.c max_slots_scatch_cu)
  timestamp_hz: int = 100_000_000  # gfx11's global timestamp counter runs at 100 MHz
  gc_bases: tuple[int, ...] = (0x00001260, 0x0000A000, 0x0001C000, 0x02402C00)  # GC IP segment bases of Navi31 (IP discovery)


def default_shader_core():
  """hcq.asm.emu's dispatch as the shader core, or None while the emulator is not there."""
  try:
    from hcq.asm.emu import dispatch
  except ImportError:
    return None
  return lambda gpu, state, cancel=None: dispatch(gpu.cache.view, state, cancel=cancel, board=gpu.shader_board())


class MockAMDGPU:
  """One emulated GPU. `on_interrupt(ctxid)` and `on_queue_error(engine, error, cause)` are how it reaches the kernel side."""

  def __init__(self, board: BoardSpec = BoardSpec(), on_interrupt: Callable[[int], None] | None = None,
               on_queue_error: Callable[[Engine, QueueError, BaseException | None], None] | None = None):
    self.board, self.mem = board, VirtualMemory()
    self.cache = GPUCache(self.mem)  # what the shader core reads and writes through; the engines reach memory directly
    self.on_interrupt, self.on_queue_error = on_interrupt, on_queue_error
    self.shader_core = default_shader_core()  # runs DISPATCH_DIRECT: the wavefront emulator
    self.engines: list[Engine] = []
    self.dispatches = 0
    self.running = threading.Event()  # cleared, the engines stop between packets (benchmarks time the host alone)
    self.running.set()
    self.packet_delay = 0.0  # seconds each engine spends before every packet: tests slow the command processors down with it
    self._t0 = time.perf_counter_ns()
    self.lock = threading.Lock()

  def clock(self) -> int:
    """The global timestamp counter, in ticks of `board.timestamp_hz`."""
    return (time.perf_counter_ns() - self._t0) * self.board.timestamp_hz // 1_000_000_000

  def shader_board(self):
    """The shader engines and the waves each holds, as the shader core places scratch slots (hcq.asm.emu.dispatch.Board)."""
    from hcq.asm.emu.dispatch import Board
    b = self.board
    return Board(b.shader_engines, b.compute_units // b.shader_engines * b.simd_per_cu * b.max_waves_per_simd)

  def start_queue(self, kind: str, ring: Ring, name: str) -> Engine:
    engine = (ComputeCP if kind == "compute" else SDMAEngine)(self, ring, name)
    self.engines.append(engine)
    engine.start()
    return engine

  def stop_queue(self, engine: Engine, timeout: float = 5.0) -> bool:
    """Preempt (unmap) a queue: the engine stops between packets, a dispatch between instruction steps of its waves.
    True once its thread has ended and will touch no memory again; False if it did not stop within `timeout`."""
    engine.ring.stopped = True
    engine.ring.doorbell.set()
    engine.join(timeout=timeout)
    if engine in self.engines: self.engines.remove(engine)
    return not engine.is_alive()

  def interrupt(self, ctxid: int) -> None:
    if self.on_interrupt: self.on_interrupt(ctxid)

  def queue_error(self, engine: Engine, error: QueueError, cause: BaseException | None = None) -> None:
    if self.on_queue_error: self.on_queue_error(engine, error, cause)

  def dispatch(self, state: DispatchState, cp: ComputeCP) -> None:
    if self.shader_core is None:
      raise QueueError("DISPATCH_DIRECT reached a GPU with no shader core attached (the wavefront emulator)", cp.ring.rptr * 4 % cp.ring.size)
    self.dispatches += 1
    from hcq.asm.emu.errors import Cancelled
    try:
      self.shader_core(self, state, cancel=lambda: cp.ring.stopped)
    except Cancelled:
      raise QueueStopped() from None


__all__ = ["MockAMDGPU", "BoardSpec", "PageFault", "QueueError", "Ring"]
