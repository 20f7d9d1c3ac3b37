"""The mock command processor for gfx9.4.3, gfx11 and gfx12 compute queues: decodes PM4 strictly and carries it out.

Strict means: only the packets a compute queue may carry, each with the dword count its layout has; SET_SH_REG
and SET_UCONFIG_REG only inside their register windows; on gfx12, none of the gfx11 spellings whose meaning gfx12
changed; on gfx9, none of the gfx10+ fields (GCR_CNTL, GCR bits in RELEASE_MEM, CS_W32_EN). Anything else stops the
queue with a QueueError. The packet opcodes, register windows and event types hcq sends have the same values in
soc15d.h / vega10_enum.h (gfx9) as in nvd.h / soc21_enum.h, so one handler table serves every family.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from hcq.autogen.am import gc_9_4_3, gc_11_0_0, gc_12_0_0, nvd, soc15d, soc21_enum
from hcq.drivers.mock.amdgpu.engine import Engine, QueueStopped
from hcq.drivers.mock.amdgpu.ring import QueueError

if TYPE_CHECKING:
  from hcq.drivers.mock.amdgpu.gpu import MockAMDGPU
  from hcq.drivers.mock.amdgpu.ring import Ring

IB_CHAIN = 1 << 20  # INDIRECT_BUFFER control dword: CHAIN (Mesa sid.h S_3F2_CHAIN; not in the generated nvd tables)
NOP_ONE_DWORD = 0x3FFF  # a NOP header with this count is a lone dword (ring padding)
# ACQUIRE_MEM GCR_CNTL (gfx_v11_0_emit_mem_sync): the levels a wave reads through, all invalidated (GLI_INV 1 = ALL)
GCR_INVALIDATE_ALL = (nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(1) |
                      nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(1) | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(1) |
                      nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(1))
GCR_INVALIDATE_MASK = GCR_INVALIDATE_ALL | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(3)
# gfx_v9_4_3_emit_mem_sync's CP_COHER_CNTL: L2 (TC) and vector L1 (TCL1) invalidate, L2 write-back, K$ and I$ invalidate
COHER_INVALIDATE_ALL = (soc15d.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_ICACHE_ACTION_ENA(1) | soc15d.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA(1) |
                        soc15d.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_ACTION_ENA(1) | soc15d.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA(1))
COHER_WRITE_BACK = soc15d.PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_TC_WB_ACTION_ENA(1)
# RELEASE_MEM dword 1 on gfx9 (soc15d.h): EVENT_TYPE (5:0), EVENT_INDEX (11:8), the EOP_* cache actions and EOP_EXEC
# (1 << 28, "for trailing fence"; a define the generated soc15d module lacks)
GFX9_RELEASE_BITS = (0x3f | 0xf << 8 | soc15d.EOP_TCL1_VOL_ACTION_EN | soc15d.EOP_TC_VOL_ACTION_EN | soc15d.EOP_TC_WB_ACTION_EN |
                     soc15d.EOP_TCL1_ACTION_EN | soc15d.EOP_TC_ACTION_EN | soc15d.EOP_TC_NC_ACTION_EN | soc15d.EOP_TC_MD_ACTION_EN | 1 << 28)
# COMPUTE_CURRENT_LOGIC_XCC_ID: not in the 6.12 register headers; v9_structs.h gives it the MQD dword of
# compute_static_thread_mgmt_se4, two before compute_tg_chunk_size (gc_9_4_3_offset.h): SH offset 0x0e25
LOGIC_XCC_ID_OFFSET = gc_9_4_3.regCOMPUTE_TG_CHUNK_SIZE.offset - 2
WAIT_FUNCTIONS = {0: lambda v, r: True, 1: lambda v, r: v < r, 2: lambda v, r: v <= r, 3: lambda v, r: v == r,
                  4: lambda v, r: v != r, 5: lambda v, r: v >= r, 6: lambda v, r: v > r}


@dataclass
class DispatchState:
  """What DISPATCH_DIRECT hands the shader core: the grid, and the COMPUTE_* registers programmed before it."""
  grid: tuple[int, int, int]
  initiator: int
  sh: dict[int, int] = field(default_factory=dict)  # absolute register dword offset -> value
  xcc: int = 0                                      # the XCC whose shader engines (and L2) run it
  share: tuple[int, int, int] | None = None         # (chunk, XCCs, logical id): the workgroups this XCC runs; None: all


class ComputeCP(Engine):
  """One compute queue's command processor."""
  kind = "compute"

  def __init__(self, gpu: "MockAMDGPU", ring: "Ring", name: str, xcc: int = 0):
    super().__init__(gpu, ring, name)
    self.xcc, self.cache = xcc, gpu.caches[xcc]  # its XCC in the partition (the MQD's pm4_target_xcc) and that XCC's L2
    self.skip = 0  # dwords a PRED_EXEC that does not select this XCC drops after itself
    self.sh: dict[int, int] = {}
    self.gfx12, self.gfx9 = gpu.board.family == "gfx12", gpu.board.family == "gfx9"
    # the register table of the board's GC (the COMPUTE_* absolute offsets agree; fields moved)
    self.gc = gc_12_0_0 if self.gfx12 else gc_9_4_3 if self.gfx9 else gc_11_0_0
    self.handlers = {
      nvd.PACKET3_NOP: (None, self._nop), nvd.PACKET3_SET_SH_REG: (None, self._set_sh_reg),
      nvd.PACKET3_SET_UCONFIG_REG: (None, self._set_uconfig_reg), nvd.PACKET3_WAIT_REG_MEM: ({6}, self._wait_reg_mem),
      # nvd.h (gfx10+) defines WAIT_REG_MEM64, a 64-bit reference and mask (8 body dwords); soc15d.h (gfx9) does not, and
      # while PAL sent it on gfx9.0 (Vega, Raven: gfx9AcquireReleaseBarrier.cpp), no source sends it on gfx9.4.x: refused there
      nvd.PACKET3_WAIT_REG_MEM64: (None, self._no_wait_reg_mem64) if self.gfx9 else ({8}, self._wait_reg_mem64),
      # gfx9's ACQUIRE_MEM has no GCR_CNTL dword (gfx_v9_4_3_emit_mem_sync: PACKET3(PACKET3_ACQUIRE_MEM, 5))
      nvd.PACKET3_ACQUIRE_MEM: ({6}, self._acquire_mem_gfx9) if self.gfx9 else ({7}, self._acquire_mem),
      nvd.PACKET3_RELEASE_MEM: ({7}, self._release_mem),
      nvd.PACKET3_EVENT_WRITE: ({1, 3}, self._event_write), nvd.PACKET3_DISPATCH_DIRECT: ({4}, self._dispatch_direct),
      nvd.PACKET3_INDIRECT_BUFFER: ({3}, self._indirect_buffer),
    }
    if self.gfx9: self.handlers[soc15d.PACKET3_PRED_EXEC] = ({1}, self._pred_exec)
    self.ib_depth = 0
    self.chained: tuple[int, int] | None = None  # set by a CHAIN packet: the IB that replaces the current one

  def packet(self, words: list[int], i: int, where: int) -> int:
    header = words[i]
    kind = header >> 30
    if kind == 2: return 1  # type-2 filler
    if kind != 3: raise QueueError(f"type-{kind} PM4 packet {header:#010x} on a compute queue", where)
    opcode, count = (header >> 8) & 0xff, (header >> 16) & 0x3fff
    if opcode == nvd.PACKET3_NOP and count == NOP_ONE_DWORD: return 1
    entry = self.handlers.get(opcode)
    if entry is None: raise QueueError(f"PM4 opcode {opcode:#04x} is not a compute-queue packet this CP runs", where)
    sizes, handler = entry
    if sizes is not None and count + 1 not in sizes:
      raise QueueError(f"PM4 opcode {opcode:#04x} with {count + 1} body dwords; its layout has {' or '.join(map(str, sorted(sizes)))}", where)
    if i + count + 2 > len(words): raise QueueError(f"PM4 opcode {opcode:#04x} runs past the end of its stream", where)
    handler(words[i + 1:i + count + 2], where)
    used, self.skip = count + 2 + self.skip, 0
    if i + used > len(words): raise QueueError(f"PM4 opcode {opcode:#04x} predicates {used - count - 2} dwords past the end of its stream", where)
    return used

  def _nop(self, body: list[int], where: int) -> None:
    pass

  @property
  def extra_delay(self) -> float:
    return self.gpu.xcc_packet_delay[self.xcc]

  def _pred_exec(self, body: list[int], where: int) -> None:
    """gfx9.4.3 PRED_EXEC: the next EXEC_COUNT (bits 13:0) dwords run only on the XCCs whose virtual id (in the
    partition) is set in VIRTUAL_XCC_ID_SELECT (bits 31:24) (the PACKET3_PRED_EXEC__* fields of later soc15d.h). Open
    user-space practice on MI300X uses it inside indirect buffers only; unsure what the CP does with it in the ring, the
    mock refuses it there (the stricter side), and a select naming no XCC of the partition too."""
    count, select = body[0] & 0x3fff, body[0] >> 24
    if not self.ib_depth: raise QueueError("PRED_EXEC in the ring: only an indirect buffer's packets are predicated per XCC", where)
    if not select or select >> self.gpu.board.num_xcc:
      raise QueueError(f"PRED_EXEC selects XCCs {select:#04x}; the partition has {self.gpu.board.num_xcc} (mask {(1 << self.gpu.board.num_xcc) - 1:#04x})", where)
    if not select >> self.xcc & 1: self.skip = count

  def _set_regs(self, body: list[int], where: int, start: int, end: int, what: str) -> None:
    if len(body) < 2: raise QueueError(f"{what} with no register value", where)
    first = start + body[0]
    if not (start <= first and first + len(body) - 1 <= end):
      raise QueueError(f"{what} of registers {first:#x}..{first + len(body) - 2:#x} outside its window {start:#x}..{end - 1:#x}", where)
    for i, v in enumerate(body[1:]): self.sh[first + i] = v

  def _set_sh_reg(self, body: list[int], where: int) -> None:
    self._set_regs(body, where, nvd.PACKET3_SET_SH_REG_START, nvd.PACKET3_SET_SH_REG_END, "SET_SH_REG")

  def _set_uconfig_reg(self, body: list[int], where: int) -> None:
    self._set_regs(body, where, nvd.PACKET3_SET_UCONFIG_REG_START, nvd.PACKET3_SET_UCONFIG_REG_END, "SET_UCONFIG_REG")

  def _wait_test(self, what: str, control: int, where: int) -> Callable[[int, int], bool]:
    """The compare of a WAIT_REG_MEM(64) control dword (nvd.h / soc15d.h: FUNCTION 2:0, MEM_SPACE 5:4, OPERATION 7:6,
    ENGINE 9:8). Only a plain wait on memory by the micro engine is run: a compute queue has no PFP (ENGINE 1), and
    register polls and the write-wait-write and preemptable operations are not emulated."""
    function, mem_space, operation, engine = control & 7, (control >> 4) & 3, (control >> 6) & 3, (control >> 8) & 3
    if mem_space != 1 or operation != 0: raise QueueError(f"{what} on registers (mem_space {mem_space}, operation {operation}) is not emulated", where)
    if engine: raise QueueError(f"{what} with ENGINE {engine}: a compute queue's CP has only the micro engine (ENGINE 0)", where)
    if function not in WAIT_FUNCTIONS: raise QueueError(f"{what} function {function} is reserved", where)
    return WAIT_FUNCTIONS[function]

  def _wait_reg_mem(self, body: list[int], where: int) -> None:
    """WAIT_REG_MEM: (the dword at the address & mask) FUNCTION (reference & mask), 32 bits. The poll address's low
    dword holds bits 31:2 over two reserved bits (PAL's PM4_MEC_WAIT_REG_MEM: reserved1 : 2, mem_poll_addr_lo : 30;
    gfx_v9_4_3_wait_reg_mem and gfx_v11_0_wait_reg_mem WARN_ON(addr0 & 0x3), "Dword align"). What the CP does with
    them set is not known: an address with them set is refused (the stricter side), not rounded down."""
    control, lo, hi, ref, mask, _interval = body
    test = self._wait_test("WAIT_REG_MEM", control, where)
    if lo & 3: raise QueueError(f"WAIT_REG_MEM on {self.name} polls {hi << 32 | lo:#x}: the address must be 4-byte aligned "
                                "(its low dword's bits 1:0 are reserved)", where)
    addr = hi << 32 | lo
    self.poll(lambda: test(self.gpu.mem.read_u32(addr) & mask, ref & mask))

  def _wait_reg_mem64(self, body: list[int], where: int) -> None:
    """WAIT_REG_MEM64 (nvd.h PACKET3_WAIT_REG_MEM64 = 0x93), laid out as AMD's PM4 MEC header PM4MEC_WAIT_REG_MEM64 has
    it: control, poll address lo (bits 2:0 reserved: 8-byte aligned) and hi, reference lo and hi, mask lo and hi, poll
    interval. All 64 bits of the quadword are compared."""
    control, lo, hi, ref_lo, ref_hi, mask_lo, mask_hi, _interval = body
    test = self._wait_test("WAIT_REG_MEM64", control, where)
    if lo & 7: raise QueueError(f"WAIT_REG_MEM64 of {hi << 32 | lo:#x}: the address must be 8-byte aligned (its low dword's bits 2:0 are reserved)", where)
    addr, ref, mask = hi << 32 | lo, ref_hi << 32 | ref_lo, mask_hi << 32 | mask_lo
    self.poll(lambda: test(self.gpu.mem.read_u64(addr) & mask, ref & mask))

  def _no_wait_reg_mem64(self, body: list[int], where: int) -> None:
    raise QueueError("WAIT_REG_MEM64 on gfx9.4.3: soc15d.h defines no such packet (nvd.h, gfx10+, does) and no source sends it "
                     "on gfx9.4.x (PAL did on gfx9.0); unsure this MEC runs it, refused", where)

  @staticmethod
  def _whole_range(size_lo: int, size_hi: int, base_lo: int, base_hi: int, where: int, ranged_gcr: int = 0) -> None:
    """ACQUIRE_MEM over the whole address space only (what the kernels' emit_mem_sync sends); a range is not emulated."""
    if (size_lo, size_hi & 0xffffff, base_lo, base_hi) != (0xffffffff, 0xffffff, 0, 0) or ranged_gcr:
      raise QueueError(f"ACQUIRE_MEM of a range (size {size_hi:#x}:{size_lo:#08x}, base {base_hi:#x}:{base_lo:#08x}, GCR_CNTL "
                       f"range bits {ranged_gcr:#x}) is not emulated: only the whole address space (size 0xffffff:0xffffffff, base 0)", where)

  def _acquire_mem_gfx9(self, body: list[int], where: int) -> None:
    """gfx9 ACQUIRE_MEM: CP_COHER_CNTL, CP_COHER_SIZE lo/hi, CP_COHER_BASE lo/hi, POLL_INTERVAL. TC_WB_ACTION_ENA writes
    L2 back; the caches are invalidated when every level a wave reads through is named (TC, TCL1, SH_KCACHE, SH_ICACHE;
    the cache model folds them into one, hcq.drivers.mock.amdgpu.cache)."""
    coher, size_lo, size_hi, base_lo, base_hi, _poll = body
    self._whole_range(size_lo, size_hi, base_lo, base_hi, where)
    if coher & COHER_WRITE_BACK: self.cache.write_back()
    if coher & COHER_INVALIDATE_ALL == COHER_INVALIDATE_ALL: self.cache.invalidate()

  def _acquire_mem(self, body: list[int], where: int) -> None:
    """gfx11 ACQUIRE_MEM: CP_COHER_CNTL, CP_COHER_SIZE lo/hi, CP_COHER_BASE lo/hi, POLL_INTERVAL, GCR_CNTL. The caches
    (hcq.drivers.mock.amdgpu.cache) write back on GL2_WB and invalidate when every level a wave reads through is named."""
    _coher, size_lo, size_hi, base_lo, base_hi, _poll, gcr = body
    self._whole_range(size_lo, size_hi, base_lo, base_hi, where, gcr & nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_RANGE(3))
    if gcr & nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(1): self.cache.write_back()
    if gcr & GCR_INVALIDATE_MASK == GCR_INVALIDATE_ALL: self.cache.invalidate()

  def _release_mem(self, body: list[int], where: int) -> None:
    event, sel, lo, hi, dlo, dhi, ctxid = body
    if self.gfx9:  # EOP_* actions (soc15d.h); a gfx10+ GCR bit lands on bits gfx9 does not define: refused (stricter)
      if event & ~GFX9_RELEASE_BITS:
        raise QueueError(f"RELEASE_MEM event dword {event:#010x} sets bits {event & ~GFX9_RELEASE_BITS:#x} gfx9 does not define "
                         "(soc15d.h EOP_*: a gfx10+ GCR field?); gfx_v9_4_3_ring_emit_fence uses EOP_TCL1/TC/TC_WB/TC_MD", where)
      if event & soc15d.EOP_TC_WB_ACTION_EN: self.cache.write_back()
      return self._release_data(sel, lo, hi, dlo, dhi, ctxid, where)
    if event & (nvd.PACKET3_RELEASE_MEM_GCR_GL2_RANGE | nvd.PACKET3_RELEASE_MEM_GCR_GL2_DISCARD):
      raise QueueError(f"RELEASE_MEM with GCR GL2_RANGE or GL2_DISCARD (event dword {event:#010x}) is not emulated", where)
    # gfx12 has no GLM action in RELEASE_MEM: gfx_v12_0_ring_emit_fence (Linux 6.12) names GCR_SEQ and GL2_WB where
    # gfx11's adds GLM_INV and GLM_WB. Unsure what the CP does with them; refused (the stricter side)
    if self.gfx12 and event & (nvd.PACKET3_RELEASE_MEM_GCR_GLM_INV | nvd.PACKET3_RELEASE_MEM_GCR_GLM_WB):
      raise QueueError(f"RELEASE_MEM with GCR GLM_INV or GLM_WB (event dword {event:#010x}) on gfx12: a gfx11 fence; "
                       "gfx12's writes back GL2 only (gfx_v12_0_ring_emit_fence)", where)
    # the write-back precedes the data write (gfx_v11_0_ring_emit_fence's GCR_GL2_WB makes the fence order the data);
    # RELEASE_MEM has no GLK/GLI invalidate, so it never completes an invalidate in the folded cache model
    if event & nvd.PACKET3_RELEASE_MEM_GCR_GL2_WB: self.cache.write_back()
    self._release_data(sel, lo, hi, dlo, dhi, ctxid, where)

  def _release_data(self, sel: int, lo: int, hi: int, dlo: int, dhi: int, ctxid: int, where: int) -> None:
    """RELEASE_MEM's data write and interrupt: DATA_SEL and INT_SEL sit at the same bits on gfx9 (soc15d.h) and gfx11."""
    data_sel, int_sel = (sel >> 29) & 7, (sel >> 24) & 7
    addr = (hi << 32) | lo
    if addr & (7 if data_sel in (2, 3, 4) else 3):  # gfx_v11_0_ring_emit_fence: "Qword aligned if 64bit write, Dword aligned if 32bit"
      raise QueueError(f"RELEASE_MEM DATA_SEL {data_sel} to {addr:#x}: the address must be {8 if data_sel in (2, 3, 4) else 4}-byte aligned", where)
    if data_sel == 1: self.gpu.mem.write_u32(addr, dlo)
    elif data_sel == 2: self.gpu.mem.write_u64(addr, dlo | dhi << 32)
    elif data_sel in (3, 4): self.gpu.mem.write_u64(addr, self.gpu.clock())
    elif data_sel != 0: raise QueueError(f"RELEASE_MEM DATA_SEL {data_sel} is not emulated", where)
    if data_sel: self.gpu.memory_written()
    if int_sel: self.gpu.interrupt(ctxid)

  def _event_write(self, body: list[int], where: int) -> None:
    event = body[0] & 0x3f  # these three event types have the same values in soc24_enum.h (gfx12) as in soc21's
    if event not in (soc21_enum.CS_PARTIAL_FLUSH, soc21_enum.CACHE_FLUSH_AND_INV_TS_EVENT, soc21_enum.BOTTOM_OF_PIPE_TS) and len(body) == 1:
      raise QueueError(f"EVENT_WRITE of event type {event:#x} is not emulated on a compute queue", where)

  def _reg(self, reg) -> int:
    return self.sh.get(self.gpu.board.gc_bases[reg.segment] + reg.offset, 0)

  def _check_gfx12_fields(self, where: int) -> None:
    """gfx12 reuses COMPUTE_PGM_RSRC2 bit 6, gfx11's TRAP_PRESENT, as DYNAMIC_VGPR (gc_12_0_0_sh_mask.h): a wave would
    run with dynamically allocated VGPRs, which the kernel was not compiled for (LLVM sets it only for
    .amdhsa_dynamic_vgpr kernels) and the emulator does not model. gfx12 needs no per-dispatch trap bit: amdkfd
    enables the trap handler per queue (add_queue_mes: trap_en)."""
    if self.gc.regCOMPUTE_PGM_RSRC2.decode(self._reg(self.gc.regCOMPUTE_PGM_RSRC2))["dynamic_vgpr"]:
      raise QueueError("DISPATCH_DIRECT with COMPUTE_PGM_RSRC2 bit 6 set on gfx12, where it is DYNAMIC_VGPR, not gfx11's "
                       "TRAP_PRESENT (gc_12_0_0_sh_mask.h): the trap handler is enabled per queue on gfx12", where)

  def _xcc_share(self, where: int) -> tuple[int, int, int] | None:
    """gfx9.4.3's split of a dispatch over the partition's XCCs: COMPUTE_TG_CHUNK_SIZE 0 (a PM4 queue's MQD,
    init_mqd_v9_4_3) runs every workgroup on this XCC; a chunk size C deals the grid's workgroups (linear, X fastest) in
    chunks of C round robin over the partition's N XCCs, the XCC with COMPUTE_CURRENT_LOGIC_XCC_ID L taking chunks
    L, L + N, ... (what the AQL MQDs' chunk size 1 and rotating logical ids imply: every XCC runs the same dispatch
    and together they cover the grid once; the hardware's order within a chunk is not documented). A logical id
    outside the partition would leave a share unrun: refused."""
    chunk, n = self._reg(self.gc.regCOMPUTE_TG_CHUNK_SIZE), self.gpu.board.num_xcc
    if not chunk: return None
    logic = self.sh.get(self.gpu.board.gc_bases[0] + LOGIC_XCC_ID_OFFSET, 0)
    if logic >= n: raise QueueError(f"DISPATCH_DIRECT with COMPUTE_CURRENT_LOGIC_XCC_ID {logic}: the partition has {n} XCCs", where)
    return chunk, n, logic

  def _check_preemptible(self, where: int) -> None:
    """Compute-wave save/restore saves a wave by sending it into the trap handler amdkfd installs (cwsr_trap_handler_gfx10.asm
    serves gfx10/11). A wave dispatched without COMPUTE_PGM_RSRC2.TRAP_PRESENT (gfx < 12), or on GC 11.0.0/1/2/5 and
    11.0.3 without COMPUTE_PGM_RSRC1.PRIV (the DEGFX11_12113 workaround: kfdtest Dispatch::BuildIb, NeedCwsrWA), cannot
    be saved: the first preemption (queue create or destroy, eviction, time slicing) stalls until a GPU reset. The GPU
    would run the dispatch and hang later; the mock refuses it at the dispatch. It asks PRIV of every 11.0.3 (kfdtest
    only of those with more than one shader array): stricter, as the mock has no single-array board."""
    gfxv, gc = self.gpu.board.gfx_target_version, self.gc
    if self.gfx12: return self._check_gfx12_fields(where)
    if not gc.regCOMPUTE_PGM_RSRC2.decode(self._reg(gc.regCOMPUTE_PGM_RSRC2))["trap_present"]:
      raise QueueError("DISPATCH_DIRECT with COMPUTE_PGM_RSRC2.TRAP_PRESENT (bit 6) clear: compute-wave save/restore could "
                       "not preempt its waves", where)
    if gfxv // 100 == 1100 and gfxv % 100 in (0, 1, 2, 3, 5) and not gc.regCOMPUTE_PGM_RSRC1.decode(self._reg(gc.regCOMPUTE_PGM_RSRC1))["priv"]:
      raise QueueError(f"DISPATCH_DIRECT with COMPUTE_PGM_RSRC1.PRIV (bit 20) clear on GC 11.0.{gfxv % 100}: compute-wave "
                       "save/restore could not preempt its waves (DEGFX11_12113)", where)

  def _dispatch_direct(self, body: list[int], where: int) -> None:
    gx, gy, gz, initiator = body
    if not initiator & 1: raise QueueError("DISPATCH_DIRECT without COMPUTE_SHADER_EN in its initiator", where)
    if self.gfx9 and initiator & 1 << 15:  # gc_9_4_3_sh_mask.h defines DISPATCH_INITIATOR up to RESTORE (bit 14)
      raise QueueError(f"DISPATCH_DIRECT initiator {initiator:#x} sets bit 15, gfx10+'s CS_W32_EN: gfx9 runs wave64 only", where)
    self._check_preemptible(where)
    share = self._xcc_share(where) if self.gfx9 else None
    self.gpu.dispatch(DispatchState((gx, gy, gz), initiator, dict(self.sh), self.xcc, share), self)

  def _indirect_buffer(self, body: list[int], where: int) -> None:
    """Compute queues have one IB level: the ring calls an IB and the IB may chain to the next (CHAIN, as its last packet:
    radv's radv_amdgpu_cs_grow and its compute-queue DGC trailer chain so), but an IB does not call another: radv relies
    on IB2 only on the gfx queue (radv_amdgpu_cs_bo_create: can_always_use_ib2 needs AMD_IP_GFX). A CHAIN from the
    ring itself is refused too (unsure what the CP does with it; the stricter side)."""
    lo, hi, ctl = body
    addr, ndw, chain = (hi & 0xffff) << 32 | (lo & ~3), ctl & 0xfffff, ctl & IB_CHAIN
    if not ctl & nvd.INDIRECT_BUFFER_VALID: raise QueueError("INDIRECT_BUFFER without its VALID bit", where)
    if not self.ib_depth:
      if chain: raise QueueError("INDIRECT_BUFFER with CHAIN in the ring: only an indirect buffer chains to the next", where)
      self._run_ib(addr, ndw, where)
    elif not chain: raise QueueError("INDIRECT_BUFFER inside an indirect buffer without CHAIN (compute queues have one IB level)", where)
    else: self.chained = (addr, ndw)

  def _run_ib(self, addr: int, ndw: int, where: int) -> None:
    self.ib_depth = 1
    try:
      while True:
        words, i, self.chained = self.gpu.mem.view(addr, 4 * ndw).view("<u4").tolist(), 0, None
        while i < ndw:
          if self.chained: raise QueueError(f"packets after a chained INDIRECT_BUFFER (the chain ends its IB at {addr:#x})", where)
          i += self.packet(words, i, where)
        if self.chained is None: return
        if self.ring.stopped: raise QueueStopped()  # an IB chaining to itself runs until the queue goes
        addr, ndw = self.chained
    finally:
      self.ib_depth = 0
