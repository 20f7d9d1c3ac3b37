"""Small readers for sysfs/procfs attributes through an OS object: a missing file is None, not an error.

Errors other than "no such file" are kept in `errors` (path -> errno name) so a caller can say why a
value is missing: amdgpu answers EPERM or EBUSY while a GPU is in reset or runtime suspend.
"""
from __future__ import annotations
import errno

from hcq.drivers.os import HostOS


class AttrReader:
  """Reads attributes below one folder (a device's sysfs directory), collecting read errors."""

  def __init__(self, os_: HostOS, base: str = ""):
    self.os, self.base = os_, base
    self.errors: dict[str, str] = {}

  def path(self, name: str) -> str:
    return f"{self.base}/{name}" if self.base else name

  def text(self, name: str) -> str | None:
    """The stripped content of attribute `name`, or None when it is absent or unreadable."""
    path = self.path(name)
    try:
      return self.os.read_text(path).strip()
    except FileNotFoundError:
      return None
    except OSError as e:
      self.errors[path] = errno.errorcode.get(e.errno or 0, str(e.errno))
      return None

  def int(self, name: str) -> int | None:
    """Attribute `name` as an integer ("0x1002" and "42" both work), or None."""
    text = self.text(name)
    if not text: return None
    try:
      return int(text.split()[0], 0)
    except ValueError:
      return None

  def scaled(self, name: str, divisor: float) -> float | None:
    """Attribute `name` divided by `divisor` (hwmon: millidegrees, microwatts), or None."""
    value = self.int(name)
    return None if value is None else value / divisor

  def listdir(self, name: str = "") -> list[str]:
    """Entries of a sub-folder, sorted; empty when it is absent or unreadable."""
    path = self.path(name) if name else self.base
    try:
      return sorted(self.os.listdir(path))
    except OSError:
      return []


def parse_properties(text: str) -> dict[str, int]:
  """A KFD topology `properties` file ("name value" per line) as a dict; non-integer lines are skipped."""
  props: dict[str, int] = {}
  for line in text.splitlines():
    key, _, value = line.partition(" ")
    try:
      props[key] = int(value)
    except ValueError:
      continue
  return props


def parse_colon_fields(text: str) -> dict[str, str]:
  """A "Key: value" file (/proc/driver/nvidia/gpus/*/information) as a dict of stripped strings."""
  fields: dict[str, str] = {}
  for line in text.splitlines():
    key, sep, value = line.partition(":")
    if sep: fields[key.strip()] = value.strip()
  return fields
