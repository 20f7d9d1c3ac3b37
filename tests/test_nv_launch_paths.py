"""The NV launch fast path (drivers/nv/launch_plan.py) against the generic path (Device.launch with the cached launch
queue, NVProgram.kernargs and place_kernargs, taken with prg.fast_launch = False): the same kernels launched both ways
give the GPU the same method words, the same QMD and the same constant bank 0 on every QMD version (v3 on sm_80/sm_89,
v4 on sm_90, v5 on sm_100), and refuse the same arguments with the same errors, changing nothing."""
from contextlib import contextmanager

import numpy as np
import pytest

import hcq
from hcq.devstring import parse_dev
from hcq.drivers.mock.nv.os import MockNVOS
from hcq.drivers.nv.device import ARCHS, NVDevice
from hcq.drivers.nv.program import compute_class
from hcq.drivers.nv.qmd import QMD_LAYOUTS
from hcq.errors import ProgramArgumentError

PTX_VERSION = {"sm_80": "8.0", "sm_89": "8.0", "sm_90": "8.0", "sm_100": "8.8"}
# parameters of every width, buffers not first (the struct's order differs from the arguments'), gaps between them
MIXED = """.version {v}
.target {arch}
.address_size 64
.visible .entry mixed(.param .u32 n, .param .u64 out, .param .f64 d, .param .u8 c, .param .s16 h, .param .u64 x, .param .f32 f, .param .s64 q)
{{
  .reg .b32 %r<3>; .reg .b64 %rd<3>; .reg .f32 %f1;
  ld.param.u64 %rd1, [out]; ld.param.u32 %r1, [n]; ld.param.f32 %f1, [f]; ld.param.s16 %r2, [h];
  st.global.u32 [%rd1], %r1; st.global.f32 [%rd1+4], %f1; st.global.s32 [%rd1+8], %r2;
  ret;
}}
"""
# a parameter known only by its size (.b32): the ArgStruct does not take it, pack_kernargs packs it
UNTYPED = """.version {v}
.target {arch}
.address_size 64
.visible .entry untyped(.param .b32 w, .param .u64 out)
{{
  .reg .b32 %r1; .reg .b64 %rd1;
  ld.param.u64 %rd1, [out]; ld.param.b32 %r1, [w]; st.global.u32 [%rd1], %r1;
  ret;
}}
"""
ARCH_ROWS = {row.sm: row for row in ARCHS if row.sm in PTX_VERSION}
_devices: dict[str, NVDevice] = {}


def arch_device(sm: str):
  """The emulated H200 for sm_90; for another arch a device of its own whose arch row is that arch's (the H200 behind it
  copies the code in, but would not take those QMDs: its launches are only captured, never run)."""
  if sm == "sm_90": return hcq.Device("MOCKNV+NV")
  if sm not in _devices:
    dev = _devices[sm] = NVDevice(parse_dev("MOCKNV+NV"), os_layer=MockNVOS())
    dev.arch = ARCH_ROWS[sm]
  return _devices[sm]


@contextmanager
def gpu_paused(dev, resume: bool = True):
  """The emulated GPU's channels taken off the runlist, so what a launch wrote stays unread while it is captured (and
  never read, without `resume`)."""
  if resume: dev.synchronize()
  channels = list(dev.os.rm.gpu.channels.values())
  for ch in channels: ch.scheduled.clear()
  try:
    yield
  finally:
    if resume:
      for ch in channels:
        ch.scheduled.set()
        ch.doorbell.set()


def capture(dev, prg) -> dict:
  """What the GPU reads for the compute channel's last GPFIFO entry: its methods as (subchannel, method, data), the QMD
  SEND_PCAS_A names (as an int) and the constant bank 0 the QMD points at, read through the GPU's VA space."""
  mem, ch, host = dev.os.rm.gpu.mem, dev.channels["compute"], dev.arch.host
  entry = ch.gpfifo[(ch.put - 1) % dev.gpfifo_entries]
  e0, e1 = host.register("GP_ENTRY0").decode(entry & 0xFFFFFFFF), host.register("GP_ENTRY1").decode(entry >> 32)
  addr = e1["get_hi"] << 32 | e0["get"] << 2
  words = np.frombuffer(mem.read(addr, 4 * e1["length"]), np.uint32).tolist()
  methods, i, incr = [], 0, host.register("DMA_INCR")
  while i < len(words):
    h = incr.decode(words[i])
    assert h["opcode"] == dev.arch.c("DMA_INCR_OPCODE_VALUE")
    methods += [(h["subchannel"], 4 * h["address"] + 4 * k, words[i + 1 + k]) for k in range(h["count"])]
    i += 1 + h["count"]
  cls, prefix = compute_class(dev.arch.compute)
  qmd_addr = next(d for _, m, d in methods if m == getattr(cls, f"{prefix}_SEND_PCAS_A")) << 8
  L = QMD_LAYOUTS[dev.arch.qmd]
  qmd = int.from_bytes(mem.read(qmd_addr, L.nbytes), "little")
  f = L.register.decode(qmd)
  bank0 = (f[L.cbank("addr_upper", 0)] << 32 | f[L.cbank("addr_lower", 0)]) << L.cbank_shift
  return {"entry": addr, "methods": methods, "qmd_addr": qmd_addr, "qmd": qmd, "fields": f,
          "bank0_addr": bank0, "bank0": mem.read(bank0, f["constant_buffer_size_shifted4_0"] << 4)}


def per_launch_values_removed(dev, prg, c: dict, value: int) -> dict:
  """`c` without what each launch has of its own, after checking those: the acquire waits for the previous timeline value,
  bank 0 follows the QMD, RELEASE1 writes the launch's timeline value to the timeline."""
  L, a = QMD_LAYOUTS[dev.arch.qmd], dev.arch
  f, rel = c["fields"], lambda what: f[L.release(what, 1)]
  payload = {m: d for _, m, d in c["methods"] if m in (a.m("SEM_PAYLOAD_LO"), a.m("SEM_PAYLOAD_HI"))}
  assert payload == {a.m("SEM_PAYLOAD_LO"): (value - 1) & 0xFFFFFFFF, a.m("SEM_PAYLOAD_HI"): (value - 1) >> 32}
  assert c["bank0_addr"] == c["qmd_addr"] + prg.qmd_bytes and c["qmd_addr"] % 256 == 0
  assert rel("payload_upper") << 32 | rel("payload_lower") == value and rel("addr_upper") << 32 | rel("addr_lower") == dev.timeline_signal.value_addr
  own = [L.cbank("addr_lower", 0), L.cbank("addr_upper", 0), L.release("payload_lower", 1), L.release("payload_upper", 1)]
  mask = sum(L.register.fields[n][1] for n in own)
  cls, prefix = compute_class(a.compute)
  varying = {a.m("SEM_PAYLOAD_LO"), a.m("SEM_PAYLOAD_HI"), getattr(cls, f"{prefix}_SEND_PCAS_A")}
  return {"methods": [(s, m, None if m in varying else d) for s, m, d in c["methods"]], "qmd": c["qmd"] & ~mask, "bank0": c["bank0"]}


def both_ways(dev, prg, bufs, vals, gs, ls, shared=None, run=False) -> tuple[dict, dict]:
  """One launch by the generic path, one by the fast path (its plan made by an untimed launch before), each captured."""
  got = []
  prg.fast_launch = True
  with gpu_paused(dev, resume=run):  # the fast path's plan for this shape (made at its first launch) exists before the capture
    prg(*bufs, vals=vals, global_size=gs, local_size=ls, shared=shared)
  for fast in (False, True):
    prg.fast_launch = fast
    with gpu_paused(dev, resume=run):
      value = dev.timeline_value
      prg(*bufs, vals=vals, global_size=gs, local_size=ls, shared=shared)
      c = capture(dev, prg)
      got.append((c, per_launch_values_removed(dev, prg, c, value)))
  prg.fast_launch = True
  (generic, g), (fast, f) = got
  ring = dev.kernargs.buf
  assert ring.addr <= fast["entry"] < ring.addr + ring.nbytes  # the fast path's methods lie in its launch block
  assert not ring.addr <= generic["entry"] < ring.addr + ring.nbytes  # the generic path's in the channel's pushbuffer
  return g, f


SHAPES = [(1, 1, None), (3, 64, None), ((3, 5, 2), (7, 3, 2), None), ([2, 3], (32, 2), 4096), (np.int64(5), np.uint16(33), None), (70000, 1, 0)]


@pytest.mark.parametrize("sm", list(ARCH_ROWS))
def test_fast_and_generic_launches_send_the_same_bytes(sm):
  dev = arch_device(sm)
  run = sm == "sm_90"
  prg = dev.program(MIXED.format(v=PTX_VERSION[sm], arch=sm))
  untyped = dev.program(UNTYPED.format(v=PTX_VERSION[sm], arch=sm))
  out, x = dev.alloc(64, "device"), dev.alloc(256, "device")
  py_vals = (7, 2.5, 200, -3, 0.1, -(1 << 40))
  np_vals = (np.uint32(7), np.float64(2.5), np.uint8(200), np.int16(-3), np.float32(0.1), np.int64(-(1 << 40)))
  for gs, ls, shared in SHAPES:
    for vals in (py_vals, np_vals):
      g, f = both_ways(dev, prg, [out, x.offset(16)], vals, gs, ls, shared, run)
      assert f == g, (gs, ls, shared, vals)
  for w in (5, -5, 1.5, np.float32(-2.0), b"\x01\x02\x03\x04"):
    g, f = both_ways(dev, untyped, [out], (w,), 2, 32, run=run)
    assert f == g, w
  if run:  # the emulated H200 runs what the fast path sent
    dev.synchronize()
    prg(out, x, vals=(11, 0.0, 0, -9, 0.25, 0), local_size=32)
    np.testing.assert_array_equal(out.copyout(np.empty(3, np.int32)).view(np.uint32), [11, np.float32(0.25).view(np.uint32), np.uint32(2**32 - 9)])
    prg(out, x, vals=(v for v in (12, 0.0, 0, -9, 0.25, 0)), local_size=32)  # a generator: the fast path takes it as the generic one does
    dev.synchronize()
    assert out.copyout(np.empty(1, np.int32))[0] == 12


@pytest.mark.parametrize("bad", [
  ((7, 2.5, 200, -3, 0.1), "takes 2 buffers"),                          # a value missing
  ((-1, 2.5, 200, -3, 0.1, 0), r"argument n \(u32\) cannot hold -1"),
  ((1 << 32, 2.5, 200, -3, 0.1, 0), r"argument n \(u32\) cannot hold 4294967296"),
  ((7, 2.5, 256, -3, 0.1, 0), r"argument c \(u8\) cannot hold 256"),
  ((7, 2.5, 200, 40000, 0.1, 0), r"argument h \(i16\) cannot hold 40000"),
  ((7, 2.5, 200, -3, 1e39, 0), r"argument f \(f32\) cannot hold 1e\+39"),
  ((7, 2.5, 200, -3, 1e-50, 0), r"argument f \(f32\) cannot hold 1e-50: it would round to 0"),
  ((7, "2.5", 200, -3, 0.1, 0), r"argument d \(f64\) cannot take str"),
  ((2.5, 2.5, 200, -3, 0.1, 0), r"argument n \(u32\) cannot take 2.5: not an integer"),
  ((True, 2.5, 200, -3, 0.1, 0), r"argument n \(u32\) cannot take True"),
  ((7, 2.5, 200, -3, 0.1, 1 << 63), r"argument q \(i64\) cannot hold 9223372036854775808"),
])
def test_fast_and_generic_launches_refuse_the_same_arguments(bad):
  dev = arch_device("sm_90")
  prg = dev.program(MIXED.format(v="8.0", arch="sm_90"))
  out, x = dev.alloc(64, "device"), dev.alloc(64, "device")
  prg(out, x, vals=(1, 1.0, 1, 1, 1.0, 1), global_size=2, local_size=32)  # the fast path's plan for the shape
  vals, pattern = bad
  refused_alike(dev, prg, lambda: prg(out, x, vals=vals, global_size=2, local_size=32), pattern)


def refused_alike(dev, prg, launch, pattern: str) -> None:
  """launch() is refused by the generic path and by the fast one with the same message, neither writing nor taking anything."""
  errors = []
  for fast in (False, True):
    prg.fast_launch = fast
    dev.synchronize()
    state = (dev.timeline_value, dev.kernargs.pos, dev.channels["compute"].put)
    with pytest.raises(ProgramArgumentError, match=pattern) as e:
      launch()
    assert (dev.timeline_value, dev.kernargs.pos, dev.channels["compute"].put) == state  # nothing written, nothing taken
    errors.append(str(e.value))
  prg.fast_launch = True
  assert errors[0] == errors[1]


def test_fast_and_generic_launches_refuse_the_same_buffers():
  dev = arch_device("sm_90")
  prg = dev.program(MIXED.format(v="8.0", arch="sm_90"))
  out, x, freed = dev.alloc(64, "device"), dev.alloc(64, "device"), dev.alloc(64, "device")
  freed.free()
  vals = (1, 1.0, 1, 1, 1.0, 1)
  prg(out, x, vals=vals, local_size=32)
  cpu_buf = hcq.Device("CPU").alloc(64)
  for bufs, pattern in [((out, freed.offset(8)), "which was freed"), ((out, np.zeros(8)), "needs a Buffer, got ndarray"),
                        ((cpu_buf, x), "not a buffer of MOCKNV"), ((out,), "takes 2 buffers")]:
    refused_alike(dev, prg, lambda: prg(*bufs, vals=vals, local_size=32), pattern)


def test_a_shape_past_the_limits_is_refused_by_both_paths():
  dev = arch_device("sm_90")
  prg = dev.program(MIXED.format(v="8.0", arch="sm_90"))
  out, x = dev.alloc(64, "device"), dev.alloc(64, "device")
  for fast in (False, True):
    prg.fast_launch = fast
    with pytest.raises(ProgramArgumentError, match=r"a block of \(2048, 1, 1\) = 2048 threads exceeds 1024"):
      prg(out, x, vals=(1, 1.0, 1, 1, 1.0, 1), local_size=2048)
    with pytest.raises(ProgramArgumentError, match="local_size must be 1 to 3 ints"):
      prg(out, x, vals=(1, 1.0, 1, 1, 1.0, 1), local_size=True)
  prg.fast_launch = True
