"""AMDDevice: an AMD GPU through KFD — GPU memory in one address space with the CPU, a PM4 compute queue, an SDMA queue.

`KFD+AMD` talks to the real /dev/kfd; `MOCKKFD+AMD` runs the same code against the emulated gfx1100
(hcq.drivers.mock). Plain `AMD` takes the real GPU when there is one, and the emulated one otherwise,
saying so once.
"""
from __future__ import annotations
import ctypes
import sys
import time

import numpy as np

from hcq.autogen import kfd as K
from hcq.buffer import Buffer
from hcq.device import Device
from hcq.devstring import DevSpec
from hcq.drivers import libc
from hcq.drivers.amd.kfd import KFDInterface, gpu_nodes
from hcq.drivers.amd.pm4 import DIALECTS, AMDComputeQueue
from hcq.drivers.amd.program import AMDProgram
from hcq.drivers.amd.sdma import AMDCopyQueue
from hcq.errors import GPUFault, HCQError

PAGE = 4096
VA_SPACE = 1 << 40            # reserved once; every buffer gets its GPU and CPU address in it
RING_BYTES = 1 << 16
STAGING_BYTES = 16 << 20
TIMESTAMP_HZ = {"gfx11": 100_000_000, "gfx9": 100_000_000}  # the global timestamp counter RELEASE_MEM and SDMA write
_F = K.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | K.KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE | K.KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE
MEMORY_FLAGS = {
  "device": K.KFD_IOC_ALLOC_MEM_FLAGS_VRAM | _F,
  "host": K.KFD_IOC_ALLOC_MEM_FLAGS_GTT | K.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | _F,
  "uncached": K.KFD_IOC_ALLOC_MEM_FLAGS_GTT | K.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | K.KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED | _F,
  "cpu": K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | K.KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | _F,
}
_said_emulated = False


def _open_os(spec: DevSpec):
  """The OS layer for the DEV string: the host's, or the mock kernel's for MOCKKFD (and for AMD on a machine without one)."""
  from hcq.drivers.os import HostOS
  if spec.iface != "MOCKKFD":
    host = HostOS()
    if gpu_nodes(host) or spec.iface == "KFD": return host
  from hcq.drivers.mock.os import MockKFDOS
  if spec.iface is None: _say_emulated()
  return MockKFDOS()


def _say_emulated() -> None:
  """Say once that plain AMD means the emulated GPU on this machine."""
  global _said_emulated
  if not _said_emulated: print("hcq: no AMD GPU found; AMD runs on the emulated gfx1100 (MOCKKFD+AMD)", file=sys.stderr)
  _said_emulated = True


class AMDDevice(Device):
  """See the module docstring."""

  def __init__(self, spec: DevSpec):
    self.spec = spec
    self.os = _open_os(spec)
    nodes = gpu_nodes(self.os)
    if spec.arch: nodes = [n for n in nodes if n.arch == spec.arch]
    if not nodes:
      raise HCQError("no AMD GPU found in the KFD topology" + (f" with arch {spec.arch}" if spec.arch else "") +
                     " (/sys/devices/virtual/kfd/kfd/topology); MOCKKFD+AMD gives the emulated gfx1100")
    self.node = nodes[0]
    self.arch = self.node.arch
    family = f"gfx{self.node.properties['gfx_target_version'] // 10000}"
    if family not in DIALECTS or family not in TIMESTAMP_HZ:
      raise HCQError(f"{self.arch}: no PM4 dialect for {family}; this driver has {', '.join(DIALECTS)}")
    self.kfd = KFDInterface(self.os, self.node)
    self.timestamp_frequency = TIMESTAMP_HZ[family]
    self.dialect = DIALECTS[family](self._gc_bases())
    self.tmpring_size, self.scratch_base, self._scratch, self._scratch_per_wave, self.scratch_generation = 0, 0, None, 0, 0
    self._va_base = self.os.mmap(0, VA_SPACE, libc.PROT_NONE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | libc.MAP_NORESERVE, -1, 0)
    self._va_next = self._va_base
    self._handles: dict[int, int] = {}
    super().__init__(spec)
    self.staging = self.alloc(STAGING_BYTES, "host")
    self._events()
    self.queues = {"compute": self._queue(K.KFD_IOC_QUEUE_TYPE_COMPUTE, 4), "sdma": self._queue(K.KFD_IOC_QUEUE_TYPE_SDMA, 1)}

  def _gc_bases(self) -> tuple[int, ...]:
    """GC register segment bases from the IP discovery table the amdgpu driver exposes in sysfs."""
    path = f"/sys/class/drm/renderD{self.node.properties['drm_render_minor']}/device/ip_discovery/die/0/GC/0/base_addr"
    try:
      return tuple(int(x, 16) for x in self.os.read_text(path).split())
    except OSError as e:
      raise HCQError(f"cannot read the GC block's IP discovery table ({path}: {e.strerror}): the compute registers cannot be placed") from None

  # ---- memory ----
  def _reserve(self, nbytes: int, align: int = 1 << 16) -> int:
    va = (self._va_next + align - 1) // align * align
    if va + nbytes > self._va_base + VA_SPACE: raise HCQError(f"out of GPU address space ({VA_SPACE >> 30} GiB reserved)")
    self._va_next = va + nbytes
    return va

  def _alloc(self, nbytes: int, kind: str) -> Buffer:
    size = (nbytes + PAGE - 1) // PAGE * PAGE
    va = self._reserve(size)
    flags = MEMORY_FLAGS[kind]
    if kind == "cpu":
      self.os.mmap(va, size, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | libc.MAP_FIXED, -1, 0)
      handle, _ = self.kfd.alloc(size, flags, va, userptr=va)
    else:
      handle, offset = self.kfd.alloc(size, flags, va)
      if kind != "device": self.kfd.map_cpu(va, size, offset)
    self._handles[va] = handle
    return Buffer(self, va, nbytes, kind, None if kind == "device" else va, owner=handle)

  def _free(self, buf: Buffer) -> None:
    self.kfd.free(self._handles.pop(buf.addr))
    size = (buf.nbytes + PAGE - 1) // PAGE * PAGE
    if buf.host_addr is not None:  # give the range back to the reservation
      self.os.mmap(buf.addr, size, libc.PROT_NONE, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS | libc.MAP_NORESERVE | libc.MAP_FIXED, -1, 0)

  def upload(self, dest: Buffer, data: bytes) -> None:
    """Bytes into a buffer (through the staging buffer and SDMA when the CPU cannot see it)."""
    self.copy_from_host(dest, np.frombuffer(bytes(data), np.uint8))

  def _staged(self, nbytes: int, step) -> None:
    for off in range(0, nbytes, STAGING_BYTES):
      step(off, min(STAGING_BYTES, nbytes - off))

  def copy_from_host(self, dest: Buffer, src: np.ndarray) -> None:
    if dest.host_addr is not None: return super().copy_from_host(dest, src)
    self.synchronize()
    raw = src.reshape(-1).view(np.uint8)

    def step(off: int, n: int) -> None:
      ctypes.memmove(self.staging.host_addr, raw.ctypes.data + off, n)
      self.copy_queue().copy(dest.addr + off, self.staging.addr, n).signal(self.timeline_signal, self.next_timeline()).submit(self)
      self.synchronize()
    self._staged(raw.nbytes, step)

  def copy_to_host(self, dest: np.ndarray, src: Buffer) -> None:
    if src.host_addr is not None: return super().copy_to_host(dest, src)
    self.synchronize()
    raw = dest.reshape(-1).view(np.uint8)

    def step(off: int, n: int) -> None:
      self.copy_queue().copy(self.staging.addr, src.addr + off, n).signal(self.timeline_signal, self.next_timeline()).submit(self)
      self.synchronize()
      ctypes.memmove(raw.ctypes.data + off, self.staging.host_addr, n)
    self._staged(raw.nbytes, step)

  # ---- queues ----
  def _cwsr_sizes(self) -> tuple[int, int]:
    """(context save area bytes, control stack bytes) a gfx11 compute queue needs so the scheduler can preempt it
    (compute-wave save/restore), sized as amdkfd sizes it (kfd_queue.c, Linux 6.7+): per CU the VGPRs, SGPRs, LDS and
    hardware registers of its waves, plus a 12-byte control stack entry per wave and a 40-byte header."""
    props = self.node.properties
    cus = props["simd_count"] // props["simd_per_cu"]
    vgpr_bytes_per_cu = 0x60000 if self.arch in ("gfx1100", "gfx1101", "gfx1151") else 0x40000
    wg_data = (cus * (vgpr_bytes_per_cu + 0x4000 + 0x10000 + 0x1000) + PAGE - 1) // PAGE * PAGE
    waves = cus * 32
    ctl_stack = (40 + waves * 12 + 8 + PAGE - 1) // PAGE * PAGE
    return wg_data + ctl_stack, ctl_stack

  def _queue(self, queue_type: int, unit: int) -> dict:
    ring = self.alloc(RING_BYTES, "host")
    pointers = self.alloc(PAGE, "host")  # rptr at +0, wptr at +8: one page, GPU-mapped, as MES requires of the wptr
    compute = queue_type == K.KFD_IOC_QUEUE_TYPE_COMPUTE
    eop = self.alloc(PAGE, "device") if compute else None
    cwsr_size, ctl_stack = self._cwsr_sizes() if compute else (0, 0)
    cwsr = self.alloc(cwsr_size, "device") if compute else None
    qid, doorbell = self.kfd.create_queue(queue_type, ring.addr, RING_BYTES, pointers.addr, pointers.addr + 8,
                                          eop.addr if eop else 0, PAGE if eop else 0, cwsr.addr if cwsr else 0, cwsr_size, ctl_stack)
    return {"id": qid, "ring": ring, "rptr": ctypes.c_uint64.from_address(pointers.host_addr),
            "wptr": ctypes.c_uint64.from_address(pointers.host_addr + 8), "put": 0, "doorbell": doorbell, "unit": unit,
            "buffers": (ring, pointers, eop, cwsr), "type": queue_type}

  def _write_ring(self, name: str, words) -> None:
    """Copy dwords into a ring after the write pointer, wait for space if the engine is behind, then ring the doorbell."""
    q = self.queues[name]
    n, size = len(words), RING_BYTES // 4
    if n > size: raise HCQError(f"{n} dwords do not fit the {name} ring of {size}")
    put = q["put"]  # in dwords
    deadline = time.monotonic() + self.default_timeout
    while put + n - q["rptr"].value * q["unit"] // 4 > size:
      if time.monotonic() > deadline: raise HCQError(f"{name} ring full for {self.default_timeout}s: {self.queue_state()}")
      time.sleep(1e-5)
    start, src = put % size, words.buffer_info()[0]
    first = min(n, size - start)
    ctypes.memmove(q["ring"].host_addr + 4 * start, src, 4 * first)
    if first < n: ctypes.memmove(q["ring"].host_addr, src + 4 * first, 4 * (n - first))
    q["put"] = put + n
    q["wptr"].value = q["put"] * 4 // q["unit"]
    self.os.ring_doorbell(q["doorbell"], q["wptr"].value)

  def submit_pm4(self, q: AMDComputeQueue) -> None:
    self._write_ring("compute", q.words())

  def submit_sdma(self, q: AMDCopyQueue) -> None:
    self._write_ring("sdma", q.words())

  def compute_queue(self) -> AMDComputeQueue:
    return AMDComputeQueue(self.dialect)

  def copy_queue(self) -> AMDCopyQueue:
    return AMDCopyQueue()

  def ensure_scratch(self, bytes_per_lane: int, lanes: int) -> None:
    """Scratch (private segment) for every wave the GPU can hold, at least `bytes_per_lane` per lane; grows, never shrinks.
    COMPUTE_TMPRING_SIZE counts the space per wave in 256-byte units on gfx11."""
    per_wave = (bytes_per_lane * lanes + 255) // 256 * 256
    if per_wave <= self._scratch_per_wave: return
    waves = min(self.node.properties["simd_count"] * self.node.properties["max_waves_per_simd"], 0xfff)
    self.synchronize()
    if self._scratch is not None: self._scratch.free()
    self._scratch = self.alloc(per_wave * waves, "device")
    self._scratch_per_wave, self.scratch_base = per_wave, self._scratch.addr
    self.tmpring_size = self.dialect.regs.regCOMPUTE_TMPRING_SIZE.encode(waves=waves, wavesize=per_wave // 256)
    self.scratch_generation += 1  # queues built for the old scratch are rebuilt

  def program(self, code_object: bytes, name: str | None = None) -> AMDProgram:
    """Load a kernel of a code object (ET_DYN from clang/lld or ROCm, or ET_REL from llvmlite)."""
    return AMDProgram(self, code_object, name)

  @classmethod
  def canonical_spec(cls, spec: DevSpec) -> DevSpec:
    """AMD, KFD+AMD, MOCKKFD+AMD::gfx1100, ... resolved as _open_os and __init__ resolve them: the interface (the real
    GPU when there is one) and the arch (the first GPU node's), so every spelling of one GPU opens one Device."""
    from hcq.drivers.os import HostOS
    iface, arch = spec.iface, spec.arch
    if iface != "MOCKKFD":
      nodes = gpu_nodes(HostOS())
      if nodes or iface == "KFD": iface, arch = "KFD", arch or (nodes[0].arch if nodes else None)
    if iface in (None, "MOCKKFD"):
      from hcq.drivers.mock.amdgpu.gpu import BoardSpec
      if iface is None: _say_emulated()
      iface, arch = "MOCKKFD", arch or BoardSpec().gfx_target  # the board the mock kernel presents by default (MockKFD())
    return DevSpec(spec.device, iface, None, arch)

  # ---- faults and hangs ----
  def _events(self) -> None:
    page = self.alloc(8 * 4096, "host")  # the signal event page (KFD_SIGNAL_EVENT_LIMIT slots)
    self.event_page = page
    self._memory_event = self.kfd.create_event(K.KFD_IOC_EVENT_MEMORY, event_page=self._handles[page.addr]).event_id
    self._hw_event = self.kfd.create_event(K.KFD_IOC_EVENT_HW_EXCEPTION).event_id
    self._last_fault_check = 0.0

  def check_faults(self) -> None:
    """Raise a GPUFault if the kernel reported a memory fault or a queue reset (polled at most every millisecond)."""
    now = time.monotonic()
    if now - self._last_fault_check < 1e-3: return
    self._last_fault_check = now
    result, data = self.kfd.wait_events([self._memory_event, self._hw_event], 0)
    if result != K.KFD_IOC_WAIT_RESULT_COMPLETE: return
    stuck = [name for name, q in self.queues.items() if q["rptr"].value != q["wptr"].value]
    queue = stuck[0] if stuck else None
    where = ""
    if queue:
      q = self.queues[queue]
      where = f" at ring offset {q['rptr'].value * q['unit'] % RING_BYTES:#x}"
    details = getattr(self.os, "fault_details", lambda: [])()
    mem = data[0].memory_exception_data
    address = mem.va if mem.va else None
    message = f"{self}: " + (f"GPU page fault at {address:#x}" if address is not None else "queue error") + \
      (f" on the {queue} queue" if queue else "") + (f": {details[-1]}" if details else where)
    self.recover()
    raise GPUFault(message, queue=queue, address=address, pc=getattr(self.os, "fault_pc", lambda: None)())

  def recover(self) -> None:
    """What a queue reset leaves: fresh queues, and the timeline caught up so later work does not wait on lost work."""
    for name, q in list(self.queues.items()):
      self.kfd.destroy_queue(q["id"])
      for b in q["buffers"]:
        if b is not None:
          self._free(b)
          b.freed = True
      self.queues[name] = self._queue(q["type"], q["unit"])
    self.timeline_signal.value = self.timeline_value - 1

  def queue_state(self) -> str:
    parts = [f"{n} rptr {q['rptr'].value} wptr {q['wptr'].value}" for n, q in self.queues.items()] if hasattr(self, "queues") else []
    return super().queue_state() + ("; " + ", ".join(parts) if parts else "")
