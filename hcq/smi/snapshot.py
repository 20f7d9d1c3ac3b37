"""One refresh: find every GPU through an OS object, say why one could not be seen, and pick the
exit code. Selection by --dev happens here too, so table and JSON show the same thing."""
from __future__ import annotations
import time

from hcq.drivers.os import HostOS
from hcq.smi import amd, errors, nvidia
from hcq.smi.model import Device, DriverInfo, Note, Process, Snapshot


def take(os_: HostOS, *, with_processes: bool = False, vendors: tuple[str, ...] | None = None) -> Snapshot:
  """Read every GPU the kernel drivers behind `os_` show (marked emulated when `os_.emulated`);
  `vendors` limits discovery to "amd" / "nvidia" (from DEV)."""
  notes: list[Note] = []
  devices: list[Device] = []
  drivers: list[DriverInfo] = []
  absent: list[str] = []
  if vendors is None or "amd" in vendors:
    found, driver = amd.find(os_, len(devices), notes)
    devices += found
    drivers.append(driver)
    if driver.control_present and driver.control_access is False:
      notes.append(Note("permission", f"permission denied on {driver.control_node}: add your user to the "
                        f"{owning_group(os_, driver.control_node)} group", driver.control_node))
    if not found: absent.append(amd.absence_reason(os_, driver))
  if vendors is None or "nvidia" in vendors:
    found, driver = nvidia.find(os_, len(devices), notes)
    devices += found
    drivers.append(driver)
    if found and driver.control_present and driver.control_access is False:
      notes.append(Note("permission", f"permission denied on {driver.control_node}: check the nvidia device "
                        "permissions (NVreg_DeviceFileMode) or your groups", driver.control_node))
    if not found: absent.append(nvidia.absence_reason(driver))
  for d in devices: d.emulated = os_.emulated
  if os_.emulated and devices:
    notes.append(Note("info", "emulated GPU: the live state shown is this process's own instance; emulated GPUs in "
                      "other processes do not publish theirs"))
  if any(d.vendor == "nvidia" for d in devices):
    notes.append(Note("limitation", "NVIDIA: power, clocks and fans have no RM control in NVIDIA's open headers and no "
                      "procfs/sysfs file; they show as unavailable"))
  if not devices:
    denied = [n for n in notes if n.kind == "permission"]
    summary = f"no GPU visible ({denied[0].message})" if denied else f"no GPU found ({', '.join(absent)})"
    notes.insert(0, Note("no_gpu", summary))
  snap = Snapshot(time=time.time(), root=os_.root, devices=devices, drivers=drivers, notes=notes, found=len(devices))
  if with_processes:
    from hcq.smi import processes  # only --pids pays for the /proc scan
    snap.processes, snap.processes_hidden = processes.scan(os_, devices)
    if snap.processes_hidden:
      n = snap.processes_hidden
      snap.notes.append(Note("info", f"{n} process{'es' if n != 1 else ''} could not be inspected (permission denied "
                             "on /proc/PID/fd); run as root to see all"))
  return snap


def owning_group(os_: HostOS, path: str) -> str:
  """The group that owns a device file ("render" on current distributions, "video" on older ones)."""
  try:
    gid = os_.stat(path).st_gid
    if gid:
      import grp
      return grp.getgrgid(gid).gr_name
  except (OSError, KeyError):
    pass
  return "render"  # root-owned group (fixtures) or unknown gid: name the usual one


def matches(d: Device, item: str) -> bool:
  """Whether one --dev item names device `d`: its index, bus id (full or without domain), vendor,
  gfx target, or a case-insensitive part of its name."""
  item = item.strip()
  if item.isdigit(): return int(item) == d.index
  low = item.lower()
  if d.bus_id and (low == d.bus_id or d.bus_id.endswith(":" + low) and low.count(":") == 1): return True
  if low in (d.vendor, d.arch, "nv" if d.vendor == "nvidia" else None): return True
  return low in d.name.lower()


def select(snap: Snapshot, selection: str | None) -> Snapshot:
  """Keep the devices named by `selection` (comma-separated --dev items) and the processes using them."""
  if not selection: return snap
  items = [s for s in selection.split(",") if s.strip()]
  keep = [d for d in snap.devices if any(matches(d, i) for i in items)]
  snap.selection = selection
  if snap.devices and not keep:
    listing = ", ".join(f"{d.index} {d.name}" for d in snap.devices)
    snap.notes.insert(0, Note("no_match", f"no GPU matches {selection!r} (found: {listing})"))
  if snap.processes is not None:
    kept, vendors = {d.index for d in keep}, {d.vendor for d in keep}
    snap.processes = [p for p in snap.processes if uses_selected(p, kept, vendors)]
  snap.devices = keep
  return snap


def uses_selected(p: Process, kept: set[int], vendors: set[str]) -> bool:
  """Whether process `p` uses one of the kept GPUs. Driver-wide files (/dev/kfd, /dev/nvidiactl) do not say
  which GPU a process uses, so a process holding only those counts for every GPU of that vendor."""
  if kept & set(p.devices): return True
  if p.devices: return False
  return ("amd" in vendors and "/dev/kfd" in p.nodes) or ("nvidia" in vendors and any(n.startswith("/dev/nvidia") for n in p.nodes))


def exit_code(snap: Snapshot) -> int:
  """The exit code for a snapshot: permission problems first, then nothing found, then nothing selected."""
  if any(n.kind == "permission" for n in snap.notes): return errors.PERMISSION
  if not snap.found: return errors.NO_GPU
  if not snap.devices: return errors.NO_MATCH
  return errors.OK
