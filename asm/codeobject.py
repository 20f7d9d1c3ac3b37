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
from hcq.errors import CodeObjectError

__all__ = ["CodeObject", "CodeObjectError", "Kernel", "KernelArgument", "read_code_object"]
# Memory the image may take beyond the file's own bytes (SHT_NOBITS, p_memsz past p_filesz, alignment padding):
# every other size is bounded by the file, this one by a limit, so a few hostile bytes cannot ask for gigabytes.
MAX_ZERO_FILL = 64 << 20
MAX_ALIGN = 1 << 16  # an ET_REL section asking for more is refused: kernels need 256, and more only pads the image with zeros


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
  if offset < 0 or offset + ctypes.sizeof(cls) > len(data):
    raise CodeObjectError(f"{what} at {offset:#x} runs past the end of the {'file' if isinstance(data, bytes) else 'image'} ({len(data):#x} bytes)")
  return cls.from_buffer_copy(data, offset)


def _section_bytes(data: bytes, sh, what: str) -> tuple[int, int]:
  """(start, end) of a section's bytes in the file, checked to lie inside it."""
  if sh.sh_offset + sh.sh_size > len(data):
    raise CodeObjectError(f"{what}: {sh.sh_size:#x} bytes at file offset {sh.sh_offset:#x} run past the end of the file ({len(data):#x} bytes)")
  return sh.sh_offset, sh.sh_offset + sh.sh_size


def _table(data: bytes, sh, cls, what: str) -> list:
  """The entries of a table section (relocations, symbols), each checked to lie in the file."""
  start, end = _section_bytes(data, sh, what)
  n = ctypes.sizeof(cls)
  return [cls.from_buffer_copy(data, off) for off in range(start, end - n + 1, n)]


def _check_align(align: int, what: str) -> int:
  if align > MAX_ALIGN or align & (align - 1):
    raise CodeObjectError(f"{what}: alignment {align:#x} is not a power of two up to {MAX_ALIGN:#x}")
  return max(align, 1)


def read_code_object(data: bytes) -> CodeObject:
  """Parse and lay out a code object; CodeObjectError says what is wrong with bad input, and where."""
  from hcq.autogen import amdgpu_elf as E
  data = bytes(data)
  if data[:4] != b"\x7fELF": raise CodeObjectError("not an ELF file (no \\x7fELF magic)")
  if len(data) < ctypes.sizeof(E.struct_Elf64_Ehdr): raise CodeObjectError(f"ELF file of {len(data)} bytes is shorter than an ELF64 header (64 bytes)")
  if data[4] != E.ELFCLASS64 or data[5] != E.ELFDATA2LSB: raise CodeObjectError("not a 64-bit little-endian ELF: AMDGPU code objects are ELF64 LSB")
  eh = _struct(E.struct_Elf64_Ehdr, data, 0, "ELF header")
  if eh.e_machine != E.EM_AMDGPU: raise CodeObjectError(f"ELF machine {eh.e_machine} is not AMDGPU ({E.EM_AMDGPU})")
  arch = _arch_names().get(eh.e_flags & E.EF_AMDGPU_MACH)
  if arch is None: raise CodeObjectError(f"unknown AMDGPU machine {eh.e_flags & E.EF_AMDGPU_MACH:#x} in e_flags")
  if eh.e_shnum and eh.e_shentsize != ctypes.sizeof(E.struct_Elf64_Shdr):
    raise CodeObjectError(f"ELF header: e_shentsize {eh.e_shentsize} is not {ctypes.sizeof(E.struct_Elf64_Shdr)} (an ELF64 section header)")
  shdrs = [_struct(E.struct_Elf64_Shdr, data, eh.e_shoff + i * eh.e_shentsize, f"section header {i}") for i in range(eh.e_shnum)]
  if eh.e_type == E.ET_DYN: image, addr_of_section, relocs = _layout_dyn(data, eh, shdrs)
  elif eh.e_type == E.ET_REL: image, addr_of_section, relocs = _layout_rel(data, shdrs)
  else: raise CodeObjectError(f"ELF type {eh.e_type} is neither ET_DYN (linked) nor ET_REL (object)")
  symbols, sizes = _symbols(data, shdrs, addr_of_section)
  metadata = _metadata(data, shdrs)
  kernels = {}
  meta_by_symbol = {k[".symbol"]: k for k in metadata.get("amdhsa.kernels", [])}
  from hcq.autogen import amdgpu_kd as kd
  for name, addr in symbols.items():
    if not name.endswith(".kd"): continue
    desc = _struct(kd.struct_kernel_descriptor_t, image, addr, f"kernel descriptor {name}")
    meta = meta_by_symbol.get(name, {})
    args = [KernelArgument(a.get(".name", f"arg{i}"), a[".offset"], a[".size"], a[".value_kind"]) for i, a in enumerate(meta.get(".args", []))]
    code = addr + desc.kernel_code_entry_byte_offset
    if not 0 <= code < len(image): raise CodeObjectError(f"{name}: entry point {code:#x} outside the image ({len(image):#x} bytes)")
    code_size = sizes.get(name[:-3], 0)
    if code + code_size > len(image):
      raise CodeObjectError(f"{name[:-3]}: the function symbol's size {code_size:#x} at {code:#x} runs past the image ({len(image):#x} bytes)")
    kernels[name[:-3]] = Kernel(name[:-3], addr, code, desc, code_size, args, meta)
  if not kernels: raise CodeObjectError("the code object defines no kernel (no <name>.kd symbol)")
  return CodeObject(arch, image, relocs, kernels, metadata)


def _image(size: int, file_bytes: int, what: str) -> bytearray:
  """A zeroed image of `size` bytes, of which at most MAX_ZERO_FILL are not the file's own."""
  if size - file_bytes > MAX_ZERO_FILL:
    raise CodeObjectError(f"{what} needs a {size:#x}-byte image from {file_bytes:#x} bytes of file: more than {MAX_ZERO_FILL >> 20} MiB "
                          "of zero-filled memory (.bss, alignment) is not loaded")
  return bytearray(size)


def _layout_dyn(data: bytes, eh, shdrs) -> tuple[bytearray, dict[int, int], list]:
  """ET_DYN: the PT_LOAD segments at their virtual addresses; R_AMDGPU_RELATIVE64 from .rela.dyn stays for load time."""
  from hcq.autogen import amdgpu_elf as E
  if eh.e_phnum and eh.e_phentsize != ctypes.sizeof(E.struct_Elf64_Phdr):
    raise CodeObjectError(f"ELF header: e_phentsize {eh.e_phentsize} is not {ctypes.sizeof(E.struct_Elf64_Phdr)} (an ELF64 program header)")
  phdrs = [_struct(E.struct_Elf64_Phdr, data, eh.e_phoff + i * eh.e_phentsize, f"program header {i}") for i in range(eh.e_phnum)]
  loads = [(i, p) for i, p in enumerate(phdrs) if p.p_type == E.PT_LOAD]
  if not loads: raise CodeObjectError("ET_DYN code object with no PT_LOAD segment")
  for i, p in loads:
    if p.p_offset + p.p_filesz > len(data):
      raise CodeObjectError(f"PT_LOAD segment {i}: {p.p_filesz:#x} bytes at file offset {p.p_offset:#x} run past the end of the file ({len(data):#x} bytes)")
    if p.p_filesz > p.p_memsz: raise CodeObjectError(f"PT_LOAD segment {i}: p_filesz {p.p_filesz:#x} exceeds p_memsz {p.p_memsz:#x}")
  image = _image(max(p.p_vaddr + p.p_memsz for _, p in loads), sum(p.p_filesz for _, p in loads), "the PT_LOAD segments")
  for _, p in loads: image[p.p_vaddr:p.p_vaddr + p.p_filesz] = data[p.p_offset:p.p_offset + p.p_filesz]
  relocs = []
  for s, sh in enumerate(shdrs):
    if sh.sh_type != E.SHT_RELA: continue
    for k, r in enumerate(_table(data, sh, E.struct_Elf64_Rela, f"relocation section {s}")):
      rtype = r.r_info & 0xffffffff
      if rtype == E.R_AMDGPU_RELATIVE64:
        if r.r_offset + 8 > len(image): raise CodeObjectError(f"relocation {k} of section {s}: offset {r.r_offset:#x} outside the image ({len(image):#x} bytes)")
        relocs.append((r.r_offset, rtype, r.r_addend))
      elif rtype != E.R_AMDGPU_NONE:
        raise CodeObjectError(f"dynamic relocation type {rtype} at {r.r_offset:#x}: only R_AMDGPU_RELATIVE64 is loadable without a symbol table")
  return image, {i: 0 for i, sh in enumerate(shdrs) if sh.sh_flags & E.SHF_ALLOC}, relocs  # symbol values are image addresses


# PC-relative R_AMDGPU type -> (struct format, the field's value from S + A - P), applied at layout time
def _rel_fields():
  from hcq.autogen import amdgpu_elf as E
  return {E.R_AMDGPU_REL64: ("<Q", lambda v: v & (2**64 - 1)), E.R_AMDGPU_REL32: ("<I", lambda v: v & 0xffffffff),
          E.R_AMDGPU_REL32_LO: ("<I", lambda v: v & 0xffffffff), E.R_AMDGPU_REL32_HI: ("<I", lambda v: (v >> 32) & 0xffffffff)}


def _layout_rel(data: bytes, shdrs) -> tuple[bytearray, dict[int, int], list]:
  """ET_REL: allocatable sections placed one after another at their alignment, then the relocations applied."""
  from hcq.autogen import amdgpu_elf as E
  place, addr, end, file_bytes = [], {}, 0, 0
  for i, sh in enumerate(shdrs):
    if not sh.sh_flags & E.SHF_ALLOC: continue
    align = _check_align(sh.sh_addralign, f"section {i}")
    addr[i] = (end + align - 1) // align * align
    if sh.sh_type != E.SHT_NOBITS:
      place.append((addr[i], *_section_bytes(data, sh, f"section {i}")))
      file_bytes += sh.sh_size
    end = addr[i] + sh.sh_size
    if end - file_bytes > MAX_ZERO_FILL: break  # _image says why
  image = _image(end, file_bytes, "the allocatable sections")
  for at, start, stop in place: image[at:at + stop - start] = data[start:stop]
  symtab = next((s for s in shdrs if s.sh_type == E.SHT_SYMTAB), None)
  syms = _table(data, symtab, E.struct_Elf64_Sym, "symbol table") if symtab is not None else []
  relocs, pc_relative = [], _rel_fields()
  for s, sh in enumerate(shdrs):
    if sh.sh_type != E.SHT_RELA or sh.sh_info not in addr: continue
    for k, r in enumerate(_table(data, sh, E.struct_Elf64_Rela, f"relocation section {s}")):
      rtype, sym_index = r.r_info & 0xffffffff, r.r_info >> 32
      where = f"relocation {k} of section {s} (offset {r.r_offset:#x})"
      if rtype == E.R_AMDGPU_NONE: continue
      if sym_index >= len(syms): raise CodeObjectError(f"{where}: symbol index {sym_index} outside the symbol table ({len(syms)} symbols)")
      sym = syms[sym_index]
      if sym.st_shndx == E.SHN_UNDEF:
        raise CodeObjectError(f"relocation against an undefined symbol (index {sym_index}): link external symbols before loading")
      if sym.st_shndx not in addr: raise CodeObjectError(f"relocation against a symbol in non-loaded section {sym.st_shndx}")
      S, P, A = addr[sym.st_shndx] + sym.st_value, addr[sh.sh_info] + r.r_offset, r.r_addend
      width = 8 if rtype in (E.R_AMDGPU_ABS64, E.R_AMDGPU_REL64) else 2 if rtype == E.R_AMDGPU_REL16 else 4
      if P + width > len(image): raise CodeObjectError(f"{where}: patches {P:#x}, outside the image ({len(image):#x} bytes)")
      if rtype in (E.R_AMDGPU_ABS64, E.R_AMDGPU_ABS32_LO, E.R_AMDGPU_ABS32_HI, E.R_AMDGPU_ABS32): relocs.append((P, rtype, S + A))
      elif rtype in pc_relative:
        fmt, field_of = pc_relative[rtype]
        struct.pack_into(fmt, image, P, field_of(S + A - P))
      elif rtype == E.R_AMDGPU_REL16:  # a branch's signed 16-bit word offset from the next instruction
        words = (S + A - P - 4) // 4
        if not -0x8000 <= words <= 0x7fff: raise CodeObjectError(f"{where}: branch of {words} words does not fit R_AMDGPU_REL16")
        struct.pack_into("<h", image, P, words)
      else: raise CodeObjectError(f"relocation type {rtype} at section offset {r.r_offset:#x} is not supported (GOT?)")
  return image, addr, relocs


def _symbols(data: bytes, shdrs, addr_of_section: dict[int, int]) -> tuple[dict[str, int], dict[str, int]]:
  """Defined symbols (of .symtab, else .dynsym) -> their offset in the image: the value plus its section's base
  (the section's place in the image for ET_REL; 0 for ET_DYN, whose values are already image addresses)."""
  from hcq.autogen import amdgpu_elf as E
  tab = next((s for s in shdrs if s.sh_type == E.SHT_SYMTAB), None) or next((s for s in shdrs if s.sh_type == E.SHT_DYNSYM), None)
  if tab is None: return {}, {}
  if tab.sh_link >= len(shdrs): raise CodeObjectError(f"symbol table's string table is section {tab.sh_link}, past the {len(shdrs)} sections")
  str_start, str_end = _section_bytes(data, shdrs[tab.sh_link], f"string table (section {tab.sh_link})")
  out, sizes = {}, {}
  for k, sym in enumerate(_table(data, tab, E.struct_Elf64_Sym, "symbol table")):
    if sym.st_shndx in (E.SHN_UNDEF, E.SHN_ABS) or sym.st_shndx not in addr_of_section or not sym.st_name: continue
    start = str_start + sym.st_name
    end = data.find(b"\0", start, str_end)
    if start >= str_end or end < 0: raise CodeObjectError(f"symbol {k}: name offset {sym.st_name:#x} has no NUL-terminated name in the string table")
    try:
      name = data[start:end].decode()
    except UnicodeDecodeError:
      raise CodeObjectError(f"symbol {k}: name at file offset {start:#x} is not UTF-8") from None
    out[name] = addr_of_section[sym.st_shndx] + sym.st_value
    sizes[name] = sym.st_size
  return out, sizes


def _metadata(data: bytes, shdrs) -> dict[str, Any]:
  """The NT_AMDGPU_METADATA note (msgpack), checked to have the shape the loader reads; {} when there is none
  (hand-made code objects may omit it)."""
  from hcq.autogen import amdgpu_elf as E
  for s, sh in enumerate(shdrs):
    if sh.sh_type != E.SHT_NOTE: continue
    pos, end = _section_bytes(data, sh, f"note section {s}")
    while pos + 12 <= end:
      namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
      desc_at = pos + 12 + (namesz + 3) // 4 * 4
      if desc_at + descsz > end: raise CodeObjectError(f"note at file offset {pos:#x} (section {s}) runs past its section's end {end:#x}")
      name = data[pos + 12:pos + 12 + namesz].rstrip(b"\0")
      if name == b"AMDGPU" and ntype == E.NT_AMDGPU_METADATA:
        try:
          meta = unpack(data[desc_at:desc_at + descsz])
        except MsgpackError as e:
          raise CodeObjectError(f"AMDGPU metadata note at file offset {desc_at:#x} is not valid msgpack: {e}") from None
        _check_metadata(meta, f"AMDGPU metadata note at file offset {desc_at:#x}")
        return meta
      pos = desc_at + (descsz + 3) // 4 * 4
  return {}


# the metadata keys the loader reads, and the types they must have (AMDGPUUsage, code object v3+ metadata)
_KERNEL_KEYS = {".symbol": str, ".args": list, ".kernarg_segment_size": int, ".wavefront_size": int}
_ARG_KEYS = {".name": str, ".offset": int, ".size": int, ".value_kind": str}


def _check_metadata(meta: Any, where: str) -> None:
  def bad(what: str) -> CodeObjectError: return CodeObjectError(f"{where}: {what}")

  def typed(d: dict, keys: dict, what: str, required: tuple[str, ...]) -> None:
    for key, kind in keys.items():
      if key not in d:
        if key in required: raise bad(f"{what} has no {key}")
        continue
      v = d[key]
      if not isinstance(v, kind) or isinstance(v, bool) or (kind is int and v < 0):
        raise bad(f"{what}'s {key} is {v!r}, not a{' non-negative' if kind is int else ''} {kind.__name__}")

  if not isinstance(meta, dict): raise bad(f"the document is a {type(meta).__name__}, not a map")
  kernels = meta.get("amdhsa.kernels", [])
  if not isinstance(kernels, list): raise bad("amdhsa.kernels is not an array")
  for i, k in enumerate(kernels):
    if not isinstance(k, dict): raise bad(f"amdhsa.kernels[{i}] is not a map")
    typed(k, _KERNEL_KEYS, f"amdhsa.kernels[{i}]", (".symbol",))
    if ".wavefront_size" in k and k[".wavefront_size"] not in (32, 64): raise bad(f"amdhsa.kernels[{i}]'s .wavefront_size {k['.wavefront_size']} is not 32 or 64")
    for j, a in enumerate(k.get(".args", [])):
      if not isinstance(a, dict): raise bad(f"amdhsa.kernels[{i}].args[{j}] is not a map")
      typed(a, _ARG_KEYS, f"amdhsa.kernels[{i}].args[{j}]", (".offset", ".size", ".value_kind"))
      if a[".offset"] + a[".size"] > k.get(".kernarg_segment_size", 1 << 32):
        raise bad(f"amdhsa.kernels[{i}].args[{j}] ({a['.size']} bytes at {a['.offset']}) lies past the kernarg segment "
                  f"({k.get('.kernarg_segment_size', 1 << 32)} bytes)")
