"""HCQ core on the CPU device: DEV strings, memory, signals, queues and their ordering, launches, replay, faults."""
from __future__ import annotations
import json
import struct
import types

import numpy as np
import pytest

import hcq
from hcq.device import KernargRing
from hcq.devstring import DevSpec, parse_dev
from hcq.errors import DevStringError, GPUFault, GPUTimeout, HCQError, ProgramArgumentError
from hcq.program import KernelArg, natural_layout, pack_kernargs
from hcq.sym import Variable
from tests.tools import require_module

# c[i] = a[i] + b[i] * k for i < n, over workgroups of local_x threads (the CPU kernel signature)
VADD_IR = r"""
define void @vadd(ptr %ka, i32 %gx, i32 %gy, i32 %gz, i32 %lx, i32 %ly, i32 %lz) {
entry:
  %pa = load ptr, ptr %ka
  %kb = getelementptr i8, ptr %ka, i64 8
  %pb = load ptr, ptr %kb
  %kc = getelementptr i8, ptr %ka, i64 16
  %pc = load ptr, ptr %kc
  %kn = getelementptr i8, ptr %ka, i64 24
  %n = load i32, ptr %kn
  %kk = getelementptr i8, ptr %ka, i64 28
  %k = load float, ptr %kk
  %row = mul i32 %gy, 65536
  %col = mul i32 %gx, %lx
  %base = add i32 %row, %col
  br label %loop
loop:
  %l = phi i32 [0, %entry], [%l1, %body]
  %i = add i32 %base, %l
  %inb = icmp ult i32 %i, %n
  %more = icmp ult i32 %l, %lx
  %go = and i1 %inb, %more
  br i1 %go, label %body, label %exit
body:
  %ii = zext i32 %i to i64
  %xa = getelementptr float, ptr %pa, i64 %ii
  %xb = getelementptr float, ptr %pb, i64 %ii
  %xc = getelementptr float, ptr %pc, i64 %ii
  %a = load float, ptr %xa
  %b = load float, ptr %xb
  %bk = fmul float %b, %k
  %s = fadd float %a, %bk
  store float %s, ptr %xc
  %l1 = add i32 %l, 1
  br label %loop
exit:
  ret void
}
"""


@pytest.fixture(scope="module")
def dev():
  require_module("llvmlite")  # a pip dependency of the test extras: skips here, fails in CI
  return hcq.Device("CPU")


@pytest.fixture(scope="module")
def vadd(dev):
  return dev.program(VADD_IR, "vadd", args=["buffer", "buffer", "buffer", "u32", "f32"], arg_names=["a", "b", "c", "n", "k"])


@pytest.mark.parametrize("text,spec", [
  ("AMD", DevSpec("AMD")), ("KFD+AMD", DevSpec("AMD", "KFD")), ("MOCKKFD+AMD::gfx1100", DevSpec("AMD", "MOCKKFD", None, "gfx1100")),
  ("NV", DevSpec("NV")), ("CPU:LLVM", DevSpec("CPU", None, "LLVM")), ("cpu", DevSpec("CPU")), ("mockkfd+amd:llvm", DevSpec("AMD", "MOCKKFD", "LLVM")),
  ("AMD:1", DevSpec("AMD", index=1)), ("KFD+AMD:2:ASM", DevSpec("AMD", "KFD", "ASM", index=2)),
  ("MOCKKFD+AMD:3::gfx942:cpx", DevSpec("AMD", "MOCKKFD", None, "gfx942", 3, "CPX")),
  ("AMD::gfx942:qpx/nps4", DevSpec("AMD", None, None, "gfx942", None, "QPX/NPS4")), ("AMD::gfx942:Dpx/nps1", DevSpec("AMD", arch="gfx942", partition="DPX")),
])
def test_dev_strings(text, spec):
  assert parse_dev(text) == spec
  assert parse_dev(str(spec)) == spec


@pytest.mark.parametrize("text,message", [
  ("AMX", r"unknown device 'AMX' .*did you mean AMD.*valid devices: AMD, NV, CPU"),
  ("FOO+AMD", r"unknown interface 'FOO' .*valid interfaces: KFD, MOCKKFD"),
  ("AMD:GLSL", r"unknown renderer 'GLSL' .*valid renderers: LLVM, ASM"),
  ("AMD:²", r"unknown renderer '²' .*valid renderers: LLVM, ASM"),   # a digit to str.isdigit, not a device index
  ("AMD::gfx1101", r"unknown arch 'gfx1101' .*valid archs: gfx1100, gfx1201, gfx942"),
  ("AMD:LLVM:gfx942:cpx:x", r"too many ':'-separated parts"), ("AMD:LLVM:gfx942:x", r"unknown partition 'x' .*valid partitions: SPX, DPX, TPX, QPX, CPX"),
  ("AMD::gfx942:cpx/nps5", r"unknown memory partition 'nps5' .*valid memory partitions: NPS1, NPS2"),
  ("NV:1", r"NV takes no device index"), ("CPU:::spx", r"CPU devices have no partition modes"), ("", r"empty DEV string"),
])
def test_bad_dev_strings(text, message):
  with pytest.raises(DevStringError, match=message):
    parse_dev(text)
  with pytest.raises(DevStringError):
    hcq.Device(text)


def test_device_opened_once(dev, monkeypatch):
  assert hcq.Device("CPU") is dev and hcq.Device("cpu") is dev
  monkeypatch.setenv("DEV", "CPU")
  assert hcq.Device() is dev


def test_memory(dev):
  with pytest.raises(ValueError, match="unknown memory kind 'vram'"):
    dev.alloc(16, "vram")
  with pytest.raises(ValueError, match="positive number of bytes"):
    dev.alloc(0)
  buf = dev.alloc(64)
  buf.copyin(np.arange(16, dtype=np.int32))
  assert list(buf.view(np.int32)) == list(range(16))
  assert list(buf.offset(8, 8).view(np.int32)) == [2, 3]
  out = buf.copyout(np.empty(16, np.int32))
  assert list(out) == list(range(16))
  with pytest.raises(ValueError, match="do not fit"):
    buf.copyin(np.zeros(17, np.int32))
  with pytest.raises(ValueError, match="outside"):
    buf.offset(60, 8)
  buf.free()
  with pytest.raises(ValueError, match="was freed"):
    buf.copyin(np.zeros(1, np.int32))


def _mapping(addr: int) -> tuple[int, int, list[str]]:
  """The start, end and VmFlags of the mapping that holds addr in /proc/self/smaps."""
  import re
  with open("/proc/self/smaps") as f: text = f.read()
  for block in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", text):
    lo, hi = (int(x, 16) for x in block.split()[0].split("-"))
    if lo <= addr < hi: return lo, hi, next(l for l in block.splitlines() if l.startswith("VmFlags:")).split()[1:]
  raise AssertionError(f"no mapping holds {addr:#x}")


def _mapping_flags(addr: int) -> list[str]: return _mapping(addr)[2]


def test_cpu_buffers_are_private_and_large_ones_ask_for_huge_pages(dev):
  """The CPU device's memory is a private anonymous mapping (a shared one is shmem, which transparent huge pages do not
  back), and one of at least a huge page is madvised for them, as numpy's arrays are from 4 MiB: the matmul's packs
  read rows kilobytes apart. A small one is not asked."""
  import os
  if not os.path.exists("/proc/self/smaps"): pytest.skip("no /proc/self/smaps (not Linux)")
  from hcq.drivers.cpu.device import HUGE_PAGE_BYTES
  big, odd, small = dev.alloc(2 * HUGE_PAGE_BYTES), dev.alloc(HUGE_PAGE_BYTES + 4004), dev.alloc(4096)
  try:
    big_flags, small_flags = _mapping_flags(big.addr), _mapping_flags(small.addr)
    assert "sh" not in big_flags and "sh" not in small_flags
    if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"): assert "hg" in big_flags and "hg" in _mapping_flags(odd.addr)
    assert "hg" not in small_flags
    # from a huge page's boundary (a huge page backs only an aligned 2 MiB the mapping covers whole), to its last huge
    # page's end still inside the mapping
    assert big.addr % HUGE_PAGE_BYTES == 0 and odd.addr % HUGE_PAGE_BYTES == 0
    lo, hi, _ = _mapping(odd.addr)
    assert lo <= odd.addr and odd.addr + 2 * HUGE_PAGE_BYTES <= hi
    big.copyin(np.arange(2 * HUGE_PAGE_BYTES // 4, dtype=np.int32))
    assert int(big.view(np.int32)[-1]) == 2 * HUGE_PAGE_BYTES // 4 - 1
    odd.copyin(np.arange(odd.nbytes // 4, dtype=np.int32))
    assert int(odd.view(np.int32)[-1]) == odd.nbytes // 4 - 1
    with pytest.raises(GPUFault, match="outside every allocation"):   # the alignment's slack is not the buffer's
      dev.check_range(odd.addr + odd.nbytes, 4, "a read past the buffer")
  finally:
    big.free()
    odd.free()
    small.free()


def test_the_kernarg_ring_never_overwrites_the_arguments_of_a_launch_in_flight():
  """On a lazy device that finishes launches only when the ring waits for them, every launch the ring has not waited
  for keeps its argument bytes intact while later launches write theirs (seeded sizes, through many wraps)."""
  mem = np.zeros(512, np.uint8)

  class LazyTimeline:
    done, writing = 0, 0

    def wait(self, value: int, timeout=None) -> None:
      assert value < self.writing, f"waited for launch {value} while writing launch {self.writing}'s arguments (a deadlock)"
      self.done = max(self.done, value)

  timeline = LazyTimeline()
  device = types.SimpleNamespace(timeline_signal=timeline, alloc=lambda n, kind: types.SimpleNamespace(host_addr=mem.ctypes.data, addr=1 << 20, nbytes=n))
  ring, rng, live = KernargRing(device, mem.size, 64), np.random.default_rng(16), {}
  for v in range(1, 400):
    data = rng.integers(0, 256, int(rng.integers(1, 200)), dtype=np.uint8).tobytes()
    timeline.writing = v
    live[v] = (ring.write(data, v) - (1 << 20), data)
    for u, (off, d) in list(live.items()):
      if u <= timeline.done: del live[u]
      else: assert mem[off:off + len(d)].tobytes() == d, f"launch {u}'s arguments (still in flight) overwritten by launch {v}'s"


def test_kernarg_layout_and_packing(dev):
  layout = natural_layout(["u8", "i64", "buffer", "f32", "u16"])
  assert [a.offset for a in layout] == [0, 8, 16, 24, 28]
  buf = dev.alloc(8)
  packed = pack_kernargs("k", layout, [buf], [1, -2, 0.5, 7], 32)
  assert struct.unpack_from("<BqQfH", packed[:1] + packed[8:16] + packed[16:24] + packed[24:28] + packed[28:30]) == (1, -2, buf.addr, 0.5, 7)
  with pytest.raises(ProgramArgumentError, match="argument arg4 .* cannot hold 70000"):
    pack_kernargs("k", layout, [buf], [1, -2, 0.5, 70000], 32)
  with pytest.raises(ProgramArgumentError, match="needs a Buffer"):
    pack_kernargs("k", layout, [np.zeros(2)], [1, -2, 0.5, 7], 32)


@pytest.mark.parametrize("n,local", [(1, 1), (100, 32), (1000, 64), (4097, 256), (65536, 1024), (70000, 128)])
def test_launch_shapes(dev, vadd, n, local):
  rng = np.random.default_rng(n)
  a, b = rng.random(n, np.float32), rng.random(n, np.float32)
  A, B, C = dev.alloc(4 * n).copyin(a), dev.alloc(4 * n).copyin(b), dev.alloc(4 * n)
  groups = -(-n // local)
  gx, gy = (groups, 1) if groups * local <= 65536 else (65536 // local, -(-n // 65536))
  secs = vadd(A, B, C, global_size=(gx, gy), local_size=local, vals=(n, 3.0), wait=True)
  assert isinstance(secs, float) and secs > 0
  np.testing.assert_array_equal(C.copyout(np.empty(n, np.float32)), a + b * np.float32(3.0))
  for x in (A, B, C): x.free()


def test_program_argument_errors(dev, vadd):
  A = dev.alloc(16)
  with pytest.raises(ProgramArgumentError, match=r"vadd takes 3 buffers \(a, b, c\) and 2 values \(n: u32, k: f32\); got 2 buffers"):
    vadd(A, A, vals=(4, 1.0))
  with pytest.raises(ProgramArgumentError, match=r"argument n \(u32\) cannot take 4.5: not an integer"):
    vadd(A, A, A, vals=(4.5, 1.0))
  with pytest.raises(ProgramArgumentError, match="global_size must be 1 to 3 ints from 1 to 4294967295"):
    vadd(A, A, A, vals=(4, 1.0), global_size=(0,))
  with pytest.raises(HCQError, match="invalid LLVM IR"):
    dev.program("define void @x( {", "x")


def test_ordering_across_compute_and_copy(dev, vadd):
  """copy waits for the kernel's signal; the kernel waits on a signal only the host sets: order is the signals'."""
  n = 1024
  A, B, C, D = (dev.alloc(4 * n) for _ in range(4))
  A.copyin(np.ones(n, np.float32)); B.copyin(np.full(n, 2, np.float32))
  gate, done, copied = dev.new_signal(0), dev.new_signal(0), dev.new_signal(0)
  kargs = dev.kernargs.write(pack_kernargs("vadd", vadd.layout, [A, B, C], [n, 1.0], vadd.kernarg_size), dev.timeline_value)
  dev.copy_queue().wait(done, 1).copy(D.addr, C.addr, 4 * n).signal(copied, 1).submit(dev)
  dev.compute_queue().wait(gate, 1).exec(vadd, kargs, (n // 256, 1, 1), (256, 1, 1)).signal(done, 1).submit(dev)
  with pytest.raises(GPUTimeout, match="waited 0.05s for 1"):
    copied.wait(1, timeout=0.05)
  assert copied.value == 0 and done.value == 0
  gate.value = 1
  copied.wait(1, timeout=10)
  np.testing.assert_array_equal(D.copyout(np.empty(n, np.float32)), np.full(n, 3, np.float32))
  for s in (gate, done, copied): dev.release_signal(s)


def test_cpu_wait_sleeps_until_the_engine_signals(dev, monkeypatch):
  """A wait on the CPU device sleeps on the device's condition until an engine's signal write notifies it, instead of
  polling (whose wake-ups cost the running kernel's core time); a signal the host writes is seen at once (its value
  setter notifies too), one written as raw memory within the 0.1 s timeout."""
  import threading
  from hcq import signal
  wakes = []
  class Counting(threading.Condition):
    def wait_for(self, predicate, timeout=None):
      wakes.append(timeout)
      return super().wait_for(predicate, timeout)
  monkeypatch.setattr(dev, "signalled", Counting())
  gate, done = dev.new_signal(0), dev.new_signal(0)
  dev.compute_queue().wait(gate, 1).signal(done, 1).submit(dev)
  opener = threading.Timer(0.3, lambda: setattr(gate, "value", 1))  # the engine's wait on gate ends after 0.3 s
  opener.start()
  done.wait(1, timeout=10)
  opener.join()
  assert 1 <= len(wakes) <= 0.3 / signal.RAW_WRITE_PERIOD + 2  # one per period at most (polling: one per 0.1 ms or less)
  import time
  for period, write in ((30.0, lambda s: setattr(s, "value", 1)), (signal.RAW_WRITE_PERIOD, lambda s: setattr(s._value, "value", 1))):
    monkeypatch.setattr(signal, "RAW_WRITE_PERIOD", period)
    host = dev.new_signal(0)
    threading.Timer(0.02, write, (host,)).start()
    t0 = time.monotonic()
    host.wait(1, timeout=60)  # no engine notifies: the setter does (long before the 30 s period), or the period sees the raw write
    assert time.monotonic() - t0 < 10
    dev.release_signal(host)
  for s in (gate, done): dev.release_signal(s)


def test_graph_replay(dev, vadd):
  """One queue, built once with symbolic kernarg address and signal value, replayed with other buffers."""
  n = 512
  bufs = [dev.alloc(4 * n).copyin(np.full(n, i, np.float32)) for i in range(4)]
  outs = [dev.alloc(4 * n) for _ in range(3)]
  sig = dev.new_signal(0)
  q = dev.compute_queue().exec(vadd, Variable("kargs"), (n // 64, 1, 1), (64, 1, 1)).signal(sig, Variable("done"))
  for step, (x, y) in enumerate([(0, 1), (2, 3), (1, 3)]):
    kargs = dev.kernargs.write(pack_kernargs("vadd", vadd.layout, [bufs[x], bufs[y], outs[step]], [n, 2.0], vadd.kernarg_size), 0)
    q.submit(dev, {"kargs": kargs, "done": step + 1})
    sig.wait(step + 1, timeout=10)
    assert outs[step].copyout(np.empty(n, np.float32))[0] == x + 2 * y
  with pytest.raises(KeyError, match="no value for variable 'done'"):
    q.submit(dev, {"kargs": 0})
  dev.release_signal(sig)


def test_many_launches_wrap_the_kernarg_ring(dev, vadd):
  A = dev.alloc(4 * 64).copyin(np.zeros(64, np.float32))
  B = dev.alloc(4 * 64).copyin(np.ones(64, np.float32))
  pool = len(dev._signal_pool)
  wraps, last = 0, dev.kernargs.pos
  for _ in range(20000):  # more launches than the ring has slots
    vadd(A, B, A, local_size=64, vals=(64, 1.0))
    wraps += dev.kernargs.pos < last
    last = dev.kernargs.pos
  dev.synchronize()
  assert wraps >= 1 and len(dev._signal_pool) == pool
  assert A.copyout(np.empty(64, np.float32))[0] == 20000


def test_launch_queues_per_program_stay_bounded(dev, vadd):
  """A program launched over ever new grids (here 3 x LAUNCH_QUEUES_KEPT workgroup sizes) keeps at most
  LAUNCH_QUEUES_KEPT launch queues, and every launch after a start-over still computes the right thing."""
  from hcq.device import LAUNCH_QUEUES_KEPT
  n = 3 * LAUNCH_QUEUES_KEPT
  a = np.arange(n, dtype=np.float32)
  A, B = dev.alloc(4 * n).copyin(a), dev.alloc(4 * n).copyin(np.ones(n, np.float32))
  for local in range(1, n + 1):
    C = dev.alloc(4 * n).copyin(np.zeros(n, np.float32))
    vadd(A, B, C, global_size=-(-n // local), local_size=local, vals=(n, float(local)))
    np.testing.assert_array_equal(C.copyout(np.empty(n, np.float32)), a + np.float32(local))
    assert 1 <= len(vadd._launch_queues) <= LAUNCH_QUEUES_KEPT
    C.free()


def test_launch_queues_for_as_many_grids_as_kept_are_built_once(dev, vadd):
  """A program cycling through exactly LAUNCH_QUEUES_KEPT grids keeps every queue: the second round replays the
  queues the first built (a bound checked on every lookup instead of on a new key would rebuild one each launch)."""
  from hcq.device import LAUNCH_QUEUES_KEPT
  n = LAUNCH_QUEUES_KEPT
  A = dev.alloc(4 * n).copyin(np.zeros(n, np.float32))
  vadd.__dict__.pop("_launch_queues", None)
  def round_() -> list[int]:
    for local in range(1, n + 1): vadd(A, A, A, global_size=-(-n // local), local_size=local, vals=(n, 1.0))
    return [id(vadd._launch_queues[((-(-n // local), 1, 1), (local, 1, 1), False, 0)]) for local in range(1, n + 1)]
  assert round_() == round_()
  dev.synchronize()


def test_a_raw_queue_exec_over_an_empty_grid_runs_nothing(dev, vadd):
  """Program launches refuse an empty grid (launch_dims); a queue built by hand may still hold one: the CPU engine
  runs no workgroup and signals, as a GPU's dispatch of zero groups would (no fault)."""
  C = dev.alloc(16).copyin(np.full(4, 7, np.float32))
  value = dev.next_timeline()
  dev.compute_queue().exec(vadd, C.addr, (0, 1, 1), (1, 1, 1)).signal(dev.timeline_signal, value).submit(dev)
  dev.synchronize()
  assert dev.timeline_signal.value >= value
  np.testing.assert_array_equal(C.copyout(np.empty(4, np.float32)), np.full(4, 7, np.float32))


def test_fault_is_reported_and_device_recovers(dev, vadd):
  A = dev.alloc(64)
  dev.copy_queue().copy(A.addr, A.addr, 4096).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  with pytest.raises(GPUFault, match="copy queue of CPU: copy failed: copy source .* is outside every allocation") as e:
    dev.synchronize()
  assert e.value.address == A.addr
  B = dev.alloc(256).copyin(np.ones(64, np.float32))
  vadd(B, B, B, local_size=64, vals=(64, 1.0), wait=True)
  assert B.copyout(np.empty(64, np.float32))[0] == 2


def test_hang_times_out_and_device_recovers(dev, vadd):
  never = dev.new_signal(0)
  dev.compute_queue().wait(never, 1).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  with pytest.raises(GPUTimeout, match=r"CPU: timeline is \d+, waited 0.1s for \d+\. timeline at .*engines compute: wait"):
    dev.synchronize(timeout=0.1)
  dev.synchronize()  # the hang was reset: nothing is pending any more
  B = dev.alloc(256).copyin(np.ones(64, np.float32))
  vadd(B, B, B, local_size=64, vals=(64, 1.0), wait=True)
  assert B.copyout(np.empty(64, np.float32))[0] == 2
  dev.release_signal(never)


def test_profile_trace(dev, vadd, tmp_path):
  A = dev.alloc(256)
  dev.profiling = True
  try:
    for _ in range(3): vadd(A, A, A, local_size=64, vals=(64, 1.0))
    count = dev.export_trace(str(tmp_path / "trace.json"))
  finally:
    dev.profiling = False
  events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
  assert count == 3 == len(events)
  assert all(e["name"] == "vadd" and e["ph"] == "X" and e["dur"] >= 0 for e in events)
  assert events[0]["ts"] <= events[1]["ts"] <= events[2]["ts"]


def test_unbuilt_backend_says_so(monkeypatch):
  import hcq.device
  monkeypatch.setitem(hcq.device.BACKEND_CLASSES, "NV", "hcq.drivers.absent.device:AbsentDevice")  # a driver this version lacks
  with pytest.raises(HCQError, match="the NV driver is not part of this version of hcq yet; available devices: .*CPU"):
    hcq.Device("NV+NV")


def test_kernel_arg_dataclass():
  assert KernelArg("x", 4, "f64").size == 8


def test_pooled_signal_comes_back_without_its_old_timestamp():
  """A signal handed out again starts at the value asked for and timestamp 0, so a wait on a new timestamp cannot
  pass on the last user's."""
  dev = hcq.Device("CPU")
  s = dev.new_signal(name="first")
  dev.compute_queue().timestamp(s).signal(s, 5).submit(dev)
  s.wait(5, timeout=5)
  assert s.timestamp > 0 and s.value == 5
  dev.release_signal(s)
  again = dev.new_signal(value=3, name="second")
  assert again is s and (again.value, again.timestamp, again.name) == (3, 0, "second")
  dev.release_signal(again)
