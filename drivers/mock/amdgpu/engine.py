"""An engine thread: consume a ring from its read pointer to its write pointer, one packet at a time, like a CP or SDMA."""
from __future__ import annotations
import threading
import time
from typing import TYPE_CHECKING

from hcq.drivers.mock.amdgpu.ring import QueueError, Ring

if TYPE_CHECKING:
  from hcq.drivers.mock.amdgpu.gpu import MockAMDGPU


class QueueStopped(Exception):
  """The queue was destroyed while a packet waited: not an error, the engine just ends."""


class Engine(threading.Thread):
  """Runs `packet(words, i, where)` (which returns the dwords it consumed) over what the host wrote between the read
  and write pointers, then sleeps until the doorbell. A QueueError stops the queue where it is, with its read
  pointer on the offending packet, and is reported to the GPU, as a hung queue is to the kernel."""
  kind = "engine"

  def __init__(self, gpu: "MockAMDGPU", ring: Ring, name: str):
    super().__init__(name=f"mock-{name}", daemon=True)
    self.gpu, self.ring, self.queue_name = gpu, ring, name
    self.error: QueueError | None = None
    self.packets = 0
    self.batch_start = self.batch_pos = 0  # where the current window began, and the dwords run in it

  def run(self) -> None:
    ring = self.ring
    while not ring.stopped:
      ring.doorbell.wait(0.05)  # the doorbell wakes us; the timeout only lets a stopped queue exit
      ring.doorbell.clear()
      try:
        while not ring.stopped and self.error is None and (rptr := ring.rptr) != (wptr := ring.wptr):
          pending = (wptr - rptr) * ring.unit // 4
          # a whole ring in flight is refused too: with a wrapping read pointer it reads as an empty one (kfdtest and
          # ROCr keep at least one dword free; unsure whether the CP misreads it, the mock takes the stricter side)
          if pending >= ring.size // 4 or wptr < rptr:
            raise QueueError(f"write pointer {wptr} is {wptr - rptr} units from the read pointer {rptr} in a {ring.size}-byte ring", rptr * ring.unit % ring.size)
          words = ring.dwords(rptr * ring.unit, pending).tolist()  # one read of the window, then plain ints
          i = 0
          self.batch_start, self.batch_pos = rptr, 0
          while i < pending and not ring.stopped:
            self.gpu.running.wait()
            if self.gpu.packet_delay or self.extra_delay: time.sleep(self.gpu.packet_delay + self.extra_delay)
            used = self.packet(words, i, (rptr * ring.unit + 4 * i) % ring.size)
            if i + used > pending: raise QueueError("a packet runs past the write pointer", (rptr * ring.unit + 4 * i) % ring.size)
            i += used
            self.batch_pos = i
            self.packets += 1
          ring.rptr = rptr + i * 4 // ring.unit  # once per batch; poll() and errors publish it sooner
      except QueueStopped:
        return
      except QueueError as e:
        if ring.stopped: return  # preempted mid-packet: its memory may be gone already, and a stopped queue reports nothing
        self._publish_rptr()
        self.error = e
        self.gpu.queue_error(self, e)
      except Exception as e:  # a memory fault or an engine bug: the queue stops, the process is told
        if ring.stopped: return
        self._publish_rptr()
        self.error = QueueError(f"{type(e).__name__}: {e}", ring.rptr * ring.unit % ring.size)
        self.gpu.queue_error(self, self.error, cause=e)

  def _publish_rptr(self) -> None:
    """Write the read pointer of the packet in progress to memory, where the host sees how far the engine got."""
    self.ring.rptr = self.batch_start + self.batch_pos * 4 // self.ring.unit

  def poll(self, check, interval_s: float = 20e-6) -> None:
    """Block (as WAIT_REG_MEM / POLL_REGMEM do) until `check()` is true or the queue is stopped. Re-checked as soon as
    another engine of the GPU writes memory (gpu.memory_written: the XCC barrier's slots, signals), else at an interval
    growing to 1 ms for what the host writes; the waiting thread holds no lock, so the engine it waits for runs."""
    gpu, spins = self.gpu, 0
    while True:
      seen = gpu.writes
      if check(): return
      if self.ring.stopped: raise QueueStopped()
      if spins == 0: self._publish_rptr()
      spins += 1
      with gpu.written:
        if gpu.writes == seen: gpu.written.wait(min(1e-3, interval_s * spins))

  @property
  def extra_delay(self) -> float:
    """Seconds this engine waits before each packet on top of the GPU's packet_delay (tests skew engines apart)."""
    return 0.0

  def packet(self, words: list[int], i: int, where: int) -> int:
    """Run the packet at words[i] (ring offset `where`, for messages); return how many dwords it used."""
    raise NotImplementedError
