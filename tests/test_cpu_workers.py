"""The CPU device's workers (hcq.drivers.cpu.pool): every workgroup of a grid runs once with its own ids, workers
take part and are woken from parking, a grid ends only when its last workgroup has, and grids past the native
hand-out's 32-bit count run in parts. Both kinds: spinning (native hand-out) and the thread pool fallback."""
from __future__ import annotations
import ctypes
import os
import sys
import threading
import time

import numpy as np
import pytest

from hcq.drivers.cpu import pool
from hcq.drivers.cpu.device import SPIN_MARGIN_NS
from hcq.drivers.cpu.program import KERNEL_TYPE, compile_llvm_ir
from tests.tools import require_module

# counts[x + gx * (y + gy * z)] += 1 for the workgroup (x, y, z), then kernargs[3] volatile loads; kernargs: counts, gx,
# gy, loads
COUNT_IR = r"""
define void @count(ptr %ka, i32 %x, i32 %y, i32 %z, i32 %lx, i32 %ly, i32 %lz) {
  %counts = load ptr, ptr %ka
  %pgx = getelementptr i64, ptr %ka, i64 1
  %gx = load i64, ptr %pgx
  %pgy = getelementptr i64, ptr %ka, i64 2
  %gy = load i64, ptr %pgy
  %x64 = zext i32 %x to i64
  %y64 = zext i32 %y to i64
  %z64 = zext i32 %z to i64
  %zy = mul i64 %z64, %gy
  %row = add i64 %zy, %y64
  %rx = mul i64 %row, %gx
  %i = add i64 %rx, %x64
  %p = getelementptr i64, ptr %counts, i64 %i
  %old = atomicrmw add ptr %p, i64 1 monotonic
  %pspin = getelementptr i64, ptr %ka, i64 3
  %spin = load i64, ptr %pspin
  br label %busy
busy:   ; then kernargs[3] volatile loads: a workgroup that lasts
  %n = phi i64 [ 0, %0 ], [ %n1, %busy ]
  %v = load volatile i64, ptr %pspin
  %n1 = add i64 %n, 1
  %more = icmp ult i64 %n1, %spin
  br i1 %more, label %busy, label %out
out:
  ret void
}
"""


@pytest.fixture(params=["spinning", "threads"])
def make(request):
  """A factory of the kind of workers under test, for `cores` cores."""
  if request.param == "spinning": require_module("llvmlite")   # a pip dependency of the test extras: fails in CI
  return pool.SpinningWorkers if request.param == "spinning" else pool.ThreadWorkers


def recorder():
  """A Python kernel that records (x, y, z, lx, ly, lz) of each workgroup, and the records."""
  seen, lock = [], threading.Lock()

  @KERNEL_TYPE
  def kernel(ka, x, y, z, lx, ly, lz):
    with lock: seen.append((x, y, z, lx, ly, lz))
  return kernel, seen


@pytest.mark.parametrize("grid", [(1, 1, 1), (5, 3, 2), (257, 1, 1), (1, 1, 9), (0, 1, 1)])
def test_every_workgroup_runs_once_with_its_ids(make, grid):
  workers = make(3, "test-wg")
  kernel, seen = recorder()
  workers.run(kernel, 0, grid, (4, 2, 1))
  gx, gy, gz = grid
  assert sorted(seen) == [(x, y, z, 4, 2, 1) for x in range(gx) for y in range(gy) for z in range(gz)]


def test_a_grid_past_the_native_count_runs_in_parts(monkeypatch):
  """The hand-out counts workgroups in 32 bits: a grid of more than MAX_PART runs as parts, each numbered on from the
  last (here MAX_PART is 4: 3 parts for 10 workgroups)."""
  require_module("llvmlite")
  monkeypatch.setattr(pool, "MAX_PART", 4)
  workers = pool.SpinningWorkers(2, "test-wg")
  kernel, seen = recorder()
  workers.run(kernel, 0, (5, 2, 1), (1, 1, 1))
  assert sorted(seen) == [(x, y, 0, 1, 1, 1) for x in range(5) for y in range(2)]


@pytest.mark.parametrize("spin_us", [0, 2000])
def test_workers_take_part_and_the_grid_waits_for_them(make, monkeypatch, spin_us):
  """Two workgroups that wait for each other (a barrier) finish only when a worker runs one beside the launching
  thread, parked or spinning; the worker's takes 50 ms more, and run() returns only after it has ended."""
  monkeypatch.setattr(pool, "SPIN_SECONDS", spin_us * 1e-6)
  workers = make(2, "test-wg")
  if make is pool.SpinningWorkers: assert (workers.spin_ns == 0) == (spin_us == 0)
  for rep in range(3):
    if spin_us == 0: time.sleep(0.02)   # the worker has parked; with a spin, the next grid comes while it spins
    launcher, met, ended = threading.current_thread(), threading.Barrier(2, timeout=10), []

    @KERNEL_TYPE
    def kernel(ka, x, y, z, lx, ly, lz):
      try:
        met.wait()
      except threading.BrokenBarrierError:
        return
      if threading.current_thread() is not launcher: time.sleep(0.05)
      ended.append(threading.current_thread() is launcher)
    workers.run(kernel, 0, (2, 1, 1), (1, 1, 1))
    assert sorted(ended) == [False, True], rep


def test_rapid_grids_of_a_native_kernel_count_each_workgroup_once():
  """Thousands of small grids back to back (the workers spin between them, late ones catch the next grid), then grids
  of 2^16 workgroups whose claims collide: a native kernel counts each workgroup atomically, and each runs once."""
  require_module("llvmlite")
  workers = pool.SpinningWorkers(3, "test-wg")
  owner, addr = compile_llvm_ir(COUNT_IR, "count")
  fn = KERNEL_TYPE(addr)
  counts, expected = np.zeros(64, np.int64), [0] * 64
  for i in range(3000):   # grids of 2, 6, 1 and 64 workgroups (the last: every thread takes some at once)
    gx, gy = ((2, 1), (3, 2), (1, 1), (64, 1))[i % 4]
    args = (ctypes.c_int64 * 4)(counts.ctypes.data, gx, gy, 1)
    workers.run(fn, ctypes.addressof(args), (gx, gy, 1), (1, 1, 1))
    for j in range(gx * gy): expected[j] += 1
  assert counts.tolist() == expected
  # grids of 2^16 workgroups that last a few instructions: the threads claim side by side for milliseconds, so their
  # compare-and-swaps collide (thousands of times a grid on two cores), and each workgroup still runs once. For 0.3 s,
  # not a count of grids: on a loaded machine the workers get a core only now and then (8 grids, ~12 ms, could pass
  # before they woke); the launching thread and the workers on cores of their own where there are two, so that the
  # scheduler cannot run them in turns on one core beside another process
  many, grids, end = np.zeros(1 << 16, np.int64), 0, time.monotonic() + 0.3
  cpus, pinned = sorted(os.sched_getaffinity(0)), False
  try:
    if len(cpus) >= 2:
      os.sched_setaffinity(0, {cpus[0]})
      pinned = True
      for t in workers.threads: os.sched_setaffinity(t.native_id, set(cpus[1:]))
  except OSError:   # a sandbox that refuses: the claims still race, only less often
    pass
  try:
    while grids < 8 or time.monotonic() < end:
      args = (ctypes.c_int64 * 4)(many.ctypes.data, 1 << 16, 1, 1)
      workers.run(fn, ctypes.addressof(args), (1 << 16, 1, 1), (1, 1, 1))
      grids += 1
  finally:
    if pinned: os.sched_setaffinity(0, cpus)
  assert (many == grids).all(), np.unique(many, return_counts=True)


def test_grids_from_two_threads_run_one_after_the_other():
  """Two threads that run grids on the same workers at once (the engine and a caller of CPUProgram.run) take turns:
  each grid's workgroups are counted once in its own counters."""
  require_module("llvmlite")
  workers = pool.SpinningWorkers(3, "test-wg")
  owner, addr = compile_llvm_ir(COUNT_IR, "count")
  fn = KERNEL_TYPE(addr)
  counts = [np.zeros(64, np.int64) for _ in range(2)]

  def launch(c: np.ndarray) -> None:
    args = (ctypes.c_int64 * 4)(c.ctypes.data, 64, 1, 2000)   # each workgroup a few microseconds
    for _ in range(3000): workers.run(fn, ctypes.addressof(args), (64, 1, 1), (1, 1, 1))
  switch = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)   # the GIL changes hands as often as it can: the threads' grids overlap if they may
  try:
    threads = [threading.Thread(target=launch, args=(c,)) for c in counts]
    for t in threads: t.start()
    for t in threads: t.join()
  finally:
    sys.setswitchinterval(switch)
  assert [c.tolist() for c in counts] == [[3000] * 64] * 2


@pytest.mark.parametrize("text,seconds", [(None, 2e-3), ("0", 0.0), ("150", 150e-6), (" 2.5 ", 2.5e-6)])
def test_spin_setting(text, seconds):
  assert pool.spin_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "fast", "-1", "nan", "inf", "1e999"])
def test_a_bad_spin_setting_says_what_is_valid(text):
  from hcq.errors import HCQError
  with pytest.raises(HCQError, match=r"HCQ_CPU_SPIN_US=.*microseconds, a number >= 0"):
    pool.spin_seconds(text)


def test_the_spin_setting_is_read_when_workers_start(monkeypatch):
  require_module("llvmlite")
  from hcq.errors import HCQError
  monkeypatch.setenv("HCQ_CPU_SPIN_US", "0")
  assert pool.SpinningWorkers(2, "test-wg").spin_ns == 0
  monkeypatch.setenv("HCQ_CPU_SPIN_US", "soon")
  with pytest.raises(HCQError, match="HCQ_CPU_SPIN_US='soon'"):
    pool.SpinningWorkers(2, "test-wg")


def test_the_device_starts_its_workers_with_the_first_grid(monkeypatch):
  """A CPU device starts no workers until a grid runs; without llvmlite they are the thread pool."""
  require_module("llvmlite")
  from hcq.devstring import DevSpec
  from hcq.drivers.cpu.device import CPUDevice
  dev = CPUDevice(DevSpec("CPU"))   # not hcq.Device's: the process's may have run grids already
  assert dev._workers is None
  assert isinstance(dev.workers, pool.SpinningWorkers) and len(dev.workers.threads) == dev.cores - 1
  monkeypatch.setitem(sys.modules, "llvmlite", None)   # import llvmlite raises ImportError
  assert isinstance(pool.workers(2, "test-wg"), pool.ThreadWorkers)


def test_the_native_wait_ends_at_the_value_or_the_deadline():
  """wait_for spins until the u64 reaches the value (compared unsigned) or the monotonic clock passes the deadline."""
  require_module("llvmlite")
  workers = pool.SpinningWorkers(2, "test-wg")
  word, now = ctypes.c_uint64(0), pool.now_ns
  threading.Timer(0.02, lambda: setattr(word, "value", 7)).start()
  t0 = now()
  assert workers.wait_for(ctypes.addressof(word), 7, t0 + 10 * 10**9) and now() - t0 >= 15 * 10**6
  t0 = now()
  assert not workers.wait_for(ctypes.addressof(word), 8, t0 + 30 * 10**6) and 30 * 10**6 <= now() - t0 < 5 * 10**9
  word.value = 2**63 + 5   # past i64's range: still at least 2**63
  assert workers.wait_for(ctypes.addressof(word), 2**63, 0) and not workers.wait_for(ctypes.addressof(word), 2**64 - 1, 0)


def napping_device(naps: list[float]):
  """A fresh CPU device and a one-workgroup Python kernel that sleeps naps[0] seconds each run."""
  from hcq.devstring import DevSpec
  from hcq.drivers.cpu.device import CPUDevice
  dev = CPUDevice(DevSpec("CPU"))

  @KERNEL_TYPE
  def nap(ka, x, y, z, lx, ly, lz): time.sleep(naps[0])
  return dev, dev.program(nap, "nap")


def test_a_wait_sleeps_until_the_kernels_expected_end_then_spins(monkeypatch):
  """A run of a grid is waited for asleep until a margin before the end the last run's time predicts, then by
  spinning on the signal (no thread to wake when it is written). A run that ends before its window (the machine's
  noise: the window is 2 ms either side of 60 ms) is tried again, three times at most."""
  require_module("llvmlite")
  dev, nap = napping_device([0.06])
  dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=True)   # a run: its time is all the device knows after
  spins, real = [], dev.workers.wait_for
  monkeypatch.setattr(dev.workers, "wait_for", lambda *a: spins.append(pool.now_ns()) or real(*a))
  for attempt in range(3):
    took = nap.took[(1, 1, 1)]
    assert 0.06e9 <= took < 5e9
    spins.clear()
    start = pool.now_ns()
    dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=True)
    if spins: break
  margin = min(max(SPIN_MARGIN_NS[0], took // 16), SPIN_MARGIN_NS[1])
  assert spins and spins[0] >= start + took - margin - 0.01e9   # asleep for the kernel's time less the margin
  assert dev.spin_window[1] - dev.spin_window[0] == 2 * margin


def test_a_kernel_past_its_expected_end_is_waited_for_asleep():
  """A run far slower than the last (10 ms, then 300 ms) is spun for only within its window: the rest of the wait
  sleeps, costing the waiting thread little CPU time (its own: other tests' threads in this process may be busy)."""
  require_module("llvmlite")
  naps = [0.01]
  dev, nap = napping_device(naps)
  dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=True)
  naps[0] = 0.3
  cpu, wall = time.thread_time(), time.monotonic()
  dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=True)
  wall, cpu = time.monotonic() - wall, time.thread_time() - cpu
  assert wall >= 0.3 and cpu < 0.05, (wall, cpu)   # spinning to the end: 0.15-0.3 s of the thread's CPU


def test_a_wait_inside_the_spin_window_still_times_out():
  """A timeout shorter than the kernel is kept by a wait that passes through the kernel's spin window (at 50 ms, the
  last run's time): GPUTimeout after it, not at the kernel's end."""
  require_module("llvmlite")
  from hcq.errors import GPUTimeout
  naps = [0.05]
  dev, nap = napping_device(naps)
  dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=True)
  naps[0] = 1.5
  dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=False)
  value, t0 = dev.timeline_value - 1, time.monotonic()
  with pytest.raises(GPUTimeout):
    dev.timeline_signal.wait(value, timeout=0.1)
  assert time.monotonic() - t0 < 0.9   # not the kernel's 1.5 s
  dev.timeline_signal.wait(value, timeout=10)


def test_the_times_kept_per_grid_are_bounded():
  """A program launched over ever new grids keeps the time of at most LAUNCH_QUEUES_KEPT of them, the latest among them."""
  require_module("llvmlite")
  from hcq.device import LAUNCH_QUEUES_KEPT
  dev, nap = napping_device([0.0])
  for x in range(1, LAUNCH_QUEUES_KEPT + 10): dev.launch(nap, b"", (x, 1, 1), (1, 1, 1), wait=True)
  assert 0 < len(nap.took) <= LAUNCH_QUEUES_KEPT and (LAUNCH_QUEUES_KEPT + 9, 1, 1) in nap.took


def test_two_threads_waiting_in_the_spin_window_both_return():
  """Two threads wait for the same kernel's end inside its window (one spins on the value, the other too): both see it."""
  require_module("llvmlite")
  dev, nap = napping_device([0.03])
  dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=True)
  dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=False)
  value, seen = dev.timeline_value - 1, []
  waiters = [threading.Thread(target=lambda: (dev.timeline_signal.wait(value, timeout=10), seen.append(1))) for _ in range(2)]
  for t in waiters: t.start()
  for t in waiters: t.join(15)
  assert seen == [1, 1] and dev.timeline_signal.value >= value


def test_a_spinning_waiter_runs_before_the_engine_goes_on():
  """The engine that writes the signal a thread spins on lets go of the GIL until that thread has it: the waiter
  returns before the engine notifies the sleepers (otherwise it would find the GIL taken, sleep, and be woken late).
  The hand-over lasts 50 us at most, which a loaded machine may not give the waiter's thread in time (and a run that
  ends before its window is waited for asleep): ten tries, one of them in that order."""
  require_module("llvmlite")
  dev, nap = napping_device([0.03])
  events = []

  class Recording(threading.Condition):
    def notify_all(self):
      events.append(("notify", dev.timeline_signal.value))
      super().notify_all()
  dev.signalled = Recording()
  dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=True)
  orders = []
  for attempt in range(10):
    dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=False)
    value, spun = dev.timeline_value - 1, dev._spun.value
    events.clear()
    dev.timeline_signal.wait(value, timeout=10)
    events.append(("waiter", value))
    time.sleep(0.05)   # the engine's notify, once the GIL is free
    if dev._spun.value == spun: continue   # waited asleep: no hand-over to see
    orders.append([e for e in events if e[0] == "waiter" or e[1] >= value][0])
    if orders[-1] == ("waiter", value): break
  assert orders and orders[-1][0] == "waiter", orders


def test_a_waiter_that_never_takes_the_gil_back_holds_the_engine_briefly():
  """The engine's hand-over is bounded (HANDOVER_NS): with spinners counted that never return, launches still end."""
  require_module("llvmlite")
  dev, nap = napping_device([0.0])
  dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=True)
  dev._spinners = 1000   # spinners that never come back (the real waiter's own returns cannot make up for them)
  launches = threading.Thread(target=lambda: [dev.launch(nap, b"", (1, 1, 1), (1, 1, 1), wait=True) for _ in range(20)], daemon=True)
  launches.start()
  launches.join(10)
  assert not launches.is_alive()   # 20 launches, each holding the engine at most 50 us more
