"""One device from several threads, refused submissions, recovery from a kernel that never ends, GPU address reuse.

On the emulated gfx1100 (MOCKKFD+AMD) and on the CPU. The thread tests switch threads every microsecond so that the
interleavings a busy machine produces now and then happen on every run. HCQ_THREAD_LAUNCHES sets the launches per
thread (default 40; the issue's figure is 200).
"""
from __future__ import annotations
import errno
import os
import sys
import threading
import time

import numpy as np
import pytest

import hcq
from hcq.devstring import parse_dev
from hcq.drivers.amd.device import RING_BYTES, AMDDevice
from hcq.drivers.amd.sdma import COPY_LINEAR_MAX
from hcq.drivers.va import AddressSpace
from hcq.errors import GPUFault, GPUTimeout, HCQError
from hcq.sym import Variable
from tests.test_core import VADD_IR
from tests.tools import compile_opencl, require_module

THREADS, LAUNCHES = 8, int(os.environ.get("HCQ_THREAD_LAUNCHES", "40"))
KERNELS = r"""
__kernel void add1(__global uint *x) { uint i = __builtin_amdgcn_workitem_id_x(); x[i] = x[i] + 1u; }
__kernel void spin(__global volatile uint *x) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  while (x[0] == 0) x[i + 16] = x[i + 16] + 1u;
}
"""


@pytest.fixture(scope="module")
def amd():
  return hcq.Device("MOCKKFD+AMD")


@pytest.fixture(scope="module")
def amd_kernels(amd, tmp_path_factory):
  co = compile_opencl(KERNELS, tmp_path_factory.mktemp("k"))
  return amd.program(co, "add1"), amd.program(co, "spin")


@pytest.fixture(scope="module")
def cpu():
  require_module("llvmlite")  # a pip dependency of the test extras: skips here, fails in CI
  return hcq.Device("CPU")


@pytest.fixture(scope="module")
def cpu_vadd(cpu):
  return cpu.program(VADD_IR, "vadd", args=["buffer", "buffer", "buffer", "u32", "f32"])


@pytest.fixture
def thread_errors(monkeypatch):
  """Exceptions that escape any thread (an engine dying with "Exception in thread"), and fast thread switching."""
  seen: list[str] = []
  monkeypatch.setattr(threading, "excepthook", lambda a: seen.append(f"{a.thread.name}: {a.exc_type.__name__}: {a.exc_value}"))
  old = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)
  yield seen
  sys.setswitchinterval(old)


def run_threads(work) -> list[str]:
  """work(k) on THREADS threads at once; the errors they raised."""
  errors: list[str] = []

  def guarded(k: int) -> None:
    try:
      work(k)
    except Exception as e:
      errors.append(f"thread {k}: {type(e).__name__}: {e}")
  threads = [threading.Thread(target=guarded, args=(k,)) for k in range(THREADS)]
  for t in threads: t.start()
  for t in threads: t.join()
  return errors


def counting_work(dev, launch, dtype):
  """Each thread counts up its own buffer with launches and checks it through copies as it goes."""
  def work(k: int) -> None:
    buf = dev.alloc(128)
    buf.copyin(np.zeros(32, dtype))
    for i in range(1, LAUNCHES + 1):
      launch(buf)
      if i % 10 == 0 or i == LAUNCHES:
        got = buf.copyout(np.empty(32, dtype))
        assert (got == i).all(), f"after {i} launches the buffer holds {got[:4]}"
    buf.free()
  return work


def test_amd_launches_and_copies_from_threads(amd, amd_kernels, thread_errors, monkeypatch):
  monkeypatch.setattr(amd, "default_timeout", 20.0)
  add1, _ = amd_kernels
  faults = len(amd.os.kfd.queue_errors)
  errors = run_threads(counting_work(amd, lambda b: add1(b, local_size=32), np.uint32))
  assert errors == [] and thread_errors == [] and amd.os.kfd.queue_errors[faults:] == []
  amd.synchronize()


def test_cpu_launches_and_copies_from_threads(cpu, cpu_vadd, thread_errors, monkeypatch):
  monkeypatch.setattr(cpu, "default_timeout", 20.0)
  ones = cpu.alloc(128).copyin(np.ones(32, np.float32))
  errors = run_threads(counting_work(cpu, lambda b: cpu_vadd(b, ones, b, local_size=32, vals=(32, 1.0)), np.float32))
  assert errors == [] and thread_errors == []
  cpu.synchronize()


def test_threads_that_time_out_together_recover_once(amd, amd_kernels, thread_errors, monkeypatch):
  """Every thread waits on one hung queue: the queues are reset once, not once per thread that timed out (a second
  DESTROY_QUEUE of a queue id is EINVAL, and a reset under a thread writing the ring corrupts it); a thread that starts
  waiting after the reset finds the timeline caught up. The device works afterwards."""
  add1, _ = amd_kernels
  destroyed: list[int] = []
  destroy = amd.kfd.destroy_queue
  monkeypatch.setattr(amd.kfd, "destroy_queue", lambda qid: (destroyed.append(qid), destroy(qid)))
  never = amd.new_signal(0)
  amd.compute_queue().wait(never, 1).signal(amd.timeline_signal, amd.next_timeline()).submit(amd)
  target, timeouts = amd.timeline_value - 1, []

  def wait(k: int) -> None:
    try:
      amd.wait_timeline(target, timeout=0.2)
    except GPUTimeout:
      timeouts.append(k)
  assert run_threads(wait) == [] and thread_errors == []
  assert timeouts and len(destroyed) == len(set(destroyed)) == 2  # the compute and the SDMA queue, once each
  buf = amd.alloc(128, "host")
  buf.view(np.uint32)[:] = 0
  add1(buf, local_size=32, wait=True)
  assert (buf.view(np.uint32)[:32] == 1).all()
  amd.release_signal(never)


# ---- a refused submission leaves no timeline value unsignalled ----

def refusals(dev, prg, buf) -> list:
  """(what, a call that is refused, the exception and its message) for the ways a submission is refused after a value
  was taken, on every backend."""
  def oversized_kernargs():
    dev.launch(prg, bytes(dev.kernargs.buf.nbytes + 64), (1, 1, 1), (32, 1, 1), False)

  def missing_variable():
    dev.copy_queue().copy(Variable("dst"), buf.addr, 64).signal(dev.timeline_signal, dev.next_timeline()).submit(dev, {})

  def out_of_range_variable():
    q = dev.compute_queue().wait(dev.timeline_signal, Variable("w", 0, 10))
    q.signal(dev.timeline_signal, dev.next_timeline()).submit(dev, {"w": 11})

  def timeline_submit_missing_variable():
    q = dev.compute_queue().wait(dev.timeline_signal, Variable("wait")).wait(dev.timeline_signal, Variable("missing"))
    dev.timeline_submit(q.signal(dev.timeline_signal, Variable("signal")))
  return [("kernargs over the ring", oversized_kernargs, HCQError, "exceed the kernarg ring"),
          ("missing Variable", missing_variable, KeyError, "no value for variable 'dst'"),
          ("out-of-range Variable", out_of_range_variable, ValueError, "outside its range 0..10"),
          ("timeline_submit, missing Variable", timeline_submit_missing_variable, KeyError, "no value for variable 'missing'")]


def check_refusals(dev, launch, cases, monkeypatch):
  """Each refused submission, then a valid launch: it must not wait for a value the refused one took."""
  monkeypatch.setattr(dev, "default_timeout", 5.0)
  for what, refused, exc, message in cases:
    with pytest.raises(exc, match=message):
      refused()
    t = time.monotonic()
    launch()
    dev.synchronize()
    assert time.monotonic() - t < 2, f"after a refused submission ({what}) the next launch waited {time.monotonic() - t:.1f}s"


def test_amd_refused_submissions_leave_no_value_unsignalled(amd, amd_kernels, monkeypatch):
  add1, _ = amd_kernels
  buf = amd.alloc(4096, "host")

  def copy_too_large():  # more COPY_LINEAR packets (7 dwords each) than the SDMA ring holds
    n = (RING_BYTES // 4 // 7 + 1) * COPY_LINEAR_MAX
    amd.copy_queue().copy(buf.addr, buf.addr, n).signal(amd.timeline_signal, amd.next_timeline()).submit(amd)
  cases = refusals(amd, add1, buf) + [("copy too large for the ring", copy_too_large, HCQError, "do not fit the sdma ring")]
  check_refusals(amd, lambda: add1(buf, local_size=32, wait=True), cases, monkeypatch)


def test_cpu_refused_submissions_leave_no_value_unsignalled(cpu, cpu_vadd, monkeypatch):
  buf = cpu.alloc(4096)

  def copy_too_large():  # refused where it runs: a fault, but the signals after it still come
    cpu.copy_queue().copy(buf.addr, buf.addr, 1 << 20).signal(cpu.timeline_signal, cpu.next_timeline()).submit(cpu)
    cpu.synchronize()
  cases = refusals(cpu, cpu_vadd, buf) + [("copy past its buffer", copy_too_large, GPUFault, "outside every allocation")]
  check_refusals(cpu, lambda: cpu_vadd(buf, buf, buf, local_size=32, vals=(32, 1.0), wait=True), cases, monkeypatch)


# ---- a kernel that never ends ----

@pytest.mark.parametrize("groups", [1, 4096])  # one wave; and 8192 waves in one batch, where a single step is slow
def test_kernel_that_never_ends_times_out_and_the_device_recovers(amd, amd_kernels, thread_errors, capfd, groups):
  add1, spin = amd_kernels
  flag = amd.alloc(4 * (groups * 64 + 16), "host")
  flag.view(np.uint32)[:] = 0
  engines = list(next(iter(amd.os.kfd.nodes.values())).gpu.engines)
  spin(flag, global_size=groups, local_size=64)
  t = time.monotonic()
  with pytest.raises(GPUTimeout):
    amd.synchronize(timeout=0.3)
  assert time.monotonic() - t < 4, "the reset waited for the kernel"
  assert not any(e.is_alive() for e in engines), "an engine of a destroyed queue still runs"
  flag.free()  # the old dispatch must not touch it again
  buf = amd.alloc(128, "host")
  buf.view(np.uint32)[:] = 0
  add1(buf, local_size=32, wait=True)
  assert (buf.view(np.uint32)[:32] == 1).all()
  time.sleep(0.2)
  assert thread_errors == [] and "Exception in thread" not in capfd.readouterr().err


def test_destroy_queue_that_cannot_be_preempted_is_etimedout_then_eio():
  """A dispatch that ignores preemption (a shader core without cancel): DESTROY_QUEUE gives up after MES's timeout
  with ETIMEDOUT and keeps the queue's entry; destroying it again frees it with EIO, a third time is EINVAL."""
  from hcq.autogen import kfd as K
  from tests.test_mock_kfd import Process
  p = Process()
  kfd = p.os.kfd
  node = kfd.nodes[p.gpu_id]
  release, running = threading.Event(), threading.Event()
  node.gpu.shader_core = lambda gpu, state, cancel=None: (running.set(), release.wait(10))
  kfd.preempt_timeout = 0.2
  ring, ptrs = p.alloc(4096, va=p.va + (16 << 20)), p.alloc(4096, va=p.va + (8 << 20))
  for bo in (ring, ptrs): p.map(bo.handle, p.gpu_id)
  q = p.call("CREATE_QUEUE", "create_queue", gpu_id=p.gpu_id, queue_type=K.KFD_IOC_QUEUE_TYPE_COMPUTE, ring_size=4096,
             ring_base_address=p.va + (16 << 20), read_pointer_address=p.va + (8 << 20), write_pointer_address=p.va + (8 << 20) + 8,
             queue_percentage=100)
  from hcq.autogen.am import gc_11_0_0 as gc
  from hcq.drivers.amd.pm4 import AMDComputeQueue, gfx11_dialect
  rsrc = AMDComputeQueue(gfx11_dialect(node.gpu.board.gc_bases)).set_sh_reg(gc.regCOMPUTE_PGM_RSRC1, 1 << 20, 1 << 6)._q  # PRIV, TRAP_PRESENT: preemptible
  words = rsrc + [(3 << 30) | (0x15 << 8) | (3 << 16), 1, 1, 1, 1]  # DISPATCH_DIRECT
  node.bos[ring.handle].host.view(np.uint32)[:len(words)] = words
  node.bos[ptrs.handle].host.view(np.uint64)[1] = len(words)  # the write pointer, in dwords
  assert running.wait(5)
  t = time.monotonic()
  assert p.errno_of("DESTROY_QUEUE", "destroy_queue", queue_id=q.queue_id) == errno.ETIMEDOUT
  assert 0.2 <= time.monotonic() - t < 2 and "MES failed to preempt" in kfd.queue_errors[-1]
  assert p.errno_of("DESTROY_QUEUE", "destroy_queue", queue_id=q.queue_id) == errno.EIO
  assert p.errno_of("DESTROY_QUEUE", "destroy_queue", queue_id=q.queue_id) == errno.EINVAL
  release.set()


# ---- GPU virtual addresses are reused ----

def test_address_space_reuses_and_coalesces():
  space = AddressSpace(1 << 20, 64 << 16, granule=1 << 16)
  for _ in range(10_000):  # far more than fit without reuse
    va = space.alloc(3 << 16)
    space.free(va, 3 << 16)
  assert space.free_bytes() == 64 << 16
  blocks = [space.alloc(1 << 16) for _ in range(64)]
  with pytest.raises(HCQError, match="out of GPU address space"):
    space.alloc(1)
  for va in blocks[::2]: space.free(va, 1 << 16)  # every other block: 32 holes of one granule
  with pytest.raises(HCQError, match="largest piece 65536 bytes"):
    space.alloc(2 << 16)
  for va in blocks[1::2]: space.free(va, 1 << 16)  # the holes merge back into one range
  assert space.free_starts == [] and space.alloc(64 << 16) == blocks[0]
  with pytest.raises(ValueError, match="not in use"):
    space.free(blocks[0] + (64 << 16), 1)


def test_address_space_against_a_model():
  """Random allocs and frees never overlap, stay in the range, and give everything back."""
  rng = np.random.default_rng(5)
  base, size, g = 1 << 30, 4096 << 16, 1 << 16
  space, live = AddressSpace(base, size, g), {}
  for _ in range(5000):
    if live and rng.random() < 0.5:
      va = list(live)[rng.integers(len(live))]
      space.free(va, live.pop(va))
    else:
      n = int(rng.integers(1, 40)) * g - int(rng.integers(0, g))
      try:
        va = space.alloc(n)
      except HCQError:
        continue
      assert base <= va and va + n <= base + size and va % g == 0
      assert all(va + n <= s or s + m <= va for s, m in live.items())
      live[va] = n
  for va, n in live.items(): space.free(va, n)
  assert space.free_bytes() == size and space.top == base


def test_amd_alloc_free_cycles_reuse_addresses():
  """More alloc/free cycles than a small reservation holds without reuse, with long-lived buffers in between."""
  class SmallReservation(AMDDevice):
    va_space = 256 << 20
  dev = SmallReservation(parse_dev("MOCKKFD+AMD"))
  try:
    keep = []
    for i in range(200):  # 200 x 4 MiB: three times the reservation
      b = dev.alloc(4 << 20, "host" if i % 2 else "device")
      if i % 50 == 0: keep.append(b)
      else: b.free()
    b = dev.alloc(64)
    b.copyin(np.arange(16, dtype=np.uint32))
    assert (b.copyout(np.empty(16, np.uint32)) == np.arange(16)).all()
  finally:
    for q in dev.queues.values(): dev.kfd.destroy_queue(q["id"])
