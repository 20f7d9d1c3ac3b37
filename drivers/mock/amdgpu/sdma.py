"""The mock SDMA 6.0 and 7.0 engines: decode packets with the table the driver builds them with, and carry them out.

SDMA 7.0 (gfx12) reads SDMA 6.0's packet layouts (Linux 6.12 sdma_v7_0.c includes sdma_v6_0_0_pkt_open.h) except that
COPY_LINEAR has an eighth dword of compression parameters, present when the header's CPV bit is set; amdgpu always
sets it on SDMA 7.0 (sdma_v7_0_emit_copy_buffer, sdma_v7_0_ring_test_ib). The mock requires it there: unsure how the
engine reads a 7-dword copy without CPV, it takes the stricter side."""
from __future__ import annotations

import numpy as np

from hcq.autogen.am import sdma_v6_0_0_pkt_open as sdma
from hcq.drivers.amd.sdma_packets import sdma_packets
from hcq.drivers.mock.amdgpu.cp import WAIT_FUNCTIONS
from hcq.drivers.mock.amdgpu.engine import Engine
from hcq.drivers.mock.amdgpu.ring import QueueError


class SDMAEngine(Engine):
  """One SDMA queue. Only the packets a user queue sends are run; others stop the queue."""
  kind = "sdma"

  def __init__(self, gpu, ring, name: str):
    super().__init__(gpu, ring, name)
    self.sdma7, self.sdma4 = gpu.board.sdma_version[0] >= 7, gpu.board.sdma_version[0] == 4
    P = sdma_packets()
    self.nop_count = lambda header: (header >> P["NOP"].fields["count"].shift) & P["NOP"].fields["count"].mask
    self.handlers = {  # (op, sub_op) -> packet layout and what it does
      (sdma.SDMA_OP_COPY, sdma.SDMA_SUBOP_COPY_LINEAR): (P["COPY_LINEAR"], self._copy_linear),
      (sdma.SDMA_OP_FENCE, 0): (P["FENCE"], self._fence),
      (sdma.SDMA_OP_TRAP, 0): (P["TRAP"], self._trap),
      (sdma.SDMA_OP_POLL_REGMEM, 0): (P["POLL_REGMEM"], self._poll_regmem),
      (sdma.SDMA_OP_TIMESTAMP, sdma.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL): (P["TIMESTAMP_GET_GLOBAL"], self._timestamp),
      (sdma.SDMA_OP_CONST_FILL, 0): (P["CONSTANT_FILL"], self._constant_fill),
    }

  def packet(self, words: list[int], i: int, where: int) -> int:
    header = words[i]
    op, sub_op = header & 0xff, (header >> 8) & 0xff
    if (op, sub_op) == (sdma.SDMA_OP_NOP, 0):  # the header and `count` more dwords (sdma_v6_0_ring_insert_nop: a burst NOP
      n = 1 + self.nop_count(header)           # of count - 1 then plain ones); the table's DATA0 is only the first of them
      if i + n > len(words): raise QueueError(f"SDMA NOP of {n} dwords runs past the write pointer", where)
      return n
    entry = self.handlers.get((op, sub_op))
    if entry is None: raise QueueError(f"SDMA op {op} sub_op {sub_op} (header {header:#010x}) is not run on a user SDMA queue", where)
    layout, handler = entry
    if i + layout.size > len(words): raise QueueError(f"SDMA op {op} runs past the write pointer", where)
    f = layout.decode(words[i:i + layout.size])
    extra = handler(f, where) or 0
    if i + layout.size + extra > len(words): raise QueueError(f"SDMA op {op} runs past the write pointer", where)
    return layout.size + extra

  def _copy_linear(self, f: dict, where: int) -> int:
    if self.sdma7 and not f["cpv"]:
      raise QueueError("SDMA 7.0 COPY_LINEAR without CPV in its header: a 7-dword SDMA 6.0 copy; SDMA 7.0's has the "
                       "compression dword after the addresses (sdma_v7_0_emit_copy_buffer)", where)
    if self.sdma4 and (f["count"] > 0x3FFFFF or f["cpv"]):
      raise QueueError(f"SDMA 4.4 COPY_LINEAR with count {f['count']:#x} or CPV {f['cpv']}: its count is 22 bits and it has no CPV "
                       "(vega10_sdma_pkt_open.h)", where)
    n = f["count"] + 1
    src, dst = f["src_addr_63_32"] << 32 | f["src_addr_31_0"], f["dst_addr_63_32"] << 32 | f["dst_addr_31_0"]
    data = self.gpu.mem.view(src, n).copy()  # memmove semantics when the ranges overlap
    self.gpu.mem.view(dst, n, write=True)[:] = data
    return int(self.sdma7)  # the compression dword (its DCC fields have no effect on plain memory here)

  def _fence(self, f: dict, where: int) -> None:
    policy = {k: f[k] for k in ("mtype", "gcc", "sys", "snp", "gpa", "l2_policy", "llc_policy", "cpv") if f[k]}
    if self.sdma4 and policy:
      raise QueueError(f"SDMA 4.4 FENCE with {policy}: SDMA 6.0's cache-policy fields; SDMA 4.4's FENCE header has none "
                       "(sdma_v4_4_2_ring_emit_fence)", where)
    addr = f["addr_63_32"] << 32 | f["addr_31_0"]
    if addr & 3: raise QueueError(f"SDMA FENCE to {addr:#x}: the address must be 4-byte aligned (sdma_v6_0_ring_emit_fence)", where)
    self.gpu.mem.write_u32(addr, f["data"])
    self.gpu.memory_written()

  def _trap(self, f: dict, where: int) -> None:
    self.gpu.interrupt(f["int_context"])

  def _poll_regmem(self, f: dict, where: int) -> None:
    if not f["mem_poll"]: raise QueueError("POLL_REGMEM on a register is not emulated", where)
    if f["func"] not in WAIT_FUNCTIONS: raise QueueError(f"POLL_REGMEM function {f['func']} is reserved", where)
    addr, test, mask, ref = f["addr_63_32"] << 32 | f["addr_31_0"], WAIT_FUNCTIONS[f["func"]], f["mask"], f["value"]
    if addr & 3:  # PAL's SDMA_PKT_POLL_REGMEM: ADDR_LO holds addr_31_2 over 2 reserved bits; unknown what the engine does with them
      raise QueueError(f"POLL_REGMEM on {self.name} polls {addr:#x}: the address must be 4-byte aligned "
                       "(its low dword's bits 1:0 are reserved)", where)
    self.poll(lambda: test(self.gpu.mem.read_u32(addr) & mask, ref & mask))

  def _timestamp(self, f: dict, where: int) -> None:
    self.gpu.mem.write_u64(f["write_addr_63_32"] << 32 | f["write_addr_31_3"] << 3, self.gpu.clock())

  def _constant_fill(self, f: dict, where: int) -> None:
    size = 1 << f["fillsize"]
    n = f["count"] + 1
    if n % size: raise QueueError(f"CONSTANT_FILL of {n} bytes is not a multiple of its {size}-byte fill", where)
    dst = self.gpu.mem.view(f["dst_addr_63_32"] << 32 | f["dst_addr_31_0"], n, write=True)
    dst[:] = np.frombuffer(f["src_data_31_0"].to_bytes(4, "little")[:size] * (n // size), "uint8")
