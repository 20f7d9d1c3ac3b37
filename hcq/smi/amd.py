"""AMD GPUs: found in the KFD topology, described by the amdgpu sysfs and hwmon files of their PCI device.

KFD lists one topology node per CPU socket and per GPU (per partition on MI300 in DPX/QPX/CPX modes); a GPU
node has simd_count > 0, and its drm_render_minor names the render node whose sysfs `device` folder
holds the amdgpu attributes (mem_info_*, gpu_busy_percent, pp_dpm_*, hwmon/...); a partition other than the first
renders through a platform device, and the attributes are its GPU's PCI device's (hcq.drivers.amd.sysfs_paths).
"""
from __future__ import annotations
import os
import errno

from hcq.drivers.amd.sysfs_paths import amdgpu_device_dir, bus_id, pci_function0
from hcq.drivers.os import HostOS
from hcq.smi import amdgpu_ids
from hcq.smi.model import Device, DriverInfo, Note
from hcq.smi.sysfs import AttrReader, parse_properties

KFD_NODE = "/dev/kfd"
KFD_TOPOLOGY_NODES = "/sys/devices/virtual/kfd/kfd/topology/nodes"
AMDGPU_MODULE = "/sys/module/amdgpu"
AMD_VENDOR_ID = 0x1002
EMULATED_STATE = "hcq_emulated_state"  # device attribute of the emulated GPU (hcq.drivers.mock.os): "queues 1\n..." lines
WATT, DEGREE, MHZ = 1_000_000, 1000, 1_000_000  # hwmon units: microwatts, millidegrees C, Hz


def gfx_target(version: int) -> str:
  """The LLVM target name for a KFD gfx_target_version: major*10000 + minor*100 + stepping, with minor
  and stepping written as one hex digit each (110000 -> gfx1100, 90402 -> gfx942, 90010 -> gfx90a)."""
  major, minor, stepping = version // 10000, version // 100 % 100, version % 100
  return f"gfx{major}{minor:x}{stepping:x}"


def driver_info(os_: HostOS) -> DriverInfo:
  """Whether amdgpu is loaded, its version, and whether this user may open /dev/kfd."""
  loaded = os_.exists(AMDGPU_MODULE)
  version = None
  if os_.emulated:
    version = "emulated (hcq.drivers.mock)"  # the host's kernel release would say nothing about it
  elif loaded:
    reader = AttrReader(os_)
    # amdgpu-dkms (ROCm's packaged driver) has a module version; the in-kernel driver goes with the kernel.
    version = reader.text(f"{AMDGPU_MODULE}/version")
    if not version:
      release = reader.text("/proc/sys/kernel/osrelease")
      version = f"in-kernel ({release})" if release else "in-kernel"
  present = os_.exists(KFD_NODE)
  access = os_.access(KFD_NODE, os.R_OK | os.W_OK) if present else None  # R_OK | W_OK: what the KFD driver will need
  return DriverInfo("amdgpu", loaded, version, KFD_NODE, present, access)


def gpu_nodes(os_: HostOS, notes: list[Note]) -> list[tuple[int, dict[str, int]]]:
  """(node number, properties) of every GPU node in the KFD topology, in node order."""
  try:
    names = os_.listdir(KFD_TOPOLOGY_NODES)
  except FileNotFoundError:
    return []
  except PermissionError:
    notes.append(Note("permission", f"permission denied on {KFD_TOPOLOGY_NODES}", KFD_TOPOLOGY_NODES))
    return []
  found = []
  for name in sorted((n for n in names if n.isdigit()), key=int):
    path = f"{KFD_TOPOLOGY_NODES}/{name}/properties"
    try:
      props = parse_properties(os_.read_text(path))
    except PermissionError:
      # KFD answers EPERM when the device cgroup (a container) does not grant this GPU's render node.
      notes.append(Note("permission", f"permission denied on {path}: this GPU's render node is not granted "
                        "to this container or user (device cgroup)", path))
      continue
    except OSError as e:
      # ENOENT/ENODEV: the node went away (hot unplug, partition switch) between listing and reading.
      if e.errno not in (errno.ENOENT, errno.ENODEV): notes.append(Note("info", f"could not read {path}: {e.strerror}", path))
      continue
    if props.get("simd_count", 0) > 0: found.append((int(name), props))
  return found


def read_device(os_: HostOS, index: int, node: int, props: dict[str, int], driver: DriverInfo) -> Device:
  """Everything amdgpu publishes about the GPU behind KFD topology node `node`."""
  pci = bus_id(props.get("domain", 0), props.get("location_id", 0))
  minor = props.get("drm_render_minor", 0)
  devdir = amdgpu_device_dir(os_, props)  # amdgpu's PCI device, whose attributes cover the whole GPU
  if not os_.exists(devdir): devdir = f"/sys/bus/pci/devices/{pci}"
  dev = AttrReader(os_, devdir)
  own = f"/sys/class/drm/renderD{minor}/device"  # the node's own device: a partition's platform device, else the same
  render = AttrReader(os_, own) if os_.exists(own) else dev
  simd_per_cu = props.get("simd_per_cu") or 0
  device_id = props.get("device_id") or dev.int("device")
  d = Device(index=index, vendor="amd", name="", name_source="unknown", bus_id=pci, vendor_id=props.get("vendor_id") or AMD_VENDOR_ID,
             device_id=device_id, revision=dev.int("revision"), kfd_node=node,
             gpu_id=AttrReader(os_).int(f"{KFD_TOPOLOGY_NODES}/{node}/gpu_id"),
             compute_units=props["simd_count"] // simd_per_cu if simd_per_cu else None, xcc=props.get("num_xcc"))
  if props.get("gfx_target_version"): d.arch = gfx_target(props["gfx_target_version"])
  d.name, d.name_source = marketing_name(os_, dev, d.device_id, d.revision)
  d.nodes = [f"/dev/dri/{n}" for n in render.listdir("drm") if n.startswith(("card", "renderD"))] or [f"/dev/dri/renderD{minor}"]
  d.uuid = dev.text("unique_id") or None
  # GPUs with XCC partitions (MI300): amdgpu_gfx.c current_compute_partition, amdgpu_gmc.c current_memory_partition
  d.compute_partition, d.memory_partition = dev.text("current_compute_partition") or None, dev.text("current_memory_partition") or None
  if d.compute_partition in (None, "SPX"):
    d.vram_total_bytes = dev.int("mem_info_vram_total") or vram_from_topology(os_, node)
    d.vram_used_bytes = dev.int("mem_info_vram_used")
  else:  # one KFD node per partition: its own share of VRAM is in its memory bank (amdgpu_amdkfd_xcp_memory_size)
    d.bus_id = pci_function0(props)  # kfd_topology.c ORs the node id into location_id's function bits
    d.vram_total_bytes = vram_from_topology(os_, node)
    d.unavailable["memory_bytes.vram_used"] = "amdgpu's mem_info_vram_used counts the whole GPU, not one partition"
  d.gtt_total_bytes, d.gtt_used_bytes = dev.int("mem_info_gtt_total"), dev.int("mem_info_gtt_used")
  d.busy_percent = dev.int("gpu_busy_percent")
  speed, width = dev.text("current_link_speed"), dev.text("current_link_width")
  if speed: d.link = f"{speed} x{width}" if width else speed
  d.vbios = dev.text("vbios_version") or None
  d.firmware = {name.removesuffix("_fw_version"): value for name in dev.listdir("fw_version")
                if (value := dev.text(f"fw_version/{name}"))}
  try:
    d.driver = os_.readlink(f"{devdir}/driver").rsplit("/", 1)[-1]
  except OSError:
    d.driver = "amdgpu"
  d.driver_version = driver.version
  read_hwmon(os_, dev, d)
  if d.sclk_mhz is None: d.sclk_mhz = current_dpm_level(dev.text("pp_dpm_sclk"))
  if d.mclk_mhz is None: d.mclk_mhz = current_dpm_level(dev.text("pp_dpm_mclk"))
  state = render.text(EMULATED_STATE)
  if state is not None: d.emulated_state = parse_properties(state)
  d.unavailable.update({path: f"read failed: {name}" for path, name in {**dev.errors, **render.errors}.items()})
  return d


def number_partitions(devices: list[Device]) -> None:
  """Each partition's place among its GPU's KFD nodes (node order, as amdkfd creates them: kfd_device.c)."""
  for d in devices:
    if d.compute_partition in (None, "SPX"): continue
    same = [e for e in devices if e.bus_id == d.bus_id and e.compute_partition == d.compute_partition]
    d.partition_index, d.partition_count = same.index(d), len(same)


def marketing_name(os_: HostOS, dev: AttrReader, device_id: int | None, revision: int | None) -> tuple[str, str]:
  """(name, where it came from): the board's FRU product_name (Instinct), else libdrm's amdgpu.ids, else unknown."""
  product = dev.text("product_name")
  if product: return product, "product_name"
  if device_id is not None:
    name = amdgpu_ids.lookup(os_, device_id, revision)
    if name: return name, "amdgpu.ids"
    return f"unknown AMD GPU (device 0x{device_id:04x})", "unknown"
  return "unknown AMD GPU", "unknown"


def vram_from_topology(os_: HostOS, node: int) -> int | None:
  """VRAM size from the node's frame-buffer memory banks, for kernels without mem_info_vram_total."""
  banks = AttrReader(os_, f"{KFD_TOPOLOGY_NODES}/{node}/mem_banks")
  total = 0
  for bank in banks.listdir():
    props = parse_properties(banks.text(f"{bank}/properties") or "")
    if props.get("heap_type") in (1, 2): total += props.get("size_in_bytes", 0)  # HSA frame buffer public/private
  return total or None


def read_hwmon(os_: HostOS, dev: AttrReader, d: Device) -> None:
  """Temperatures, power, fan and clocks from the device's hwmon folder (amdgpu exposes one)."""
  folders = dev.listdir("hwmon")
  if not folders: return
  hw = AttrReader(os_, f"{dev.base}/hwmon/{folders[0]}")
  temps: dict[str, float | None] = {}
  for i in (1, 2, 3):
    # Labels say which sensor is which; without one, amdgpu's order is edge, junction, mem.
    label = hw.text(f"temp{i}_label") or ("edge", "junction", "mem")[i - 1]
    value = hw.scaled(f"temp{i}_input", DEGREE)
    if value is not None: temps[label] = value
  d.temp_edge_c, d.temp_junction_c, d.temp_memory_c = temps.get("edge"), temps.get("junction"), temps.get("mem")
  d.power_w = hw.scaled("power1_average", WATT)
  if d.power_w is not None:
    d.power_kind = "average"
  else:
    d.power_w = hw.scaled("power1_input", WATT)  # newer SMUs (Navi3x on recent kernels, MI300) give current power only
    d.power_kind = "input" if d.power_w is not None else None
  d.power_cap_w = hw.scaled("power1_cap", WATT)
  d.fan_rpm = hw.int("fan1_input")
  for i in (1, 2):
    label, hz = hw.text(f"freq{i}_label"), hw.int(f"freq{i}_input")
    if hz is None: continue
    if label == "sclk": d.sclk_mhz = round(hz / MHZ)
    elif label == "mclk": d.mclk_mhz = round(hz / MHZ)
  dev.errors.update(hw.errors)


def current_dpm_level(text: str | None) -> int | None:
  """The clock marked current ("1: 1966Mhz *") in a pp_dpm_sclk / pp_dpm_mclk file, in MHz."""
  for line in (text or "").splitlines():
    if line.rstrip().endswith("*"):
      value = line.partition(":")[2].strip().rstrip("*").strip().lower().removesuffix("mhz")
      try:
        return int(value)
      except ValueError:
        return None
  return None


def find(os_: HostOS, first_index: int, notes: list[Note]) -> tuple[list[Device], DriverInfo]:
  """Every AMD GPU in the KFD topology, indexed from `first_index`, and the amdgpu driver's state."""
  driver = driver_info(os_)
  devices = [read_device(os_, first_index + i, node, props, driver) for i, (node, props) in enumerate(gpu_nodes(os_, notes))]
  number_partitions(devices)
  return devices, driver


def absence_reason(os_: HostOS, driver: DriverInfo) -> str:
  """Why no AMD GPU was found, in a few words for the "no GPU found (...)" line."""
  if not driver.control_present:
    return f"{KFD_NODE} absent" + (" although amdgpu is loaded" if driver.loaded else "")
  return "KFD topology lists no GPU"
