"""NVDevice: an NVIDIA GPU through the RM — memory in one VA space, a channel group with a compute and a copy channel.

`NV+NV` talks to the real /dev/nvidiactl; `MOCKNV+NV` runs the same code against the emulated H200
(hcq.drivers.mock.nv). Plain `NV` takes the real GPU when there is one, and the emulated one otherwise, saying so once.

Opening: root client, device, subdevice, the class list (which picks the arch row), a VA space, UVM registration,
the usermode doorbell page, then one channel group (TSG) with a compute channel and a copy channel, each with a
GPFIFO ring, USERD, an error notifier and a pushbuffer ring. A submission copies its methods into the pushbuffer,
writes a GPFIFO entry pointing at them, moves GP_PUT in USERD and writes the channel's work-submit token to the
doorbell. A bound queue's methods stay in their own buffer: a submission is then one GPFIFO entry.
"""
from __future__ import annotations
import ctypes
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType

from hcq.autogen.nv import (classes as C, clc56f, clc6b5, clc6c0, clc7b5, clc7c0, clc86f, clc8b5, clc96f, clc9b5, clc9c0, clca6f, clcab5,
                            clcbc0, clcdc0, clcec0, ctrl0080, ctrl_fifo as F, nvos as O, nvstatus as S)
from hcq.buffer import Buffer
from hcq.device import Device, StagedCopies, TimestampSlot, launch_queues
from hcq.devstring import DevSpec
from hcq.drivers.nv.host_class import HOST_CLASSES, HostClass
from hcq.drivers.nv.queue import COMPUTE_SUBCHANNEL, COPY_SUBCHANNEL, NVComputeQueue, NVCopyQueue, NVQueue
from hcq.drivers.nv.rm import RMCallError, RMInterface
from hcq.drivers.va import AddressSpace, ReservedRange
from hcq.errors import GPUFault, HCQError
from hcq.sym import Variable

PAGE = 4096
GPFIFO_ENTRIES = 1024
PUSHBUFFER_BYTES = 1 << 20
STAGING_BYTES = 16 << 20
# Host buffers take their CPU and GPU address from one range of the process reserved below 1 TiB: GPFIFO entries
# (NVC56F_GP_ENTRY1_GET_HI) and host semaphores (NVC56F_SEM_ADDR_HI) carry 40-bit GPU addresses. 64 GiB per device, so
# a process holds a dozen devices. Device memory, which no CPU maps, takes GPU addresses from 1 TiB up (16 TiB).
VA_SPACE, VA_BELOW = 1 << 36, 1 << 40
DEVICE_VA_BASE, DEVICE_VA_SIZE = 1 << 40, 1 << 44
USERD_BYTES = ctypes.sizeof(clc56f.struct_Nvc56fControl_struct)
_GP_GET, _GP_PUT = (getattr(clc56f.struct_Nvc56fControl_struct, f).offset // 4 for f in ("GPGet", "GPPut"))  # USERD words
_said_emulated = False


@dataclass(frozen=True)
class NVArch:
  """One row of the arch table: the classes a GPU generation's channels use, and its QMD version (for exec, part 2).
  Host methods and pushbuffer formats come from the row's GPFIFO class (`host`: its header over clc56f's, see
  hcq.drivers.nv.host_class)."""
  name: str
  sm: str
  gpfifo: int
  compute: int
  copy: int
  usermode: int
  qmd: int
  copy_module: ModuleType = clc8b5

  @cached_property
  def host(self) -> HostClass:
    return HOST_CLASSES[self.gpfifo]

  def m(self, name: str) -> int:
    """A host method's byte offset (or a host constant) in the row's GPFIFO class."""
    return self.host.m(name)

  c = m  # host constants share the prefix

  def header(self, subchannel: int, method: int, count: int) -> int:
    return self.host.register("DMA_INCR").encode(opcode=self.c("DMA_INCR_OPCODE_VALUE"), count=count, subchannel=subchannel, address=method >> 2)

  def sem_execute(self, **fields: int) -> int:
    return self.host.register("SEM_EXECUTE").encode(**fields)

  def ce(self, name: str) -> int:
    """A copy-class method's byte offset (the copy classes keep their methods at the same offsets from c6b5 on)."""
    return getattr(self.copy_module, f"{self._ce_prefix}_{name}")

  @property
  def _ce_prefix(self) -> str:
    return self.copy_module.__name__.rsplit(".", 1)[1].upper().replace("CL", "NV")

  def copy_launch(self) -> int:
    """LAUNCH_DMA for one pitch-linear line, non-pipelined, flushed, without semaphore or interrupt."""
    p = self._ce_prefix
    g = lambda n: getattr(self.copy_module, f"{p}_LAUNCH_DMA_{n}")
    return self.copy_module.register(f"{p}_LAUNCH_DMA").encode(
      data_transfer_type=g("DATA_TRANSFER_TYPE_NON_PIPELINED"), flush_enable=g("FLUSH_ENABLE_TRUE"), src_memory_layout=g("SRC_MEMORY_LAYOUT_PITCH"),
      dst_memory_layout=g("DST_MEMORY_LAYOUT_PITCH"), multi_line_enable=g("MULTI_LINE_ENABLE_FALSE"))

  def set_object(self, cls: int) -> int:
    return self.host.register("SET_OBJECT").encode(nvclass=cls)


# Newest first: the first row whose compute class the GPU lists is the GPU's.
ARCHS = (
  NVArch("Blackwell", "sm_120", clca6f.BLACKWELL_CHANNEL_GPFIFO_B, clcec0.BLACKWELL_COMPUTE_B, clcab5.BLACKWELL_DMA_COPY_B, C.BLACKWELL_USERMODE_A, 5, copy_module=clcab5),
  NVArch("Blackwell", "sm_100", clc96f.BLACKWELL_CHANNEL_GPFIFO_A, clcdc0.BLACKWELL_COMPUTE_A, clc9b5.BLACKWELL_DMA_COPY_A, C.BLACKWELL_USERMODE_A, 5, copy_module=clc9b5),
  NVArch("Hopper", "sm_90", clc86f.HOPPER_CHANNEL_GPFIFO_A, clcbc0.HOPPER_COMPUTE_A, clc8b5.HOPPER_DMA_COPY_A, C.HOPPER_USERMODE_A, 4, copy_module=clc8b5),
  NVArch("Ada", "sm_89", clc56f.AMPERE_CHANNEL_GPFIFO_A, clc9c0.ADA_COMPUTE_A, clc7b5.AMPERE_DMA_COPY_B, C.AMPERE_USERMODE_A, 3, copy_module=clc7b5),
  NVArch("Ampere", "sm_86", clc56f.AMPERE_CHANNEL_GPFIFO_A, clc7c0.AMPERE_COMPUTE_B, clc7b5.AMPERE_DMA_COPY_B, C.AMPERE_USERMODE_A, 3, copy_module=clc7b5),
  NVArch("Ampere", "sm_80", clc56f.AMPERE_CHANNEL_GPFIFO_A, clc6c0.AMPERE_COMPUTE_A, clc6b5.AMPERE_DMA_COPY_A, C.AMPERE_USERMODE_A, 3, copy_module=clc6b5),
)


def pick_arch(class_list: list[int]) -> NVArch:
  have = set(class_list)
  for row in ARCHS:
    if row.compute in have:
      missing = [c for c in (row.gpfifo, row.copy, row.usermode) if c not in have]
      if missing: raise HCQError(f"the GPU lists {row.name}'s compute class {row.compute:#x} but not {', '.join(f'{c:#x}' for c in missing)}")
      return row
  raise HCQError(f"no compute class of a known arch in the GPU's class list ({len(class_list)} classes); hcq knows "
                 + ", ".join(f"{r.name} {r.sm} ({r.compute:#x})" for r in ARCHS))


def _open_os(spec: DevSpec):
  """The host's OS layer, or the mock RM's for MOCKNV (and for NV on a machine without an NVIDIA GPU)."""
  global _said_emulated
  from hcq.drivers.os import HostOS
  if spec.iface != "MOCKNV":
    host = HostOS()
    if host.exists("/dev/nvidiactl") or spec.iface == "NV": return host
  from hcq.drivers.mock.nv.os import MockNVOS
  if spec.iface is None and not _said_emulated:
    print("hcq: no NVIDIA GPU found; NV runs on the emulated H200 (MOCKNV+NV)", file=sys.stderr)
    _said_emulated = True
  return MockNVOS()


@dataclass
class NVChannel:
  """A GPFIFO channel as the driver keeps it."""
  name: str
  handle: int
  token: int                 # the work-submit token the doorbell takes
  engine_class: int          # bound on `subchannel` with SET_OBJECT
  subchannel: int
  ring: Buffer               # GPFIFO entries, then USERD (512-byte aligned)
  gpfifo: memoryview         # the ring's entries as 64-bit words (memoryviews: every launch indexes them, numpy scalars cost more)
  userd: memoryview          # USERD as 32-bit words
  notifier: Buffer           # the RM's error notifier (NvNotification)
  pushbuffer: Buffer
  put: int = 0               # GPFIFO entries written (never wraps)
  pb_pos: int = 0
  pb_inflight: deque = field(default_factory=deque)  # (entry index, start, end) of pushbuffer segments the GPU may still read
  pb_words: memoryview = field(init=False)           # the pushbuffer as uint32 words, written by submissions

  def __post_init__(self) -> None:
    self.pb_words = memoryview((ctypes.c_uint32 * (self.pushbuffer.nbytes // 4)).from_address(self.pushbuffer.host_addr)).cast("B").cast("I")


class NVDevice(StagedCopies, Device):
  """See the module docstring."""
  timestamp_frequency = 1e9  # the host semaphore's release timestamp is the global timer, in nanoseconds
  va_space = VA_SPACE  # bytes of address space reserved at open (a class attribute, so a test can make it small)

  def __init__(self, spec: DevSpec, os_layer=None, gpfifo_entries: int = GPFIFO_ENTRIES):
    if gpfifo_entries < 2 or gpfifo_entries & (gpfifo_entries - 1): raise ValueError(f"gpfifo_entries must be a power of two >= 2, got {gpfifo_entries}")
    self.spec, self.gpfifo_entries = spec, gpfifo_entries
    self.os = os_layer or _open_os(spec)
    self.rm = rm = RMInterface(self.os)
    self.device = rm.alloc(rm.client, C.NV01_DEVICE_0, C.struct_NV0080_ALLOC_PARAMETERS(deviceId=0))
    self.subdevice = rm.alloc(self.device, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS(subDeviceId=0))
    classes = rm.control(self.device, ctrl0080.NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2, ctrl0080.NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS())
    self.class_list = list(classes.classList[:classes.numClasses])
    self.arch = pick_arch(self.class_list)
    h = self.arch.host  # the GP entry fields, looked up once: every submission encodes an entry
    (get_shift, _), (hi_shift, hi_mask), (len_shift, len_mask) = h.field("GP_ENTRY0", "get"), h.field("GP_ENTRY1", "get_hi"), h.field("GP_ENTRY1", "length")
    self._gp_fields = get_shift, hi_shift, hi_mask >> hi_shift, len_shift, len_mask >> len_shift
    self.vaspace = rm.alloc(self.device, C.FERMI_VASPACE_A, O.NV_VASPACE_ALLOCATION_PARAMETERS())
    self.uuid = rm.gpu_uuid(self.subdevice)  # "GPU-...", as nvidia-smi shows it
    from hcq.autogen.nv import ctrl2080 as X
    # the SMs local memory is sized for (NVK's nvk_slm_area: enabled TPCs x SMs per TPC x warps per SM)
    self.tpc_count, self.sms_per_tpc, self.max_warps_per_sm = rm.gr_info(
      self.subdevice, X.NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_COUNT, X.NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC,
      X.NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM)
    if not (self.tpc_count and self.sms_per_tpc and self.max_warps_per_sm):
      raise HCQError(f"the RM reports {self.tpc_count} TPCs, {self.sms_per_tpc} SMs per TPC, {self.max_warps_per_sm} warps per SM: no SMs to run kernels on")
    rm.uvm_register(rm.gpu_uuid(self.subdevice, binary=True))
    self.usermode = rm.alloc(self.subdevice, self.arch.usermode)
    self.doorbell = rm.map_cpu(self.subdevice, self.usermode, PAGE) + C.NVC361_NOTIFY_CHANNEL_PENDING
    self._mem_lock = threading.Lock()
    self._memory: dict[int, tuple[int, int, int, bool]] = {}  # GPU address -> (RM handle, bytes, address taken from the range, CPU pages there)
    self._range = ReservedRange(self.os, self.va_space, below=VA_BELOW, granule=PAGE)
    self._device_va = AddressSpace(DEVICE_VA_BASE, DEVICE_VA_SIZE, granule=PAGE)
    super().__init__(spec)
    self.staging = self.alloc(STAGING_BYTES, "host")
    self._staging_lock = threading.Lock()
    self._make_channels()

  # ---- memory ----
  def _alloc(self, nbytes: int, kind: str) -> Buffer:
    size = (nbytes + PAGE - 1) // PAGE * PAGE
    rm, host = self.rm, kind != "device"
    va = self._take(size, host)  # host, uncached, cpu: the process's own pages there, described to the RM
    try:
      if host: handle = rm.alloc_os_descriptor(self.device, va, size)
      else: handle = rm.alloc(self.device, C.NV01_MEMORY_LOCAL_USER, O.NV_MEMORY_ALLOCATION_PARAMS(owner=self.device, type=O.NVOS32_TYPE_IMAGE, size=size))
    except BaseException:
      self._give_back(va, size, host)
      raise
    gpu = self._map(handle, size, va)
    with self._mem_lock: self._memory[gpu] = (handle, size, va, host)
    return Buffer(self, gpu, nbytes, kind, va if host else None, owner=handle)

  def _take(self, size: int, host: bool) -> int:
    """The address a new buffer asks the RM to map it at: host memory from the CPU range below 1 TiB (its own pages
    placed there), device memory from the GPU-only range above it."""
    if host: return self._range.take(size, cpu=True)
    with self._mem_lock: return self._device_va.alloc(size)

  def _give_back(self, va: int, size: int, host: bool) -> None:
    if host: self._range.give_back(va, size, cpu=True)
    else:
      with self._mem_lock: self._device_va.free(va, size)

  def _map(self, handle: int, size: int, va: int) -> int:
    """The GPU address of a memory object: `va` from the reserved range, so that a host buffer's CPU and GPU addresses are
    equal as on AMD; where the RM refuses that address (taken by its own mappings, or outside the VA space), one it picks."""
    try:
      return self.rm.map_dma(self.device, self.vaspace, handle, size, fixed_va=va)
    except RMCallError as e:
      if e.status not in (S.NV_ERR_NO_MEMORY, S.NV_ERR_INVALID_ARGUMENT, S.NV_ERR_INVALID_OFFSET): raise
    return self.rm.map_dma(self.device, self.vaspace, handle, size)

  def _free(self, buf: Buffer) -> None:
    with self._mem_lock: handle, size, va, host = self._memory.pop(buf.addr)
    self.rm.unmap_dma(self.device, self.vaspace, handle, buf.addr)
    self.rm.free(handle)
    self._give_back(va, size, host)

  # ---- channels ----
  def _make_channels(self) -> None:
    rm = self.rm
    self.group = rm.alloc(self.device, C.KEPLER_CHANNEL_GROUP_A,
                          O.NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS(hVASpace=self.vaspace, engineType=C.NV2080_ENGINE_TYPE_GRAPHICS))
    # One subcontext (VEID 0, SUBCONTEXT_SYNC) in our VA space, named by both channels: without it the RM puts the group
    # in legacy mode with context shares of its own (kernel_channel.c kchannelConstruct_IMPL)
    self.context_share = rm.alloc(self.group, C.FERMI_CONTEXT_SHARE_A,
                                  O.NV_CTXSHARE_ALLOCATION_PARAMETERS(hVASpace=self.vaspace, flags=O.NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC))
    self.channels = {"compute": self._channel("compute", C.NV2080_ENGINE_TYPE_GRAPHICS, self.arch.compute, COMPUTE_SUBCHANNEL),
                     "copy": self._channel("copy", C.NV2080_ENGINE_TYPE_COPY0, self.arch.copy, COPY_SUBCHANNEL)}
    rm.control(self.group, F.NVA06C_CTRL_CMD_GPFIFO_SCHEDULE, F.NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS(bEnable=1))
    for name, ch in self.channels.items():  # bind each channel's engine class to its subchannel
      q = (NVComputeQueue if name == "compute" else NVCopyQueue)(self.arch)
      q.method(ch.subchannel, self.arch.m("SET_OBJECT"), self.arch.set_object(ch.engine_class))
      with self.lock: self.submit_methods(name, q)

  def _channel(self, name: str, engine: int, engine_class: int, subchannel: int) -> NVChannel:
    rm, n = self.rm, self.gpfifo_entries
    userd_off = (n * 8 + 511) // 512 * 512
    ring = self.alloc(userd_off + USERD_BYTES, "host")
    notifier = self.alloc(PAGE, "host")
    p = O.NV_CHANNEL_ALLOC_PARAMS(hObjectError=notifier._owner, gpFifoOffset=ring.addr, gpFifoEntries=n, hContextShare=self.context_share, engineType=engine)
    p.hUserdMemory[0], p.userdOffset[0] = ring._owner, userd_off
    handle = rm.alloc(self.group, self.arch.gpfifo, p)
    rm.alloc(handle, engine_class)
    token = rm.control(handle, F.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN, F.NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS()).workSubmitToken
    words = lambda fmt, nbytes, at: memoryview((ctypes.c_uint8 * nbytes).from_address(at)).cast("B").cast(fmt)
    return NVChannel(name, handle, token, engine_class, subchannel, ring, words("Q", 8 * n, ring.host_addr),
                     words("I", USERD_BYTES, ring.host_addr + userd_off), notifier, self.alloc(PUSHBUFFER_BYTES, "host"))

  def _gp_get(self, ch: NVChannel) -> int:
    """Entries the GPU has consumed, never wrapping: from GP_GET in USERD, which wraps at the ring size."""
    return ch.put - ((ch.put - ch.userd[_GP_GET]) % self.gpfifo_entries)

  def _wait(self, ch: NVChannel, ready, what: str) -> None:
    deadline = None
    while not ready():
      if deadline is None: deadline = time.monotonic() + self.default_timeout
      elif time.monotonic() > deadline: raise HCQError(f"{ch.name} channel: {what} for {self.default_timeout}s: {self.queue_state()}")
      self.check_faults()
      time.sleep(1e-5)

  def submit_methods(self, name: str, q: NVQueue) -> None:
    """Copy `q`'s methods into the channel's pushbuffer and push one GPFIFO entry pointing at them."""
    words = q.words()
    with self.lock:
      ch = self.channels[name]
      addr = self._pushbuffer_space(ch, 4 * len(words))
      at = (addr - ch.pushbuffer.addr) >> 2
      ch.pb_words[at:at + len(words)] = words  # a memoryview copy keeps the GIL (ctypes.memmove hands it to the emulator's threads)
      self._push(ch, self.gp_entry(addr, len(words)))

  def push_methods(self, name: str, addr: int, nwords: int) -> None:
    """Push one GPFIFO entry for `nwords` of methods the caller wrote at GPU address `addr` (host memory the GPU reads
    until the entry is consumed), with the lock held."""
    self._push(self.channels[name], self.gp_entry(addr, nwords))

  def gp_entry(self, addr: int, nwords: int) -> int:
    """The 64-bit GPFIFO entry that has the GPU fetch `nwords` of methods at GPU address `addr`."""
    get_shift, hi_shift, hi_limit, len_shift, len_limit = self._gp_fields
    hi = addr >> 32
    if not (0 <= hi <= hi_limit and 0 <= nwords <= len_limit):  # encode raises, saying which field does not fit
      self.arch.host.register("GP_ENTRY1").encode(get_hi=hi, length=nwords)
    return (hi << hi_shift | nwords << len_shift) << 32 | ((addr & 0xFFFFFFFF) >> 2) << get_shift

  def push_entry(self, name: str, entry: int) -> None:
    """Write a GPFIFO entry once the ring has room, move GP_PUT in USERD and ring the doorbell with the channel's token."""
    with self.lock: self._push(self.channels[name], entry)

  def _push(self, ch: NVChannel, entry: int) -> None:
    """push_entry with the lock held."""
    n = self.gpfifo_entries
    if (ch.put - ch.userd[_GP_GET]) % n >= n - 1: self._wait(ch, lambda: ch.put - self._gp_get(ch) < n - 1, "the GPFIFO is full")
    ch.gpfifo[ch.put % n] = entry
    ch.put += 1
    ch.userd[_GP_PUT] = ch.put % n
    self.os.mmio_write32(self.doorbell, ch.token)

  def _pushbuffer_space(self, ch: NVChannel, nbytes: int) -> int:
    """GPU address of `nbytes` in the channel's pushbuffer ring, after the GPU has read the segments they overlap.
    Segments are placed in order round the ring, so from the write position on the oldest come first: the new span (on a
    wrap, the skipped tail with it) can overlap only a prefix of the in-flight list, and the scan stops at the first
    segment past it."""
    size = ch.pushbuffer.nbytes
    if nbytes > size: raise HCQError(f"{nbytes} bytes of methods exceed the {size}-byte pushbuffer; bind large queues instead")
    pos = ch.pb_pos % size
    start = pos if pos + nbytes <= size else 0
    span = nbytes if start == pos else size - pos + nbytes  # bytes from the write position on that the segment takes
    inflight, got = ch.pb_inflight, self._gp_get(ch)
    while inflight:
      idx, s, _ = inflight[0]
      if got <= idx:
        if (s - pos) % size >= span: break  # the oldest segment in flight lies past the new one: so do all younger ones
        self._wait(ch, lambda: self._gp_get(ch) > idx, "the pushbuffer is full")
        got = self._gp_get(ch)
      inflight.popleft()
    ch.pb_pos = start + nbytes
    inflight.append((ch.put, start, start + nbytes))
    return ch.pushbuffer.addr + start

  def program(self, code, name=None, **kwargs):
    """A kernel from a cubin, PTX text or LLVM IR (see hcq.drivers.nv.program; kwargs: NVProgram's stack_size)."""
    from hcq.drivers.nv.program import NVProgram
    self.kernargs.align = max(self.kernargs.align, 256)  # each launch block starts with a QMD (SEND_PCAS_A takes address >> 8)
    return NVProgram(self, code, name, **kwargs)

  # ---- launches: the QMD's release semaphores signal the timeline (and a timed launch's end) ----
  def _launch_queue(self, program, gs: tuple[int, int, int], ls: tuple[int, int, int], timed: bool) -> NVComputeQueue:
    """wait for the previous submission, the start time (timed), the QMD: no WFI and no host release after it, as
    RELEASE1/0 of the QMD carry the timeline value and the end time (NVProgram.place_kernargs fills them)."""
    def build() -> NVComputeQueue:
      q = self.compute_queue().wait(self.timeline_signal, Variable("wait"))
      if timed: q.timestamp(TimestampSlot(Variable("start")))
      return q.exec(program, Variable("kernargs"), gs, ls, barrier=False)
    return launch_queues(program).get((gs, ls, timed), build)

  def _place_launch(self, program, kernargs: bytes | bytearray, end) -> int:
    return program.place_kernargs(kernargs, self.timeline_value, self.timeline_signal.value_addr, end.value_addr if end is not None else 0)

  def _end_timestamp(self, end, value: int) -> int:
    end.wait(value)  # RELEASE0 wrote the end time with the value: the order of a QMD's releases is not relied on here
    return end.timestamp

  def compute_queue(self) -> NVComputeQueue:
    return NVComputeQueue(self.arch)

  def copy_queue(self) -> NVCopyQueue:
    return NVCopyQueue(self.arch)

  # ---- faults and hangs ----
  def check_faults(self) -> None:
    """Raise GPUFault if the RM wrote a channel's error notifier (a channel error: an Xid); the device recovers first."""
    for name, ch in getattr(self, "channels", {}).items():
      n = O.NvNotification.from_address(ch.notifier.host_addr)
      if n.status == 0: continue
      xid, details = n.info32, getattr(self.os, "fault_details", lambda: [])()
      message = f"{self}: channel error (Xid {xid}) on the {name} channel" + (f": {details[-1]}" if details else "")
      self.recover()
      raise GPUFault(message, queue=name)

  def recover(self) -> None:
    """Free the channel group (the RM stops its channels) and make fresh channels; the timeline catches up."""
    with self.lock:
      old = self.channels
      self.rm.free(self.group)
      for ch in old.values():
        for b in (ch.ring, ch.notifier, ch.pushbuffer):
          self._free(b)
          b.freed = True
      self._make_channels()
      self.timeline_signal.value = self.timeline_value - 1

  def queue_state(self) -> str:
    parts = []
    for name, ch in getattr(self, "channels", {}).items():
      get = ch.userd[_GP_GET]
      parts.append(f"{name} GPFIFO get {get} put {ch.put % self.gpfifo_entries}")
    return super().queue_state() + ("; " + ", ".join(parts) if parts else "")
