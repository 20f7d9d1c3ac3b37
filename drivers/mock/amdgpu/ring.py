"""A hardware queue's ring as an engine sees it: base, size, read/write pointers in memory, and a doorbell to wake on."""
from __future__ import annotations
import threading
from dataclasses import dataclass, field

import numpy as np

from hcq.asm.emu.memory import VirtualMemory


class QueueError(Exception):
  """A command stream the engine refuses (unknown packet, wrong count, register outside its window, ...):
  the queue stops there, with its read pointer on the offending packet."""

  def __init__(self, message: str, offset: int):
    super().__init__(f"{message} (ring offset {offset:#x})")
    self.offset = offset


@dataclass
class Ring:
  """`size` bytes at `base`. The write pointer at `wptr_addr` is 64 bits in `unit` bytes (4: PM4 dwords, 1: SDMA bytes)
  and never wraps. The engine keeps its own read position (`rptr`) and reports it at `rptr_addr` as the hardware does:
  a compute CP writes a 32-bit dword offset that wraps at the ring size (CP_HQD_PQ_RPTR; kfdtest PM4Queue::Rptr,
  "still 32-bit even on Vega10"), SDMA 4.0 and later a 64-bit byte count that does not wrap (sdma_v6_0.c
  sdma_v6_0_ring_get_rptr reads it as a u64; ROCr's BlitSdmaV4/V5 take SDMA ring indices as monotonic)."""
  mem: VirtualMemory
  base: int
  size: int
  rptr_addr: int
  wptr_addr: int
  unit: int
  doorbell: threading.Event = field(default_factory=threading.Event)
  stopped: bool = False
  position: int = 0  # the engine's read position, in units, never wrapping (the HQD's internal state)

  @property
  def rptr_wraps(self) -> bool:
    return self.unit == 4

  @property
  def rptr(self) -> int:
    return self.position

  @rptr.setter
  def rptr(self, v: int) -> None:
    """Move the read position and report it in memory (what the host can see)."""
    self.position = v
    if self.rptr_wraps: self.mem.write_u32(self.rptr_addr, v % (self.size // 4))  # only the low dword: the CP reports 32 bits
    else: self.mem.write_u64(self.rptr_addr, v)

  @property
  def wptr(self) -> int:
    return self.mem.read_u64(self.wptr_addr)

  def dwords(self, start_bytes: int, count: int) -> np.ndarray:
    """`count` dwords from byte position `start_bytes` (a pointer, not yet reduced modulo the size), wrapping at the end."""
    off = start_bytes % self.size
    first = min(count * 4, self.size - off)
    head = self.mem.view(self.base + off, first).view(np.uint32)
    if first == count * 4: return head
    return np.concatenate([head, self.mem.view(self.base, count * 4 - first).view(np.uint32)])
