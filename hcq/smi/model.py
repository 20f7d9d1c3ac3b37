"""What hcq.smi knows about a machine: devices, processes, drivers and notes, as plain records.

Readers (amd, nvidia, processes) fill these; renderers (table, jsonout) only read them. Units are in
the field names; None means "not exposed here", and `unavailable` says why where we know.
"""
from __future__ import annotations
from dataclasses import dataclass, field


@dataclass
class Device:
  """One GPU as the kernel driver shows it."""
  index: int                      # position among all GPUs found, before any --dev filtering (stable across filters)
  vendor: str                     # "amd" | "nvidia"
  name: str                       # marketing name, or "unknown AMD GPU (device 0x....)"
  name_source: str                # "product_name" | "amdgpu.ids" | "nvidia" | "unknown"
  bus_id: str | None = None       # PCI address, "0000:03:00.0"
  vendor_id: int | None = None
  device_id: int | None = None
  revision: int | None = None
  arch: str | None = None         # gfx target ("gfx1100"); None for NVIDIA until the NV driver reads it
  uuid: str | None = None         # AMD unique_id (hex) or NVIDIA "GPU-..." UUID, where exposed
  emulated: bool = False          # True for a GPU served by a mock kernel interface (MOCKKFD)
  nodes: list[str] = field(default_factory=list)  # device files that belong to this GPU alone (/dev/dri/renderD128)
  kfd_node: int | None = None     # KFD topology node number
  gpu_id: int | None = None       # KFD gpu_id
  compute_units: int | None = None
  xcc: int | None = None          # compute dies (MI300: 8 per board in SPX mode)
  compute_partition: str | None = None  # amdgpu's current_compute_partition (MI300: SPX, DPX, QPX, CPX); None where absent
  memory_partition: str | None = None   # current_memory_partition (NPS1, NPS4, ...)
  partition_index: int | None = None    # which partition of its GPU this KFD node is (DPX/QPX/CPX), of partition_count
  partition_count: int | None = None
  vram_used_bytes: int | None = None
  vram_total_bytes: int | None = None
  gtt_used_bytes: int | None = None
  gtt_total_bytes: int | None = None
  busy_percent: int | None = None
  temp_edge_c: float | None = None
  temp_junction_c: float | None = None
  temp_memory_c: float | None = None
  power_w: float | None = None
  power_kind: str | None = None   # "average" (hwmon power1_average) | "input" (power1_input, instantaneous)
  power_cap_w: float | None = None
  sclk_mhz: int | None = None
  mclk_mhz: int | None = None
  fan_rpm: int | None = None
  link: str | None = None         # "16.0 GT/s PCIe x16"
  driver: str | None = None       # kernel driver bound to the device
  driver_version: str | None = None
  vbios: str | None = None
  firmware: dict[str, str] = field(default_factory=dict)   # block -> version as the driver prints it
  unavailable: dict[str, str] = field(default_factory=dict)  # field -> why it is missing
  emulated_state: dict[str, int] | None = None  # live state an emulated GPU publishes (queues, buffers, dispatches, ...)


@dataclass
class Process:
  """A process holding GPU device files open."""
  pid: int
  name: str
  nodes: list[str]                # GPU device files it holds, sorted (/dev/kfd, /dev/dri/renderD128, /dev/nvidia0)
  devices: list[int]              # indices of the GPUs whose own files it holds
  vram_bytes: int | None = None   # from /proc/PID/fdinfo drm-memory-* (amdgpu); None where the driver does not say
  gtt_bytes: int | None = None


@dataclass
class DriverInfo:
  """A kernel driver smi looked for."""
  name: str                       # "amdgpu" | "nvidia"
  loaded: bool
  version: str | None = None
  control_node: str | None = None  # /dev/kfd or /dev/nvidiactl
  control_present: bool = False
  control_access: bool | None = None  # None when the node is absent


@dataclass
class Note:
  """Something the user should know: why a GPU or a value could not be seen."""
  kind: str                       # "no_gpu" | "permission" | "limitation" | "info"
  message: str
  path: str | None = None


@dataclass
class Snapshot:
  """Everything one refresh read."""
  time: float
  root: str                       # "/" on a real machine, the fixture folder under HCQ_SYSROOT
  devices: list[Device]
  drivers: list[DriverInfo]
  notes: list[Note]
  processes: list[Process] | None = None  # None unless --pids
  processes_hidden: int = 0       # processes whose fds could not be read (another user's, without root)
  selection: str | None = None    # the --dev / DEV filter applied, as typed
  found: int = 0                  # GPUs found before filtering
