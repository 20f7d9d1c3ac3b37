"""The host (GPFIFO) method tables of each channel class, as the headers give them: read by the driver and by the
emulated GPU alike.

open-gpu-doc's clc56f.h (AMPERE_CHANNEL_GPFIFO_A) is the complete host class: method-header formats (DMA_INCR...),
NOP, NON_STALL_INTERRUPT, every SEM_EXECUTE operation. The SDK's later host headers (clc86f.h HOPPER_CHANNEL_GPFIFO_A,
clc96f.h BLACKWELL_CHANNEL_GPFIFO_A, clca6f.h BLACKWELL_CHANNEL_GPFIFO_B, 580.142) list only what the RM and UVM use,
at the same offsets, and change some fields: SEM_ADDR_HI grows from 8 bits (40-bit addresses) to 25 (57-bit) from
Hopper on. A class's table is therefore its own header's names and fields over clc56f's: a method or field the class's
header defines is taken from it; one it leaves out falls back to clc56f's (unsure whether Blackwell keeps every
SEM_EXECUTE field its header omits; the Blackwell rows are not emulated).
"""
from __future__ import annotations
from functools import cache
from types import ModuleType

from hcq.autogen.nv import clc56f, clc86f, clc96f, clca6f
from hcq.autogen.support import Register

BASE, BASE_PREFIX = clc56f, "NVC56F"


class HostClass:
  """One GPFIFO class's host methods: `m(NAME)`/`c(NAME)` give a method offset or constant, `register(NAME)` its
  fields (names without the NVxxxx_ prefix)."""

  def __init__(self, cls: int, module: ModuleType, prefix: str):
    self.cls, self.module, self.prefix = cls, module, prefix

  def m(self, name: str) -> int:
    """A host method's byte offset, or a constant (`SEM_EXECUTE_OPERATION_RELEASE`): the class's own, else clc56f's."""
    return _value(self, name)

  c = m

  def register(self, name: str) -> Register:
    """A method's (or GP entry's, or method header's) fields: clc56f's, with the class header's fields replacing
    those of the same name."""
    return _register(self, name)

  def field(self, register: str, field: str) -> tuple[int, int]:
    """(shift, mask) of one field, for decoders that read a field without building a dict."""
    return self.register(register).fields[field]

  def __repr__(self) -> str:
    return f"<HostClass {self.prefix} {self.cls:#x}>"


@cache  # queues look names up per method they write: a miss in a subset header costs an exception
def _value(host: HostClass, name: str) -> int:
  own = getattr(host.module, f"{host.prefix}_{name}", None)
  return own if own is not None else getattr(BASE, f"{BASE_PREFIX}_{name}")


@cache
def _register(host: HostClass, name: str) -> Register:
  found = [r for r in (_lookup(BASE, f"{BASE_PREFIX}_{name}"), _lookup(host.module, f"{host.prefix}_{name}")) if r is not None]
  if not found: raise KeyError(f"no host method or field group {name} in {host.prefix} or {BASE_PREFIX}")
  fields = {k: v for r in found for k, v in r.fields.items()}  # the class's own fields last: they win
  return Register(f"{host.prefix}_{name}", found[-1].offset, None, fields)


def _lookup(module: ModuleType, name: str) -> Register | None:
  try:
    return module.register(name)
  except KeyError:
    return None


HOST_CLASSES: dict[int, HostClass] = {h.cls: h for h in (
  HostClass(clc56f.AMPERE_CHANNEL_GPFIFO_A, clc56f, "NVC56F"),
  HostClass(clc86f.HOPPER_CHANNEL_GPFIFO_A, clc86f, "NVC86F"),
  HostClass(clc96f.BLACKWELL_CHANNEL_GPFIFO_A, clc96f, "NVC96F"),
  HostClass(clca6f.BLACKWELL_CHANNEL_GPFIFO_B, clca6f, "NVCA6F"),
)}
