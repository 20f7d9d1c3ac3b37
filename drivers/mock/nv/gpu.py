"""The emulated NVIDIA GPU behind MOCKNV: one PBDMA thread per GPFIFO channel, host semaphores, a copy engine.

Each channel's thread reads the GPFIFO ring between GP_GET and GP_PUT (USERD), fetches each entry's pushbuffer
segment through the VA space, and decodes the method stream strictly with its own GPFIFO class's table
(hcq.drivers.nv.host_class: the class's header over clc56f's, whose GPFIFO-entry and method-header formats every class
shares). A channel takes only the host methods its class's header defines (a Hopper channel no NOP: clc86f.h omits
it; stricter where unsure). Host methods (below 0x100) run on any subchannel; methods above go to the class bound
there with SET_OBJECT. What the engine
refuses (an unknown method, an unbound subchannel, a malformed entry or header, an access outside every mapping)
stops the channel where it is and is reported as the RM reports a channel error: the error notifier is written and
an Xid is logged (kernel_channel.c krcErrorSetNotifier / rcdbAddRmError). Memory is host-backed
(hcq.asm.emu.memory.VirtualMemory): an access outside the mapped ranges is an MMU fault.
"""
from __future__ import annotations
import ctypes
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from hcq.asm.emu.memory import PageFault, VirtualMemory
from hcq.autogen.nv import clc56f, clc86f, clc8b5 as CE, nverror as E, nvos as O, nvstatus as S
from hcq.autogen.nv.clcbc0 import HOPPER_COMPUTE_A
from hcq.drivers.mock.nv.compute import ComputeClass
from hcq.drivers.mock.nv.errors import ChannelError
from hcq.drivers.nv.host_class import HOST_CLASSES, HostClass

GP_ENTRY_BYTES = 8
HOST_METHODS_END = 0x100  # methods below this are the host's (PBDMA), on every subchannel (clc56f.h)


@dataclass(frozen=True)
class NVBoardSpec:
  """What the emulated board reports: an H200 (GH100, sm_90) as NVIDIA's 580 driver presents it."""
  name: str = "NVIDIA H200"
  pci_device_id: int = 0x2335
  arch: str = "sm_90"
  vram_bytes: int = 143771_058_176  # 137 GiB usable of 141 GB, as nvidia-smi -q shows an H200 SXM
  # engine classes the GPU supports (NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 lists these among others)
  gpfifo_classes: tuple[int, ...] = (clc86f.HOPPER_CHANNEL_GPFIFO_A, clc56f.AMPERE_CHANNEL_GPFIFO_A)  # GH100 lists both (g_gpu_class_list.c)
  copy_class: int = CE.HOPPER_DMA_COPY_A
  compute_class: int = HOPPER_COMPUTE_A
  uuid: str = "GPU-6e3a0c4f-2d1b-4f0e-9a8c-0000000c0de0"  # made up; any GPU-<16 bytes as hex> does
  driver_version: str = "580.142"
  pci_slot: str = "0000:19:00.0"  # where an HGX board's first GPU often sits; made up
  temperature_c: int = 34  # an idle H200's GPU temperature, about what nvidia-smi shows
  # the graphics engine as NV2080_CTRL_CMD_GR_GET_INFO_V2 reports it: GH100 has 8 GPCs of up to 9 TPCs of 2 SMs; an
  # H200 SXM enables 132 SMs (66 TPCs); 64 warps (2048 threads) per SM (CUDA C Programming Guide, compute capability 9.0)
  gpcs: int = 8
  tpcs_per_gpc: int = 9
  tpc_count: int = 66
  sms_per_tpc: int = 2
  max_warps_per_sm: int = 64


@dataclass
class Channel:
  """One GPFIFO channel as the PBDMA sees it."""
  chid: int
  engine: str                  # "compute" or "copy": which engine classes SET_OBJECT may bind
  host: HostClass              # its GPFIFO class's host methods
  gpfifo_va: int
  entries: int
  userd: np.ndarray            # the USERD page's words (Nvc56fControl_struct), host-backed
  notifier: np.ndarray | None  # the error notifier (NvNotification array), or None
  classes: dict[int, int] = field(default_factory=dict)     # subchannel -> bound class
  state: dict[int, int] = field(default_factory=dict)       # method offset -> last value written (per class state)
  doorbell: threading.Event = field(default_factory=threading.Event)
  scheduled: threading.Event = field(default_factory=threading.Event)  # its TSG is on the runlist (NVA06C_CTRL_CMD_GPFIFO_SCHEDULE)
  stopped: bool = False
  error: str | None = None
  thread: threading.Thread | None = None
  methods: int = 0


_CTRL = {name: getattr(clc56f.struct_Nvc56fControl_struct, name).offset // 4 for name in ("GPGet", "GPPut")}


class HostDecoder:
  """One GPFIFO class's decoding table: the fields the PBDMA reads as (shift, mask) pairs (no dict per word), the
  host methods the class defines and what runs each."""

  HANDLED = ("SET_OBJECT", "NOP", "SEM_ADDR_LO", "SEM_ADDR_HI", "SEM_PAYLOAD_LO", "SEM_PAYLOAD_HI", "SEM_EXECUTE", "WFI",
             "MEM_OP_A", "MEM_OP_B", "MEM_OP_C", "MEM_OP_D", "NON_STALL_INTERRUPT")

  def __init__(self, host: HostClass, handlers: dict[str, Callable | None]):
    self.host = host
    f = host.field
    self.hdr = {k: f("DMA_INCR", k) for k in ("opcode", "count", "subchannel", "address")}
    self.immd_data = f("DMA_IMMD", "data")
    self.gp0 = {k: f("GP_ENTRY0", k) for k in ("fetch", "get")}
    self.gp1 = {k: f("GP_ENTRY1", k) for k in ("get_hi", "length", "level", "opcode")}
    self.sem_lo, self.sem_hi = f("SEM_ADDR_LO", "offset"), f("SEM_ADDR_HI", "offset")
    self.sem = {k: f("SEM_EXECUTE", k) for k in ("operation", "payload_size", "release_timestamp", "release_wfi")}
    self.set_object = f("SET_OBJECT", "nvclass")
    self.mem_op = f("MEM_OP_D", "operation")
    own = lambda name: isinstance(getattr(host.module, f"{host.prefix}_{name}", None), int)
    self.methods = {host.m(name): handlers.get(name) for name in self.HANDLED if own(name)}
    self.c = {name: host.c(name) for name in (  # the method offsets and constants the PBDMA compares against
      "GP_ENTRY1_OPCODE_NOP", "GP_ENTRY0_FETCH_UNCONDITIONAL", "GP_ENTRY1_LEVEL_MAIN", "DMA_INCR_OPCODE_VALUE", "DMA_NONINCR_OPCODE_VALUE",
      "DMA_ONEINCR_OPCODE_VALUE", "DMA_IMMD_OPCODE_VALUE", "SEM_ADDR_LO", "SEM_ADDR_HI", "SEM_PAYLOAD_LO", "SEM_PAYLOAD_HI",
      "SEM_EXECUTE_PAYLOAD_SIZE_64BIT", "SEM_EXECUTE_OPERATION_RELEASE", "SEM_EXECUTE_OPERATION_ACQUIRE",
      "SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ", "MEM_OP_D_OPERATION_MEMBAR", "SEM_EXECUTE_RELEASE_WFI_EN")}


def bits(value: int, field: tuple[int, int]) -> int:
  """One field of a word, from its (shift, mask)."""
  return (value & field[1]) >> field[0]


class MockNVGPU:
  """The GPU model: the process's VA space (`mem`) and its channels; `on_error(channel, message, xid)` reports errors."""

  def __init__(self, board: NVBoardSpec = NVBoardSpec(), on_error: Callable[[Channel, str, int], None] | None = None):
    self.board, self.mem, self.on_error = board, VirtualMemory(), on_error
    self.channels: dict[int, Channel] = {}
    self.t0 = time.monotonic_ns()
    self.busy_ns = 0  # time channels spent running entries (the utilisation samples' source)
    self._busy_lock = threading.Lock()
    self.ce_upper = CE.register("NVC8B5_OFFSET_IN_UPPER").fields["upper"]  # OFFSET_OUT_UPPER has the same field
    self.launch = CE.register("NVC8B5_LAUNCH_DMA")
    handlers = {"SET_OBJECT": self._set_object, "SEM_EXECUTE": self._sem_execute, "MEM_OP_D": self._mem_op, "WFI": self._wfi}
    self.decoders = {cls: HostDecoder(host, handlers) for cls, host in HOST_CLASSES.items() if cls in board.gpfifo_classes}
    self.compute, self._compute_state = ComputeClass(self.mem, self.clock, board.tpc_count, board.sms_per_tpc, board.max_warps_per_sm), {}  # the compute class and each channel's state of it
    # copy class methods the engine takes (clc8b5.h); others stop the channel
    self.ce = {n: getattr(CE, f"NVC8B5_{n}") for n in ("NOP", "OFFSET_IN_UPPER", "OFFSET_IN_LOWER", "OFFSET_OUT_UPPER", "OFFSET_OUT_LOWER",
                                                        "PITCH_IN", "PITCH_OUT", "LINE_LENGTH_IN", "LINE_COUNT", "LAUNCH_DMA")}
    self.copy_methods = set(self.ce.values())
    self.copy_state = self.copy_methods - {self.ce["LAUNCH_DMA"]}  # methods that only set state the launch reads

  def clock(self) -> int:
    """The GPU's global timer in nanoseconds (what semaphore release timestamps carry)."""
    return time.monotonic_ns() - self.t0

  # ---- channels ----
  def add_channel(self, ch: Channel) -> None:
    self.channels[ch.chid] = ch
    ch.thread = threading.Thread(target=self._run, args=(ch,), name=f"mocknv-pbdma-{ch.chid}", daemon=True)
    ch.thread.start()

  def remove_channel(self, chid: int) -> None:
    """Stop a channel (the RM preempts it before freeing); returns once its thread no longer touches memory."""
    ch = self.channels.pop(chid, None)
    if ch is None: return
    ch.stopped = True
    ch.scheduled.set()
    ch.doorbell.set()
    if ch.thread is not threading.current_thread(): ch.thread.join(5)

  def doorbell(self, token: int) -> None:
    """The usermode NOTIFY_CHANNEL_PENDING write: the token is the channel id (GET_WORK_SUBMIT_TOKEN gives it)."""
    ch = self.channels.get(token)
    if ch is not None: ch.doorbell.set()

  def _run(self, ch: Channel) -> None:
    while not ch.stopped:
      ch.doorbell.wait(0.05)
      ch.doorbell.clear()
      if not ch.scheduled.is_set(): continue  # a channel whose group is not scheduled does not run; GP_PUT just waits
      try:
        t0 = time.monotonic_ns()
        while not ch.stopped and ch.error is None and (get := int(ch.userd[_CTRL["GPGet"]])) != (put := int(ch.userd[_CTRL["GPPut"]])):
          if put >= ch.entries: raise ChannelError(f"GP_PUT {put} is outside the {ch.entries}-entry GPFIFO", E.ROBUST_CHANNEL_PBDMA_ERROR)
          self._gp_entry(ch, get)
          ch.userd[_CTRL["GPGet"]] = (get + 1) % ch.entries
        self._drain(ch)  # nothing more to fetch: the grids in flight complete
        with self._busy_lock: self.busy_ns += time.monotonic_ns() - t0
      except ChannelError as e:
        self._fail(ch, str(e), e.xid)
      except PageFault as e:
        self._fail(ch, f"MMU fault: {e}", E.ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT)
      except _Stopped:
        return

  def _drain(self, ch: Channel) -> None:
    """Complete the channel's grids in flight (compute.py: at a WFI, an acquire, a membar, or when the channel idles)."""
    if ch.engine == "compute" and ch.error is None: self.compute.drain(self._compute_state.setdefault(ch.chid, {}))

  def _fail(self, ch: Channel, message: str, xid: int) -> None:
    if ch.stopped: return
    ch.error = f"channel {ch.chid} ({ch.engine}): {message}"
    if self.on_error: self.on_error(ch, ch.error, xid)

  def _gp_entry(self, ch: Channel, get: int) -> None:
    d = self.decoders[ch.host.cls]
    e0, e1 = (int(w) for w in self.mem.view(ch.gpfifo_va + get * GP_ENTRY_BYTES, GP_ENTRY_BYTES).view(np.uint32))
    length = bits(e1, d.gp1["length"])
    if length == 0:  # a control entry: only NOP is run; the others (ILLEGAL, CRC checks) are not used by user space
      if (op := bits(e1, d.gp1["opcode"])) != d.c["GP_ENTRY1_OPCODE_NOP"]:
        raise ChannelError(f"GPFIFO entry {get}: control opcode {op} (only NOP is emulated; stricter than unsure hardware)", E.ROBUST_CHANNEL_PBDMA_ERROR)
      return
    if bits(e0, d.gp0["fetch"]) != d.c["GP_ENTRY0_FETCH_UNCONDITIONAL"] or bits(e1, d.gp1["level"]) != d.c["GP_ENTRY1_LEVEL_MAIN"]:
      raise ChannelError(f"GPFIFO entry {get}: conditional fetch or subroutine level is not emulated", E.ROBUST_CHANNEL_PBDMA_ERROR)
    addr = bits(e1, d.gp1["get_hi"]) << 32 | bits(e0, d.gp0["get"]) << 2
    self._methods(ch, d, self.mem.view(addr, length * 4).view(np.uint32).tolist(), addr)

  def _methods(self, ch: Channel, d: HostDecoder, stream: list[int], addr: int) -> None:
    """Decode one pushbuffer segment: each header (INCR, NONINCR, ONEINCR, IMMD) and its data."""
    incr, nonincr, oneincr, immd = (d.c[f"DMA_{k}_OPCODE_VALUE"] for k in ("INCR", "NONINCR", "ONEINCR", "IMMD"))
    f_op, f_count, f_sub, f_addr = d.hdr["opcode"], d.hdr["count"], d.hdr["subchannel"], d.hdr["address"]
    i = 0
    while i < len(stream):
      if ch.stopped: raise _Stopped()
      word = stream[i]
      op, method, subch = bits(word, f_op), bits(word, f_addr) << 2, bits(word, f_sub)
      if op == immd:
        self._method(ch, d, subch, method, bits(word, d.immd_data), addr + 4 * i)
        i += 1
        continue
      if op not in (incr, nonincr, oneincr):
        raise ChannelError(f"pushbuffer {addr + 4 * i:#x}: method header {word:#010x} has opcode {op}, not INCR/NONINCR/ONEINCR/IMMD", E.ROBUST_CHANNEL_PBDMA_ERROR)
      count = bits(word, f_count)
      if count == 0 or i + 1 + count > len(stream):
        raise ChannelError(f"pushbuffer {addr + 4 * i:#x}: method header {word:#010x} counts {count} data words, {len(stream) - i - 1} follow in the segment",
                           E.ROBUST_CHANNEL_PBDMA_ERROR)
      on_copy = ch.classes.get(subch) == self.board.copy_class
      for k in range(count):
        m = method + 4 * (k if op == incr else (0 if op == nonincr else min(k, 1)))
        if m < HOST_METHODS_END and d.methods.get(m, _NOT_PLAIN) is None: ch.state[m] = stream[i + 1 + k]  # host state (SEM_ADDR_LO...)
        elif on_copy and m in self.copy_state: ch.state[0x10000 | m] = stream[i + 1 + k]  # copy state (OFFSET_IN_UPPER...)
        else:
          self._method(ch, d, subch, m, stream[i + 1 + k], addr + 4 * i)
          continue
        ch.methods += 1
      i += 1 + count

  def _method(self, ch: Channel, d: HostDecoder, subch: int, method: int, data: int, at: int) -> None:
    ch.methods += 1
    if method < HOST_METHODS_END:
      if method not in d.methods:
        raise ChannelError(f"pushbuffer {at:#x}: host method {method:#x} is not a {d.host.prefix} method the emulated PBDMA runs", E.ROBUST_CHANNEL_PBDMA_ERROR)
      ch.state[method] = data
      handler = d.methods[method]
      if handler: handler(ch, d, subch, data, at)
      return
    cls = ch.classes.get(subch)
    if cls is None: raise ChannelError(f"pushbuffer {at:#x}: method {method:#x} on subchannel {subch}, which has no class bound (SET_OBJECT)", E.ROBUST_CHANNEL_PBDMA_ERROR)
    if cls == self.board.copy_class:
      if method not in self.copy_methods: raise ChannelError(f"pushbuffer {at:#x}: copy class {cls:#x} method {method:#x} is not emulated", E.ROBUST_CHANNEL_CE0_ERROR)
      ch.state[0x10000 | method] = data
      if method == CE.NVC8B5_LAUNCH_DMA: self._launch_dma(ch, data, f"pushbuffer {at:#x}")
      return
    if cls == self.board.compute_class:
      return self.compute.method(self._compute_state.setdefault(ch.chid, {}), method, data, f"pushbuffer {at:#x}")
    raise ChannelError(f"pushbuffer {at:#x}: class {cls:#x} method {method:#x} is not emulated", E.ROBUST_CHANNEL_GR_EXCEPTION)

  # ---- host methods ----
  def _set_object(self, ch: Channel, d: HostDecoder, subch: int, data: int, at: int) -> None:
    cls = bits(data, d.set_object)
    allowed = {"copy": {self.board.copy_class}, "compute": {self.board.compute_class}}[ch.engine]
    if cls not in allowed or subch > 7:
      raise ChannelError(f"pushbuffer {at:#x}: SET_OBJECT class {cls:#x} on subchannel {subch} of a {ch.engine} channel (takes {sorted(allowed)} on 0..7)",
                         E.ROBUST_CHANNEL_PBDMA_ERROR)
    ch.classes[subch] = cls

  def _sem_execute(self, ch: Channel, d: HostDecoder, subch: int, data: int, at: int) -> None:
    where = f"pushbuffer {at:#x}"
    hi = ch.state.get(d.c["SEM_ADDR_HI"], 0)
    # SEM_ADDR_HI carries as many address bits as the class's header gives it (c56f 8: 40-bit addresses; c86f on 25:
    # 57-bit); set bits above them are refused (stricter: hardware may drop them and release elsewhere)
    if hi & ~d.sem_hi[1]: raise ChannelError(f"{where}: SEM_ADDR_HI {hi:#x} sets bits outside {d.host.prefix}_SEM_ADDR_HI_OFFSET", E.ROBUST_CHANNEL_PBDMA_ERROR)
    addr = bits(hi, d.sem_hi) << 32 | bits(ch.state.get(d.c["SEM_ADDR_LO"], 0), d.sem_lo) << 2
    wide = bits(data, d.sem["payload_size"]) == d.c["SEM_EXECUTE_PAYLOAD_SIZE_64BIT"]
    payload = ch.state.get(d.c["SEM_PAYLOAD_LO"], 0) | (ch.state.get(d.c["SEM_PAYLOAD_HI"], 0) << 32 if wide else 0)
    size = 8 if wide else 4
    if addr % size: raise ChannelError(f"{where}: semaphore at {addr:#x} not aligned to its {size}-byte payload", E.ROBUST_CHANNEL_PBDMA_ERROR)
    op = bits(data, d.sem["operation"])
    if op == d.c["SEM_EXECUTE_OPERATION_RELEASE"]:
      if bits(data, d.sem["release_wfi"]) == d.c["SEM_EXECUTE_RELEASE_WFI_EN"]: self._drain(ch)  # RELEASE_WFI_EN: after the channel's work is done (clc56f.h)
      if bits(data, d.sem["release_timestamp"]):
        if addr % 16: raise ChannelError(f"{where}: a timestamped release at {addr:#x} needs 16-byte alignment", E.ROBUST_CHANNEL_PBDMA_ERROR)
        self.mem.write(addr + 8, self.clock().to_bytes(8, "little"))
      self.mem.write(addr, payload.to_bytes(size, "little"))
    elif op in (d.c["SEM_EXECUTE_OPERATION_ACQUIRE"], d.c["SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ"]):
      self._drain(ch)  # the PBDMA stalls here while the grids in flight run to completion
      # ACQUIRE: equal; ACQ_STRICT_GEQ: value >= payload, compared unsigned at the payload's width (clc56f.h: "strictly"
      # greater or equal, without the circular wrap of ACQ_CIRC_GEQ)
      read = lambda: int.from_bytes(self.mem.read(addr, size), "little")
      test = (lambda v: v == payload) if op == d.c["SEM_EXECUTE_OPERATION_ACQUIRE"] else (lambda v: v >= payload)
      self._poll(ch, lambda: test(read()))
    else:
      raise ChannelError(f"{where}: SEM_EXECUTE operation {op} is not emulated (release, acquire, acq_strict_geq are)", E.ROBUST_CHANNEL_PBDMA_ERROR)

  def _mem_op(self, ch: Channel, d: HostDecoder, subch: int, data: int, at: int) -> None:
    if (op := bits(data, d.mem_op)) != d.c["MEM_OP_D_OPERATION_MEMBAR"]:
      raise ChannelError(f"pushbuffer {at:#x}: MEM_OP_D operation {op} is not emulated (MEMBAR is)", E.ROBUST_CHANNEL_PBDMA_ERROR)
    self._drain(ch)  # stricter: a membar waits for the grids in flight (the host's membar may only order its own writes)

  def _wfi(self, ch: Channel, d: HostDecoder, subch: int, data: int, at: int) -> None:
    self._drain(ch)  # clc56f.h WFI: wait until the engines of the channel are idle

  def _poll(self, ch: Channel, check) -> None:
    spins = 0
    while not check():
      if ch.stopped: raise _Stopped()
      spins += 1
      time.sleep(0 if spins < 50 else 2e-4)

  # ---- the copy engine ----
  def _launch_dma(self, ch: Channel, data: int, where: str) -> None:
    f = self.launch.decode(data)
    g = lambda name: ch.state.get(0x10000 | self.ce[name], 0)
    if f["src_memory_layout"] != CE.NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH or f["dst_memory_layout"] != CE.NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH:
      raise ChannelError(f"{where}: LAUNCH_DMA with a block-linear layout is not emulated", E.ROBUST_CHANNEL_CE0_ERROR)
    if f["data_transfer_type"] == CE.NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE_NONE: return
    if f["semaphore_type"] != CE.NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE_NONE or f["interrupt_type"] != CE.NVC8B5_LAUNCH_DMA_INTERRUPT_TYPE_NONE:
      raise ChannelError(f"{where}: LAUNCH_DMA semaphores and interrupts are not emulated", E.ROBUST_CHANNEL_CE0_ERROR)
    src = bits(g("OFFSET_IN_UPPER"), self.ce_upper) << 32 | g("OFFSET_IN_LOWER")
    dst = bits(g("OFFSET_OUT_UPPER"), self.ce_upper) << 32 | g("OFFSET_OUT_LOWER")
    n, lines = g("LINE_LENGTH_IN"), g("LINE_COUNT") if f["multi_line_enable"] else 1
    pin, pout = g("PITCH_IN"), g("PITCH_OUT")
    for line in range(lines):
      s, d = src + line * pin, dst + line * pout
      data_ = self.mem.view(s, n).copy()  # memmove semantics where the ranges overlap
      self.mem.view(d, n, write=True)[:] = data_


_NOT_PLAIN = object()  # d.methods.get's default: not a host method that only stores state


class _Stopped(Exception):
  """The channel was freed while a method waited: not an error."""


def notifier_write(notifier: np.ndarray, xid: int, now_ns: int) -> None:
  """Fill NvNotification[0] as the RM does for a channel error (kernel_rc_notification.c krcErrorWriteNotifier_CPU ->
  notifyFillNotifierMemory, index 0): the time, info32 = the Xid, status = the NV_STATUS (NV_ERR_RC_ERROR, 16 bits).
  info16 carries the engine type on the RM; the mock leaves it 0."""
  n = O.NvNotification.from_buffer(notifier[:ctypes.sizeof(O.NvNotification)])
  n.timeStamp.nanoseconds[0], n.timeStamp.nanoseconds[1] = now_ns & 0xFFFFFFFF, now_ns >> 32
  n.info32, n.info16, n.status = xid, 0, S.NV_ERR_RC_ERROR & 0xFFFF
