"""The running NVIDIA driver's version against the branch hcq.autogen.nv was generated from (hand-written, not generated).

The RM's ioctl ABI (parameter structs, control numbers) changes between driver branches (the first
number of the version: 580, 590, ...), so the driver refuses a kernel module of another branch rather
than talk to it with the wrong layouts.
"""
from __future__ import annotations
import re

VERSION_FILE = "/proc/driver/nvidia/version"
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159  Release Build  (dvs-builder@U16-...)  ..."
_NVRM_LINE = re.compile(r"^NVRM version:.*?\s(\d+)\.(\d+)(?:\.(\d+))?(?=\s|$)", re.M)


class DriverVersionError(RuntimeError):
  """The NVIDIA kernel module is missing, unreadable, or of another branch than the bindings."""


def generated_version() -> str:
  """The open-gpu-kernel-modules tag the bindings were generated from, e.g. "580.142"."""
  from hcq.autogen.nv import nvos
  return nvos.NV_SOURCE_VERSION


def parse_version(text: str, where: str = VERSION_FILE) -> str:
  """The driver version ("580.159") in the text of /proc/driver/nvidia/version; DriverVersionError if there is none."""
  m = _NVRM_LINE.search(text)
  if m is None:
    first = text.strip().splitlines()[0][:120] if text.strip() else "(empty)"
    raise DriverVersionError(f"{where}: no 'NVRM version: ... <major>.<minor>' line (first line: {first!r})")
  return ".".join(g for g in m.groups() if g is not None)


def check_driver_version(text: str | None = None, path: str = VERSION_FILE, generated: str | None = None) -> str:
  """The running driver's version, checked to be of the branch the bindings were generated from.

  `text` is the content of /proc/driver/nvidia/version (read from `path` when None). DriverVersionError naming
  both versions when the branches differ, or saying what is missing when the file cannot be read."""
  if text is None:
    try:
      with open(path) as f: text = f.read()
    except OSError as e:
      raise DriverVersionError(f"cannot read {path} ({e.strerror}): is the NVIDIA kernel module loaded?") from e
  running = parse_version(text, path)
  generated = generated or generated_version()
  if running.split(".")[0] != generated.split(".")[0]:
    raise DriverVersionError(
      f"the NVIDIA driver is {running} (branch {running.split('.')[0]}), but hcq's RM bindings are from {generated} "
      f"(branch {generated.split('.')[0]}); the RM ABI differs between branches: install a {generated.split('.')[0]}.x driver, "
      f"or regenerate hcq.autogen.nv from a {running.split('.')[0]}.x tag (python -m hcq.autogen --nv-src DIR)")
  return running
