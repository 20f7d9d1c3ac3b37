"""GPU virtual address ranges inside the driver's reservation: first fit over freed ranges, else the untouched top."""
from __future__ import annotations
import bisect

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
