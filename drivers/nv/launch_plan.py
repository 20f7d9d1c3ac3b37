"""The launch fast path: `prg(*bufs, global_size=, local_size=, vals=)` without timing, for a shape launched before.

A LaunchPlan holds, per (program, grid, block, shared memory), what every such launch sends alike: the launch block (QMD
and constant bank 0's driver part, with RELEASE1 already pointing at the device's timeline signal), the program's
ArgStruct, and the device's cached launch queue (the generic path's own methods). A launch then copies the block into
the kernarg ring, packs the arguments there with one struct call, ORs in the two QMD fields that change (constant bank
0's address, the timeline value RELEASE1 writes), writes the three method words that change (the acquire's value, the
QMD's address) and submits the methods. The bytes are the generic path's (Device.launch with NVProgram.kernargs and
place_kernargs); tests/test_nv_launch.py holds the two to that on every QMD version. Timed launches (wait=True,
profiling) take the generic path.
"""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING, Any, Sequence

from hcq.drivers.nv.qmd import QMDAddress, QMDPatch
from hcq.errors import HCQError
from hcq.program import ArgStruct, pack_kernargs
from hcq.sym import Bits

if TYPE_CHECKING:
  from hcq.drivers.nv.program import NVProgram

_Q = struct.Struct("<Q")


class LaunchPlan:
  """One shape of one program, launched with what changes per launch only; see the module docstring."""

  def __init__(self, program: "NVProgram", gs: tuple[int, int, int], ls: tuple[int, int, int], shared: int):
    dev = self.device = program.device
    self.program = program
    block = bytearray(program.block_template(gs, ls, shared))  # the launch limits are checked here, once
    program.point_qmd(memoryview(block).cast("I"), 0, 0, 0, dev.timeline_signal.value_addr, 0)  # RELEASE1's address and enables
    self.template, self.size = bytes(block), len(block)
    self.args = ArgStruct.make(program.layout, dev)
    if self.args is not None and any(block[self.args.start:self.args.end]): self.args = None  # the struct writes zeros between arguments
    # the two QMD values a launch sets, each one 64-bit store: constant bank 0's address and RELEASE1's payload
    L = program.layout_qmd
    self.qmd = QMDPatch(L, [(L.cbank("addr_lower", 0), L.cbank("addr_upper", 0), L.cbank_shift),
                            (L.release("payload_lower", 1), L.release("payload_upper", 1), 0)])
    (self.bank0_at, self.bank0_base, self.bank0_shift, self.bank0_limit), (self.payload_at, self.payload_base, _, _) = self.qmd.qwords(block)
    # the generic path's methods for this shape, and where its three patch slots are: the acquire's value, the QMD's address
    self.queue = q = dev._launch_queue(program, gs, ls, False)
    self.words = q.words()
    slots = {(sym.base.name, sym.shift) if isinstance(sym, Bits) else (sym.base.name, "qmd") if isinstance(sym, QMDAddress) else None: i
             for _, i, sym in q._patches}
    self.wait_at, self.qmd_slot = slots.get(("wait", 0)), slots.get(("kernargs", "qmd"))
    if len(slots) != 3 or self.wait_at is None or slots.get(("wait", 32)) != self.wait_at + 1 or self.qmd_slot is None:
      raise HCQError(f"{program.name}: the launch queue's patch slots are not the acquire's value and the QMD's address: {slots}")

  def launch(self, bufs: Sequence[Any], vals: Sequence[Any]) -> None:
    """One launch (the caller's prg(...) without wait). Arguments are checked before anything is written: what the
    ArgStruct does not take goes through pack_kernargs, which refuses as the generic path does."""
    prg, dev = self.program, self.device
    params = self.args.pack(bufs, vals) if self.args is not None else None
    block = pack_kernargs(prg.name, prg.layout, bufs, tuple(vals), self.size, dev, self.template) if params is None else None
    with dev.lock:
      v, ring = dev.timeline_value, dev.kernargs
      addr = ring.reserve(self.size, v)
      at = addr - ring.buf.addr
      mem = prg._ring
      if block is None:
        mem[at:at + self.size] = self.template
        mem[at + self.args.start:at + self.args.end] = params
      else: mem[at:at + self.size] = block
      bank0 = addr + prg.qmd_bytes
      w = bank0 >> self.bank0_shift
      if w << self.bank0_shift != bank0 or w > self.bank0_limit: self.qmd.check(0, bank0)  # raises, naming the field
      _Q.pack_into(mem, at + self.bank0_at, self.bank0_base | w)
      _Q.pack_into(mem, at + self.payload_at, self.payload_base | v)
      try:
        words = self.words
        words[self.wait_at], words[self.wait_at + 1], words[self.qmd_slot] = (v - 1) & 0xFFFFFFFF, (v - 1) >> 32, addr >> 8
        dev.submit_words(self.queue.channel, words)
      except BaseException:
        dev.submit_refused()
        raise
      if dev._taken.__dict__: dev.submitted()
      dev.timeline_value = v + 1
