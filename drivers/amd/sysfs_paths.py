"""Where amdgpu's sysfs attributes of a KFD GPU node live (no ctypes, no numpy: hcq.smi reads through it too)."""
from __future__ import annotations


def amdgpu_device_dir(osl, properties: dict[str, int]) -> str:
  """The sysfs folder of the amdgpu PCI device behind a KFD GPU node with these topology `properties` (IP discovery,
  partition modes, memory counters, hwmon). Usually the node's render node's device. On an MI300 in a partition mode only
  partition 0 renders through the PCI device; the others render through amdgpu_xcp.N platform devices that carry none of
  amdgpu's attributes (amdgpu_xcp.c amdgpu_xcp_dev_alloc, amdxcp/amdgpu_xcp_drv.c), and kfd_topology.c
  kfd_topology_add_device ORs the node id into location_id's function bits, so the PCI device is function 0 there."""
  render = f"/sys/class/drm/renderD{properties.get('drm_render_minor', 0)}"
  try:
    if "/devices/platform/" not in osl.readlink(render): return f"{render}/device"
  except OSError:
    return f"{render}/device"
  return f"/sys/bus/pci/devices/{pci_function0(properties)}"


def bus_id(domain: int, location_id: int) -> str:
  """PCI address from KFD's `domain` and `location_id` (bus << 8 | device << 3 | function)."""
  return f"{domain:04x}:{location_id >> 8:02x}:{(location_id >> 3) & 0x1f:02x}.{location_id & 7}"


def pci_function0(properties: dict[str, int]) -> str:
  """The PCI address of function 0 at a node's `domain` and `location_id`."""
  return bus_id(properties.get("domain", 0), properties.get("location_id", 0) & ~7)
