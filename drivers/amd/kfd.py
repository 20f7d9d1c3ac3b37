"""The KFD kernel interface for one AMD GPU: topology, /dev/kfd ioctls, GPU memory, queues and events.

Everything goes through an OS object (hcq.drivers.os.HostOS, or the mock kernel's), so the same code runs
on a real machine and against MOCKKFD.
"""
from __future__ import annotations
import ctypes
import errno
import os as _os
from dataclasses import dataclass

from hcq.autogen import kfd as K
from hcq.drivers import libc
from hcq.drivers.amd.sysfs_paths import amdgpu_device_dir
from hcq.errors import HCQError

TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes"
PAGE = 4096
DOORBELL_SLICE = 8192


def gfx_target(version: int) -> str:
  """KFD's gfx_target_version (major*10000 + minor*100 + stepping) as the LLVM target name: 110000 -> gfx1100."""
  major, minor, step = version // 10000, version // 100 % 100, version % 100
  return f"gfx{major}{minor:x}{step:x}"


def read_properties(text: str) -> dict[str, int]:
  """A KFD topology `properties` file: one `name value` pair a line."""
  out = {}
  for line in text.splitlines():
    name, _, value = line.partition(" ")
    if value.strip().lstrip("-").isdigit(): out[name] = int(value)
  return out


@dataclass
class GPUNodeInfo:
  index: int
  gpu_id: int
  properties: dict[str, int]

  @property
  def arch(self) -> str:
    return gfx_target(self.properties["gfx_target_version"])

  def amdgpu_dir(self, osl) -> str:
    """The amdgpu PCI device's sysfs folder (hcq.drivers.amd.sysfs_paths.amdgpu_device_dir)."""
    return amdgpu_device_dir(osl, self.properties)


def gpu_nodes(osl) -> list[GPUNodeInfo]:
  """The GPUs in the KFD topology (CPU nodes have gpu_id 0), in node order."""
  try:
    names = sorted(osl.listdir(TOPOLOGY), key=int)
  except FileNotFoundError:
    return []
  out = []
  for n in names:
    gpu_id = int(osl.read_text(f"{TOPOLOGY}/{n}/gpu_id").strip() or 0)
    if gpu_id: out.append(GPUNodeInfo(int(n), gpu_id, read_properties(osl.read_text(f"{TOPOLOGY}/{n}/properties"))))
  return out


class KFDInterface:
  """/dev/kfd and the render node of one GPU node, opened and bound to this process's GPU VM."""

  def __init__(self, osl, node: GPUNodeInfo):
    self.os, self.node, self.gpu_id = osl, node, node.gpu_id
    try:
      self.kfd = osl.open("/dev/kfd", _os.O_RDWR | _os.O_CLOEXEC)
    except PermissionError:
      raise HCQError("permission denied on /dev/kfd: add your user to the render group (sudo usermod -aG render $USER)") from None
    except FileNotFoundError:
      raise HCQError("/dev/kfd is absent: the amdgpu kernel driver is not loaded (or this is not an AMD GPU machine)") from None
    render = f"/dev/dri/renderD{node.properties['drm_render_minor']}"
    try:
      self.drm = osl.open(render, _os.O_RDWR | _os.O_CLOEXEC)
    except PermissionError:
      raise HCQError(f"permission denied on {render}: add your user to the render group") from None
    ver = self.ioctl("GET_VERSION")
    if ver.major_version != 1: raise HCQError(f"KFD interface version {ver.major_version}.{ver.minor_version}; hcq speaks 1.x")
    self.version = (ver.major_version, ver.minor_version)
    self.ioctl("ACQUIRE_VM", drm_fd=self.drm, gpu_id=self.gpu_id)
    self.doorbell_page: int | None = None

  def ioctl(self, name: str, **fields):
    """One AMDKFD_IOC_<name> call with its args struct; HCQError naming the call, the errno and the arguments on failure."""
    struct_name = {"GET_VERSION": "get_version", "ACQUIRE_VM": "acquire_vm", "ALLOC_MEMORY_OF_GPU": "alloc_memory_of_gpu",
                   "FREE_MEMORY_OF_GPU": "free_memory_of_gpu", "MAP_MEMORY_TO_GPU": "map_memory_to_gpu",
                   "UNMAP_MEMORY_FROM_GPU": "unmap_memory_from_gpu", "CREATE_QUEUE": "create_queue", "DESTROY_QUEUE": "destroy_queue",
                   "CREATE_EVENT": "create_event", "DESTROY_EVENT": "destroy_event", "SET_EVENT": "set_event",
                   "WAIT_EVENTS": "wait_events", "SET_SCRATCH_BACKING_VA": "set_scratch_backing_va"}[name]
    args = getattr(K, f"struct_kfd_ioctl_{struct_name}_args")(**fields)
    try:
      self.os.ioctl(self.kfd, getattr(K, f"AMDKFD_IOC_{name}"), args)
    except OSError as e:
      shown = ", ".join(f"{k}={v:#x}" if isinstance(v, int) else f"{k}={v}" for k, v in fields.items())
      raise HCQError(f"AMDKFD_IOC_{name}({shown}) failed: {errno.errorcode.get(e.errno, e.errno)} {e.strerror or ''}".rstrip()) from None
    return args

  # ---- memory ----
  def alloc(self, size: int, flags: int, va: int, userptr: int = 0) -> tuple[int, int]:
    """ALLOC_MEMORY_OF_GPU at `va`, then map it on this GPU; returns (handle, mmap offset)."""
    a = self.ioctl("ALLOC_MEMORY_OF_GPU", va_addr=va, size=size, gpu_id=self.gpu_id, flags=flags, mmap_offset=userptr)
    ids = (ctypes.c_uint32 * 1)(self.gpu_id)
    m = self.ioctl("MAP_MEMORY_TO_GPU", handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
    if m.n_success != 1: raise HCQError(f"MAP_MEMORY_TO_GPU mapped {m.n_success} of 1 devices")
    return a.handle, a.mmap_offset

  def free(self, handle: int) -> None:
    ids = (ctypes.c_uint32 * 1)(self.gpu_id)
    self.ioctl("UNMAP_MEMORY_FROM_GPU", handle=handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
    self.ioctl("FREE_MEMORY_OF_GPU", handle=handle)

  def map_cpu(self, va: int, size: int, mmap_offset: int) -> None:
    """Make a GTT/VRAM buffer CPU-visible at the same address it has on the GPU (mmap of the render node)."""
    self.os.mmap(va, size, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED | libc.MAP_FIXED, self.drm, mmap_offset)

  # ---- queues ----
  def create_queue(self, queue_type: int, ring: int, ring_size: int, rptr: int, wptr: int, eop: int = 0, eop_size: int = 0,
                   cwsr: int = 0, cwsr_size: int = 0, ctl_stack_size: int = 0, xcc: int = 0) -> tuple[int, int]:
    """CREATE_QUEUE; returns (queue id, CPU address of its doorbell). `xcc`: a PM4 queue's target XCC in its partition
    (queue_percentage bits 8-15, kfd_chardev.c set_queue_properties_from_user, Linux 6.12)."""
    q = self.ioctl("CREATE_QUEUE", ring_base_address=ring, ring_size=ring_size, gpu_id=self.gpu_id, queue_type=queue_type,
                   queue_percentage=100 | xcc << 8, queue_priority=7, write_pointer_address=wptr, read_pointer_address=rptr,
                   eop_buffer_address=eop, eop_buffer_size=eop_size, ctx_save_restore_address=cwsr,
                   ctx_save_restore_size=cwsr_size, ctl_stack_size=ctl_stack_size)
    if self.doorbell_page is None:
      self.doorbell_page = self.os.mmap(0, DOORBELL_SLICE, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED, self.kfd,
                                        q.doorbell_offset & ~(DOORBELL_SLICE - 1))
    return q.queue_id, self.doorbell_page + (q.doorbell_offset & (DOORBELL_SLICE - 1))

  def destroy_queue(self, queue_id: int) -> None:
    self.ioctl("DESTROY_QUEUE", queue_id=queue_id)

  # ---- events ----
  def create_event(self, event_type: int, auto_reset: bool = True, event_page: int = 0):
    return self.ioctl("CREATE_EVENT", event_type=event_type, auto_reset=int(auto_reset), node_id=self.node.index, event_page_offset=event_page)

  def wait_events(self, event_ids: list[int], timeout_ms: int, wait_all: bool = False):
    """WAIT_EVENTS; returns (wait_result, the event data array) so memory-exception data can be read."""
    data = (K.struct_kfd_event_data * len(event_ids))()
    for d, e in zip(data, event_ids): d.event_id = e
    w = self.ioctl("WAIT_EVENTS", events_ptr=ctypes.addressof(data), num_events=len(event_ids), wait_for_all=int(wait_all), timeout=timeout_ms)
    return w.wait_result, data
