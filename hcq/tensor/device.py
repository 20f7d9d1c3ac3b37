"""The device interface the tensor runtime runs kernels through, and two implementations of it.

CPUJITDevice calls kernels compiled by llvmlite's MCJIT directly; HCQDevice runs the same kernels through the HCQ
core's `hcq.Device("CPU")` (its allocator, programs, compute queue and timeline). The runtime uses only this
surface, so `hcq.Device("AMD")` plugs in the same way once the AMD renderer exists:

  dev.alloc(nbytes) -> Buffer        buf.copyin(np_array), buf.copyout(np_array)  (raw bytes from the start)
  dev.compile(src: str) -> lib       (bytes or an object the device's program() takes; cached by the caller)
  dev.program(name, lib) -> Program  prog(*bufs, global_size=(n,), local_size=None, vals=(), wait=False)
  dev.synchronize()
  dev.renderer                        the Renderer whose source compile() takes

For the CPU, global_size[0] is the extent of the kernel's thread axis (the outermost loop); the range is cut
into one contiguous chunk per thread, each run by the compiled function `void f(ptr..., i64 start, i64 end)`.
ctypes drops the GIL during the call, so the chunks run in parallel. `vals[0]` is the step chunks are cut at
(the loop's unroll and vector step).

The rendered source also defines `NAME_hcq`, the kernel ABI of the HCQ core's CPU device (see
render_llvm._KernelWriter.hcq_entry); HCQDevice loads that entry point."""
from __future__ import annotations
import collections
import ctypes
import threading
import time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from hcq.tensor.loops import usable_cpus
from hcq.tensor.render_llvm import LLVMCPURenderer, Renderer


class FreeList:
  """Memory of dropped buffers kept for reuse by size: fresh large allocations cost a page fault per page on first
  touch (30 ms for 64 MB of new mmap), reused ones do not. Holds at most `limit` bytes, oldest dropped first."""

  def __init__(self, limit: int = 1 << 30):
    self.limit, self.held, self.next_token = limit, 0, 0
    self.by_size: dict[int, list[int]] = {}
    self.items: collections.OrderedDict[int, tuple[int, object, object]] = collections.OrderedDict()  # token -> (nbytes, memory, release)
    self.lock = threading.Lock()

  def take(self, nbytes: int):
    """Memory of exactly `nbytes` from a dropped buffer, or None."""
    with self.lock:
      tokens = self.by_size.get(nbytes)
      if not tokens: return None
      _, mem, _ = self.items.pop(tokens.pop())
      self.held -= nbytes
      return mem

  def give(self, nbytes: int, mem, release=None) -> None:
    """Keep `mem` for reuse; `release(mem)` is called for memory pushed out (or too big to keep)."""
    evicted = []
    with self.lock:
      if nbytes > self.limit:
        evicted.append((mem, release))
      else:
        self.next_token += 1
        self.items[self.next_token] = (nbytes, mem, release)
        self.by_size.setdefault(nbytes, []).append(self.next_token)
        self.held += nbytes
        while self.held > self.limit:
          token, (size, old, rel) = self.items.popitem(last=False)
          self.by_size[size].remove(token)
          self.held -= size
          evicted.append((old, rel))
    for old, rel in evicted:
      if rel is not None: rel(old)


_host_free = FreeList()


class Buffer:
  """Device memory of `nbytes` bytes (on the CPU: a 64-byte aligned host allocation, reused after it is dropped)."""

  def __init__(self, nbytes: int):
    self.nbytes = nbytes
    raw = _host_free.take(nbytes)
    self._raw = raw if raw is not None else np.empty(nbytes + 64, dtype=np.uint8)
    start = (-self._raw.ctypes.data) % 64
    self.host = self._raw[start:start + nbytes]
    self.address = self.host.ctypes.data

  def __del__(self):
    try:
      _host_free.give(self.nbytes, self._raw)
    except Exception:  # interpreter shutdown
      pass

  def copyin(self, src: np.ndarray) -> Buffer:
    """Copy a numpy array's bytes into the start of the buffer."""
    data = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
    if data.nbytes > self.nbytes: raise ValueError(f"copyin of {data.nbytes} bytes into a {self.nbytes}-byte buffer")
    self.host[:data.nbytes] = data
    return self

  def copyout(self, dst: np.ndarray) -> np.ndarray:
    """Fill a contiguous numpy array from the start of the buffer and return it."""
    view = dst.reshape(-1).view(np.uint8)
    if view.nbytes > self.nbytes: raise ValueError(f"copyout of {view.nbytes} bytes from a {self.nbytes}-byte buffer")
    view[:] = self.host[:view.nbytes]
    return dst

  def __repr__(self) -> str: return f"<Buffer {self.nbytes} bytes at {self.address:#x}>"


class CompiledLibrary:
  """A JIT-compiled module; keeps the execution engine (and so the machine code) alive."""
  def __init__(self, engine, module, seconds: float):
    self.engine, self.module, self.seconds = engine, module, seconds


class Program:
  """A compiled kernel: call it with buffers; global_size[0] is the thread axis extent (1 when none)."""

  def __init__(self, device: CPUJITDevice, name: str, lib: CompiledLibrary):
    self.device, self.name, self.lib = device, name, lib
    address = lib.engine.get_function_address(name)
    if not address: raise RuntimeError(f"kernel {name} not found in its compiled module")
    self.address = address
    self._fns: dict[int, ctypes._CFuncPtr] = {}

  def _fn(self, nbufs: int):
    if nbufs not in self._fns:
      proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nbufs), ctypes.c_int64, ctypes.c_int64)
      self._fns[nbufs] = proto(self.address)
    return self._fns[nbufs]

  def __call__(self, *bufs: Buffer, global_size=(1,), local_size=None, vals=(), wait: bool = False) -> float | None:
    """Run over [0, global_size[0]); vals[0] (default 1) is the step chunk edges must be multiples of.
    Returns the elapsed seconds when wait=True."""
    fn = self._fn(len(bufs))
    ptrs = [b.address for b in bufs]
    extent = int(global_size[0])
    step = int(vals[0]) if vals else 1
    threads = self.device.threads if extent // step >= 2 else 1
    t0 = time.perf_counter()
    if threads == 1:
      fn(*ptrs, 0, extent)
    else:
      steps = extent // step
      cuts = [(steps * k // threads) * step for k in range(threads)] + [extent]
      futures = [self.device.pool.submit(fn, *ptrs, cuts[k], cuts[k + 1]) for k in range(1, threads)]
      fn(*ptrs, cuts[0], cuts[1])
      for f in futures: f.result()
    return time.perf_counter() - t0 if wait else None


class CPUJITDevice:
  """The host CPU as a device: buffers in host memory, kernels as LLVM IR compiled by llvmlite's MCJIT."""

  def __init__(self, threads: int | None = None):
    self.name = "CPU"
    self.threads = threads or usable_cpus()
    self.pool = ThreadPoolExecutor(max_workers=max(1, self.threads - 1), thread_name_prefix="hcq-cpu")
    self.renderer: Renderer = LLVMCPURenderer()

  def alloc(self, nbytes: int) -> Buffer: return Buffer(nbytes)

  def compile(self, src: str) -> CompiledLibrary:
    """LLVM IR text → machine code in memory (O3, host CPU features)."""
    from hcq.drivers.cpu.jit import jit_module  # the process's one JIT, shared with the core's CPU device
    from hcq.errors import HCQError
    t0 = time.perf_counter()
    try:
      engine, module = jit_module(src, "a generated tensor kernel")
    except HCQError as e:
      raise RuntimeError(f"generated LLVM IR does not verify: {e}\n{src}") from None
    return CompiledLibrary(engine, module, time.perf_counter() - t0)

  def program(self, name: str, lib: CompiledLibrary) -> Program: return Program(self, name, lib)

  def synchronize(self) -> None:
    """Kernels run to completion inside their call on the CPU; nothing is in flight."""


class HCQBuffer:
  """A core hcq Buffer seen through the tensor interface; its memory goes back to the device's free list when the
  tensor lets go of it (reuse is safe: copies and launches run in queue order)."""

  def __init__(self, buf, free_list: FreeList):
    self.buf, self.nbytes, self.address, self.free_list = buf, buf.nbytes, buf.addr, free_list

  def copyin(self, src: np.ndarray) -> HCQBuffer:
    self.buf.copyin(src)
    return self

  def copyout(self, dst: np.ndarray) -> np.ndarray: return self.buf.copyout(dst)

  def __del__(self):
    try:
      self.free_list.give(self.nbytes, self.buf, lambda b: b.free())
    except Exception:  # interpreter shutdown, or the device is gone: nothing to give back to
      pass


class HCQProgram:
  """A kernel loaded through its `NAME_hcq` entry point (the HCQ CPU kernel ABI) and launched on the core device's
  compute queue: the thread axis is cut into one workgroup per chunk, and the core spreads workgroups over cores."""

  def __init__(self, device: HCQDevice, name: str, src: str):
    self.device, self.name, self.src = device, name, src
    self.prog = None

  def __call__(self, *bufs: HCQBuffer, global_size=(1,), local_size=None, vals=(), wait: bool = False) -> float | None:
    if self.prog is None:  # the argument count is known at the first launch
      self.prog = self.device.core.program(self.src, name=f"{self.name}_hcq", args=["buffer"] * len(bufs) + ["i64", "i64"])
    extent = max(int(global_size[0]), 1)
    step = int(vals[0]) if vals else 1
    chunks = self.device.threads if extent // step >= self.device.threads else 1
    chunk = -(-extent // (chunks * step)) * step
    return self.prog(*[b.buf for b in bufs], global_size=(-(-extent // chunk), 1, 1), local_size=(1, 1, 1),
                     vals=(chunk, extent), wait=wait)


class HCQDevice:
  """The tensor device interface on an HCQ core device, `hcq.Device("CPU")`: memory from its allocator, kernels
  loaded as its programs and launched on its compute queue, ordered by its timeline signal. Same kernels as
  CPUJITDevice (the renderer emits both entry points); the launch goes through the HCQ queue path."""

  def __init__(self, spec: str = "CPU"):
    import hcq  # the core is the layer below; imported only when this device is asked for
    self.core = hcq.Device(spec)
    if str(spec).upper().split(":")[0].split("+")[-1] != "CPU":
      raise ValueError(f"tensor kernels render only for the CPU so far; {spec!r} needs the AMD/NV renderers (issue 7)")
    self.name = f"HCQ:{spec}"
    self.threads = usable_cpus()
    self.free_list = FreeList()
    self.renderer: Renderer = LLVMCPURenderer()

  def alloc(self, nbytes: int) -> HCQBuffer:
    buf = self.free_list.take(nbytes)
    return HCQBuffer(buf if buf is not None else self.core.alloc(nbytes), self.free_list)
  def compile(self, src: str) -> str: return src  # the core compiles when it loads the program
  def program(self, name: str, lib: str) -> HCQProgram: return HCQProgram(self, name, lib)
  def synchronize(self) -> None: self.core.synchronize()


_devices: dict[str, CPUJITDevice | HCQDevice] = {}


def get_device(name: str = "CPU") -> CPUJITDevice | HCQDevice:
  """The device for a name: "CPU" (or "CPU:LLVM") runs kernels straight from the JIT; "HCQ:CPU" runs the same
  kernels through hcq.Device("CPU")'s queues and timeline."""
  upper = name.upper()
  if upper in ("CPU", "CPU:LLVM", "LLVM"): key = "CPU"
  elif upper in ("HCQ:CPU", "HCQ:CPU:LLVM"): key = "HCQ:CPU"
  else:
    raise ValueError(f"unknown tensor device {name!r}: valid choices are 'CPU' and 'HCQ:CPU' (the AMD and NV renderers "
                     f"are not built yet)")
  if key not in _devices: _devices[key] = CPUJITDevice() if key == "CPU" else HCQDevice("CPU")
  return _devices[key]
