"""Helpers for the emulated SM's tests and bench: LLVM IR -> PTX (llvmlite's NVPTX backend), the same IR JIT-compiled
for the host (llvmlite MCJIT), CUDA C++ -> PTX (clang-19 --cuda-device-only), and a launch on the SM with buffers
mapped in a VirtualMemory and the parameters written where a QMD's constant bank would hold them."""
from __future__ import annotations
import ctypes
import os
import subprocess
import tempfile
from functools import lru_cache

import numpy as np

from hcq.asm.emu.memory import VirtualMemory
from hcq.drivers.mock.nv.sm import initial_data

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "nv_sm_corpus")
PARAMS_VA = 0x7f00_0000
BUF_VA = 0x1_0000_0000


@lru_cache(maxsize=1)
def _llvm():
  from tests.tools import require_module
  llvm = require_module("llvmlite.binding")
  llvm.initialize_all_targets()
  llvm.initialize_all_asmprinters()
  try: llvm.initialize_native_target(); llvm.initialize_native_asmprinter()
  except Exception: pass
  return llvm


def ir_to_ptx(ir: str, arch: str = "sm_80") -> str:
  """LLVM IR (an nvptx64 module) -> PTX text, as the NVPTX backend at -O2 emits it."""
  llvm = _llvm()
  m = llvm.parse_assembly(ir)
  m.verify()
  tm = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(cpu=arch, opt=2)
  return tm.emit_assembly(m)


class HostJIT:
  """The same IR compiled for this CPU; `fn(name, restype, *argtypes)` gives a ctypes function."""

  def __init__(self, ir: str):
    llvm = _llvm()
    self.mod = llvm.parse_assembly(ir)
    self.mod.verify()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
    self.engine = llvm.create_mcjit_compiler(self.mod, tm)
    self.engine.finalize_object()

  def fn(self, name: str, restype, *argtypes):
    return ctypes.CFUNCTYPE(restype, *argtypes)(self.engine.get_function_address(name))


@lru_cache(maxsize=8)
def cuda_to_ptx(src: str, arch: str = "sm_80") -> str:
  """CUDA C++ -> PTX with clang-19 (no CUDA SDK here: cuda_prelude.h declares what the kernels use)."""
  from tests.tools import require_tool
  clang = require_tool("clang-19")
  with tempfile.TemporaryDirectory() as d:
    cu, ptx = os.path.join(d, "k.cu"), os.path.join(d, "k.ptx")
    open(cu, "w").write(src)
    subprocess.run([clang, "--cuda-device-only", "-nocudainc", "-nocudalib", f"--cuda-gpu-arch={arch}", "-O2", "-S",
                    "-Wno-unknown-cuda-version", "-include", os.path.join(CORPUS, "cuda_prelude.h"), "-x", "cuda", cu, "-o", ptx],
                   check=True, capture_output=True)
    return open(ptx).read()


def launch(mod, name: str, args: list, grid, block, shared_bytes: int | None = None, local_bytes: int | None = None, trace=None) -> dict:
  """Run kernel `name` with args: numpy arrays become global buffers (mapped at their own VAs, passed as pointers),
  numpy scalars are passed by value; the parameters are packed at the offsets the kernel declares. The module's .global
  variables get fresh memory with their initial values."""
  k = mod.kernels[name]
  vm, va = VirtualMemory(), BUF_VA
  pbuf = np.zeros(4096, np.uint8)
  if len(args) != len(k.params): raise ValueError(f"{name} takes {len(k.params)} parameters, got {len(args)}")
  for (pname, off, size), x in zip(k.params, args):
    if isinstance(x, np.ndarray):
      vm.map(va, max(x.nbytes, 1), x.reshape(-1).view(np.uint8) if x.nbytes else np.zeros(1, np.uint8))
      raw = np.uint64(va).tobytes()
      va += (x.nbytes + 0xffff) & ~0xffff
    else: raw = np.asarray(x).tobytes()
    if len(raw) != size: raise ValueError(f"{name}: parameter {pname} is {size} bytes, the value given is {len(raw)}")
    pbuf[off:off + size] = np.frombuffer(raw, np.uint8)
  vm.map(PARAMS_VA, pbuf.size, pbuf)
  variables = {}
  for v in mod.globals.values():   # the module's .global variables, placed as a loader would (fresh for each launch)
    variables[v.name], va = va, va + ((v.size + 0xffff) & ~0xffff)
  for v in mod.globals.values():   # then filled: an initialiser may hold another variable's address
    vm.map(variables[v.name], max(v.size, 1), initial_data(v, variables) if v.size else np.zeros(1, np.uint8))
  grid = tuple(grid) + (1,) * (3 - len(grid))
  block = tuple(block) + (1,) * (3 - len(block))
  return mod.launch(name, vm, grid, block, params_va=PARAMS_VA, shared_bytes=k.static_shared_bytes if shared_bytes is None else shared_bytes,
                    local_bytes_per_thread=k.local_bytes if local_bytes is None else local_bytes, trace=trace, variables=variables)
