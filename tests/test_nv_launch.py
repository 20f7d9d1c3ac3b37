"""NV launches on the emulated H200: results against numpy, wait=True timing, graph replay with patched arguments and
dimensions, and a driver that puts something in the wrong place (program address, register count, constant bank 0)
getting the fault the GPU gives, with the device usable afterwards."""
import ctypes
import os
import subprocess
import time

import numpy as np
import pytest

import hcq
from hcq.drivers.nv.compile import ptxas_path
from hcq.drivers.nv.qmd import QMD_LAYOUTS
from hcq.errors import GPUFault
from hcq.sym import Variable

SAXPY = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry saxpy(.param .u64 out, .param .u64 x, .param .f32 a, .param .u32 n)
{
  .reg .b32 %r<8>; .reg .f32 %f<4>; .reg .b64 %rd<8>; .reg .pred %p;
  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mov.u32 %r3, %tid.x; mad.lo.u32 %r4, %r1, %r2, %r3;
  ld.param.u32 %r5, [n]; setp.ge.u32 %p, %r4, %r5; @%p bra DONE;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [x]; ld.param.f32 %f1, [a];
  mul.wide.u32 %rd3, %r4, 4; add.u64 %rd4, %rd2, %rd3; ld.global.f32 %f2, [%rd4];
  mul.rn.f32 %f3, %f2, %f1; add.u64 %rd5, %rd1, %rd3; st.global.f32 [%rd5], %f3;
DONE: ret;
}
"""
LOCAL = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry loc(.param .u64 out, .param .u32 k)
{
  .reg .b32 %r<4>; .reg .b64 %rd<8>; .local .align 4 .b32 buf[8];
  mov.u32 %r1, %tid.x; ld.param.u32 %r2, [k]; mul.wide.u32 %rd4, %r2, 4; mov.u64 %rd3, buf; add.u64 %rd3, %rd3, %rd4;
  st.local.u32 [%rd3], %r1; ld.local.u32 %r3, [%rd3];
  ld.param.u64 %rd1, [out]; mul.wide.u32 %rd2, %r1, 4; add.u64 %rd1, %rd1, %rd2; st.global.u32 [%rd1], %r3; ret;
}
"""

REDUCE = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry block_sum(.param .u64 out, .param .u64 x)
{
  .reg .b32 %r<10>; .reg .b64 %rd<8>; .reg .pred %p<3>; .shared .align 4 .b32 part[256];
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mad.lo.u32 %r4, %r2, %r3, %r1;
  ld.param.u64 %rd1, [x]; mul.wide.u32 %rd2, %r4, 4; add.u64 %rd1, %rd1, %rd2; ld.global.u32 %r5, [%rd1];
  mov.u32 %r6, part; shl.b32 %r7, %r1, 2; add.u32 %r6, %r6, %r7; st.shared.u32 [%r6], %r5; bar.sync 0;
  shr.u32 %r8, %r3, 1;
LOOP:
  setp.eq.u32 %p1, %r8, 0; @%p1 bra DONE;
  setp.lt.u32 %p2, %r1, %r8; shl.b32 %r9, %r8, 2; add.u32 %r9, %r6, %r9;
  @%p2 ld.shared.u32 %r7, [%r9]; @%p2 ld.shared.u32 %r5, [%r6]; @%p2 add.u32 %r5, %r5, %r7; @%p2 st.shared.u32 [%r6], %r5;
  bar.sync 0; shr.u32 %r8, %r8, 1; bra LOOP;
DONE:
  setp.ne.u32 %p1, %r1, 0; @%p1 bra END;
  ld.shared.u32 %r5, [%r6]; ld.param.u64 %rd3, [out]; mul.wide.u32 %rd4, %r2, 4; add.u64 %rd3, %rd3, %rd4; st.global.u32 [%rd3], %r5;
END: ret;
}
"""


@pytest.fixture(scope="module")
def dev():
  return hcq.Device("MOCKNV+NV")


@pytest.fixture(scope="module")
def saxpy(dev):
  return dev.program(SAXPY)


def _run_saxpy(dev, prg, n, a, **kw):
  x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
  xb, ob = dev.alloc(4 * n, "device"), dev.alloc(4 * n, "device")
  xb.copyin(x)
  t = prg(ob, xb, vals=(a, n), global_size=(n + 63) // 64, local_size=64, **kw)
  return t, ob.copyout(np.empty(n, np.float32)), x * np.float32(a)


def test_saxpy_matches_numpy(dev, saxpy):
  _, out, want = _run_saxpy(dev, saxpy, 300, 1.5)
  np.testing.assert_array_equal(out, want)


def test_shared_memory_and_barriers(dev):
  prg = dev.program(REDUCE)
  assert prg.kernel.barriers == 1 and prg.kernel.shared_size >= 1024
  x = np.random.default_rng(1).integers(0, 1000, 4 * 256, dtype=np.uint32)
  xb, ob = dev.alloc(x.nbytes, "device"), dev.alloc(16, "device")
  xb.copyin(x)
  prg(ob, xb, global_size=4, local_size=256, wait=True)
  np.testing.assert_array_equal(ob.copyout(np.empty(4, np.uint32)), x.reshape(4, 256).sum(1, dtype=np.uint32))
  for fields, pattern in [({"barrier_count": 0}, "uses 1 barriers, the QMD allocates 0"), ({"shared_memory_size": 256}, "bytes of shared memory, the QMD gives 256")]:
    addr = _place_patched(dev, prg, [ob, xb], (), (4, 1, 1), (256, 1, 1), **fields)
    _launch_at(dev, prg, addr, (4, 1, 1), (256, 1, 1))
    _expect_fault(dev, "Xid 13.*" + pattern)


def test_wait_returns_gpu_seconds_from_the_timestamps(dev, saxpy):
  t0 = time.perf_counter()
  t, out, want = _run_saxpy(dev, saxpy, 200, -2.0, wait=True)
  wall = time.perf_counter() - t0
  assert isinstance(t, float) and 0 < t < wall
  np.testing.assert_array_equal(out, want)


def test_launch_queues_per_program_stay_bounded(dev, saxpy):
  """As on the other devices: a program launched over ever new workgroup sizes keeps at most LAUNCH_QUEUES_KEPT
  launch queues (NVDevice._launch_queue) and launch plans (NVProgram's fast path, two keys a plan), and each launch is
  still right."""
  from hcq.device import LAUNCH_QUEUES_KEPT
  n = LAUNCH_QUEUES_KEPT + 8
  x = np.arange(n, dtype=np.float32)
  xb, ob = dev.alloc(4 * n, "device"), dev.alloc(4 * n, "device")
  xb.copyin(x)
  for local in range(1, n + 1):
    saxpy(ob, xb, vals=(float(local), n), global_size=-(-n // local), local_size=local)
    np.testing.assert_array_equal(ob.copyout(np.empty(n, np.float32)), x * np.float32(local))
    assert 1 <= len(saxpy._launch_queues) <= LAUNCH_QUEUES_KEPT and 1 <= len(saxpy._plans) <= 2 * LAUNCH_QUEUES_KEPT


def test_the_mock_reads_the_qmd_the_driver_wrote(dev, saxpy):
  _run_saxpy(dev, saxpy, 130, 3.0)
  dev.synchronize()
  launch = dev.os.rm.gpu.compute.launches[-1]
  L = QMD_LAYOUTS[dev.arch.qmd]
  assert launch.entry == "saxpy" and launch.grid == (3, 1, 1) and launch.block == (64, 1, 1)
  assert launch.fields["register_count"] == saxpy.kernel.registers and launch.fields["qmd_major_version"] == 4
  assert (launch.fields[L.program_fields[1]] << 32 | launch.fields[L.program_fields[0]]) == saxpy.code.addr
  assert launch.params_va == launch.qmd_addr + saxpy.qmd_bytes + saxpy.kernel.param_base


def test_a_launch_signals_through_its_qmd_releases(dev, saxpy):
  """prg() sends no wait for idle and no host release after the QMD: RELEASE1 writes the timeline value, RELEASE0
  (timed) the value and the end time; the next launch acquires the timeline before it starts."""
  xb, ob = dev.alloc(400, "device"), dev.alloc(400, "device")
  v = dev.timeline_value
  t = saxpy(ob, xb, vals=(2.0, 100), global_size=2, local_size=64, wait=True)
  f, L = dev.os.rm.gpu.compute.launches[-1].fields, QMD_LAYOUTS[dev.arch.qmd]
  addr = lambda i: f[L.release("addr_upper", i)] << 32 | f[L.release("addr_lower", i)]
  assert f[L.release("enable", 0)] == f[L.release("enable", 1)] == 1 and f[L.release("enable", 2)] == 0
  assert addr(1) == dev.timeline_signal.value_addr and f[L.release("payload_lower", 0)] == f[L.release("payload_lower", 1)] == v
  assert f[L.release("structure_size", 0)] == 0 and f[L.release("structure_size", 1)] == 1 and f[L.release("payload64b", 1)] == 1 and 0 < t
  q = saxpy._launch_queues[((2, 1, 1), (64, 1, 1), True)]
  a = dev.arch
  assert a.header(0, a.m("WFI"), 1) not in q.words() and a.header(0, a.m("SEM_ADDR_LO"), 5) in q.words()  # the acquire and the start time only
  x = np.arange(64, dtype=np.float32)
  xb, ob = dev.alloc(256, "device"), dev.alloc(256, "device")
  xb.copyin(x)
  for i in range(20):  # back to back, each reading the previous one's output: in order without a wait for idle
    saxpy(ob, xb, vals=(2.0, 64), local_size=64)
    saxpy(xb, ob, vals=(0.5, 64), local_size=64)
  dev.synchronize()
  np.testing.assert_array_equal(xb.copyout(np.empty(64, np.float32)), x)


@pytest.mark.parametrize("fields,expect", [
  ({}, "payload"),                                                                       # FOUR_WORDS: the value and the timer
  ({"release_structure_size_0": 1}, "payload"),                                         # ONE_WORD: the value alone
  ({"release_enable_0": 0}, 5),                                                          # no enable: no signal (5 stays)
  ({"release_reduction_enable_0": 1, "release_reduction_op_0": 0}, "payload+5"),          # RED_ADD onto the 5 there
  ({"release_reduction_enable_0": 1, "release_reduction_op_0": 1}, 5),                    # RED_MIN
  ({"release_payload64b_0": 0, "release_semaphore0_payload_upper": 1}, "payload"),        # 32 bits: the upper half is not written
  ({"release_semaphore0_addr_upper": 0x1F0_0000}, r"Xid 31.*MMU fault"),                  # an address nothing maps
  ({"release_structure_size_0": 0, "release_semaphore0_addr_lower": 8}, r"Xid 13.*RELEASE0 at 0x[0-9a-f]+ is not 16-byte aligned"),
  ({"release_structure_size_0": 2, "release_payload64b_0": 0}, r"Xid 13.*two-word structure with a 32-bit payload"),
])
def test_the_mock_honours_the_release_fields_exactly(dev, saxpy, fields, expect):
  n, sig = 64, dev.new_signal(5)
  xb, ob = dev.alloc(4 * n, "device"), dev.alloc(4 * n, "device")
  if "release_semaphore0_addr_lower" in fields: fields["release_semaphore0_addr_lower"] = (sig.value_addr + 8) & 0xFFFFFFFF
  addr = _place_patched(dev, saxpy, [ob, xb], (1.0, n), (1, 1, 1), (64, 1, 1), place={"end_addr": sig.value_addr}, **fields)
  payload = dev.timeline_value
  _launch_at(dev, saxpy, addr, (1, 1, 1), (64, 1, 1))
  if isinstance(expect, str) and "Xid" in expect:
    _expect_fault(dev, expect)
    return _still_works(dev, saxpy)
  dev.synchronize()
  assert sig.value == {"payload": payload, "payload+5": payload + 5}.get(expect, expect)
  assert (sig.timestamp != 0) == (fields.get("release_structure_size_0", 0) == 0 and fields.get("release_enable_0", 1) == 1)


@pytest.mark.parametrize("barrier", [True, False])
def test_launches_chained_without_a_barrier_may_race(dev, saxpy, barrier):
  """Two launches in one queue: the second reads what the first writes. Without a barrier (WFI) between them the
  grids are in flight together and the emulated GPU completes the later one first, so it reads stale data; two
  independent launches without a barrier both give their results."""
  n = 64
  x = np.arange(n, dtype=np.float32)
  xb, mid, ob, ob2 = (dev.alloc(4 * n, "device") for _ in range(4))
  xb.copyin(x)
  mid.copyin(np.full(n, 7, np.float32))
  with dev.lock:
    a1 = saxpy.place_kernargs(saxpy.kernargs([mid, xb], (2.0, n), (1, 1, 1), (64, 1, 1)), dev.timeline_value)
    a2 = saxpy.place_kernargs(saxpy.kernargs([ob, mid], (3.0, n), (1, 1, 1), (64, 1, 1)), dev.timeline_value)   # reads mid
    a3 = saxpy.place_kernargs(saxpy.kernargs([ob2, xb], (5.0, n), (1, 1, 1), (64, 1, 1)), dev.timeline_value)  # independent
    q = dev.compute_queue().wait(dev.timeline_signal, Variable("wait")).exec(saxpy, a1, (1, 1, 1), (64, 1, 1), barrier=barrier) \
           .exec(saxpy, a2, (1, 1, 1), (64, 1, 1), barrier=False).exec(saxpy, a3, (1, 1, 1), (64, 1, 1), barrier=False) \
           .signal(dev.timeline_signal, Variable("signal"))
    dev.timeline_submit(q)
  dev.synchronize()
  got = lambda b: b.copyout(np.empty(n, np.float32))
  np.testing.assert_array_equal(got(mid), 2 * x)
  np.testing.assert_array_equal(got(ob), 6 * x if barrier else np.full(n, 21, np.float32))  # stale: 3 * the 7s mid held
  np.testing.assert_array_equal(got(ob2), 5 * x)  # the signal's RELEASE_WFI waited for every grid


def test_replay_patches_arguments_and_dimensions_without_a_rebuild(dev, saxpy):
  """One bound queue; each submit places a new launch block (other buffers, scale, count and grid) and patches its address."""
  q = dev.compute_queue().wait(dev.timeline_signal, Variable("wait")).exec(saxpy, Variable("qmd"), (1, 1, 1), (64, 1, 1)) \
         .signal(dev.timeline_signal, Variable("signal")).bind(dev)
  words = len(q)
  rng = np.random.default_rng(7)
  for n, a in [(64, 2.0), (200, 0.5), (1000, -1.0)]:
    x = rng.standard_normal(n).astype(np.float32)
    xb, ob = dev.alloc(4 * n, "device"), dev.alloc(4 * n, "device")
    xb.copyin(x)
    gs = ((n + 63) // 64, 1, 1)
    with dev.lock:
      addr = saxpy.place_kernargs(saxpy.kernargs([ob, xb], (a, n), gs, (64, 1, 1)), dev.timeline_value)
      dev.timeline_submit(q, {"qmd": addr})
    dev.synchronize()
    np.testing.assert_array_equal(ob.copyout(np.empty(n, np.float32)), x * np.float32(a))
  assert len(q) == words  # the same queue, patched: nothing was added to it


def _place_patched(dev, prg, bufs, vals, gs, ls, place=None, **fields):
  """A launch block with QMD fields changed as a driver with a bug would write them; returns its address. `place`:
  place_kernargs's release arguments (signal_addr, end_addr)."""
  block = prg.kernargs(bufs, vals, gs, ls)
  L = QMD_LAYOUTS[dev.arch.qmd]
  with dev.lock:
    addr = prg.place_kernargs(block, dev.timeline_value, **(place or {}))
    ring = dev.kernargs
    view = ring.buf.host_addr + addr - ring.buf.addr
    raw = ctypes.string_at(view, L.nbytes)
    f = L.register.decode(int.from_bytes(raw, "little"))
    f.update(fields)
    ctypes.memmove(view, L.register.encode(**f).to_bytes(L.nbytes, "little"), L.nbytes)
  return addr


def _launch_at(dev, prg, addr, gs, ls):
  q = dev.compute_queue().wait(dev.timeline_signal, Variable("wait")).exec(prg, addr, gs, ls).signal(dev.timeline_signal, Variable("signal"))
  with dev.lock: dev.timeline_submit(q)


def _expect_fault(dev, pattern):
  with pytest.raises(GPUFault, match=pattern):
    dev.synchronize(10)


def _still_works(dev, saxpy):
  _, out, want = _run_saxpy(dev, saxpy, 64, 4.0)
  np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("bug,fields,pattern", [
  ("program address 16 bytes in", lambda p, L: {L.program_fields[0]: (p.code.addr + 16) & 0xFFFFFFFF}, r"Xid 13.*illegal instruction at program address"),
  ("too few registers", lambda p, L: {L.registers_field: 2}, r"Xid 13.*kernel saxpy uses \d+ registers, the QMD gives 2"),
  ("constant bank 0 unmapped", lambda p, L: {L.cbank("addr_upper", 0): 0x3FF0, L.cbank("addr_lower", 0): 0}, r"Xid 31.*MMU fault"),
  ("constant bank 0 too small", lambda p, L: {"constant_buffer_size_shifted4_0": 4}, r"Xid 13.*constant bank 0 holds 64 bytes"),
  ("constant bank 0 not valid", lambda p, L: {"constant_buffer_valid_0": 0}, r"Xid 13.*constant bank 0 is not valid"),
  ("a block no SM holds", lambda p, L: {L.registers_field: 255, "cta_thread_dimension0": 1024}, r"Xid 13.*1024 threads with 255 registers"),
  ("another QMD version", lambda p, L: {"qmd_major_version": 3}, r"Xid 13.*QMD major version 3, the class takes 4"),
])
def test_a_misplaced_qmd_field_faults_as_on_the_gpu(dev, saxpy, bug, fields, pattern):
  n = 64
  xb, ob = dev.alloc(4 * n, "device"), dev.alloc(4 * n, "device")
  addr = _place_patched(dev, saxpy, [ob, xb], (1.0, n), (1, 1, 1), (64, 1, 1), **fields(saxpy, QMD_LAYOUTS[dev.arch.qmd]))
  _launch_at(dev, saxpy, addr, (1, 1, 1), (64, 1, 1))
  _expect_fault(dev, pattern)
  _still_works(dev, saxpy)


CONST = """
.version 8.0
.target sm_90
.address_size 64
.const .align 4 .b32 tab[4] = {10, 20, 30, 40};
.visible .entry lookup(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x; and.b32 %r1, %r1, 3; shl.b32 %r1, %r1, 2; mov.u32 %r2, tab; add.u32 %r2, %r2, %r1; ld.const.u32 %r3, [%r2];
  ld.param.u64 %rd1, [out]; mov.u32 %r1, %tid.x; mul.wide.u32 %rd2, %r1, 4; add.u64 %rd1, %rd1, %rd2; st.global.u32 [%rd1], %r3; ret;
}
"""


def test_module_constants_are_bound_as_their_bank(dev):
  """.const data is the cubin's .nv.constant3: the QMD binds it, and a launch without it faults."""
  prg = dev.program(CONST)
  assert prg.kernel.constant_banks[3] == np.array([10, 20, 30, 40], np.uint32).tobytes() and 3 in prg.banks
  out = dev.alloc(4 * 8, "device")
  prg(out, local_size=8, wait=True)
  np.testing.assert_array_equal(out.copyout(np.empty(8, np.uint32)), [10, 20, 30, 40] * 2)
  addr = _place_patched(dev, prg, [out], (), (1, 1, 1), (8, 1, 1), constant_buffer_valid_3=0)
  _launch_at(dev, prg, addr, (1, 1, 1), (8, 1, 1))
  _expect_fault(dev, "Xid 13.*reads 16 bytes of constant bank 3, the QMD binds none")


def test_block_and_grid_sizes_must_be_in_constant_bank_0(dev, saxpy):
  """The SASS reads %ntid and %nctaid from bank 0 (cubin.DRIVER_CONSTANTS); a driver that leaves them out faults here."""
  n = 64
  xb, ob = dev.alloc(4 * n, "device"), dev.alloc(4 * n, "device")
  block = saxpy.kernargs([ob, xb], (1.0, n), (1, 1, 1), (64, 1, 1))
  block[saxpy.qmd_bytes:saxpy.qmd_bytes + 24] = bytes(24)
  with dev.lock:
    addr = saxpy.place_kernargs(block, dev.timeline_value)
  _launch_at(dev, saxpy, addr, (1, 1, 1), (64, 1, 1))
  _expect_fault(dev, r"Xid 13.*constant bank 0 holds block \(0, 0, 0\) and grid \(0, 0, 0\)")
  _still_works(dev, saxpy)


@pytest.mark.parametrize("what,value,pattern", [
  ("stack_top", 0x1000, r"32-byte stack below 0x1000 .* is not inside the QMD's high local memory \[0xfffda0, 0x1000000\)"),
  ("stack_top", 0xFFFDC8, r"stack below 0xfffdc8"),                          # not 16-byte aligned
  ("local_window", 0, r"holds 0x0 at 0x20, the channel's local window is 0xff0000000000"),
  ("memory_descriptor", 0x1F60_0000 << 32, r"holds 0x1f60000000000000 at 0x208, the default memory descriptor .* only 0"),  # createpolicy evict_normal
])
def test_bank_0_stack_start_and_windows_are_checked(dev, saxpy, what, value, pattern):
  """ptxas's code starts its stack pointer at bank 0's stack-start word, makes generic local addresses with the local
  window word there and names the default memory descriptor on every global access: a driver that writes another stack
  start, window or descriptor faults where the kernel would go wrong (the descriptor: stricter, only 0 is emulated)."""
  from hcq.drivers.nv.cubin import DRIVER_CONSTANTS
  from hcq.drivers.nv.program import LOCAL_WINDOW, STACK_TOP
  prg, out = dev.program(LOCAL), dev.alloc(4 * 32, "device")
  assert prg.kernel.stack_size == 32 and prg.local_per_thread == 32 + 0x240
  block = prg.kernargs([out], (3,), (1, 1, 1), (32, 1, 1))
  off, size = prg.qmd_bytes + getattr(DRIVER_CONSTANTS[dev.arch.sm], what), 4 if what == "stack_top" else 8
  assert int.from_bytes(block[off:off + size], "little") == {"stack_top": STACK_TOP, "local_window": LOCAL_WINDOW}.get(what, 0)  # what the driver wrote
  block[off:off + size] = value.to_bytes(size, "little")
  with dev.lock:
    addr = prg.place_kernargs(block, dev.timeline_value)
  _launch_at(dev, prg, addr, (1, 1, 1), (32, 1, 1))
  _expect_fault(dev, "Xid 13.*" + pattern)
  _still_works(dev, saxpy)


def test_local_memory_per_tpc_is_checked(dev, saxpy):
  """SET_SHADER_LOCAL_MEMORY_NON_THROTTLED gives bytes per TPC: a driver that sizes it for one block instead of every
  thread a TPC holds (2 SMs x 64 warps x 32 threads on the H200) faults before the kernel runs."""
  from hcq.autogen.nv import clcbc0
  prg, out = dev.program(LOCAL), dev.alloc(4 * 32, "device")
  with dev.lock:
    addr = prg.place_kernargs(prg.kernargs([out], (3,), (1, 1, 1), (32, 1, 1)), dev.timeline_value)
  q = dev.compute_queue().wait(dev.timeline_signal, Variable("wait")).exec(prg, addr, (1, 1, 1), (32, 1, 1)).signal(dev.timeline_signal, Variable("signal"))
  i = q._q.index(dev.arch.header(1, clcbc0.NVCBC0_SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, 3))
  # what the driver sends: 2 SMs of 64 warps, or more where an earlier program on this device needed more per thread
  assert q._q[i + 2] % 0x8000 == 0 and q._q[i + 2] >= prg.local_per_thread * 32 * 64 * 2
  q._q[i + 2] = 0x8000  # enough for one block of 32 threads, not for a TPC
  with dev.lock: dev.timeline_submit(q)
  _expect_fault(dev, r"Xid 13.*need 0x[0-9a-f]+ bytes per TPC \(2 SMs of 64 warps\), SET_SHADER_LOCAL_MEMORY_NON_THROTTLED gives 0x8000")
  _still_works(dev, saxpy)


def test_sm_faults_name_the_kernel_and_ptx_line(dev, saxpy):
  prg = dev.program(LOCAL)
  out = dev.alloc(4 * 32, "device")
  prg(out, vals=(3,), local_size=32, wait=True)
  np.testing.assert_array_equal(out.copyout(np.empty(32, np.uint32)), np.arange(32, dtype=np.uint32))
  with pytest.raises(GPUFault, match=r"compute channel.*kernel loc, PTX line \d+ at 0x40.*local"):
    prg(out, vals=(16,), local_size=32, wait=True)
  _still_works(dev, saxpy)


def test_a_cubin_without_ptx_faults_saying_so(dev, saxpy, tmp_path):
  src = tmp_path / "k.ptx"
  src.write_text(SAXPY.replace("mul.rn.f32", "add.rn.f32"))  # code ptxas made outside hcq: no PTX recorded for it
  subprocess.run([ptxas_path(), "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")], check=True)
  prg = dev.program((tmp_path / "k.cubin").read_bytes())
  assert [a.kind for a in prg.layout] == ["b64", "b64", "b32", "b32"]  # a cubin alone tells sizes, not types
  out = dev.alloc(256, "device")
  with pytest.raises(GPUFault, match="no SASS the emulated SM knows"):
    prg(vals=(out.addr, out.addr, 1.0, 1), local_size=64, wait=True)
  _still_works(dev, saxpy)


def test_an_unknown_compute_method_is_a_channel_error(dev, saxpy):
  q = dev.compute_queue().wait(dev.timeline_signal, Variable("wait")).method(1, 0x1234, 0).signal(dev.timeline_signal, Variable("signal"))
  dev.timeline_submit(q)
  _expect_fault(dev, r"Xid 13.*method 0x1234 is not emulated")
  _still_works(dev, saxpy)


def test_cli_runs_a_ptx_kernel_and_prints_results(tmp_path, capsys):
  from hcq.drivers.nv.run import run
  (tmp_path / "saxpy.ptx").write_text(SAXPY)
  x = np.arange(6, dtype=np.float32)
  np.save(tmp_path / "x.npy", x)
  rc = run([str(tmp_path / "saxpy.ptx"), "--dev", "MOCKNV+NV", "--arg", "out=buffer:f32:6", "--arg", f"x=buffer:{tmp_path / 'x.npy'}",
            "--arg", "a=f32:2", "--arg", "n=u32:6", "--block", "32", "--save", str(tmp_path / "out"), "--trace"])
  out = capsys.readouterr().out
  assert rc == 0 and "out: [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]" in out and "GPU time:" in out and "saxpy line" in out
  np.testing.assert_array_equal(np.load(tmp_path / "out" / "out.npy"), 2 * x)


def test_cli_runs_cuda_cpp_through_nvrtc(tmp_path, capsys):
  from hcq.drivers.nv.run import run
  (tmp_path / "k.cu").write_text('extern "C" __global__ void axpb(float *out, const float *x, float a, float b, int n) {\n'
                                 '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = a * x[i] + b;\n}\n')
  rc = run([str(tmp_path / "k.cu"), "--dev", "MOCKNV+NV", "--arg", "out=buffer:f32:100", "--arg", "x=buffer:f32:100:arange", "--arg", "a=f32:2",
            "--arg", "b=f32:1", "--arg", "n=u32:100", "--grid", "2", "--block", "64", "--show", "4", "--save", str(tmp_path)])
  assert rc == 0 and "out: [1.0, 3.0, 5.0, 7.0] ..." in capsys.readouterr().out
  np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), 2 * np.arange(100, dtype=np.float32) + 1)


@pytest.mark.parametrize("argv,message", [
  (["k.txt"], "unknown kind of kernel file; valid: .ptx"),
  (["saxpy.ptx", "--arg", "x=buffer:f32:4"], "saxpy takes out (buffer), x (buffer), a (f32), n (u32) in that order; --arg gave x (buffer)"),
  (["saxpy.ptx", "--dev", "MOCKKFD+AMD"], "this command runs NVIDIA kernels"),
  (["saxpy.ptx", "--save", "k.txt"], "--save k.txt: cannot make the folder: File exists"),
])
def test_cli_user_errors_are_one_line(tmp_path, capsys, monkeypatch, argv, message):
  from hcq.drivers.nv.run import run
  monkeypatch.chdir(tmp_path)
  (tmp_path / "saxpy.ptx").write_text(SAXPY)
  (tmp_path / "k.txt").write_text("")
  assert run(argv + (["--dev", "MOCKNV+NV"] if "--dev" not in argv else [])) == 2
  err = capsys.readouterr().err
  assert len(err.strip().splitlines()) == 1 and message in err


def test_cli_compile_errors_show_the_compilers_message(tmp_path, capsys):
  from hcq.drivers.nv.run import run
  (tmp_path / "k.cu").write_text("__global__ void k(int *o) { o[0] = nothing; }")
  assert run([str(tmp_path / "k.cu"), "--dev", "MOCKNV+NV"]) == 1
  err = capsys.readouterr().err
  assert err.startswith("error: CompileError: NVRTC refused the CUDA C++") and 'identifier "nothing" is undefined' in err


def test_llvm_ir_kernel_runs(dev):
  ir = """
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
define void @iota3(ptr addrspace(1) %out, i32 %k) {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %v = mul i32 %t, %k
  %p = getelementptr i32, ptr addrspace(1) %out, i32 %t
  store i32 %v, ptr addrspace(1) %p
  ret void
}
!nvvm.annotations = !{!0}
!0 = !{ptr @iota3, !"kernel", i32 1}
"""
  prg = dev.program(ir)
  out = dev.alloc(4 * 64, "device")
  prg(out, vals=(np.uint32(3),), local_size=64, wait=True)
  np.testing.assert_array_equal(out.copyout(np.empty(64, np.uint32)), 3 * np.arange(64, dtype=np.uint32))


def test_parameters_at_another_arch_base_give_a_wrong_result(dev, saxpy):
  """A driver that writes the parameters where Ampere reads them (0x160) instead of Hopper's 0x210: the kernel reads
  what is at 0x210 (zeros: n = 0), so nothing is written, as on the GPU."""
  n = 64
  x = np.arange(n, dtype=np.float32)
  xb, ob = dev.alloc(4 * n, "device"), dev.alloc(4 * n, "device")
  xb.copyin(x)
  ob.copyin(np.full(n, -1, np.float32))
  block = saxpy.kernargs([ob, xb], (2.0, n), (1, 1, 1), (64, 1, 1))
  start = saxpy.qmd_bytes + saxpy.kernel.param_base
  params = bytes(block[start:start + saxpy.kernel.param_size])
  block[start:start + len(params)] = bytes(len(params))
  block[saxpy.qmd_bytes + 0x160:saxpy.qmd_bytes + 0x160 + len(params)] = params
  with dev.lock:
    addr = saxpy.place_kernargs(block, dev.timeline_value)
  _launch_at(dev, saxpy, addr, (1, 1, 1), (64, 1, 1))
  dev.synchronize()
  np.testing.assert_array_equal(ob.copyout(np.empty(n, np.float32)), np.full(n, -1, np.float32))


def test_the_bank0_probe_reads_back_the_driver_part(dev, capsys):
  """tools/nv_bank0_probe.py (the check of what the CUDA driver writes in bank 0, 0x208 first, on a GPU machine): its
  kernel reads bank 0 at negative parameter offsets; on the emulated GPU that is exactly the driver part hcq wrote."""
  import importlib.util
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "nv_bank0_probe.py")
  spec = importlib.util.spec_from_file_location("nv_bank0_probe", path)
  probe = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(probe)
  arch, bank = probe.run_hcq("MOCKNV+NV")
  prg = dev.program(probe.probe_ptx(arch))
  assert bank == prg.driver_part((1, 1, 1), (1, 1, 1)) and len(bank) == prg.kernel.param_base == probe.PARAM_BASE[arch]
  assert probe.main(["--dev", "MOCKNV+NV"]) == 0 and "0x0208  0x00000000  memory_descriptor[0]" in capsys.readouterr().out


def test_ptx_the_emulated_sm_cannot_run_is_a_channel_error(dev, saxpy):
  """ptxas takes `.reg` function parameters, the emulated SM does not: the launch is a GPUFault naming the PTX error
  (not an engine thread that dies and a wait that times out), and the device stays usable."""
  prg = dev.program(""".version 8.0
.target sm_90
.address_size 64
.func (.reg .u32 rv) add1(.reg .u32 a) { add.u32 rv, a, 1; ret; }
.visible .entry regcall(.param .u64 out)
{
  .reg .b32 %r<4>; .reg .b64 %rd<2>;
  mov.u32 %r1, %tid.x; call (%r2), add1, (%r1); ld.param.u64 %rd1, [out]; st.global.u32 [%rd1], %r2; ret;
}""")
  with pytest.raises(GPUFault, match=r"Xid 13.*kernel regcall: the emulated SM cannot run this code's PTX: <regcall.ptx>:4:\d+: \.reg function parameters"):
    prg(dev.alloc(64, "device"), local_size=1, wait=True)
  _still_works(dev, saxpy)
