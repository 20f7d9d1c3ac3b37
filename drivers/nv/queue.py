"""NVIDIA queues: GPFIFO method streams for a compute channel and a copy channel.

Methods are written as the host reads them: an INCR header (opcode, count, subchannel, method dword address) and its
data words, every field from the generated class tables (hcq.autogen.nv.*) of the GPU's arch row. Wait, signal and
timestamp are host semaphore methods (SEM_ADDR/PAYLOAD/EXECUTE, 64-bit payloads; a release writes the value and, with
RELEASE_TIMESTAMP, the global timer after it: the 16-byte layout of hcq.signal). Copies go to the copy class bound on
COPY_SUBCHANNEL, pitch-linear, one line of at most COPY_CHUNK bytes per LAUNCH_DMA.
"""
from __future__ import annotations
from typing import TYPE_CHECKING

import numpy as np

from hcq.errors import HCQError
from hcq.queue import DwordQueue, release_bound_copies
from hcq.sym import Sym, Variable, hi32, lo32

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
    self._copies: list = []  # once bound: (device, buffer, its words as uint32, its GPFIFO entry) per copy of the methods

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
    self.method(0, a.m("WFI"), a.host.register("WFI").encode(scope=0))
    return self.method(0, a.m("MEM_OP_A"), 0, 0, a.host.register("MEM_OP_C").encode(membar_type=a.c("MEM_OP_C_MEMBAR_TYPE_SYS_MEMBAR")),
                       a.host.register("MEM_OP_D").encode(operation=a.c("MEM_OP_D_OPERATION_MEMBAR")))

  def bind(self, device, copies: int = 2) -> "NVQueue":
    """Copy the methods into host memory `copies` times, each ending with a release of a counting semaphore (how many
    submissions the GPU has read). A submit patches a copy whose previous run has been read and pushes one GPFIFO entry
    pointing at it, so a replay waits for the GPU only when every copy is still in flight. One copy patched in place
    would hand its values to an earlier submission the PBDMA had not fetched yet."""
    words = self.words()
    if any(c is not words for c, _, _ in self._patches): raise ValueError("a bound queue's patch slots must lie in its methods")
    if self._copies:  # bound before: the earlier copies go back once read (a recovery's fresh channels read none of them)
      dev = self._copies[0][0]
      release_bound_copies(dev, [b for _, b, _, _ in self._copies], self._done, self._submitted,
                           dropped=self._channel is not None and self._channel is not dev.channels[self.channel])
    self._done = device.new_signal(0, name="bound queue")
    # No RELEASE_WFI: the release only says the PBDMA has fetched the methods before it, which is all a patch needs.
    tail = type(self)(self.arch)._semaphore(self._done.value_addr, Variable("done"), operation=self.arch.c("SEM_EXECUTE_OPERATION_RELEASE"),
                                            payload_size=self.arch.c("SEM_EXECUTE_PAYLOAD_SIZE_64BIT"))
    tail_words = tail.words()
    self._slots = [(i, sym) for _, i, sym in self._patches] + [(len(words) + i, sym) for _, i, sym in tail._patches]
    self._copies = []
    for _ in range(copies):
      buf = device.alloc(4 * (len(words) + len(tail_words)), "host")
      view = buf.view(np.uint32)
      view[:len(words)], view[len(words):] = words, tail_words
      self._copies.append((device, buf, view, device.gp_entry(buf.addr, len(view))))
    self._submitted, self._channel = 0, None
    return self

  def _apply_patches(self, var_vals) -> None:
    if not self._copies: return super()._apply_patches(var_vals)
    n, k = self._submitted, len(self._copies)
    device, _, view, _ = self._copies[n % k]
    ch = device.channels[self.channel]
    if ch is not self._channel: self._done.value, self._channel = n, ch  # fresh channels after a recovery read nothing older
    if n >= k: self._done.wait(n - k + 1)  # this copy's previous submission has been read (back-to-back replays wait here)
    vals = {**var_vals, "done": n + 1} if var_vals else {"done": n + 1}
    for i, sym in self._slots: view[i] = sym.eval(vals)

  def _submit(self, device) -> None:
    if not self._copies: return device.submit_methods(self.channel, self)
    bound_to, _, _, entry = self._copies[self._submitted % len(self._copies)]
    if device is not bound_to: raise HCQError(f"a queue bound to {bound_to} is submitted to {device}; bind it to each device it runs on")
    device.push_entry(self.channel, entry)
    self._submitted += 1


class NVComputeQueue(NVQueue):
  """The compute channel's queue: host methods and the compute class."""
  channel = "compute"

  def exec(self, program, kernargs_addr, global_size, local_size, barrier: bool = True) -> "NVComputeQueue":
    """Launch the QMD at `kernargs_addr` (the block NVProgram.kernargs made for these sizes and place_kernargs placed).
    `barrier`: a wait for idle after it, so that what follows sees its results. barrier=False lets the channel go on
    while the grid runs, for a next kernel that does not touch what this one writes (NVK sends no barrier between
    dispatches unless asked), or when the QMD's own releases say when it is done (NVDevice's launches)."""
    from hcq.drivers.nv.program import exec_methods
    return exec_methods(self, program, kernargs_addr, wfi=barrier)


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
