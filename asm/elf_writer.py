"""Writing loadable AMDGPU code objects: kernel descriptors from register counts, and an ET_DYN ELF around them.

`kernel_descriptor(...)` fills the 64-byte descriptor the way LLVM's `.amdhsa_kernel` directives do (checked
against llvm-mc in the tests); `write_code_object(arch, kernels)` lays out an HSA code object v5 like lld does:
a read-only segment with the metadata note, dynamic symbols and descriptors, an executable segment with the
code, and a dynamic section, so the HSA loader, llvm-readelf and llvm-objdump accept it.
"""
from __future__ import annotations
import ctypes
import struct
from dataclasses import dataclass, field
from typing import Any

from hcq.asm.msgpack import pack

PAGE = 0x1000


def _set(value: int, mask: int, shift: int, field_value: int, what: str) -> int:
  if not 0 <= field_value <= mask >> shift: raise ValueError(f"{what} = {field_value} does not fit its field (at most {mask >> shift})")
  return (value & ~mask) | (field_value << shift)


def kernel_descriptor(*, vgprs: int, sgprs: int = 0, kernarg_size: int = 0, lds_size: int = 0, scratch_size: int = 0,
                      wave32: bool = True, workgroup_ids: tuple[bool, bool, bool] = (True, False, False), workitem_id_dims: int = 1,
                      kernarg_ptr: bool = True, dispatch_ptr: bool = False, queue_ptr: bool = False, ieee_mode: bool = True,
                      dx10_clamp: bool = True, denorms: bool = True, arch: str = "gfx1100", agprs: int = 0):
  """A gfx10/gfx11 (or gfx90a+ with arch="gfx942") kernel descriptor (hcq.autogen.amdgpu_kd.struct_kernel_descriptor_t)
  for code that uses `vgprs` VGPRs (and `agprs` AGPRs on gfx90a+) and takes its arguments in user SGPRs (dispatch
  pointer, queue pointer, kernarg pointer, in that order)."""
  from hcq.autogen import amdgpu_kd as kd
  gfx9 = arch.startswith("gfx9")
  if gfx9 and wave32: raise ValueError(f"{arch} runs wave64 only: pass wave32=False")
  d = kd.struct_kernel_descriptor_t()
  d.group_segment_fixed_size, d.private_segment_fixed_size, d.kernarg_size = lds_size, scratch_size, kernarg_size
  granule = 8 if wave32 or gfx9 else 4  # VGPR allocation granule on gfx10+; gfx90a+ allocates VGPRs and AGPRs in 8s
  total = vgprs
  if gfx9:  # AGPRs follow the VGPRs at accum_offset (a multiple of 4), both in one allocation
    accum_offset = (max(vgprs, 1) + 3) // 4 * 4
    total = accum_offset + agprs if agprs else vgprs
    d.compute_pgm_rsrc3 = _set(0, kd.COMPUTE_PGM_RSRC3_GFX90A_ACCUM_OFFSET, kd.COMPUTE_PGM_RSRC3_GFX90A_ACCUM_OFFSET_SHIFT,
                               accum_offset // 4 - 1, "accum_offset")
  r1 = _set(0, kd.COMPUTE_PGM_RSRC1_GRANULATED_WORKITEM_VGPR_COUNT, kd.COMPUTE_PGM_RSRC1_GRANULATED_WORKITEM_VGPR_COUNT_SHIFT,
            max(0, (max(total, 1) + granule - 1) // granule - 1), "VGPR granules")
  if gfx9:  # SGPRs are allocated on gfx9 (in 8s): the kernel's, then VCC and XNACK's mask
    r1 = _set(r1, kd.COMPUTE_PGM_RSRC1_GRANULATED_WAVEFRONT_SGPR_COUNT, kd.COMPUTE_PGM_RSRC1_GRANULATED_WAVEFRONT_SGPR_COUNT_SHIFT,
              max(0, (sgprs + 4 + 7) // 8 - 1), "SGPR granules")
  denorm = kd.FLOAT_DENORM_MODE_FLUSH_NONE if denorms else kd.FLOAT_DENORM_MODE_FLUSH_SRC_DST
  r1 = _set(r1, kd.COMPUTE_PGM_RSRC1_FLOAT_DENORM_MODE_32, kd.COMPUTE_PGM_RSRC1_FLOAT_DENORM_MODE_32_SHIFT, denorm, "denorm mode")
  r1 = _set(r1, kd.COMPUTE_PGM_RSRC1_FLOAT_DENORM_MODE_16_64, kd.COMPUTE_PGM_RSRC1_FLOAT_DENORM_MODE_16_64_SHIFT, kd.FLOAT_DENORM_MODE_FLUSH_NONE, "denorm mode")
  r1 = _set(r1, kd.COMPUTE_PGM_RSRC1_GFX6_GFX11_ENABLE_DX10_CLAMP, kd.COMPUTE_PGM_RSRC1_GFX6_GFX11_ENABLE_DX10_CLAMP_SHIFT, int(dx10_clamp), "dx10 clamp")
  r1 = _set(r1, kd.COMPUTE_PGM_RSRC1_GFX6_GFX11_ENABLE_IEEE_MODE, kd.COMPUTE_PGM_RSRC1_GFX6_GFX11_ENABLE_IEEE_MODE_SHIFT, int(ieee_mode), "IEEE mode")
  if not gfx9:
    r1 = _set(r1, kd.COMPUTE_PGM_RSRC1_GFX10_PLUS_WGP_MODE, kd.COMPUTE_PGM_RSRC1_GFX10_PLUS_WGP_MODE_SHIFT, 1, "WGP mode")
    r1 = _set(r1, kd.COMPUTE_PGM_RSRC1_GFX10_PLUS_MEM_ORDERED, kd.COMPUTE_PGM_RSRC1_GFX10_PLUS_MEM_ORDERED_SHIFT, 1, "memory ordered")
  user = 2 * dispatch_ptr + 2 * queue_ptr + 2 * kernarg_ptr
  r2 = _set(0, kd.COMPUTE_PGM_RSRC2_USER_SGPR_COUNT, kd.COMPUTE_PGM_RSRC2_USER_SGPR_COUNT_SHIFT, user, "user SGPRs")
  r2 = _set(r2, kd.COMPUTE_PGM_RSRC2_ENABLE_PRIVATE_SEGMENT, kd.COMPUTE_PGM_RSRC2_ENABLE_PRIVATE_SEGMENT_SHIFT, int(scratch_size > 0), "scratch")
  for axis, on in zip("XYZ", workgroup_ids):
    mask = getattr(kd, f"COMPUTE_PGM_RSRC2_ENABLE_SGPR_WORKGROUP_ID_{axis}")
    r2 = _set(r2, mask, getattr(kd, f"COMPUTE_PGM_RSRC2_ENABLE_SGPR_WORKGROUP_ID_{axis}_SHIFT"), int(on), "workgroup id")
  r2 = _set(r2, kd.COMPUTE_PGM_RSRC2_ENABLE_VGPR_WORKITEM_ID, kd.COMPUTE_PGM_RSRC2_ENABLE_VGPR_WORKITEM_ID_SHIFT, workitem_id_dims - 1, "workitem id dims")
  d.compute_pgm_rsrc1, d.compute_pgm_rsrc2 = r1, r2
  props = 0
  for on, name in ((dispatch_ptr, "DISPATCH_PTR"), (queue_ptr, "QUEUE_PTR"), (kernarg_ptr, "KERNARG_SEGMENT_PTR")):
    if on: props |= getattr(kd, f"KERNEL_CODE_PROPERTY_ENABLE_SGPR_{name}")
  if wave32: props |= kd.KERNEL_CODE_PROPERTY_ENABLE_WAVEFRONT_SIZE32
  d.kernel_code_properties = props
  return d


@dataclass
class KernelImage:
  """One kernel to write: its machine code, descriptor and metadata (the msgpack map of amdhsa.kernels)."""
  name: str
  code: bytes
  descriptor: Any
  metadata: dict[str, Any] = field(default_factory=dict)


def _align(n: int, a: int) -> int:
  return (n + a - 1) // a * a


def write_code_object(arch: str, kernels: list[KernelImage]) -> bytes:
  """An ET_DYN HSA code object (v5) holding `kernels`."""
  from hcq.autogen import amdgpu_elf as E
  from hcq.autogen import amdgpu_kd as kd
  mach = getattr(E, f"EF_AMDGPU_MACH_AMDGCN_{arch.upper()}", None)
  if mach is None: raise ValueError(f"unknown AMDGPU arch {arch!r}")
  if not kernels: raise ValueError("a code object needs at least one kernel")
  meta = {"amdhsa.kernels": [{".name": k.name, ".symbol": f"{k.name}.kd", ".kernarg_segment_size": k.descriptor.kernarg_size,
                              ".group_segment_fixed_size": k.descriptor.group_segment_fixed_size,
                              ".private_segment_fixed_size": k.descriptor.private_segment_fixed_size,
                              ".kernarg_segment_align": 8,
                              ".wavefront_size": 32 if k.descriptor.kernel_code_properties & kd.KERNEL_CODE_PROPERTY_ENABLE_WAVEFRONT_SIZE32 else 64,
                              ".max_flat_workgroup_size": 1024, **k.metadata} for k in kernels],
          "amdhsa.target": f"amdgcn-amd-amdhsa--{arch}", "amdhsa.version": [1, 2]}
  desc = pack(meta)
  note = struct.pack("<III", 7, len(desc), E.NT_AMDGPU_METADATA) + b"AMDGPU\0\0" + desc + b"\0" * (-len(desc) % 4)

  names = [n for k in kernels for n in (k.name, f"{k.name}.kd")]
  dynstr = b"\0" + b"".join(n.encode() + b"\0" for n in names)
  name_off = {}
  pos = 1
  for n in names:
    name_off[n] = pos
    pos += len(n) + 1
  nsyms = 1 + len(names)
  ehdr, phdr, shdr, sym, dyn = (ctypes.sizeof(getattr(E, f"struct_Elf64_{t}")) for t in ("Ehdr", "Phdr", "Shdr", "Sym", "Dyn"))
  nph = 5
  # read-only segment: headers, .note, .dynsym, .hash, .dynstr, .rodata (descriptors)
  note_off = _align(ehdr + nph * phdr, 4)
  dynsym_off = _align(note_off + len(note), 8)
  hash_off = dynsym_off + nsyms * sym
  hash_bytes = struct.pack(f"<II{1 + nsyms}I", 1, nsyms, nsyms - 1, 0, *range(nsyms - 1))  # one bucket: a chain through every symbol
  dynstr_off = hash_off + len(hash_bytes)
  rodata_off = _align(dynstr_off + len(dynstr), 64)
  rodata_end = rodata_off + 64 * len(kernels)
  text_off = _align(rodata_end, 256)
  code_offs = []
  pos = text_off
  for k in kernels:
    code_offs.append(pos)
    pos = _align(pos + len(k.code), 256)
  text_end = pos
  dynamic_off = _align(text_end, 8)
  # Each segment starts on a page of its own in memory (as lld lays them out): vaddr = file offset + this shift
  text_shift, dynamic_shift = PAGE, 2 * PAGE
  dynamic = [(E.DT_HASH, hash_off), (E.DT_STRTAB, dynstr_off), (E.DT_SYMTAB, dynsym_off), (E.DT_STRSZ, len(dynstr)), (E.DT_SYMENT, sym), (E.DT_NULL, 0)]
  dynamic_bytes = b"".join(struct.pack("<qQ", t, v) for t, v in dynamic)
  shstr = b"\0.note\0.dynsym\0.hash\0.dynstr\0.rodata\0.text\0.dynamic\0.shstrtab\0"
  shstr_off = dynamic_off + len(dynamic_bytes)
  sh_off = _align(shstr_off + len(shstr), 8)

  out = bytearray(sh_off + 9 * shdr)
  h = E.struct_Elf64_Ehdr()
  h.e_ident[:16] = list(b"\x7fELF") + [E.ELFCLASS64, E.ELFDATA2LSB, 1, E.ELFOSABI_AMDGPU_HSA, E.ELFABIVERSION_AMDGPU_HSA_V5] + [0] * 7
  if arch.startswith("gfx9"): mach |= E.EF_AMDGPU_FEATURE_XNACK_ANY_V4 | E.EF_AMDGPU_FEATURE_SRAMECC_ANY_V4  # as llvm-mc marks gfx942
  h.e_type, h.e_machine, h.e_version, h.e_flags = E.ET_DYN, E.EM_AMDGPU, 1, mach
  h.e_phoff, h.e_shoff, h.e_ehsize, h.e_phentsize, h.e_phnum, h.e_shentsize, h.e_shnum, h.e_shstrndx = ehdr, sh_off, ehdr, phdr, nph, shdr, 9, 8
  out[0:ehdr] = bytes(h)
  segments = [(E.PT_LOAD, E.PF_R, 0, 0, rodata_end, PAGE), (E.PT_LOAD, E.PF_R | E.PF_X, text_off, text_shift, text_end - text_off, PAGE),
              (E.PT_LOAD, E.PF_R | E.PF_W, dynamic_off, dynamic_shift, len(dynamic_bytes), PAGE),
              (E.PT_DYNAMIC, E.PF_R | E.PF_W, dynamic_off, dynamic_shift, len(dynamic_bytes), 8), (E.PT_NOTE, E.PF_R, note_off, 0, len(note), 4)]
  for i, (ptype, flags, off, shift, size, align) in enumerate(segments):
    p = E.struct_Elf64_Phdr(p_type=ptype, p_flags=flags, p_offset=off, p_vaddr=off + shift, p_paddr=off + shift, p_filesz=size, p_memsz=size, p_align=align)
    out[ehdr + i * phdr:ehdr + (i + 1) * phdr] = bytes(p)
  out[note_off:note_off + len(note)] = note
  for i, k in enumerate(kernels):
    for j, (name, value, size, kind, shndx) in enumerate(((k.name, code_offs[i] + text_shift, len(k.code), E.STT_FUNC, 6),
                                                          (f"{k.name}.kd", rodata_off + 64 * i, 64, E.STT_OBJECT, 5))):
      s = E.struct_Elf64_Sym(st_name=name_off[name], st_info=(E.STB_GLOBAL << 4) | kind, st_other=E.STV_PROTECTED, st_shndx=shndx,
                             st_value=value, st_size=size)
      at = dynsym_off + (1 + 2 * i + j) * sym
      out[at:at + sym] = bytes(s)
    d = type(k.descriptor).from_buffer_copy(bytes(k.descriptor))
    d.kernel_code_entry_byte_offset = code_offs[i] + text_shift - (rodata_off + 64 * i)
    out[rodata_off + 64 * i:rodata_off + 64 * (i + 1)] = bytes(d)
    out[code_offs[i]:code_offs[i] + len(k.code)] = k.code
  out[hash_off:hash_off + len(hash_bytes)] = hash_bytes
  out[dynstr_off:dynstr_off + len(dynstr)] = dynstr
  out[dynamic_off:dynamic_off + len(dynamic_bytes)] = dynamic_bytes
  out[shstr_off:shstr_off + len(shstr)] = shstr
  sections = [None, (".note", E.SHT_NOTE, E.SHF_ALLOC, note_off, len(note), 0, 0, 4, 0), (".dynsym", E.SHT_DYNSYM, E.SHF_ALLOC, dynsym_off, nsyms * sym, 4, 1, 8, sym),
              (".hash", E.SHT_HASH, E.SHF_ALLOC, hash_off, len(hash_bytes), 2, 0, 4, 4), (".dynstr", E.SHT_STRTAB, E.SHF_ALLOC, dynstr_off, len(dynstr), 0, 0, 1, 0),
              (".rodata", E.SHT_PROGBITS, E.SHF_ALLOC, rodata_off, 64 * len(kernels), 0, 0, 64, 0),
              (".text", E.SHT_PROGBITS, E.SHF_ALLOC | E.SHF_EXECINSTR, text_off, text_end - text_off, 0, 0, 256, 0),
              (".dynamic", E.SHT_DYNAMIC, E.SHF_ALLOC | E.SHF_WRITE, dynamic_off, len(dynamic_bytes), 4, 0, 8, dyn),
              (".shstrtab", E.SHT_STRTAB, 0, shstr_off, len(shstr), 0, 0, 1, 0)]
  shifts = {".text": text_shift, ".dynamic": dynamic_shift}
  for i, sec in enumerate(sections):
    if sec is None: continue
    name, stype, flags, off, size, link, info, align, entsize = sec
    addr = off + shifts.get(name, 0) if flags & E.SHF_ALLOC else 0
    s = E.struct_Elf64_Shdr(sh_name=shstr.index(name.encode() + b"\0"), sh_type=stype, sh_flags=flags, sh_addr=addr,
                            sh_offset=off, sh_size=size, sh_link=link, sh_info=info, sh_addralign=align, sh_entsize=entsize)
    out[sh_off + i * shdr:sh_off + (i + 1) * shdr] = bytes(s)
  return bytes(out)
