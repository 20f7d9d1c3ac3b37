"""The tensor runtime's one device: an HCQ core device (`hcq.Device(DEV string)`) seen through a small interface.

Memory comes from the core's allocator, kernels are loaded as its programs and launched on its compute queue, ordered
by its timeline signal, for the CPU (`hcq.Device("CPU")`), AMD GPUs (`hcq.Device("AMD")`, the emulated gfx1100
`MOCKKFD+AMD` on machines without one) and NVIDIA GPUs (`hcq.Device("NV")`, the emulated H200 `MOCKNV+NV`) alike. The runtime uses only this surface:

  dev.alloc(nbytes) -> HCQBuffer             buf.copyin(np_array), buf.copyout(np_array)  (raw bytes from the start)
  dev.renderer                               the Renderer for the device's target (source + launch dimensions)
  dev.compile(src) -> lib                    (what the core's program() loads; cached by the caller per AST)
  dev.program(name, lib, nbufs, workspace)   -> kernel(*bufs, global_size=, local_size=, vals=, wait=False)
                                             (workspace: bytes a workgroup is given beside the buffers, the renderer's)
  dev.synchronize()

On the CPU, global_size[0] is the extent of the kernel's thread axis (its outermost loop) and vals[0] its loop step:
the kernel cuts the range into one workgroup per core, each a whole number of steps, and the core device runs the
workgroups on its cores. The rendered function for that is `NAME_hcq`, the CPU device's kernel ABI (see
render_llvm._KernelWriter.hcq_entry). On AMD and NV the renderer's launch dimensions go to the code object's (the
cubin's) kernel as is."""
from __future__ import annotations
import collections
import dataclasses
import os
import threading
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


class HCQBuffer:
  """A core hcq Buffer seen through the tensor interface; its memory goes back to the device's free list when the
  tensor lets go of it (reuse is safe: copies and launches run in queue order)."""

  def __init__(self, buf, free_list: FreeList):
    self.buf, self.nbytes, self.address, self.free_list = buf, buf.nbytes, buf.addr, free_list

  def copyin(self, src: np.ndarray) -> HCQBuffer:
    self.buf.copyin(src)
    return self

  def copyout(self, dst: np.ndarray) -> np.ndarray: return self.buf.copyout(dst)

  def __repr__(self) -> str: return f"<tensor buffer {self.buf!r}>"

  def __del__(self):
    try:
      self.free_list.give(self.nbytes, self.buf, lambda b: b.free())
    except Exception:  # interpreter shutdown, or the device is gone: nothing to give back to
      pass


class CPUKernel:
  """A kernel on the core's CPU device, loaded through its `NAME_hcq` entry point (kernargs: the buffers, the
  workspace when it has one, then i64 chunk and i64 extent): the thread axis is cut into one workgroup per core, each a
  whole number of loop steps, each with `workspace` bytes of the device's workspace buffer."""

  def __init__(self, device: HCQDevice, name: str, src: str, nbufs: int, workspace: int = 0):
    self.device, self.name, self.workspace = device, name, workspace
    self.prog = device.core.program(src, name=f"{name}_hcq", args=["buffer"] * (nbufs + (1 if workspace else 0)) + ["i64", "i64"])

  def __call__(self, *bufs: HCQBuffer, global_size=(1,), local_size=None, vals=(), wait: bool = False) -> float | None:
    extent = max(int(global_size[0]), 1)
    step = int(vals[0]) if vals else 1
    chunks = self.device.threads if extent // step >= self.device.threads else 1
    chunk = -(-extent // (chunks * step)) * step
    groups = -(-extent // chunk)
    core_bufs = [b.buf for b in bufs] + ([self.device.workspace(groups * self.workspace)] if self.workspace else [])
    return self.prog(*core_bufs, global_size=groups, local_size=1, vals=(chunk, extent), wait=wait)


class GPUKernel:
  """A kernel of a code object (AMD) or PTX (NV) on a GPU core device, launched with the renderer's grid as it is."""

  def __init__(self, device: HCQDevice, name: str, code_object: bytes, nbufs: int):
    self.device, self.name = device, name
    self.prog = device.core.program(code_object, name)

  def __call__(self, *bufs: HCQBuffer, global_size=(1,), local_size=None, vals=(), wait: bool = False) -> float | None:
    return self.prog(*[b.buf for b in bufs], global_size=tuple(global_size), local_size=tuple(local_size or (1,)),
                     vals=tuple(vals), wait=wait)


class HCQDevice:
  """The tensor device interface on an HCQ core device (see the module docstring). `spec` is an hcq DEV string whose
  device is CPU, AMD or NV."""

  def __init__(self, spec):
    import hcq  # the core is the layer below; opened when a tensor first needs the device
    self.core = hcq.Device(spec)
    self.kind = self.core.spec.device
    from hcq.devstring import parse_dev
    self.name = device_name(parse_dev(spec))  # as asked: the core's spec is canonical (MOCKKFD+AMD::gfx1100 for AMD)
    self.threads = usable_cpus()
    self.free_list = FreeList()
    self._workspaces: list = []   # core buffers, the last the one in use (workspace())
    self._workspace_lock = threading.Lock()
    if self.kind == "CPU":
      self.renderer: Renderer = LLVMCPURenderer()
      self.memory = "host"
      # LLVM's set-up (loading llvmlite's library, the host's target machine: 25-40 ms once per process) belongs to
      # opening the device, not to the first kernel's compile time
      from hcq.drivers.cpu.jit import host_jit
      host_jit()
    elif self.kind == "NV":
      from hcq.tensor.render_nv import NVPTXRenderer
      self.renderer = NVPTXRenderer(self.core.arch.sm)
      self.memory = "device"
    else:
      from hcq.tensor.render_amd import AMDGCNRenderer
      self.renderer = AMDGCNRenderer(self.core.arch)
      self.memory = "device"

  def __repr__(self) -> str: return f"<tensor device {self.name}: {self.core!r}>"

  def alloc(self, nbytes: int) -> HCQBuffer:
    buf = self.free_list.take(nbytes)
    return HCQBuffer(buf if buf is not None else self.core.alloc(nbytes, self.memory), self.free_list)

  def compile(self, src: str):
    """Source -> what the core loads: LLVM IR as it is on the CPU (the core's JIT compiles it), a code object on AMD, PTX
    on NV (the NV program path runs ptxas)."""
    return src if self.kind == "CPU" else self.renderer.compile(src)

  def program(self, name: str, lib, nbufs: int, workspace: int = 0) -> CPUKernel | GPUKernel:
    if self.kind == "CPU": return CPUKernel(self, name, lib, nbufs, workspace)
    if workspace: raise ValueError(f"{name}: a GPU kernel has no workspace")   # no GPU renderer asks for one
    return GPUKernel(self, name, lib, nbufs)

  def workspace(self, nbytes: int):
    """A core buffer of at least `nbytes` that kernels use as their workgroups' workspace. One buffer serves every
    kernel, since the device's compute engine runs one grid at a time; a larger need gets a larger buffer (twice the
    old at least) and the old one is kept, since a launch already queued may still use it (at most as much again)."""
    with self._workspace_lock:
      if self._workspaces and self._workspaces[-1].nbytes >= nbytes: return self._workspaces[-1]
      grown = self.core.alloc(max(nbytes, 2 * self._workspaces[-1].nbytes if self._workspaces else 0), self.memory)
      self._workspaces.append(grown)
      return grown

  def synchronize(self) -> None: self.core.synchronize()


def device_name(spec) -> str:
  """The tensor device name of a parsed DEV string: the string without the renderer (the tensor compiler picks it per
  device: LLVM for both), so `CPU` and `CPU:LLVM` are one device, `MOCKKFD+AMD::gfx1100` and `MOCKKFD+AMD` two; the
  device index and partition mode stay (`MOCKKFD+AMD:3::gfx942:CPX`)."""
  return str(dataclasses.replace(spec, renderer=None))


def default_device() -> str:
  """DEV if set; else a real AMD GPU when /dev/kfd and a GPU node in the KFD topology exist (the AMD driver's own probe,
  which reads sysfs only); else a real NVIDIA GPU when /dev/nvidiactl exists (the NV driver's probe, as hcq.Device's
  default); else the CPU. With both, AMD comes first, as in hcq.Device's default."""
  if os.environ.get("DEV"): return os.environ["DEV"]
  if os.path.exists("/dev/kfd"):
    try:
      from hcq.drivers.amd.kfd import gpu_nodes
      from hcq.drivers.os import HostOS
      if gpu_nodes(HostOS()): return "KFD+AMD"
    except Exception:  # an unreadable topology is no GPU
      pass
  if os.path.exists("/dev/nvidiactl"): return "NV+NV"
  return "CPU"


TENSOR_DEVICES = "CPU, AMD, KFD+AMD, MOCKKFD+AMD, NV, NV+NV, MOCKNV+NV"
_devices: dict[str, HCQDevice] = {}
_by_text: dict[str, HCQDevice] = {}  # each DEV string asked for, as written: every op asks (parsing it costs ~8 us)
_lock = threading.Lock()


def get_device(name: str | None = None) -> HCQDevice:
  """The tensor device for a DEV string (`CPU`, `AMD`, `MOCKKFD+AMD`, `KFD+AMD::gfx1100`, `NV`, `MOCKNV+NV`, ...; None:
  default_device()).
  Bad strings raise hcq.DevStringError listing the valid parts; renderers other than LLVM are refused."""
  if name is not None and (known := _by_text.get(name)) is not None: return known
  from hcq.devstring import parse_dev
  from hcq.errors import DevStringError
  text = default_device() if name is None else name
  try:
    spec = parse_dev(text)
  except DevStringError as e:
    raise DevStringError(f"{e} (tensor devices: {TENSOR_DEVICES})") from None
  if spec.renderer not in (None, "LLVM"):
    raise DevStringError(f"tensor kernels render through LLVM only; {text!r} asks for the {spec.renderer} renderer (use "
                         f"{device_name(spec)})")
  key = device_name(spec)
  with _lock:
    if key not in _devices: _devices[key] = HCQDevice(key)
    if name is not None: _by_text[name] = _devices[key]
    return _devices[key]
