"""RDNA4 (gfx1201) DSL: `from hcq.asm.rdna4 import *` gives every instruction by its LLVM mnemonic, the register
files v, s, ttmp (v[0], s[4:7] inclusive) and the special registers VCC, EXEC, EXEC_LO, NULL, M0, SCC, ...

  >>> v_add_f32_e32(v[0], v[1], v[2]).encode().hex()
  '01050006'
"""
from hcq.asm.dsl import namespace as _namespace
from hcq.asm.isa import load as _load
from hcq.asm.registers import (EXEC, EXEC_HI, EXEC_LO, EXECZ, LDS_DIRECT, M0, NULL, NULL64, OFF, SCC, SRC_POPS_EXITING_WAVE_ID,
                               SRC_PRIVATE_BASE, SRC_PRIVATE_LIMIT, SRC_SHARED_BASE, SRC_SHARED_LIMIT, VCC, VCC_HI, VCC_LO, VCCZ, Reg, s,
                               ttmp, v)

ARCH = "gfx1201"
ISA = _load(ARCH)
_instructions = _namespace(ISA)
globals().update(_instructions)

__all__ = ["v", "s", "ttmp", "Reg", "VCC", "VCC_LO", "VCC_HI", "EXEC", "EXEC_LO", "EXEC_HI", "NULL", "NULL64", "M0", "SCC", "VCCZ",
           "EXECZ", "LDS_DIRECT", "OFF", "SRC_SHARED_BASE", "SRC_SHARED_LIMIT", "SRC_PRIVATE_BASE", "SRC_PRIVATE_LIMIT",
           "SRC_POPS_EXITING_WAVE_ID", *sorted(_instructions)]
