"""The CPU as an HCQ device: host memory, engine threads for the compute and copy queues, native kernels.

A CPU kernel is a native function `void name(const uint8_t *kernargs, uint32_t gid_x, uint32_t gid_y,
uint32_t gid_z, uint32_t local_x, uint32_t local_y, uint32_t local_z)` run once per workgroup: the kernel
loops over its workgroup's threads itself. Workgroups are spread over the cores (ctypes calls release the
GIL), so a grid uses the whole machine the way a dispatch uses a GPU's compute units.
"""
from __future__ import annotations
import bisect
import ctypes
import mmap
import os
import threading
from typing import Any, Sequence

from hcq.buffer import Buffer
from hcq.device import Device
from hcq.devstring import DevSpec
from hcq.drivers.cpu.pool import SpinningWorkers, ThreadWorkers, now_ns, workers
from hcq.drivers.cpu.program import CPUProgram
from hcq.drivers.cpu.queue import CPUComputeQueue, CPUCopyQueue, Engine
from hcq.errors import GPUFault

HUGE_PAGE_BYTES = 2 << 20  # x86-64's transparent huge page (PMD): allocations from this size ask for them
# a waiter spins this much on either side of a kernel's expected end, at least (a short kernel: its whole run) and at
# most (a long one: a wake-up's 50-150 us is nothing beside it, and its waiter should not burn a sixteenth of a core)
SPIN_MARGIN_NS = (250_000, 2_000_000)
HANDOVER_NS = 50_000  # the longest an engine lets go of the GIL after a signal write for waiters spinning on it


def usable_cpus() -> int:
  """CPUs this process may run on: its affinity mask (taskset, a container's cpuset), not the machine's count."""
  try:
    return max(1, len(os.sched_getaffinity(0)))
  except AttributeError:  # not on Linux
    return os.cpu_count() or 1


class CPUDevice(Device):
  """`hcq.Device("CPU")`: see the module docstring."""

  def __init__(self, spec: DevSpec):
    self.spec = spec
    self._ranges: list[tuple[int, int]] = []  # live allocations (start, end), sorted: what the engines may touch
    self._mmaps: dict[int, mmap.mmap] = {}
    self._fault: GPUFault | None = None
    self._lock = threading.Lock()
    self.cores = usable_cpus()   # a worker per core beside the engine: more would only take turns on the same cores
    self.signalled = threading.Condition()  # the engines notify it after each signal write
    # now_ns() from and until which a waiter spins for the compute engine's kernel to end, (0, 0): sleep
    self.spin_window = (0, 0)
    # threads spinning in await_write now, and the spins ended so far, counted by each spinner once it holds the GIL
    # again (an engine that wrote a signal waits on it, natively, before it takes the GIL back: signal_written); two
    # waiters' counts may race (+= is not atomic across threads), which costs at most one HANDOVER_NS, never a wait
    self._spinners, self._spun = 0, ctypes.c_uint64(0)
    self._workers: SpinningWorkers | ThreadWorkers | None = None
    self._workers_lock = threading.Lock()
    self.engines = {"compute": Engine(self, "compute"), "copy": Engine(self, "copy")}
    for e in self.engines.values(): e.start()
    super().__init__(spec)

  @property
  def workers(self) -> SpinningWorkers | ThreadWorkers:
    """The threads that run grids with the compute engine, started by the first grid (spinning workers compile their
    hand-out with llvmlite, which a device used only for copies need not load)."""
    if self._workers is None:
      with self._workers_lock:
        if self._workers is None: self._workers = workers(self.cores, f"hcq-{self.spec}-wg")
    return self._workers

  # ---- waits ----
  def expect_end(self, start: int, took: int) -> None:
    """The compute engine starts a kernel at `start` that took `took` ns on the same grid last time (now_ns's
    count): waiters spin from a margin before its expected end to a margin after (a sixteenth of it, within
    SPIN_MARGIN_NS), woken now to see when."""
    margin = min(max(SPIN_MARGIN_NS[0], took // 16), SPIN_MARGIN_NS[1])
    self.spin_window = (start + took - margin, start + took + margin)
    with self.signalled: self.signalled.notify_all()

  def await_write(self, word: ctypes.c_uint64, value: int, seconds: float) -> None:
    """Wait until `word` is at least `value`, at most `seconds`: asleep on `signalled`, but in the spin window of the
    compute engine's kernel spinning on the word (the spinning workers' native wait, without the GIL): a thread woken
    from sleep starts 50-150 us after the write on a virtual machine (docs/tensor.md round 11)."""
    end = now_ns() + int(seconds * 1e9)
    while word.value < value and (now := now_ns()) < end:
      window, spinner = self.spin_window, self._workers
      if window[0] <= now < window[1] and isinstance(spinner, SpinningWorkers):
        self._spinners += 1
        try:
          spinner.wait_for(ctypes.addressof(word), value, min(window[1], end))
        finally:
          self._spinners -= 1
          self._spun.value += 1
        continue
      wake = min(end, window[0]) if now < window[0] else end
      with self.signalled: self.signalled.wait_for(lambda: word.value >= value or self.spin_window != window, (wake - now) / 1e9)

  def signal_written(self) -> None:
    """After an engine wrote a signal: the threads spinning on one run first (the engine lets go of the GIL until each
    has it back, at most HANDOVER_NS: a thread that finds the GIL taken sleeps, and is woken 50-150 us later), then the
    sleeping waiters are woken."""
    spinners, workers = self._spinners, self._workers
    if spinners and isinstance(workers, SpinningWorkers):
      workers.wait_for(ctypes.addressof(self._spun), self._spun.value + spinners, now_ns() + HANDOVER_NS)
    with self.signalled: self.signalled.notify_all()

  # ---- memory: anonymous mappings; device address == host address ----
  def _alloc(self, nbytes: int, kind: str) -> Buffer:
    # private, so that the kernel may back it with transparent huge pages (a shared anonymous mapping is shmem, which
    # it does not), and asked for them from one huge page up, as numpy asks for its arrays from 4 MiB: a matmul's
    # packs walk rows of b and a kilobytes apart, a TLB miss per row on 4 KiB pages (hcq / numpy at 2048^2, paired
    # medians: 0.98-1.01 -> 1.01-1.05)
    # and from a huge page's boundary, over whole huge pages: a huge page backs only a 2 MiB-aligned range the mapping
    # covers whole, and mmap aligns only a mapping whose length is whole huge pages (Linux 6.18 here), so a 4,000,000
    # byte buffer got one huge page of its two (1000^2 f32 matmul kernel 1-2% faster with its a, b and output on huge
    # pages, one core, paired against numpy). The mapping is up to 4 MiB longer: address space, but the huge page the
    # buffer's end reaches into is backed whole
    huge = nbytes >= HUGE_PAGE_BYTES
    length = -(-nbytes // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES + HUGE_PAGE_BYTES if huge else nbytes
    mm = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if huge and hasattr(mmap, "MADV_HUGEPAGE"):
      try:
        mm.madvise(mmap.MADV_HUGEPAGE)
      except OSError:   # a kernel without transparent huge pages: 4 KiB pages it is
        pass
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    if huge: addr = -(-addr // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    with self._lock:
      self._mmaps[addr] = mm
      bisect.insort(self._ranges, (addr, addr + nbytes))
    return Buffer(self, addr, nbytes, kind, addr, owner=mm)

  def _free(self, buf: Buffer) -> None:
    with self._lock:
      self._ranges.remove((buf.addr, buf.addr + buf.nbytes))
      self._mmaps.pop(buf.addr)
    # the mmap stays open while Python objects (views) may point at it; it is unmapped when the last reference goes

  def check_range(self, addr: int, nbytes: int, what: str) -> None:
    """Raise when [addr, addr+nbytes) is not inside one live allocation: the CPU device's page fault."""
    with self._lock:
      i = bisect.bisect_right(self._ranges, (addr, float("inf"))) - 1
      ok = nbytes >= 0 and i >= 0 and self._ranges[i][0] <= addr and addr + nbytes <= self._ranges[i][1]  # a size from a Variable may be < 0
    if not ok: raise GPUFault(f"{what} [{addr:#x}, {addr + nbytes:#x}) is outside every allocation of {self}", address=addr)

  # ---- faults ----
  def record_fault(self, fault: GPUFault) -> None:
    self._fault = fault

  def check_faults(self) -> None:
    if self._fault is None: return
    with self._lock:  # one waiting thread takes the fault
      fault, self._fault = self._fault, None
    if fault is not None: raise fault

  def recover(self) -> None:
    """Drop what the engines are running and everything queued behind it; catch the timeline up."""
    with self.lock:  # no submission slips in between the drain and the catch-up
      for e in self.engines.values():
        while not e.work.empty(): e.work.get_nowait()
        e.resets += 1
      self.timeline_signal.value = self.timeline_value - 1

  def queue_state(self) -> str:
    busy = [f"{k}: {e.current[0] if e.current else 'idle'}" for k, e in self.engines.items()]
    return super().queue_state() + "; engines " + ", ".join(busy)

  # ---- queues and programs ----
  def compute_queue(self) -> CPUComputeQueue:
    return CPUComputeQueue()

  def copy_queue(self) -> CPUCopyQueue:
    return CPUCopyQueue()

  def program(self, code: Any, name: str | None = None, args: Sequence[str] = (), arg_names: Sequence[str] | None = None) -> CPUProgram:
    """A CPU kernel from LLVM IR text (compiled with llvmlite for this machine) or from a ctypes function.
    `args` are the argument kinds in order ("buffer", "i32", "f32", ...), laid out at natural alignment."""
    return CPUProgram(self, code, name, args, arg_names)
