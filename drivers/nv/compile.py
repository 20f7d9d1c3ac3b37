"""Code for NVIDIA GPUs: PTX through ptxas (the PyPI package nvidia-cuda-nvcc), LLVM IR through llvmlite's NVPTX backend,
CUDA C++ through NVRTC (the PyPI package nvidia-cuda-nvrtc, loaded with ctypes) to PTX.

Every cubin ptxas makes here is recorded in SASS_RECORDS, keyed by the bytes of each kernel's code: the PTX it came
from, the entry, and what ptxas reported (registers, stack, shared memory). That table stands for the emulated SM's
knowledge of SASS: the emulated GPU runs the PTX of code it finds there and refuses other code (docs/nv.md).
"""
from __future__ import annotations
import ctypes
import hashlib
import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from hcq.drivers.codegen import codegen
from hcq.drivers.nv.cubin import Cubin, bank_number, read_cubin
from hcq.errors import HCQError

PTXAS_PACKAGE, NVRTC_PACKAGE = "nvidia-cuda-nvcc", "nvidia-cuda-nvrtc"


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
  barriers: int     # named barriers the code uses (EIATTR_NUM_BARRIERS)
  banks: tuple[tuple[int, int], ...] = ()  # (bank, bytes) of the constant banks besides 0 the code reads (.nv.constant<N>)
  const_variables: tuple[tuple[str, int, int], ...] = ()  # (name, bank, offset) of the module's .const variables
  global_slots: tuple[tuple[str, int, int, int], ...] = ()  # (name, bank, offset, addend): where the code reads a .global's address


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


def _nvidia_file(*parts: str) -> str | None:
  """A file of NVIDIA's PyPI packages (namespace package `nvidia`, cu13/ or cuda_*/ layouts), newest first."""
  try:
    import nvidia  # the namespace package of NVIDIA's wheels
  except ImportError:
    return None
  for root in list(getattr(nvidia, "__path__", [])):
    for sub in sorted(os.listdir(root), reverse=True):
      p = os.path.join(root, sub, *parts)
      if os.path.exists(p): return p
  return None


def ptxas_path() -> str:
  """ptxas from the installed nvidia-cuda-nvcc package; CompileError naming the package when it is not there."""
  p = _nvidia_file("bin", "ptxas")
  if p is None or not os.access(p, os.X_OK): raise CompileError(f"ptxas not found: install the PyPI package {PTXAS_PACKAGE} (pip install 'hcq[nv]')")
  return p


def cuda_to_ptx(source: str, arch: str) -> str:
  """PTX from CUDA C++ with NVRTC (-arch=compute_XX of `arch`). Kernels keep C++ names unless declared extern "C"."""
  lib = next((p for name in ("libnvrtc.so.13", "libnvrtc.so.12") if (p := _nvidia_file("lib", name))), None)
  if lib is None: raise CompileError(f"NVRTC not found: install the PyPI package {NVRTC_PACKAGE} (pip install 'hcq[nv]')")
  nvrtc = ctypes.CDLL(lib)
  nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
  prog = ctypes.c_void_p()

  def check(status: int, what: str) -> None:
    if status: raise CompileError(f"NVRTC {what}: {nvrtc.nvrtcGetErrorString(status).decode()}")
  check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None), "nvrtcCreateProgram")
  try:
    opts = (ctypes.c_char_p * 1)(f"--gpu-architecture=compute_{arch[3:]}".encode())
    status = nvrtc.nvrtcCompileProgram(prog, 1, opts)
    if status:
      size = ctypes.c_size_t()
      nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
      log = ctypes.create_string_buffer(size.value)
      nvrtc.nvrtcGetProgramLog(prog, log)
      raise CompileError(f"NVRTC refused the CUDA C++:\n{log.value.decode(errors='replace').strip()}")
    size = ctypes.c_size_t()
    check(nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
    ptx = ctypes.create_string_buffer(size.value)
    check(nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
    return ptx.value.decode()
  finally:
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))


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
  """Remember, for each kernel of a cubin ptxas made from `ptx`, which PTX its code runs, and where its code finds the
  module's variables: a .const one in its constant bank (.nv.constant3), a .global one's address in the constant-bank
  word ptxas relocates to it (R_CUDA_64 against .nv.constant4), so the emulated SM reads them where the driver put them."""
  for k in cubin.kernels.values():
    consts = tuple((v.name, bank_number(v.section), v.offset) for v in k.variables.values() if v.section.startswith(".nv.constant"))
    slots = tuple((r.symbol, bank_number(r.target), r.offset, r.addend or 0) for r in k.relocations
                  if r.type_name == "R_CUDA_64" and r.target.startswith(".nv.constant") and r.symbol in k.variables
                  and k.variables[r.symbol].section.startswith(".nv.global"))
    SASS_RECORDS.add(k.code, SASSRecord(ptx, k.name, cubin.arch, k.registers, k.stack_size, k.shared_size, k.param_base, k.param_size, k.barriers,
                                         tuple((i, len(d)) for i, d in sorted(k.constant_banks.items()) if i), consts, slots))


def ptx_features(arch: str) -> str:
  """llvmlite's NVPTX target features for `arch`: the PTX ISA version the emitted PTX declares (what ptxas 13 takes)."""
  return "+ptx80" if int(arch[3:]) < 100 else "+ptx86"


def llvm_to_ptx(ir: str, arch: str) -> str:
  """PTX from LLVM IR through llvmlite's NVPTX backend (the module's triple should be nvptx64-nvidia-cuda)."""
  import llvmlite.binding as llvm
  with codegen(llvm):
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    try:
      mod = llvm.parse_assembly(ir)
      mod.verify()
    except RuntimeError as e:
      raise CompileError(f"invalid LLVM IR: {e}") from None
    target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
    tm = target.create_target_machine(cpu=arch, features=ptx_features(arch), opt=2)
    mod.triple, mod.data_layout = "nvptx64-nvidia-cuda", str(tm.target_data)
    return tm.emit_assembly(mod)
