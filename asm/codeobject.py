"""Reading AMDGPU code objects: ET_DYN (clang/lld, ROCm) and ET_REL (llvmlite `emit_object`) alike.

`read_code_object(data)` lays the loadable bytes out as one image from address 0, applies the relocations
that do not depend on where the image is loaded, keeps those that do, and reads each kernel's descriptor
and its metadata (the code object v3+ msgpack note). `CodeObject.image_at(base)` gives the bytes for a
load address. The ELF layouts and constants come from hcq.autogen.amdgpu_elf (LLVM's ELF.h).
"""
from __future__ import annotations
import ctypes
import struct
from dataclasses import dataclass, field
from typing import Any

from hcq.asm.msgpack import MsgpackError, unpack


class CodeObjectError(ValueError):
  """Bytes that are not a loadable AMDGPU code object; the message says what is wrong with them."""


@dataclass(frozen=True)
class KernelArgument:
  name: str
  offset: int
  size: int
  value_kind: str   # "global_buffer", "by_value", or a hidden_* argument the runtime fills


@dataclass
class Kernel:
  name: str
  descriptor_offset: int   # where the 64-byte kernel descriptor sits in the image
  code_offset: int         # the entry point in the image
  descriptor: Any          # hcq.autogen.amdgpu_kd.struct_kernel_descriptor_t (a copy)
  code_size: int = 0       # bytes of code (the function symbol's size; 0 when the symbol does not say)
  args: list[KernelArgument] = field(default_factory=list)
  metadata: dict[str, Any] = field(default_factory=dict)

  @property
  def kernarg_size(self) -> int:
    return self.metadata.get(".kernarg_segment_size", self.descriptor.kernarg_size)

  @property
  def wavefront_size(self) -> int:
    from hcq.autogen import amdgpu_kd as kd
    if ".wavefront_size" in self.metadata: return self.metadata[".wavefront_size"]
    return 32 if self.descriptor.kernel_code_properties & kd.KERNEL_CODE_PROPERTY_ENABLE_WAVEFRONT_SIZE32 else 64


@dataclass
class CodeObject:
  arch: str
  image: bytearray
  relocations: list[tuple[int, int, int]]  # (image offset, R_AMDGPU type, value relative to the load base)
  kernels: dict[str, Kernel]
  metadata: dict[str, Any]

  def image_at(self, base: int) -> bytes:
    """The image with every load-address-dependent relocation applied for `base`."""
    from hcq.autogen import amdgpu_elf as E
    out = bytearray(self.image)
    for off, rtype, value in self.relocations:
      v = base + value
      if rtype in (E.R_AMDGPU_ABS64, E.R_AMDGPU_RELATIVE64): struct.pack_into("<Q", out, off, v & (2**64 - 1))
      elif rtype == E.R_AMDGPU_ABS32_LO or rtype == E.R_AMDGPU_ABS32: struct.pack_into("<I", out, off, v & 0xffffffff)
      elif rtype == E.R_AMDGPU_ABS32_HI: struct.pack_into("<I", out, off, (v >> 32) & 0xffffffff)
    return bytes(out)


def _arch_names() -> dict[int, str]:
  from hcq.autogen import amdgpu_elf as E
  return {v: k[len("EF_AMDGPU_MACH_AMDGCN_"):].lower() for k, v in vars(E).items() if k.startswith("EF_AMDGPU_MACH_AMDGCN_GFX")}


def _struct(cls, data: bytes, offset: int, what: str):
  if offset < 0 or offset + ctypes.sizeof(cls) > len(data): raise CodeObjectError(f"{what} at {offset:#x} runs past the end of the file")
  return cls.from_buffer_copy(data, offset)


def read_code_object(data: bytes) -> CodeObject:
  """Parse and lay out a code object; CodeObjectError says what is wrong with bad input."""
  from hcq.autogen import amdgpu_elf as E
  data = bytes(data)
  if data[:4] != b"\x7fELF": raise CodeObjectError("not an ELF file (no \\x7fELF magic)")
  if data[4] != E.ELFCLASS64 or data[5] != E.ELFDATA2LSB: raise CodeObjectError("not a 64-bit little-endian ELF: AMDGPU code objects are ELF64 LSB")
  eh = _struct(E.struct_Elf64_Ehdr, data, 0, "ELF header")
  if eh.e_machine != E.EM_AMDGPU: raise CodeObjectError(f"ELF machine {eh.e_machine} is not AMDGPU ({E.EM_AMDGPU})")
  arch = _arch_names().get(eh.e_flags & E.EF_AMDGPU_MACH)
  if arch is None: raise CodeObjectError(f"unknown AMDGPU machine {eh.e_flags & E.EF_AMDGPU_MACH:#x} in e_flags")
  shdrs = [_struct(E.struct_Elf64_Shdr, data, eh.e_shoff + i * eh.e_shentsize, f"section header {i}") for i in range(eh.e_shnum)]
  if eh.e_type == E.ET_DYN: image, addr_of_section, relocs = _layout_dyn(data, eh, shdrs)
  elif eh.e_type == E.ET_REL: image, addr_of_section, relocs = _layout_rel(data, shdrs)
  else: raise CodeObjectError(f"ELF type {eh.e_type} is neither ET_DYN (linked) nor ET_REL (object)")
  symbols, sizes = _symbols(data, shdrs, addr_of_section)
  metadata = _metadata(data, shdrs)
  kernels = {}
  meta_by_symbol = {k.get(".symbol"): k for k in metadata.get("amdhsa.kernels", [])}
  from hcq.autogen import amdgpu_kd as kd
  for name, addr in symbols.items():
    if not name.endswith(".kd"): continue
    desc = _struct(kd.struct_kernel_descriptor_t, image, addr, f"kernel descriptor {name}")
    meta = meta_by_symbol.get(name, {})
    args = [KernelArgument(a.get(".name", f"arg{i}"), a[".offset"], a[".size"], a[".value_kind"]) for i, a in enumerate(meta.get(".args", []))]
    code = addr + desc.kernel_code_entry_byte_offset
    if not 0 <= code < len(image): raise CodeObjectError(f"{name}: entry point {code:#x} outside the image ({len(image):#x} bytes)")
    kernels[name[:-3]] = Kernel(name[:-3], addr, code, desc, sizes.get(name[:-3], 0), args, meta)
  if not kernels: raise CodeObjectError("the code object defines no kernel (no <name>.kd symbol)")
  return CodeObject(arch, image, relocs, kernels, metadata)


def _layout_dyn(data: bytes, eh, shdrs) -> tuple[bytearray, dict[int, int], list]:
  """ET_DYN: the PT_LOAD segments at their virtual addresses; R_AMDGPU_RELATIVE64 from .rela.dyn stays for load time."""
  from hcq.autogen import amdgpu_elf as E
  phdrs = [_struct(E.struct_Elf64_Phdr, data, eh.e_phoff + i * eh.e_phentsize, f"program header {i}") for i in range(eh.e_phnum)]
  loads = [p for p in phdrs if p.p_type == E.PT_LOAD]
  if not loads: raise CodeObjectError("ET_DYN code object with no PT_LOAD segment")
  image = bytearray(max(p.p_vaddr + p.p_memsz for p in loads))
  for p in loads:
    if p.p_offset + p.p_filesz > len(data): raise CodeObjectError("a PT_LOAD segment runs past the end of the file")
    image[p.p_vaddr:p.p_vaddr + p.p_filesz] = data[p.p_offset:p.p_offset + p.p_filesz]
  relocs = []
  for sh in shdrs:
    if sh.sh_type != E.SHT_RELA: continue
    for k in range(sh.sh_size // ctypes.sizeof(E.struct_Elf64_Rela)):
      r = _struct(E.struct_Elf64_Rela, data, sh.sh_offset + k * ctypes.sizeof(E.struct_Elf64_Rela), "relocation")
      rtype = r.r_info & 0xffffffff
      if rtype == E.R_AMDGPU_RELATIVE64: relocs.append((r.r_offset, rtype, r.r_addend))
      elif rtype != E.R_AMDGPU_NONE:
        raise CodeObjectError(f"dynamic relocation type {rtype} at {r.r_offset:#x}: only R_AMDGPU_RELATIVE64 is loadable without a symbol table")
  return image, {i: 0 for i, sh in enumerate(shdrs) if sh.sh_flags & E.SHF_ALLOC}, relocs  # symbol values are image addresses


def _layout_rel(data: bytes, shdrs) -> tuple[bytearray, dict[int, int], list]:
  """ET_REL: allocatable sections placed one after another at their alignment, then the relocations applied."""
  from hcq.autogen import amdgpu_elf as E
  image, addr = bytearray(), {}
  for i, sh in enumerate(shdrs):
    if not sh.sh_flags & E.SHF_ALLOC: continue
    start = (len(image) + max(sh.sh_addralign, 1) - 1) // max(sh.sh_addralign, 1) * max(sh.sh_addralign, 1)
    image.extend(b"\0" * (start - len(image)))
    addr[i] = start
    image.extend(b"\0" * sh.sh_size if sh.sh_type == E.SHT_NOBITS else data[sh.sh_offset:sh.sh_offset + sh.sh_size])
  symtab = next((s for s in shdrs if s.sh_type == E.SHT_SYMTAB), None)
  relocs = []
  for sh in shdrs:
    if sh.sh_type != E.SHT_RELA or sh.sh_info not in addr: continue
    for k in range(sh.sh_size // ctypes.sizeof(E.struct_Elf64_Rela)):
      r = _struct(E.struct_Elf64_Rela, data, sh.sh_offset + k * ctypes.sizeof(E.struct_Elf64_Rela), "relocation")
      rtype, sym_index = r.r_info & 0xffffffff, r.r_info >> 32
      sym = _struct(E.struct_Elf64_Sym, data, symtab.sh_offset + sym_index * ctypes.sizeof(E.struct_Elf64_Sym), "symbol")
      if sym.st_shndx == E.SHN_UNDEF:
        raise CodeObjectError(f"relocation against an undefined symbol (index {sym_index}): link external symbols before loading")
      if sym.st_shndx not in addr: raise CodeObjectError(f"relocation against a symbol in non-loaded section {sym.st_shndx}")
      S, P, A = addr[sym.st_shndx] + sym.st_value, addr[sh.sh_info] + r.r_offset, r.r_addend
      if rtype in (E.R_AMDGPU_ABS64, E.R_AMDGPU_ABS32_LO, E.R_AMDGPU_ABS32_HI, E.R_AMDGPU_ABS32): relocs.append((P, rtype, S + A))
      elif rtype == E.R_AMDGPU_REL64: struct.pack_into("<q", image, P, S + A - P)
      elif rtype in (E.R_AMDGPU_REL32, E.R_AMDGPU_REL32_LO): struct.pack_into("<I", image, P, (S + A - P) & 0xffffffff)
      elif rtype == E.R_AMDGPU_REL32_HI: struct.pack_into("<I", image, P, ((S + A - P) >> 32) & 0xffffffff)
      elif rtype == E.R_AMDGPU_REL16: struct.pack_into("<h", image, P, ((S + A - P - 4) // 4))
      elif rtype != E.R_AMDGPU_NONE: raise CodeObjectError(f"relocation type {rtype} at section offset {r.r_offset:#x} is not supported (GOT?)")
  return image, addr, relocs


def _symbols(data: bytes, shdrs, addr_of_section: dict[int, int]) -> tuple[dict[str, int], dict[str, int]]:
  """Defined symbols (of .symtab, else .dynsym) -> their offset in the image: the value plus its section's base
  (the section's place in the image for ET_REL; 0 for ET_DYN, whose values are already image addresses)."""
  from hcq.autogen import amdgpu_elf as E
  tab = next((s for s in shdrs if s.sh_type == E.SHT_SYMTAB), None) or next((s for s in shdrs if s.sh_type == E.SHT_DYNSYM), None)
  if tab is None: return {}, {}
  strtab = shdrs[tab.sh_link]
  out, sizes = {}, {}
  for k in range(tab.sh_size // ctypes.sizeof(E.struct_Elf64_Sym)):
    sym = _struct(E.struct_Elf64_Sym, data, tab.sh_offset + k * ctypes.sizeof(E.struct_Elf64_Sym), "symbol")
    if sym.st_shndx in (E.SHN_UNDEF, E.SHN_ABS) or sym.st_shndx not in addr_of_section or not sym.st_name: continue
    end = data.index(b"\0", strtab.sh_offset + sym.st_name)
    name = data[strtab.sh_offset + sym.st_name:end].decode()
    out[name] = addr_of_section[sym.st_shndx] + sym.st_value
    sizes[name] = sym.st_size
  return out, sizes


def _metadata(data: bytes, shdrs) -> dict[str, Any]:
  """The NT_AMDGPU_METADATA note (msgpack), or {} when there is none (hand-made code objects may omit it)."""
  from hcq.autogen import amdgpu_elf as E
  for sh in shdrs:
    if sh.sh_type != E.SHT_NOTE: continue
    pos, end = sh.sh_offset, sh.sh_offset + sh.sh_size
    while pos + 12 <= end:
      namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
      name = data[pos + 12:pos + 12 + namesz].rstrip(b"\0")
      desc_at = pos + 12 + (namesz + 3) // 4 * 4
      if name == b"AMDGPU" and ntype == E.NT_AMDGPU_METADATA:
        try:
          return unpack(data[desc_at:desc_at + descsz])
        except MsgpackError as e:
          raise CodeObjectError(f"AMDGPU metadata note is not valid msgpack: {e}") from None
      pos = desc_at + (descsz + 3) // 4 * 4
  return {}
