"""The AMD driver end to end on each emulated board (MOCKKFD+AMD::gfx1100, ::gfx1201): memory, SDMA, signals, replay,
faults, hangs."""
from __future__ import annotations
import ctypes

import numpy as np
import pytest

import hcq
import hcq.drivers.amd.device
from hcq.devstring import parse_dev
from hcq.drivers.amd.device import AMDDevice
from hcq.drivers.mock.kfd import KERNELS, MockKFD, cwsr_sizes
from hcq.drivers.mock.os import MockKFDOS
from hcq.errors import GPUFault, GPUTimeout, HCQError
from hcq.sym import Variable
from tests.amd_boards import arch, arch_of, board  # noqa: F401 (arch: the board fixture)


@pytest.fixture(scope="module")
def dev(arch):
  return hcq.Device(f"MOCKKFD+AMD::{arch}")


def test_device_facts(dev, arch):
  """What the driver reads of the board (topology, IP discovery) is what the board spec says, and picks its dialects."""
  b = board(arch)
  assert dev.arch == arch_of(arch) and dev.os.emulated and hcq.Device(f"MOCKKFD+AMD::{arch}") is dev
  assert dev.dialect.gc_base == b.gc_bases and dev.dialect.name == b.family and dev.sdma_major == b.sdma_version[0]
  p = dev.node.properties
  assert (p["simd_count"] // p["simd_per_cu"], p["array_count"], p["gfx_target_version"], p["num_xcc"]) == \
    (b.compute_units, b.shader_engines * b.shader_arrays_per_engine, b.gfx_target_version, b.num_xcc)
  assert (dev.split.xccs if dev.split else 1) == b.num_xcc == len(dev.queues["compute"]["ids"])  # a queue per XCC of the partition
  assert dev.timestamp_frequency == b.timestamp_hz


@pytest.mark.parametrize("n", [1, 4096, (16 << 20) + 12345])  # past the staging buffer: two SDMA rounds
def test_copy_round_trip_through_sdma(dev, n):
  data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
  buf = dev.alloc(n)  # device memory: not CPU-visible, every copy goes through SDMA
  assert buf.host_addr is None
  buf.copyin(data)
  np.testing.assert_array_equal(buf.copyout(np.empty(n, np.uint8)), data)
  buf.free()


def test_memory_kinds_are_cpu_visible_where_they_should_be(dev):
  for kind in ("host", "uncached", "cpu"):
    b = dev.alloc(8192, kind)
    b.view(np.uint32)[:] = 5
    assert b.copyout(np.empty(2048, np.uint32)).sum() == 5 * 2048
    b.free()


def test_copy_queue_graph_replay(dev):
  src = [dev.alloc(4096, "host") for _ in range(3)]
  for i, s in enumerate(src): s.view(np.uint32)[:] = i + 10
  dst = dev.alloc(4096)
  q = dev.copy_queue().copy(Variable("dst"), Variable("src"), 4096).signal(dev.timeline_signal, Variable("t"))
  for i, s in enumerate(src):
    q.submit(dev, {"dst": dst.addr, "src": s.addr, "t": dev.next_timeline()})
    dev.synchronize()
    assert set(dst.copyout(np.empty(1024, np.uint32)).tolist()) == {i + 10}


def test_compute_waits_for_sdma(dev):
  done, out = dev.new_signal(0), dev.new_signal(0)
  gate = dev.new_signal(0)
  dev.compute_queue().wait(done, 1).signal(out, 99).submit(dev)
  dev.copy_queue().wait(gate, 1).signal(done, 1).submit(dev)
  with pytest.raises(GPUTimeout):
    out.wait(99, timeout=0.05)
  gate.value = 1
  out.wait(99, timeout=5)
  assert done.value == 1
  for s in (done, out, gate): dev.release_signal(s)


def test_timestamps(dev):
  s = dev.new_signal(0)
  dev.copy_queue().timestamp(s).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  t1 = s.timestamp
  dev.compute_queue().timestamp(s).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  dev.synchronize()
  assert 0 < t1 < s.timestamp and s.timestamp_ns > 0
  dev.release_signal(s)


def test_bad_packet_is_a_fault_and_the_device_recovers(dev):
  dev.compute_queue().pkt3(0x99, 0).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  with pytest.raises(GPUFault, match="queue error on the compute queue: compute queue \\d+: PM4 opcode 0x99") as e:
    dev.synchronize()
  assert e.value.queue == "compute"
  test_compute_waits_for_sdma(dev)


def test_page_fault_names_the_address_and_the_device_recovers(dev):
  bad = dev._range.base + (1 << 39)  # reserved for hcq but never allocated: not mapped on the GPU
  ok = dev.alloc(4096, "host")
  dev.copy_queue().copy(ok.addr, bad, 64).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  with pytest.raises(GPUFault, match=f"GPU page fault at {bad:#x} on the sdma queue") as e:
    dev.synchronize()
  assert e.value.address == bad and e.value.queue == "sdma"
  test_copy_round_trip_through_sdma(dev, 4096)


def test_faults_of_the_reset_queues_are_one_fault(dev, monkeypatch):
  """A second fault of the same work (another XCC's or engine's waves, reported while the reset stops its queue) is
  part of the fault already raised: the reset drains it, and no later call raises it again."""
  bad = dev._range.base + (1 << 39)
  ok = dev.alloc(4096, "host")
  mock, real = dev.os.kfd, dev.recover

  def recover() -> None:
    real()
    with mock.lock:   # the engine being stopped reports its fault too: the MEMORY and HW_EXCEPTION events again
      for event_id in (dev._memory_event, dev._hw_event): mock.events[event_id].signaled = True
      mock.event_cond.notify_all()
  monkeypatch.setattr(dev, "recover", recover)
  dev.copy_queue().copy(ok.addr, bad, 64).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  with pytest.raises(GPUFault, match=f"GPU page fault at {bad:#x}"):
    dev.synchronize()
  monkeypatch.undo()
  dev.check_faults()   # nothing left of it
  test_copy_round_trip_through_sdma(dev, 4096)
  ok.free()


def test_hang_times_out_and_the_device_recovers(dev):
  never = dev.new_signal(0)
  dev.compute_queue().wait(never, 1).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  with pytest.raises(GPUTimeout, match=r"compute rptr \d+ wptr \d+"):
    dev.synchronize(timeout=0.2)
  dev.synchronize()
  test_compute_waits_for_sdma(dev)
  dev.release_signal(never)


def test_kernel_rejects_bad_requests(dev):
  """The mock kernel answers misuse with the kernel's errnos; the driver names the call."""
  with pytest.raises(HCQError, match=r"AMDKFD_IOC_FREE_MEMORY_OF_GPU\(handle=0x[0-9a-f]+\) failed: EINVAL"):
    dev.kfd.ioctl("FREE_MEMORY_OF_GPU", handle=(dev.kfd.gpu_id << 32) | 0xffff)
  with pytest.raises(HCQError, match="CREATE_QUEUE.*failed: EINVAL"):  # ring size not a power of two
    dev.kfd.ioctl("CREATE_QUEUE", ring_size=3000, gpu_id=dev.kfd.gpu_id, queue_type=1, write_pointer_address=0x10000,
                  read_pointer_address=0x10000, ring_base_address=0x10000)
  buf = dev.alloc(8192, "host")
  ids = (ctypes.c_uint32 * 1)(dev.kfd.gpu_id)
  with pytest.raises(HCQError, match="MAP_MEMORY_TO_GPU.*failed: EINVAL"):  # a second BO at the same VA
    a = dev.kfd.ioctl("ALLOC_MEMORY_OF_GPU", va_addr=buf.addr, size=4096, gpu_id=dev.kfd.gpu_id, flags=hcq.drivers.amd.device.MEMORY_FLAGS["host"])
    dev.kfd.ioctl("MAP_MEMORY_TO_GPU", handle=a.handle, device_ids_array_ptr=ctypes.addressof(ids), n_devices=1)
  with pytest.raises(HCQError, match="FREE_MEMORY_OF_GPU.*failed: EBUSY"):
    dev.kfd.ioctl("FREE_MEMORY_OF_GPU", handle=dev._handles[buf.addr])


def test_bound_compute_queue_replays_through_an_indirect_buffer(dev):
  sig = dev.new_signal(0)
  q = dev.compute_queue().wait(dev.timeline_signal, Variable("w")).signal(sig, Variable("v")).memory_barrier()
  q.signal(dev.timeline_signal, Variable("t")).bind(dev)
  for i in range(1, 4):
    t = dev.next_timeline()
    q.submit(dev, {"w": t - 1, "v": 100 + i, "t": t})
    dev.synchronize()
    assert sig.value == 100 + i
  # what goes into the ring: an INDIRECT_BUFFER and the RELEASE_MEM marking it done (split over XCCs, the copy marks it itself)
  assert all(len(jump) == (4 if dev.split else 4 + 8) for _, _, jump, _ in q._copies)
  dev.release_signal(sig)


@pytest.mark.parametrize("kernel", KERNELS)
def test_device_opens_and_runs_under_each_kernel_profile(kernel, arch):
  """Linux 6.12 takes CREATE_QUEUE only with the CWSR size the node has and a buffer of exactly that plus the debugger
  area; 6.1 checks neither; mainline takes at least the size. The driver's queues satisfy all three. A board newer than
  the kernel (gfx1201 on 6.1) has no KFD node there: the mock refuses the combination."""
  if KERNELS.index(kernel) < KERNELS.index(board(arch).first_kernel):
    with pytest.raises(ValueError, match=f"Linux {kernel}'s amdkfd has no driver for {arch_of(arch)}"): MockKFD((board(arch),), kernel=kernel)
    return
  d = AMDDevice(parse_dev(f"MOCKKFD+AMD::{arch}"), os_layer=MockKFDOS(MockKFD((board(arch),), kernel=kernel)))
  assert d.os.kfd.kernel == kernel
  buf = d.alloc(4096)
  buf.copyin(np.arange(1024, dtype=np.uint32))
  np.testing.assert_array_equal(buf.copyout(np.empty(1024, np.uint32)), np.arange(1024, dtype=np.uint32))
  d.compute_queue().signal(d.timeline_signal, d.next_timeline()).submit(d)
  d.synchronize()
  cwsr_size, ctl_stack, nbytes = d._cwsr_sizes()
  sizes = cwsr_sizes(next(iter(d.os.kfd.nodes.values())).board)
  xcc = board(arch).num_xcc  # one save area per XCC of the partition (kfd_queue_acquire_buffers: x NUM_XCC)
  assert (cwsr_size, ctl_stack, nbytes) == (sizes.cwsr, sizes.ctl_stack, ((sizes.cwsr + sizes.debug) * xcc + 4095) // 4096 * 4096)
