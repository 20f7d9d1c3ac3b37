"""MockKFDOS: the OS-call layer of a machine with an emulated AMD GPU (gfx1100, gfx1201, gfx942), for `MOCKKFD+AMD`.

It presents the sysfs tree the amdgpu and KFD drivers would (topology, the render node, the PCI device
with its IP discovery table and memory counters; for an MI300X in a partition mode a KFD node and a render node per
partition, those after the first on amdgpu_xcp platform devices), /dev/kfd and the render node backed by `MockKFD`, and
real mmaps of the buffer objects. Paths outside /sys and /dev go to the host, so everything else behaves
as on the real machine. The driver code runs unchanged on top of it.
"""
from __future__ import annotations
import errno
import os
import posixpath
from typing import Any, Callable

from hcq.drivers import libc
from hcq.drivers.mock.amdgpu.gpu import BoardSpec, boards_for
from hcq.drivers.mock.kfd import DOORBELL_SLICE, FIRST_PCI_BUS, MMAP_GPU_ID_SHIFT, MMAP_TYPE_DOORBELL, MMAP_TYPE_SHIFT, MockKFD, pci_buses
from hcq.drivers.os import HostOS

FAKE_FD_BASE = 1 << 20  # descriptors of mock device nodes: far above anything the process really has open
PCI_SLOT = f"0000:{FIRST_PCI_BUS:02x}:00.0"
PCI_PATH = f"/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:00.0/{PCI_SLOT}"


def _sdma_queues_per_engine(board: BoardSpec) -> int:
  """8 queues per SDMA engine, less the 2 amdgpu reserves on SDMA 6.x/7.x for paging and gfx (kfd_device.c
  kfd_device_info_set_sdma_info; kfd_topology.c prints the difference; Linux 6.12)."""
  return 8 - (2 if board.sdma_version[0] >= 6 else 0)


def _node_properties(board: BoardSpec, gpu_id: int, render_minor: int, pci_dev_id: int) -> str:
  """nodes/N/properties of a GPU, in kfd_topology.c's order. A GPU split into several KFD nodes (MI300's partitions)
  has its node id ORed into location_id and, outside an XGMI hive, its PCI id as hive_id (kfd_topology.c
  kfd_topology_add_device, kfd_device.c kgd2kfd_device_init)."""
  several = board.num_xcps > 1
  cus, arrays = board.compute_units, board.shader_engines * board.shader_arrays_per_engine
  props = [
    ("cpu_cores_count", 0), ("simd_count", cus * board.simd_per_cu), ("mem_banks_count", 1), ("caches_count", 0),
    ("io_links_count", 1), ("p2p_links_count", 0), ("cpu_core_id_base", 0), ("simd_id_base", 0x80001000),
    ("max_waves_per_simd", board.max_waves_per_simd), ("lds_size_in_kb", board.lds_size_kb), ("gds_size_in_kb", 0), ("num_gws", 0),
    ("wave_front_size", board.wave_front_size), ("array_count", arrays),
    ("simd_arrays_per_engine", board.shader_arrays_per_engine), ("cu_per_simd_array", board.cus_per_array),
    ("simd_per_cu", board.simd_per_cu), ("max_slots_scratch_cu", board.max_slots_scratch_cu), ("gfx_target_version", board.gfx_target_version),
    ("vendor_id", board.vendor_id), ("device_id", board.device_id), ("location_id", pci_dev_id | board.xcp_id if several else pci_dev_id),
    ("domain", 0), ("drm_render_minor", render_minor), ("hive_id", pci_dev_id if several else 0),
    ("num_sdma_engines", board.num_sdma_engines), ("num_sdma_xgmi_engines", board.num_sdma_xgmi_engines),
    ("num_sdma_queues_per_engine", _sdma_queues_per_engine(board)), ("num_cp_queues", board.kfd_cp_queues), ("max_engine_clk_fcompute", board.max_engine_clk_mhz), ("local_mem_size", 0),
    ("fw_version", 0), ("capability", 0), ("sdma_fw_version", 0), ("unique_id", 0), ("num_xcc", board.num_xcc),
    ("max_engine_clk_ccompute", 0),
  ]
  return "".join(f"{k} {v}\n" for k, v in props)


def mock_kfd_os(arch: str | None = None, partition: str | None = None) -> "MockKFDOS":
  """The emulated machine with the board of `arch` (None: gfx1100) in `partition` mode (None: the board's own, SPX on
  gfx942); HCQError listing the emulated boards or the board's partition modes otherwise, or saying why
  HCQ_MOCK_KERNEL's profile cannot drive that board."""
  from hcq.errors import HCQError
  boards = boards_for(arch, partition)
  try:
    return MockKFDOS(MockKFD(boards))
  except ValueError as e:
    raise HCQError(f"HCQ_MOCK_KERNEL: {e}") from None


_partitioned: dict[tuple[str | None, str], "MockKFDOS"] = {}  # this process's emulated partitioned GPU, per board and mode


def partition_os(arch: str | None, partition: str, index: int) -> "MockKFDOS":
  """The emulated machine for partition `index` of a board in `partition` mode: one per process, as a real GPU's
  partitions are KFD nodes of one machine that one process may open side by side (each Device binds its own node). A
  partition already bound there (a second Device of it, as another process would open) gets a machine of its own; the
  process's machine stays the one its other partitions open."""
  key = (arch, partition)
  machine = _partitioned.get(key)
  if machine is None:
    machine = _partitioned[key] = mock_kfd_os(arch, partition)
  elif index < len(nodes := list(machine.kfd.nodes.values())) and nodes[index].drm_fd is not None:
    return mock_kfd_os(arch, partition)
  return machine


class MockTreeOS(HostOS):
  """The file side of an emulated machine: `files` (path -> text, or a function giving it) and `links` (path -> relative
  target) stand for the paths under `owned`; everything else goes to the host. Subclasses add the device nodes."""
  emulated = True
  owned: tuple[str, ...] = ("/sys", "/dev")

  def __init__(self) -> None:
    self.files: dict[str, Callable[[], str] | str] = {}
    self.links: dict[str, str] = {}

  def _resolve(self, path: str) -> str:
    """A path with every symlink of the tree resolved (how the kernel walks sysfs links)."""
    parts = posixpath.normpath(path).split("/")[1:]
    for _ in range(40):
      for i in range(len(parts)):
        prefix = "/" + "/".join(parts[:i + 1])
        if prefix in self.links:
          target = posixpath.normpath(posixpath.join(posixpath.dirname(prefix), self.links[prefix]))
          parts = target.split("/")[1:] + parts[i + 1:]
          break
      else:
        return "/" + "/".join(parts)
    raise OSError(errno.ELOOP, "too many levels of symbolic links", path)

  def _mine(self, path: str) -> bool:
    return path in self.owned or path.startswith(tuple(p + "/" for p in self.owned))

  def read_text(self, path: str) -> str:
    if not self._mine(path): return super().read_text(path)
    real = self._resolve(path)
    if real not in self.files:
      if self._is_dir(real): raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
      raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    v = self.files[real]
    return v() if callable(v) else v

  def read_bytes(self, path: str) -> bytes:
    return self.read_text(path).encode() if self._mine(path) else super().read_bytes(path)

  def _is_dir(self, real: str) -> bool:
    prefix = real.rstrip("/") + "/"
    return real == "/" or any(p.startswith(prefix) for p in list(self.files) + list(self.links))

  def listdir(self, path: str) -> list[str]:
    if not self._mine(path): return super().listdir(path)
    real = self._resolve(path)
    if not self._is_dir(real): raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    prefix = real.rstrip("/") + "/"
    return sorted({p[len(prefix):].split("/")[0] for p in list(self.files) + list(self.links) if p.startswith(prefix)})

  def exists(self, path: str) -> bool:
    if not self._mine(path): return super().exists(path)
    try:
      real = self._resolve(path)
    except OSError:
      return False
    return real in self.files or self._is_dir(real)

  def readlink(self, path: str) -> str:
    if not self._mine(path): return super().readlink(path)
    norm = posixpath.normpath(path)
    if norm not in self.links: raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), path)
    return self.links[norm]

  def access(self, path: str, mode: int) -> bool:
    return self.exists(path) if self._mine(path) else super().access(path, mode)

  def stat(self, path: str) -> os.stat_result:
    if not self._mine(path): return super().stat(path)
    if not self.exists(path): raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    is_dir = self._is_dir(self._resolve(path))
    return os.stat_result(((0o40755 if is_dir else 0o20666 if path.startswith("/dev/") else 0o100444), 0, 0, 1, 0, 0, 0, 0, 0, 0))


class MockKFDOS(MockTreeOS):
  """The OS layer of the emulated machine; `kfd` is the mock kernel behind /dev/kfd."""

  def __init__(self, kfd: MockKFD | None = None):
    super().__init__()
    self.kfd = kfd or MockKFD()
    self.fds: dict[int, tuple[str, Any]] = {}   # fake fd -> ("kfd", None) or ("render", minor)
    self.next_fd = FAKE_FD_BASE
    self.doorbell_pages: dict[int, int] = {}    # CPU address of a mapped doorbell slice -> gpu_id
    self._build_tree()

  # ---- the sysfs tree ----
  def _build_tree(self) -> None:
    f, topo = self.files, "/sys/devices/virtual/kfd/kfd/topology"
    f[f"{topo}/generation_id"] = "1\n"
    f[f"{topo}/system_properties"] = "platform_oem 0\nplatform_id 0\nplatform_rev 0\n"
    f[f"{topo}/nodes/0/gpu_id"] = "0\n"
    f[f"{topo}/nodes/0/name"] = "\n"
    f[f"{topo}/nodes/0/properties"] = "cpu_cores_count 2\nsimd_count 0\nmem_banks_count 1\n"
    gpus: dict[int, list] = {}  # PCI bus -> the KFD nodes of its GPU: one, or one per partition
    for node, bus in zip(self.kfd.nodes.values(), pci_buses(tuple(n.board for n in self.kfd.nodes.values()))):
      gpus.setdefault(bus, []).append(node)
    i = xcp_devices = 0
    for bus, nodes in gpus.items():
      pci = PCI_PATH.replace(PCI_SLOT, f"0000:{bus:02x}:00.0")
      slot, board = pci.rsplit("/", 1)[1], nodes[0].board
      self._pci_device(pci, board, nodes)
      for node in nodes:
        i += 1
        n = f"{topo}/nodes/{i}"
        f[f"{n}/gpu_id"] = f"{node.gpu_id}\n"
        f[f"{n}/name"] = "ip discovery\n"
        f[f"{n}/properties"] = _node_properties(node.board, node.gpu_id, node.render_minor, bus << 8)
        f[f"{n}/mem_banks/0/properties"] = f"heap_type 1\nsize_in_bytes {node.board.vram_bytes}\nflags 0\nwidth {node.board.vram_bus_width}\nmem_clk_max {node.board.vram_clk_mhz}\n"
        # partition 0 renders through the PCI device; the others through amdgpu_xcp.N platform devices that carry none of
        # amdgpu's attributes (amdgpu_xcp.c amdgpu_xcp_dev_alloc, amdxcp/amdgpu_xcp_drv.c amdgpu_xcp_drm_dev_alloc, which
        # registers them as platform_device_register_simple("amdgpu_xcp", N, ...): drivers/base/platform.c names a device
        # with an id "%s.%d", and its modalias is "platform:" + the name without the id)
        if node.board.xcp_id == 0:
          dev = pci
        else:
          dev = f"/sys/devices/platform/amdgpu_xcp.{xcp_devices}"
          xcp_devices += 1
          f[f"{dev}/modalias"] = "platform:amdgpu_xcp\n"
        f[f"{dev}/hcq_emulated_state"] = lambda node=node: self._state(node)
        card, name = i - 1, dev.rsplit("/", 1)[1]
        self.links[f"/sys/class/drm/renderD{node.render_minor}"] = f"../../devices/{dev[len('/sys/devices/'):]}/drm/renderD{node.render_minor}"
        self.links[f"/sys/class/drm/card{card}"] = f"../../devices/{dev[len('/sys/devices/'):]}/drm/card{card}"
        self.links[f"{dev}/drm/renderD{node.render_minor}/device"] = "../../../" + name
        self.links[f"{dev}/drm/card{card}/device"] = "../../../" + name
        f[f"/dev/dri/renderD{node.render_minor}"] = ""
        f[f"/dev/dri/card{card}"] = ""
      self.links[f"/sys/bus/pci/devices/{slot}"] = f"../../../devices/{pci[len('/sys/devices/'):]}"
    f["/dev/kfd"] = ""
    f["/sys/module/amdgpu/initstate"] = "live\n"

  def _pci_device(self, pci: str, board: BoardSpec, nodes: list) -> None:
    """amdgpu's attributes of one GPU's PCI device: whole-GPU figures, whatever its partitions."""
    f = self.files
    f[f"{pci}/vendor"], f[f"{pci}/device"] = f"{board.vendor_id:#06x}\n", f"{board.device_id:#06x}\n"
    f[f"{pci}/product_name"] = f"{board.name} (emulated by hcq)\n"
    # the whole GPU's memory from a partition's share (exact for the emulated 192 GiB, which every mode divides evenly)
    f[f"{pci}/mem_info_vram_total"] = f"{board.vram_bytes * board.num_xcps}\n"
    f[f"{pci}/mem_info_vram_used"] = lambda: f"{sum(self._vram_used(n) for n in nodes)}\n"
    # amdgpu reads one whole-GPU load from the SMU (amdgpu_pm.c amdgpu_get_gpu_busy_percent, AMDGPU_PP_SENSOR_GPU_LOAD);
    # the mock has no SMU and stands in the busiest partition's figure for it (its choice, not a source's)
    f[f"{pci}/gpu_busy_percent"] = lambda: f"{max(self._busy(n) for n in nodes)}\n"
    f[f"{pci}/unique_id"] = "\n"
    for block, version in (("GC", board.gc_version), ("SDMA0", board.sdma_version)):
      for name, v in zip(("major", "minor", "revision"), version): f[f"{pci}/ip_discovery/die/0/{block}/0/{name}"] = f"{v}\n"
    f[f"{pci}/ip_discovery/die/0/GC/0/base_addr"] = "".join(f"0x{b:08X}\n" for b in board.gc_bases)
    if board.compute_partition:  # amdgpu_gfx.c amdgpu_gfx_get_current/available_compute_partition, amdgpu_gmc.c
      f[f"{pci}/current_compute_partition"] = f"{board.compute_partition}\n"
      f[f"{pci}/available_compute_partition"] = f"{board.available_partitions}\n"
      f[f"{pci}/current_memory_partition"] = f"{board.memory_partition}\n"
    self.links[f"{pci}/driver"] = "../../../../../../bus/pci/drivers/amdgpu"

  def _vram_used(self, node) -> int:
    from hcq.autogen import kfd as K
    return sum(b.size for b in node.bos.values() if b.flags & K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM)

  def _busy(self, node) -> int:
    return 100 if any(e.ring.rptr != e.ring.wptr for e in node.gpu.engines) else 0

  def _state(self, node) -> str:
    """Live state of the emulated GPU: queues, memory, kernels run (what `hcq.smi` shows for an emulated board)."""
    queues = [q for q in self.kfd.queues.values() if q.gpu_id == node.gpu_id]
    return (f"queues {len(queues)}\nbuffers {len(node.bos)}\nbytes_allocated {sum(b.size for b in node.bos.values())}\n"
            f"dispatches {node.gpu.dispatches}\npackets {sum(e.packets for e in node.gpu.engines)}\n")

  # ---- device nodes ----
  def open(self, path: str, flags: int, mode: int = 0o666) -> int:
    if not self._mine(path): return super().open(path, flags, mode)
    norm = posixpath.normpath(path)
    if norm == "/dev/kfd": kind = ("kfd", None)
    elif norm.startswith("/dev/dri/renderD") and norm in self.files: kind = ("render", int(norm[len("/dev/dri/renderD"):]))
    else: raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    fd = self.next_fd
    self.next_fd += 1
    self.fds[fd] = kind
    if kind[0] == "render": self.kfd.render_fds[fd] = kind[1]
    return fd

  def close(self, fd: int) -> None:
    if fd not in self.fds: return super().close(fd)
    self.fds.pop(fd)
    self.kfd.render_fds.pop(fd, None)

  def ioctl(self, fd: int, request: int, arg: Any) -> int:
    if fd not in self.fds: return super().ioctl(fd, request, arg)
    if self.fds[fd][0] != "kfd": raise OSError(errno.ENOTTY, "render-node ioctls are not emulated: hcq talks to /dev/kfd")
    return self.kfd.ioctl(request, arg)

  def mmap(self, address: int, length: int, prot: int, flags: int, fd: int, offset: int) -> int:
    if fd not in self.fds: return libc.mmap(address, length, prot, flags, fd, offset)
    kind, _ = self.fds[fd]
    if kind == "kfd":
      memfd, file_off = self.kfd.mmap_kfd(address, length, offset)
      if memfd < 0:  # the doorbell slice: ordinary memory whose writes ring_doorbell reports
        addr = libc.mmap(address, length, prot, (flags & ~libc.MAP_SHARED) | libc.MAP_PRIVATE | libc.MAP_ANONYMOUS, -1, 0)
        if offset >> MMAP_TYPE_SHIFT == MMAP_TYPE_DOORBELL: self.doorbell_pages[addr] = (offset >> MMAP_GPU_ID_SHIFT) & 0xFFFF
        return addr
      return libc.mmap(address, length, prot, flags, memfd, file_off)
    bo = self.kfd.mmap_render(fd, length, offset)
    return libc.mmap(address, length, prot, flags, bo.memfd, 0)

  def munmap(self, address: int, length: int) -> None:
    self.doorbell_pages.pop(address, None)
    libc.munmap(address, length)

  def ring_doorbell(self, address: int, value: int) -> None:
    super().ring_doorbell(address, value)
    for page, gpu_id in self.doorbell_pages.items():
      if page <= address < page + DOORBELL_SLICE: self.kfd.doorbell(gpu_id, (address - page) // 8)

  def fault_details(self) -> list[str]:
    """What the emulated GPU knows about its queue errors and faults (a real kernel logs less, to dmesg)."""
    return list(self.kfd.queue_errors)

  def fault_pc(self) -> int | None:
    """The faulting wave's program counter (the emulator knows it; real hardware tells user space only through a trap handler)."""
    return self.kfd.last_fault_pc
