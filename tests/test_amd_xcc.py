"""Dispatches split over the XCCs of the emulated MI300X's partition (MOCKKFD+AMD::gfx942, SPX: 8 XCCs in one KFD node):
one PM4 queue per XCC on one ring, each XCC running its chunks of every dispatch through its own L2, and XCC 0 alone
writing signals after a cross-XCC barrier (docs/hcq.md, MI300X). A planted fault in the driver's stream shows."""
from __future__ import annotations
import time

import numpy as np
import pytest

from hcq.asm.kernel import Kernel
from hcq.autogen.am import soc15d
from hcq.devstring import parse_dev
from hcq.drivers.amd import pm4
from hcq.drivers.amd.device import AMDDevice
from hcq.errors import GPUFault, GPUTimeout
from tests.amd_boards import ADD_WG

GROUPS, LOCAL = 37, 64  # not a multiple of the 8 XCCs: the last round of chunks is partial

ADD = ADD_WG  # x[g * 64 + t] += t + 1 in gfx942's (GCN) spellings


def open_mi300x() -> AMDDevice:
  return AMDDevice(parse_dev("MOCKKFD+AMD::gfx942"))


def gpu_of(dev):
  return next(iter(dev.os.kfd.nodes.values())).gpu


def launch(dev, times: int = 1) -> np.ndarray:
  """`times` launches of ADD over GROUPS workgroups of device (L2-cached) memory, then the result as SDMA reads it."""
  prg = dev.program(Kernel("add", dev.arch, args=[("x", "u64")]).add(ADD).to_elf())
  x = dev.alloc(4 * GROUPS * LOCAL, "device")
  x.copyin(np.zeros(GROUPS * LOCAL, np.uint32))
  for _ in range(times): prg(vals=(x.addr,), global_size=(GROUPS, 1, 1), local_size=(LOCAL, 1, 1), wait=True)
  out = np.empty(GROUPS * LOCAL, np.uint32)
  x.copyout(out)
  return out


def expected(times: int = 1) -> np.ndarray:
  return np.tile(np.arange(1, LOCAL + 1, dtype=np.uint32), GROUPS) * times


def settle(dev) -> None:
  """Let every XCC's CP reach the write pointer (a planted fault leaves some behind XCC 0)."""
  q, gpu = dev.queues["compute"], gpu_of(dev)
  gpu.xcc_packet_delay[:] = [0.0] * len(gpu.xcc_packet_delay)
  deadline = time.monotonic() + 30
  while dev._pending(q) and time.monotonic() < deadline: time.sleep(1e-3)


@pytest.mark.parametrize("mode,xccs", [("", 8), (":dpx", 4), (":qpx/nps4", 2)])
def test_every_xcc_runs_its_share_and_the_result_is_exact(mode, xccs):
  """SPX's 8 XCCs, and a DPX or QPX partition's 4 or 2 (num_xcc from the partition's node), each a queue and a share."""
  from hcq.drivers.mock.os import mock_kfd_os
  dev = AMDDevice(parse_dev(f"MOCKKFD+AMD::gfx942{mode}"), os_layer=mock_kfd_os("gfx942", mode[1:] or None))
  q, gpu = dev.queues["compute"], gpu_of(dev)
  assert dev.split.xccs == xccs and len(q["ids"]) == xccs == len(set(q["doorbells"]))
  before = list(gpu.xcc_workgroups)
  np.testing.assert_array_equal(launch(dev, 3), expected(3))
  ran = [a - b for a, b in zip(gpu.xcc_workgroups, before)]
  # chunks of one workgroup dealt round robin (37 = 4 x 8 + 5 on 8 XCCs), three launches
  assert ran == [3 * (GROUPS // xccs + (i < GROUPS % xccs)) for i in range(xccs)]


def test_xccs_drifting_apart_still_give_the_exact_result_and_an_honest_signal():
  dev = open_mi300x()
  gpu_of(dev).xcc_packet_delay[1:] = [2e-3] * 7  # XCC 0 runs ahead of the others
  np.testing.assert_array_equal(launch(dev), expected())
  settle(dev)


def test_xcc0_packets_after_a_barrier_need_no_other():
  """XCC 0's timestamp and signal after a dispatch stand behind the dispatch's barrier alone: the other XCCs run
  nothing after it and XCC 0 runs its own packets in order. A dispatch after them, or a stream's first XCC 0 packet
  (what came before it is not known), gets its barrier."""
  dev = open_mi300x()
  prg = dev.program(Kernel("add", dev.arch, args=[("x", "u64")]).add(ADD).to_elf())
  s = dev.new_signal(0)
  q = dev.compute_queue().exec(prg, 0, (8, 1, 1), (LOCAL, 1, 1)).timestamp(s).signal(s, 1)
  assert q.barrier_count == 1
  assert q.exec(prg, 0, (8, 1, 1), (LOCAL, 1, 1)).signal(s, 2).barrier_count == 2
  assert dev.compute_queue().timestamp(s).signal(s, 1).barrier_count == 1
  dev.release_signal(s)


def test_a_missing_cross_xcc_barrier_gives_an_early_signal(monkeypatch):
  """XCC 0 signals once its own share is done: the host sees the other XCCs' shares missing (still running, or in
  their L2s, never written back)."""
  monkeypatch.setattr(pm4.AMDComputeQueue, "xcc_barrier", lambda self: self)
  dev = open_mi300x()
  gpu_of(dev).xcc_packet_delay[1:] = [2e-3] * 7
  out = launch(dev)
  settle(dev)
  wrong = out.reshape(GROUPS, LOCAL)[:, 0] != 1
  assert wrong.any() and not wrong[::8].any()  # XCC 0's workgroups (0, 8, 16, ...) are right, others' are not


def test_a_barrier_without_l2_write_back_leaves_the_other_xccs_results_in_their_l2s(monkeypatch):
  """The barrier's RELEASE_MEMs without EOP_TC_WB: every XCC has finished when XCC 0 signals, but only XCC 0's L2 was
  written back (by the signal's own RELEASE_MEM), so SDMA reads the others' workgroups as they were before."""
  release_mem = pm4.AMDComputeQueue.release_mem

  def without_write_back(self, addr, value, data_sel, int_sel=0, ctxid=0):
    release_mem(self, addr, value, data_sel, int_sel, ctxid)
    if self.split and isinstance(addr, int) and self.split.sync_addr <= addr < self.split.sync_addr + 4 * self.split.xccs: self._q[-7] &= ~soc15d.EOP_TC_WB_ACTION_EN
    return self
  monkeypatch.setattr(pm4.AMDComputeQueue, "release_mem", without_write_back)
  dev = open_mi300x()
  first = launch(dev).reshape(GROUPS, LOCAL)[:, 0]
  settle(dev)
  assert (first[::8] == 1).all() and (np.delete(first, np.s_[::8]) == 0).all()


def test_a_missing_pred_exec_runs_one_share_everywhere(monkeypatch):
  """Without PRED_EXEC every XCC takes the last logical id it is given (all run XCC 7's chunks, the rest never run)
  and writes every signal (a late XCC sets the timeline back): wrong data, or a wait that times out."""
  monkeypatch.setattr(pm4.AMDComputeQueue, "on_xccs", lambda self, mask, build: (build(), self)[1])
  dev = open_mi300x()
  dev.default_timeout = 5.0
  try:
    out = launch(dev)
  except GPUTimeout:  # every XCC wrote every signal: a slower one set the timeline back below a later value
    return settle(dev)
  settle(dev)
  assert not np.array_equal(out, expected())


def test_pred_exec_in_the_ring_stops_the_queue():
  """PRED_EXEC predicates an indirect buffer's packets; in the ring the mock refuses it (the stricter side)."""
  dev = open_mi300x()
  q = dev.compute_queue().on_xccs(1, lambda: None)
  with dev.lock: dev._write_ring("compute", q.words())
  with pytest.raises(GPUFault, match="PRED_EXEC in the ring"):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline: dev.check_faults(); time.sleep(1e-3)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_the_radeons_keep_one_queue(arch):
  dev = AMDDevice(parse_dev(f"MOCKKFD+AMD::{arch}"))
  assert dev.split is None and len(dev.queues["compute"]["ids"]) == 1
  assert dev.compute_queue().split is None and dev.scratch_xcc_bytes == 0


def test_a_cpx_partition_is_one_xcc_with_one_queue():
  """MI300X in CPX mode: each KFD node is one XCC (num_xcc 1), so one PM4 queue runs every dispatch whole, scratch holds
  one XCC's 38 x 32 slots and the CWSR buffer one save area of 38 CUs; the driver reads num_xcc from the topology."""
  from hcq.drivers.mock.os import mock_kfd_os
  dev = AMDDevice(parse_dev("MOCKKFD+AMD:3::gfx942:cpx"), os_layer=mock_kfd_os("gfx942", "CPX"))
  assert dev.node.properties["num_xcc"] == 1 and dev.split is None and len(dev.queues["compute"]["ids"]) == 1
  assert dev.scratch_slots() == (1, 38 * 32) and dev.compute_queue().split is None
  wg_data, ctl_stack, debug = 38 * 0x95000, 4096 * 3, 1520 * 32
  assert dev._cwsr_sizes() == (wg_data + ctl_stack, ctl_stack, (wg_data + ctl_stack + debug + 4095) // 4096 * 4096)
  np.testing.assert_array_equal(launch(dev), expected())
  gpus = [n.gpu for n in dev.os.kfd.nodes.values()]
  assert [g.dispatches for g in gpus] == [0, 0, 0, 1, 0, 0, 0, 0]  # on node 3 alone


def test_launches_on_two_partitions_at_once_are_independent():
  """Two CPX partitions of one emulated MI300X opened by one process (one mock kernel: the second device creates its
  events without an event page, as amdkfd takes one per process) launching from two threads at once: each result exact,
  each node's CP ran its own device's dispatches only, and a page fault on one is that device's alone."""
  import threading
  from hcq.drivers.mock.os import mock_kfd_os
  osl = mock_kfd_os("gfx942", "CPX")
  a, b = (AMDDevice(parse_dev(f"MOCKKFD+AMD:{i}::gfx942:cpx"), os_layer=osl) for i in (0, 4))
  assert a.event_page is not None and b.event_page is None and a.node.gpu_id != b.node.gpu_id
  results = {}
  threads = [threading.Thread(target=lambda d=d: results.__setitem__(d, launch(d, 3))) for d in (a, b)]
  for t in threads: t.start()
  for t in threads: t.join(120)
  for d in (a, b): np.testing.assert_array_equal(results[d], expected(3))
  gpus = {n.gpu_id: n.gpu for n in osl.kfd.nodes.values()}
  assert gpus[a.node.gpu_id].xcc_workgroups == gpus[b.node.gpu_id].xcc_workgroups == [3 * GROUPS]
  assert sum(g.dispatches for g in gpus.values()) == gpus[a.node.gpu_id].dispatches + gpus[b.node.gpu_id].dispatches
  bad = b.program(Kernel("bad", b.arch, args=[("p", "u64")]).add("""s_load_dwordx2 s[2:3], s[0:1], 0x0
s_waitcnt lgkmcnt(0)
v_mov_b32 v1, 0
global_store_dword v1, v1, s[2:3]
s_waitcnt vmcnt(0)
s_endpgm""").to_elf())
  with pytest.raises(GPUFault, match="page fault"):
    bad(vals=(0x7f0000000000,), global_size=(1, 1, 1), local_size=(64, 1, 1), wait=True)
  a.check_faults(); time.sleep(2e-3); a.check_faults()  # a's events were signalled too (one process): not a's fault
  np.testing.assert_array_equal(launch(a), expected())
