"""The process's LLVM code generation (llvmlite): one lock for every compile (host JIT, amdgcn, nvptx).

llvmlite's modules share LLVM's global context, and code generation reads command-line options that are global to the
process, so set-up (targets, machines, the host engine), parsing, optimising and emitting all hold `LOCK`; `codegen` also sets the one option hcq changes per
module: loop strength reduction, which IR written in the shape it runs (jit.CODEGEN_ONLY) does not need and which
cost a packed matmul kernel about 30% of its compile time."""
from __future__ import annotations
import contextlib
import threading
from typing import Any, Iterator

LOCK = threading.RLock()
_strength_reduction = True   # LLVM's default (-disable-lsr=false)


@contextlib.contextmanager
def codegen(llvm: Any, strength_reduction: bool = True) -> Iterator[None]:
  """Hold LOCK, with loop strength reduction on or off for the code generated inside."""
  global _strength_reduction
  with LOCK:
    if strength_reduction != _strength_reduction:
      llvm.set_option("", f"-disable-lsr={'false' if strength_reduction else 'true'}")
      _strength_reduction = strength_reduction
    yield
