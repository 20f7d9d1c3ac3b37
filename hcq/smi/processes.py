"""Processes holding GPU device files: a scan of /proc/*/fd, names from /proc/PID/comm, and memory from
/proc/PID/fdinfo where the driver publishes it (amdgpu: drm-memory-vram/gtt, per DRM client)."""
from __future__ import annotations

from hcq.drivers.os import HostOS
from hcq.smi.model import Device, Process

KIB = 1024
UNITS = {"B": 1, "KiB": KIB, "MiB": KIB ** 2, "GiB": KIB ** 3}


def is_gpu_node(path: str) -> bool:
  """Whether `path` (an fd link target) is a GPU device file: /dev/kfd, DRM nodes, or NVIDIA's nodes."""
  if path == "/dev/kfd": return True
  if path.startswith("/dev/dri/"): return path[9:].startswith(("renderD", "card"))
  return path.startswith("/dev/nvidia")


def fdinfo_memory(text: str) -> tuple[str | None, str | None, dict[str, int]]:
  """(drm-pdev, drm-client-id, {region: bytes}) from one DRM fd's fdinfo. Regions come from
  "drm-memory-<region>" (kernel 5.19+) or, where that is absent, "drm-resident-<region>" (6.x)."""
  pdev = client = None
  legacy: dict[str, int] = {}
  resident: dict[str, int] = {}
  for line in text.splitlines():
    key, _, value = line.partition(":")
    value = value.strip()
    if key == "drm-pdev": pdev = value
    elif key == "drm-client-id": client = value
    elif key.startswith(("drm-memory-", "drm-resident-")):
      number, _, unit = value.partition(" ")
      try:
        size = int(number) * UNITS.get(unit.strip() or "B", 1)
      except ValueError:
        continue
      (legacy if key.startswith("drm-memory-") else resident)[key.rsplit("-", 1)[1]] = size
  return pdev, client, legacy or resident


def scan(os_: HostOS, devices: list[Device]) -> tuple[list[Process], int]:
  """Processes with GPU files open, and how many processes could not be inspected (permission)."""
  owner = {node: d.index for d in devices for node in d.nodes}  # device file -> the GPU it belongs to
  by_bus = {d.bus_id: d.index for d in devices if d.bus_id}
  try:
    pids = sorted(int(p) for p in os_.listdir("/proc") if p.isdigit())
  except OSError:
    return [], 0
  found, hidden = [], 0
  for pid in pids:
    try:
      fds = os_.listdir(f"/proc/{pid}/fd")
    except PermissionError:
      hidden += 1
      continue
    except OSError:
      continue  # exited while we looked
    nodes: set[str] = set()
    gpus: set[int] = set()
    clients: dict[tuple[str | None, str | None], dict[str, int]] = {}
    for fd in fds:
      try:
        target = os_.readlink(f"/proc/{pid}/fd/{fd}")
      except OSError:
        continue
      if not is_gpu_node(target): continue
      nodes.add(target)
      if target in owner: gpus.add(owner[target])
      if target.startswith("/dev/dri/"):
        try:
          pdev, client, memory = fdinfo_memory(os_.read_text(f"/proc/{pid}/fdinfo/{fd}"))
        except OSError:
          continue
        if pdev in by_bus: gpus.add(by_bus[pdev])
        if memory: clients[(pdev, client or fd)] = memory  # dup'ed fds share a client: count it once
    if not nodes: continue
    try:
      name = os_.read_text(f"/proc/{pid}/comm").strip()
    except OSError:
      name = "?"
    vram = sum(m.get("vram", 0) for m in clients.values()) if clients else None
    gtt = sum(m.get("gtt", 0) for m in clients.values()) if clients else None
    found.append(Process(pid, name, sorted(nodes), sorted(gpus), vram, gtt))
  return found, hidden
