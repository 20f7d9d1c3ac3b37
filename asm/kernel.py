"""The Kernel builder: instructions (DSL objects or assembly lines), labels and branches, packed into a code object.

  k = Kernel("add", args=[("a", "buffer"), ("b", "buffer"), ("n", "u32")])
  k.add(s_load_b128(s[4:7], s[0:1], 0))
  k.label("loop")
  ...
  k.branch("s_cbranch_scc1", "loop")
  k.add("s_endpgm")
  co = k.to_elf()           # an ET_DYN HSA code object: hcq.Device("AMD").program(co)

Branch offsets are fixed up by the text assembler (one path for labels, whether the kernel came from the DSL or
from text). The descriptor's VGPR granules come from the registers the code uses, read back from its disassembly.
"""
from __future__ import annotations
import re
import struct
from typing import Any, Sequence

from hcq.asm.elf_writer import KernelImage, kernel_descriptor, write_code_object

ARG_SIZES = {"buffer": 8, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "f16": 2, "i32": 4, "u32": 4, "f32": 4, "i64": 8, "u64": 8, "f64": 8}
# value kinds -> the .type_name clang writes for them (OpenCL C spellings), so a launch packs each value by its type
ARG_TYPE_NAMES = {"i8": "char", "u8": "uchar", "i16": "short", "u16": "ushort", "f16": "half", "i32": "int", "u32": "uint", "f32": "float",
                  "i64": "long", "u64": "ulong", "f64": "double"}
_VREG = re.compile(r"\bv(?:(\d+)|\[(\d+):(\d+)\])")
_SREG = re.compile(r"\bs(?:(\d+)|\[(\d+):(\d+)\])")
_AREG = re.compile(r"\ba(?:(\d+)|\[(\d+):(\d+)\])")  # gfx90a+ accumulation registers


def registers_used(lines: Sequence[str]) -> tuple[int, int]:
  """(VGPRs, SGPRs) named in assembly text: one past the highest register of each file."""
  def top(regex, text):
    best = -1
    for m in regex.finditer(text):
      best = max(best, int(m.group(1) or m.group(3)))
    return best + 1
  text = "\n".join(lines)
  return top(_VREG, text), top(_SREG, text)


class Kernel:
  """A kernel under construction; see the module docstring. `args` are (name, kind) with kind "buffer" or a value
  type (i8..u64, f16, f32, f64), laid out one after another at natural alignment, and named in the metadata."""

  def __init__(self, name: str, arch: str = "gfx1100", *, args: Sequence[tuple[str, str]] = (), lds_size: int = 0, wave32: bool | None = None,
               workgroup_ids: tuple[bool, bool, bool] = (True, False, False), workitem_id_dims: int = 1, dispatch_ptr: bool = False):
    for n, kind in args:
      if kind not in ARG_SIZES: raise ValueError(f"argument {n!r}: unknown kind {kind!r}; valid: {', '.join(ARG_SIZES)}")
    wave32 = not arch.startswith("gfx9") if wave32 is None else wave32  # wave32 by default on gfx10+, wave64 on gfx9 (CDNA)
    self.name, self.arch, self.args, self.lds_size, self.wave32 = name, arch, list(args), lds_size, wave32
    self.workgroup_ids, self.workitem_id_dims, self.dispatch_ptr = workgroup_ids, workitem_id_dims, dispatch_ptr
    self.lines: list[str] = []

  def add(self, *items: Any) -> "Kernel":
    """Append instructions: DSL Instruction objects or lines of assembly text (several lines in one string are fine)."""
    for it in items:
      self.lines.extend(str(it).splitlines() if isinstance(it, str) else [str(it)])
    return self

  def label(self, name: str) -> "Kernel":
    self.lines.append(f"{name}:")
    return self

  def branch(self, mnemonic: str, label: str) -> "Kernel":
    """A branch (s_branch, s_cbranch_scc0, s_cbranch_execz, ...) to a label defined before or after it."""
    self.lines.append(f"{mnemonic} {label}")
    return self

  def code(self) -> bytes:
    from hcq.asm import assemble
    return assemble("\n".join(self.lines), self.arch)

  def layout(self) -> tuple[list[dict[str, Any]], int]:
    """The metadata .args and the kernarg segment size."""
    out, offset = [], 0
    for n, kind in self.args:
      size = ARG_SIZES[kind]
      offset = (offset + size - 1) // size * size
      out.append({".name": n, ".offset": offset, ".size": size, ".value_kind": "global_buffer" if kind == "buffer" else "by_value",
                  **({".address_space": "global"} if kind == "buffer" else {".type_name": ARG_TYPE_NAMES[kind]})})
      offset += size
    return out, (offset + 7) // 8 * 8

  def to_elf(self) -> bytes:
    """A loadable HSA code object (code object v5) with this one kernel."""
    from hcq.asm import disassemble
    code = self.code()
    text = disassemble(code, self.arch)
    vgprs, sgprs = registers_used(text)
    agprs = max((int(m.group(1) or m.group(3)) + 1 for m in _AREG.finditer("\n".join(text))), default=0)
    args, kernarg_size = self.layout()
    desc = kernel_descriptor(vgprs=max(vgprs, self.workitem_id_dims, 1), kernarg_size=kernarg_size, lds_size=self.lds_size, wave32=self.wave32,
                             workgroup_ids=self.workgroup_ids, workitem_id_dims=self.workitem_id_dims, dispatch_ptr=self.dispatch_ptr,
                             arch=self.arch, agprs=agprs, sgprs=sgprs)
    meta = {".args": args, ".vgpr_count": vgprs, ".sgpr_count": sgprs}
    return write_code_object(self.arch, [KernelImage(self.name, code, desc, meta)])


def pack_values(kinds: Sequence[str], values: Sequence[Any]) -> bytes:
  """Values packed as a Kernel lays out its arguments (for tools that build kernarg segments by hand)."""
  fmt = {"i8": "b", "u8": "B", "i16": "h", "u16": "H", "f16": "e", "i32": "i", "u32": "I", "f32": "f", "i64": "q", "u64": "Q", "f64": "d", "buffer": "Q"}
  out, offset = bytearray(), 0
  for kind, v in zip(kinds, values):
    size = ARG_SIZES[kind]
    offset = (offset + size - 1) // size * size
    out.extend(b"\0" * (offset - len(out)))
    out.extend(struct.pack("<" + fmt[kind], v))
    offset += size
  return bytes(out)
