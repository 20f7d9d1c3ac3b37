"""The AMD queue builders (PM4, SDMA) against the mock GPU's engines, which decode strictly."""
from __future__ import annotations
import re
import time
import types

import numpy as np
import pytest

from hcq.device import Device
from hcq.drivers.amd.pm4 import AMDComputeQueue, gfx11_dialect
from hcq.drivers.amd.sdma import COPY_LINEAR_MAX, AMDCopyQueue
from hcq.drivers.amd.sdma_packets import sdma_packets
from hcq.drivers.mock.amdgpu.gpu import BOARDS, BoardSpec, MockAMDGPU
from hcq.drivers.mock.amdgpu.ring import Ring
from hcq.sym import Variable

VA = 0x7f0000000000
RING_BYTES = 1 << 16
GC_BASE = (0x1260, 0xA000)  # gfx11 GC register segment bases, as IP discovery reports them


class FakeSignal:
  def __init__(self, addr: int):
    self.value_addr, self.timestamp_addr, self.value = addr, addr + 8, 0


class Board:
  """A mock GPU with one compute and one SDMA queue over 32 MiB of memory; `run` writes a queue's dwords and rings."""

  def __init__(self, ring_bytes: int = RING_BYTES, board: BoardSpec = BOARDS["gfx1100"]):
    self.irqs, self.errors, self.ring_bytes = [], [], ring_bytes
    self.gpu = MockAMDGPU(board, on_interrupt=self.irqs.append, on_queue_error=lambda e, err, cause: self.errors.append((e.queue_name, err)))
    self.mem = np.zeros(32 << 20, np.uint8)
    self.gpu.mem.map(VA, self.mem.size, self.mem)
    self.rings = {}
    for i, (kind, unit) in enumerate((("compute", 4), ("sdma", 1))):
      base = VA + i * RING_BYTES
      ring = Ring(self.gpu.mem, base, ring_bytes, VA + (2 << 20) + 64 * i, VA + (2 << 20) + 64 * i + 8, unit)
      self.rings[kind] = (ring, self.gpu.start_queue(kind, ring, kind))
    self.wptr = {"compute": 0, "sdma": 0}

  def addr(self, off: int) -> int:
    return VA + off

  def u64(self, off: int) -> int:
    return int(self.mem[off:off + 8].view(np.uint64)[0])

  def submit(self, kind: str, words: list[int]) -> None:
    ring, _ = self.rings[kind]
    data = np.array(words, np.uint32).view(np.uint8)
    for k, b in enumerate(data):  # byte by byte through the wrap, as the driver's ring writer does in bulk
      self.mem[(ring.base - VA) + (self.wptr[kind] + k) % self.ring_bytes] = b
    self.wptr[kind] += len(data)
    self.mem[ring.wptr_addr - VA:ring.wptr_addr - VA + 8] = np.frombuffer(np.uint64(self.wptr[kind] // ring.unit).tobytes(), np.uint8)
    ring.doorbell.set()

  def idle(self, kind: str, timeout: float = 5.0) -> None:
    ring, engine = self.rings[kind]
    deadline = time.monotonic() + timeout
    while ring.rptr != ring.wptr and engine.error is None:
      assert time.monotonic() < deadline, f"{kind} queue did not drain"
      time.sleep(1e-4)

  def close(self):
    for ring, engine in self.rings.values(): self.gpu.stop_queue(engine)


@pytest.fixture
def board():
  b = Board()
  yield b
  b.close()


def test_sdma_copy_fence_timestamp(board):
  n = 3 * COPY_LINEAR_MAX // 2 + 123  # two COPY_LINEAR chunks
  board.mem[4 << 20:(4 << 20) + n] = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
  sig = FakeSignal(board.addr(3 << 20))
  q = AMDCopyQueue().copy(board.addr(12 << 20), board.addr(4 << 20), n).signal(sig, (5 << 32) | 9).timestamp(sig)
  assert sum(1 for w in q._q if w & 0xff == 1) >= 2
  board.submit("sdma", q._q)
  board.idle("sdma")
  assert not board.errors
  assert (board.mem[12 << 20:(12 << 20) + n] == board.mem[4 << 20:(4 << 20) + n]).all()
  assert board.u64(3 << 20) == (5 << 32) | 9 and board.u64((3 << 20) + 8) > 0


def test_cross_queue_order(board):
  """SDMA polls a value only the compute queue writes; the compute queue waits on a host-written gate."""
  gate, done, copied = (FakeSignal(board.addr((3 << 20) + 64 * i)) for i in range(3))
  board.mem[5 << 20:(5 << 20) + 8] = 42
  board.submit("sdma", AMDCopyQueue().wait(done, 1).copy(board.addr(6 << 20), board.addr(5 << 20), 8).signal(copied, 1)._q)
  board.submit("compute", AMDComputeQueue(gfx11_dialect(GC_BASE)).wait(gate, 3).signal(done, 1)._q)
  time.sleep(0.05)
  assert board.u64((3 << 20) + 128) == 0 and board.u64((3 << 20) + 64) == 0
  board.mem[3 << 20] = 3  # the host opens the gate
  board.idle("compute"); board.idle("sdma")
  assert board.u64((3 << 20) + 128) == 1 and (board.mem[6 << 20:(6 << 20) + 8] == 42).all()


def test_patch_slots_replay(board):
  sig = FakeSignal(board.addr(3 << 20))
  q = AMDCopyQueue().copy(Variable("dst"), Variable("src"), 16).signal(sig, Variable("v"))
  for step in range(3):
    board.mem[(4 << 20) + 16 * step:(4 << 20) + 16 * step + 16] = step + 1
    q._apply_patches({"dst": board.addr(8 << 20), "src": board.addr((4 << 20) + 16 * step), "v": step + 1})
    board.submit("sdma", list(q._q))
    board.idle("sdma")
    assert board.u64(3 << 20) == step + 1 and (board.mem[8 << 20:(8 << 20) + 16] == step + 1).all()


class BoardDevice:
  """The device side of HWQueue.submit for a Board: the queue's words go into the board's ring."""

  def __init__(self, board: Board):
    self.board, self._taken = board, types.SimpleNamespace()

  def submit_pm4(self, q) -> None: self.board.submit("compute", list(q.words()))
  def submit_sdma(self, q) -> None: self.board.submit("sdma", list(q.words()))
  def submit_refused(self) -> None: pass
  run_submission = Device.run_submission   # the device's own submission step, over this fake's hooks


@pytest.mark.parametrize("kind", ["compute", "sdma"])
def test_patch_slots_keep_their_values_when_a_submitted_queue_grows(board, kind):
  """A queue that grows after a submit refreezes its words: every patch slot, old and new, carries each later submit's
  values (the first submit after the growth included)."""
  sig, extra = FakeSignal(board.addr(3 << 20)), FakeSignal(board.addr((3 << 20) + 64))
  q = (AMDComputeQueue(gfx11_dialect(GC_BASE)) if kind == "compute" else AMDCopyQueue()).signal(sig, Variable("v"))
  for step in range(1, 5):
    if step in (2, 3): q.signal(extra, Variable("w") + step)  # grows after the first and the second submit
    q.submit(BoardDevice(board), {"v": 10 * step, "w": 100 * step})
    board.idle(kind)
    assert not board.errors and board.u64(3 << 20) == 10 * step, f"submit {step}: signal {board.u64(3 << 20)}"
    assert board.u64((3 << 20) + 64) == (0 if step == 1 else 100 * step + min(step, 3)), f"submit {step}"


def test_interrupt_from_signal_with_event(board):
  sig = FakeSignal(board.addr(3 << 20))
  sig.event_id = 77
  board.submit("compute", AMDComputeQueue(gfx11_dialect(GC_BASE)).signal(sig, 1)._q)
  board.submit("sdma", AMDCopyQueue().signal(sig, 2)._q)
  board.idle("compute"); board.idle("sdma")
  assert board.irqs == [77, 77]


def test_indirect_buffer(board):
  sig = FakeSignal(board.addr(3 << 20))
  ib = AMDComputeQueue(gfx11_dialect(GC_BASE)).signal(sig, 11).memory_barrier()
  board.mem[7 << 20:(7 << 20) + 4 * len(ib)] = np.array(ib._q, np.uint32).view(np.uint8)
  board.submit("compute", AMDComputeQueue(gfx11_dialect(GC_BASE)).indirect_buffer(board.addr(7 << 20), len(ib))._q)
  board.idle("compute")
  assert not board.errors and board.u64(3 << 20) == 11


@pytest.mark.parametrize("words,message", [
  ([0xC0001000 | (0x99 << 8)], "PM4 opcode 0x99 is not a compute-queue packet"),
  ([(3 << 30) | (0x3C << 8) | (3 << 16), 0, 0, 0, 0], r"opcode 0x3c with 4 body dwords; its layout has 6"),
  ([(3 << 30) | (0x76 << 8) | (1 << 16), 0x500, 1], r"SET_SH_REG of registers 0x3100\.\.0x3100 outside its window 0x2c00\.\.0x2fff"),
  ([0x00000000], "type-0 PM4 packet"),
  ([(3 << 30) | (0x15 << 8) | (3 << 16), 1, 1, 1, 0], "without COMPUTE_SHADER_EN"),
])
def test_cp_rejects(board, words, message):
  board.submit("compute", words)
  board.idle("compute")
  assert len(board.errors) == 1 and board.errors[0][0] == "compute"
  assert board.errors[0][1].offset == 0
  assert re.search(message, str(board.errors[0][1])), str(board.errors[0][1])


def test_dispatch_without_shader_core_is_a_queue_error(board):
  from hcq.autogen.am import gc_11_0_0 as gc
  board.gpu.shader_core = None
  init = gc.regCOMPUTE_DISPATCH_INITIATOR.encode(compute_shader_en=1)
  rsrc = AMDComputeQueue(gfx11_dialect(GC_BASE)).set_sh_reg(gc.regCOMPUTE_PGM_RSRC1, 1 << 20, 1 << 6)._q  # PRIV, TRAP_PRESENT
  board.submit("compute", rsrc + [(3 << 30) | (0x15 << 8) | (3 << 16), 1, 1, 1, init])
  board.idle("compute")
  assert "no shader core" in str(board.errors[0][1])


def test_sdma_rejects_unknown_op(board):
  board.submit("sdma", [0x0000_00FE, 0])
  board.idle("sdma")
  assert "SDMA op 254 sub_op 0" in str(board.errors[0][1])


def test_sdma_packet_table_round_trips():
  P = sdma_packets()
  words = P["COPY_LINEAR"].build(op=1, count=0x3fffff, src_addr_31_0=0xdeadbeef, dst_addr_63_32=0x1234)
  assert P["COPY_LINEAR"].decode(words)["src_addr_31_0"] == 0xdeadbeef and P["COPY_LINEAR"].decode(words)["count"] == 0x3fffff
  with pytest.raises(ValueError, match="does not fit"):
    P["COPY_LINEAR"].build(count=1 << 30)
  with pytest.raises(ValueError, match="has no field 'bogus'"):
    P["FENCE"].build(bogus=1)


def test_packets_across_the_ring_end_run_and_the_read_pointers_are_reported_as_the_hardware_does():
  """The engines read a ring circularly: the kernel's own rings put packets across the end (amdgpu_ring_write masks
  the write pointer with buf_mask for gfx, compute and SDMA rings alike), so a straddling packet is not an error. The CP
  reports its read pointer as a wrapping 32-bit dword offset, SDMA as a growing 64-bit byte count."""
  b = Board(ring_bytes=1024)
  try:
    sig = FakeSignal(b.addr(3 << 20))
    nop = (3 << 30) | (0x10 << 8)
    b.submit("compute", [nop | (250 << 16)] + [0] * 251)  # 252 dwords: a RELEASE_MEM now starts 4 dwords before the end
    b.submit("sdma", [250 << 16] + [0] * 250)              # 251 dwords: the second FENCE now straddles the end
    b.idle("compute"); b.idle("sdma")
    b.submit("compute", AMDComputeQueue(gfx11_dialect(GC_BASE)).signal(sig, 0x1234)._q)
    b.idle("compute")
    assert not b.errors and b.u64(3 << 20) == 0x1234
    ring, _ = b.rings["compute"]
    assert ring.position == 260 and b.u64(ring.rptr_addr - VA) == 260 % 256  # the CP's report wraps
    b.submit("sdma", AMDCopyQueue().signal(sig, 0x5678)._q)
    b.idle("sdma")
    assert not b.errors and b.u64(3 << 20) == 0x5678
    ring, _ = b.rings["sdma"]
    assert b.u64(ring.rptr_addr - VA) == 4 * (251 + 8) == ring.position  # SDMA's does not
  finally:
    b.close()


def test_sdma_nop_is_its_header_and_count_more_dwords(board):
  sig = FakeSignal(board.addr(3 << 20))
  board.submit("sdma", [0, 0, 2 << 16, 0xdead, 0xbeef] + AMDCopyQueue().signal(sig, 9)._q)  # two one-dword NOPs, one of three
  board.idle("sdma")
  assert not board.errors and board.u64(3 << 20) == 9


@pytest.mark.parametrize("rsrc1,rsrc2,message", [(1 << 20, 0, r"COMPUTE_PGM_RSRC2\.TRAP_PRESENT \(bit 6\) clear"),
                                                 (0, 1 << 6, r"COMPUTE_PGM_RSRC1\.PRIV \(bit 20\) clear on GC 11\.0\.0")])
def test_cp_rejects_a_dispatch_cwsr_could_not_preempt(board, rsrc1, rsrc2, message):
  from hcq.autogen.am import gc_11_0_0 as gc
  q = AMDComputeQueue(gfx11_dialect(GC_BASE)).set_sh_reg(gc.regCOMPUTE_PGM_RSRC1, rsrc1, rsrc2)
  q.pkt3(0x15, 1, 1, 1, gc.regCOMPUTE_DISPATCH_INITIATOR.encode(compute_shader_en=1))
  board.submit("compute", q._q)
  board.idle("compute")
  assert len(board.errors) == 1 and re.search(message, str(board.errors[0][1])), board.errors


def test_engines_refuse_misaligned_fences(board):
  board.submit("compute", AMDComputeQueue(gfx11_dialect(GC_BASE)).signal(FakeSignal(board.addr((3 << 20) + 4)), 1)._q)
  board.submit("sdma", AMDCopyQueue().signal(FakeSignal(board.addr((3 << 20) + 2)), 1)._q)
  board.idle("compute"); board.idle("sdma")
  assert sorted(name for name, _ in board.errors) == ["compute", "sdma"]
  assert all(re.search("must be [48]-byte aligned", str(e)) for _, e in board.errors), board.errors
