"""The mock amdgpu/KFD kernel side: /dev/kfd ioctls and mmaps, checked as amdkfd checks them in a chosen kernel version.

Each handler mirrors the kernel's checks in the kernel's order with its errnos (kfd_chardev.c and the
functions it calls; see the comments). Where kernels differ the mock takes a version profile (KERNELS):
"6.1" is Debian 12's kernel; "6.12" adds kfd_queue.c's kfd_queue_acquire_buffers to CREATE_QUEUE (the queue's
buffers must be GPU mappings of exactly the sizes the queue uses, the CWSR size exactly the node's); "mainline" is
torvalds/linux after "drm/amdkfd: relax checks for over allocation of save area" (Nov 2025), which takes a
CWSR size at least the node's. HCQ_MOCK_KERNEL picks the profile of a MockKFD made without one, raised to the first
profile whose amdkfd drives its boards (6.12 for gfx1201: 6.1 has no GC 12).
Memory is host memory: every buffer object is a memfd, mapped once for the GPU model and again, at the
address user space asks for, when it mmaps the render node.
"""
from __future__ import annotations
import ctypes
import errno
import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from hcq.autogen import kfd as K
from hcq.drivers import libc
from hcq.drivers.mock.amdgpu.gpu import BoardSpec, MockAMDGPU
from hcq.drivers.mock.amdgpu.ring import Ring

PAGE = 4096
TASK_SIZE = 0x7FFFFFFFF000          # access_ok(): user pointers lie below this
GPUVM_BASE, GPUVM_LIMIT = 0x4000, 0x7FFFFFFFFFFF  # kfd_flat_memory.c: SVM_USER_BASE .. gpuvm_size - 1
KERNEL_RESERVED = (0x1000, 0x4000)  # SVM_IB_BASE and SVM_CWSR_BASE pages, mapped by ACQUIRE_VM
DOORBELL_SLICE = 8192               # kfd_doorbell_process_slice on gfx11
EVENT_PAGE_MIN = 4096 * 8           # KFD_SIGNAL_EVENT_LIMIT slots of 8 bytes
MMAP_TYPE_SHIFT, MMAP_GPU_ID_SHIFT = 62, 46
MMAP_TYPE_DOORBELL, MMAP_TYPE_EVENTS, MMAP_TYPE_MMIO = 3, 2, 0
ENOTSUPP = 524                      # kernel-internal errno that CREATE_QUEUE returns for a bad queue type
FIRST_NONSIGNAL_EVENT_ID = 0x40000000
UNSIGNALED = 0xFFFFFFFFFFFFFFFF
SDMA_DOORBELL_BASE = 0x100          # first doorbell id of the SDMA engines in a process slice
FIRST_PCI_BUS = 3                   # the emulated machine's first GPU sits at 0000:03:00.0
KERNELS = ("6.1", "6.12", "mainline")
# amdgpu_amdkfd_gpuvm.c get_pte_flags (6.1, gfx11's default case): these map MTYPE_UC, which GL2 does not cache; all else NC
UNCACHED_MTYPE = K.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | K.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED


@dataclass(frozen=True)
class CWSRSizes:
  cwsr: int       # node_props.cwsr_size: control stack + workgroup context data
  ctl_stack: int  # node_props.ctl_stack_size
  debug: int      # node_props.debug_memory_size: the debugger's bytes after the save area
  eop: int        # node_props.eop_buffer_size


def cwsr_sizes(board: BoardSpec) -> CWSRSizes:
  """kfd_queue_ctx_save_restore_size (kfd_queue.c, Linux 6.12+), per XCC: cu_num = simd_count / simd_per_cu / num_xcc;
  per CU the VGPRs (0x80000 on GC 9.4.x, 0x60000 on GC 11.0.0/11.0.1/12.0.x, else 0x40000), SGPRs 0x4000, LDS 0x10000
  and HW registers 0x1000; waves: 32 per CU from gfx10.1, before it min(cu_num x 40, engines x 512) with an 8-byte
  control stack entry (12 from gfx10.1); 8 bytes more and a 40-byte header; 32 debugger bytes per wave. The engines
  are the node's own array_count (one XCC's) over simd_arrays_per_engine."""
  gfxv, cus = board.gfx_target_version, board.compute_units // board.num_xcc
  if gfxv < 90000: raise ValueError(f"the mock sizes CWSR for gfx9 and later, not gfx_target_version {gfxv}")
  engines = board.shader_engines // board.num_xcc
  waves = cus * 32 if gfxv >= 100100 else min(cus * 40, engines * 512)
  vgpr = 0x80000 if gfxv // 100 == 904 else 0x60000 if gfxv in (110000, 110001, 120000, 120001) else 0x40000
  wg_data = (cus * (vgpr + 0x4000 + 0x10000 + 0x1000) + PAGE - 1) // PAGE * PAGE
  ctl_stack = (40 + waves * (12 if gfxv >= 100100 else 8) + 8 + PAGE - 1) // PAGE * PAGE
  return CWSRSizes(ctl_stack + wg_data, ctl_stack, (waves * 32 + 63) // 64 * 64, 4096)


def crc16(data: bytes, crc: int = 0) -> int:
  """lib/crc16.c crc16: polynomial x^16 + x^15 + x^2 + 1 (0x8005), bits least significant first (table-free)."""
  for byte in data:
    crc ^= byte
    for _ in range(8): crc = crc >> 1 ^ 0xA001 if crc & 1 else crc >> 1
  return crc


def generate_gpu_id(board: BoardSpec, bus: int, taken: set[int]) -> int:
  """kfd_topology.c kfd_generate_gpu_id (Linux 6.12): the CRC-16 of the node's devfn, PCI subsystem ids, domain, device
  id, bus, local memory size (low, high) and first XCC | XCC count << 16 (so each partition of a GPU differs), as eight
  little-endian u32s, cut to KFD_GPU_ID_HASH_WIDTH (16) bits; 0 becomes 1 and a taken id the next free one. The emulated
  boards are function 0 of bus `bus` in domain 0 with subsystem ids 0."""
  size = board.vram_bytes
  words = (0, 0, 0, board.device_id, bus, size & 0xFFFFFFFF, size >> 32, board.xcp_id * board.num_xcc | board.num_xcc << 16)
  gpu_id = crc16(b"".join(w.to_bytes(4, "little") for w in words)) & 0xFFFF
  while not gpu_id or gpu_id in taken: gpu_id = (gpu_id + 1) & 0xFFFF
  return gpu_id


def pci_buses(boards: tuple[BoardSpec, ...]) -> list[int]:
  """The PCI bus of each KFD node's GPU: the first GPU at FIRST_PCI_BUS, the next one bus up; a GPU's partitions (nodes
  after its xcp_id 0) share its bus."""
  buses: list[int] = []
  for board in boards: buses.append(buses[-1] + (board.xcp_id == 0) if buses else FIRST_PCI_BUS)
  return buses


def kerr(code: int, why: str) -> OSError:
  """What an ioctl returns: an OSError with the errno, and why (the kernel's dmesg line, where it prints one)."""
  return OSError(code, f"{os.strerror(code)} [mock amdkfd: {why}]")


@dataclass
class BufferObject:
  handle: int
  gpu_id: int
  size: int            # page-aligned
  flags: int
  va: int
  memfd: int | None    # None for USERPTR (the user's own pages)
  host: np.ndarray     # the GPU model's view of the memory
  mmap_offset: int
  mapped: bool = False


@dataclass
class MockQueue:
  queue_id: int
  gpu_id: int
  kind: str  # "compute" or "sdma"
  doorbell_id: int
  engine: object


@dataclass
class MockEvent:
  event_id: int
  event_type: int
  auto_reset: bool
  signaled: bool = False
  memory_exception: bytes | None = None


@dataclass
class GPUNode:
  """One GPU in the topology: its id, board, GPU model and per-process state."""
  gpu_id: int
  board: BoardSpec
  gpu: MockAMDGPU
  render_minor: int
  drm_fd: int | None = None
  bos: dict[int, BufferObject] = field(default_factory=dict)
  next_idr: int = 0
  doorbells: set[int] = field(default_factory=set)
  doorbell_page: int | None = None   # the CPU address user space mapped the doorbell slice at
  scratch_backing_va: int = 0


class MockKFD:
  """The kernel side of /dev/kfd for one process, with one gfx1100 GPU node behind it."""

  def __init__(self, boards: tuple[BoardSpec, ...] = (BoardSpec(),), kernel: str | None = None):
    newest = max((b.first_kernel for b in boards), key=KERNELS.index)  # the boards' amdkfd needs at least this profile
    kernel = kernel or os.environ.get("HCQ_MOCK_KERNEL") or newest
    if kernel not in KERNELS: raise ValueError(f"no mock kernel profile {kernel!r}; profiles: {', '.join(KERNELS)}")
    if KERNELS.index(kernel) < KERNELS.index(newest):
      raise ValueError(f"Linux {kernel}'s amdkfd has no driver for {', '.join(b.gfx_target for b in boards if b.first_kernel == newest)} "
                       f"(kfd_device.c): the earliest mock kernel profile for it is {newest}")
    self.kernel = kernel
    self.lock = threading.RLock()
    self.nodes: dict[int, GPUNode] = {}
    for i, (board, bus) in enumerate(zip(boards, pci_buses(boards))):
      gpu_id = generate_gpu_id(board, bus, set(self.nodes))
      node = GPUNode(gpu_id, board, None, 128 + i)  # type: ignore[arg-type]
      node.gpu = MockAMDGPU(board, on_interrupt=lambda ctx, n=node: self._interrupt(n, ctx),
                            on_queue_error=lambda eng, err, cause, n=node: self._queue_error(n, eng, err, cause))
      self.nodes[gpu_id] = node
    self.queues: dict[int, MockQueue] = {}
    self.events: dict[int, MockEvent] = {}
    self.event_cond = threading.Condition(self.lock)
    self.signal_page: BufferObject | None = None
    self.signal_page_host: np.ndarray | None = None
    self.signal_slots = 256  # until user space supplies an event page
    self.next_nonsignal = FIRST_NONSIGNAL_EVENT_ID
    self.queue_errors: list[str] = []  # what the kernel would print to dmesg
    self.last_fault_pc: int | None = None  # the shader's program counter at the last fault, where the emulator knows it
    self.render_fds: dict[int, int] = {}  # open render-node fds -> their minor, kept by the OS object
    self.after_unlock = None  # what a handler leaves to run once the process lock is released (DESTROY_QUEUE's preemption)
    self.preempt_timeout = 10.0  # seconds MES gets to unmap a queue: adev->usec_timeout (100 ms) x100 in amdgpu_emu_mode
    self.handlers = {
      0x01: self.get_version, 0x02: self.create_queue, 0x03: self.destroy_queue, 0x08: self.create_event,
      0x09: self.destroy_event, 0x0A: self.set_event, 0x0B: self.reset_event, 0x0C: self.wait_events,
      0x11: self.set_scratch_backing_va, 0x14: self.get_process_apertures_new, 0x15: self.acquire_vm,
      0x16: self.alloc_memory_of_gpu, 0x17: self.free_memory_of_gpu, 0x18: self.map_memory_to_gpu, 0x19: self.unmap_memory_from_gpu,
    }

  # ---- the dispatcher: kfd_ioctl() ----
  def ioctl(self, request: int, arg) -> int:
    nr = request & 0xff
    if not 0x01 <= nr < 0x24: raise kerr(errno.ENOTTY, f"ioctl nr {nr:#x} outside AMDKFD_COMMAND_START..END")
    handler = self.handlers.get(nr)
    if handler is None: raise kerr(errno.ENOTTY, f"ioctl nr {nr:#x} exists in amdkfd but is not emulated")
    with self.lock:
      handler(arg)
      after, self.after_unlock = self.after_unlock, None
    if after is not None: after()  # a wait the kernel does without the process lock our engine callbacks take
    return 0

  def _pdd(self, gpu_id: int) -> GPUNode:
    node = self.nodes.get(gpu_id) if gpu_id else None
    if node is None: raise kerr(errno.EINVAL, f"no device with gpu_id {gpu_id:#x}")
    return node

  @staticmethod
  def _bind(node: GPUNode, err: int = errno.ENODEV) -> None:
    """kfd_bind_process_to_device: needs ACQUIRE_VM first (ENODEV; callers that map errors make it ESRCH)."""
    if node.drm_fd is None: raise kerr(err, f"gpu {node.gpu_id:#x}: process not bound, ACQUIRE_VM first")

  # ---- ioctls ----
  def get_version(self, a) -> None:
    a.major_version, a.minor_version = K.KFD_IOCTL_MAJOR_VERSION, K.KFD_IOCTL_MINOR_VERSION

  def acquire_vm(self, a) -> None:
    if a.drm_fd not in self.render_fds: raise kerr(errno.EINVAL, f"drm_fd {a.drm_fd} is not an open render node")
    node = self._pdd(a.gpu_id)
    if node.drm_fd is not None:
      if node.drm_fd == a.drm_fd: return
      raise kerr(errno.EBUSY, "VM already acquired with another file")
    if self.render_fds[a.drm_fd] != node.render_minor: raise kerr(errno.EINVAL, "render node of another GPU")
    node.drm_fd = a.drm_fd

  def get_process_apertures_new(self, a) -> None:
    if a.num_of_nodes == 0:
      a.num_of_nodes = len(self.nodes)
      return
    if a.num_of_nodes > len(self.nodes) + 1: raise kerr(errno.EINVAL, "num_of_nodes larger than the topology")
    n = min(a.num_of_nodes, len(self.nodes))
    if not libc.is_mapped(a.kfd_process_device_apertures_ptr, n * ctypes.sizeof(K.struct_kfd_process_device_apertures)):
      raise kerr(errno.EFAULT, "apertures pointer")
    out = (K.struct_kfd_process_device_apertures * n).from_address(a.kfd_process_device_apertures_ptr)
    for i, node in enumerate(list(self.nodes.values())[:n]):
      out[i].gpu_id = node.gpu_id
      out[i].lds_base, out[i].lds_limit = 1 << 48, (1 << 48) | 0xFFFFFFFF
      out[i].scratch_base, out[i].scratch_limit = 2 << 48, (2 << 48) | 0xFFFFFFFF
      out[i].gpuvm_base, out[i].gpuvm_limit = GPUVM_BASE, GPUVM_LIMIT
    a.num_of_nodes = n

  def set_scratch_backing_va(self, a) -> None:
    node = self._pdd(a.gpu_id)
    self._bind(node)
    node.scratch_backing_va = a.va_addr

  def alloc_memory_of_gpu(self, a) -> None:
    if a.size == 0: raise kerr(errno.EINVAL, "size 0")
    node = self._pdd(a.gpu_id)
    flags = a.flags
    if flags & K.KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC and flags & K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM: pass  # the board is large-BAR
    self._bind(node)
    if flags & K.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL and a.size != DOORBELL_SLICE: raise kerr(errno.EINVAL, "doorbell BO size")
    if flags & K.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP and a.size != PAGE: raise kerr(errno.EINVAL, "MMIO remap BO size")
    if not flags & (K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | K.KFD_IOC_ALLOC_MEM_FLAGS_GTT | K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR |
                    K.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | K.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP):
      raise kerr(errno.EINVAL, "no memory domain in flags")
    if flags & K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR and not flags & (K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | K.KFD_IOC_ALLOC_MEM_FLAGS_GTT) \
       and a.mmap_offset == 0:
      raise kerr(errno.EINVAL, "USERPTR without a user address")
    size = (a.size + PAGE - 1) & ~(PAGE - 1)
    if flags & K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM:
      used = sum(b.size for b in node.bos.values() if b.flags & K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
      if used + size > node.board.vram_bytes: raise kerr(errno.ENOMEM, f"VRAM exhausted: {used} + {size} > {node.board.vram_bytes}")
    handle = node.gpu_id << 32 | node.next_idr
    if flags & K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR and not flags & (K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | K.KFD_IOC_ALLOC_MEM_FLAGS_GTT):
      if not libc.is_mapped(a.mmap_offset, size): raise kerr(errno.EFAULT, f"USERPTR {a.mmap_offset:#x}+{size:#x} is not mapped")
      memfd, host = None, np.frombuffer((ctypes.c_uint8 * size).from_address(a.mmap_offset), np.uint8)
    else:
      memfd = os.memfd_create(f"mock-bo-{handle:x}")
      os.ftruncate(memfd, size)
      addr = libc.mmap(0, size, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED, memfd, 0)
      host = np.frombuffer((ctypes.c_uint8 * size).from_address(addr), np.uint8)
    node.next_idr += 1
    offset = ((handle & 0xFFFFFFFF) + 1) << 32 | node.gpu_id << 16  # a DRM fake offset: page-aligned, unique per BO
    node.bos[handle] = BufferObject(handle, node.gpu_id, size, flags, a.va_addr, memfd, host, offset)
    a.handle, a.mmap_offset = handle, offset

  def _bo(self, handle: int, missing: int) -> tuple[GPUNode, BufferObject]:
    node = self._pdd(handle >> 32)
    bo = node.bos.get(handle)
    if bo is None: raise kerr(missing, f"no buffer object with handle {handle:#x}")
    return node, bo

  def free_memory_of_gpu(self, a) -> None:
    if self.signal_page is not None and a.handle == self.signal_page.handle: raise kerr(errno.EPERM, "the event page cannot be freed")
    node, bo = self._bo(a.handle, errno.EINVAL)
    if bo.mapped: raise kerr(errno.EBUSY, f"BO {a.handle:#x} is still mapped")
    del node.bos[a.handle]
    if bo.memfd is not None:
      libc.munmap(bo.host.ctypes.data, bo.size)
      os.close(bo.memfd)

  def _device_ids(self, a) -> list[int]:
    if a.n_devices == 0: raise kerr(errno.EINVAL, "n_devices 0")
    if a.n_success > a.n_devices: raise kerr(errno.EINVAL, "n_success > n_devices")
    if not libc.is_mapped(a.device_ids_array_ptr, 4 * a.n_devices): raise kerr(errno.EFAULT, "device_ids_array_ptr")
    return list((ctypes.c_uint32 * a.n_devices).from_address(a.device_ids_array_ptr))

  def map_memory_to_gpu(self, a) -> None:
    ids = self._device_ids(a)
    node = self._pdd(a.handle >> 32)
    self._bind(node)
    _, bo = self._bo(a.handle, errno.ENOMEM)
    for i in range(a.n_success, a.n_devices):
      peer = self._pdd(ids[i])
      self._bind(peer)
      if peer is not node: raise kerr(errno.EINVAL, "peer mappings are not emulated (one GPU)")
      if not bo.mapped:
        if bo.va == 0: raise kerr(errno.EINVAL, "Invalid VA")
        if bo.va & (PAGE - 1) or (bo.va + bo.size - 1) >> 12 >= 1 << 36: raise kerr(errno.EINVAL, f"VA {bo.va:#x} unaligned or beyond the VM")
        if bo.va < KERNEL_RESERVED[1] and bo.va + bo.size > KERNEL_RESERVED[0]:
          raise kerr(errno.EINVAL, f"VA {bo.va:#x} overlaps the kernel's reserved pages")
        try:
          node.gpu.mem.map(bo.va, bo.size, bo.host, writable=True, cached=not bo.flags & UNCACHED_MTYPE)
        except ValueError:
          raise kerr(errno.EINVAL, f"bo va {bo.va:#x}-{bo.va + bo.size - 1:#x} conflicts with an existing mapping") from None
        bo.mapped = True
      a.n_success = i + 1

  def unmap_memory_from_gpu(self, a) -> None:
    ids = self._device_ids(a)
    node = self._pdd(a.handle >> 32)
    _, bo = self._bo(a.handle, errno.ENOMEM)
    for i in range(a.n_success, a.n_devices):
      self._pdd(ids[i])
      if not bo.mapped: raise kerr(errno.EINVAL, f"BO {a.handle:#x} is not mapped")
      node.gpu.mem.unmap(bo.va)
      bo.mapped = False
      a.n_success = i + 1

  def create_queue(self, a) -> None:
    # set_queue_properties_from_user (kfd_chardev.c): 6.12 reads bits 8-15 as the PM4 queue's target XCC in its partition
    percentage = a.queue_percentage & 0xFF if self.kernel != "6.1" else a.queue_percentage
    if percentage > 100: raise kerr(errno.EINVAL, "queue_percentage > 100")
    if a.queue_priority > 15: raise kerr(errno.EINVAL, "queue_priority > 15")
    if a.ring_base_address and a.ring_base_address >= TASK_SIZE: raise kerr(errno.EFAULT, "ring_base_address")
    if a.ring_size and a.ring_size & (a.ring_size - 1): raise kerr(errno.EINVAL, f"ring size {a.ring_size} not a power of 2")
    if a.ring_size < 1024: a.ring_size = 1024
    if a.read_pointer_address >= TASK_SIZE: raise kerr(errno.EFAULT, "read_pointer_address")
    if a.write_pointer_address >= TASK_SIZE: raise kerr(errno.EFAULT, "write_pointer_address")
    if a.eop_buffer_address and a.eop_buffer_address >= TASK_SIZE: raise kerr(errno.EFAULT, "eop_buffer_address")
    if a.ctx_save_restore_address and a.ctx_save_restore_address >= TASK_SIZE: raise kerr(errno.EFAULT, "ctx_save_restore_address")
    kinds = {K.KFD_IOC_QUEUE_TYPE_COMPUTE: "compute", K.KFD_IOC_QUEUE_TYPE_SDMA: "sdma"}
    if a.queue_type == K.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL: raise kerr(ENOTSUPP, "AQL queues are not emulated: hcq writes PM4")
    if a.queue_type not in kinds: raise kerr(ENOTSUPP, f"queue type {a.queue_type}")
    node = self._pdd(a.gpu_id)
    self._bind(node, errno.ESRCH)
    # the kernel passes pm4_target_xcc to the MQD unchecked (init_mqd_v9_4_3: pm4_target_xcc_in_xcp); what the CP does
    # with an XCC the partition lacks is unknown, so the mock refuses it (the stricter side)
    target_xcc = a.queue_percentage >> 8 & 0xFF if self.kernel != "6.1" else 0
    if target_xcc >= node.board.num_xcc:
      raise kerr(errno.EINVAL, f"pm4_target_xcc {target_xcc} (queue_percentage bits 8-15): the partition has {node.board.num_xcc} XCCs")
    if self.kernel != "6.1": self._acquire_queue_buffers(node, a, kinds[a.queue_type])
    # MES (gfx11): the write pointer must lie in a GPU-mapped BO of at most one page
    wptr_bo = next((b for b in node.bos.values() if b.mapped and b.va <= a.write_pointer_address < b.va + b.size), None)
    if wptr_bo is None: raise kerr(errno.EINVAL, "Failed to lookup wptr bo")
    if wptr_bo.size > PAGE: raise kerr(errno.EINVAL, f"wptr BO of {wptr_bo.size} bytes: at most one page")
    if len([q for q in self.queues.values() if q.gpu_id == node.gpu_id]) >= 127: raise kerr(errno.ENOSPC, "127 queues per process")
    kind = kinds[a.queue_type]
    if kind == "compute":
      doorbell = min(set(range(SDMA_DOORBELL_BASE)) - node.doorbells)
    else:
      doorbell = min(set(range(SDMA_DOORBELL_BASE, 1024)) - node.doorbells)
    queue_id = min(set(range(1024)) - set(self.queues))
    ring = Ring(node.gpu.mem, a.ring_base_address, a.ring_size, a.read_pointer_address, a.write_pointer_address, 4 if kind == "compute" else 1)
    engine = node.gpu.start_queue(kind, ring, f"{kind} queue {queue_id}", target_xcc)
    node.doorbells.add(doorbell)
    self.queues[queue_id] = MockQueue(queue_id, node.gpu_id, kind, doorbell, engine)
    a.queue_id = queue_id
    a.doorbell_offset = MMAP_TYPE_DOORBELL << MMAP_TYPE_SHIFT | node.gpu_id << MMAP_GPU_ID_SHIFT | doorbell * 8

  def _mapping(self, node: GPUNode, addr: int, expected: int, what: str) -> None:
    """kfd_queue_buffer_get (kfd_queue.c, 6.12+): `addr` must start a GPU mapping, of exactly `expected` bytes when that
    is at least a page (the kernel compares page numbers; smaller sizes check only the start)."""
    page = addr >> 12
    bo = next((b for b in node.bos.values() if b.mapped and b.va >> 12 <= page < (b.va + b.size) >> 12), None)
    if bo is None or bo.va >> 12 != page or (expected >> 12 and bo.size >> 12 != expected >> 12):
      found = f"a {bo.size:#x}-byte mapping at {bo.va:#x}" if bo else "no mapping"
      raise kerr(errno.EINVAL, f"{what} at {addr:#x}: expected a mapping of {expected:#x} bytes starting there, found {found}")

  def _acquire_queue_buffers(self, node: GPUNode, a, kind: str) -> None:
    """kfd_queue_acquire_buffers (kfd_queue.c, Linux 6.12+): every buffer of the queue a mapping of the size it has,
    and for compute queues the EOP size, control stack size and CWSR size the node's topology gives, checked in this order."""
    self._mapping(node, a.write_pointer_address, PAGE, "write pointer")
    self._mapping(node, a.read_pointer_address, PAGE, "read pointer")
    self._mapping(node, a.ring_base_address, a.ring_size, "ring")
    if kind != "compute": return
    sizes = cwsr_sizes(node.board)
    if a.eop_buffer_address:
      if a.eop_buffer_size != sizes.eop: raise kerr(errno.EINVAL, f"queue eop bo size {a.eop_buffer_size:#x} not equal to node eop buf size {sizes.eop:#x}")
      self._mapping(node, a.eop_buffer_address, a.eop_buffer_size, "EOP buffer")
    if a.ctl_stack_size != sizes.ctl_stack:
      raise kerr(errno.EINVAL, f"queue ctl stack size {a.ctl_stack_size:#x} not equal to node ctl stack size {sizes.ctl_stack:#x}")
    if self.kernel == "6.12" and a.ctx_save_restore_size != sizes.cwsr:
      raise kerr(errno.EINVAL, f"queue cwsr size {a.ctx_save_restore_size:#x} not equal to node cwsr size {sizes.cwsr:#x}")
    if a.ctx_save_restore_size < sizes.cwsr:
      raise kerr(errno.EINVAL, f"queue cwsr size {a.ctx_save_restore_size:#x} not sufficient for node cwsr size {sizes.cwsr:#x}")
    # one save area per XCC of the partition (init_mqd_v9_4_3 points XCC i's MQD at address + i x size)
    total = ((a.ctx_save_restore_size + sizes.debug) * node.board.num_xcc + PAGE - 1) // PAGE * PAGE  # 6.12: equal sizes
    self._mapping(node, a.ctx_save_restore_address, total, "CWSR area (context save area + debugger area)")  # no SVM fallback

  def destroy_queue(self, a) -> None:
    """pqm_destroy_queue -> destroy_queue_cpsch -> remove_queue_mes (Linux 6.1, gfx11 with MES): the queue leaves the
    scheduler's list and its doorbell is freed, then MES preempts (unmaps) it; the ioctl returns only once it is off the
    hardware, so no later work of it touches memory. MES answers within adev->usec_timeout (100 ms, x100 under
    amdgpu_emu_mode: this GPU is emulated); past that remove_queue_mes fails with ETIMEDOUT and marks the scheduler
    hung (kfd_hws_hang), and pqm_destroy_queue keeps the queue's entry, so destroying it again frees it with EIO."""
    q = self.queues.get(a.queue_id)
    if q is None: raise kerr(errno.EINVAL, f"no queue {a.queue_id}")
    node = self.nodes[q.gpu_id]
    node.doorbells.discard(q.doorbell_id)
    if q.engine not in node.gpu.engines:  # its preemption failed before: the scheduler is hung (remove_queue_mes: -EIO)
      del self.queues[a.queue_id]
      raise kerr(errno.EIO, f"queue {a.queue_id}: the scheduler is hung after a failed preemption")

    def preempt() -> None:  # outside the process lock: the engine may be reporting an interrupt or an error as it stops
      if node.gpu.stop_queue(q.engine, self.preempt_timeout):
        with self.lock: self.queues.pop(a.queue_id, None)
        return
      with self.lock: self.queue_errors.append(f"{q.engine.queue_name}: MES failed to preempt it; the GPU would be reset")
      raise kerr(errno.ETIMEDOUT, f"queue {a.queue_id}: failed to remove hardware queue from MES")
    self.after_unlock = preempt

  # ---- events ----
  def create_event(self, a) -> None:
    if a.event_page_offset:
      if self.signal_page is not None: raise kerr(errno.EINVAL, "event page already set")
      node, bo = self._bo(a.event_page_offset, errno.EINVAL)
      self._bind(node)
      if bo.memfd is None: raise kerr(errno.EINVAL, "a USERPTR BO cannot be the event page")
      if bo.size < EVENT_PAGE_MIN: raise kerr(errno.EINVAL, f"event page of {bo.size} bytes < {EVENT_PAGE_MIN}")
      self.signal_page, self.signal_page_host = bo, bo.host[:EVENT_PAGE_MIN].view(np.uint64)
      self.signal_slots = min(bo.size // 8, 4096)
      self.signal_page_host[:] = UNSIGNALED
    if a.event_type in (K.KFD_IOC_EVENT_SIGNAL, K.KFD_IOC_EVENT_DEBUG_EVENT):
      used = {e for e in self.events if e < FIRST_NONSIGNAL_EVENT_ID}
      free = [i for i in range(1, self.signal_slots) if i not in used]
      if not free: raise kerr(errno.ENOSPC, f"all {self.signal_slots - 1} signal event slots in use")
      event_id = free[0]
      if self.signal_page_host is not None: self.signal_page_host[event_id] = UNSIGNALED
      a.event_page_offset = MMAP_TYPE_EVENTS << MMAP_TYPE_SHIFT
      a.event_slot_index = event_id
    else:
      event_id = self.next_nonsignal
      self.next_nonsignal += 1
    self.events[event_id] = MockEvent(event_id, a.event_type, bool(a.auto_reset))
    a.event_id = a.event_trigger_data = event_id

  def _event(self, event_id: int) -> MockEvent:
    ev = self.events.get(event_id)
    if ev is None: raise kerr(errno.EINVAL, f"no event {event_id}")
    return ev

  def destroy_event(self, a) -> None:
    self._event(a.event_id)
    del self.events[a.event_id]
    self.event_cond.notify_all()

  def set_event(self, a) -> None:
    ev = self._event(a.event_id)
    if ev.event_type != K.KFD_IOC_EVENT_SIGNAL: raise kerr(errno.EINVAL, "only signal events can be set")
    ev.signaled = True
    self.event_cond.notify_all()

  def reset_event(self, a) -> None:
    ev = self._event(a.event_id)
    if ev.event_type != K.KFD_IOC_EVENT_SIGNAL: raise kerr(errno.EINVAL, "only signal events can be reset")
    ev.signaled = False

  def wait_events(self, a) -> None:
    size = ctypes.sizeof(K.struct_kfd_event_data)
    if a.num_events and not libc.is_mapped(a.events_ptr, a.num_events * size): raise kerr(errno.EFAULT, "events_ptr")
    data = (K.struct_kfd_event_data * a.num_events).from_address(a.events_ptr) if a.num_events else []
    events = [self._event(d.event_id) for d in data]
    deadline = None if a.timeout == 0xFFFFFFFF else time.monotonic() + min(a.timeout, 0x7FFFFFFF) / 1000

    def ready() -> bool:
      hit = [e.signaled for e in events]
      return all(hit) if a.wait_for_all else (any(hit) or not events)

    while not ready():
      if any(e.event_id not in self.events for e in events):
        a.wait_result = K.KFD_IOC_WAIT_RESULT_FAIL
        raise kerr(errno.EIO, "an event was destroyed while waited on")
      left = None if deadline is None else deadline - time.monotonic()
      if left is not None and left <= 0:
        a.wait_result = K.KFD_IOC_WAIT_RESULT_TIMEOUT
        return
      self.event_cond.wait(left if left is not None else 0.1)
    for d, e in zip(data, events):
      if e.signaled and e.event_type == K.KFD_IOC_EVENT_MEMORY and e.memory_exception:
        ctypes.memmove(ctypes.addressof(d.memory_exception_data), e.memory_exception, len(e.memory_exception))
      if e.signaled and e.auto_reset: e.signaled = False
    a.wait_result = K.KFD_IOC_WAIT_RESULT_COMPLETE

  # ---- from the GPU ----
  def _interrupt(self, node: GPUNode, ctxid: int) -> None:
    """An end-of-pipe or SDMA trap interrupt: signal events whose slot the GPU wrote (kfd_signal_event_interrupt)."""
    with self.lock:
      if self.signal_page_host is None: return
      ids = [ctxid] if 0 < ctxid < self.signal_slots and self.signal_page_host[ctxid] != UNSIGNALED else \
        [i for i in range(1, self.signal_slots) if self.signal_page_host[i] != UNSIGNALED]
      for i in ids:
        self.signal_page_host[i] = UNSIGNALED
        ev = self.events.get(i)
        if ev is not None and ev.event_type in (K.KFD_IOC_EVENT_SIGNAL, K.KFD_IOC_EVENT_DEBUG_EVENT): ev.signaled = True
      self.event_cond.notify_all()

  def _queue_error(self, node: GPUNode, engine, error, cause) -> None:
    """A queue that stopped: page faults become MEMORY events (as kernels after 6.1 deliver them on gfx11; 6.1 only
    logs them), and every stop becomes a HW_EXCEPTION event, the way a queue reset is announced."""
    from hcq.asm.emu.memory import PageFault
    with self.lock:
      self.queue_errors.append(f"{engine.queue_name}: {error}")
      self.last_fault_pc = getattr(cause, "pc", None)
      fault = cause if isinstance(cause, PageFault) else getattr(cause, "fault", None)
      for ev in self.events.values():
        if ev.event_type == K.KFD_IOC_EVENT_MEMORY and isinstance(fault, PageFault):
          data = K.struct_kfd_hsa_memory_exception_data(va=fault.address, gpu_id=node.gpu_id)
          data.failure.NotPresent = 1
          data.failure.ReadOnly = int(fault.write)
          ev.memory_exception, ev.signaled = bytes(data), True
        elif ev.event_type == K.KFD_IOC_EVENT_HW_EXCEPTION:
          ev.signaled = True
      self.event_cond.notify_all()

  # ---- mmap on /dev/kfd ----
  def mmap_kfd(self, address: int, length: int, offset: int) -> tuple[int, int]:
    """What backs an mmap of /dev/kfd at `offset`: (memfd, file offset) to map, after the kernel's checks."""
    kind, gpu_id = offset >> MMAP_TYPE_SHIFT, (offset >> MMAP_GPU_ID_SHIFT) & 0xFFFF
    if kind == MMAP_TYPE_DOORBELL:
      node = self.nodes.get(gpu_id)
      if node is None: raise kerr(errno.ENODEV, f"doorbell mmap for unknown gpu_id {gpu_id:#x}")
      if length != DOORBELL_SLICE: raise kerr(errno.EINVAL, f"doorbell mmap of {length} bytes; the process slice is {DOORBELL_SLICE}")
      return -1, 0  # anonymous memory: the OS object watches writes through ring_doorbell
    if kind == MMAP_TYPE_EVENTS:
      if length > EVENT_PAGE_MIN: raise kerr(errno.EINVAL, "event page mmap larger than 32 KiB")
      if self.signal_page is None: raise kerr(errno.EINVAL, "no event page yet: create a signal event first")
      return self.signal_page.memfd, 0
    raise kerr(errno.EINVAL if kind == MMAP_TYPE_MMIO else errno.EFAULT, f"mmap type {kind} is not emulated")

  def mmap_render(self, fd: int, length: int, offset: int) -> BufferObject:
    """The BO an mmap of the render node at `offset` maps (drm_vma_node: only for the file that did ACQUIRE_VM)."""
    for node in self.nodes.values():
      for bo in node.bos.values():
        if bo.mmap_offset == offset and bo.memfd is not None:
          if node.drm_fd != fd: raise kerr(errno.EACCES, "BO mmap through a render node file that did not acquire the VM")
          if length > bo.size: raise kerr(errno.EINVAL, f"mmap of {length} bytes of a {bo.size}-byte BO")
          return bo
    raise kerr(errno.EINVAL, f"no BO at mmap offset {offset:#x}")

  def doorbell(self, gpu_id: int, doorbell_id: int) -> None:
    """User space wrote a doorbell: wake that queue's engine."""
    for q in list(self.queues.values()):  # a copy: another thread's ioctl may be creating or destroying a queue
      if q.gpu_id == gpu_id and q.doorbell_id == doorbell_id: q.engine.ring.doorbell.set()
