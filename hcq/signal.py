"""Signals: a 64-bit value and a 64-bit timestamp in memory that both the host and the device read and write."""
from __future__ import annotations
import ctypes
import time
from typing import TYPE_CHECKING

from hcq.errors import GPUTimeout

if TYPE_CHECKING:
  from hcq.buffer import Buffer

SIGNAL_BYTES = 16  # value (u64) then timestamp (u64): the layout queues write with one packet each
# a wait on a device whose writers notify (the CPU device) still looks every this many seconds, for raw memory writes;
# a short period costs the running kernel's core: at 5 ms the host woke 12 times in a 60 ms kernel, 3 ms of CPU
RAW_WRITE_PERIOD = 0.1


class Signal:
  """A counter the device bumps when work completes; queues wait on it reaching a value.

  `value_addr` / `timestamp_addr` are device addresses for packets. `timestamp` is in the device's
  clock ticks; `timestamp_ns` converts with the device's frequency."""

  def __init__(self, buf: "Buffer", name: str = "signal", value: int = 0):
    if buf.host_addr is None: raise ValueError(f"a signal needs CPU-visible memory, got {buf!r}")
    self.buf = buf
    self.value_addr, self.timestamp_addr = buf.addr, buf.addr + 8
    self._value = ctypes.c_uint64.from_address(buf.host_addr)
    self._timestamp = ctypes.c_uint64.from_address(buf.host_addr + 8)
    self.reset(name, value)

  def reset(self, name: str, value: int = 0) -> None:
    """Name it, set its value and clear its timestamp (a pooled signal must not show its last user's time)."""
    self.name, self.value = name, value
    self._timestamp.value = 0

  def __repr__(self) -> str:
    return f"<Signal {self.name} value={self.value} on {self.buf.device}>"

  @property
  def value(self) -> int:
    return self._value.value

  @value.setter
  def value(self, v: int) -> None:
    self.store(v)
    woken = self.buf.device.signalled  # a device whose waiters sleep on a condition: every write through here wakes them
    if woken is not None:
      with woken: woken.notify_all()

  def store(self, v: int) -> None:
    """Write the value and wake no one: for a writer that wakes the waiters itself (the CPU device's engines)."""
    self._value.value = v

  @property
  def timestamp(self) -> int:
    return self._timestamp.value

  @property
  def timestamp_ns(self) -> float:
    return self.timestamp * 1e9 / self.buf.device.timestamp_frequency

  def wait(self, value: int, timeout: float | None = None) -> None:
    """Block until the signal is at least `value`; GPUTimeout after `timeout` seconds (default: the device's)."""
    if self._value.value >= value: return
    device = self.buf.device
    timeout = device.default_timeout if timeout is None else timeout
    deadline, spins = time.monotonic() + timeout, 0
    while self._value.value < value:
      spins += 1
      if device.signalled is not None:  # sleep until a write through `value` notifies (raw memory writes: the period)
        device.await_write(self._value, value, RAW_WRITE_PERIOD)
        device.check_faults()
      elif spins > 200:  # spin briefly for short work, then back off and look for faults
        device.check_faults()
        time.sleep(min(1e-4, 1e-6 * spins))
      else: time.sleep(0)  # let go of the GIL: the CPU device and the emulated GPU run in this process's threads
      if time.monotonic() > deadline:
        raise GPUTimeout(f"{device}: {self.name} is {self.value}, waited {timeout:g}s for {value}. {device.queue_state()}")
