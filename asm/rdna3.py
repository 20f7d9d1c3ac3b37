"""RDNA3 (gfx1100) DSL: `from hcq.asm.rdna3 import *` gives every instruction by its LLVM mnemonic, the register
files v, s, ttmp (v[0], s[4:7] inclusive) and the special registers VCC, EXEC, EXEC_LO, NULL, M0, SCC, ...

  >>> v_add_f32_e32(v[0], v[1], v[2]).encode().hex()
  '01050006'
"""
from hcq.asm.dsl import arch_namespace as _arch_namespace

globals().update(_arch_namespace("gfx1100"))
__all__ = sorted(k for k in globals() if not k.startswith("_") and k not in ("ARCH", "ISA"))
