"""Marketing names of AMD GPUs from libdrm's amdgpu.ids, the table amdgpu tools (and Mesa) use.

The file maps (PCI device id, PCI revision) to a product name, one "744C,\tC8,\tAMD Radeon RX 7900 XTX"
per line. It ships in the libdrm-common (Debian) / libdrm (Fedora, Arch) package, so it is read from
the machine through the OS layer rather than copied here: hcq carries no name table of its own.
"""
from __future__ import annotations

from hcq.drivers.os import HostOS

# Where distributions install it; the first that exists wins.
AMDGPU_IDS_PATHS = ("/usr/share/libdrm/amdgpu.ids", "/usr/local/share/libdrm/amdgpu.ids", "/opt/amdgpu/share/libdrm/amdgpu.ids")


def lookup(os_: HostOS, device_id: int, revision: int | None) -> str | None:
  """The product name for `device_id`/`revision`, or None. Where the exact revision is not listed, a
  revision-00 line for the device id is taken (libdrm itself needs an exact match; Instinct boards are
  listed with 00 only)."""
  for path in AMDGPU_IDS_PATHS:
    try:
      text = os_.read_text(path)
    except OSError:
      continue
    return _find(text, device_id, revision)
  return None


def _find(text: str, device_id: int, revision: int | None) -> str | None:
  prefix = f"{device_id:04X},"
  fallback = None
  for line in text.splitlines():
    if not line.startswith(prefix): continue
    parts = [p.strip() for p in line.split(",", 2)]
    if len(parts) != 3: continue
    try:
      rev = int(parts[1], 16)
    except ValueError:
      continue  # a malformed line in a system file: skip it, as libdrm does
    if rev == revision: return parts[2]
    if rev == 0 and fallback is None: fallback = parts[2]
  return fallback
