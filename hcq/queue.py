"""HWQueue: the one command-queue interface every backend implements (PM4/SDMA on AMD, GPFIFO on NVIDIA, threads on the CPU).

Methods record commands and return the queue, so calls chain. A value may be an int or a `hcq.sym.Sym`;
a Sym becomes a patch slot, filled in at each `submit(device, var_vals)`, so a queue is built once and
replayed with new buffer addresses, sizes or signal values (graph replay).
"""
from __future__ import annotations
import array
import operator
from typing import TYPE_CHECKING, Any

from hcq.sym import Sym

if TYPE_CHECKING:
  from hcq.device import Device
  from hcq.program import Program
  from hcq.signal import Signal


ADDRESS_LIMIT = 1 << 64


def copy_args(dest: "int | Sym", src: "int | Sym", nbytes: "int | Sym") -> tuple:
  """A copy's (dest, src, nbytes) as ints (numpy ints too) where they are known; ValueError for a negative size or a range
  past the 64-bit address space, which would otherwise copy nothing (a count loop) or everything (a size_t)."""
  out = []
  for what, v in (("destination", dest), ("source", src), ("size", nbytes)):
    if isinstance(v, Sym): out.append(v); continue
    try:
      x = operator.index(v)
    except TypeError:
      raise ValueError(f"copy {what} must be an int or a hcq.Variable, got {type(v).__name__} {v!r}") from None
    if not 0 <= x < ADDRESS_LIMIT: raise ValueError(f"copy {what} must be from 0 to 2**64-1, got {x}")
    out.append(x)
  d, s, n = out
  for what, a in (("destination", d), ("source", s)):
    if not isinstance(a, Sym) and not isinstance(n, Sym) and a + n > ADDRESS_LIMIT:
      raise ValueError(f"copy {what} [{a:#x}, {a:#x} + {n}) runs past the 64-bit address space")
  return d, s, n


def release_bound_copies(device: "Device", bufs: list, done: "Signal", submitted: int, dropped: bool) -> None:
  """What an earlier bind() of a queue holds, given back when it is bound again: its copies of the commands, once the GPU
  is through with them (`done` has counted all `submitted` runs, unless a reset `dropped` them), and its counter signal."""
  if not dropped: done.wait(submitted)
  for b in bufs: b.free()
  device.release_signal(done)


class HWQueue:
  """Commands for one hardware queue. Subclasses write the hardware's format into `self._q`."""

  def __init__(self) -> None:
    self._q: list[Any] = []                          # recorded commands: packet words on GPUs, command lists on the CPU
    self._patches: list[tuple[list, int, Sym]] = []  # (container, index, value): where a Sym's value goes at submit

  def __len__(self) -> int:
    return len(self._q)

  def _put(self, container: list, index: int, value: "int | Sym") -> None:
    """Store a value, keeping a patch slot when it is symbolic."""
    if isinstance(value, Sym):
      container[index] = 0
      self._patches.append((container, index, value))
    else:
      container[index] = value

  def _apply_patches(self, var_vals: dict[str, int] | None) -> None:
    vals = var_vals or {}
    for container, index, sym in self._patches: container[index] = sym.eval(vals)

  # ---- the interface: each returns self ----
  def wait(self, signal: "Signal", value: "int | Sym") -> "HWQueue":
    """Stall this queue until `signal` reaches at least `value`."""
    raise NotImplementedError(f"{type(self).__name__} has no wait")

  def signal(self, signal: "Signal", value: "int | Sym") -> "HWQueue":
    """When all earlier work is done, write `value` to `signal` (and its timestamp)."""
    raise NotImplementedError(f"{type(self).__name__} has no signal")

  def timestamp(self, signal: "Signal") -> "HWQueue":
    """Write the device clock into `signal`'s timestamp when all earlier work is done."""
    raise NotImplementedError(f"{type(self).__name__} has no timestamp")

  def memory_barrier(self) -> "HWQueue":
    """Make earlier writes visible to later commands and to the host."""
    raise NotImplementedError(f"{type(self).__name__} has no memory_barrier")

  def exec(self, program: "Program", kernargs_addr: "int | Sym", global_size: tuple[int, int, int],
           local_size: tuple[int, int, int]) -> "HWQueue":
    """Run `program` over `global_size` workgroups of `local_size` threads with the kernargs at `kernargs_addr`."""
    raise NotImplementedError(f"{type(self).__name__} cannot run programs (a copy queue?)")

  def copy(self, dest: "int | Sym", src: "int | Sym", nbytes: "int | Sym") -> "HWQueue":
    """Copy `nbytes` between device addresses."""
    raise NotImplementedError(f"{type(self).__name__} has no copy")

  def bind(self, device: "Device") -> "HWQueue":
    """Prepare the recorded commands on the device once, so each later submit costs only a jump to them."""
    return self

  def submit(self, device: "Device", var_vals: dict[str, int] | None = None) -> "HWQueue":
    """Fill the patch slots from `var_vals` and hand the commands to the device. If that is refused (a missing or
    out-of-range Variable, too many commands for the ring), the device signals the timeline values this thread took
    for it, so later work does not hang on them."""
    device.run_submission(self._patch_and_submit, device, var_vals)
    return self

  def _patch_and_submit(self, device: "Device", var_vals: dict[str, int] | None) -> None:
    self._apply_patches(var_vals)
    self._submit(device)

  def _submit(self, device: "Device") -> None:
    raise NotImplementedError


class DwordQueue(HWQueue):
  """A queue whose commands are 32-bit words (PM4, SDMA, GPFIFO). `words()` freezes them into an array('I') the
  first time they are submitted; patch slots then point into it, so a replay patches and copies machine words."""

  def __init__(self) -> None:
    super().__init__()
    self._frozen: array.array | None = None

  def words(self) -> array.array:
    if self._frozen is None or len(self._frozen) != len(self._q):
      old, self._frozen = self._frozen, array.array("I", self._q)
      if old is not None: self._frozen[:len(old)] = old  # this submit patched the old words, not the list they came from
      self._patches = [(self._frozen if c is self._q or c is old else c, i, sym) for c, i, sym in self._patches]
    return self._frozen
