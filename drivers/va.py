"""GPU virtual address ranges inside the driver's reservation: first fit over freed ranges, else the untouched top."""
from __future__ import annotations
import bisect
import threading

from hcq.drivers import libc
from hcq.errors import HCQError


class AddressSpace:
  """Hands out `granule`-aligned ranges of [base, base + size) and takes them back. Freed ranges merge with their
  neighbours (and with the untouched top), so alloc/free cycles never run out and fragments grow back together."""

  def __init__(self, base: int, size: int, granule: int = 1 << 16):
    self.base, self.size, self.granule = base, size, granule
    self.top = (base + granule - 1) // granule * granule  # everything from here to the end has never been handed out
    self.free_starts: list[int] = []  # freed ranges below `top`, sorted, none touching another
    self.free_ends: list[int] = []

  def alloc(self, nbytes: int) -> int:
    """The start of `nbytes` (rounded up to the granule) of free address space; HCQError when none is left."""
    n = (nbytes + self.granule - 1) // self.granule * self.granule
    for i, (s, e) in enumerate(zip(self.free_starts, self.free_ends)):
      if e - s >= n:
        if e - s == n: del self.free_starts[i], self.free_ends[i]
        else: self.free_starts[i] = s + n
        return s
    if self.top + n > self.base + self.size:
      raise HCQError(f"out of GPU address space: {nbytes} bytes requested, {self.free_bytes()} of the {self.size >> 20} MiB "
                     f"reservation free, the largest piece {self.largest_free()} bytes")
    self.top += n
    return self.top - n

  def free(self, start: int, nbytes: int) -> None:
    """Give back a range `alloc` returned for `nbytes`."""
    end = start + (nbytes + self.granule - 1) // self.granule * self.granule
    i = bisect.bisect_left(self.free_starts, start)
    if i < len(self.free_starts) and self.free_starts[i] < end or i and self.free_ends[i - 1] > start or end > self.top:
      raise ValueError(f"address range {start:#x}..{end:#x} is not in use")
    if i < len(self.free_starts) and self.free_starts[i] == end:  # merge with the range after
      end = self.free_ends[i]
      del self.free_starts[i], self.free_ends[i]
    if i and self.free_ends[i - 1] == start:  # and with the range before
      i -= 1
      start = self.free_starts[i]
      del self.free_starts[i], self.free_ends[i]
    if end == self.top:
      self.top = start
    else:
      self.free_starts.insert(i, start)
      self.free_ends.insert(i, end)

  def free_bytes(self) -> int:
    return self.base + self.size - self.top + sum(e - s for s, e in zip(self.free_starts, self.free_ends))

  def largest_free(self) -> int:
    return max([self.base + self.size - self.top, *(e - s for s, e in zip(self.free_starts, self.free_ends))])


class ReservedRange:
  """A range of the process's address space reserved once (PROT_NONE, nothing behind it) from which buffers take their
  addresses, so that a buffer's GPU address is its CPU address. `below` keeps the whole range under an address (NVIDIA's
  GPFIFO entries and host semaphores carry 40-bit addresses)."""

  def __init__(self, os_layer, size: int, below: int | None = None, granule: int = 1 << 16):
    self.os, self.size = os_layer, size
    self.base = self._reserve(size, below)
    self.va = AddressSpace(self.base, size, granule)
    self.lock = threading.Lock()

  def _reserve(self, size: int, below: int | None) -> int:
    flags = libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | libc.MAP_NORESERVE
    if below is None: return self.os.mmap(0, size, libc.PROT_NONE, flags, -1, 0)
    step = min(size, 1 << 36)
    for hint in range(below - size, 0, -step):  # the kernel takes a free hint as given; else it places the range elsewhere
      base = self.os.mmap(hint, size, libc.PROT_NONE, flags, -1, 0)
      if base + size <= below: return base
      self.os.munmap(base, size)
    raise HCQError(f"cannot reserve {size >> 30} GiB of address space below {below:#x}: every place there is taken")

  def take(self, size: int, cpu: bool) -> int:
    """The start of `size` bytes of the range; `cpu` backs it with the process's own read-write pages there."""
    with self.lock: va = self.va.alloc(size)
    if cpu: self.os.mmap(va, size, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | libc.MAP_FIXED, -1, 0)
    return va

  def give_back(self, va: int, size: int, cpu: bool) -> None:
    """Return what `take` gave (its pages dropped back to the reservation when it had them), to be handed out again."""
    if cpu: self.os.mmap(va, size, libc.PROT_NONE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | libc.MAP_NORESERVE | libc.MAP_FIXED, -1, 0)
    with self.lock: self.va.free(va, size)
