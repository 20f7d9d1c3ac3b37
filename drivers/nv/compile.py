"""Code for NVIDIA GPUs: PTX through ptxas (the PyPI package nvidia-cuda-nvcc), LLVM IR through llvmlite's NVPTX backend.

Every cubin ptxas makes here is recorded in SASS_RECORDS, keyed by the bytes of each kernel's code: the PTX it came
from, the entry, and what ptxas reported (registers, stack, shared memory). That table stands for the emulated SM's
knowledge of SASS: the emulated GPU runs the PTX of code it finds there and refuses other code (docs/nv.md).
"""
from __future__ import annotations
import hashlib
import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from hcq.drivers.nv.cubin import Cubin, read_cubin
from hcq.errors import HCQError

PTXAS_PACKAGE = "nvidia-cuda-nvcc"


class CompileError(HCQError):
  """ptxas or the NVPTX backend refused the code: the message carries the compiler's own."""


@dataclass(frozen=True)
class SASSRecord:
  """What ptxas made of one kernel: its PTX, the entry, and the resources ptxas gave it."""
  ptx: str
  entry: str
  arch: str
  registers: int
  stack_size: int
  shared_size: int
  param_base: int   # where ptxas's code reads the parameters in constant bank 0
  param_size: int


class _Records:
  """code bytes -> SASSRecord, looked up by (length, sha256) so that a reader of GPU memory tries only known lengths."""

  def __init__(self):
    self._by_len: dict[int, dict[bytes, SASSRecord]] = {}
    self._lock = threading.Lock()

  def add(self, code: bytes, record: SASSRecord) -> None:
    with self._lock: self._by_len.setdefault(len(code), {})[hashlib.sha256(code).digest()] = record

  def lengths(self) -> list[int]:
    return sorted(self._by_len)

  def get(self, code: bytes) -> SASSRecord | None:
    return self._by_len.get(len(code), {}).get(hashlib.sha256(code).digest())


SASS_RECORDS = _Records()


def ptxas_path() -> str:
  """ptxas from the installed nvidia-cuda-nvcc package (cu13/ or cuda_nvcc/ layouts); CompileError naming the package."""
  try:
    import nvidia  # the namespace package of NVIDIA's wheels
  except ImportError:
    nvidia = None
  for root in list(getattr(nvidia, "__path__", [])):
    for sub in sorted(os.listdir(root), reverse=True):
      p = os.path.join(root, sub, "bin", "ptxas")
      if os.access(p, os.X_OK): return p
  raise CompileError(f"ptxas not found: install the PyPI package {PTXAS_PACKAGE} (pip install 'hcq[nv]')")


def compile_ptx(ptx: str, arch: str) -> bytes:
  """A cubin for `arch` ("sm_90") from PTX text; records each kernel in SASS_RECORDS."""
  with tempfile.TemporaryDirectory(prefix="hcq-ptxas-") as d:
    src, out = os.path.join(d, "kernel.ptx"), os.path.join(d, "kernel.cubin")
    with open(src, "w") as f: f.write(ptx)
    r = subprocess.run([ptxas_path(), f"-arch={arch}", src, "-o", out], capture_output=True, text=True)
    if r.returncode: raise CompileError(f"ptxas -arch={arch} refused the PTX:\n{(r.stderr or r.stdout).strip()}")
    with open(out, "rb") as f: cubin = f.read()
  record(read_cubin(cubin), ptx)
  return cubin


def record(cubin: Cubin, ptx: str) -> None:
  """Remember, for each kernel of a cubin ptxas made from `ptx`, which PTX its code runs."""
  for k in cubin.kernels.values():
    SASS_RECORDS.add(k.code, SASSRecord(ptx, k.name, cubin.arch, k.registers, k.stack_size, k.shared_size, k.param_base, k.param_size))


_llvm_lock = threading.Lock()


def llvm_to_ptx(ir: str, arch: str) -> str:
  """PTX from LLVM IR through llvmlite's NVPTX backend (the module's triple should be nvptx64-nvidia-cuda)."""
  import llvmlite.binding as llvm
  with _llvm_lock:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    try:
      mod = llvm.parse_assembly(ir)
      mod.verify()
    except RuntimeError as e:
      raise CompileError(f"invalid LLVM IR: {e}") from None
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    tm = target.create_target_machine(cpu=arch, features="+ptx80" if int(arch[3:]) < 100 else "+ptx86", opt=2)
    mod.triple, mod.data_layout = "nvptx64-nvidia-cuda", str(tm.target_data)
    return tm.emit_assembly(mod)
