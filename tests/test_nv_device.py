"""The NV driver end to end on the emulated H200 (MOCKNV+NV): memory, copies, semaphores across channels, replay,
channel errors and hangs recovered, DEV strings."""
from __future__ import annotations
import os
import re

import numpy as np
import pytest

import hcq
from hcq.devstring import parse_dev
from hcq.drivers.mock.nv.gpu import NVBoardSpec
from hcq.drivers.mock.nv.os import MockNVOS
from hcq.drivers.nv.device import ARCHS, NVDevice, pick_arch
from hcq.drivers.nv.queue import COPY_SUBCHANNEL
from hcq.errors import DevStringError, GPUFault, GPUTimeout, HCQError
from hcq.sym import Variable

LOOPS = int(os.environ.get("HCQ_NV_LOOPS", "10000"))


@pytest.fixture(scope="module")
def dev():
  return hcq.Device("MOCKNV+NV")


def rss() -> int:
  with open("/proc/self/statm") as f: return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_device_facts(dev):
  assert isinstance(dev, NVDevice) and dev.os.emulated
  assert (dev.arch.name, dev.arch.sm, dev.arch.qmd) == ("Hopper", "sm_90", 4)
  assert hcq.Device("mocknv+nv") is dev  # spellings of one device open one Device


def test_dev_strings():
  assert str(parse_dev("MOCKNV+NV")) == "MOCKNV+NV" and parse_dev("NV").iface is None and parse_dev("NV+NV").iface == "NV"
  with pytest.raises(DevStringError, match="valid interfaces: NV, MOCKNV"): parse_dev("MOCKKFD+NV")


def test_plain_nv_is_the_emulated_gpu_without_an_nvidia_gpu(capfd):
  import hcq.drivers.nv.device as nvdev
  assert not os.path.exists("/dev/nvidiactl")  # this test is about a machine without one
  nvdev._said_emulated = False
  os_layer = nvdev._open_os(parse_dev("NV"))
  nvdev._open_os(parse_dev("NV"))
  assert isinstance(os_layer, MockNVOS)
  assert capfd.readouterr().err.count("no NVIDIA GPU found; NV runs on the emulated H200 (MOCKNV+NV)") == 1


def test_arch_rows_are_picked_by_the_class_list():
  for row in ARCHS:
    assert pick_arch([row.compute, row.gpfifo, row.copy, row.usermode]) is row
  with pytest.raises(HCQError, match="no compute class of a known arch"): pick_arch([0x1234])
  hopper = next(r for r in ARCHS if r.sm == "sm_90")
  with pytest.raises(HCQError, match="not"): pick_arch([hopper.compute])


def test_memory_kinds(dev):
  for kind in ("host", "uncached", "cpu"):
    b = dev.alloc(5000, kind)
    assert b.host_addr == b.addr < 1 << 40  # the GPU address is the CPU address, within the host class's 40 bits
    b.view()[:] = 7
    assert dev.rm.os.rm.gpu.mem.read(b.addr, 5000) == b"\x07" * 5000  # what the GPU sees there is the CPU's pages
    b.free()
  d = dev.alloc(5000, "device")
  assert d.host_addr is None and 1 << 40 <= d.addr < 1 << 57  # device memory: GPU-only addresses, above the host range
  d.free()
  again = dev.alloc(5000, "host")  # a freed range is handed out again, on both sides
  assert again.addr == again.host_addr
  again.free()


SIZES = [1, 3, 4, 5, 255, 256, 4095, 4096, 4097, 65536 + 7, (1 << 20) + 13]
OFFSETS = [0, 1, 3, 8]


@pytest.mark.parametrize("n", SIZES)
def test_copy_host_device_host(dev, n):
  rng = np.random.default_rng(n)
  dbuf = dev.alloc(n + 16, "device")
  for off in OFFSETS:
    data = rng.integers(0, 256, n, dtype=np.uint8)
    dev.copy_from_host(dbuf.offset(off, n), data)
    out = np.zeros(n, np.uint8)
    dev.copy_to_host(out, dbuf.offset(off, n))
    np.testing.assert_array_equal(out, data)
  dbuf.free()


@pytest.mark.parametrize("n", SIZES)
def test_copy_device_to_device_on_the_copy_queue(dev, n):
  rng = np.random.default_rng(n + 1)
  a, b = dev.alloc(n + 16, "device"), dev.alloc(n + 16, "device")
  src = rng.integers(0, 256, n + 16, dtype=np.uint8)
  a.copyin(src)
  for so, do in [(0, 0), (1, 3), (3, 8), (8, 1)]:
    q = dev.copy_queue().wait(dev.timeline_signal, Variable("wait")).copy(b.addr + do, a.addr + so, n).signal(dev.timeline_signal, Variable("signal"))
    dev.wait_timeline(dev.timeline_submit(q))
    out = np.zeros(n + 16, np.uint8)
    b.copyout(out)
    np.testing.assert_array_equal(out[do:do + n], src[so:so + n])
  a.free(), b.free()


def test_signal_carries_64_bit_value_and_timestamp(dev):
  s = dev.new_signal()
  v = (1 << 40) + 5
  dev.compute_queue().signal(s, v).submit(dev)
  s.wait(v, 5)
  assert s.value == v and s.timestamp > 0
  dev.release_signal(s)


def test_wait_orders_the_two_channels(dev):
  """The compute channel waits for the copy channel's signal: its own signal comes only after the copy landed."""
  n = 1 << 16
  src, dst = dev.alloc(n, "host"), dev.alloc(n, "host")
  src.view()[:] = np.arange(n, dtype=np.uint8)
  done_copy, done_compute = dev.new_signal(), dev.new_signal()
  gate = dev.new_signal()
  dev.compute_queue().wait(done_copy, 1).signal(done_compute, 1).submit(dev)
  dev.copy_queue().wait(gate, 1).copy(dst.addr, src.addr, n).signal(done_copy, 1).submit(dev)
  import time
  time.sleep(0.05)
  assert done_compute.value == 0 and done_copy.value == 0  # both held by the gate
  gate.value = 1
  done_compute.wait(1, 5)
  np.testing.assert_array_equal(dst.view(), src.view())
  assert done_compute.timestamp >= done_copy.timestamp
  for s in (done_copy, done_compute, gate): dev.release_signal(s)
  src.free(), dst.free()


def test_timestamp_and_memory_barrier(dev):
  s = dev.new_signal()
  dev.compute_queue().memory_barrier().timestamp(s).submit(dev)
  dev.copy_queue().memory_barrier().submit(dev)
  dev.synchronize()
  deadline = __import__("time").monotonic() + 5
  while s.timestamp == 0 and __import__("time").monotonic() < deadline: pass
  assert s.timestamp > 0
  dev.release_signal(s)


def test_replay_with_patched_values(dev):
  """One bound copy queue, replayed with new addresses and signal values: only the patch slots change."""
  bufs = [dev.alloc(256, "host") for _ in range(4)]
  for i, b in enumerate(bufs): b.view()[:] = i + 1
  sig = dev.new_signal()
  q = dev.copy_queue().copy(Variable("dst"), Variable("src"), 256).signal(sig, Variable("v")).bind(dev)
  for k, (s, d) in enumerate([(0, 1), (2, 3), (3, 0), (1, 2)], start=1):
    q.submit(dev, {"src": bufs[s].addr, "dst": bufs[d].addr, "v": k})
    sig.wait(k, 5)
    assert (bufs[d].view() == bufs[s].view()).all()
  assert [b.view()[0] for b in bufs] == [3, 1, 1, 3]
  dev.release_signal(sig)
  for b in bufs: b.free()


def test_replay_patches_one_copy_while_the_other_is_in_flight(dev):
  """Two replays held behind a closed gate occupy both copies of a bound queue, each with its own values; a third
  takes the first copy once the GPU has read it, and a fourth, whose copy is still unread, waits (here: times out,
  leaving the queue as it was)."""
  gate, sig = dev.new_signal(0), dev.new_signal(0)
  bufs = [dev.alloc(256, "host") for _ in range(6)]
  for i, b in enumerate(bufs): b.view()[:] = i + 1
  q = dev.copy_queue().wait(gate, Variable("gate")).copy(Variable("dst"), Variable("src"), 256).signal(sig, Variable("v")).bind(dev)
  run = lambda k, s, d, **kw: q.submit(dev, {"gate": k, "src": bufs[s].addr, "dst": bufs[d].addr, "v": k, **kw})
  run(1, 0, 1), run(2, 2, 3)
  __import__("time").sleep(0.05)
  assert sig.value == 0 and bufs[1].view()[0] == 2 and bufs[3].view()[0] == 4  # nothing ran: both copies are in flight
  gate.value = 1
  sig.wait(1, 5)
  assert (bufs[1].view() == 1).all() and sig.value == 1 and bufs[3].view()[0] == 4  # the first ran with its own values only
  run(3, 4, 5)  # the first copy is free again: no wait
  old, dev.default_timeout = dev.default_timeout, 0.3
  try:
    with pytest.raises(GPUTimeout, match="bound queue"):
      run(4, 0, 2)  # the second copy is still unread (its submission waits for gate 2)
  finally:
    dev.default_timeout = old
  gate.value = 3
  sig.wait(3, 5)
  assert [int(b.view()[0]) for b in bufs] == [1, 1, 3, 3, 5, 5] and bufs[2].view()[0] == 3
  run(4, 1, 0)  # the refused fourth left the queue usable: copies still alternate
  gate.value = 4
  sig.wait(4, 5)
  assert (bufs[0].view() == 1).all()
  for s in (gate, sig): dev.release_signal(s)
  for b in bufs: b.free()


def test_bound_queue_replays_after_a_recovery(dev):
  """A recovery makes fresh channels: a bound queue's copies then count as read, and its replays run on them."""
  a, b = dev.alloc(64, "host"), dev.alloc(64, "host")
  a.view()[:] = 7
  sig = dev.new_signal()
  q = dev.copy_queue().copy(b.addr, a.addr, 64).signal(sig, Variable("v")).bind(dev)
  q.submit(dev, {"v": 1})
  sig.wait(1, 5)
  _raw_submit(dev, "copy", [0xE0000000])
  _expect_fault(dev, "Xid")
  for v in (2, 3, 4): q.submit(dev, {"v": v})
  sig.wait(4, 5)
  assert (b.view() == 7).all()
  dev.release_signal(sig)
  a.free(), b.free()


def test_many_copies_and_signals_keep_rss_flat(dev):
  a, b = dev.alloc(4096, "device"), dev.alloc(4096, "device")
  q = dev.copy_queue().wait(dev.timeline_signal, Variable("wait")).copy(b.addr, a.addr, 64).signal(dev.timeline_signal, Variable("signal")).bind(dev)
  for _ in range(200): dev.timeline_submit(q)
  dev.synchronize()
  before = rss()
  for _ in range(LOOPS): dev.timeline_submit(q)
  dev.synchronize()
  assert rss() - before < 4 << 20, f"RSS grew {(rss() - before) >> 10} KiB over {LOOPS} copies"
  a.free(), b.free()


def _raw_submit(dev, channel: str, words: list[int]) -> None:
  q = (dev.compute_queue() if channel == "compute" else dev.copy_queue())
  q._q.extend(words)
  q.submit(dev)


def _bad_streams(dev):
  """case -> (channel, method words, what the channel error names)."""
  a = dev.arch
  sem_hi = a.host.register("SEM_ADDR_HI").fields["offset"][1]  # clc86f: 25 bits
  return {
    "unknown host method": ("compute", [a.header(0, 0xFC, 1), 0], "host method 0xfc is not a NVC86F method"),
    "NOP, which clc86f does not define": ("copy", [a.header(0, a.m("NOP"), 1), 0], "host method 0x8 is not a NVC86F method"),
    "method on an unbound subchannel": ("compute", [a.header(5, 0x400, 1), 0], "no class bound"),
    "malformed header": ("copy", [0xE0000000], "has opcode 7"),
    "count past the segment": ("copy", [a.header(0, a.m("SEM_ADDR_LO"), 3), 0], "counts 3 data words, 1 follow"),
    "copy method not on a copy class": ("copy", [a.header(COPY_SUBCHANNEL, 0x7FC, 1), 0], "method 0x7fc is not emulated"),
    "semaphore address past SEM_ADDR_HI's bits": ("compute", [a.header(0, a.m("SEM_ADDR_LO"), 5), 0, sem_hi + 1, 0, 0,
                                                               a.sem_execute(operation=a.c("SEM_EXECUTE_OPERATION_RELEASE"))],
                                                  "sets bits outside NVC86F_SEM_ADDR_HI_OFFSET"),
  }


@pytest.mark.parametrize("case", ["unknown host method", "NOP, which clc86f does not define", "method on an unbound subchannel", "malformed header",
                                  "count past the segment", "copy method not on a copy class", "semaphore address past SEM_ADDR_HI's bits"])
def test_channel_errors_raise_and_recover(dev, case):
  channel, words, why = _bad_streams(dev)[case]
  old = dev.channels[channel].handle
  _raw_submit(dev, channel, words)
  with pytest.raises(GPUFault, match=f"Xid \\d+\\) on the {channel} channel.*{re.escape(why)}"):
    dev.synchronize(5)
    for _ in range(1000):
      dev.check_faults()
      __import__("time").sleep(1e-3)
  assert dev.channels[channel].handle != old  # fresh channels
  _still_works(dev)


def test_each_arch_row_takes_its_gpfifo_class_host_table():
  """Hopper and Blackwell rows read their own host headers (57-bit semaphore addresses), Ampere and Ada clc56f's (40
  bits); the methods the driver writes sit at the same offsets in every class."""
  from hcq.autogen.nv import clc56f, clc86f
  widths = {row.sm: row.host.register("SEM_ADDR_HI").fields["offset"][1].bit_length() for row in ARCHS}
  assert widths == {"sm_120": 25, "sm_100": 25, "sm_90": 25, "sm_89": 8, "sm_86": 8, "sm_80": 8}
  for row in ARCHS:
    for name in ("SET_OBJECT", "SEM_ADDR_LO", "SEM_ADDR_HI", "SEM_PAYLOAD_LO", "SEM_PAYLOAD_HI", "SEM_EXECUTE", "WFI", "MEM_OP_A", "MEM_OP_D"):
      assert row.m(name) == getattr(clc56f, f"NVC56F_{name}"), (row.sm, name)
  hopper = next(r for r in ARCHS if r.sm == "sm_90")
  assert hopper.host.module is clc86f and hopper.host.register("SEM_ADDR_HI").name == "NVC86F_SEM_ADDR_HI"


def test_the_h200_runs_its_channels_on_the_hopper_gpfifo_class(dev):
  from hcq.autogen.nv import clc56f, clc86f
  rm = dev.os.rm
  assert {clc86f.HOPPER_CHANNEL_GPFIFO_A, clc56f.AMPERE_CHANNEL_GPFIFO_A} <= set(rm.classes) and dev.arch.gpfifo == clc86f.HOPPER_CHANNEL_GPFIFO_A
  assert {ch.host.cls for ch in rm.gpu.channels.values()} == {clc86f.HOPPER_CHANNEL_GPFIFO_A}


def _raw_gp_entry(dev, channel: str, e0: int, e1: int) -> None:
  """A GPFIFO entry pushed as the driver pushes one, with chosen words."""
  dev.push_entry(channel, e1 << 32 | e0)


def _expect_fault(dev, pattern: str) -> None:
  with pytest.raises(GPUFault, match=pattern):
    for _ in range(2000):
      dev.check_faults()
      __import__("time").sleep(1e-3)


@pytest.mark.parametrize("what", ["ILLEGAL control entry", "pushbuffer outside every mapping"])
def test_malformed_gpfifo_entries_are_channel_errors(dev, what):
  gp1 = dev.arch.host.register("GP_ENTRY1")
  if what == "ILLEGAL control entry": _raw_gp_entry(dev, "copy", 0, gp1.encode(opcode=dev.arch.c("GP_ENTRY1_OPCODE_ILLEGAL")))
  else: _raw_gp_entry(dev, "copy", 0x1000, gp1.encode(length=4))
  _expect_fault(dev, "Xid 3[12]\\) on the copy channel")
  _still_works(dev)


def test_mmu_fault_is_xid_31_and_recovers(dev):
  q = dev.copy_queue().copy(0x10, 0x20, 16)  # far below every mapping
  q.submit(dev)
  _expect_fault(dev, "Xid 31")
  _still_works(dev)


def test_hang_times_out_with_gpfifo_state_and_recovers(dev):
  never = dev.new_signal()
  q = dev.compute_queue().wait(dev.timeline_signal, Variable("wait")).wait(never, 1).signal(dev.timeline_signal, Variable("signal"))
  v = dev.timeline_submit(q)
  with pytest.raises(GPUTimeout, match="compute GPFIFO get \\d+ put \\d+"):
    dev.wait_timeline(v, 0.3)
  dev.release_signal(never)
  _still_works(dev)


def _still_works(dev):
  data = np.arange(1000, dtype=np.uint8)
  b = dev.alloc(1000, "device")
  b.copyin(data)
  np.testing.assert_array_equal(b.copyout(np.empty(1000, np.uint8)), data)
  b.free()
  dev.synchronize()


def test_a_second_device_on_its_own_mock(dev):
  other = NVDevice(parse_dev("MOCKNV+NV"), os_layer=MockNVOS())
  assert other.rm.client != 0 and other.arch is dev.arch
  _still_works(other)


def test_a_small_gpfifo_wraps_many_times():
  small = NVDevice(parse_dev("MOCKNV+NV"), os_layer=MockNVOS(), gpfifo_entries=4)
  a, b = small.alloc(4096, "host"), small.alloc(4096, "host")
  for i in range(50):
    a.view()[:8] = i
    q = small.copy_queue().wait(small.timeline_signal, Variable("wait")).copy(b.addr, a.addr, 8).signal(small.timeline_signal, Variable("signal"))
    small.wait_timeline(small.timeline_submit(q))
    assert (b.view()[:8] == i).all()
  assert small.channels["copy"].put == 51  # SET_OBJECT, then one entry a submission


def test_submissions_from_threads_keep_timeline_order(dev):
  import threading
  src, dst = dev.alloc(4096, "device"), dev.alloc(4096, "device")
  q = dev.copy_queue().wait(dev.timeline_signal, Variable("wait")).copy(dst.addr, src.addr, 256).signal(dev.timeline_signal, Variable("signal"))
  cq = dev.compute_queue().wait(dev.timeline_signal, Variable("wait")).signal(dev.timeline_signal, Variable("signal"))
  values: list[int] = []
  def worker(queue):
    for _ in range(100): values.append(dev.timeline_submit(queue))
  threads = [threading.Thread(target=worker, args=(x,)) for x in (q, cq, q, cq)]
  for t in threads: t.start()
  for t in threads: t.join()
  dev.synchronize(10)
  assert sorted(values) == list(range(min(values), min(values) + 400)) and dev.timeline_signal.value == max(values)
  src.free(), dst.free()


def test_program_says_what_it_takes(dev):  # programs and launches: test_nv_program.py, test_nv_launch.py
  with pytest.raises(HCQError, match="takes a cubin .*, PTX text .* or LLVM IR"):
    dev.program(b"")


def test_smi_reads_memory_utilisation_and_temperature_through_rm_controls(dev):
  from hcq.smi import nvidia
  (before,), _ = nvidia.find(dev.os, 0, [])
  big = dev.alloc(1 << 30, "device")
  src, dst = dev.alloc(8 << 20, "host"), dev.alloc(8 << 20, "device")
  q = dev.copy_queue().wait(dev.timeline_signal, Variable("wait")).copy(dst.addr, src.addr, 8 << 20).signal(dev.timeline_signal, Variable("signal"))
  for _ in range(4): dev.wait_timeline(dev.timeline_submit(q))
  (after,), _ = nvidia.find(dev.os, 0, [])
  assert after.vram_total_bytes == NVBoardSpec().vram_bytes >> 10 << 10
  assert after.vram_used_bytes - before.vram_used_bytes >= (1 << 30) + (8 << 20)
  assert 0 < after.busy_percent <= 100 and after.temp_edge_c == NVBoardSpec().temperature_c
  assert set(after.unavailable) == {"power", "clocks", "fan"}
  for b in (big, src, dst): b.free()


def test_smi_names_the_control_the_rm_refuses():
  from hcq.drivers.mock.nv import rm as mock_rm
  from hcq.smi import nvidia

  class NoThermal(mock_rm.MockRM):  # the RM refusing one control, as gVisor's nvproxy does for controls it does not know
    def _thermal(self, p): raise mock_rm.RMError(mock_rm.S.NV_ERR_NOT_SUPPORTED, "refused")
  (d,), _ = nvidia.find(MockNVOS(rm=NoThermal()), 0, [])
  assert d.temp_edge_c is None and d.vram_total_bytes is not None
  assert "NV2080_CTRL_CMD_THERMAL_SYSTEM_EXECUTE_V2" in d.unavailable["temperature"] and "NV_ERR_NOT_SUPPORTED" in d.unavailable["temperature"]


def test_smi_reads_the_emulated_board():
  from hcq.smi import nvidia
  found, driver = nvidia.find(MockNVOS(), 0, [])
  assert driver.version == "580.142" and [d.name for d in found] == ["NVIDIA H200"] and found[0].nodes == ["/dev/nvidia0"]
  assert found[0].device_id == 0x2335 and found[0].link == "32.0 GT/s PCIe x16"


def test_uuid_comes_from_the_gid_control(dev):
  """NV2080_CTRL_CMD_GPU_GET_GID_INFO gives the UUID nvidia-smi shows: the device, UVM registration and smi use it, not
  procfs's copy (made to differ here)."""
  from hcq.smi import nvidia
  board = NVBoardSpec()
  assert dev.uuid == board.uuid and dev.os.rm.uvm_gpus == {bytes.fromhex(board.uuid[4:].replace("-", ""))}
  os_layer = MockNVOS()
  info = next(k for k in os_layer.files if k.endswith("/information"))
  os_layer.files[info] = os_layer.files[info].replace(board.uuid, "GPU-00000000-0000-0000-0000-000000000000")
  (d,), _ = nvidia.find(os_layer, 0, [])
  assert d.uuid == board.uuid


def test_gid_control_formats_and_flags():
  from hcq.autogen.nv import classes as C, ctrl2080 as X
  from hcq.drivers.nv.rm import RMCallError, RMInterface
  rm = RMInterface(MockNVOS())
  device = rm.alloc(rm.client, C.NV01_DEVICE_0, C.struct_NV0080_ALLOC_PARAMETERS())
  sub = rm.alloc(device, C.NV20_SUBDEVICE_0, C.struct_NV2080_ALLOC_PARAMETERS())
  p = rm.control(sub, X.NV2080_CTRL_CMD_GPU_GET_GID_INFO, X.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(flags=1))  # FORMAT 1 is not BINARY: ASCII
  assert p.length == 41 and bytes(p.data[:41]) == NVBoardSpec().uuid.encode() + b"\0"
  assert rm.gpu_uuid(sub, binary=True) == bytes.fromhex(NVBoardSpec().uuid[4:].replace("-", ""))
  with pytest.raises(RMCallError, match="NV2080_CTRL_CMD_GPU_GET_GID_INFO.*NV_ERR_INVALID_FLAGS"):
    rm.control(sub, X.NV2080_CTRL_CMD_GPU_GET_GID_INFO, X.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(flags=4))  # TYPE other than SHA1
  rm.free(rm.client)


class _RingModel:
  """A channel's pushbuffer bookkeeping with a GPU that reads one GPFIFO entry per poll: drives
  NVDevice._pushbuffer_space without a device."""
  gpfifo_entries = 1 << 20

  def __init__(self, size: int):
    from hcq.drivers.nv.device import NVChannel
    self.read = 0
    self.ch = NVChannel("compute", 0, 0, 0, 1, None, None, None, None, type("PB", (), {"addr": 1 << 20, "nbytes": size, "host_addr": 0})())

  def _gp_get(self, ch) -> int:
    return self.read

  def _wait(self, ch, ready, what: str) -> None:
    assert what == "the pushbuffer is full"
    while not ready(): self.read += 1

  _pushbuffer_space = NVDevice._pushbuffer_space


@pytest.mark.parametrize("seed", range(4))
def test_pushbuffer_segments_never_overwrite_unread_methods(seed):
  """Random segment sizes and GPU progress round a small ring: a new segment never overlaps one whose GPFIFO entry the
  GPU has not read, and the driver waits only when the new segment (or the tail it skips) reaches the oldest unread one."""
  rng = np.random.default_rng(seed)
  size = 4096
  model = _RingModel(size)
  ch, segments = model.ch, []  # (entry index, start, end) of every segment handed out
  for _ in range(3000):
    model.read = min(ch.put, model.read + int(rng.integers(0, 3)))
    before = model.read
    nbytes = 4 * int(rng.integers(1, 300))
    pos = ch.pb_pos % size
    addr = model._pushbuffer_space(ch, nbytes)
    start = addr - (1 << 20)
    assert start + nbytes <= size and start in (pos, 0)
    unread = [(i, s, e) for i, s, e in segments if i >= model.read]
    assert not any(s < start + nbytes and start < e for _, s, e in unread)
    taken = [(pos, size)] if start != pos else []  # a wrap skips the tail
    needed = [(i, s, e) for i, s, e in segments if i >= before and any(s < b and a < e for a, b in taken + [(start, start + nbytes)])]
    assert model.read == (max(i for i, _, _ in needed) + 1 if needed else before)  # waited exactly as long as needed
    segments.append((ch.put, start, start + nbytes))
    ch.put += 1
  with pytest.raises(HCQError, match="exceed the 4096-byte pushbuffer"): model._pushbuffer_space(ch, size + 4)


def test_binding_again_gives_back_the_first_copies(dev):
  """bind() on a bound queue frees the first bind's copies and counter signal, after the GPU has read the run still
  held in one of them; the queue then replays from its new copies."""
  import threading
  gate, sig = dev.new_signal(0), dev.new_signal(0)
  a, b = dev.alloc(64, "host"), dev.alloc(64, "host")
  a.view()[:] = 5
  q = dev.copy_queue().wait(gate, Variable("g")).copy(b.addr, a.addr, 64).signal(sig, Variable("v")).bind(dev)
  first = [buf for _, buf, _, _ in q._copies]
  q.submit(dev, {"g": 1, "v": 1})  # held behind the gate
  threading.Timer(0.2, lambda: setattr(gate, "value", 1)).start()
  pool = len(dev._signal_pool)
  q.bind(dev)
  assert sig.value == 1 and all(buf.freed for buf in first) and len(dev._signal_pool) == pool  # one signal back, one taken
  assert not any(buf.freed for _, buf, _, _ in q._copies)
  b.view()[:] = 0
  for v in (2, 3, 4): q.submit(dev, {"g": 0, "v": v})
  sig.wait(4, 5)
  assert (b.view() == 5).all()
  for s in (gate, sig): dev.release_signal(s)
  a.free(), b.free()
