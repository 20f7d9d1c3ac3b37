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
  """`size` bytes at `base`; `rptr_addr`/`wptr_addr` hold 64-bit pointers in `unit` bytes (4 for PM4 dwords, 1 for SDMA)."""
  mem: VirtualMemory
  base: int
  size: int
  rptr_addr: int
  wptr_addr: int
  unit: int
  doorbell: threading.Event = field(default_factory=threading.Event)
  stopped: bool = False

  @property
  def rptr(self) -> int:
    return self.mem.read_u64(self.rptr_addr)

  @rptr.setter
  def rptr(self, v: int) -> None:
    self.mem.write_u64(self.rptr_addr, v)

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
