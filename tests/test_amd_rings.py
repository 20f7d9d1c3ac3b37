"""The AMD driver's rings on each emulated board (gfx1100, gfx1201): read pointers as the engines report them, wrapping many times over,
the ring's end, and replay of bound queues while the command processor is behind.

The rings here are the smallest CREATE_QUEUE takes (1 KiB), so a few thousand submissions wrap them hundreds of
times. HCQ_RING_SUBMISSIONS=100000 runs the full count the issue asks for (5 minutes on a busy 2-core machine).
"""
from __future__ import annotations
import os
import threading
import time

import numpy as np
import pytest

from hcq.asm.kernel import Kernel
from hcq.devstring import parse_dev
from hcq.errors import GPUTimeout
from hcq.drivers.amd.device import AMDDevice
from hcq.sym import Variable
from tests.amd_boards import arch, asm_for  # noqa: F401 (arch: the board fixture)

SUBMISSIONS = int(os.environ.get("HCQ_RING_SUBMISSIONS", "1000"))
RING = 1024  # bytes: the minimum amdkfd takes (KFD_MIN_QUEUE_RING_SIZE)


@pytest.fixture(scope="module")
def dev(arch):
  return AMDDevice(parse_dev(f"MOCKKFD+AMD::{arch}"), ring_bytes=RING)


def gpu_of(dev):
  return next(iter(dev.os.kfd.nodes.values())).gpu


def counter_kernel(dev):
  """Adds 1 to the u32 its buffer argument points at: every launch that runs leaves a mark."""
  wait = "s_wait_kmcnt 0x0" if dev.arch.startswith("gfx12") else "s_waitcnt lgkmcnt(0)"   # gfx12 splits the counters
  load, add = asm_for(dev.arch, "s_load_b64 s[2:3], s[0:1], null", "s_load_dwordx2 s[2:3], s[0:1], 0x0"), \
    asm_for(dev.arch, "global_atomic_add_u32", "global_atomic_add")
  return dev.program(Kernel("count", dev.arch, args=[("x", "buffer")]).add(f"""{load}
v_mov_b32_e32 v0, 0
v_mov_b32_e32 v1, 1
{wait}
{add} v0, v1, s[2:3]
s_endpgm""").to_elf())


def test_read_pointers_are_reported_as_the_engines_report_them(dev):
  """The CP writes a 32-bit dword offset that wraps at the ring size; SDMA a 64-bit byte count that does not."""
  for _ in range(80): dev.compute_queue().signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()  # the two queues are not ordered: a late compute signal would set the timeline back below the SDMA's
  for _ in range(40): dev.copy_queue().signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  c, s = dev.queues["compute"], dev.queues["sdma"]
  assert c["put"] > c["size"] and s["put"] > s["size"], "the rings did not wrap"
  deadline = time.monotonic() + 5  # an engine reports its read pointer after the packet whose signal synchronize saw
  while (c["rptr"].value != c["put"] % c["size"] or s["rptr"].value != 4 * s["put"]) and time.monotonic() < deadline:
    time.sleep(1e-3)
  assert c["rptr"].value == c["put"] % c["size"] and c["wptr"].value == c["put"]
  assert s["rptr"].value == 4 * s["put"] == s["wptr"].value


def test_many_launches_and_copies_through_a_small_ring(dev):
  prg, count = counter_kernel(dev), dev.alloc(64, "host")
  count.view(np.uint32)[:] = 0
  start = dev.queues["compute"]["put"]
  for _ in range(SUBMISSIONS): prg(count, global_size=1, local_size=1)
  dev.synchronize()
  assert int(count.view(np.uint32)[0]) == SUBMISSIONS, "launches were lost"
  # split over XCCs the ring carries a 4-dword INDIRECT_BUFFER per launch (its packets are in the arena)
  assert (dev.queues["compute"]["put"] - start) // (RING // 4) >= SUBMISSIONS // (64 if dev.split else 8), "the compute ring did not wrap often"
  src, dst = dev.alloc(4 * SUBMISSIONS, "host"), dev.alloc(4 * SUBMISSIONS, "host")
  src.view(np.uint32)[:] = np.arange(SUBMISSIONS, dtype=np.uint32) + 1
  dst.view(np.uint32)[:] = 0
  start = dev.queues["sdma"]["put"]
  for i in range(SUBMISSIONS):
    dev.copy_queue().copy(dst.addr + 4 * i, src.addr + 4 * i, 4).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  np.testing.assert_array_equal(dst.view(np.uint32), src.view(np.uint32))
  assert (dev.queues["sdma"]["put"] - start) // (RING // 4) >= SUBMISSIONS // 32, "the SDMA ring did not wrap often"


@pytest.mark.parametrize("name", ["compute", "sdma"])
def test_a_submission_that_would_straddle_the_end_starts_at_zero_after_nops(dev, name):
  """kfdtest and ROCr fill the ring's end with NOPs rather than split a submission; so does the driver."""
  if name == "compute" and dev.split: pytest.skip("split over XCCs the compute ring carries 4-dword INDIRECT_BUFFERs: none straddles its end")
  gpu, q = gpu_of(dev), dev.queues[name]
  queue = dev.compute_queue if name == "compute" else dev.copy_queue
  sig = dev.new_signal(0)
  dev.synchronize()
  while q["put"] % q["size"] < q["size"] - 12: queue().signal(sig, 1).submit(dev)  # up to a few dwords before the end
  dev.synchronize()
  gpu.running.clear()  # the engines stop between packets: the ring is ours to inspect
  try:
    before = q["put"] % q["size"]
    sub = queue().signal(sig, 2).signal(sig, 3).signal(dev.timeline_signal, dev.next_timeline())
    words = list(sub.words())
    assert before + len(words) > q["size"]
    sub.submit(dev)
    ring = q["ring"].view(np.uint32)
    assert set(ring[before:].tolist()) == {q["nop"]} and ring[:len(words)].tolist() == words
    assert q["put"] % q["size"] == len(words)
  finally:
    gpu.running.set()
  dev.synchronize()
  assert sig.value == 3
  dev.release_signal(sig)


def test_replay_of_a_bound_queue_submitted_before_the_cp_read_the_last_one(dev):
  """Each submission of a bound queue keeps its own values, however far the command processor is behind."""
  gpu = gpu_of(dev)
  slots = dev.alloc(4096, "host")
  slots.view(np.uint64)[:] = 0

  class Slot:  # a signal whose address is chosen at submit time
    value_addr = Variable("dst")
  q = dev.compute_queue().signal(Slot(), Variable("v")).signal(dev.timeline_signal, Variable("t")).bind(dev)
  gpu.running.clear()  # the CP reads nothing until released
  threading.Timer(0.3, gpu.running.set).start()  # a later submit may wait for an earlier one: release the CP meanwhile
  try:
    for i in range(6): q.submit(dev, {"dst": slots.addr + 8 * i, "v": 100 + i, "t": dev.next_timeline()})
  finally:
    gpu.running.set()
  dev.synchronize()
  assert slots.view(np.uint64)[:6].tolist() == [100 + i for i in range(6)]


def test_replay_with_the_command_processor_slowed_down(dev):
  gpu = gpu_of(dev)
  out = dev.alloc(4096, "host")
  out.view(np.uint64)[:] = 0

  class Slot:
    value_addr = Variable("dst")
  q = dev.compute_queue().memory_barrier().signal(Slot(), Variable("v")).signal(dev.timeline_signal, Variable("t")).bind(dev)
  gpu.packet_delay = 2e-3
  try:
    t = time.monotonic()
    for i in range(20): q.submit(dev, {"dst": out.addr + 8 * i, "v": 7 * i + 1, "t": dev.next_timeline()})
    dev.synchronize()
  finally:
    gpu.packet_delay = 0.0
  assert out.view(np.uint64)[:20].tolist() == [7 * i + 1 for i in range(20)], f"after {time.monotonic() - t:.2f}s"


def test_a_bound_queue_replays_after_a_reset_dropped_its_runs(dev):
  """Runs lost to a queue reset never mark their copies done; the next submit must not wait for them."""
  gate, out = dev.new_signal(0), dev.new_signal(0)
  q = dev.compute_queue().wait(gate, Variable("g")).signal(out, Variable("v")).signal(dev.timeline_signal, Variable("t")).bind(dev)
  for i in range(2): q.submit(dev, {"g": 1, "v": i, "t": dev.next_timeline()})  # both copies queued behind a closed gate
  with pytest.raises(GPUTimeout):
    dev.synchronize(timeout=0.2)  # the hang is reset: both runs are gone
  t = time.monotonic()
  q.submit(dev, {"g": 0, "v": 42, "t": dev.next_timeline()})
  dev.synchronize()
  assert out.value == 42 and time.monotonic() - t < 5
  for s in (gate, out): dev.release_signal(s)


def test_ring_size_must_be_one_create_queue_takes():
  for bad in (512, 3000):
    with pytest.raises(ValueError, match=f"ring_bytes must be a power of two >= 1024, got {bad}"):
      AMDDevice(parse_dev("MOCKKFD+AMD"), ring_bytes=bad)


def test_binding_again_gives_back_the_first_copies(dev):
  """bind() on a bound queue frees the first bind's copies and counter signal, after the run still held in one of them
  has finished; the queue then replays from its new copies."""
  gate, out = dev.new_signal(0), dev.new_signal(0)
  q = dev.compute_queue().wait(gate, Variable("g")).signal(out, Variable("v")).signal(dev.timeline_signal, Variable("t")).bind(dev)
  first = [copy[0] for copy in q._copies]
  q.submit(dev, {"g": 1, "v": 1, "t": dev.next_timeline()})  # held behind the gate
  threading.Timer(0.2, lambda: setattr(gate, "value", 1)).start()
  pool = len(dev._signal_pool)
  q.bind(dev)
  assert out.value == 1 and all(buf.freed for buf in first) and len(dev._signal_pool) == pool  # one signal back, one taken
  assert not any(copy[0].freed for copy in q._copies)
  for v in (2, 3, 4): q.submit(dev, {"g": 0, "v": v, "t": dev.next_timeline()})
  dev.synchronize()
  assert out.value == 4
  for s in (gate, out): dev.release_signal(s)
