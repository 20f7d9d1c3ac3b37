"""Exceptions hcq raises: each says what was wrong, where, and what is valid."""
from __future__ import annotations


class HCQError(Exception):
  """Base of every hcq error."""


class DevStringError(HCQError, ValueError):
  """A DEV string (or `hcq.Device(...)` argument) that names no device hcq has."""


class ProgramArgumentError(HCQError, TypeError):
  """A launch whose buffers or values do not match the program's arguments."""


class CodeObjectError(HCQError, ValueError):
  """Bytes that are not a loadable AMDGPU code object: says what is wrong and where (section, offset)."""


class GPUFault(HCQError):
  """A fault on the device: the queue, the program counter and the faulting address where known."""

  def __init__(self, message: str, *, queue: str | None = None, pc: int | None = None, address: int | None = None):
    super().__init__(message)
    self.queue, self.pc, self.address = queue, pc, address


class GPUTimeout(HCQError, TimeoutError):
  """Work that did not finish in time: names the queue and the signal's value against the one awaited."""
