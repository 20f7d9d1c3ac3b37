"""DEV strings: `[IFACE+]DEVICE[:INDEX][:RENDERER[:ARCH[:PARTITION]]]`, e.g. `AMD`, `KFD+AMD`, `MOCKKFD+AMD::gfx1100`, `NV`,
`CPU:LLVM`, `AMD:1` (the second AMD GPU node), `MOCKKFD+AMD:3::gfx942:cpx` (the fourth partition of an MI300X in CPX mode)."""
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
  indexed: bool = False                # takes a device index (an AMD GPU node of the KFD topology)
  partitions: tuple[str, ...] = ()     # compute partition modes a GPU may be in (PARTITION part)
  memory_partitions: tuple[str, ...] = ()


# the modes amdgpu names in sysfs: amdgpu_gfx.h amdgpu_gfx_compute_mode_desc, amdgpu_gmc.c current_memory_partition_show
# (Linux 6.12); which of them a board takes is the board's business (hcq.drivers.mock.amdgpu.partitions for the emulated one)
AMD_PARTITIONS, AMD_MEMORY_PARTITIONS = ("SPX", "DPX", "TPX", "QPX", "CPX"), ("NPS1", "NPS2", "NPS3", "NPS4", "NPS6", "NPS8")


BACKENDS: dict[str, Backend] = {
  "AMD": Backend(ifaces=("KFD", "MOCKKFD"), renderers=("LLVM", "ASM"), archs=("gfx1100", "gfx1201", "gfx942"), indexed=True,
                 partitions=AMD_PARTITIONS, memory_partitions=AMD_MEMORY_PARTITIONS),
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
  index: int | None = None      # which GPU node of the backend (AMD: among the KFD topology's GPU nodes of `arch`)
  partition: str | None = None  # the compute partition mode, `/MEMORY` added unless NPS1: "CPX", "CPX/NPS4"

  def __str__(self) -> str:
    head = f"{self.iface}+{self.device}" if self.iface else self.device
    if self.index is not None: head += f":{self.index}"
    tail = [self.renderer or "", self.arch or "", self.partition or ""]
    while tail and not tail[-1]: tail.pop()
    return ":".join([head, *tail])


def _choose(kind: str, value: str, valid: tuple[str, ...], text: str, case_sensitive: bool = False) -> str:
  """`value` as spelled in `valid` (case-insensitively unless stated), or a DevStringError listing the choices."""
  for v in valid:
    if v == value or (not case_sensitive and v.upper() == value.upper()): return v
  close = difflib.get_close_matches(value if case_sensitive else value.upper(), [v if case_sensitive else v.upper() for v in valid], n=1)
  hint = f" (did you mean {close[0]}?)" if close else ""
  choices = ", ".join(valid) if valid else "none"
  raise DevStringError(f"unknown {kind} {value!r} in DEV string {text!r}{hint}; valid {kind}s: {choices}. {GRAMMAR}")


GRAMMAR = "Grammar: [IFACE+]DEVICE[:INDEX][:RENDERER[:ARCH[:PARTITION]]], e.g. AMD, KFD+AMD, AMD:1, MOCKKFD+AMD::gfx1100, " \
          "MOCKKFD+AMD:3::gfx942:cpx, NV, CPU:LLVM"


def _partition(value: str, backend: Backend, device: str, text: str) -> str:
  """A PARTITION part, COMPUTE[/MEMORY] in any case, spelt as sysfs spells it; the memory mode NPS1 is left out."""
  if not backend.partitions: raise DevStringError(f"DEV string {text!r}: {device} devices have no partition modes. {GRAMMAR}")
  compute, slash, memory = value.partition("/")
  compute = _choose("partition", compute, backend.partitions, text)
  memory = _choose("memory partition", memory, backend.memory_partitions, text) if slash else "NPS1"
  return compute if memory == "NPS1" else f"{compute}/{memory}"


def parse_dev(text: str) -> DevSpec:
  """Parse and validate a DEV string; DevStringError names the bad part and lists the valid ones."""
  if not isinstance(text, str) or not text.strip():
    raise DevStringError(f"empty DEV string {text!r}; valid devices: {', '.join(BACKENDS)}")
  head, *rest = text.strip().split(":")
  iface, _, device = head.rpartition("+")
  device = _choose("device", device, tuple(BACKENDS), text)
  backend = BACKENDS[device]
  index = None
  if rest and rest[0].isascii() and rest[0].isdigit():  # renderers are words: a number after DEVICE is the index ("²" is not one)
    if not backend.indexed: raise DevStringError(f"DEV string {text!r}: {device} takes no device index. {GRAMMAR}")
    index = int(rest.pop(0))
  if len(rest) > 3: raise DevStringError(f"DEV string {text!r} has too many ':'-separated parts. {GRAMMAR}")
  iface = _choose("interface", iface, backend.ifaces, text) if iface else None
  renderer = _choose("renderer", rest[0], backend.renderers, text) if rest and rest[0] else None
  arch = _choose("arch", rest[1], backend.archs, text, case_sensitive=True) if len(rest) > 1 and rest[1] else None
  partition = _partition(rest[2], backend, device, text) if len(rest) > 2 and rest[2] else None
  return DevSpec(device, iface, renderer, arch, index, partition)
