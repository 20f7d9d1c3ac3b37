"""Applying a cubin's relocations when a kernel is loaded: the R_CUDA_* types ptxas writes for global variables.

ptxas puts a global variable's address in a constant bank (R_CUDA_64 against .nv.constant4 in a linked cubin), into
the code (R_CUDA_ABS32_LO_32 / _HI_32: the 32-bit immediate of a 128-bit sm_70+ instruction, bits 32-63, in a
relocatable one, ptxas -c) and into initialisers of pointers (R_CUDA_G64 against .nv.global.init). These are applied;
any other type (calls through R_CUDA_ABS55_16_34, function descriptors R_CUDA_UNIFIED32_*, ...) or a symbol the cubin
does not define (it needs nvlink) is refused naming the type and the symbol.
"""
from __future__ import annotations
import struct

from hcq.drivers.nv.cubin import R_CUDA, CubinKernel, Relocation
from hcq.errors import HCQError

# type -> (bytes patched, where in them, the value's part): u64 data, or one half of the address in an instruction's immediate
_APPLY = {2: (8, 0, lambda v: v), 4: (8, 0, lambda v: v), 56: (4, 4, lambda v: v & 0xFFFFFFFF), 57: (4, 4, lambda v: v >> 32)}


def apply_relocations(k: CubinKernel, places: dict[str, bytearray], bases: dict[str, int]) -> None:
  """Patch `places` (section name -> its bytes as they will be uploaded) for k's relocations; `bases`: the GPU address of
  each section a symbol may lie in (.nv.global, .nv.global.init). HCQError naming the relocation for what is not applied."""
  for r in k.relocations:
    where = f"{k.name}: relocation {r.type_name} at {r.target}+{r.offset:#x} to {r.symbol}"
    if r.type not in _APPLY: raise HCQError(f"{where}: hcq applies {', '.join(R_CUDA[t] for t in _APPLY)}, not this one")
    if r.symbol_section not in bases:
      raise HCQError(f"{where}: the symbol is " + (f"in {r.symbol_section}, which hcq does not place" if r.symbol_section
                                                   else "not defined in the cubin (link it with nvlink first)"))
    size, at, part = _APPLY[r.type]
    place, off = places[r.target], r.offset + at
    if off + size > len(place): raise HCQError(f"{where}: the patch [{off:#x}, {off + size:#x}) is outside {r.target} ({len(place)} bytes)")
    addend = r.addend if r.addend is not None else _implicit_addend(r, place, off, size, where)
    struct.pack_into("<Q" if size == 8 else "<I", place, off, part(bases[r.symbol_section] + r.value + addend))


def _implicit_addend(r: Relocation, place: bytearray, off: int, size: int, where: str) -> int:
  """A REL entry's addend: the u64 in place for a data relocation; an instruction's immediate must be 0 (stricter: its
  encoding of an addend is not known here)."""
  value = int.from_bytes(place[off:off + size], "little")
  if size == 8: return value
  if value: raise HCQError(f"{where}: a REL entry with {value:#x} already in the instruction's immediate (not applied: unknown encoding)")
  return 0

