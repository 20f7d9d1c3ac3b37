"""Which machine smi reads: the real one, a recorded tree (HCQ_SYSROOT), or the emulated GPU (DEV=MOCKKFD+AMD).

HCQ_SYSROOT=<folder> serves every path from under that folder (a testing and diagnostic option: point
it at tests/fixtures/sysfs/rx7900xtx to see smi on a 7900 XTX); HCQ_SYSROOT_DENIED=<path>:<path>
makes those machine paths fail with EACCES, as they would for a user without the right group.
DEV=MOCKKFD+AMD reads through the mock kernel's OS object (hcq.drivers.mock.os), whose devices are
marked emulated.
"""
from __future__ import annotations
from dataclasses import dataclass

from hcq.drivers.os import FixtureOS, HostOS
from hcq.smi import errors
from hcq.smi.errors import SmiError

VENDOR_OF = {"AMD": "amd", "NV": "nvidia"}


@dataclass
class Source:
  """What to read and what DEV keeps: `vendors` None means all; `arch` a gfx target or None."""
  os: HostOS
  vendors: tuple[str, ...] | None = None
  arch: str | None = None


def choose(environ: dict[str, str]) -> Source:
  """The source named by DEV, HCQ_SYSROOT and HCQ_SYSROOT_DENIED; SmiError for a bad value."""
  dev, root = environ.get("DEV"), environ.get("HCQ_SYSROOT")
  src = Source(HostOS())
  if dev:
    from hcq.devstring import parse_dev  # only DEV users pay for the parser
    from hcq.errors import DevStringError
    try:
      spec = parse_dev(dev)
    except DevStringError as e:
      raise SmiError(errors.USAGE, f"DEV={dev!r}: {e}") from None
    if spec.device == "CPU":
      raise SmiError(errors.NO_MATCH, f"DEV={dev} selects the CPU backend, which has no GPU to show; unset DEV or use AMD / NV")
    src.vendors, src.arch = (VENDOR_OF[spec.device],), spec.arch
    if spec.iface in ("MOCKKFD", "MOCKNV"):
      if root: raise SmiError(errors.USAGE, f"DEV={dev} and HCQ_SYSROOT both choose the machine to read; set one of them")
      if spec.iface == "MOCKKFD":
        from hcq.drivers.mock.os import mock_kfd_os
        from hcq.errors import HCQError
        try:
          src.os = mock_kfd_os(spec.arch, spec.partition)
        except HCQError as e:
          raise SmiError(errors.NO_MATCH, f"DEV={dev}: {e}") from None
      else:
        from hcq.drivers.mock.nv.os import MockNVOS
        src.os = MockNVOS()
      return src
  if not root: return src
  denied = [p for p in environ.get("HCQ_SYSROOT_DENIED", "").split(":") if p]
  try:
    src.os = FixtureOS(root, denied)
  except (OSError, ValueError) as e:
    raise SmiError(errors.USAGE, f"HCQ_SYSROOT={root!r}: {e.strerror if isinstance(e, OSError) else e}") from None
  return src
