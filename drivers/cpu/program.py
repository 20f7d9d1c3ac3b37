"""CPU programs: LLVM IR compiled for the host with llvmlite's MCJIT, or a ctypes function, run per workgroup."""
from __future__ import annotations
import ctypes
import threading
from typing import TYPE_CHECKING, Any, Sequence

from hcq.errors import HCQError
from hcq.program import Program, natural_layout

if TYPE_CHECKING:
  from hcq.drivers.cpu.device import CPUDevice

KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, *[ctypes.c_uint32] * 6)


class _JIT:
  """llvmlite set up once per process: the host's target machine for O3 passes, and one MCJIT engine every program's
  module is added to (machine code lives as long as the engine; an engine owns its own target machine)."""
  lock = threading.Lock()
  ready = None
  names: set[str] = set()  # functions in the shared engine: a second module defining one gets an engine of its own

  @classmethod
  def get(cls):
    with cls.lock:
      if cls.ready is None:
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()

        def machine():
          return llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, codemodel="jitdefault")
        cls.ready = (llvm, machine(), llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine()))
      return cls.ready


def compile_llvm_ir(ir: str, name: str) -> tuple[Any, int]:
  """Compile LLVM IR for this CPU with the O3 pipeline; returns (what keeps the code alive, the function's address)."""
  try:
    llvm, tm, engine = _JIT.get()
  except ImportError as e:
    raise HCQError("compiling LLVM IR for the CPU needs llvmlite: pip install llvmlite (or pip install -e '.[compile]')") from e
  try:
    mod = llvm.parse_assembly(ir)
    mod.verify()
  except RuntimeError as e:
    raise HCQError(f"invalid LLVM IR for CPU kernel {name!r}: {e}") from None
  with _JIT.lock:
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    defined = {f.name for f in mod.functions if not f.is_declaration}
    if defined & _JIT.names:
      engine = llvm.create_mcjit_compiler(mod, llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, codemodel="jitdefault"))
    else:
      engine.add_module(mod)
      _JIT.names |= defined
    engine.finalize_object()
    addr = engine.get_function_address(name)
  if not addr: raise HCQError(f"LLVM IR defines no function {name!r}")
  return (engine, mod), addr


class CPUProgram(Program):
  """A native kernel with the CPU kernel signature (see hcq.drivers.cpu.device)."""

  def __init__(self, device: "CPUDevice", code: Any, name: str | None, args: Sequence[str], arg_names: Sequence[str] | None):
    if isinstance(code, str):
      if name is None: raise HCQError("a CPU program from LLVM IR needs the kernel's name")
      self._owner, addr = compile_llvm_ir(code, name)
      self.fn = KERNEL_TYPE(addr)
    elif isinstance(code, ctypes._CFuncPtr):
      self._owner, self.fn = code, ctypes.cast(code, KERNEL_TYPE)
      name = name or getattr(code, "__name__", "kernel")
    else:
      raise HCQError(f"a CPU program is LLVM IR text or a ctypes function, got {type(code).__name__}")
    super().__init__(device, name, natural_layout(list(args), arg_names))

  def run(self, kernargs: int, global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> None:
    """Every workgroup of the grid, spread over the device's cores (on the calling engine thread when there is one)."""
    gx, gy, gz = global_size
    total = gx * gy * gz
    fn, ls = self.fn, local_size

    def span(lo: int, hi: int) -> None:
      for i in range(lo, hi): fn(kernargs, i % gx, i // gx % gy, i // (gx * gy), *ls)

    workers = min(self.device.cores, total)
    if workers <= 1: return span(0, total)
    bounds = [total * k // workers for k in range(workers + 1)]
    for f in [self.device.pool.submit(span, bounds[k], bounds[k + 1]) for k in range(workers)]: f.result()
