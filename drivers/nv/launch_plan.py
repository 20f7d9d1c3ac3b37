"""The launch fast path: `prg(*bufs, global_size=, local_size=, vals=)` without timing.

A LaunchPlan holds, per (program, grid, block, shared memory), what every such launch sends alike, as one block: the QMD
and constant bank 0's driver part (NVProgram.block_template, RELEASE1 already pointing at the device's timeline
signal), then the methods of the device's launch queue for that shape (NVDevice._launch_queue: the generic path's own
words). A launch copies the block into the kernarg ring, packs the arguments into it with one precompiled struct
(hcq.program.ArgStruct), stores the four values that change (constant bank 0's address and the timeline value RELEASE1
writes, in the QMD; the acquire's value and the QMD's address, in the methods) and pushes one GPFIFO entry pointing at
the methods in the block: no queue, no patch slots, no pushbuffer copy. The GPU fetches the same method words and reads
the same QMD and bank 0 bytes as from the generic path (Device.launch with NVProgram.kernargs and place_kernargs);
tests/test_nv_launch.py holds the two to that on every QMD version. The block's ring slot is reused only when the
timeline passes the launch, so the methods are fetched before that. Timed launches (wait=True, profiling) take the
generic path.
"""
from __future__ import annotations
import array
import struct
from typing import TYPE_CHECKING, Any, Sequence

from hcq.drivers.nv.qmd import QMD_ALIGN, QMDAddress, QMDPatch
from hcq.errors import HCQError
from hcq.program import ArgStruct, pack_kernargs
from hcq.sym import Bits

if TYPE_CHECKING:
  from hcq.drivers.nv.program import NVProgram

_Q, _I = struct.Struct("<Q"), struct.Struct("<I")


class LaunchPlan:
  """One shape of one program, launched with what changes per launch only; see the module docstring."""

  def __init__(self, program: "NVProgram", gs: tuple[int, int, int], ls: tuple[int, int, int], shared: int):
    dev = self.device = program.device
    self.program = program
    block = bytearray(program.block_template(gs, ls, shared))  # the launch limits are checked here, once
    program.point_qmd(memoryview(block).cast("I"), 0, 0, 0, dev.timeline_signal.value_addr, 0)  # RELEASE1's address and enables
    self.args = ArgStruct.make(program.layout, dev)
    if self.args is not None and any(block[self.args.start:self.args.end]): self.args = None  # the struct writes zeros between arguments
    # the two QMD values a launch sets, each one 64-bit store: constant bank 0's address and RELEASE1's payload
    L = program.layout_qmd
    self.qmd = QMDPatch(L, [(L.cbank("addr_lower", 0), L.cbank("addr_upper", 0), L.cbank_shift),
                            (L.release("payload_lower", 1), L.release("payload_upper", 1), 0)])
    (self.bank0_at, self.bank0_base, self.bank0_shift, self.bank0_limit), (self.payload_at, self.payload_base, _, _) = self.qmd.qwords(block)
    # the generic path's methods for this shape after the block, and its three patch slots: the acquire's value, the QMD's address
    with dev.lock:  # the cached queue is built and patched under the lock (Device.launch)
      q = dev._launch_queue(program, gs, ls, False)
      methods = array.array("I", q.words())
    slots = {(sym.base.name, sym.shift) if isinstance(sym, Bits) else (sym.base.name, "qmd") if isinstance(sym, QMDAddress) else None: i
             for _, i, sym in q._patches}
    wait, qmd = slots.get(("wait", 0)), slots.get(("kernargs", "qmd"))
    if len(slots) != 3 or wait is None or slots.get(("wait", 32)) != wait + 1 or qmd is None:
      raise HCQError(f"{program.name}: the launch queue's patch slots are not the acquire's value and the QMD's address: {slots}")
    self.channel, self.nwords, self.kernarg_size = q.channel, len(methods), len(block)
    self.wait_at, self.qmd_slot_at = len(block) + 4 * wait, len(block) + 4 * qmd  # byte offsets in the block
    methods[wait] = methods[wait + 1] = methods[qmd] = 0
    self.template = bytes(block) + methods.tobytes()
    self.size = len(self.template)

  def launch(self, bufs: Sequence[Any], vals: Sequence[Any]) -> None:
    """One launch (the caller's prg(...) without wait). The arguments are packed before anything is written: what the
    ArgStruct does not take goes through pack_kernargs, which refuses as the generic path does."""
    prg, dev, packer = self.program, self.device, self.args
    params = packer.pack(bufs, vals) if packer is not None else None
    block = self._packed(bufs, vals) if params is None else None
    with dev.lock:
      v, ring = dev.timeline_value, dev.kernargs
      addr = ring.reserve(self.size, v)
      if addr % QMD_ALIGN: raise HCQError(f"a QMD at {addr:#x} is not {QMD_ALIGN}-byte aligned (SEND_PCAS_A takes the address >> 8)")
      at = addr - ring.buf.addr
      mem = prg._ring
      mem[at:at + self.size] = self.template
      if block is None: mem[at + packer.start:at + packer.end] = params
      else: mem[at:at + self.kernarg_size] = block
      bank0 = addr + prg.qmd_bytes
      w = bank0 >> self.bank0_shift
      if w << self.bank0_shift != bank0 or w > self.bank0_limit: self.qmd.check(0, bank0)  # raises, naming the field
      _Q.pack_into(mem, at + self.bank0_at, self.bank0_base | w)
      _Q.pack_into(mem, at + self.payload_at, self.payload_base | v)
      _Q.pack_into(mem, at + self.wait_at, v - 1)  # the acquire's payload: its lower and upper words
      _I.pack_into(mem, at + self.qmd_slot_at, addr >> 8)  # SEND_PCAS_A
      dev.run_submission(dev.push_methods, self.channel, addr + self.kernarg_size, self.nwords)
      dev.timeline_value = v + 1

  def _packed(self, bufs: Sequence[Any], vals: Sequence[Any]) -> bytearray:
    """The QMD and bank 0 with the arguments packed by pack_kernargs (the generic path's packer and its refusals)."""
    prg = self.program
    return pack_kernargs(prg.name, prg.layout, bufs, tuple(vals), self.kernarg_size, self.device, self.template[:self.kernarg_size])
