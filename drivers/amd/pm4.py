"""The AMD compute queue: PM4 type-3 packets, one method per packet, fields in the order the CP reads them.

Packet and field values come from the generated tables (hcq.autogen.am.nvd for gfx10+, the soc21 event
types, GC 11 registers by name). What differs between GPU families — register headers, the GC register
base, the ACQUIRE_MEM layout — is a `PM4Dialect`, so gfx9 and gfx12 are a table entry, not a rewrite.
"""
from __future__ import annotations
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Callable

from hcq.drivers.amd.signal_halves import SplitWaits
from hcq.queue import DwordQueue, release_bound_copies
from hcq.sym import Variable, hi32, lo32

if TYPE_CHECKING:
  from hcq.signal import Signal


@dataclass(frozen=True)
class PM4Dialect:
  """What a GPU family changes in the compute PM4 stream: its tables, and the three packets whose fields differ."""
  name: str
  pkt: ModuleType                        # PACKET3_* opcodes and field macros
  regs: ModuleType                       # the GC register module (regCOMPUTE_*)
  events: ModuleType                     # VGT event types (CS_PARTIAL_FLUSH, CACHE_FLUSH_AND_INV_TS_EVENT, ...)
  gc_base: tuple[int, ...]               # dword base of each GC register segment (from IP discovery)
  acquire_mem: Callable[[], list[int]]   # the ACQUIRE_MEM body (every dword after the header) invalidating the shader caches
  release_event: int                     # RELEASE_MEM dword 1: cache actions, end-of-pipe event type and index
  release_select: Callable[[int, int], int]  # RELEASE_MEM dword 2 from (DATA_SEL, INT_SEL)
  initiator: Callable[[bool], int]       # DISPATCH_INITIATOR for wave32 or wave64
  gc_versions: tuple[tuple[int, ...], ...]  # the IP discovery GC versions (prefixes) the dialect is written for
  scratch_unit: int = 256                # bytes of COMPUTE_TMPRING_SIZE.WAVESIZE's unit
  waves_per_engine: bool = True          # TMPRING_SIZE.WAVES counts slots per shader engine (gfx11+), else per XCC
  wait64: bool = True                    # WAIT_REG_MEM64 compares a 64-bit signal whole (nvd.h, gfx10+); else two 32-bit waits (signal_halves)

  def sh_reg(self, reg) -> int:
    """A register's index for SET_SH_REG: its absolute dword offset less the SH window's start."""
    return self.gc_base[reg.segment] + reg.offset - self.pkt.PACKET3_SET_SH_REG_START


def _rdna_dialect(name: str, gc: ModuleType, events: ModuleType, gc_base: tuple[int, ...], release_gcr: int, major: int) -> PM4Dialect:
  """gfx11 and gfx12 share nvd.h's packets: ACQUIRE_MEM carries a GCR_CNTL, RELEASE_MEM GCR bits, and wave32 is a
  DISPATCH_INITIATOR bit; they differ in their register tables and in RELEASE_MEM's cache actions (`release_gcr`)."""
  from hcq.autogen.am import nvd as p
  # gfx_v11_0_emit_mem_sync and gfx_v12_0_emit_mem_sync (Linux 6.12) invalidate the same levels, GL1 included
  gcr = (p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(1) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1) |
         p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(1) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(1) |
         p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(1) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_WB(1) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_SEQ(1))
  # CP_COHER_CNTL, CP_COHER_SIZE (lo, hi: everything), CP_COHER_BASE (lo, hi), POLL_INTERVAL, GCR_CNTL
  body = [0, 0xffffffff, 0xffffff, 0, 0, 0x0000000A, gcr]
  release = (release_gcr | p.PACKET3_RELEASE_MEM_CACHE_POLICY(3) |
             p.PACKET3_RELEASE_MEM_EVENT_TYPE(events.CACHE_FLUSH_AND_INV_TS_EVENT) | p.PACKET3_RELEASE_MEM_EVENT_INDEX(5))
  return PM4Dialect(name, p, gc, events, gc_base, lambda: body, release,
                    lambda data, intr: p.PACKET3_RELEASE_MEM_DATA_SEL(data) | p.PACKET3_RELEASE_MEM_INT_SEL(intr),
                    lambda wave32: gc.regCOMPUTE_DISPATCH_INITIATOR.encode(compute_shader_en=1, force_start_at_000=1, cs_w32_en=int(wave32)),
                    ((major,),))


def gfx11_dialect(gc_base: tuple[int, ...]) -> PM4Dialect:
  """gfx11 (gfx_v11_0.c gfx_v11_0_ring_emit_fence): RELEASE_MEM writes back GL2 and writes back and invalidates GLM."""
  from hcq.autogen.am import gc_11_0_0 as gc, nvd as p, soc21_enum
  return _rdna_dialect("gfx11", gc, soc21_enum, gc_base, p.PACKET3_RELEASE_MEM_GCR_SEQ | p.PACKET3_RELEASE_MEM_GCR_GL2_WB |
                       p.PACKET3_RELEASE_MEM_GCR_GLM_INV | p.PACKET3_RELEASE_MEM_GCR_GLM_WB, 11)


def gfx12_dialect(gc_base: tuple[int, ...]) -> PM4Dialect:
  """gfx12 (gfx_v12_0.c, Linux 6.12): the same packets (nvd.h) and COMPUTE_* register offsets as gfx11, but RELEASE_MEM
  names no GLM action (gfx_v12_0_ring_emit_fence: GCR_SEQ | GCR_GL2_WB only), several register fields moved
  (gc_12_0_0_sh_mask.h: RSRC2 bit 6 is DYNAMIC_VGPR, TMPRING_SIZE.WAVESIZE is 18 bits), and the event types are soc24's."""
  from hcq.autogen.am import gc_12_0_0 as gc, nvd as p, soc24_enum
  return _rdna_dialect("gfx12", gc, soc24_enum, gc_base, p.PACKET3_RELEASE_MEM_GCR_SEQ | p.PACKET3_RELEASE_MEM_GCR_GL2_WB, 12)


def gfx9_dialect(gc_base: tuple[int, ...]) -> PM4Dialect:
  """gfx9.4.3 / CDNA3 (MI300, gfx942; Linux 6.12 gfx_v9_4_3.c). soc15d.h's packets: ACQUIRE_MEM's cache actions are
  CP_COHER_CNTL bits and it has no GCR_CNTL (6 body dwords, gfx_v9_4_3_emit_mem_sync: TC = L2 invalidate, TC_WB = L2
  write-back, TCL1 = vector L1, SH_KCACHE/SH_ICACHE = scalar and instruction caches); RELEASE_MEM takes EOP_* cache
  actions (gfx_v9_4_3_ring_emit_fence's full flush: TCL1, TC, TC_WB, TC_MD); there is no wave32. Registers from
  gc_9_4_3 (the COMPUTE_* offsets hcq writes are gfx9.4.2's and gfx11's absolute ones). Scratch: TMPRING_SIZE.WAVESIZE
  in 1 KiB units (LLVM's scratch_ps test: alignto(size * lanes, 1024) / 1024 before gfx11) and WAVES the slots of one
  XCC, not per engine (ROCr amd_aql_queue.cpp FillComputeTmpRingSize: (size / NumXcc) / (WAVESIZE * 1024), capped at
  CUs x MaxSlotsScratchCU). Only GC 9.4.3 and 9.4.4 are taken (kfd_device.c gives both gfx_target_version 90402 and
  gc_9_4_3_kfd2kgd; gfx_v9_4_3.c drives both): gfx90a (9.4.2) kernels want a private segment buffer, which hcq does
  not provide, and other gfx9 parts have not been checked against their sources."""
  from hcq.autogen.am import gc_9_4_3 as gc, soc15d as p, vega10_enum
  coher = (p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_ICACHE_ACTION_ENA(1) | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA(1) |
           p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_ACTION_ENA(1) | p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(1) |
           p.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_WB_ACTION_ENA(1))
  body = [coher, 0xffffffff, 0xffffff, 0, 0, 0x0000000A]  # CP_COHER_CNTL, SIZE (lo, hi), BASE (lo, hi), POLL_INTERVAL

  def initiator(wave32: bool) -> int:
    if wave32: raise ValueError("gfx9 runs wave64 only: a wave32 kernel cannot be dispatched")
    return gc.regCOMPUTE_DISPATCH_INITIATOR.encode(compute_shader_en=1, force_start_at_000=1)
  release = (p.EOP_TCL1_ACTION_EN | p.EOP_TC_ACTION_EN | p.EOP_TC_WB_ACTION_EN | p.EOP_TC_MD_ACTION_EN |
             p.EVENT_TYPE(vega10_enum.CACHE_FLUSH_AND_INV_TS_EVENT) | p.EVENT_INDEX(5))
  return PM4Dialect("gfx9", p, gc, vega10_enum, gc_base, lambda: body, release, lambda data, intr: p.DATA_SEL(data) | p.INT_SEL(intr),
                    initiator, ((9, 4, 3), (9, 4, 4)), scratch_unit=1024, waves_per_engine=False, wait64=False)


DIALECTS = {"gfx12": gfx12_dialect, "gfx11": gfx11_dialect, "gfx9": gfx9_dialect}  # by family: gfx_target_version // 10000


def preemption_bits(regs: ModuleType, gfx_target_version: int, shader_arrays: int) -> tuple[int, int]:
  """(COMPUTE_PGM_RSRC1, COMPUTE_PGM_RSRC2) bits every dispatch needs so that compute-wave save/restore can preempt it.

  The scheduler saves a wave by sending it into the trap handler amdkfd installs, which a wave enters only with
  RSRC2.TRAP_PRESENT; on gfx9 amdkfd puts the bit in the MQD for AQL queues (kfd_mqd_manager_v9.c init_mqd), with MES
  (gfx11) nothing does it for a PM4 queue, whose dispatches set RSRC2 themselves, so kfdtest's PM4 dispatch sets it below
  gfx12 (Dispatch::BuildIb). GC 11.0.0/1/2/5, and 11.0.3 with more than one shader array, also need RSRC1.PRIV or the
  save traps (the DEGFX11_12113 workaround: kfdtest KFDBaseComponentTest::NeedCwsrWA). Without them the first preemption
  (another queue created, memory evicted, a time slice ending) stalls until the GPU is reset. gfx12 needs neither and
  must not set bit 6: there it is RSRC2.DYNAMIC_VGPR (gc_12_0_0_sh_mask.h), and the trap handler is enabled per queue
  (amdkfd add_queue_mes: queue_input.trap_en, passed to MES in mes_v12_0_add_hw_queue)."""
  if gfx_target_version >= 120000: return 0, 0
  major, minor, step = gfx_target_version // 10000, gfx_target_version // 100 % 100, gfx_target_version % 100
  priv = (major, minor) == (11, 0) and (step in (0, 1, 2, 5) or (step == 3 and shader_arrays > 1))
  return regs.regCOMPUTE_PGM_RSRC1.encode(priv=int(priv)), regs.regCOMPUTE_PGM_RSRC2.encode(trap_present=1)


@dataclass(frozen=True)
class XCCSplit:
  """How a stream spreads its dispatches over a gfx9.4.3 partition's XCCs (docs/hcq.md, MI300X): one PM4 queue per XCC
  on one ring, each dispatch dealt in chunks of one workgroup by logical XCC id, and cross-XCC barriers through a
  32-bit slot per XCC at `sync_addr` (XCC i's at + 4 i), in uncached memory that every XCC's CP reads and writes."""
  xccs: int
  sync_addr: int


# COMPUTE_CURRENT_LOGIC_XCC_ID: not in the 6.12 register headers; v9_structs.h gives it the MQD dword of
# compute_static_thread_mgmt_se4, two dwords before compute_tg_chunk_size (gc_9_4_3_offset.h): SH offset 0x0e25
LOGIC_XCC_ID_BEFORE_TG_CHUNK = 2

# WAIT_REG_MEM compare functions and RELEASE_MEM selectors (PM4 packet reference; the kernel uses the same values)
WAIT_GEQ = 5
MEM_SPACE_MEMORY = 1
DATA_SEL_32, DATA_SEL_64, DATA_SEL_TIMESTAMP = 1, 2, 3
INT_SEL_NONE, INT_SEL_AFTER_WRITE_CONFIRM = 0, 2


class AMDComputeQueue(SplitWaits, DwordQueue):
  """PM4 for a KFD compute queue. Packets are lists of dwords in `self._q`; symbolic values are patch slots."""

  def __init__(self, dialect: PM4Dialect, split: XCCSplit | None = None):
    super().__init__()
    self.d, self.split = dialect, split  # split: None runs every packet on one XCC
    self._copies: list = []  # once bound: (GPU buffer, its words, the packets that run it, the tail's patches) per copy
    self.barriers: list[tuple[int, int]] = []  # (word index, barrier number within the stream): numbered at submit
    self._synced_at = -1      # len(self._q) right after the last cross-XCC barrier
    self.numbering = None     # a jump's (words, barriers) of the bound copy it runs: numbered instead of its own

  def pkt3(self, opcode: int, *body: "int | object") -> "AMDComputeQueue":
    """One type-3 packet: header (count = body dwords - 1), then the body."""
    start = len(self._q)
    self._q.append(self.d.pkt.PACKET3(opcode, len(body) - 1) & 0xffffffff)
    self._q.extend([0] * len(body))
    for i, v in enumerate(body): self._put(self._q, start + 1 + i, v if not isinstance(v, int) else v & 0xffffffff)
    return self

  def set_sh_reg(self, reg, *values: "int | object") -> "AMDComputeQueue":
    """SET_SH_REG: consecutive registers from `reg`."""
    return self.pkt3(self.d.pkt.PACKET3_SET_SH_REG, self.d.sh_reg(reg), *values)

  def on_xccs(self, mask: int, build: Callable[[], object]) -> "AMDComputeQueue":
    """The packets `build` records, run only by the XCCs in `mask` (bit i: virtual XCC i): PRED_EXEC, whose EXEC_COUNT
    (bits 13:0) covers them and VIRTUAL_XCC_ID_SELECT (bits 31:24) names the XCCs (later soc15d.h's PACKET3_PRED_EXEC__*)."""
    start = len(self._q)
    self.pkt3(self.d.pkt.PACKET3_PRED_EXEC, mask << 24)
    build()
    count = len(self._q) - start - 2
    if count >= 1 << 14: raise ValueError(f"{count} dwords under one PRED_EXEC: EXEC_COUNT has 14 bits")
    self._q[start + 1] = mask << 24 | count
    return self

  def xcc_barrier(self) -> "AMDComputeQueue":
    """Every XCC writes back its L2 and, after it, its barrier number to its slot (RELEASE_MEM, end of pipe), then waits
    until every slot holds at least that number: no XCC passes until all have finished what came before. Numbers grow
    by one per barrier of the device's ring (given at submit), so an XCC that runs ahead cannot satisfy an earlier
    barrier's wait for another; the 32-bit slots would wrap after 2**32 barriers."""
    n, sync, j = self.split.xccs, self.split.sync_addr, self.barrier_count
    for i in range(n):
      self.on_xccs(1 << i, lambda i=i: self.release_mem(sync + 4 * i, 0, DATA_SEL_32))
      self.barriers.append((len(self._q) - 3, j))  # RELEASE_MEM's data dword
    for i in range(n):
      self.wait_mem(sync + 4 * i, 0)
      self.barriers.append((len(self._q) - 3, j))  # WAIT_REG_MEM's reference
    self._synced_at = len(self._q)
    return self

  def _xcc0(self, build: Callable[[], object]) -> "AMDComputeQueue":
    """`build`'s packets after every XCC's earlier work, run by XCC 0 alone (signals, timestamps); as they are with one XCC."""
    if self.split is None: build(); return self
    if self._synced_at != len(self._q): self.xcc_barrier()
    self.on_xccs(1, build)
    self._synced_at = len(self._q)  # the other XCCs ran nothing since the barrier; XCC 0 runs its own packets in order
    return self

  # ---- the HWQueue interface ----
  def wait_mem(self, addr, value) -> "AMDComputeQueue":
    """WAIT_REG_MEM until the dword at `addr` is at least `value` (a 32-bit count: the XCC barrier's slots, a split wait's half)."""
    p = self.d.pkt
    return self.pkt3(p.PACKET3_WAIT_REG_MEM, self._wait_control(), lo32(addr), hi32(addr), value, 0xffffffff, 4)  # pkt3 keeps an int's low 32 bits

  def _wait_control(self) -> int:
    p = self.d.pkt
    return p.WAIT_REG_MEM_MEM_SPACE(MEM_SPACE_MEMORY) | p.WAIT_REG_MEM_OPERATION(0) | p.WAIT_REG_MEM_FUNCTION(WAIT_GEQ) | p.WAIT_REG_MEM_ENGINE(0)

  def wait(self, signal: "Signal", value) -> "AMDComputeQueue":
    """Wait until the signal's 64-bit value is >= `value`. gfx11 and gfx12: one WAIT_REG_MEM64 with a 64-bit reference
    and mask (nvd.h PACKET3_WAIT_REG_MEM64 = 0x93; body as AMD's PM4 MEC header PM4MEC_WAIT_REG_MEM64 lays it out:
    control, address lo/hi (8-byte aligned), reference lo/hi, mask lo/hi, poll interval). gfx9.4.3: no source at hand
    sends WAIT_REG_MEM64 on gfx9.4.x, so two 32-bit WAIT_REG_MEMs (their precondition: hcq.drivers.amd.signal_halves)."""
    p, addr = self.d.pkt, signal.value_addr
    if self.d.wait64:
      return self.pkt3(p.PACKET3_WAIT_REG_MEM64, self._wait_control(), lo32(addr), hi32(addr), lo32(value), hi32(value), 0xffffffff, 0xffffffff, 4)
    self.split_wait(signal, value, self.wait_mem)
    return self

  def acquire_mem(self) -> "AMDComputeQueue":
    """Invalidate the shader caches (and write back L2) before the next dispatch reads memory."""
    return self.pkt3(self.d.pkt.PACKET3_ACQUIRE_MEM, *self.d.acquire_mem())

  def memory_barrier(self) -> "AMDComputeQueue":
    return self.acquire_mem()

  def release_mem(self, addr, value, data_sel: int, int_sel: int = INT_SEL_NONE, ctxid: int = 0) -> "AMDComputeQueue":
    """RELEASE_MEM at end of pipe: flush and write back caches, then write `value` (or the GPU clock) to `addr`."""
    return self.pkt3(self.d.pkt.PACKET3_RELEASE_MEM, self.d.release_event, self.d.release_select(data_sel, int_sel),
                     lo32(addr), hi32(addr), lo32(value), hi32(value), ctxid)

  def signal(self, signal: "Signal", value) -> "AMDComputeQueue":
    # not a SplitWaits.split_signal: RELEASE_MEM writes at end of pipe (and on XCC 0 alone), so a later wait may run first
    event = getattr(signal, "event_id", None)
    return self._xcc0(lambda: self.release_mem(signal.value_addr, value, DATA_SEL_64, INT_SEL_AFTER_WRITE_CONFIRM if event else INT_SEL_NONE, event or 0))

  def timestamp(self, signal: "Signal") -> "AMDComputeQueue":
    return self._xcc0(lambda: self.release_mem(signal.timestamp_addr, 0, DATA_SEL_TIMESTAMP))

  def exec(self, program, kernargs_addr, global_size, local_size) -> "AMDComputeQueue":
    """Program the compute registers from the kernel descriptor, then DISPATCH_DIRECT and a CS partial flush."""
    r, p = self.d.regs, self.d.pkt
    self.acquire_mem()
    self.set_sh_reg(r.regCOMPUTE_PGM_LO, lo32(program.code_addr >> 8), hi32(program.code_addr >> 8))
    self.set_sh_reg(r.regCOMPUTE_PGM_RSRC1, program.rsrc1, program.rsrc2)
    self.set_sh_reg(r.regCOMPUTE_PGM_RSRC3, program.rsrc3)
    self.set_sh_reg(r.regCOMPUTE_TMPRING_SIZE, program.device.tmpring_size)
    scratch = program.device.scratch_base
    if self.split:  # each XCC: its logical id (its share of the workgroups) and its own scratch ring
      self.set_sh_reg(r.regCOMPUTE_TG_CHUNK_SIZE, 1)
      def per_xcc(i: int) -> None:
        logic_xcc_id = r.regCOMPUTE_TG_CHUNK_SIZE.offset - LOGIC_XCC_ID_BEFORE_TG_CHUNK
        self.pkt3(p.PACKET3_SET_SH_REG, self.d.gc_base[0] + logic_xcc_id - p.PACKET3_SET_SH_REG_START, i)
        at = scratch + i * program.device.scratch_xcc_bytes
        if scratch: self.set_sh_reg(r.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO, lo32(at >> 8), hi32(at >> 8))
      for i in range(self.split.xccs): self.on_xccs(1 << i, lambda i=i: per_xcc(i))
    elif scratch:
      self.set_sh_reg(r.regCOMPUTE_DISPATCH_SCRATCH_BASE_LO, lo32(scratch >> 8), hi32(scratch >> 8))
    self.set_sh_reg(r.regCOMPUTE_RESTART_X, 0, 0, 0)
    user = program.user_sgprs(kernargs_addr)
    if user: self.set_sh_reg(r.regCOMPUTE_USER_DATA_0, *user)
    self.set_sh_reg(r.regCOMPUTE_START_X, 0, 0, 0, *local_size)  # START_X/Y/Z, then NUM_THREAD_X/Y/Z
    self.set_sh_reg(r.regCOMPUTE_RESOURCE_LIMITS, 0)
    self.pkt3(p.PACKET3_DISPATCH_DIRECT, *global_size, self.d.initiator(program.wave32))
    self.pkt3(p.PACKET3_EVENT_WRITE, p.EVENT_TYPE(self.d.events.CS_PARTIAL_FLUSH) | p.EVENT_INDEX(4))
    return self.xcc_barrier() if self.split else self  # the next dispatch may read what any XCC wrote

  def indirect_buffer(self, addr, ndwords: int) -> "AMDComputeQueue":
    """Jump to `ndwords` of PM4 at `addr` and come back (how a bound queue is submitted)."""
    p = self.d.pkt
    return self.pkt3(p.PACKET3_INDIRECT_BUFFER, lo32(addr), hi32(addr), ndwords | p.INDIRECT_BUFFER_VALID)

  def bind(self, device, copies: int = 2) -> "AMDComputeQueue":
    """Copy the packets into GPU-visible memory, `copies` times; each submit patches a copy whose last run has finished
    and sends an INDIRECT_BUFFER to it, then a RELEASE_MEM that marks the run done. One copy patched in place would hand
    its values to an earlier submission the CP had not read yet (it fetches an IB's packets as it runs them). Split over
    XCCs, the mark is the copy's own last packets (a barrier, then XCC 0's RELEASE_MEM): a RELEASE_MEM in the ring runs
    on every XCC, and the first to get there would free the copy while the others still read it."""
    import numpy as np
    words = self.words()
    if any(c is not self._frozen for c, _, _ in self._patches): raise ValueError("a bound queue's patch slots must lie in its packets")
    if self._copies:  # bound before: the earlier copies go back once run (a queue reset dropped the runs of an older ring)
      release_bound_copies(self._bound_to, [c[0] for c in self._copies], self._done, self._submitted,
                           dropped=self._ring is not None and self._ring is not self._bound_to.queues["compute"]["ring"])
    self._bound_to = device
    self._done = device.new_signal(0, name="bound queue")  # how many submissions have finished
    self._copies = []
    tail = AMDComputeQueue(self.d, self.split)
    if self.split:
      tail._synced_at = len(tail._q) if self._synced_at == len(self._q) else -1
      tail.signal(self._done, Variable("done"))
    ahead = self.barrier_count
    barriers = self.barriers + [(len(words) + i, ahead + j) for i, j in tail.barriers]
    tail_words = tail.words()
    for _ in range(copies):
      buf = device.alloc(4 * (len(words) + len(tail_words)), "host")
      view = buf.view(np.uint32)
      view[:len(words)], view[len(words):] = words, tail_words
      jump = AMDComputeQueue(self.d).indirect_buffer(buf.addr, len(view))
      if self.split: jump.numbering = (view, barriers)
      else: jump.release_mem(self._done.value_addr, Variable("done"), DATA_SEL_64)
      self._copies.append((buf, view, jump, [(len(words) + i, sym) for _, i, sym in tail._patches]))
    self._submitted, self._ring = 0, None
    return self

  @property
  def barrier_count(self) -> int:
    return len({j for _, j in self.barriers})

  def number_barriers(self, first: int) -> int:
    """Give this submission's cross-XCC barriers the numbers first + 1, first + 2, ... (the device's ring order, under
    its lock); returns how many it took."""
    words, barriers = self.numbering or (self.words(), self.barriers)
    for i, j in barriers: words[i] = (first + j + 1) & 0xffffffff
    return len({j for _, j in barriers})

  def submit(self, device, var_vals: dict[str, int] | None = None) -> "AMDComputeQueue":
    if not self._copies: return super().submit(device, var_vals)
    n, k = self._submitted, len(self._copies)
    _, view, jump, tail = self._copies[n % k]
    ring = device.queues["compute"]["ring"]
    if ring is not self._ring: self._done.value, self._ring = n, ring  # a queue reset dropped the earlier runs: none to wait for
    if n >= k: self._done.wait(n - k + 1)  # the copy's previous run is over (back-to-back submits wait here)
    vals = var_vals or {}
    for _, i, sym in self._patches: view[i] = sym.eval(vals)
    for i, sym in tail: view[i] = sym.eval({"done": n + 1})
    self._submitted = n + 1
    jump.submit(device, {"done": n + 1})
    return self

  def _submit(self, device) -> None:
    device.submit_pm4(self)
