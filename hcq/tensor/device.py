"""The device interface the tensor runtime runs kernels through, and its CPU implementation (llvmlite MCJIT).

The runtime uses only this surface, so that `hcq.Device("CPU")` / `hcq.Device("AMD")` from the HCQ core can
replace `CPUJITDevice` later:

  dev.alloc(nbytes) -> Buffer        buf.copyin(np_array), buf.copyout(np_array)  (raw bytes, sizes must match)
  dev.compile(src: str) -> lib       (bytes or an object the device's program() takes; cached by the caller)
  dev.program(name, lib) -> Program  prog(*bufs, global_size=(n,), local_size=None, vals=(), wait=False)
  dev.synchronize()
  dev.renderer                        the Renderer whose source compile() takes

For the CPU, global_size[0] is the extent of the kernel's thread axis (the outermost loop); the range is cut
into one contiguous chunk per thread, each run by the compiled function `void f(ptr..., i64 start, i64 end)`.
ctypes drops the GIL during the call, so the chunks run in parallel. `vals[0]` is the step chunks are cut at
(the loop's unroll and vector step)."""
from __future__ import annotations
import ctypes
import threading
import time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from hcq.tensor.loops import usable_cpus
from hcq.tensor.render_llvm import LLVMCPURenderer, Renderer


class Buffer:
  """Device memory of `nbytes` bytes (on the CPU: a 64-byte aligned host allocation)."""

  def __init__(self, nbytes: int):
    self.nbytes = nbytes
    self._raw = np.empty(nbytes + 64, dtype=np.uint8)
    start = (-self._raw.ctypes.data) % 64
    self.host = self._raw[start:start + nbytes]
    self.address = self.host.ctypes.data

  def copyin(self, src: np.ndarray) -> Buffer:
    """Copy a numpy array's bytes into the buffer."""
    data = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
    if data.nbytes != self.nbytes: raise ValueError(f"copyin of {data.nbytes} bytes into a {self.nbytes}-byte buffer")
    self.host[:] = data
    return self

  def copyout(self, dst: np.ndarray) -> np.ndarray:
    """Copy the buffer's bytes into a contiguous numpy array and return it."""
    view = dst.reshape(-1).view(np.uint8)
    if view.nbytes != self.nbytes: raise ValueError(f"copyout of a {self.nbytes}-byte buffer into {view.nbytes} bytes")
    view[:] = self.host
    return dst

  def __repr__(self) -> str: return f"<Buffer {self.nbytes} bytes at {self.address:#x}>"


class CompiledLibrary:
  """A JIT-compiled module; keeps the execution engine (and so the machine code) alive."""
  def __init__(self, engine, module, seconds: float):
    self.engine, self.module, self.seconds = engine, module, seconds


class _LLVM:
  """llvmlite set up once per process: a target machine for the host CPU (O3 passes) and one MCJIT engine
  that every kernel module is added to (an engine owns its target machine, so they cannot share one)."""
  lock = threading.Lock()
  _ready = None

  @classmethod
  def get(cls):
    with cls.lock:
      if cls._ready is None:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        def machine():
          return llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, codemodel="jitdefault")
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine())
        cls._ready = (llvm, machine(), engine)
      return cls._ready


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
    t0 = time.perf_counter()
    llvm, tm, engine = _LLVM.get()
    try:
      module = llvm.parse_assembly(src)
      module.verify()
    except RuntimeError as e:
      raise RuntimeError(f"generated LLVM IR does not verify: {e}\n{src}") from None
    with _LLVM.lock:
      pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
      pb.getModulePassManager().run(module, pb)
      engine.add_module(module)
      engine.finalize_object()
    return CompiledLibrary(engine, module, time.perf_counter() - t0)

  def program(self, name: str, lib: CompiledLibrary) -> Program: return Program(self, name, lib)

  def synchronize(self) -> None:
    """Kernels run to completion inside their call on the CPU; nothing is in flight."""


_devices: dict[str, CPUJITDevice] = {}


def get_device(name: str = "CPU") -> CPUJITDevice:
  """The device for a DEV-style name. Only the CPU exists in hcq.tensor for now."""
  key = name.upper().split(":")[0]
  if key in ("CPU", "LLVM", "CPU+LLVM"): key = "CPU"
  else: raise ValueError(f"unknown tensor device {name!r}: valid choices are 'CPU' (AMD and NV targets are not built yet)")
  if key not in _devices: _devices[key] = CPUJITDevice()
  return _devices[key]
