"""The timeline is a 64-bit value, and so is every wait on it: past 2^32 (about 71 minutes of back-to-back 1 µs
launches) a wait that compares 32 bits passes early or never. On each emulated board (gfx1100, gfx1201, gfx942), the
compute queue (WAIT_REG_MEM64 on gfx11/gfx12, two 32-bit waits on gfx9) and the SDMA queue (two 32-bit POLL_REGMEMs)
hold a step until the whole value is reached, and launches and copies run in order across 2^32. The two 32-bit waits
also pass for a value below a block end the signal already went past (hcq.drivers.amd.signal_halves), on the boards and
against the 64-bit truth over signal trajectories."""
from __future__ import annotations
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hcq.devstring import parse_dev
from hcq.drivers.amd.device import AMDDevice
from hcq.drivers.amd.pm4 import AMDComputeQueue, gfx9_dialect
from hcq.drivers.amd.sdma import AMDCopyQueue
from hcq.drivers.amd.sdma_packets import sdma_packets
from hcq.sym import Variable
from tests.amd_boards import arch  # noqa: F401 (the board fixture)
from tests.test_amd_rings import counter_kernel, gpu_of

BLOCK = 1 << 32


@pytest.fixture(scope="module")
def dev(arch):
  """A device of its own: the tests move its timeline."""
  return AMDDevice(parse_dev(f"MOCKKFD+AMD::{arch}"))


def restart_timeline(dev, value: int) -> None:
  """Everything before done, then the timeline at `value` (the next submission signals value + 1)."""
  dev.synchronize()
  dev.timeline_signal.value, dev.timeline_value = value, value + 1


@pytest.mark.parametrize("kind", ["compute", "sdma"])
def test_a_wait_past_2_32_holds_until_the_signal_gets_there(dev, kind):
  """The driver's wait is 'signal >= value' over all 64 bits and every mask bit. A wait for 2^32 + 0x10005 holds at
  values that equal it in the low word (0x10005), pass it in the low word (0xffff_ffff), equal it in the low 16 bits
  (2^32 + 5) or fall one short (2^32 + 0x10004), and passes at 2^32 + 0x10005. The gate rises as signals do."""
  restart_timeline(dev, 10)
  gate, out = dev.new_signal(0), dev.new_signal(0)
  q = dev.compute_queue() if kind == "compute" else dev.copy_queue()
  q.wait(gate, BLOCK + 0x10005).signal(out, 1).signal(dev.timeline_signal, dev.next_timeline()).submit(dev)
  for below in (0x10005, BLOCK - 1, BLOCK + 5, BLOCK + 0x10004):
    gate.value = below
    time.sleep(0.05)
    assert out.value == 0, f"{dev.arch} {kind}: the wait for 2^32 + 0x10005 passed at {below:#x}"
  gate.value = BLOCK + 0x10005
  dev.synchronize(timeout=5)
  assert out.value == 1
  for s in (gate, out): dev.release_signal(s)


@pytest.mark.parametrize("start", [BLOCK - 3, BLOCK - 2], ids=["compute-crosses", "sdma-crosses"])
def test_launches_and_copies_across_2_32(dev, start):
  """From 2^32 - 3 (a launch signals 2^32) and 2^32 - 2 (a copy does), 8 launches that each add 1 to a counter and 8
  copies of the counter, alternating, ordered only by the timeline: copy i sees launch i's add and not launch i+1's.
  The command processor is slowed so a copy whose wait passed early reads the counter before its launch added to it;
  every second copy is waited for from the host (64-bit), the rest by the GPU."""
  restart_timeline(dev, start)
  prg = counter_kernel(dev)
  counter, out = dev.alloc(4, "host"), dev.alloc(4 * 8, "host")
  counter.view(np.uint32)[:] = 0
  out.view(np.uint32)[:] = 0xffffffff
  copy = dev.copy_queue().wait(dev.timeline_signal, Variable("wait")).copy(Variable("dst"), counter.addr, 4) \
    .signal(dev.timeline_signal, Variable("signal"))
  gpu = gpu_of(dev)
  gpu.packet_delay = 1e-3
  try:
    for i in range(8):
      prg(counter, global_size=1, local_size=1)
      value = dev.timeline_submit(copy, {"dst": out.addr + 4 * i})
      if i % 2: dev.wait_timeline(value)
    dev.synchronize()
  finally:
    gpu.packet_delay = 0.0
  assert out.view(np.uint32).tolist() == list(range(1, 9)), f"{dev.arch}: copies out of order with their launches"
  assert dev.timeline_signal.value == dev.timeline_value - 1 >= start + 16  # (loading the program may take a value too)


def timeline_steps(dev, n: int, kind: str) -> None:
  """Queue A: `n` steps of the timeline on the `kind` engine, each waiting for the value before its own."""
  q = dev.compute_queue() if kind == "compute" else dev.copy_queue()
  step = q.wait(dev.timeline_signal, Variable("wait")).signal(dev.timeline_signal, Variable("signal"))
  for _ in range(n): dev.timeline_submit(step)


@pytest.mark.parametrize("kind", ["compute", "sdma"])
@pytest.mark.parametrize("when", ["after-the-crossing", "behind-a-later-wait"])
def test_a_wait_for_a_value_below_a_block_end_the_timeline_passed(dev, kind, when):
  """Queue B waits for 2^33 - 2, an older timeline value just below a 2^32 block end, on a timeline queue A moves across
  it to 2^33 + 5 (A on the other engine: B may hold its own ring). With two 32-bit waits (gfx942 compute, every SDMA)
  the second polls the low word after the crossing, where it reads 5: a wait for 0xffff_fffe there holds until the low
  word climbs back. B submitted after the crossing (its wait was reached when the host submitted it), or before it
  behind a wait of its own for 2^33 + 5 (which implies the older value), must pass."""
  end = 2 * BLOCK
  restart_timeline(dev, end - 3)
  out = dev.new_signal(0)
  b, other = (dev.compute_queue(), "sdma") if kind == "compute" else (dev.copy_queue(), "compute")
  try:
    if when == "after-the-crossing":
      timeline_steps(dev, 8, other)
      dev.synchronize(timeout=5)
      b.wait(dev.timeline_signal, end - 2).signal(out, 1).submit(dev)
    else:
      b.wait(dev.timeline_signal, end + 5).wait(dev.timeline_signal, end - 2).signal(out, 1).submit(dev)
      timeline_steps(dev, 8, other)
    out.wait(1, timeout=5)
  finally:
    if out.value != 1:  # the low word stuck below 0xffff_fffe: let B go before the next test
      dev.timeline_signal.value = end + BLOCK - 1
      out.wait(1, timeout=5)
    dev.release_signal(out)
  assert dev.timeline_signal.value == end + 5


class HostSignal:
  """A signal as the driver sees it at submit: its address and the value a 64-bit host read gives."""
  value_addr = 0x1000

  def __init__(self, value: int):
    self.value = value


def emitted_waits(kind: str, signal_now: int, value: int) -> list[tuple[int, int]]:
  """(word: 0 low, 1 high; reference) of each unsigned >= wait with a full mask the driver emits for `wait(value)`,
  submitted while the signal holds `signal_now`; read back from the packets (WAIT_REG_MEM body: control, address lo/hi,
  reference, mask, interval; SDMA POLL_REGMEM by the packet table)."""
  q = AMDComputeQueue(gfx9_dialect((0x2000, 0xA000))) if kind == "gfx9-compute" else AMDCopyQueue(4)
  q.wait(HostSignal(signal_now), value)
  words = q.words()
  q._apply_patches({})
  out, i, poll = [], 0, sdma_packets()["POLL_REGMEM"]
  while i < len(words):
    if kind == "gfx9-compute":
      n = (words[i] >> 16 & 0x3FFF) + 2
      assert words[i] >> 8 & 0xFF == 0x3C, f"not a WAIT_REG_MEM: {words[i]:#x}"
      control, lo, hi, ref, mask, _ = words[i + 1:i + n]
      func, addr = control & 7, hi << 32 | lo
    else:
      n, f = poll.size, poll.decode(words[i:i + poll.size])
      func, addr, ref, mask = f["func"], f["addr_63_32"] << 32 | f["addr_31_0"], f["value"], f["mask"]
    assert func == 5 and mask == 0xffffffff and addr in (HostSignal.value_addr, HostSignal.value_addr + 4)
    out.append(((addr - HostSignal.value_addr) // 4, ref))
    i += n
  return out


NEAR_ENDS = st.builds(lambda k, d: max(0, min((k << 32) + d, (1 << 64) - 1)), st.integers(0, 4), st.integers(-40, 40))
VALUES = st.one_of(NEAR_ENDS, st.integers(0, (1 << 36) - 1))
STEPS = st.lists(st.tuples(st.one_of(st.integers(1, 16), st.integers(1, 1 << 33)), st.booleans(), st.integers(0, 3)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(["gfx9-compute", "sdma"]), value=VALUES, start=VALUES, steps=STEPS)
def test_split_waits_against_the_64_bit_truth(kind, value, start, steps):
  """The two 32-bit waits, run as an engine runs them (each polls its word until >= its reference, then the next) against
  a signal that grows from `start` by `steps` (each written whole, or as two halves low first, as SDMA FENCE pairs do;
  the engine polls 0-3 times between writes): they never pass before the signal reaches `value`, and once it has, they
  pass unless the precondition is broken (the wait was not reached at submit and the signal was in a later 2^32 block
  than the value with a lower low word while the engine polled)."""
  waits, mem = emitted_waits(kind, start, value), [start & 0xffffffff, start >> 32]
  target, at, broken = start, 0, False

  def poll() -> bool:  # one read of the current wait's word; True once every wait has passed
    nonlocal at
    if at < len(waits) and mem[waits[at][0]] >= waits[at][1]: at += 1
    return at == len(waits)

  def store(new: int, halves: bool) -> None:
    nonlocal broken
    for word in ((0, 1) if halves else (None,)):
      if word is None: mem[:] = [new & 0xffffffff, new >> 32]
      else: mem[word] = new >> 32 * word & 0xffffffff
      broken |= mem[1] > value >> 32 and mem[0] < value & 0xffffffff
  for step, halves, polls in steps:
    if any(poll() for _ in range(polls)): break
    target = min(target + step, (1 << 64) - 1)
    store(target, halves)
  passed = at == len(waits) or any(poll() for _ in range(len(waits) + 1))
  assert not passed or target >= value, f"passed at {target:#x}, before {value:#x} ({waits})"
  if target >= value and (start >= value or not broken):
    assert passed, f"stuck at {target:#x} waiting for {value:#x} from {start:#x} ({waits}, memory {mem})"


def test_a_wait_after_its_own_queue_wrote_past_the_block_end(dev):
  """An SDMA queue that writes 2^33 + 5 to a signal and then waits for 2^33 - 2 on it: the engine reaches the wait with
  the signal past the block end (its own write, done before it runs the next packet), where a low-word wait for
  0xffff_fffe reads 5. The write implies the value: the wait passes. (A compute queue's RELEASE_MEM writes at end of
  pipe, after later packets may have run: no such rule there.)"""
  end = 2 * BLOCK
  gate, out = dev.new_signal(end - 10), dev.new_signal(0)
  q = dev.copy_queue()
  try:
    q.signal(gate, end + 5).wait(gate, end - 2).signal(out, 1).submit(dev)
    out.wait(1, timeout=5)
  finally:
    if out.value != 1:  # stuck on the low word: let it go
      gate.value = end + BLOCK - 1
      out.wait(1, timeout=5)
    for s in (gate, out): dev.release_signal(s)
