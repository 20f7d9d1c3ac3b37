"""AMDDevice: an AMD GPU through KFD — GPU memory in one address space with the CPU, a PM4 compute queue, an SDMA queue.

`KFD+AMD` talks to the real /dev/kfd; `MOCKKFD+AMD` runs the same code against the emulated gfx1100
(hcq.drivers.mock). Plain `AMD` takes the real GPU when there is one, and the emulated one otherwise,
saying so once.
"""
from __future__ import annotations
import ctypes
from array import array
import sys
import threading
import time
import weakref

import numpy as np

from hcq.autogen import kfd as K
from hcq.buffer import Buffer
from hcq.device import Device, StagedCopies
from hcq.devstring import DevSpec
from hcq.drivers.amd.kfd import GPUNodeInfo, KFDInterface, gpu_nodes
from hcq.drivers.amd.pm4 import DIALECTS, AMDComputeQueue, XCCSplit
from hcq.drivers.amd.program import AMDProgram
from hcq.drivers.amd.sdma import SDMA_MAJORS, AMDCopyQueue
from hcq.drivers.va import ReservedRange
from hcq.errors import GPUFault, HCQError

PAGE = 4096
VA_SPACE = 1 << 40            # reserved once; every buffer gets its GPU and CPU address in it
RING_BYTES = 1 << 16         # each hardware queue's ring (a power of two of at least 1 KiB, as CREATE_QUEUE takes it)
IB_ARENA_BYTES = 4 << 20     # split over XCCs: where submitted packets run as indirect buffers (PRED_EXEC needs one)
STAGING_BYTES = 16 << 20
# the global timestamp counter RELEASE_MEM and SDMA write: the SOC reference clock (soc21_get_xclk / soc24_get_xclk: spll.reference_freq);
# on MI300 (MP1 13.0.6) soc15_get_xclk (Linux 6.12) returns 10000 (10 kHz units): a 100 MHz GPU clock counter
TIMESTAMP_HZ = {"gfx12": 100_000_000, "gfx11": 100_000_000, "gfx9": 100_000_000}
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
  from hcq.drivers.mock.os import mock_kfd_os, partition_os
  # an arch without an emulated board fails here, before the notice; the partitions of one emulated GPU share it
  os_layer = partition_os(spec.arch, spec.partition, spec.index or 0) if spec.partition else mock_kfd_os(spec.arch)
  if spec.iface is None: _say_emulated(spec.arch)
  return os_layer


class _HostProcess:
  """The real KFD process: this Python process, whatever OS object its devices read through."""


_HOST_PROCESS = _HostProcess()
_with_event_page: "weakref.WeakSet" = weakref.WeakSet()  # KFD processes (the host's, mock kernels) that gave theirs


def _kfd_process(os_layer) -> object:
  """The KFD process a device's ioctls act in: a mock kernel is a process of its own."""
  return getattr(os_layer, "kfd", None) or _HOST_PROCESS


def _say_emulated(arch: str | None) -> None:
  """Say once that plain AMD means the emulated GPU on this machine."""
  global _said_emulated
  arch = arch or "gfx1100"
  if not _said_emulated: print(f"hcq: no AMD GPU found; AMD runs on the emulated {arch} (MOCKKFD+AMD::{arch})", file=sys.stderr)
  _said_emulated = True


def _pick_node(spec: DevSpec, nodes: list[GPUNodeInfo]) -> GPUNodeInfo:
  """The GPU node a DEV string names: the INDEX-th (default 0) of the KFD topology's GPU nodes with its ARCH. An MI300 in
  a partition mode has a node per partition, so the index picks a partition as it picks a GPU among several."""
  matching = [n for n in nodes if not spec.arch or n.arch == spec.arch]
  arch = f" with arch {spec.arch}" if spec.arch else ""
  if not matching:
    raise HCQError(f"no AMD GPU found in the KFD topology{arch} (/sys/devices/virtual/kfd/kfd/topology); MOCKKFD+AMD gives the emulated gfx1100")
  index = spec.index or 0
  if index >= len(matching):
    raise HCQError(f"{spec}: device index {index}, but the KFD topology has {len(matching)} AMD GPU node{'s' * (len(matching) > 1)}"
                   f"{arch} (indices 0-{len(matching) - 1})")
  return matching[index]


def partition_modes(osl, node: GPUNodeInfo) -> str:
  """The node's GPU's compute/memory partition modes as amdgpu's sysfs shows them ("CPX/NPS4"); "" on a GPU without them."""
  folder = node.amdgpu_dir(osl)
  try:
    return "/".join(osl.read_text(f"{folder}/current_{kind}_partition").strip() for kind in ("compute", "memory"))
  except OSError:
    return ""


def in_partition(partition: str, modes: str) -> bool:
  """Whether a DEV string's PARTITION (memory mode NPS1 left out) names the modes a GPU is in."""
  return partition in (modes, modes.removesuffix("/NPS1"))


class AMDDevice(StagedCopies, Device):
  """See the module docstring."""
  va_space = VA_SPACE  # bytes of address space reserved at open (a class attribute, so a test can make it small)
  use_xccs = True      # gfx9.4.3: split dispatches over the partition's XCCs (False: one queue on XCC 0 runs them whole)

  def __init__(self, spec: DevSpec, ring_bytes: int = RING_BYTES, os_layer=None):
    """`ring_bytes`: the size of each queue's ring; `os_layer`: an OS object to use instead of the one the DEV string picks
    (tests pass a mock kernel of another version)."""
    if ring_bytes < 1024 or ring_bytes & (ring_bytes - 1): raise ValueError(f"ring_bytes must be a power of two >= 1024, got {ring_bytes}")
    self.spec, self.ring_bytes = spec, ring_bytes
    self.os = os_layer or _open_os(spec)
    self.node = _pick_node(spec, gpu_nodes(self.os))
    self.arch = self.node.arch
    self.partition = partition_modes(self.os, self.node)
    if spec.partition and not in_partition(spec.partition, self.partition):
      raise HCQError(f"{spec}: the GPU of KFD node {self.node.index} is in partition mode {self.partition or 'none'}, not "
                     f"{spec.partition}; root switches it (echo MODE > {self.node.amdgpu_dir(self.os)}/current_compute_partition)")
    family = f"gfx{self.node.properties['gfx_target_version'] // 10000}"
    if family not in DIALECTS or family not in TIMESTAMP_HZ:
      raise HCQError(f"{self.arch}: no PM4 dialect for {family}; this driver has {', '.join(DIALECTS)}")
    self.kfd = KFDInterface(self.os, self.node)
    self.timestamp_frequency = TIMESTAMP_HZ[family]
    self.dialect = DIALECTS[family](self._gc_bases())
    gc = tuple(int(self._ip_discovery("GC", n)) for n in ("major", "minor", "revision"))
    if not any(gc[:len(v)] == v for v in self.dialect.gc_versions):
      raise HCQError(f"{self.arch}: GC {'.'.join(map(str, gc))}; the {family} dialect is written for GC "
                     f"{', '.join('.'.join(map(str, v)) + ('.x' if len(v) < 3 else '') for v in self.dialect.gc_versions)}")
    self.sdma_major = int(self._ip_discovery("SDMA0", "major"))   # SDMA 4 on gfx9.4.3, 6 on gfx11, 7 on gfx12
    if self.sdma_major not in SDMA_MAJORS: raise HCQError(f"{self.arch}: SDMA {self.sdma_major}.x; this driver builds SDMA 4.4, 6.0 and 7.0 packets")
    self.tmpring_size, self.scratch_base, self._scratch, self._scratch_per_wave, self.scratch_generation = 0, 0, None, 0, 0
    self.scratch_xcc_bytes = 0
    self._range = ReservedRange(self.os, self.va_space)
    self._handles_lock = threading.Lock()
    self._staging_lock = threading.Lock()  # one staging buffer: one host<->device copy at a time
    self._handles: dict[int, int] = {}
    super().__init__(spec)
    self.staging = self.alloc(STAGING_BYTES, "host")
    self.split = self._xcc_split()
    self._events()
    self.queues = {"compute": self._queue(K.KFD_IOC_QUEUE_TYPE_COMPUTE, 4), "sdma": self._queue(K.KFD_IOC_QUEUE_TYPE_SDMA, 1)}

  def _xcc_split(self) -> XCCSplit | None:
    """gfx9.4.3 with more than one XCC in the node's partition: every XCC gets a PM4 queue on the one compute ring and
    a share of each dispatch (docs/hcq.md, MI300X). Their barrier slots and the indirect-buffer arena are allocated here."""
    xccs = self.node.properties.get("num_xcc", 1)
    if xccs < 2 or self.dialect.waves_per_engine or not self.use_xccs: return None
    sync = self.alloc(PAGE, "uncached")
    sync.view(np.uint32)[:] = 0
    self._xcc_sync, self._barriers_taken = sync, 0
    self._arena, self._arena_put, self._arena_busy = self.alloc(IB_ARENA_BYTES, "host"), 0, []
    return XCCSplit(xccs, sync.addr)

  def _ip_discovery(self, block: str, name: str) -> str:
    """One file of a hardware block in the IP discovery table the amdgpu driver exposes in sysfs."""
    path = f"{self.node.amdgpu_dir(self.os)}/ip_discovery/die/0/{block}/0/{name}"
    try:
      return self.os.read_text(path)
    except OSError as e:
      raise HCQError(f"cannot read the {block} block's IP discovery table ({path}: {e.strerror}): hcq places its registers "
                     "and picks its packet formats from it") from None

  def _gc_bases(self) -> tuple[int, ...]:
    """GC register segment bases from IP discovery."""
    return tuple(int(x, 16) for x in self._ip_discovery("GC", "base_addr").split())

  # ---- memory ----
  def _alloc(self, nbytes: int, kind: str) -> Buffer:
    size = (nbytes + PAGE - 1) // PAGE * PAGE
    va = self._range.take(size, cpu=kind == "cpu")
    flags = MEMORY_FLAGS[kind]
    if kind == "cpu":
      handle, _ = self.kfd.alloc(size, flags, va, userptr=va)
    else:
      handle, offset = self.kfd.alloc(size, flags, va)
      if kind != "device": self.kfd.map_cpu(va, size, offset)
    with self._handles_lock: self._handles[va] = handle
    return Buffer(self, va, nbytes, kind, None if kind == "device" else va, owner=handle)

  def _free(self, buf: Buffer) -> None:
    with self._handles_lock: handle = self._handles.pop(buf.addr)
    self.kfd.free(handle)
    size = (buf.nbytes + PAGE - 1) // PAGE * PAGE
    self._range.give_back(buf.addr, size, cpu=buf.host_addr is not None)  # unmapped on the GPU and the CPU: handed out again

  # ---- queues ----
  def _cwsr_sizes(self) -> tuple[int, int, int]:
    """(context save area bytes, control stack bytes, buffer bytes) of a compute queue, so the scheduler can preempt it
    (compute-wave save/restore), as amdkfd sizes them (kfd_queue.c kfd_queue_ctx_save_restore_size, Linux 6.12+): per CU
    the VGPRs, SGPRs, LDS and hardware registers of its waves, plus a control stack entry per wave and a 40-byte header;
    the buffer adds the debugger's 32 bytes per wave after it. Linux 6.12 takes CREATE_QUEUE only with exactly this size
    and a buffer mapped at exactly that length (kfd_queue_acquire_buffers), later kernels at least the size; 6.1 checks
    neither. The topology's cwsr_size and ctl_stack_size, where the kernel publishes them, win over the computation."""
    props = self.node.properties
    gfxv, xcc = props["gfx_target_version"], props.get("num_xcc", 1)
    cus = props["simd_count"] // props["simd_per_cu"] // xcc
    # before gfx10.1 the waves are capped by the engines' 512 each: the node's own (one XCC's) engines, which sysfs shows
    # multiplied by num_xcc (kfd_topology.c node_show: array_count x NUM_XCC)
    waves = cus * 32 if gfxv >= 100100 else min(cus * 40, props["array_count"] // props["simd_arrays_per_engine"] // xcc * 512)
    vgpr_bytes_per_cu = 0x80000 if gfxv // 100 == 904 or gfxv in (90010, 90008, 90500) else \
      0x60000 if gfxv in (110000, 110001, 120000, 120001) else 0x40000
    lds_bytes_per_cu = props["lds_size_in_kb"] << 10 if gfxv == 90500 else 0x10000
    wg_data = (cus * (vgpr_bytes_per_cu + 0x4000 + lds_bytes_per_cu + 0x1000) + PAGE - 1) // PAGE * PAGE
    ctl_stack = (40 + waves * (12 if gfxv >= 100100 else 8) + 8 + PAGE - 1) // PAGE * PAGE
    if gfxv // 10000 == 10: ctl_stack = min(ctl_stack, 0x7000)  # gfx10's hardware limit (kfd_queue.c)
    ctl_stack = props.get("ctl_stack_size", ctl_stack)
    cwsr = props.get("cwsr_size", wg_data + ctl_stack)
    debugger = (waves * 32 + 63) // 64 * 64
    return cwsr, ctl_stack, ((cwsr + debugger) * xcc + PAGE - 1) // PAGE * PAGE

  def _queue(self, queue_type: int, unit: int) -> dict:
    """A hardware queue: its ring, pointers and buffers. Split over XCCs, the compute ring gets one queue per XCC (target
    XCC i in CREATE_QUEUE's queue_percentage bits 8-15), all on the one ring and write pointer, each with its own read
    pointer (at +16 i of the pointer page), doorbell, EOP buffer and save area."""
    ring = self.alloc(self.ring_bytes, "host")
    pointers = self.alloc(PAGE, "host")  # rptr at +0, wptr at +8: one page, GPU-mapped, as MES requires of the wptr
    compute = queue_type == K.KFD_IOC_QUEUE_TYPE_COMPUTE
    ids, doorbells, rptrs, buffers = [], [], [], [ring, pointers]
    for xcc in range(self.split.xccs if compute and self.split else 1):
      eop = self.alloc(PAGE, "device") if compute else None
      cwsr_size, ctl_stack, cwsr_bytes = self._cwsr_sizes() if compute else (0, 0, 0)
      cwsr = self.alloc(cwsr_bytes, "device") if compute else None
      qid, doorbell = self.kfd.create_queue(queue_type, ring.addr, self.ring_bytes, pointers.addr + 16 * xcc, pointers.addr + 8,
                                            eop.addr if eop else 0, PAGE if eop else 0, cwsr.addr if cwsr else 0, cwsr_size, ctl_stack, xcc)
      # The CP reports a PM4 queue's read pointer as a 32-bit dword offset that wraps at the ring size (kfdtest PM4Queue::Rptr);
      # SDMA 4.0+ a 64-bit byte count that does not (ROCr BlitSdmaV4: "HW ring indices are monotonic")
      rptrs.append((ctypes.c_uint32 if compute else ctypes.c_uint64).from_address(pointers.host_addr + 16 * xcc))
      ids.append(qid), doorbells.append(doorbell), buffers.extend((eop, cwsr))
    # Write pointers are 64-bit and never wrap on both. A one-dword NOP fills the ring's end: PM4 NOP with count 0x3FFF, SDMA NOP (all zero).
    nop = self.dialect.pkt.PACKET3(self.dialect.pkt.PACKET3_NOP, 0x3FFF) & 0xffffffff if compute else 0
    return {"id": ids[0], "ids": ids, "ring": ring, "rptr": rptrs[0], "rptrs": rptrs, "wptr": ctypes.c_uint64.from_address(pointers.host_addr + 8),
            "put": 0, "doorbell": doorbells[0], "doorbells": doorbells, "unit": unit, "buffers": tuple(buffers), "type": queue_type,
            "size": self.ring_bytes // 4, "nop": nop}

  @staticmethod
  def _pending(q: dict) -> int:
    """Dwords written to a ring that its engine has not read yet, from the read pointer as the engine reports it."""
    if q["unit"] == 4: return max((q["put"] - r.value) % q["size"] for r in q["rptrs"])  # a wrapping dword offset: in-flight stays below the size; the slowest XCC's
    return q["put"] - q["rptr"].value // 4

  def _wait_for_space(self, name: str, q: dict, n: int) -> None:
    """Wait until `n` more dwords fit with at most size - 1 in flight (a full ring would read as an empty one)."""
    deadline = None
    while self._pending(q) + n > q["size"] - 1:
      if deadline is None: deadline = time.monotonic() + self.default_timeout
      elif time.monotonic() > deadline: raise HCQError(f"{name} ring full for {self.default_timeout}s: {self.queue_state()}")
      time.sleep(1e-5)

  def _advance(self, q: dict, n: int) -> None:
    q["put"] += n
    q["wptr"].value = q["put"] * 4 // q["unit"]
    for doorbell in q["doorbells"]: self.os.ring_doorbell(doorbell, q["wptr"].value)

  def _write_ring(self, name: str, words) -> None:
    """Copy dwords into a ring after the write pointer (waiting for space if the engine is behind), then ring the doorbell.
    A submission never straddles the ring's end: the rest is filled with NOPs and handed to the engine first, and the
    submission starts at 0 (kfdtest BaseQueue::PlacePacket, ROCr BlitSdma::PadRingToEnd)."""
    q = self.queues[name]
    n, size = len(words), q["size"]
    if n >= size: raise HCQError(f"{n} dwords do not fit the {name} ring of {size} (at most {size - 1} at once)")
    start = q["put"] % size
    if start + n > size:
      self._wait_for_space(name, q, size - start)
      np.ctypeslib.as_array((ctypes.c_uint32 * (size - start)).from_address(q["ring"].host_addr + 4 * start))[:] = q["nop"]
      self._advance(q, size - start)
      start = 0
    self._wait_for_space(name, q, n)
    ctypes.memmove(q["ring"].host_addr + 4 * start, words.buffer_info()[0], 4 * n)
    self._advance(q, n)

  def submit_pm4(self, q: AMDComputeQueue) -> None:
    with self.lock:  # the write pointer is shared by every thread, replaced by recover
      if not self.split: return self._write_ring("compute", q.words())
      self._barriers_taken += q.number_barriers(self._barriers_taken)  # in ring order: the lock covers numbering and writing
      if q.numbering: return self._write_ring("compute", q.words())  # a bound queue's jump: already an indirect buffer
      self._write_ring("compute", self._in_arena(q.words()))
      self._arena_busy.append((self._arena_put - len(q.words()), self.queues["compute"]["put"]))  # (its arena start, the ring past it)

  def _in_arena(self, words) -> "array":
    """Split over XCCs, a submission's packets go into the indirect-buffer arena (PRED_EXEC is refused in the ring) and
    the ring gets an INDIRECT_BUFFER to them. Arena space is reused once every XCC's read pointer is past the ring packet
    that ran it (a CP reads an IB's packets as it runs them)."""
    n, size = len(words), IB_ARENA_BYTES // 4
    if n > size: raise HCQError(f"{n} dwords do not fit the {size}-dword indirect-buffer arena: bind() the queue")
    if self._arena_put % size + n > size: self._arena_put += size - self._arena_put % size
    start, end = self._arena_put % size, self._arena_put + n
    q = self.queues["compute"]
    deadline = time.monotonic() + self.default_timeout
    while self._arena_busy and self._arena_busy[0][0] < end - size:  # the oldest IB still lies where this one goes
      if q["put"] - self._pending(q) >= self._arena_busy[0][1]: self._arena_busy.pop(0); continue
      if time.monotonic() > deadline: raise HCQError(f"indirect-buffer arena full for {self.default_timeout}s: {self.queue_state()}")
      time.sleep(1e-5)
    ctypes.memmove(self._arena.host_addr + 4 * start, words.buffer_info()[0], 4 * n)
    self._arena_put = end
    return AMDComputeQueue(self.dialect).indirect_buffer(self._arena.addr + 4 * start, n).words()

  def submit_sdma(self, q: AMDCopyQueue) -> None:
    with self.lock: self._write_ring("sdma", q.words())

  def compute_queue(self) -> AMDComputeQueue:
    return AMDComputeQueue(self.dialect, self.split)

  def copy_queue(self) -> AMDCopyQueue:
    return AMDCopyQueue(self.sdma_major)

  def scratch_slots(self) -> tuple[int, int]:
    """(rings, scratch slots per ring) from the KFD topology. gfx11+: one ring part per shader engine, each an engine's
    CUs times max_slots_scratch_cu, as ROCr sizes it (amd_aql_queue.cpp FillComputeTmpRingSize_Gfx11: NumShaderBanks =
    array_count / simd_arrays_per_engine in the thunk's topology.c, max waves = CUs x MaxSlotsScratchCU). gfx9.4.3: WAVES
    counts the slots of one XCC (FillComputeTmpRingSize: the queue's scratch / NumXcc), an XCC's CUs (simd_count /
    simd_per_cu / num_xcc) x max_slots_scratch_cu, per XCC's ring (ensure_scratch gives each XCC its own when split)."""
    p = self.node.properties
    if not self.dialect.waves_per_engine:
      return 1, p["simd_count"] // p["simd_per_cu"] // p.get("num_xcc", 1) * p["max_slots_scratch_cu"]
    engines = p["array_count"] // p["simd_arrays_per_engine"]
    return engines, p["array_count"] * p["cu_per_simd_array"] // engines * p["max_slots_scratch_cu"]

  def ensure_scratch(self, bytes_per_lane: int, lanes: int) -> None:
    """Scratch (private segment) for every wave the GPU can hold, at least `bytes_per_lane` per lane; grows, never shrinks.
    COMPUTE_TMPRING_SIZE counts a wave's space in the dialect's units (256 bytes on gfx11+, 1 KiB on gfx9) and WAVES the
    slots of a ring part (per shader engine on gfx11+: ROCr FillComputeTmpRingSize_Gfx11, radv radv_emit_compute_scratch;
    per XCC on gfx9.4.3), so the buffer holds WAVES slots for every part."""
    unit = self.dialect.scratch_unit
    per_wave = (bytes_per_lane * lanes + unit - 1) // unit * unit
    if per_wave <= self._scratch_per_wave: return
    parts, waves = self.scratch_slots()
    tmpring = self.dialect.regs.regCOMPUTE_TMPRING_SIZE
    most = {name: mask >> shift for name, (shift, mask) in tmpring.fields.items()}
    if waves > most["waves"] or per_wave // unit > most["wavesize"]:
      raise HCQError(f"{bytes_per_lane} bytes of private memory per lane ({waves} scratch slots per ring part) do not fit "
                     f"COMPUTE_TMPRING_SIZE: at most {most['wavesize'] * unit // lanes} bytes per lane and {most['waves']} slots")
    self.synchronize()
    if self._scratch is not None: self._scratch.free()
    xccs = self.split.xccs if self.split else 1  # split over XCCs: one ring per XCC (ROCr divides the queue's scratch by NumXcc)
    self._scratch = self.alloc(per_wave * waves * parts * xccs, "device")
    self._scratch_per_wave, self.scratch_base, self.scratch_xcc_bytes = per_wave, self._scratch.addr, per_wave * waves * parts
    self.tmpring_size = tmpring.encode(waves=waves, wavesize=per_wave // unit)
    self.scratch_generation += 1  # queues built for the old scratch are rebuilt

  def program(self, code_object: bytes, name: str | None = None) -> AMDProgram:
    """Load a kernel of a code object (ET_DYN from clang/lld or ROCm, or ET_REL from llvmlite)."""
    with self.lock: return AMDProgram(self, code_object, name)  # its scratch setup must not change under a launch

  @classmethod
  def canonical_spec(cls, spec: DevSpec) -> DevSpec:
    """AMD, KFD+AMD, MOCKKFD+AMD::gfx1100, ... resolved as _open_os and __init__ resolve them: the interface (the real
    GPU when there is one) and the arch (the first GPU node's), so every spelling of one GPU opens one Device."""
    from hcq.drivers.os import HostOS
    iface, arch, index, partition = spec.iface, spec.arch, spec.index, spec.partition
    if iface != "MOCKKFD":
      host = HostOS()
      nodes = gpu_nodes(host)
      if nodes and not arch:  # the arch of the node the index picks, and the index among the nodes of that arch
        node = _pick_node(spec, nodes)
        arch, index = node.arch, [n for n in nodes if n.arch == node.arch].index(node)
      if nodes and partition and in_partition(partition, partition_modes(host, _pick_node(DevSpec(spec.device, iface, None, arch, index, None), nodes))):
        partition = None  # the mode the GPU is in: naming it or not opens the same node
      if nodes or iface == "KFD": iface = "KFD"
    if iface in (None, "MOCKKFD"):
      from hcq.drivers.mock.amdgpu.gpu import board_for, boards_for
      boards_for(arch, partition)  # an arch no board emulates, or a mode it lacks: its error (listing the valid) before the notice
      if iface is None: _say_emulated(arch)
      iface, arch = "MOCKKFD", arch or board_for(None).gfx_target  # the board the mock kernel presents by default
      if partition == board_for(arch).compute_partition: partition = None  # the board's own mode (SPX/NPS1)
    return DevSpec(spec.device, iface, None, arch, index or None, partition)

  # ---- faults and hangs ----
  def _events(self) -> None:
    """The process's signal event page goes with its first CREATE_EVENT, once per process (kfd_events.c
    kfd_kmap_event_page refuses a second with EINVAL): a second GPU node opened by this process (another GPU, another
    partition) creates its events without one."""
    process = _kfd_process(self.os)
    page = None if process in _with_event_page else self.alloc(8 * 4096, "host")  # KFD_SIGNAL_EVENT_LIMIT slots
    self.event_page = page
    self._memory_event = self.kfd.create_event(K.KFD_IOC_EVENT_MEMORY, event_page=self._handles[page.addr] if page else 0).event_id
    if page: _with_event_page.add(process)
    self._hw_event = self.kfd.create_event(K.KFD_IOC_EVENT_HW_EXCEPTION).event_id
    self._last_fault_check = 0.0

  def check_faults(self) -> None:
    """Raise a GPUFault if the kernel reported a memory fault or a queue reset (polled at most every millisecond)."""
    now = time.monotonic()
    if now - self._last_fault_check < 1e-3: return
    self._last_fault_check = now
    with self.lock: self._check_fault_events()  # the queues' pointer pages stay mapped while we read them

  def _check_fault_events(self) -> None:
    result, data = self.kfd.wait_events([self._memory_event, self._hw_event], 0)
    if result != K.KFD_IOC_WAIT_RESULT_COMPLETE: return
    fault_gpu = data[0].memory_exception_data.gpu_id  # amdkfd signals every MEMORY event of the process (kfd_signal_vm_fault_event)
    if fault_gpu and fault_gpu != self.node.gpu_id: return  # another GPU node of this process faulted
    stuck = [name for name, q in self.queues.items() if self._pending(q)]
    queue = stuck[0] if stuck else None
    where = ""
    if queue:
      q = self.queues[queue]
      where = f" at ring offset {q['rptr'].value * q['unit'] % self.ring_bytes:#x}"
    details = getattr(self.os, "fault_details", lambda: [])()
    mem = data[0].memory_exception_data
    address = mem.va if mem.va else None
    message = f"{self}: " + (f"GPU page fault at {address:#x}" if address is not None else "queue error") + \
      (f" on the {queue} queue" if queue else "") + (f": {details[-1]}" if details else where)
    self.recover()
    # every queue is gone now (DESTROY_QUEUE returns once the engine has stopped it; the lock keeps new work out): a
    # fault signalled since the one read above came from the same work (another XCC's or engine's waves), not later work
    self.kfd.wait_events([self._memory_event, self._hw_event], 0)
    raise GPUFault(message, queue=queue, address=address, pc=getattr(self.os, "fault_pc", lambda: None)())

  def recover(self) -> None:
    """What a queue reset leaves: fresh queues, and the timeline caught up so later work does not wait on lost work.
    DESTROY_QUEUE returns once the engine has stopped (preempted) the queue, so its buffers are free to go."""
    with self.lock:
      refused = []
      for name, q in list(self.queues.items()):
        try:
          for qid in q["ids"]: self.kfd.destroy_queue(qid)
        except HCQError as e:  # not preempted: the hardware may still use its buffers, so they are left allocated
          refused.append(str(e))
        else:
          for b in q["buffers"]:
            if b is not None:
              self._free(b)
              b.freed = True
        self.queues[name] = self._queue(q["type"], q["unit"])
      if self.split: self._arena_busy = []  # the old queues are gone: nothing reads the arena
      self.timeline_signal.value = self.timeline_value - 1
    if refused: raise HCQError(f"{self}: queues reset, but the kernel could not preempt the old ones (their memory is kept): {'; '.join(refused)}")

  def queue_state(self) -> str:
    with self.lock:  # recover() unmaps the old queues' pointer pages
      parts = [f"{n} rptr {q['rptr'].value} wptr {q['wptr'].value}" for n, q in self.queues.items()] if hasattr(self, "queues") else []
    return super().queue_state() + ("; " + ", ".join(parts) if parts else "")
