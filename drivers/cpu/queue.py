"""CPU queues: commands recorded as lists, executed in order by an engine thread per queue kind.

An engine is the CPU device's stand-in for a GPU's command processor: it runs asynchronously to the
host, so waits, timeouts and ordering between the compute and copy engines are real.
"""
from __future__ import annotations
import ctypes
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

from hcq.device import LAUNCH_QUEUES_KEPT
from hcq.drivers.cpu.pool import now_ns
from hcq.errors import GPUFault
from hcq.queue import HWQueue, copy_args

if TYPE_CHECKING:
  from hcq.drivers.cpu.device import CPUDevice


class CPUQueue(HWQueue):
  """Commands as [op, args...] lists; `submit` hands a snapshot (patches applied) to the device's engine."""
  engine = "compute"

  def _cmd(self, op: str, *args: Any) -> "CPUQueue":
    cmd = [op, *([None] * len(args))]
    for i, a in enumerate(args, 1): self._put(cmd, i, a)
    self._q.append(cmd)
    return self

  def wait(self, signal, value):
    return self._cmd("wait", signal, value)

  def signal(self, signal, value):
    return self._cmd("signal", signal, value)

  def timestamp(self, signal):
    return self._cmd("timestamp", signal.timestamp_addr)

  def memory_barrier(self):
    return self._cmd("barrier")  # engines are threads of one process: ordering is already the program order

  def _submit(self, device: "CPUDevice") -> None:
    device.engines[self.engine].work.put([list(c) for c in self._q])


class CPUComputeQueue(CPUQueue):
  engine = "compute"

  def exec(self, program, kernargs_addr, global_size, local_size):
    return self._cmd("exec", program, kernargs_addr, tuple(global_size), tuple(local_size))


class CPUCopyQueue(CPUQueue):
  engine = "copy"

  def copy(self, dest, src, nbytes):
    return self._cmd("copy", *copy_args(dest, src, nbytes))


class Engine(threading.Thread):
  """Runs submitted command lists in order. A failing command becomes the device's pending GPUFault; the rest of
  that submission is dropped except its signals, so waiters are released and the device stays usable."""

  def __init__(self, device: "CPUDevice", name: str):
    super().__init__(name=f"hcq-{device.spec}-{name}", daemon=True)
    self.device, self.kind = device, name
    self.work: queue.SimpleQueue = queue.SimpleQueue()
    self.current: list | None = None
    self.resets = 0  # bumped by the device to drop the command list in progress (a queue reset)

  def run(self) -> None:
    while (cmds := self.work.get()) is not None:
      generation = self.resets
      for i, cmd in enumerate(cmds):
        if self.resets != generation: break
        self.current = cmd
        try:
          getattr(self, "_" + cmd[0])(*cmd[1:])
        except Exception as e:  # the engine must survive anything a command does
          self.device.record_fault(GPUFault(f"{self.kind} queue of {self.device}: {cmd[0]} failed: {e}", queue=self.kind,
                                            pc=getattr(e, "pc", None), address=getattr(e, "address", None)))
          for rest in cmds[i + 1:]:
            if rest[0] in ("signal", "timestamp"): getattr(self, "_" + rest[0])(*rest[1:])
          break
      self.current = None

  def _wait(self, signal, value: int) -> None:
    spins, generation = 0, self.resets
    while signal.value < value and self.resets == generation:
      spins += 1
      if spins > 100: time.sleep(min(1e-4, 1e-6 * spins))

  def _signal(self, signal, value: int) -> None:
    signal.store(value)   # the memory only: the device hands over to its waiters (hcq.signal.Signal.wait)
    self.device.signal_written()

  def _timestamp(self, address: int) -> None:
    self.device.check_range(address, 8, "timestamp")
    ctypes.c_uint64.from_address(address).value = time.perf_counter_ns()

  def _barrier(self) -> None:
    pass

  def _copy(self, dest: int, src: int, nbytes: int) -> None:
    self.device.check_range(src, nbytes, "copy source")
    self.device.check_range(dest, nbytes, "copy destination")
    ctypes.memmove(dest, src, nbytes)

  def _exec(self, program, kernargs: int, global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> None:
    self.device.workers   # started (the first grid's) before the clock: their start is not the kernel's time
    start = now_ns()
    if (took := program.took.get(global_size)) is not None: self.device.expect_end(start, took)
    program.run(kernargs, global_size, local_size)
    took = now_ns() - start
    if global_size not in program.took and len(program.took) >= LAUNCH_QUEUES_KEPT: program.took.clear()   # ever new grids
    program.took[global_size] = took
