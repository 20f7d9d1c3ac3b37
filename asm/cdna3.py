"""CDNA3 (gfx942) DSL: `from hcq.asm.cdna3 import *` gives every instruction by its LLVM (gfx9) mnemonic
(v_add_f32_e32, v_add_f32_e64, v_add_f32_sdwa, v_add_f32_dpp, s_load_dwordx4, global_load_dword, ds_read_b32,
v_mfma_f32_32x32x8_f16, ...), the register files v, s, ttmp and the accumulation registers a (a[0], a[0:15]), and
the special registers VCC, EXEC, M0, SCC, ... (flat_scratch and xnack_mask are text; NULL is encoding 125, which
llvm-mc's disassembler prints as null but its gfx942 assembler refuses).

  >>> v_mfma_f32_32x32x8_f16(a[0:15], v[0:1], v[2:3], a[0:15], cbsz=1, abid=2, blgp=3).encode().hex()
  '0091ccd300050264'
  >>> str(v_add_f32_sdwa(v[1], v[2], v[3], dst_sel="WORD_1", src0_sel="BYTE_0"))
  'v_add_f32_sdwa v1, v2, v3 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_0 src1_sel:DWORD'

Wave64 is the default: VCC and EXEC are register pairs.
"""
from hcq.asm.dsl import arch_namespace as _arch_namespace
from hcq.asm.registers import a

globals().update(_arch_namespace("gfx942"))
__all__ = sorted(k for k in globals() if not k.startswith("_") and k not in ("ARCH", "ISA"))
