"""WAIT_REG_MEM (PM4) and POLL_REGMEM (SDMA) wait until (memory & mask) <function> (reference & mask), with the function
and mask the packet gives: function 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 > on unsigned 32-bit values (the PM4
packet reference's WAIT_REG_MEM FUNCTION field; sdma_v6_0_ring_emit_wait / SDMA_PKT_POLL_REGMEM's FUNC, the same
encoding); WAIT_REG_MEM64 (gfx10+) the same on unsigned 64-bit values with a 64-bit reference and mask. The reference
here is the definition, written apart from the engines' table."""
from __future__ import annotations
import operator
import time

import numpy as np
import pytest

from hcq.autogen.am import sdma_v6_0_0_pkt_open as sdma
from hcq.drivers.amd.pm4 import AMDComputeQueue, gfx11_dialect
from hcq.drivers.amd.sdma import AMDCopyQueue
from hcq.drivers.amd.sdma_packets import sdma_packets
from tests.test_amd_queues import GC_BASE, Board, FakeSignal

DEFINITION = {0: lambda m, r: True, 1: operator.lt, 2: operator.le, 3: operator.eq, 4: operator.ne, 5: operator.ge, 6: operator.gt}
# (memory, reference, mask): equal, below, above, equal only under a 16-bit mask, the sign bit (unsigned compare)
CASES = [(5, 5, 0xffffffff), (4, 5, 0xffffffff), (6, 5, 0xffffffff), (0x10005, 0x20005, 0xffff), (0x20004, 0x10005, 0xffff),
         (0x80000000, 1, 0xffffffff), (1, 0x80000000, 0xffffffff), (0x1234_0000, 0x1234_0001, 0xffff_0000)]
# 64-bit: equal; equal in the low word only (the high word decides); equal under a mask whose high word is 0; just below
# and just above 2^32; the sign bit of the quadword (unsigned compare); a 64-bit mask over both words
CASES64 = [(5, 5, (1 << 64) - 1), (0x1_0000_0005, 5, (1 << 64) - 1), (5, 0x1_0000_0005, (1 << 64) - 1), (0x1_0000_0005, 5, 0xffffffff),
           (0xffff_ffff, 0x1_0000_0000, (1 << 64) - 1), (0x1_0000_0000, 0xffff_ffff, (1 << 64) - 1), (1 << 63, 1, (1 << 64) - 1),
           (0x0002_0000_0001_0000, 0x0001_0000_0002_0000, 0xffff_0000_0000_0000)]
WIDTH = {"compute": 32, "sdma": 32, "compute64": 64}
MEM, FLAG = 4 << 20, 5 << 20


def passes(func: int, mem: int, ref: int, mask: int) -> bool:
  return DEFINITION[func](mem & mask, ref & mask)


def wait_packet(kind: str, func: int, addr: int, ref: int, mask: int) -> list[int]:
  if kind == "compute64":  # nvd.h PACKET3_WAIT_REG_MEM64: control, address, reference lo/hi, mask lo/hi, poll interval
    return AMDComputeQueue(gfx11_dialect(GC_BASE)).pkt3(0x93, func | 1 << 4, addr & 0xffffffff, addr >> 32, ref & 0xffffffff, ref >> 32,
                                                        mask & 0xffffffff, mask >> 32, 4)._q
  if kind == "compute":
    return AMDComputeQueue(gfx11_dialect(GC_BASE)).pkt3(0x3C, func | 1 << 4, addr & 0xffffffff, addr >> 32, ref, mask, 4)._q
  return sdma_packets()["POLL_REGMEM"].build(op=sdma.SDMA_OP_POLL_REGMEM, func=func, mem_poll=1, addr_31_0=addr & 0xffffffff,
                                             addr_63_32=addr >> 32, value=ref, mask=mask, interval=4, retry_count=0xfff)


def reached(ring, position: int, settle: float = 0.02) -> None:
  """Wait until the engine's read position is at `position` (where the wait packet starts), then a little longer."""
  deadline = time.monotonic() + 5
  while ring.position < position:
    assert time.monotonic() < deadline, "the engine never reached the wait"
    time.sleep(1e-3)
  time.sleep(settle)


def mark_packet(kind: str, addr: int, value: int) -> list[int]:
  q = AMDCopyQueue() if kind == "sdma" else AMDComputeQueue(gfx11_dialect(GC_BASE))
  return q.signal(FakeSignal(addr), value)._q


@pytest.mark.parametrize("kind", ["compute", "sdma", "compute64"])
@pytest.mark.parametrize("func", range(7))
def test_the_wait_compares_with_the_function_and_mask_given(kind, func):
  b = Board()
  width = WIDTH[kind]
  full, dtype = (1 << width) - 1, np.uint64 if width == 64 else np.uint32
  try:
    ring, _ = b.rings[kind.removesuffix("64")]
    for k, (mem, ref, mask) in enumerate(CASES64 if width == 64 else CASES):
      b.mem[MEM:MEM + width // 8] = np.frombuffer(dtype(mem).tobytes(), np.uint8)
      at = ring.wptr
      b.submit(kind.removesuffix("64"), wait_packet(kind, func, b.addr(MEM), ref, mask) + mark_packet(kind, b.addr(FLAG), k + 1))
      if passes(func, mem, ref, mask):
        b.idle(kind.removesuffix("64"))
      else:
        reached(ring, at)
        assert b.u64(FLAG) == k, f"function {func} passed with memory {mem:#x}, reference {ref:#x}, mask {mask:#x}"
        release = next(v & full for v in (ref, ref + 1, ref - 1, ref ^ mask, 0, full) if passes(func, v & full, ref, mask))
        b.mem[MEM:MEM + width // 8] = np.frombuffer(dtype(release).tobytes(), np.uint8)
        b.idle(kind.removesuffix("64"))
      assert not b.errors and b.u64(FLAG) == k + 1, f"function {func}, case {k}: {b.errors}"
  finally:
    b.close()


def packets(kind: str, words: list[int]) -> list[list[int]]:
  """Split a queue's dwords at packet boundaries: PM4 type-3 headers count their body dwords minus one (the PM4 packet
  reference); the SDMA signal packets are FENCE and TRAP, whose sizes the SDMA packet table gives."""
  sizes = {sdma.SDMA_OP_FENCE: sdma_packets()["FENCE"].size, sdma.SDMA_OP_TRAP: sdma_packets()["TRAP"].size}
  out, i = [], 0
  while i < len(words):
    n = (words[i] >> 16 & 0x3FFF) + 2 if kind == "compute" else sizes[words[i] & 0xFF]
    out.append(words[i:i + n]); i += n
  return out


@pytest.mark.parametrize("kind", ["compute", "sdma"])
@pytest.mark.parametrize("old, new", [(0xFFFF_FFFF, 0x1_0000_0000), (0x1_FFFF_FFF0, 0x2_0000_0005), (7, 0x3_0000_0009)])
def test_a_signal_past_2_32_is_never_seen_above_its_value(kind, old, new):
  """An SDMA FENCE writes 32 bits: after each packet of a signal to a value past 2^32, a reader (a 64-bit host read, or
  the high-then-low 32-bit waits of SDMA and gfx9) must never see more than the new value, as it would with the high
  half written first (0x1_ffff_ffff on the way to 0x1_0000_0000). The engines run packets one at a time, in order."""
  b = Board()
  try:
    b.mem[FLAG:FLAG + 8] = np.frombuffer(np.uint64(old).tobytes(), np.uint8)
    for pkt in packets(kind, mark_packet(kind, b.addr(FLAG), new)):
      b.submit(kind, pkt)
      b.idle(kind)
      assert b.u64(FLAG) <= new, f"{kind}: reads {b.u64(FLAG):#x} between {old:#x} and {new:#x}: the high half landed first"
    assert not b.errors and b.u64(FLAG) == new
  finally:
    b.close()
