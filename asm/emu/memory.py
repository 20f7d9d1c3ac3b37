"""The emulated GPU's view of memory: a virtual address map whose ranges the driver (or the mock kernel) registers.

Every access the emulator or the mock GPU's engines make goes through here. An access outside every
mapped range, or a write to a read-only range, is a `PageFault` naming the address and the access; the
emulator never touches host memory that nobody mapped.
"""
from __future__ import annotations
import bisect
import ctypes
import threading
from dataclasses import dataclass

import numpy as np


class PageFault(Exception):
  """A GPU access to an unmapped (or read-only) virtual address."""

  def __init__(self, address: int, size: int, write: bool, pc: int | None = None, what: str = ""):
    kind = "write" if write else "read"
    super().__init__(f"GPU page fault: {kind} of {size} bytes at {address:#x}" + (f" (pc {pc:#x})" if pc is not None else "") +
                     (f": {what}" if what else ""))
    self.address, self.size, self.write, self.pc = address, size, write, pc


@dataclass(frozen=True)
class Mapping:
  va: int
  size: int
  host: np.ndarray   # uint8 view of the backing memory
  writable: bool
  cached: bool = False  # reached through a GPU cache model (hcq.drivers.mock.amdgpu.cache) where one sits in front


class VirtualMemory:
  """Ranges of GPU virtual addresses, each backed by host memory (a numpy uint8 array or a raw host address)."""

  def __init__(self) -> None:
    # (starts, mappings), replaced whole by map and unmap and never changed in place: a reader on another thread (an
    # engine, the wavefront emulator) takes one consistent pair without a lock, where two lists edited in turn could pair
    # a start with its neighbour's mapping for a moment (a negative offset: an empty or wrong slice)
    self._table: tuple[tuple[int, ...], tuple[Mapping, ...]] = ((), ())
    self._lock = threading.Lock()

  def map(self, va: int, size: int, backing: "np.ndarray | int", writable: bool = True, cached: bool = False) -> None:
    """Map [va, va+size) to `backing`: a uint8 array of at least `size` bytes, or a host address owned by the caller.
    `cached` marks memory a GPU cache model may hold lines of (a plain VirtualMemory has none)."""
    if size <= 0: raise ValueError(f"mapping size must be positive, got {size}")
    host = backing[:size] if isinstance(backing, np.ndarray) else np.frombuffer((ctypes.c_uint8 * size).from_address(backing), np.uint8)
    if host.dtype != np.uint8 or host.size < size: raise ValueError(f"backing for {size} bytes must be a uint8 array of that size")
    with self._lock:
      if self._overlaps(va, size): raise ValueError(f"mapping [{va:#x}, {va + size:#x}) overlaps an existing one")
      starts, maps = self._table
      i = bisect.bisect_left(starts, va)
      self._table = (starts[:i] + (va,) + starts[i:], maps[:i] + (Mapping(va, size, host, writable, cached),) + maps[i:])

  def overlaps(self, va: int, size: int) -> bool:
    """Whether any mapping intersects [va, va+size)."""
    with self._lock: return self._overlaps(va, size)

  def _overlaps(self, va: int, size: int) -> bool:
    starts, maps = self._table
    i = bisect.bisect_left(starts, va)
    return (i > 0 and maps[i - 1].va + maps[i - 1].size > va) or (i < len(maps) and maps[i].va < va + size)

  def unmap(self, va: int) -> None:
    with self._lock:
      starts, maps = self._table
      i = bisect.bisect_left(starts, va)
      if i == len(starts) or starts[i] != va: raise ValueError(f"no mapping starts at {va:#x}")
      self._table = (starts[:i] + starts[i + 1:], maps[:i] + maps[i + 1:])

  def mappings(self) -> tuple[Mapping, ...]:
    """Every mapping, by address (one consistent snapshot)."""
    return self._table[1]

  def mapping_at(self, va: int) -> "Mapping | None":
    """The mapping with the highest start at or below va (which may end before va), or None."""
    starts, maps = self._table
    i = bisect.bisect_right(starts, va) - 1
    return maps[i] if i >= 0 else None

  def find(self, va: int, size: int, write: bool = False, pc: int | None = None) -> tuple[Mapping, int]:
    """The mapping holding all of [va, va+size) and the offset of va in it; PageFault otherwise."""
    m = self.mapping_at(va)
    if m is not None:
      off = va - m.va
      if off + size <= m.size and (m.writable or not write): return m, off
    raise PageFault(va, size, write, pc)

  def read(self, va: int, size: int, pc: int | None = None) -> bytes:
    m, off = self.find(va, size, False, pc)
    return m.host[off:off + size].tobytes()

  def write(self, va: int, data: bytes | np.ndarray, pc: int | None = None) -> None:
    raw = np.frombuffer(data, np.uint8) if isinstance(data, (bytes, bytearray)) else data.view(np.uint8).reshape(-1)
    m, off = self.find(va, raw.size, True, pc)
    m.host[off:off + raw.size] = raw

  def view(self, va: int, size: int, write: bool = False, pc: int | None = None) -> np.ndarray:
    """A uint8 view of [va, va+size) (no copy), after the same checks as a read or write."""
    m, off = self.find(va, size, write, pc)
    return m.host[off:off + size]

  def read_u32(self, va: int) -> int:
    return int(self.view(va, 4).view(np.uint32)[0])

  def read_u64(self, va: int) -> int:
    return int(self.view(va, 8).view(np.uint64)[0])

  def write_u32(self, va: int, value: int) -> None:
    self.view(va, 4, True).view(np.uint32)[0] = value & 0xffffffff

  def write_u64(self, va: int, value: int) -> None:
    self.view(va, 8, True).view(np.uint64)[0] = value & 0xffffffffffffffff

  def gather(self, addrs: np.ndarray, size: int, pc: int | None = None) -> np.ndarray:
    """Bytes [addr, addr+size) for every address (a (n, size) uint8 array): one vector memory instruction's lanes."""
    addrs = addrs.astype(np.uint64, copy=False)
    if addrs.size == 0: return np.zeros((0, size), np.uint8)
    lo, hi = int(addrs.min()), int(addrs.max())
    try:  # fast path: every lane in one mapping
      m, off = self.find(lo, hi - lo + size, False, pc)
      idx = (addrs - np.uint64(lo)).astype(np.int64)[:, None] + np.arange(size) + off
      return m.host[idx]
    except PageFault:
      out = np.empty((addrs.size, size), np.uint8)
      for k, a in enumerate(addrs.tolist()): out[k] = self.view(a, size, False, pc)
      return out

  def scatter(self, addrs: np.ndarray, data: np.ndarray, pc: int | None = None) -> None:
    """Write data[k] (a (n, size) uint8 array) at addrs[k], in lane order (a later lane wins, as in hardware)."""
    addrs = addrs.astype(np.uint64, copy=False)
    if addrs.size == 0: return
    size = data.shape[1]
    lo, hi = int(addrs.min()), int(addrs.max())
    try:
      m, off = self.find(lo, hi - lo + size, True, pc)
      idx = (addrs - np.uint64(lo)).astype(np.int64)[:, None] + np.arange(size) + off
      m.host[idx] = data
    except PageFault:
      for k, a in enumerate(addrs.tolist()): self.view(a, size, True, pc)[:] = data[k]

  def _host(self, m: Mapping, write: bool, offs: np.ndarray, size: int) -> np.ndarray:
    """The bytes an access of `size` bytes at each of `offs` in `m` reaches: its backing here; a cache model's copy in a
    view through one."""
    return m.host

  # --- vectorised access for the wavefront emulator -------------------------------------------------------
  def locate_fast(self, addrs: np.ndarray, size: int, write: bool = False) -> "list | None":
    """locate() for the common case, every address in the mapping of the first one (two passes over the lanes: an
    address below the mapping wraps to a huge offset, so one max checks both ends); None when it does not apply."""
    addrs = np.asarray(addrs, np.uint64).reshape(-1)
    if addrs.size == 0: return []
    m = self.mapping_at(int(addrs[0]))
    if m is None: return None
    if write and not m.writable: return None
    offs = addrs - np.uint64(m.va)
    if int(offs.max()) + size > m.size: return None
    offs = offs.view(np.int64)
    return [(self._host(m, write, offs, size), offs, None)]

  def locate(self, addrs: np.ndarray, size: int, write: bool = False, pc: int | None = None,
             bounds: tuple[int, int] | None = None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
    """Where each of `addrs` (n,) lives: a list of (host uint8 array, byte offsets, lane indices or None for all),
    one entry per mapping touched; PageFault (first bad address) if any [addr, addr+size) is not mapped.
    `bounds` is (min, max) of addrs when the caller has it already."""
    addrs = np.asarray(addrs, np.uint64).reshape(-1)
    if addrs.size == 0: return []
    lo, hi = bounds if bounds is not None else (int(addrs.min()), int(addrs.max()))
    starts, maps = self._table
    i = bisect.bisect_right(starts, lo) - 1
    if i >= 0:
      m = maps[i]
      if hi + size <= m.va + m.size and (m.writable or not write):
        offs = (addrs - np.uint64(m.va)).astype(np.int64)
        return [(self._host(m, write, offs, size), offs, None)]
    idx = np.searchsorted(np.array(starts, np.uint64), addrs, side="right").astype(np.int64) - 1
    out = []
    for j in np.unique(idx).tolist():
      lanes = np.nonzero(idx == j)[0]
      a = addrs[lanes]
      if j < 0: raise PageFault(int(a[0]), size, write, pc)
      m = maps[j]
      off = a - np.uint64(m.va)   # unsigned: an address near 2^64 is a huge offset, not a negative one
      bad = (off > np.uint64(max(m.size - size, 0))) | (size > m.size) | (not m.writable and write)
      if np.any(bad): raise PageFault(int(a[np.argmax(bad)]), size, write, pc)
      off = off.astype(np.int64)
      out.append((self._host(m, write, off, size), off, lanes))
    return out
