"""The mock GPU's caches between the shader core and memory: stale lines until invalidated, dirty lines until written back.

What the model keeps (and where it is simpler than gfx11):
- One cache level stands for the whole path of a wave's accesses: GL2 (shared by the GPU) folded with GL1, the
  vector GL0, the scalar K$ and the I$. It holds a copy of every page a wave touched, filled at the first access
  after an invalidate, and written by the wave's stores and atomics. Host (CPU) writes, SDMA and the CP reach memory
  directly, so a wave sees them only after an invalidate, and they see a wave's writes only after a write-back
  (stricter for SDMA: its gfx11 packets carry GL2 cache policies, so on the hardware it may share GL2 with the waves).
- Only mappings with MTYPE NC are cached. amdgpu_amdkfd_gpuvm.c get_pte_flags (Linux 6.1, the default case gfx11
  takes) maps KFD_IOC_ALLOC_MEM_FLAGS_COHERENT or _UNCACHED memory MTYPE_UC, which GL2 does not keep; all else is
  MTYPE_NC. UC memory bypasses the whole model here (simpler: GL0/GL1 may still hold lines of it on the hardware).
- An invalidate (ACQUIRE_MEM / RELEASE_MEM GCR_CNTL) takes effect only when it names every level a wave reads
  through: GL2_INV, GL1_INV, GLV_INV, GLK_INV and GLI_INV (stricter: on the hardware a kernel that makes no scalar
  loads would not need GLK_INV). Dirty bytes survive an invalidate. A write-back (GL2_WB) writes every dirty byte to
  memory; it runs before the invalidate of the same packet (the order GCR_CNTL.SEQ asks for where it matters).
- One such cache per XCC (MI300X: 8 L2s; the Radeons have one): a CP's ACQUIRE_MEM / RELEASE_MEM act on its own
  XCC's, and its dispatches read and write through it, so a store another XCC has not written back stays unseen.
- Nothing is ever evicted (stricter: the hardware writes dirty lines back, and drops clean ones, as it needs room).
- Each queue's engine is a thread: GCR actions of one compute queue that overlap another queue's running dispatch
  may miss the stores it makes meanwhile (the model orders them only within a queue; hcq's driver uses one).
- Dirty bytes are the bytes that differ from what the line held before its first store since the last write-back
  (simpler: a store of the value already there is not written back; the hardware's byte mask would write it).
The cost is paid per 4 KiB page, lazily: an invalidate only marks pages, a page is copied at its next access, and a
write-back compares only the pages stores reached.
"""
from __future__ import annotations
import threading

import numpy as np

from hcq.asm.emu.memory import Mapping, VirtualMemory


PAGE = 4096  # the unit the model fills, invalidates and tracks stores in (the hardware's GL2 line is 128 bytes)


class Line:
  """The cache's copy of one mapping, valid and store-tracked page by page."""
  __slots__ = ("mapping", "data", "clean", "valid", "tracked")

  def __init__(self, mapping: Mapping):
    pages = -(-mapping.size // PAGE)
    self.mapping, self.data = mapping, np.empty_like(mapping.host)
    self.valid = np.zeros(pages, bool)    # the page holds what memory held at its fill (or the wave's stores since)
    self.tracked = np.zeros(pages, bool)  # stores reached the page since the last write-back: `clean` holds its bytes before
    self.clean: np.ndarray | None = None  # allocated at the first store

  def dirty(self, a: int, b: int) -> np.ndarray:
    """Which bytes of [a, b) the wave changed since the last write-back."""
    return self.data[a:b] != self.clean[a:b]

  def fill(self, p0: int, p1: int) -> int:
    """Make pages [p0, p1) valid: refetch each invalid one from memory, but for its dirty bytes. Returns the pages fetched."""
    todo = [p0] if p1 == p0 + 1 else (np.flatnonzero(~self.valid[p0:p1]) + p0).tolist()  # one page: the common access
    host = self.mapping.host
    for p in todo:
      a, b = p * PAGE, min((p + 1) * PAGE, self.mapping.size)
      if self.tracked[p]:  # the clean bytes refetched, in `clean` too, so that only the dirty ones still differ from it
        keep = ~self.dirty(a, b)
        np.copyto(self.data[a:b], host[a:b], where=keep)
        np.copyto(self.clean[a:b], host[a:b], where=keep)
      else:
        self.data[a:b] = host[a:b]
    self.valid[p0:p1] = True
    return len(todo)

  def track(self, p0: int, p1: int) -> None:
    """Stores are about to reach pages [p0, p1): keep what they hold now, to find the bytes the stores change."""
    if self.clean is None: self.clean = np.empty_like(self.data)
    for p in [p0] if p1 == p0 + 1 else (np.flatnonzero(~self.tracked[p0:p1]) + p0).tolist():
      self.clean[p * PAGE:(p + 1) * PAGE] = self.data[p * PAGE:(p + 1) * PAGE]
    self.tracked[p0:p1] = True

  def write_back(self) -> int:
    """Every dirty byte to memory; returns the pages written."""
    pages = np.flatnonzero(self.tracked).tolist()
    for p in pages:
      a, b = p * PAGE, min((p + 1) * PAGE, self.mapping.size)
      np.copyto(self.mapping.host[a:b], self.data[a:b], where=self.dirty(a, b))
    self.tracked[:] = False
    return len(pages)


class GPUCache:
  """The caches of one GPU. `view` is the memory as the shader core sees it; `invalidate` and `write_back` are what
  the CP's GCR actions do. Only lines with valid pages (`filled`) and with stores (`stored`) are visited by them."""

  def __init__(self, mem: VirtualMemory):
    self.mem, self.lines, self.lock = mem, {}, threading.Lock()
    self.filled: set[Line] = set()
    self.stored: set[Line] = set()
    self.view = CachedView(self)
    self.fills = self.write_backs = 0  # for tests and benchmarks: pages copied in, pages written out

  def data(self, m: Mapping, write: bool, lo: int, hi: int) -> np.ndarray:
    """The cached bytes of `m` for an access to bytes [lo, hi): its pages filled where invalid, tracked for a store."""
    line = self.lines.get(id(m))
    if line is None or line.mapping is not m: line = self._new_line(m)
    p0, p1 = lo // PAGE, -(-hi // PAGE)
    one = p1 == p0 + 1  # the common access (an instruction fetch, a scalar load): one page, read without a numpy reduce
    if not (line.valid[p0] if one else line.valid[p0:p1].all()):
      with self.lock:
        self.fills += line.fill(p0, p1)
        self.filled.add(line)
    if write and not (line.tracked[p0] if one else line.tracked[p0:p1].all()):
      with self.lock:
        line.track(p0, p1)
        self.stored.add(line)
    return line.data

  def _new_line(self, m: Mapping) -> Line:
    """A line for `m`; the lines of mappings no longer mapped go (their memory may be gone: nothing is written back)."""
    with self.lock:
      live = {id(x): x for x in self.mem.mappings()}
      for key in [k for k, line in self.lines.items() if live.get(k) is not line.mapping]:
        dead = self.lines.pop(key)
        self.filled.discard(dead)
        self.stored.discard(dead)
      line = self.lines[id(m)] = Line(m)
    return line

  def _mapped(self, line: Line) -> bool:
    return self.mem.mapping_at(line.mapping.va) is line.mapping

  def write_back(self) -> None:
    """GL2_WB: every dirty byte to memory (of mappings still mapped)."""
    with self.lock:
      for line in self.stored:
        if self._mapped(line): self.write_backs += line.write_back()
      self.stored.clear()

  def invalidate(self) -> None:
    """Drop every clean page (refetched at its next access); dirty bytes stay."""
    with self.lock:
      for line in self.filled: line.valid[:] = False
      self.filled.clear()


class CachedView(VirtualMemory):
  """The GPU's virtual memory as the shader core reaches it: the same mappings, cached ones through the cache."""

  def __init__(self, cache: GPUCache):
    self.cache = cache
    self._lock = cache.mem._lock

  @property
  def _table(self) -> tuple:
    """The cache's memory's mappings (shared, not copied: this view never maps)."""
    return self.cache.mem._table

  def _host(self, m: Mapping, write: bool, offs: np.ndarray, size: int) -> np.ndarray:
    return self.cache.data(m, write, int(offs.min()), int(offs.max()) + size) if m.cached else m.host

  def find(self, va: int, size: int, write: bool = False, pc: int | None = None) -> tuple[Mapping, int]:
    """The instruction fetch reads up to 16 bytes from where it asks for 4: those are filled too."""
    m, off = super().find(va, size, write, pc)
    if not m.cached: return m, off
    return Mapping(m.va, m.size, self.cache.data(m, write, off, min(m.size, off + max(size, 16))), m.writable, True), off
