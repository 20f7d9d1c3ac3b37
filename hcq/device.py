"""Device: one opened GPU (or the CPU) behind the HCQ interface — memory, signals, queues, programs, launches.

`hcq.Device("KFD+AMD")` or `hcq.Device()` (the DEV environment variable, else a real GPU if there is one,
else the CPU) opens a device once per process and returns the same object afterwards. Backends in
hcq.drivers subclass Device and supply memory, queues and programs; the launch path, the kernarg ring,
the timeline and profiling are shared here.
"""
from __future__ import annotations
import collections
import ctypes
import importlib
import importlib.util
import operator
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from hcq.buffer import MEMORY_KINDS, Buffer
from hcq.devstring import BACKENDS, DevSpec, parse_dev
from hcq.errors import GPUTimeout, HCQError
from hcq.memo import Memo
from hcq.signal import SIGNAL_BYTES, Signal
from hcq.sym import Variable

# launch queues kept per program, one per (grid, workgroup, timed): a program launched over ever new grids (a loop over
# sizes) starts its set over instead of growing it; they are unbound queues, copied into the ring at submission, so
# dropping one frees nothing the device still reads
LAUNCH_QUEUES_KEPT = 64


def launch_queues(program) -> Memo:
  """`program`'s launch queues by key (hcq.memo.Memo: started over when a new key finds LAUNCH_QUEUES_KEPT kept)."""
  kept = program.__dict__.get("_launch_queues")
  if kept is None: kept = program.__dict__["_launch_queues"] = Memo(LAUNCH_QUEUES_KEPT)
  return kept


# DEVICE part of a DEV string -> the class that drives it, imported on first use
BACKEND_CLASSES = {"CPU": "hcq.drivers.cpu.device:CPUDevice", "AMD": "hcq.drivers.amd.device:AMDDevice", "NV": "hcq.drivers.nv.device:NVDevice"}


def _backend_class(spec: DevSpec) -> type["Device"]:
  module, _, cls = BACKEND_CLASSES[spec.device].partition(":")
  try:
    return getattr(importlib.import_module(module), cls)
  except ModuleNotFoundError as e:
    if e.name != module and not module.startswith(str(e.name) + "."): raise
    ready = [d for d in BACKEND_CLASSES if _has_module(BACKEND_CLASSES[d].partition(":")[0])]
    raise HCQError(f"the {spec.device} driver is not part of this version of hcq yet; available devices: {', '.join(ready)}") from None


def _has_module(name: str) -> bool:
  try:
    return importlib.util.find_spec(name) is not None
  except ModuleNotFoundError:  # a parent package is missing
    return False


def default_dev_string() -> str:
  """DEV if set; else a real GPU whose driver hcq has; else the CPU."""
  if os.environ.get("DEV"): return os.environ["DEV"]
  probes = [("AMD", "/dev/kfd"), ("NV", "/dev/nvidiactl")]
  for device, node in probes:
    if os.path.exists(node) and _has_module(BACKEND_CLASSES[device].partition(":")[0]): return device
  return "CPU"


class _DeviceOpener(type):
  """`Device(spec)` opens (once) and returns the backend device for a DEV string; subclasses construct normally."""
  _opened: dict[str, "Device"] = {}         # canonical spec -> the open device
  _canonical: dict[DevSpec, DevSpec] = {}   # a spelling -> its canonical spec (resolved once: resolving may probe the machine)
  _lock = threading.Lock()

  def __call__(cls, spec: "str | DevSpec | None" = None, *args: Any, **kwargs: Any):
    if cls is not Device: return super().__call__(spec, *args, **kwargs)
    ds = spec if isinstance(spec, DevSpec) else parse_dev(default_dev_string() if spec is None else spec)
    backend = _backend_class(ds)
    with _DeviceOpener._lock:
      canonical = _DeviceOpener._canonical.get(ds)
      if canonical is None: canonical = _DeviceOpener._canonical[ds] = backend.canonical_spec(ds)
      key = str(canonical)
      if key not in _DeviceOpener._opened: _DeviceOpener._opened[key] = backend(canonical)
      return _DeviceOpener._opened[key]


@dataclass(frozen=True)
class TimestampSlot:
  """Where a queue writes a timestamp, when the signal is chosen at submit time (a symbolic address)."""
  timestamp_addr: Any


class KernargRing:
  """A ring of CPU-visible memory for kernel arguments; space is reused only after the launch that used it is done."""

  def __init__(self, device: "Device", nbytes: int = 1 << 20, align: int = 64):
    self.device, self.buf, self.align, self.pos = device, device.alloc(nbytes, "host"), align, 0
    self._in_use: collections.deque[tuple[int, int, int]] = collections.deque()  # (start, end, timeline value), oldest first
    self._view = memoryview((ctypes.c_uint8 * nbytes).from_address(self.buf.host_addr)).cast("B")

  def write(self, data: bytes | bytearray, timeline_value: int) -> int:
    """Copy `data` into the ring for the launch that will signal `timeline_value`; returns its device address.
    Callers on several threads hold the device's `lock` (the ring's position is shared)."""
    addr = self.reserve(len(data), timeline_value)
    start = addr - self.buf.addr
    self._view[start:start + len(data)] = data
    return addr

  def reserve(self, nbytes: int, timeline_value: int) -> int:
    """Room for `nbytes` in the ring for the launch that will signal `timeline_value` (its device address), for the
    caller to fill through the ring's host memory; as `write`, with the device's lock held."""
    n = max(nbytes, 1)
    if n > self.buf.nbytes: raise HCQError(f"{nbytes} bytes of kernel arguments exceed the kernarg ring ({self.buf.nbytes} bytes)")
    start = (self.pos + self.align - 1) // self.align * self.align
    wrapped = start + n > self.buf.nbytes
    if wrapped: start = 0
    end, wait_for = start + n, 0
    # The oldest regions sit just ahead of the write position: reclaim those we overlap (and, on a wrap, the skipped tail).
    while self._in_use:
      s, e, v = self._in_use[0]
      if not ((wrapped and s >= self.pos) or (s < end and start < e)): break
      wait_for = max(wait_for, v)
      self._in_use.popleft()
    if wait_for: self.device.timeline_signal.wait(wait_for)  # timeline values only grow: this covers every region popped
    self._in_use.append((start, end, timeline_value))
    self.pos = end
    return self.buf.addr + start


class Device(metaclass=_DeviceOpener):
  """Base of every backend device. Opened with `hcq.Device(dev_string)`; see the module docstring."""

  timestamp_frequency: float = 1e9  # timestamp ticks per second
  default_timeout: float = float(os.environ.get("HCQ_TIMEOUT", 30.0))
  # Notified by a device whose engines run in this process after they write a signal (the CPU's): a long wait sleeps
  # on it instead of polling, whose wake-ups cost the kernel's own core time (None: poll)
  signalled: threading.Condition | None = None

  def __init__(self, spec: DevSpec):
    self.spec = spec
    # Held from taking a timeline value to the submission that signals it, and around the signal pool and the kernarg
    # ring: one device is safe to use from several threads. Reentrant: a wait inside may recover the device.
    self.lock = threading.RLock()
    self._taken = threading.local()  # values next_timeline() gave this thread that no submission of its has carried yet
    self._signal_pool: list[Signal] = []
    self._signal_mem: list[Buffer] = []
    self.timeline_signal = self.new_signal(0, name="timeline")
    self.timeline_value = 1  # the value the next submission signals
    self.kernargs = KernargRing(self)
    self.profiling = bool(os.environ.get("HCQ_PROFILE"))
    self.profile_events: list[tuple[str, str, Signal, Signal]] = []  # (kind, name, start, end) until exported

  @classmethod
  def canonical_spec(cls, spec: DevSpec) -> DevSpec:
    """The one spelling of the physical device `spec` names, its defaults resolved: every spelling of a device opens the
    Device of this spec. The renderer is left out (it is how code is made for a device, not a device), and so is an
    interface that has no alternative; backends resolve what they default (AMD: the interface and the arch)."""
    iface = spec.iface if len(BACKENDS[spec.device].ifaces) > 1 else None
    return DevSpec(spec.device, iface, None, spec.arch)

  def __repr__(self) -> str:
    return f"<{type(self).__name__} {self.spec}>"

  def __str__(self) -> str:
    return str(self.spec)

  # ---- memory ----
  def alloc(self, nbytes: int, kind: str = "device") -> Buffer:
    """`nbytes` of memory of a kind in MEMORY_KINDS ("device", "host", "uncached", "cpu")."""
    if kind not in MEMORY_KINDS: raise ValueError(f"unknown memory kind {kind!r}; valid: " + "; ".join(f"{k}: {v}" for k, v in MEMORY_KINDS.items()))
    try:
      n = operator.index(nbytes)  # Python and numpy ints
    except TypeError:
      n = 0
    if n <= 0 or isinstance(nbytes, bool): raise ValueError(f"alloc needs a positive number of bytes, got {nbytes!r}")
    return self._alloc(n, kind)

  def _alloc(self, nbytes: int, kind: str) -> Buffer:
    raise NotImplementedError

  def free(self, buf: Buffer) -> None:
    """Release a buffer once the work queued so far is done."""
    self.synchronize()
    self._free(buf)

  def _free(self, buf: Buffer) -> None:
    raise NotImplementedError

  def copy_from_host(self, dest: Buffer, src: Any) -> None:
    """Host array -> buffer after queued work. CPU-visible memory is written directly; backends override for the rest."""
    self.synchronize()
    if dest.host_addr is None: raise HCQError(f"{self} cannot copy into {dest!r}: not CPU-visible and no copy engine path")
    ctypes.memmove(dest.host_addr, src.ctypes.data, src.nbytes)

  def copy_to_host(self, dest: Any, src: Buffer) -> None:
    """Buffer -> host array after queued work."""
    self.synchronize()
    if src.host_addr is None: raise HCQError(f"{self} cannot copy from {src!r}: not CPU-visible and no copy engine path")
    ctypes.memmove(dest.ctypes.data, src.host_addr, dest.nbytes)

  # ---- signals and the timeline ----
  def new_signal(self, value: int = 0, name: str = "signal") -> Signal:
    """A signal from the device's pool (give it back with `release_signal`)."""
    with self.lock:
      if not self._signal_pool:
        page = self.alloc(4096, "uncached")
        self._signal_mem.append(page)
        self._signal_pool += [Signal(page.offset(off, SIGNAL_BYTES)) for off in range(0, 4096, SIGNAL_BYTES)]
      sig = self._signal_pool.pop()
    sig.reset(name, value)
    return sig

  def release_signal(self, sig: Signal) -> None:
    self._signal_pool.append(sig)  # list.append is atomic

  def next_timeline(self) -> int:
    """Take the timeline value the next submission will signal (`q.signal(dev.timeline_signal, dev.next_timeline())`).
    If this thread's next submission is refused, the device signals the value itself, so later work does not wait on it.
    From several threads use `timeline_submit`, which also keeps the values in submission order."""
    with self.lock:
      v = self.timeline_value
      self.timeline_value += 1
    self._taken.__dict__.setdefault("values", []).append(v)
    return v

  def run_submission(self, hand_over: Callable[..., Any], *args: Any) -> None:
    """Run `hand_over(*args)`, which hands commands to the device: if it raises, signal the timeline values this thread
    took (submit_refused) and re-raise; after it, mark them submitted. Every submission path goes through here."""
    try:
      hand_over(*args)
    except BaseException:
      self.submit_refused()
      raise
    if self._taken.__dict__: self.submitted()  # only a thread that took values with next_timeline() has any

  def submitted(self) -> None:
    """A submission from this thread went in: the values it took with next_timeline() are on their way."""
    self._taken.__dict__.clear()

  def submit_refused(self) -> None:
    """A submission from this thread was refused: signal the timeline values it took, in order, so nothing waits on them."""
    taken = self._taken.__dict__.get("values")
    if not taken: return
    values = sorted(taken)
    taken.clear()
    with self.lock:
      for v in values:
        try:
          self.compute_queue().wait(self.timeline_signal, v - 1).signal(self.timeline_signal, v).submit(self)
        except HCQError:
          return  # the device is stuck (a full ring): the timeout's recovery catches the timeline up

  def timeline_submit(self, q, var_vals: dict[str, int] | None = None) -> int:
    """Submit `q` as the timeline's next step and return the value it signals. `q` waits for the timeline to reach
    Variable("wait") and ends by signalling Variable("signal"); the value is taken only when the submission is in, so a
    refused one (a missing or out-of-range Variable, a queue too large for its ring) leaves nothing unsignalled, and
    values reach the rings in order from any number of threads."""
    with self.lock: return self._submit_next(q, dict(var_vals or ()))

  def _submit_next(self, q, vals: dict[str, int]) -> int:
    """timeline_submit with the lock held; adds "wait" and "signal" to `vals`."""
    v = vals["signal"] = self.timeline_value
    vals["wait"] = v - 1
    q.submit(self, vals)
    self.timeline_value = v + 1
    return v

  def synchronize(self, timeout: float | None = None) -> None:
    """Wait until everything submitted so far is done; raises the device's fault if one happened, and GPUTimeout
    (after resetting the hung queues, so the device stays usable) if the work does not finish in time."""
    self.wait_timeline(self.timeline_value - 1, timeout)
    self.check_faults()

  def wait_timeline(self, value: int, timeout: float | None = None) -> None:
    """Wait for the timeline to reach `value`; a timeout is a hang: recover, then raise."""
    try:
      self.timeline_signal.wait(value, timeout)
    except GPUTimeout:
      with self.lock:  # once: another thread that timed out too may have recovered already
        if self.timeline_signal.value < value: self.recover()
      raise

  def recover(self) -> None:
    """Reset the queues after a hang or fault: pending work is dropped and the timeline caught up."""

  def await_write(self, word: ctypes.c_uint64, value: int, seconds: float) -> None:
    """Sleep on `signalled` until `word` is at least `value`, at most `seconds` (a device whose engines notify it)."""
    with self.signalled: self.signalled.wait_for(lambda: word.value >= value, seconds)

  def check_faults(self) -> None:
    """Raise a pending GPUFault (backends record them from their fault reports); the device stays usable."""

  def queue_state(self) -> str:
    """A line about the queues for timeout messages."""
    return f"timeline at {self.timeline_signal.value}, last submitted {self.timeline_value - 1}"

  # ---- programs and launches ----
  def program(self, code: Any, name: str | None = None, **kwargs: Any):
    """Load a program; what `code` is depends on the backend (a code object for GPUs, LLVM IR for the CPU)."""
    raise NotImplementedError

  def compute_queue(self):
    raise NotImplementedError

  def copy_queue(self):
    raise NotImplementedError

  def launch(self, program, kernargs: bytes | bytearray, global_size: Sequence[int], local_size: Sequence[int], wait: bool) -> float | None:
    """Submit one launch of `program`; with `wait`, block and return the GPU seconds it took.

    The queue for a (program, grid, timed) is built once with its kernarg address, timeline values and timestamp
    slots symbolic, and replayed for every later launch: only the patch slots change."""
    timed = wait or self.profiling
    with self.lock:  # the kernarg ring, the cached queue's patch slots and the value's place in the ring are shared
      q = self._launch_queue(program, tuple(global_size), tuple(local_size), timed)
      start, end = (self.new_signal(name=f"{program.name}.start"), self.new_signal(name=f"{program.name}.end")) if timed else (None, None)
      try:
        vals = {"kernargs": self._place_launch(program, kernargs, end)}
        if timed: vals.update(start=start.timestamp_addr, end=end.timestamp_addr)
        value = self._submit_next(q, vals)
      except BaseException:
        if timed:
          self.release_signal(start)
          self.release_signal(end)
        raise
    if not timed: return None
    if self.profiling: self.profile_events.append(("exec", program.name, start, end))
    if not wait: return None
    self.wait_timeline(value)
    self.check_faults()
    secs = (self._end_timestamp(end, value) - start.timestamp) / self.timestamp_frequency
    if not self.profiling:
      self.release_signal(start)
      self.release_signal(end)
    return secs

  def _place_launch(self, program, kernargs: bytes | bytearray, end) -> int:
    """Place a launch's kernel arguments (with the lock held); returns the address the queue's exec takes."""
    return program.place_kernargs(kernargs, self.timeline_value)

  def _end_timestamp(self, end, value: int) -> int:
    """A finished launch's end timestamp (the timeline has reached `value`)."""
    return end.timestamp

  def _launch_queue(self, program, gs: tuple[int, int, int], ls: tuple[int, int, int], timed: bool):
    def build():
      q = self.compute_queue().wait(self.timeline_signal, Variable("wait"))
      if timed: q.timestamp(TimestampSlot(Variable("start")))
      q.exec(program, Variable("kernargs"), gs, ls)
      if timed: q.timestamp(TimestampSlot(Variable("end")))
      return q.signal(self.timeline_signal, Variable("signal"))
    key = (gs, ls, timed, getattr(self, "scratch_generation", 0))  # device-wide state baked into the packets
    return launch_queues(program).get(key, build)

  def export_trace(self, path: str) -> int:
    """Write the profiled launches and copies as Chrome/Perfetto trace JSON; returns how many events."""
    from hcq.profile import write_trace
    self.synchronize()
    return write_trace(self, path)



class StagedCopies:
  """Host <-> device copies for memory the CPU cannot see: through a CPU-visible staging buffer and the device's copy
  queue, in staging-sized steps, each after everything submitted before it (from any thread). Mixed into a backend
  (before Device) that sets `staging` (a host Buffer) and `_staging_lock` once its queues exist."""
  staging: Buffer
  _staging_lock: threading.Lock

  def upload(self, dest: Buffer, data: bytes) -> None:
    """Bytes into a buffer (through the staging buffer and the copy queue when the CPU cannot see it)."""
    import numpy as np
    self.copy_from_host(dest, np.frombuffer(bytes(data), np.uint8))

  def _staged_copy(self, dest: int, src: int, n: int) -> None:
    """One copy-queue copy as the timeline's next step, and wait for it."""
    q = self.copy_queue().wait(self.timeline_signal, Variable("wait")).copy(dest, src, n).signal(self.timeline_signal, Variable("signal"))
    self.wait_timeline(self.timeline_submit(q))
    self.check_faults()

  def _staged(self, nbytes: int, step) -> None:
    with self._staging_lock:  # one staging buffer: one host<->device copy at a time
      for off in range(0, nbytes, self.staging.nbytes): step(off, min(self.staging.nbytes, nbytes - off))

  def copy_from_host(self, dest: Buffer, src: Any) -> None:
    if dest.host_addr is not None: return super().copy_from_host(dest, src)
    self.synchronize()
    raw = src.reshape(-1).view("uint8")

    def step(off: int, n: int) -> None:
      ctypes.memmove(self.staging.host_addr, raw.ctypes.data + off, n)
      self._staged_copy(dest.addr + off, self.staging.addr, n)
    self._staged(raw.nbytes, step)

  def copy_to_host(self, dest: Any, src: Buffer) -> None:
    if src.host_addr is not None: return super().copy_to_host(dest, src)
    self.synchronize()
    raw = dest.reshape(-1).view("uint8")

    def step(off: int, n: int) -> None:
      self._staged_copy(self.staging.addr, src.addr + off, n)
      ctypes.memmove(raw.ctypes.data + off, self.staging.host_addr, n)
    self._staged(raw.nbytes, step)
