"""A tensor device that runs the AMD renderer's code objects on the wavefront emulator directly (hcq.asm.emu.run), with
no driver or emulated board in between: how the tensor tests check an arch whose `MOCKKFD+AMD::<arch>` board does not
exist yet (gfx942). It implements the tensor device interface (hcq.tensor.device's module docstring) over host numpy
memory; each launch copies its buffers into the emulator's memory and back, as run() does."""
from __future__ import annotations
import numpy as np
from hcq.tensor.device import FreeList, HCQBuffer
from hcq.tensor.render_amd import AMDGCNRenderer


PAGE = 4096


class HostMemory:
  """`nbytes` of host memory standing in for a device buffer (the core Buffer's copyin/copyout/free), whole pages as the
  AMD driver maps them: LLVM may widen a load within the buffers' 16-byte alignment (gfx942 has no s_load_dwordx3, so
  12 bytes are read as 16), which the GPU allows and an exact-size mapping would fault."""

  def __init__(self, nbytes: int):
    self.data, self.nbytes, self.addr = np.zeros(-(-max(nbytes, 1) // PAGE) * PAGE, np.uint8), nbytes, 0

  def copyin(self, arr: np.ndarray) -> HostMemory:
    raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    self.data[:raw.size] = raw
    return self

  def copyout(self, arr: np.ndarray) -> np.ndarray:
    raw = arr.reshape(-1).view(np.uint8)
    raw[:] = self.data[:raw.size]
    return arr

  def free(self) -> None: pass


class EmulatorKernel:
  """One kernel of a code object, launched with hcq.asm.emu.run (interleaving waves as HCQ_EMU_INTERLEAVE says)."""

  def __init__(self, device: EmulatorTensorDevice, name: str, code_object: bytes):
    from hcq.asm.codeobject import read_code_object
    self.device, self.name, self.code_object = device, name, read_code_object(code_object)
    self.wavefront_size = self.code_object.kernels[name].wavefront_size

  def __call__(self, *bufs: HCQBuffer, global_size=(1,), local_size=None, vals=(), wait: bool = False) -> None:
    from hcq.asm.emu import run
    mems = [b.buf for b in bufs]
    # run() copies each array in and back on its own: one buffer passed twice would be two copies, not one memory
    if len({id(m) for m in mems}) != len(mems): raise NotImplementedError(f"{self.name}: a buffer passed twice (aliased)")
    run(self.code_object, [m.data for m in mems] + list(vals), global_size=tuple(global_size),
        local_size=tuple(local_size or (1,)), kernel=self.name)


class EmulatorTensorDevice:
  """The tensor device interface for `arch` on the wavefront emulator alone (see the module docstring). `name` is the
  DEV string it stands in for (MOCKKFD+AMD::<arch>)."""
  kind, memory = "AMD", "device"

  def __init__(self, arch: str, wave_size: int | None = None):
    self.name = f"MOCKKFD+AMD::{arch}"
    self.renderer = AMDGCNRenderer(arch, wave_size)
    self.free_list = FreeList()

  def __repr__(self) -> str: return f"<tensor device {self.name} on the wavefront emulator alone>"

  def alloc(self, nbytes: int) -> HCQBuffer:
    mem = self.free_list.take(nbytes)
    return HCQBuffer(mem if mem is not None else HostMemory(nbytes), self.free_list)

  def compile(self, src: str) -> bytes: return self.renderer.compile(src)

  def program(self, name: str, lib: bytes, nbufs: int) -> EmulatorKernel: return EmulatorKernel(self, name, lib)

  def synchronize(self) -> None: pass
