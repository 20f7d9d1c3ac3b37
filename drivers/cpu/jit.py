"""The process's LLVM JIT for the host CPU (llvmlite MCJIT), shared by every CPU program and by hcq.tensor's kernels."""
from __future__ import annotations
from typing import Any

from hcq.drivers.codegen import LOCK, codegen
from hcq.errors import HCQError

_ready: tuple | None = None
# IR written in the shape it runs (phis, no allocas, loops unrolled by hand, pointers stepped as the machine code steps
# them) says so on its first line: the O3 pipeline and loop strength reduction would only cost compile time
# (instruction selection at O3 still runs: addressing modes, scheduling, registers)
CODEGEN_ONLY = "; hcq: codegen only"
# IR whose loop counters and accumulators are allocas but whose vectors and unrolled copies are written out by hand
# (hcq.tensor's generic CPU kernels with SIMD lanes) says so on its first line: it needs its allocas in registers and a
# clean-up, not O3's loop, inlining and vectorising passes. About half the compile time, the same speed (docs/tensor.md
# round 8)
CLEANUP_ONLY = "; hcq: clean-up passes only"
_names: set[str] = set()  # functions in the shared engine: a second module defining one gets an engine of its own


def _machine(llvm):
  return llvm.Target.from_default_triple().create_target_machine(
    cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, codemodel="jitdefault")


def host_jit() -> tuple[Any, Any, Any]:
  """(llvmlite.binding, a target machine for O3 passes, the shared MCJIT engine), set up once per process. An engine owns
  its target machine, so the passes get one of their own."""
  global _ready
  with LOCK:   # its parse and engine live in LLVM's global context, as every compile's do
    if _ready is None:
      try:
        import llvmlite.binding as llvm
      except ImportError as e:
        raise HCQError("compiling LLVM IR for the CPU needs llvmlite: pip install llvmlite (or pip install -e '.[compile]')") from e
      llvm.initialize_native_target()
      llvm.initialize_native_asmprinter()
      _ready = (llvm, _machine(llvm), llvm.create_mcjit_compiler(llvm.parse_assembly(""), _machine(llvm)))
    return _ready


def _clean_up(llvm, mod, pb) -> None:
  """CLEANUP_ONLY's passes: allocas to registers, then instruction combining, CFG simplification and value numbering."""
  mpm = llvm.create_new_module_pass_manager()
  mpm.add_sroa_pass()
  mpm.add_instruction_combine_pass()
  mpm.add_simplify_cfg_pass()
  mpm.add_new_gvn_pass()
  mpm.add_instruction_combine_pass()
  mpm.add_simplify_cfg_pass()
  mpm.run(mod, pb)


def jit_module(ir: str, what: str) -> tuple[Any, Any]:
  """Verify, optimise (O3; CLEANUP_ONLY's passes for IR that starts with it; none for CODEGEN_ONLY) and compile LLVM IR
  into the shared engine; returns (engine, module), which keep the code alive. HCQError names `what` when the IR is
  invalid."""
  llvm, tm, engine = host_jit()
  codegen_only = ir.startswith(CODEGEN_ONLY)
  with codegen(llvm, strength_reduction=not codegen_only):
    try:
      mod = llvm.parse_assembly(ir)
      mod.verify()
    except RuntimeError as e:
      raise HCQError(f"invalid LLVM IR for {what}: {e}") from None
    if not codegen_only:
      pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
      if ir.startswith(CLEANUP_ONLY): _clean_up(llvm, mod, pb)
      else: pb.getModulePassManager().run(mod, pb)
    defined = {f.name for f in mod.functions if not f.is_declaration}
    if defined & _names:
      engine = llvm.create_mcjit_compiler(mod, _machine(llvm))
    else:
      engine.add_module(mod)
      _names.update(defined)
    engine.finalize_object()
  return engine, mod
