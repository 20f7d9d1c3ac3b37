"""NVIDIA GPUs through the nvidia kernel driver's procfs files; no NVML.

/proc/driver/nvidia/version names the driver, and /proc/driver/nvidia/gpus/<bus>/information gives each
GPU's model, UUID, VBIOS and device minor. Memory, utilisation and temperature come from RM controls on
/dev/nvidiactl (hcq.smi.nvidia_rm); power, clocks and fans have no open control and show as unavailable.
"""
from __future__ import annotations
import os

from hcq.drivers.os import HostOS
from hcq.smi.model import Device, DriverInfo, Note
from hcq.smi.nvidia_rm import read_rm_fields
from hcq.smi.sysfs import AttrReader, parse_colon_fields

PROC_NVIDIA = "/proc/driver/nvidia"
CONTROL_NODE = "/dev/nvidiactl"
NVIDIA_VENDOR_ID = 0x10de


def parse_version(text: str) -> str | None:
  """The driver version from /proc/driver/nvidia/version's first line
  ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.120  Fri Sep 13 ..." -> "550.120";
  open kernel modules print "... Open Kernel Module for x86_64  550.120  Release Build ...")."""
  first = text.splitlines()[0] if text else ""
  for word in first.split():
    if word[:1].isdigit() and "." in word and all(p.isdigit() for p in word.split(".")): return word
  return None


def driver_info(os_: HostOS) -> DriverInfo:
  """Whether the nvidia driver is loaded, its version, and whether this user may open /dev/nvidiactl."""
  reader = AttrReader(os_)
  text = reader.text(f"{PROC_NVIDIA}/version")
  loaded = text is not None or os_.exists(PROC_NVIDIA)
  present = os_.exists(CONTROL_NODE)
  return DriverInfo("nvidia", loaded, parse_version(text) if text else None, CONTROL_NODE, present,
                    os_.access(CONTROL_NODE, os.R_OK | os.W_OK) if present else None)


def find(os_: HostOS, first_index: int, notes: list[Note]) -> tuple[list[Device], DriverInfo]:
  """Every GPU the nvidia driver lists, indexed from `first_index`, and the driver's state."""
  driver = driver_info(os_)
  if not driver.loaded: return [], driver
  try:
    buses = sorted(os_.listdir(f"{PROC_NVIDIA}/gpus"))
  except FileNotFoundError:
    return [], driver
  except PermissionError:
    notes.append(Note("permission", f"permission denied on {PROC_NVIDIA}/gpus", f"{PROC_NVIDIA}/gpus"))
    return [], driver
  devices = []
  for bus in buses:
    path = f"{PROC_NVIDIA}/gpus/{bus}/information"
    try:
      info = parse_colon_fields(os_.read_text(path))
    except PermissionError:
      notes.append(Note("permission", f"permission denied on {path}", path))
      continue
    except OSError:
      continue
    d = read_device(os_, first_index + len(devices), bus, info, driver)
    # the RM numbers devices in the order it probed them, which is bus order here (unverified on multi-GPU machines)
    read_rm_fields(os_, d, device_instance=len(devices))
    devices.append(d)
  return devices, driver


def read_device(os_: HostOS, index: int, bus: str, info: dict[str, str], driver: DriverInfo) -> Device:
  """One NVIDIA GPU from its procfs `information` and its PCI sysfs folder."""
  pci = AttrReader(os_, f"/sys/bus/pci/devices/{bus}")
  minor = info.get("Device Minor")
  d = Device(index=index, vendor="nvidia", name=info.get("Model") or "unknown NVIDIA GPU", name_source="nvidia",
             bus_id=info.get("Bus Location") or bus, vendor_id=pci.int("vendor") or NVIDIA_VENDOR_ID, device_id=pci.int("device"),
             revision=pci.int("revision"), uuid=info.get("GPU UUID") or None, vbios=info.get("Video BIOS") or None,
             driver="nvidia", driver_version=driver.version)
  if minor and minor.isdigit(): d.nodes = [f"/dev/nvidia{minor}"]
  speed, width = pci.text("current_link_speed"), pci.text("current_link_width")
  if speed: d.link = f"{speed} x{width}" if width else speed
  return d


def absence_reason(driver: DriverInfo) -> str:
  """Why no NVIDIA GPU was found, in a few words."""
  return "NVIDIA driver loaded but lists no GPU" if driver.loaded else "no NVIDIA driver"
