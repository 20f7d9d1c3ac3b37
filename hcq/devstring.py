"""DEV strings: `[IFACE+]DEVICE[:RENDERER[:ARCH]]`, e.g. `AMD`, `KFD+AMD`, `MOCKKFD+AMD::gfx1100`, `NV`, `CPU:LLVM`."""
from __future__ import annotations
import difflib
from dataclasses import dataclass

from hcq.errors import DevStringError


@dataclass(frozen=True)
class Backend:
  """What a device kind accepts in each part of a DEV string; the first interface and renderer are the defaults."""
  ifaces: tuple[str, ...]
  renderers: tuple[str, ...]
  archs: tuple[str, ...]


BACKENDS: dict[str, Backend] = {
  "AMD": Backend(ifaces=("KFD", "MOCKKFD"), renderers=("LLVM", "ASM"), archs=("gfx1100", "gfx1201", "gfx942")),
  "NV": Backend(ifaces=("NV", "MOCKNV"), renderers=("PTX",), archs=()),
  "CPU": Backend(ifaces=("CPU",), renderers=("LLVM",), archs=()),
}


@dataclass(frozen=True)
class DevSpec:
  """A parsed DEV string. Parts left out are None: the backend picks its default (e.g. a real GPU if present)."""
  device: str
  iface: str | None = None
  renderer: str | None = None
  arch: str | None = None

  def __str__(self) -> str:
    head = f"{self.iface}+{self.device}" if self.iface else self.device
    tail = [self.renderer or "", self.arch or ""]
    while tail and not tail[-1]: tail.pop()
    return ":".join([head, *tail])


def _choose(kind: str, value: str, valid: tuple[str, ...], text: str, case_sensitive: bool = False) -> str:
  """`value` as spelled in `valid` (case-insensitively unless stated), or a DevStringError listing the choices."""
  for v in valid:
    if v == value or (not case_sensitive and v.upper() == value.upper()): return v
  close = difflib.get_close_matches(value if case_sensitive else value.upper(), [v if case_sensitive else v.upper() for v in valid], n=1)
  hint = f" (did you mean {close[0]}?)" if close else ""
  choices = ", ".join(valid) if valid else "none"
  raise DevStringError(f"unknown {kind} {value!r} in DEV string {text!r}{hint}; valid {kind}s: {choices}. "
                       "Grammar: [IFACE+]DEVICE[:RENDERER[:ARCH]], e.g. AMD, KFD+AMD, MOCKKFD+AMD::gfx1100, NV, CPU:LLVM")


def parse_dev(text: str) -> DevSpec:
  """Parse and validate a DEV string; DevStringError names the bad part and lists the valid ones."""
  if not isinstance(text, str) or not text.strip():
    raise DevStringError(f"empty DEV string {text!r}; valid devices: {', '.join(BACKENDS)}")
  head, *rest = text.strip().split(":")
  if len(rest) > 2: raise DevStringError(f"DEV string {text!r} has {len(rest) + 1} ':'-separated parts; at most 3: DEVICE[:RENDERER[:ARCH]]")
  iface, _, device = head.rpartition("+")
  device = _choose("device", device, tuple(BACKENDS), text)
  backend = BACKENDS[device]
  iface = _choose("interface", iface, backend.ifaces, text) if iface else None
  renderer = _choose("renderer", rest[0], backend.renderers, text) if rest and rest[0] else None
  arch = _choose("arch", rest[1], backend.archs, text, case_sensitive=True) if len(rest) > 1 and rest[1] else None
  return DevSpec(device, iface, renderer, arch)
