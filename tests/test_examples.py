"""The examples run as a user would run them, and say what they claim."""
from __future__ import annotations
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("script,expect", [
  ("bindings_tour.py", ["AMDKFD_IOC_CREATE_QUEUE = 0xc0584b02", "PACKET3(PACKET3_SET_SH_REG, 2) = 0xc0027600"]),
  ("hcq_tour.py", ["matches numpy: True", "equal: True", "GPUFault", "the device works: [0, 1, 2, 3]", "emulated"]),
  ("smi_emulated.py", ["emulated"]),
  ("vector_add_asm.py", ["equal to numpy: True"]),
  ("llvm_ir_kernel.py", ["max error vs numpy 0.00e+00"]),
  ("tensor_tour.py", ["in 2 kernels", "matches the CPU: True"]),
])
def test_example(script, expect):
  out = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  for text in expect: assert text in out.stdout, (text, out.stdout[-3000:])
