"""The mock GPU's caches between the shader core and memory: stale lines until invalidated, dirty lines until written back.

What the model keeps (and where it is simpler than gfx11):
- One cache level stands for the whole path of a wave's accesses: GL2 (shared by the GPU) folded with GL1, the
  vector GL0, the scalar K$ and the I$. It holds a copy of every mapping a wave touched, filled at the first access
  after an invalidate, and written by the wave's stores and atomics. Host (CPU) writes, SDMA and the CP reach memory
  directly, so a wave sees them only after an invalidate, and they see a wave's writes only after a write-back.
- Only mappings with MTYPE NC are cached. amdgpu_amdkfd_gpuvm.c get_pte_flags (Linux 6.1, the default case gfx11
  takes) maps KFD_IOC_ALLOC_MEM_FLAGS_COHERENT or _UNCACHED memory MTYPE_UC, which GL2 does not keep; all else is
  MTYPE_NC. UC memory bypasses the whole model here (simpler: GL0/GL1 may still hold lines of it on the hardware).
- An invalidate (ACQUIRE_MEM / RELEASE_MEM GCR_CNTL) takes effect only when it names every level a wave reads
  through: GL2_INV, GL1_INV, GLV_INV, GLK_INV and GLI_INV (stricter: on the hardware a kernel that makes no scalar
  loads would not need GLK_INV). Dirty bytes survive an invalidate. A write-back (GL2_WB) writes every dirty byte to
  memory; it runs before the invalidate of the same packet (the order GCR_CNTL.SEQ asks for where it matters).
- Nothing is ever evicted (stricter: the hardware writes dirty lines back, and drops clean ones, as it needs room).
- Dirty bytes are the bytes that differ from what the line held before its first store since the last write-back
  (simpler: a store of the value already there is not written back; the hardware's byte mask would write it).
The cost is paid per mapping, lazily: an invalidate only marks lines, a line is copied at its next access, and a
write-back compares only the lines stores reached.
"""
from __future__ import annotations
import threading

import numpy as np

from hcq.asm.emu.memory import Mapping, VirtualMemory


class Line:
  """The cache's copy of one mapping."""
  __slots__ = ("mapping", "data", "clean", "valid")

  def __init__(self, mapping: Mapping):
    self.mapping, self.data, self.valid = mapping, np.empty_like(mapping.host), False
    self.clean: np.ndarray | None = None  # what `data` held before its first store since the last write-back

  def dirty(self) -> np.ndarray | None:
    return None if self.clean is None else self.data != self.clean


class GPUCache:
  """The caches of one GPU. `view` is the memory as the shader core sees it; `invalidate` and `write_back` are what
  the CP's GCR actions do."""

  def __init__(self, mem: VirtualMemory):
    self.mem, self.lines, self.lock = mem, {}, threading.Lock()
    self.view = CachedView(self)
    self.fills = self.write_backs = 0  # for tests and benchmarks: lines copied in, lines written out

  def data(self, m: Mapping, write: bool) -> np.ndarray:
    """The cached bytes of `m` for an access (filled if the line was invalidated; a store starts tracking dirt)."""
    line = self.lines.get(id(m))
    if line is None or line.mapping is not m:
      with self.lock: line = self.lines[id(m)] = Line(m)
    if not line.valid:
      dirty = line.dirty()
      if dirty is None: np.copyto(line.data, m.host)
      else:  # the clean bytes refetched, in `clean` too, so that only the dirty ones still differ from it
        np.copyto(line.data, m.host, where=~dirty)
        np.copyto(line.clean, m.host, where=~dirty)
      line.valid = True
      self.fills += 1
    if write and line.clean is None: line.clean = line.data.copy()
    return line.data

  def _live(self) -> list[Line]:
    """The lines whose mapping is still mapped (the others are dropped: their memory was unmapped)."""
    if not self.lines: return []
    live = {id(m): m for m in self.mem._maps}
    for key in [k for k, line in self.lines.items() if live.get(k) is not line.mapping]: del self.lines[key]
    return list(self.lines.values())

  def write_back(self) -> None:
    """GL2_WB: every dirty byte to memory."""
    with self.lock:
      for line in self._live():
        dirty = line.dirty()
        if dirty is None: continue
        np.copyto(line.mapping.host, line.data, where=dirty)
        line.clean = None
        self.write_backs += 1

  def invalidate(self) -> None:
    """Drop every clean line (refetched at its next access); dirty bytes stay."""
    with self.lock:
      for line in self._live(): line.valid = False


class CachedView(VirtualMemory):
  """The GPU's virtual memory as the shader core reaches it: the same mappings, cached ones through the cache."""

  def __init__(self, cache: GPUCache):
    self.cache = cache
    self._starts, self._maps, self._lock = cache.mem._starts, cache.mem._maps, cache.mem._lock  # shared, not copied

  def _host(self, m: Mapping, write: bool) -> np.ndarray:
    return self.cache.data(m, write) if m.cached else m.host

  def find(self, va: int, size: int, write: bool = False, pc: int | None = None) -> tuple[Mapping, int]:
    m, off = super().find(va, size, write, pc)
    return (Mapping(m.va, m.size, self.cache.data(m, write), m.writable, True), off) if m.cached else (m, off)
