"""hcq.asm: AMD GPU instruction tables, DSL, text assembler/disassembler and code objects.

  assemble(text, arch) -> bytes          LLVM AMDGPU syntax in, machine code out
  disassemble(data, arch) -> list[str]   machine code in, one LLVM-syntax line per instruction
  from hcq.asm.rdna3 import *            the DSL: v_add_f32_e32(v[0], v[1], v[2]).encode()
"""
from hcq.asm.instruction import DecodeError, Instruction
from hcq.asm.operands import OperandError
from hcq.asm.parser import AsmError
from hcq.asm.text import assemble, decode_all, disassemble

__all__ = ["assemble", "disassemble", "decode_all", "Instruction", "AsmError", "DecodeError", "OperandError"]
