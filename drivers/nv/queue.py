"""NVIDIA queues: GPFIFO method streams for a compute channel and a copy channel.

Methods are written as the host reads them: an INCR header (opcode, count, subchannel, method dword address) and its
data words, every field from the generated class tables (hcq.autogen.nv.*) of the GPU's arch row. Wait, signal and
timestamp are host semaphore methods (SEM_ADDR/PAYLOAD/EXECUTE, 64-bit payloads; a release writes the value and, with
RELEASE_TIMESTAMP, the global timer after it: the 16-byte layout of hcq.signal). Copies go to the copy class bound on
COPY_SUBCHANNEL, pitch-linear, one line of at most COPY_CHUNK bytes per LAUNCH_DMA.
"""
from __future__ import annotations
import ctypes
from typing import TYPE_CHECKING

from hcq.errors import HCQError
from hcq.queue import DwordQueue
from hcq.sym import Sym, hi32, lo32

if TYPE_CHECKING:
  from hcq.drivers.nv.device import NVArch
  from hcq.signal import Signal

COMPUTE_SUBCHANNEL, COPY_SUBCHANNEL = 1, 4  # where each channel binds its engine class with SET_OBJECT (NVK's and the CUDA driver's choice)
COPY_CHUNK = 1 << 30                         # bytes per LAUNCH_DMA (LINE_LENGTH_IN is 32 bits; a round chunk keeps offsets aligned)


class NVQueue(DwordQueue):
  """Host methods, common to both channels."""
  channel = "compute"

  def __init__(self, arch: "NVArch"):
    super().__init__()
    self.arch = arch
    self._bound = None  # (device, buffer, words in it) once bound
    self._last = None   # (channel, GPFIFO entry) of a bound queue's last submission

  def method(self, subchannel: int, method: int, *data: "int | Sym") -> "NVQueue":
    """One INCR method header and its data words (each may be symbolic: a patch slot)."""
    self._q.append(self.arch.header(subchannel, method, len(data)))
    for v in data:
      self._q.append(0)
      self._put(self._q, len(self._q) - 1, v)
    return self

  def _semaphore(self, addr: "int | Sym", payload: "int | Sym", **execute: int) -> "NVQueue":
    self.method(0, self.arch.m("SEM_ADDR_LO"),
                lo32(addr), hi32(addr), lo32(payload), hi32(payload), self.arch.sem_execute(**execute))
    return self

  def wait(self, signal: "Signal", value: "int | Sym") -> "NVQueue":
    """Acquire: stall the channel until the 64-bit value at the signal is >= `value` (ACQ_STRICT_GEQ), yielding the TSG meanwhile."""
    return self._semaphore(signal.value_addr, value, operation=self.arch.c("SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ"),
                           acquire_switch_tsg=1, payload_size=self.arch.c("SEM_EXECUTE_PAYLOAD_SIZE_64BIT"))

  def signal(self, signal: "Signal", value: "int | Sym") -> "NVQueue":
    """Release after all earlier work (RELEASE_WFI): the 64-bit value and the timer at the signal."""
    return self._semaphore(signal.value_addr, value, operation=self.arch.c("SEM_EXECUTE_OPERATION_RELEASE"),
                           release_wfi=self.arch.c("SEM_EXECUTE_RELEASE_WFI_EN"), payload_size=self.arch.c("SEM_EXECUTE_PAYLOAD_SIZE_64BIT"),
                           release_timestamp=self.arch.c("SEM_EXECUTE_RELEASE_TIMESTAMP_EN"))

  def timestamp(self, signal) -> "NVQueue":
    """The timer into the signal's timestamp. The host writes a semaphore's value and time together, so the value
    (the 8 bytes before the timestamp) becomes 0: use it on signals kept for timestamps, as launches do."""
    return self._semaphore(signal.timestamp_addr + (-8), 0, operation=self.arch.c("SEM_EXECUTE_OPERATION_RELEASE"),
                           release_wfi=self.arch.c("SEM_EXECUTE_RELEASE_WFI_EN"), payload_size=self.arch.c("SEM_EXECUTE_PAYLOAD_SIZE_64BIT"),
                           release_timestamp=self.arch.c("SEM_EXECUTE_RELEASE_TIMESTAMP_EN"))

  def memory_barrier(self) -> "NVQueue":
    """A system-scope membar (MEM_OP_C SYS_MEMBAR, MEM_OP_D MEMBAR), after a wait for idle."""
    a = self.arch
    self.method(0, a.m("WFI"), a.host.register(f"{a.prefix}_WFI").encode(scope=0))
    return self.method(0, a.m("MEM_OP_A"), 0, 0, a.host.register(f"{a.prefix}_MEM_OP_C").encode(membar_type=a.c("MEM_OP_C_MEMBAR_TYPE_SYS_MEMBAR")),
                       a.host.register(f"{a.prefix}_MEM_OP_D").encode(operation=a.c("MEM_OP_D_OPERATION_MEMBAR")))

  def bind(self, device) -> "NVQueue":
    """Copy the methods into device memory once; later submits patch them there and push one GPFIFO entry."""
    words = self.words()
    buf = device.alloc(max(4 * len(words), 4), "host")
    arr = (ctypes.c_uint32 * len(words)).from_address(buf.host_addr)
    ctypes.memmove(arr, words.buffer_info()[0], 4 * len(words))
    self._patches = [(arr if c is words else c, i, sym) for c, i, sym in self._patches]
    self._bound = (device, buf, arr)
    return self

  def _apply_patches(self, var_vals) -> None:
    if self._bound is not None and self._last is not None:  # the GPU reads the bound methods in place: not while it may still
      ch, entry = self._last
      device = self._bound[0]
      if device.channels.get(self.channel) is ch: device.consumed(self.channel, entry)  # a recovered channel reads nothing old
    super()._apply_patches(var_vals)

  def _submit(self, device) -> None:
    device.submit_methods(self.channel, self)


class NVComputeQueue(NVQueue):
  """The compute channel's queue: host methods and the compute class."""
  channel = "compute"

  def exec(self, program, kernargs_addr, global_size, local_size) -> "NVComputeQueue":
    """Launch the QMD at `kernargs_addr` (the block NVProgram.kernargs made for these sizes and place_kernargs placed)."""
    from hcq.drivers.nv.program import exec_methods
    return exec_methods(self, program, kernargs_addr)


class NVCopyQueue(NVQueue):
  """The copy channel's queue: host methods and the copy class."""
  channel = "copy"

  def copy(self, dest: "int | Sym", src: "int | Sym", nbytes: int) -> "NVCopyQueue":
    """Pitch-linear copies of at most COPY_CHUNK bytes, each: source and destination offsets, the length, LAUNCH_DMA."""
    if isinstance(nbytes, Sym): raise ValueError("a copy's size must be known when the queue is built")
    a = self.arch
    launch = a.copy_launch()
    for off in range(0, nbytes, COPY_CHUNK):
      n = min(COPY_CHUNK, nbytes - off)
      s, d = src + off, dest + off
      self.method(COPY_SUBCHANNEL, a.ce("OFFSET_IN_UPPER"), hi32(s), lo32(s), hi32(d), lo32(d))
      self.method(COPY_SUBCHANNEL, a.ce("LINE_LENGTH_IN"), n)
      self.method(COPY_SUBCHANNEL, a.ce("LAUNCH_DMA"), launch)
    return self
