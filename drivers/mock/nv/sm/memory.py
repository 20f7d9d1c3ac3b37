"""The SM's memory spaces for one batch of blocks: global through the GPU's VA space (`VirtualMemory`), the
blocks' shared windows, the threads' local windows, the kernel's parameters (through the VA space at params_va)
and the module's .const data.

Generic addresses (PTX 5.1.7, cvta): a shared-window address is SHARED_WINDOW + offset and a local one
LOCAL_WINDOW + offset; everything else is global. The windows sit where no GPU mapping is: above 2^56, beyond the
57-bit VA space Hopper's MMU may reach, so a generic access outside them faults as a global one.
"""
from __future__ import annotations
import numpy as np

from hcq.asm.emu.memory import PageFault, VirtualMemory

from .errors import SMFault
from .scratch import scratch
from .types import UINT

SHARED_WINDOW = 0x0100_0000_0000_0000
LOCAL_WINDOW = 0x0200_0000_0000_0000
WINDOW_SIZE = 1 << 32


class Fault(Exception):
  """A memory fault before the executor adds the kernel and the PTX line."""

  def __init__(self, kind: str, address: int, message: str):
    super().__init__(message)
    self.kind, self.address, self.message = kind, address, message


def check_aligned(addrs: np.ndarray, size: int, space: str) -> None:
  # PTX 6.4.1: an address must be naturally aligned to the access size; the hardware raises a misaligned-address error
  if size > 1 and addrs.size:
    bad = (addrs & np.uint64(size - 1)) != 0
    if bad.any():
      a = int(addrs[np.argmax(bad)])
      raise Fault("misaligned", a, f"{space} access of {size} bytes at {a:#x} is not {size}-byte aligned")


def typed_view(host: np.ndarray, size: int) -> np.ndarray:
  return host[: host.size // size * size].view(UINT[size])


class GlobalSpace:
  """Global memory: every access goes through the VA space, so an unmapped address is an MMU fault."""

  def __init__(self, mem: VirtualMemory):
    self.mem = mem

  def _locate(self, addrs: np.ndarray, size: int, write: bool):
    try: return self.mem.locate_fast(addrs, size, write) or self.mem.locate(addrs, size, write)
    except PageFault as e:
      raise Fault("mmu", e.address, f"MMU fault: {'write' if write else 'read'} of {size} bytes at {e.address:#x} outside every "
                                    "mapping" + (" (or to a read-only one)" if write else "")) from None

  def _fast(self, addrs: np.ndarray, size: int, write: bool, offset: int = 0):
    """(one mapping's typed view, element indices) for the addresses addrs + offset when the first one's mapping is
    size-aligned and every address is aligned; None otherwise. The indices are (address - mapping start) >> log2(size)
    as unsigned, so an address below the mapping becomes a huge index: the caller's bounds check (take, or the max)
    catches both ends at once. One subtract makes them, whatever the offset, in a work array the caller uses at once."""
    if offset % size: return None
    addrs = np.ascontiguousarray(addrs)
    try: m, _ = self.mem.find((int(addrs[0]) + offset) & 0xffffffffffffffff, size, write)
    except PageFault: return None
    if m.va % size or m.host.size % size: return None
    if size > 1 and np.bitwise_or.reduce(addrs.view(np.uint8)[::8]) & (size - 1): return None   # little-endian low bytes
    idx = np.subtract(addrs, np.uint64((m.va - offset) & 0xffffffffffffffff), out=scratch("global.index", addrs.size, np.uint64))
    if size == 1:   # no shift to clear the top bit: check the bound here
      if int(idx.max()) >= m.host.size: return None
    else: np.right_shift(idx, np.uint64(size.bit_length() - 1), out=idx)   # < 2^63 from here on: no negative index below
    return m.host.view(UINT[size]), idx.view(np.int64)

  def load(self, addrs: np.ndarray, size: int, offset: int = 0) -> np.ndarray:
    """Raw words (unsigned of `size` bytes) at each address + offset."""
    if addrs.size and (f := self._fast(addrs, size, False, offset)) is not None:
      try: return f[0].take(f[1])
      except IndexError: pass   # some address outside that mapping: the general path finds its mapping or faults
    if offset: addrs = addrs + np.uint64(offset & 0xffffffffffffffff)
    check_aligned(addrs, size, "global")
    out = np.empty(addrs.size, UINT[size])
    shift = size.bit_length() - 1
    for host, offs, lanes in self._locate(addrs, size, False):
      v = typed_view(host, size)[offs >> shift] if not (offs & (size - 1)).any() else _gather(host, offs, size)
      if lanes is None: out = v
      else: out[lanes] = v
    return out

  def store(self, addrs: np.ndarray, vals: np.ndarray, size: int, offset: int = 0) -> None:
    vals = np.asarray(vals).astype(UINT[size], copy=False)
    if addrs.size and (f := self._fast(addrs, size, True, offset)) is not None and int(f[1].max()) < f[0].size:
      f[0][f[1]] = vals
      return
    if offset: addrs = addrs + np.uint64(offset & 0xffffffffffffffff)
    check_aligned(addrs, size, "global")
    for host, offs, lanes in self._locate(addrs, size, True):
      v = vals if lanes is None else vals[lanes]
      if not (offs % size).any(): typed_view(host, size)[offs // size] = v
      else: host[offs[:, None] + np.arange(size)] = v.view(np.uint8).reshape(-1, size)

  def views(self, addrs: np.ndarray, size: int):
    """(typed host view, element indices, lanes) per mapping, for atomics (alignment checked)."""
    check_aligned(addrs, size, "global")
    return [(typed_view(host, size), offs // size, lanes) for host, offs, lanes in self._locate(addrs, size, True)]


def _gather(host: np.ndarray, offs: np.ndarray, size: int) -> np.ndarray:
  return host[offs[:, None] + np.arange(size)].copy().view(UINT[size]).reshape(-1)


class WindowSpace:
  """Shared (one window per block) or local (one per thread) memory: `owner` maps a lane to its window."""

  def __init__(self, space: str, windows: int, size: int):
    self.space, self.size = space, size
    self.stride = (size + 7) // 8 * 8
    self.data = np.zeros(max(windows * self.stride, 8), np.uint8)

  def _index(self, owner: np.ndarray, addrs: np.ndarray, size: int) -> np.ndarray:
    check_aligned(addrs, size, self.space)
    bad = addrs + np.uint64(size) > np.uint64(self.size)
    if bad.any():
      a = int(addrs[np.argmax(bad)])
      raise Fault(self.space, a, f"{self.space} access of {size} bytes at offset {a:#x} is outside the {self.space} window of "
                                 f"{self.size} bytes" + (" the launch gives each block" if self.space == "shared" else " each thread has"))
    return (owner.astype(np.int64) * self.stride + addrs.astype(np.int64)) // size

  def load(self, owner: np.ndarray, addrs: np.ndarray, size: int) -> np.ndarray:
    return typed_view(self.data, size)[self._index(owner, addrs, size)]

  def store(self, owner: np.ndarray, addrs: np.ndarray, vals: np.ndarray, size: int) -> None:
    typed_view(self.data, size)[self._index(owner, addrs, size)] = np.asarray(vals).astype(UINT[size], copy=False)

  def views(self, owner: np.ndarray, addrs: np.ndarray, size: int):
    return [(typed_view(self.data, size), self._index(owner, addrs, size), None)]


def fault_to_sm(f: Fault, kernel: str, line: int) -> SMFault:
  return SMFault(f.kind, f.address, kernel, line, f.message)
