"""CPU programs: LLVM IR compiled for the host with llvmlite's MCJIT, or a ctypes function, run per workgroup."""
from __future__ import annotations
import ctypes
from typing import TYPE_CHECKING, Any, Sequence

from hcq.drivers.cpu.jit import jit_module
from hcq.errors import HCQError
from hcq.program import Program, natural_layout

if TYPE_CHECKING:
  from hcq.drivers.cpu.device import CPUDevice

KERNEL_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, *[ctypes.c_uint32] * 6)


def compile_llvm_ir(ir: str, name: str) -> tuple[Any, int]:
  """Compile LLVM IR for this CPU with the O3 pipeline; returns (what keeps the code alive, the function's address)."""
  engine, mod = jit_module(ir, f"CPU kernel {name!r}")
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
    # ns the compute engine took to run a grid of it, last time (at most hcq.device.LAUNCH_QUEUES_KEPT grids kept)
    self.took: dict[tuple[int, int, int], int] = {}

  def run(self, kernargs: int, global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> None:
    """Every workgroup of the grid, spread over the device's cores: the calling engine thread and the device's workers."""
    self.device.workers.run(self.fn, kernargs, global_size, local_size)
