"""Which machine smi reads: the real one, a recorded tree (HCQ_SYSROOT), or, later, an emulated GPU (DEV=MOCKKFD+AMD).

HCQ_SYSROOT=<folder> serves every path from under that folder (a testing and diagnostic option: point
it at tests/fixtures/sysfs/rx7900xtx to see smi on a 7900 XTX); HCQ_SYSROOT_DENIED=<path>:<path>
makes those machine paths fail with EACCES, as they would for a user without the right group.
"""
from __future__ import annotations

from hcq.drivers.os import FixtureOS, HostOS
from hcq.smi import errors
from hcq.smi.errors import SmiError

# DEV strings are [IFACE+]DEVICE[:RENDERER[:ARCH]] (DESIGN.md). smi only needs the interface and the
# device kind; the full parser belongs to hcq's core Device and should replace this when it lands.
DEVICES = {"AMD": ("KFD", "MOCKKFD"), "NV": ("NV",), "CPU": ()}
VENDOR_OF = {"AMD": "amd", "NV": "nvidia"}


def parse_dev(text: str) -> tuple[str | None, str]:
  """(interface or None, device) from a DEV string; SmiError(USAGE) naming the valid choices otherwise."""
  head = text.split(":", 1)[0]
  iface, _, device = head.rpartition("+")
  device = device.upper()
  if device not in DEVICES:
    raise SmiError(errors.USAGE, f"DEV={text!r}: unknown device {device!r}; valid devices: {', '.join(DEVICES)}")
  if iface and iface.upper() not in DEVICES[device]:
    valid = ", ".join(f"{i}+{device}" for i in DEVICES[device]) or "none"
    raise SmiError(errors.USAGE, f"DEV={text!r}: unknown interface {iface!r} for {device}; valid: {valid}")
  return (iface.upper() or None), device


def choose(environ: dict[str, str]) -> tuple[HostOS, tuple[str, ...] | None]:
  """The OS object to read through and the vendors DEV limits discovery to (None: all)."""
  vendors = None
  dev = environ.get("DEV")
  if dev:
    iface, device = parse_dev(dev)
    if iface == "MOCKKFD":
      # The seam for emulated rows: return the mock kernel's OS object (its `emulated` is True) here.
      raise SmiError(errors.NO_GPU, f"DEV={dev}: the emulated AMD GPU (MOCKKFD) is not available yet; "
                     "it comes with the AMD driver issue")
    if device == "CPU":
      raise SmiError(errors.NO_MATCH, f"DEV={dev} selects the CPU backend, which has no GPU to show; unset DEV or use AMD / NV")
    vendors = (VENDOR_OF[device],)
  root = environ.get("HCQ_SYSROOT")
  if not root: return HostOS(), vendors
  denied = [p for p in environ.get("HCQ_SYSROOT_DENIED", "").split(":") if p]
  try:
    return FixtureOS(root, denied), vendors
  except (OSError, ValueError) as e:
    raise SmiError(errors.USAGE, f"HCQ_SYSROOT={root!r}: {e.strerror if isinstance(e, OSError) else e}") from None
