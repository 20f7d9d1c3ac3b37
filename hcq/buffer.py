"""Device memory as hcq sees it: a range of the device's address space, and the host's view of it where there is one."""
from __future__ import annotations
import ctypes
import operator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
  import numpy as np
  from hcq.device import Device

# Kinds of memory `Device.alloc` gives: where it lives and whether the CPU maps it.
MEMORY_KINDS = {
  "device": "device memory (VRAM on a GPU); the CPU sees it only where the device maps it (large BAR)",
  "host": "host memory the device reads and writes (GTT), cached, CPU-visible",
  "uncached": "host memory the device reads and writes uncached, CPU-visible (signals, doorbells-adjacent state)",
  "cpu": "plain host memory for staging, CPU-visible, mapped for the device's copy engine",
}


class Buffer:
  """`nbytes` of device memory at device address `addr`; `host_addr` is its CPU mapping or None.

  Created by `Device.alloc`; `copyin`/`copyout` move data in queue order, `view()` is a numpy view where
  the CPU can see the memory. A buffer made by `offset()` shares its parent's memory and lifetime."""

  def __init__(self, device: "Device", addr: int, nbytes: int, kind: str, host_addr: int | None, owner: Any = None,
               parent: "Buffer | None" = None):
    self.device, self.addr, self.nbytes, self.kind, self.host_addr = device, addr, nbytes, kind, host_addr
    self._owner, self._parent, self.freed = owner, parent, False  # owner: what keeps the memory alive (a mmap, a driver handle)

  def __repr__(self) -> str:
    return f"<Buffer {self.nbytes} bytes of {self.kind} memory at {self.addr:#x} on {self.device}>"

  def offset(self, offset: int, nbytes: int | None = None) -> "Buffer":
    """A view of `nbytes` from `offset` inside this buffer."""
    offset = _size(offset, "offset")
    nbytes = self.nbytes - offset if nbytes is None else _size(nbytes, "nbytes")
    if offset < 0 or nbytes < 0 or offset + nbytes > self.nbytes:
      raise ValueError(f"range [{offset}, {offset + nbytes}) is outside {self!r}")
    return Buffer(self.device, self.addr + offset, nbytes, self.kind, None if self.host_addr is None else self.host_addr + offset,
                  parent=self._parent or self)  # the root: one step to its `freed` at every launch

  def view(self, dtype: Any = "uint8") -> "np.ndarray":
    """A numpy array over the CPU mapping (no copy). Only for CPU-visible memory; ordering with queued work is the caller's."""
    import numpy as np
    self._check_alive()
    if self.host_addr is None: raise ValueError(f"{self!r} is not CPU-visible; use copyin/copyout")
    raw = (ctypes.c_uint8 * self.nbytes).from_address(self.host_addr)
    return np.frombuffer(raw, dtype=np.uint8).view(dtype)

  def copyin(self, arr: "np.ndarray") -> "Buffer":
    """Copy a host array into the buffer's first `arr.nbytes` bytes, after all queued work; returns self."""
    import numpy as np
    self._check_alive()
    a = np.ascontiguousarray(arr)
    _check_plain(a, "copyin")
    if a.nbytes > self.nbytes: raise ValueError(f"copyin: {a.nbytes} bytes do not fit in {self!r}")
    self.device.copy_from_host(self, a)
    return self

  def copyout(self, arr: "np.ndarray") -> "np.ndarray":
    """Fill a writable, C-contiguous host array from the buffer, after all queued work; returns the array."""
    import numpy as np
    self._check_alive()
    if not (isinstance(arr, np.ndarray) and arr.flags.c_contiguous and arr.flags.writeable):
      raise ValueError("copyout needs a writable C-contiguous numpy array")
    _check_plain(arr, "copyout")
    if arr.nbytes > self.nbytes: raise ValueError(f"copyout: {arr.nbytes} bytes requested from {self!r}")
    self.device.copy_to_host(arr, self)
    return arr

  def free(self) -> None:
    """Give the memory back to the device after queued work is done; later use raises."""
    if self._parent is not None: raise ValueError(f"{self!r} is a view; free the buffer it came from")
    if not self.freed:
      self.device.free(self)
      self.freed = True

  def _check_alive(self) -> None:
    if (self._parent or self).freed: raise ValueError(f"{self!r} was freed")


def _size(n: Any, what: str) -> int:
  """A byte count or offset: an int (Python or numpy), else ValueError."""
  try:
    return operator.index(n)
  except TypeError:
    raise ValueError(f"{what} must be an int, got {type(n).__name__} {n!r}") from None


def _check_plain(arr: "np.ndarray", what: str) -> None:
  """Only plain data crosses to the device: object (and structured-with-object) arrays hold pointers to Python objects."""
  if arr.dtype.hasobject:
    raise ValueError(f"{what}: a {arr.dtype} array holds Python objects, not data the device can use; "
                     "valid: numeric, bool, bytes and structured dtypes without objects")
