"""Every rejection rule of the mock kernel (drivers/mock/kfd.py) and engines (drivers/mock/amdgpu/cp.py, sdma.py,
engine.py) broken once, expecting that rule's own error: the queue error naming it, or the errno and reason.

`test_every_rule_has_a_breaking_case` reads the sources for their `raise QueueError(...)` / `raise kerr(...)` sites
and asserts each is named by a case here, so a rule added without a test fails the suite. The few sites no input can
reach (defensive checks behind an earlier one) are listed with why.
"""
from __future__ import annotations
import ctypes
import errno
import os
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hcq.autogen import kfd as K
from hcq.autogen.am import gc_11_0_0 as gc, nvd, sdma_v6_0_0_pkt_open as sdma
from hcq.drivers import libc
from hcq.drivers.amd.pm4 import AMDComputeQueue, gfx9_dialect, gfx11_dialect, gfx12_dialect
from hcq.drivers.amd.sdma import AMDCopyQueue
from hcq.drivers.amd.sdma_packets import sdma_packets
from hcq.drivers.mock.amdgpu.cp import IB_CHAIN
from hcq.drivers.mock.amdgpu.gpu import BOARDS, BoardSpec
from hcq.drivers.mock.kfd import DOORBELL_SLICE, ENOTSUPP, MMAP_GPU_ID_SHIFT, MMAP_TYPE_SHIFT, cwsr_sizes
from tests.test_amd_queues import GC_BASE, Board, FakeSignal
from tests.test_mock_kfd import GTT, VRAM, Process

ROOT = Path(__file__).resolve().parent.parent
IB, IB2 = 7 << 20, 8 << 20  # where the raw indirect buffers go in the Board's memory
SH_LAST = nvd.PACKET3_SET_SH_REG_END - nvd.PACKET3_SET_SH_REG_START - 1          # the window's last register, as an offset
UCONFIG_LAST = nvd.PACKET3_SET_UCONFIG_REG_END - nvd.PACKET3_SET_UCONFIG_REG_START - 1


def pkt3(opcode: int, *body: int) -> list[int]:
  return [(3 << 30) | (opcode << 8) | ((len(body) - 1) & 0x3fff) << 16, *body]


def ib(addr: int, ndw: int, ctl: int = nvd.INDIRECT_BUFFER_VALID) -> list[int]:
  return pkt3(nvd.PACKET3_INDIRECT_BUFFER, addr & 0xffffffff, addr >> 32, ndw | ctl)


def dispatch(rsrc1: int = 1 << 20, rsrc2: int = 1 << 6, initiator: int = 1) -> list[int]:
  return AMDComputeQueue(gfx11_dialect(GC_BASE)).set_sh_reg(gc.regCOMPUTE_PGM_RSRC1, rsrc1, rsrc2)._q + pkt3(0x15, 1, 1, 1, initiator)


def signal(b: Board, value: int, off: int = 3 << 20) -> list[int]:
  return AMDComputeQueue(gfx11_dialect(GC_BASE)).signal(FakeSignal(b.addr(off)), value)._q


def put(b: Board, off: int, words: list[int]) -> tuple[int, int]:
  b.mem[off:off + 4 * len(words)] = np.array(words, np.uint32).view(np.uint8)
  return b.addr(off), len(words)


ACQUIRE = gfx11_dialect(GC_BASE).acquire_mem()


def wait64(b: Board, control: int = 0x15, off: int = 0) -> list[int]:
  """A WAIT_REG_MEM64 body that passes at once (memory >= 0), but for what the caller breaks."""
  addr = b.addr(off)
  return [control, addr & 0xffffffff, addr >> 32, 0, 0, 0xffffffff, 0xffffffff, 4]
# (rule: text of the raise site, stream builder: Board -> compute dwords)
CP_CASES = [
  ("PM4 packet {header:#010x} on a compute queue", lambda b: [0x00000000]),
  ("is not a compute-queue packet this CP runs", lambda b: pkt3(0x99, 0)),
  ("body dwords; its layout has", lambda b: pkt3(nvd.PACKET3_ACQUIRE_MEM, *ACQUIRE[:-1])),       # ACQUIRE_MEM one short
  ("body dwords; its layout has", lambda b: pkt3(nvd.PACKET3_ACQUIRE_MEM, *ACQUIRE, 0)),         # and one long
  ("body dwords; its layout has", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM, 0x15, 0, 0, 0, 0)),
  ("body dwords; its layout has", lambda b: pkt3(nvd.PACKET3_RELEASE_MEM, 0, 0, 0, 0, 0, 0, 0, 0)),
  ("body dwords; its layout has", lambda b: pkt3(nvd.PACKET3_EVENT_WRITE, 0, 0)),
  ("body dwords; its layout has", lambda b: pkt3(nvd.PACKET3_DISPATCH_DIRECT, 1, 1, 1, 1, 0)),
  ("body dwords; its layout has", lambda b: pkt3(nvd.PACKET3_INDIRECT_BUFFER, 0, 0)),
  ("runs past the end of its stream", lambda b: ib(*put(b, IB, pkt3(nvd.PACKET3_NOP, 0, 0, 0)[:2]))),  # a NOP of 3 in an IB of 2
  ("with no register value", lambda b: pkt3(nvd.PACKET3_SET_SH_REG, 0)),
  ("outside its window", lambda b: pkt3(nvd.PACKET3_SET_SH_REG, SH_LAST + 1, 0)),                  # one register past the end
  ("outside its window", lambda b: pkt3(nvd.PACKET3_SET_SH_REG, SH_LAST, 0, 0)),                   # the last and one past it
  ("outside its window", lambda b: pkt3(nvd.PACKET3_SET_UCONFIG_REG, UCONFIG_LAST + 1, 0)),
  ("{what} on registers (mem_space", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM, 0x05, 0x100, 0, 0, 0xffffffff, 4)),  # mem_space 0
  ("{what} on registers (mem_space", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM, 0x15 | 1 << 6, 0x100, 0, 0, 0xffffffff, 4)),  # write-wait-write
  ("{what} function {function} is reserved", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM, 0x17, b.addr(0) & 0xffffffff, b.addr(0) >> 32, 0, 1, 4)),
  ("{what} with ENGINE {engine}: a compute queue", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM, 0x115, b.addr(0) & 0xffffffff, b.addr(0) >> 32, 0, 1, 4)),  # PFP
  ("WAIT_REG_MEM on {self.name} polls", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM, 0x15, (b.addr(0) + 2) & 0xffffffff, b.addr(0) >> 32, 0, 0xffffffff, 4)),
  # WAIT_REG_MEM64: its 8 body dwords (one short, one long), the same control rules, and an 8-byte aligned address
  ("body dwords; its layout has", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM64, *wait64(b)[:-1])),
  ("body dwords; its layout has", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM64, *wait64(b), 0)),
  ("{what} on registers (mem_space", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM64, *wait64(b, control=0x05))),
  ("{what} on registers (mem_space", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM64, *wait64(b, control=0x15 | 3 << 6))),  # preemptable wait
  ("{what} function {function} is reserved", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM64, *wait64(b, control=0x17))),
  ("{what} with ENGINE {engine}: a compute queue", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM64, *wait64(b, control=0x115))),
  ("the address must be 8-byte aligned", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM64, *wait64(b, off=4))),
  ("ACQUIRE_MEM of a range", lambda b: pkt3(nvd.PACKET3_ACQUIRE_MEM, 0, 0x1000, 0, 0, 0, 0xA, ACQUIRE[-1])),
  ("ACQUIRE_MEM of a range", lambda b: pkt3(nvd.PACKET3_ACQUIRE_MEM, *ACQUIRE[:-1], ACQUIRE[-1] | nvd.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_RANGE(1))),
  ("RELEASE_MEM with GCR GL2_RANGE or GL2_DISCARD", lambda b: pkt3(nvd.PACKET3_RELEASE_MEM, nvd.PACKET3_RELEASE_MEM_GCR_GL2_DISCARD, 0, 0, 0, 0, 0, 0)),
  ("the address must be", lambda b: signal(b, 1, (3 << 20) + 4)),                                 # 64-bit data at 4 mod 8
  ("the address must be", lambda b: pkt3(nvd.PACKET3_RELEASE_MEM, 0, 1 << 29, (b.addr(0) + 2) & 0xffffffff, b.addr(0) >> 32, 0, 0, 0)),
  ("RELEASE_MEM DATA_SEL {data_sel} is not emulated", lambda b: pkt3(nvd.PACKET3_RELEASE_MEM, 0, 5 << 29, b.addr(0) & 0xffffffff, b.addr(0) >> 32, 0, 0, 0)),
  ("EVENT_WRITE of event type", lambda b: pkt3(nvd.PACKET3_EVENT_WRITE, 0x3f)),
  ("COMPUTE_PGM_RSRC2.TRAP_PRESENT (bit 6) clear", lambda b: dispatch(rsrc2=0)),
  ("COMPUTE_PGM_RSRC1.PRIV (bit 20) clear", lambda b: dispatch(rsrc1=0)),
  ("without COMPUTE_SHADER_EN", lambda b: dispatch(initiator=0)),
  ("INDIRECT_BUFFER without its VALID bit", lambda b: ib(b.addr(IB), 4, ctl=0)),
  ("with CHAIN in the ring", lambda b: ib(*put(b, IB, signal(b, 1)), ctl=nvd.INDIRECT_BUFFER_VALID | IB_CHAIN)),
  ("inside an indirect buffer without CHAIN", lambda b: ib(*put(b, IB, ib(*put(b, IB2, signal(b, 1)))))),  # a nested IB (IB2)
  ("packets after a chained INDIRECT_BUFFER", lambda b: ib(*put(b, IB, ib(*put(b, IB2, signal(b, 1)), ctl=nvd.INDIRECT_BUFFER_VALID | IB_CHAIN) + signal(b, 2)))),
]


@pytest.fixture
def board():
  b = Board()
  yield b
  b.close()


def names(rule: str, message: str) -> bool:
  """Whether `message` is what the raise site whose source holds `rule` says (its literal parts, in the message)."""
  return all(part in message for part in re.split(r"\{[^}]*\}", rule.strip('"')) if part)


def stopped_with(b: Board, kind: str, rule: str) -> None:
  b.idle(kind)
  assert len(b.errors) == 1, f"expected the queue to stop on: {rule}; errors {b.errors}"
  assert names(rule, str(b.errors[0][1])), f"another rule stopped it: {b.errors[0][1]}"


@pytest.mark.parametrize("rule,stream", CP_CASES, ids=[f"{i}-{r[:40]}" for i, (r, _) in enumerate(CP_CASES)])
def test_cp_rule(board, rule, stream):
  board.submit("compute", stream(board))
  stopped_with(board, "compute", rule)
  assert board.u64(3 << 20) == 0, "a packet after the refused one ran"


def test_what_the_rules_let_through(board):
  """The window's last register, a chain from one IB to the next, a chain as the last packet, a WAIT_REG_MEM64 of 8
  dwords at an 8-byte aligned address: none is an error."""
  b = board
  first = put(b, IB, ib(*put(b, IB2, signal(b, 7)), ctl=nvd.INDIRECT_BUFFER_VALID | IB_CHAIN))
  b.submit("compute", pkt3(nvd.PACKET3_SET_SH_REG, SH_LAST, 5) + pkt3(nvd.PACKET3_SET_UCONFIG_REG, UCONFIG_LAST, 5) +
           pkt3(nvd.PACKET3_WAIT_REG_MEM64, *wait64(b)) + ib(*first))
  b.idle("compute")
  assert not b.errors and b.u64(3 << 20) == 7


def test_an_ib_chained_to_itself_runs_until_the_queue_is_destroyed(board):
  b = board
  addr = b.addr(IB)
  put(b, IB, pkt3(nvd.PACKET3_NOP, 0) + ib(addr, 6, ctl=nvd.INDIRECT_BUFFER_VALID | IB_CHAIN))
  b.submit("compute", ib(addr, 6))
  time.sleep(0.05)
  _, engine = b.rings["compute"]
  b.gpu.stop_queue(engine)
  assert not engine.is_alive() and not b.errors
  b.rings.pop("compute")


ENGINE_RULE = "units from the read pointer"


def test_engine_refuses_a_whole_ring_in_flight(board):
  ring, _ = board.rings["compute"]
  wptr = ring.size // 4  # every dword of the ring pending: reads as an empty ring on the hardware
  board.mem[ring.wptr_addr - board.addr(0):ring.wptr_addr - board.addr(0) + 8] = np.frombuffer(np.uint64(wptr).tobytes(), np.uint8)
  ring.doorbell.set()
  stopped_with(board, "compute", ENGINE_RULE)


# ---- SDMA ----
P = sdma_packets()
SDMA_CASES = [
  ("SDMA NOP of", lambda b: [5 << 16, 0]),                                       # 6 dwords announced, 2 written
  ("is not run on a user SDMA queue", lambda b: [0x0000_00FE, 0]),
  ("SDMA op {op} runs past the write pointer", lambda b: P["FENCE"].build(op=sdma.SDMA_OP_FENCE, addr_31_0=0, data=1)[:2]),
  ("SDMA FENCE to", lambda b: P["FENCE"].build(op=sdma.SDMA_OP_FENCE, addr_31_0=(b.addr(0) + 2) & 0xffffffff, addr_63_32=b.addr(0) >> 32)),
  ("POLL_REGMEM on a register", lambda b: P["POLL_REGMEM"].build(op=sdma.SDMA_OP_POLL_REGMEM, func=3, mem_poll=0)),
  ("POLL_REGMEM on {self.name} polls", lambda b: P["POLL_REGMEM"].build(op=sdma.SDMA_OP_POLL_REGMEM, func=5, mem_poll=1, addr_31_0=(b.addr(0) + 1) & 0xffffffff,
                                                                         addr_63_32=b.addr(0) >> 32, mask=0xffffffff)),
  ("POLL_REGMEM function", lambda b: P["POLL_REGMEM"].build(op=sdma.SDMA_OP_POLL_REGMEM, func=7, mem_poll=1,
                                                          addr_31_0=b.addr(0) & 0xffffffff, addr_63_32=b.addr(0) >> 32)),
  ("CONSTANT_FILL of", lambda b: P["CONSTANT_FILL"].build(op=sdma.SDMA_OP_CONST_FILL, fillsize=2, count=5, dst_addr_31_0=b.addr(0) & 0xffffffff,
                                                         dst_addr_63_32=b.addr(0) >> 32)),      # 6 bytes of 4-byte fill
]


@pytest.mark.parametrize("rule,stream", SDMA_CASES, ids=[r[:40] for r, _ in SDMA_CASES])
def test_sdma_rule(board, rule, stream):
  board.submit("sdma", stream(board))
  stopped_with(board, "sdma", rule)


# ---- gfx12 (RX 9070 XT): the gfx11 spellings whose meaning gfx12 changed, each refused on the gfx1201 board ----
GFX12_CASES = [  # (rule, queue kind, stream builder)
  ("RELEASE_MEM with GCR GLM_INV or GLM_WB (event dword {event:#010x}) on gfx12", "compute", lambda b: signal(b, 1)),  # gfx11's fence
  ("DISPATCH_DIRECT with COMPUTE_PGM_RSRC2 bit 6 set on gfx12", "compute", lambda b: dispatch(rsrc1=0, rsrc2=1 << 6)),  # gfx11's TRAP_PRESENT
  ("SDMA 7.0 COPY_LINEAR without CPV in its header", "sdma", lambda b: AMDCopyQueue(6).copy(b.addr(5 << 20), b.addr(4 << 20), 64)._q),
]


@pytest.fixture
def board12():
  b = Board(board=BOARDS["gfx1201"])
  yield b
  b.close()


def test_gfx12_takes_its_own_spellings(board12):
  """What the driver's gfx12 dialect and SDMA 7.0 builder write runs on the gfx1201 board: a fence, and a copy with its
  compression dword (eight dwords, the next packet read after it)."""
  b = board12
  b.mem[4 << 20:(4 << 20) + 64] = np.arange(64, dtype=np.uint8)
  b.submit("sdma", AMDCopyQueue(7).copy(b.addr(5 << 20), b.addr(4 << 20), 64).signal(FakeSignal(b.addr(3 << 20) + 64), 5)._q)
  b.submit("compute", AMDComputeQueue(gfx12_dialect(GC_BASE)).signal(FakeSignal(b.addr(3 << 20)), 9)._q)
  b.idle("sdma")
  b.idle("compute")
  assert not b.errors and b.u64(3 << 20) == 9 and b.u64((3 << 20) + 64) == 5
  np.testing.assert_array_equal(b.mem[5 << 20:(5 << 20) + 64], np.arange(64, dtype=np.uint8))


# ---- gfx9.4.3 (MI300X): the gfx10+ spellings gfx9 lacks, and PRED_EXEC / the XCC split where they cannot apply ----
GFX9 = gfx9_dialect(BOARDS["gfx942"].gc_bases)


def dispatch9(initiator: int = 1, *before: tuple) -> list[int]:
  q = AMDComputeQueue(GFX9).set_sh_reg(GFX9.regs.regCOMPUTE_PGM_RSRC1, 0, GFX9.regs.regCOMPUTE_PGM_RSRC2.encode(trap_present=1))
  for reg, value in before: q.set_sh_reg(reg, value)
  return q._q + pkt3(0x15, 1, 1, 1, initiator)


GFX9_CASES = [  # (rule, queue kind, stream builder)
  ("RELEASE_MEM event dword {event:#010x} sets bits", "compute", lambda b: signal(b, 1)),                 # gfx11's GCR fence
  ("body dwords; its layout has", "compute", lambda b: pkt3(nvd.PACKET3_ACQUIRE_MEM, *ACQUIRE)),            # gfx11's GCR_CNTL dword
  ("sets bit 15, gfx10+'s CS_W32_EN", "compute", lambda b: dispatch9(1 | 1 << 15)),                       # a wave32 dispatch
  ("PRED_EXEC in the ring", "compute", lambda b: pkt3(0x23, 1 << 24)),
  ("PRED_EXEC selects XCCs {select:#04x}; the partition has", "compute", lambda b: ib(*put(b, 6 << 20, pkt3(0x23, 0)))),
  ("predicates {used - count - 2} dwords past the end of its stream", "compute", lambda b: ib(*put(b, 6 << 20, pkt3(0x23, 2 << 24 | 9)))),
  ("COMPUTE_CURRENT_LOGIC_XCC_ID {logic}: the partition has", "compute",  # logical id 8 of 8 XCCs
   lambda b: pkt3(nvd.PACKET3_SET_SH_REG, GFX9.gc_base[0] + 0x0e25 - nvd.PACKET3_SET_SH_REG_START, 8) +
   dispatch9(1, (GFX9.regs.regCOMPUTE_TG_CHUNK_SIZE, 1))),
  ("COMPUTE_PGM_RSRC2.TRAP_PRESENT (bit 6) clear", "compute", lambda b: dispatch9(1, (GFX9.regs.regCOMPUTE_PGM_RSRC2, 0))),
  ("WAIT_REG_MEM64 on gfx9.4.3: soc15d.h defines no such packet", "compute", lambda b: pkt3(nvd.PACKET3_WAIT_REG_MEM64, *wait64(b))),
  ("SDMA 4.4 FENCE with", "sdma", lambda b: AMDCopyQueue(6).signal(FakeSignal(b.addr(3 << 20)), 1)._q),  # SDMA 6.0's MTYPE
  ("SDMA 4.4 COPY_LINEAR with count", "sdma", lambda b: AMDCopyQueue(7).copy(b.addr(5 << 20), b.addr(4 << 20), 64)._q),  # 7.0's CPV
]


@pytest.fixture
def board9():
  b = Board(board=BOARDS["gfx942"])
  yield b
  b.close()


FAMILY_CASES = [("gfx1201", *c) for c in GFX12_CASES] + [("gfx942", *c) for c in GFX9_CASES]


@pytest.mark.parametrize("arch,rule,kind,stream", FAMILY_CASES, ids=[f"{a}-{r[:40]}" for a, r, _, _ in FAMILY_CASES])
def test_family_rule(arch, rule, kind, stream):
  """Each board's own refusals (gfx12, gfx9.4.3): the packet stops its queue naming the rule, and nothing after it runs."""
  b = Board(board=BOARDS[arch])
  try:
    b.submit(kind, stream(b))
    stopped_with(b, kind, rule)
    assert b.u64(3 << 20) == 0, "a packet after the refused one ran"
  finally:
    b.close()


def test_gfx9_takes_its_own_spellings(board9):
  """What the driver's gfx9.4.3 dialect and SDMA 4.4 builder write runs on the gfx942 board: 32-bit waits, ACQUIRE_MEM of
  6 dwords, an EOP fence, an SDMA copy and fences without SDMA 6.0's cache-policy fields."""
  b = board9
  b.mem[4 << 20:(4 << 20) + 64] = np.arange(64, dtype=np.uint8)
  reached = FakeSignal(b.addr(4 << 20))  # holds 0x0706050403020100: both waits pass
  b.submit("sdma", AMDCopyQueue(4).wait(reached, 0x0706050403020100).copy(b.addr(5 << 20), b.addr(4 << 20), 64)
           .signal(FakeSignal(b.addr(3 << 20) + 64), 5)._q)
  b.submit("compute", AMDComputeQueue(GFX9).wait(reached, 0x0706050403020100).memory_barrier().signal(FakeSignal(b.addr(3 << 20)), 9)._q)
  b.idle("sdma")
  b.idle("compute")
  assert not b.errors and b.u64(3 << 20) == 9 and b.u64((3 << 20) + 64) == 5
  np.testing.assert_array_equal(b.mem[5 << 20:(5 << 20) + 64], np.arange(64, dtype=np.uint8))


# ---- the kernel side: (rule text, errno, what breaks it on a fresh process) ----
def two_gpus() -> Process:
  p = Process(boards=(BoardSpec(), BoardSpec()))
  p.other = list(p.os.kfd.nodes)[1]
  return p


def ids_of(*gpu_ids: int):
  arr = (ctypes.c_uint32 * len(gpu_ids))(*gpu_ids)
  return dict(device_ids_array_ptr=ctypes.addressof(arr), n_devices=len(gpu_ids)), arr


def mapped(p: Process, off: int, size: int = 4096, flags: int = GTT):
  a = p.alloc(size, flags, va=p.va + off)
  p.map(a.handle, p.gpu_id)
  return a


def queue_args(p: Process, **change) -> dict:
  if not hasattr(p, "_ptrs"): p._ptrs = mapped(p, 8 << 20)
  return {**dict(gpu_id=p.gpu_id, queue_type=K.KFD_IOC_QUEUE_TYPE_SDMA, ring_size=4096, ring_base_address=p.va + (16 << 20),
                 read_pointer_address=p.va + (8 << 20), write_pointer_address=p.va + (8 << 20) + 8, queue_percentage=100), **change}


def kfd_mmap(p: Process, length: int, offset: int, fd: int | None = None):
  return p.os.mmap(0, length, libc.PROT_READ | libc.PROT_WRITE, libc.MAP_SHARED, p.kfd if fd is None else fd, offset)


def map_call(p: Process, handle: int, gpu_ids: tuple[int, ...] = (), **kw):
  args, arr = ids_of(*(gpu_ids or (p.gpu_id,)))
  return p.call("MAP_MEMORY_TO_GPU", "map_memory_to_gpu", handle=handle, **{**args, **kw})


def unmap_call(p: Process, handle: int):
  args, arr = ids_of(p.gpu_id)
  return p.call("UNMAP_MEMORY_FROM_GPU", "unmap_memory_from_gpu", handle=handle, **args)


def event_page(p: Process, off: int = 32 << 20, size: int = 4096 * 8):
  page = p.alloc(size, va=p.va + off)
  return p.call("CREATE_EVENT", "create_event", event_type=K.KFD_IOC_EVENT_SIGNAL, event_page_offset=page.handle), page


def wait_on_destroyed(p: Process):
  ev = p.call("CREATE_EVENT", "create_event", event_type=K.KFD_IOC_EVENT_SIGNAL)
  data = (K.struct_kfd_event_data * 1)()
  data[0].event_id = ev.event_id
  threading.Timer(0.1, lambda: p.call("DESTROY_EVENT", "destroy_event", event_id=ev.event_id)).start()
  p.call("WAIT_EVENTS", "wait_events", events_ptr=ctypes.addressof(data), num_events=1, timeout=5000)


def compute_args(p: Process, **change) -> dict:
  """A compute queue whose buffers satisfy kfd_queue_acquire_buffers, with `change` applied."""
  sizes = cwsr_sizes(next(iter(p.os.kfd.nodes.values())).board)
  page = lambda n: (n + 4095) // 4096 * 4096
  ptrs, ring, eop = mapped(p, 0), mapped(p, 1 << 20, 8192), mapped(p, 2 << 20)
  cwsr = mapped(p, 4 << 20, page(sizes.cwsr + sizes.debug))
  good = dict(gpu_id=p.gpu_id, queue_type=K.KFD_IOC_QUEUE_TYPE_COMPUTE, ring_base_address=ring.va_addr, ring_size=8192,
              queue_percentage=100, read_pointer_address=ptrs.va_addr, write_pointer_address=ptrs.va_addr + 8,
              eop_buffer_address=eop.va_addr, eop_buffer_size=4096, ctx_save_restore_address=cwsr.va_addr,
              ctx_save_restore_size=sizes.cwsr, ctl_stack_size=sizes.ctl_stack)
  return {**good, **{k: (v(sizes) if callable(v) else v) for k, v in change.items()}}


def create_queue(p: Process, **args):
  return p.call("CREATE_QUEUE", "create_queue", **args)


KFD_CASES = [  # (rule, errno, kernel profile, action)
  ("outside AMDKFD_COMMAND_START..END", errno.ENOTTY, "6.1", lambda p: p.os.ioctl(p.kfd, (K.AMDKFD_IOC_GET_VERSION & ~0xff) | 0x30, K.struct_kfd_ioctl_get_version_args())),
  ("exists in amdkfd but is not emulated", errno.ENOTTY, "6.1", lambda p: p.os.ioctl(p.kfd, (K.AMDKFD_IOC_GET_VERSION & ~0xff) | 0x04, K.struct_kfd_ioctl_get_version_args())),
  ("no device with gpu_id", errno.EINVAL, "6.1", lambda p: p.call("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=p.va, size=4096, gpu_id=0x1234, flags=GTT)),
  ("process not bound, ACQUIRE_VM first", errno.ENODEV, "unbound", lambda p: p.alloc(4096)),
  ("is not an open render node", errno.EINVAL, "unbound", lambda p: p.call("ACQUIRE_VM", "acquire_vm", drm_fd=12345, gpu_id=p.gpu_id)),
  ("VM already acquired with another file", errno.EBUSY, "6.1", lambda p: p.call("ACQUIRE_VM", "acquire_vm", drm_fd=p.os.open("/dev/dri/renderD128", os.O_RDWR), gpu_id=p.gpu_id)),
  ("render node of another GPU", errno.EINVAL, "two", lambda p: p.call("ACQUIRE_VM", "acquire_vm", drm_fd=p.drm, gpu_id=p.other)),
  ("num_of_nodes larger than the topology", errno.EINVAL, "6.1", lambda p: p.call("GET_PROCESS_APERTURES_NEW", "get_process_apertures_new", num_of_nodes=3)),
  ("apertures pointer", errno.EFAULT, "6.1", lambda p: p.call("GET_PROCESS_APERTURES_NEW", "get_process_apertures_new", num_of_nodes=1, kfd_process_device_apertures_ptr=8)),
  ("size 0", errno.EINVAL, "6.1", lambda p: p.alloc(0)),
  ("doorbell BO size", errno.EINVAL, "6.1", lambda p: p.alloc(4096, K.KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL)),
  ("MMIO remap BO size", errno.EINVAL, "6.1", lambda p: p.alloc(8192, K.KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)),
  ("no memory domain in flags", errno.EINVAL, "6.1", lambda p: p.alloc(4096, K.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)),
  ("USERPTR without a user address", errno.EINVAL, "6.1", lambda p: p.alloc(4096, K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR)),
  ("VRAM exhausted", errno.ENOMEM, "6.1", lambda p: p.alloc(25 << 30, VRAM)),
  ("USERPTR {a.mmap_offset:#x}+{size:#x} is not mapped", errno.EFAULT, "6.1", lambda p: p.call("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=p.va, size=4096, gpu_id=p.gpu_id,
                                                              flags=K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, mmap_offset=unmapped_page())),
  ("no buffer object with handle", errno.EINVAL, "6.1", lambda p: p.call("FREE_MEMORY_OF_GPU", "free_memory_of_gpu", handle=p.gpu_id << 32 | 99)),
  ("the event page cannot be freed", errno.EPERM, "6.1", lambda p: p.call("FREE_MEMORY_OF_GPU", "free_memory_of_gpu", handle=event_page(p)[1].handle)),
  ("is still mapped", errno.EBUSY, "6.1", lambda p: p.call("FREE_MEMORY_OF_GPU", "free_memory_of_gpu", handle=mapped(p, 0).handle)),
  ("n_devices 0", errno.EINVAL, "6.1", lambda p: map_call(p, p.alloc(4096).handle, n_devices=0)),
  ("n_success > n_devices", errno.EINVAL, "6.1", lambda p: map_call(p, p.alloc(4096).handle, n_success=2)),
  ("device_ids_array_ptr", errno.EFAULT, "6.1", lambda p: map_call(p, p.alloc(4096).handle, device_ids_array_ptr=8)),
  ("peer mappings are not emulated", errno.EINVAL, "two", lambda p: (p.call("ACQUIRE_VM", "acquire_vm", drm_fd=p.os.open("/dev/dri/renderD129", os.O_RDWR), gpu_id=p.other),
                                                                     map_call(p, p.alloc(4096).handle, (p.other,)))),
  ("Invalid VA", errno.EINVAL, "6.1", lambda p: map_call(p, p.alloc(4096, va=0).handle)),
  ("unaligned or beyond the VM", errno.EINVAL, "6.1", lambda p: map_call(p, p.alloc(4096, va=p.va + 12).handle)),
  ("overlaps the kernel's reserved pages", errno.EINVAL, "6.1", lambda p: map_call(p, p.alloc(4096, va=0x2000).handle)),
  ("conflicts with an existing mapping", errno.EINVAL, "6.1", lambda p: (mapped(p, 0, 8192), map_call(p, p.alloc(4096, va=p.va + 4096).handle))),
  ("BO {a.handle:#x} is not mapped", errno.EINVAL, "6.1", lambda p: unmap_call(p, p.alloc(4096).handle)),
  ("queue_percentage > 100", errno.EINVAL, "6.1", lambda p: create_queue(p, **queue_args(p, queue_percentage=101))),
  ("queue_percentage > 100", errno.EINVAL, "6.1", lambda p: create_queue(p, **queue_args(p, queue_percentage=100 | 1 << 8))),  # 6.1: no XCC bits
  ("pm4_target_xcc {target_xcc}", errno.EINVAL, "6.12", lambda p: create_queue(p, **queue_args(p, queue_percentage=100 | 1 << 8))),  # 1 XCC
  ("queue_priority > 15", errno.EINVAL, "6.1", lambda p: create_queue(p, **queue_args(p, queue_priority=16))),
  ("\"ring_base_address\"", errno.EFAULT, "6.1", lambda p: create_queue(p, **queue_args(p, ring_base_address=1 << 47))),
  ("not a power of 2", errno.EINVAL, "6.1", lambda p: create_queue(p, **queue_args(p, ring_size=3000))),
  ("\"read_pointer_address\"", errno.EFAULT, "6.1", lambda p: create_queue(p, **queue_args(p, read_pointer_address=1 << 47))),
  ("\"write_pointer_address\"", errno.EFAULT, "6.1", lambda p: create_queue(p, **queue_args(p, write_pointer_address=1 << 47))),
  ("\"eop_buffer_address\"", errno.EFAULT, "6.1", lambda p: create_queue(p, **queue_args(p, eop_buffer_address=1 << 47))),
  ("\"ctx_save_restore_address\"", errno.EFAULT, "6.1", lambda p: create_queue(p, **queue_args(p, ctx_save_restore_address=1 << 47))),
  ("AQL queues are not emulated", ENOTSUPP, "6.1", lambda p: create_queue(p, **queue_args(p, queue_type=K.KFD_IOC_QUEUE_TYPE_COMPUTE_AQL))),
  ("queue type {a.queue_type}", ENOTSUPP, "6.1", lambda p: create_queue(p, **queue_args(p, queue_type=9))),
  ("Failed to lookup wptr bo", errno.EINVAL, "6.1", lambda p: create_queue(p, **queue_args(p, write_pointer_address=p.va + (10 << 20)))),
  ("at most one page", errno.EINVAL, "6.1", lambda p: (mapped(p, 9 << 20, 8192), create_queue(p, **queue_args(p, write_pointer_address=p.va + (9 << 20))))),
  ("127 queues per process", errno.ENOSPC, "6.1", lambda p: [create_queue(p, **queue_args(p)) for _ in range(128)]),
  ("expected a mapping of", errno.EINVAL, "6.12", lambda p: create_queue(p, **compute_args(p, ring_size=4096))),
  ("not equal to node eop buf size", errno.EINVAL, "6.12", lambda p: create_queue(p, **compute_args(p, eop_buffer_size=8192))),
  ("not equal to node ctl stack size", errno.EINVAL, "6.12", lambda p: create_queue(p, **compute_args(p, ctl_stack_size=lambda s: s.ctl_stack + 4096))),
  ("not equal to node cwsr size", errno.EINVAL, "6.12", lambda p: create_queue(p, **compute_args(p, ctx_save_restore_size=lambda s: s.cwsr + 4096))),
  ("not sufficient for node cwsr size", errno.EINVAL, "mainline", lambda p: create_queue(p, **compute_args(p, ctx_save_restore_size=lambda s: s.cwsr - 4096))),
  ("no queue {a.queue_id}", errno.EINVAL, "6.1", lambda p: p.call("DESTROY_QUEUE", "destroy_queue", queue_id=5)),
  ("event page already set", errno.EINVAL, "6.1", lambda p: (event_page(p), event_page(p, 48 << 20))),
  ("a USERPTR BO cannot be the event page", errno.EINVAL, "6.1", lambda p: p.call("CREATE_EVENT", "create_event", event_type=K.KFD_IOC_EVENT_SIGNAL,
      event_page_offset=userptr_page(p))),
  ("event page of {bo.size} bytes", errno.EINVAL, "6.1", lambda p: event_page(p, size=4096)),
  ("signal event slots in use", errno.ENOSPC, "6.1", lambda p: [p.call("CREATE_EVENT", "create_event", event_type=K.KFD_IOC_EVENT_SIGNAL) for _ in range(256)]),
  ("no event {event_id}", errno.EINVAL, "6.1", lambda p: p.call("SET_EVENT", "set_event", event_id=4000)),
  ("only signal events can be set", errno.EINVAL, "6.1", lambda p: p.call("SET_EVENT", "set_event", event_id=p.call("CREATE_EVENT", "create_event", event_type=K.KFD_IOC_EVENT_HW_EXCEPTION).event_id)),
  ("only signal events can be reset", errno.EINVAL, "6.1", lambda p: p.call("RESET_EVENT", "reset_event", event_id=p.call("CREATE_EVENT", "create_event", event_type=K.KFD_IOC_EVENT_HW_EXCEPTION).event_id)),
  ("\"events_ptr\"", errno.EFAULT, "6.1", lambda p: p.call("WAIT_EVENTS", "wait_events", events_ptr=8, num_events=1, timeout=0)),
  ("an event was destroyed while waited on", errno.EIO, "6.1", wait_on_destroyed),
  ("doorbell mmap for unknown gpu_id", errno.ENODEV, "6.1", lambda p: kfd_mmap(p, DOORBELL_SLICE, 3 << MMAP_TYPE_SHIFT | 0x77 << MMAP_GPU_ID_SHIFT)),
  ("the process slice is", errno.EINVAL, "6.1", lambda p: kfd_mmap(p, 4096, 3 << MMAP_TYPE_SHIFT | p.gpu_id << MMAP_GPU_ID_SHIFT)),
  ("event page mmap larger than 32 KiB", errno.EINVAL, "6.1", lambda p: kfd_mmap(p, 16 * 4096, 2 << MMAP_TYPE_SHIFT)),
  ("no event page yet", errno.EINVAL, "6.1", lambda p: kfd_mmap(p, 4096, 2 << MMAP_TYPE_SHIFT)),
  ("mmap type {kind} is not emulated", errno.EINVAL, "6.1", lambda p: kfd_mmap(p, 4096, 0 << MMAP_TYPE_SHIFT | p.gpu_id << MMAP_GPU_ID_SHIFT)),
  ("mmap type {kind} is not emulated", errno.EFAULT, "6.1", lambda p: kfd_mmap(p, 4096, 1 << MMAP_TYPE_SHIFT | p.gpu_id << MMAP_GPU_ID_SHIFT)),
  ("did not acquire the VM", errno.EACCES, "6.1", lambda p: kfd_mmap(p, 4096, p.alloc(4096).mmap_offset, p.os.open("/dev/dri/renderD128", os.O_RDWR))),
  ("-byte BO", errno.EINVAL, "6.1", lambda p: kfd_mmap(p, 8192, p.alloc(4096).mmap_offset, p.drm)),
  ("no BO at mmap offset", errno.EINVAL, "6.1", lambda p: kfd_mmap(p, 4096, 0x1234 << 32, p.drm)),
]


def unmapped_page() -> int:
  addr = libc.mmap(0, 4096, libc.PROT_READ, libc.MAP_PRIVATE | libc.MAP_ANONYMOUS, -1, 0)
  libc.munmap(addr, 4096)
  return addr


def userptr_page(p: Process) -> int:
  buf = (ctypes.c_uint8 * (8 * 4096 + 4096))()
  p._keep = buf
  addr = (ctypes.addressof(buf) + 4095) & ~4095
  return p.call("ALLOC_MEMORY_OF_GPU", "alloc_memory_of_gpu", va_addr=p.va, size=8 * 4096, gpu_id=p.gpu_id,
                flags=K.KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | K.KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, mmap_offset=addr).handle


@pytest.mark.parametrize("rule,code,profile,action", KFD_CASES, ids=[f"{i}-{r[:36]}" for i, (r, *_) in enumerate(KFD_CASES)])
def test_kfd_rule(rule, code, profile, action):
  p = two_gpus() if profile == "two" else Process(acquire=profile != "unbound", kernel=profile if profile in ("6.12", "mainline") else "6.1")
  try:
    with pytest.raises(OSError) as e:
      action(p)
    assert e.value.errno == code, e.value
    assert names(rule, str(e.value)), f"another rule refused it: {e.value}"
  finally:
    for q in list(p.os.kfd.queues): p.call("DESTROY_QUEUE", "destroy_queue", queue_id=q)


# ---- every raise site is named by a case ----
UNREACHABLE = {  # site text: why no input reaches it
  "a packet runs past the write pointer": "engine.py's generic check: both engines refuse a packet past their window first",
  "{type(e).__name__}: {e}": "engine.py: not a rule, an engine fault (page fault) reported as the queue's error; test_amd_device covers faults",
}


TESTED_ELSEWHERE = {  # site text: the test that breaks it
  "the scheduler is hung after a failed preemption": "test_threads.py::test_destroy_queue_that_cannot_be_preempted_is_etimedout_then_eio",
  "failed to remove hardware queue from MES": "test_threads.py::test_destroy_queue_that_cannot_be_preempted_is_etimedout_then_eio",
}


def raise_sites() -> list[tuple[str, str]]:
  sites = []
  for rel in ("drivers/mock/kfd.py", "drivers/mock/amdgpu/cp.py", "drivers/mock/amdgpu/sdma.py", "drivers/mock/amdgpu/engine.py"):
    text = (ROOT / rel).read_text()
    for m in re.finditer(r"(?:raise|self\.error = |raise kerr\()\s*(?:QueueError|kerr)\((.*)", text):
      sites.append((rel, m.group(0)))
  return sites


def test_every_rule_has_a_breaking_case():
  rules = [r for r, _ in CP_CASES + SDMA_CASES] + [r for r, *_ in KFD_CASES + GFX12_CASES + GFX9_CASES] + [ENGINE_RULE] + list(UNREACHABLE) + list(TESTED_ELSEWHERE)
  sites = raise_sites()
  missing = [f"{rel}: {line.strip()}" for rel, line in sites if not any(r in line for r in rules)]
  assert len(sites) >= 90 and not missing, f"{len(sites)} rules; without a breaking case: " + "\n".join(missing)
