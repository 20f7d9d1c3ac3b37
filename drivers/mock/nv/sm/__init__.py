"""The emulated SM: parses PTX and runs kernels vectorised over threads with numpy (see docs/nv.md, "The emulated SM").

    mod = PTXModule.parse(text, name)
    mod.kernels["entry"].params            # [(name, offset, size)] as ptxas lays them out
    mod.launch("entry", mem=vm, grid=(gx, gy, gz), block=(bx, by, bz), params_va=va, shared_bytes=n,
               local_bytes_per_thread=n, trace=None)
"""
from __future__ import annotations
from typing import Callable

import numpy as np

from hcq.asm.emu.memory import VirtualMemory

from .errors import PTXError, SMFault
from .executor import Executor, Launch
from .parser import Kernel, Variable, parse

__all__ = ["PTXModule", "PTXError", "SMFault", "Kernel", "initial_data"]

MAX_BLOCK_THREADS = 1024   # every arch from sm_20 on (CUDA C Programming Guide, "Compute capabilities")


def initial_data(v: Variable, addresses: dict[str, int] | None = None) -> np.ndarray:
  """A module variable's initial bytes from its PTX initialiser (zeros where it has none). An entry that is another
  variable's address ((name, offset): a loader's relocation) takes it from `addresses`; ValueError without one."""
  from .types import VALUE_DTYPE
  data = np.zeros(v.size, np.uint8)
  if v.init:
    init = []
    for x in v.init[: v.count]:
      if isinstance(x, tuple):
        if addresses is None or x[0] not in addresses:
          raise ValueError(f"{v.name}: its initialiser holds the address of {x[0]!r}, which is not placed (a loader relocates those)")
        x = addresses[x[0]] + x[1]
      init.append(x)
    vals = np.array(init).astype(VALUE_DTYPE[v.type] if v.type != "bf16" else np.uint16)
    data[: vals.nbytes] = vals.view(np.uint8)
  return data


class PTXModule:
  """A parsed PTX module: its kernels (.kernels) and module-scope .const data; launch() runs one kernel."""

  def __init__(self, kernels: dict[str, Kernel], variables: dict, header: dict, name: str):
    self.kernels, self.header, self.name = kernels, header, name
    self.target = header.get("target", [""])[0]
    self.globals = {v.name: v for v in variables.values() if v.space == "global"}
    self.const_offsets: dict[str, int] = {}
    off, chunks = 0, []
    for v in variables.values():
      if v.space != "const": continue
      off = (off + v.align - 1) // v.align * v.align
      self.const_offsets[v.name] = off
      chunks.append((off, initial_data(v)))
      off += v.size
    self.const_data = np.zeros(max(off, 1), np.uint8)
    for o, d in chunks: self.const_data[o:o + d.size] = d

  @classmethod
  def parse(cls, text: str, name: str = "<ptx>") -> "PTXModule":
    """Parse PTX text; PTXError "name:line:col: what is wrong, what is valid" for what the SM cannot accept."""
    return cls(*parse(text, name), name)

  def launch(self, entry: str, mem: VirtualMemory, grid: tuple[int, int, int], block: tuple[int, int, int], params_va: int,
             shared_bytes: int = 0, local_bytes_per_thread: int = 0, trace: Callable[[str], None] | None = None,
             variables: dict[str, int] | None = None, const_bank: tuple[int, int] | None = None) -> dict:
    """Run kernel `entry` over grid x block threads; returns counters {"instructions", "lane_ops"}. Kernel parameters
    are read through `mem` at params_va + their offsets; SMFault for what stops the kernel on the GPU. Shared memory
    less than the kernel's static declarations is refused; local memory is not (see below).

    Module variables are where a loader put them: `variables` maps a .global's name to its address and a .const's to
    its offset in the constant bank `const_bank` (address, bytes), which ld.const then reads through `mem` within the
    bank's bytes. Without const_bank the module's own .const data is read (the SM alone, no driver); a .global without
    an address faults where the kernel names it."""
    if entry not in self.kernels:
      raise SMFault("unsupported", None, entry, None, f"no kernel {entry!r} in {self.name} (kernels: {', '.join(self.kernels) or 'none'})")
    k = self.kernels[entry]
    grid, block = tuple(int(x) for x in grid), tuple(int(x) for x in block)
    if len(grid) != 3 or len(block) != 3 or min(grid + block) < 1:
      raise SMFault("resources", None, entry, k.line, f"grid {grid} and block {block} need three dimensions of at least 1")
    nthreads = block[0] * block[1] * block[2]
    if nthreads > MAX_BLOCK_THREADS:
      raise SMFault("resources", None, entry, k.line, f"block {block} has {nthreads} threads; at most {MAX_BLOCK_THREADS}")
    if k.reqntid is not None and tuple(k.reqntid) + (1,) * (3 - len(k.reqntid)) != block:
      raise SMFault("resources", None, entry, k.line, f"block {block} differs from the kernel's .reqntid {k.reqntid}")
    if k.maxntid is not None and nthreads > int(np.prod(k.maxntid)):
      raise SMFault("resources", None, entry, k.line, f"block {block} exceeds the kernel's .maxntid {k.maxntid}")
    if shared_bytes < k.static_shared_bytes:
      raise SMFault("resources", None, entry, k.line, f"the launch gives {shared_bytes} bytes of shared memory per block; the "
                    f"kernel declares {k.static_shared_bytes}")
    # Local memory: ptxas may keep a PTX .local array in registers (ptxas 13.0 -v reports a 0-byte stack frame for a 64-byte
    # depot it promotes), so the QMD's per-thread size is checked by the caller against ptxas's stack size, not here; the
    # SM gives each thread the larger of the two, and an access past that window is SMFault("local").
    # A kernel with real calls (recursion, calls.py) keeps its call stack in the local memory the launch gives each thread,
    # all of it: the SM's own per-thread slots (calls' .param variables, PTX .local) lie below it, not charged to it.
    local_bytes_per_thread = k.local_bytes + int(local_bytes_per_thread) if k.functions else max(int(local_bytes_per_thread), k.local_bytes)
    ex = Executor(self, k, mem, Launch(grid, block, int(params_va), int(shared_bytes), int(local_bytes_per_thread),
                                       dict(variables or {}), const_bank), trace)
    ex.run()
    return {"instructions": ex.steps, "lane_ops": ex.lane_ops}
