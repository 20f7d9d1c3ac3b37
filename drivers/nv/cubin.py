"""A strict reader of cubins: the ELF images ptxas and nvcc make for one SM arch.

What the driver needs of each kernel: its code (.text.<kernel>), its attributes (.nv.info.<kernel>: the parameters'
offsets and sizes in constant bank 0, where the parameters start in the bank, the barriers it uses; .nv.info: the
register count, frame and stack sizes, keyed by the kernel's symbol), its constant banks (.nv.constant<N>.<kernel>),
its static shared memory (.nv.shared.<kernel>), the module's global variables (.nv.global, .nv.global.init) and the
relocations against what the loader places (code, constant banks, global initialisers). The layouts are the ones
cuobjdump -elf prints (CUDA 13.5): an attribute is `format:u8 attribute:u8` then a u16 (the value for EIFMT_HVAL and
EIFMT_BVAL, the size of the data that follows for EIFMT_SVAL). Anything outside the file, inconsistent or unknown where
it matters raises CubinError naming the byte offset and what is wrong; attributes the driver does not use are skipped.
"""
from __future__ import annotations
import struct
from dataclasses import dataclass, field

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
ELFOSABI_CUDA = (0x33, 0x41)  # the OS ABI byte of CUDA ELF: 0x33 before CUDA 13, 0x41 from ptxas 13
SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS, SHT_REL = 2, 3, 4, 8, 9
STT_OBJECT, STT_FUNC = 1, 2
STO_CUDA_ENTRY = 0x10  # st_other of a kernel entry (readelf prints it as <other>: 10)

# attribute formats and the attributes the driver reads (numbers as cuobjdump names them)
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
EIATTR_MAX_THREADS = 0x05
EIATTR_PARAM_CBANK = 0x0A
EIATTR_REQNTID = 0x10
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19
EIATTR_MAXREG_COUNT = 0x1B
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F
EIATTR_NUM_BARRIERS = 0x4C
KPARAM_CBANK = 0x1F  # KPARAM_INFO's cbank field when the parameter lives in the constant bank
STACK_SIZE_UNKNOWN = 0xFFFFFFFF  # EIATTR_MIN/MAX_STACK_SIZE of a kernel whose stack ptxas cannot bound (recursion, indirect calls)


@dataclass(frozen=True)
class DriverConstants:
  """Where ptxas's SASS reads what the driver puts in constant bank 0 below the parameters, per arch (read off ptxas
  13.5's code with cuobjdump -sass: %ntid.xyz and %nctaid.xyz are loaded from the bank, the stack pointer R1 starts at
  `stack_top`, cvta.local adds the local window to a stack address, cvta.shared the shared window on sm_80-89 (sm_90
  and later read that one from the special register SR_SWINHI); tests/test_nv_program.py checks these against the
  disassembly on every arch)."""
  ntid: int                  # block dimensions x, y, z: three u32
  nctaid: int                # grid dimensions x, y, z: three u32
  stack_top: int             # u32: where each thread's stack starts, in its local address space (the stack grows down)
  memory_descriptor: int     # u64 that plain global loads and stores name (desc[UR]): the default cache policy, the slot a
                             # createpolicy result takes for .L2::cache_hint accesses (0: no policy; see the mock's compute.py)
  local_window: int          # u64: the generic address of local memory (SET_SHADER_LOCAL_MEMORY_WINDOW)
  shared_window: int | None  # u64: the generic address of shared memory (SET_SHADER_SHARED_MEMORY_WINDOW), where the code reads it


DRIVER_CONSTANTS = {**dict.fromkeys(("sm_80", "sm_86", "sm_89"), DriverConstants(0x0, 0xC, 0x28, 0x118, 0x20, 0x18)),
                    "sm_90": DriverConstants(0x0, 0xC, 0x28, 0x208, 0x20, None),
                    **dict.fromkeys(("sm_100", "sm_120"), DriverConstants(0x360, 0x370, 0x37C, 0x358, 0x2F8, None))}


class CubinError(ValueError):
  """A malformed cubin: the message names the byte offset and what is wrong."""


@dataclass(frozen=True)
class KernelParam:
  """One parameter as ptxas placed it: its ordinal (declaration order), byte offset from the parameter base, size."""
  ordinal: int
  offset: int
  size: int


@dataclass(frozen=True)
class CubinVariable:
  """A module-scope variable as ptxas placed it (an OBJECT symbol): `section` is .nv.global (zeroed), .nv.global.init
  (initialised) or .nv.constant3 (PTX .const data, the module's constant bank), at `offset`, `size` bytes."""
  name: str
  section: str
  offset: int
  size: int


VARIABLE_SECTIONS = (".nv.global", ".nv.global.init", ".nv.constant3")


def bank_number(section: str) -> int:
  """The constant bank of a `.nv.constant<N>[.<kernel>]` section name."""
  return int(section[len(".nv.constant"):].partition(".")[0])


@dataclass
class CubinKernel:
  """One kernel entry of a cubin."""
  name: str
  code: bytes                     # .text.<name>
  code_offset: int                # where .text.<name> starts in the file
  params: list[KernelParam]       # by ordinal
  param_base: int                 # where the parameters start in constant bank 0 (EIATTR_PARAM_CBANK)
  param_size: int                 # bytes of parameters (EIATTR_CBANK_PARAM_SIZE)
  registers: int                  # EIATTR_REGCOUNT
  frame_size: int = 0             # bytes of per-thread stack frame (EIATTR_FRAME_SIZE)
  stack_size: int = 0             # per-thread stack the kernel needs (the larger of EIATTR_MIN/MAX_STACK_SIZE and the frame)
  shared_size: int = 0            # static shared memory (.nv.shared.<name>)
  barriers: int = 0               # EIATTR_NUM_BARRIERS
  max_threads: tuple[int, int, int] | None = None  # .maxntid (EIATTR_MAX_THREADS)
  reqntid: tuple[int, int, int] | None = None      # .reqntid (EIATTR_REQNTID)
  constant_banks: dict[int, bytes] = field(default_factory=dict)  # bank -> initial contents (.nv.constant<N>.<name>)
  relocations: list["Relocation"] = field(default_factory=list)  # against its code, its constant banks and .nv.global.init
  globals: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # .nv.global / .nv.global.init -> (bytes, initial data)
  variables: dict[str, CubinVariable] = field(default_factory=dict)    # the module's .global and .const variables by name
  stack_unbounded: bool = False   # ptxas could not bound the stack (STACK_SIZE_UNKNOWN): the launch must choose one


# R_CUDA_* relocation types: the numbers ptxas 13 writes and the names cuobjdump -elf prints for them (tests/test_nv_program.py
# holds this table to cuobjdump on ptxas's output, relocatable (-c) and not)
R_CUDA = {2: "R_CUDA_64", 4: "R_CUDA_G64", 56: "R_CUDA_ABS32_LO_32", 57: "R_CUDA_ABS32_HI_32",
        75: "R_CUDA_ABS55_16_34", 112: "R_CUDA_UNIFIED32_LO_32", 113: "R_CUDA_UNIFIED32_HI_32", 114: "R_CUDA_ABS56_16_34"}


@dataclass(frozen=True)
class Relocation:
  """One relocation against a section the loader places: `target` (.text.<kernel>, .nv.constant<N>[.<kernel>] or
  .nv.global.init) at `offset`, of `type`, to `symbol` at `value` in `symbol_section` ("" when undefined) plus `addend`
  (RELA's, or None for REL: the addend is in the patched place)."""
  target: str
  offset: int
  type: int
  symbol: str
  symbol_section: str
  value: int
  addend: int | None

  @property
  def type_name(self) -> str:
    return R_CUDA.get(self.type, f"R_CUDA type {self.type}")


@dataclass
class Cubin:
  """A parsed cubin: its SM arch ("sm_90") and its kernels by name."""
  arch: str
  kernels: dict[str, CubinKernel]


@dataclass(frozen=True)
class _Section:
  index: int
  name: str
  type: int
  flags: int
  offset: int
  size: int
  link: int
  info: int
  entsize: int
  header_at: int


def _unpack(fmt: str, data: bytes, off: int, what: str) -> tuple:
  n = struct.calcsize(fmt)
  if off < 0 or off + n > len(data): raise CubinError(f"offset {off:#x}: {what} ({n} bytes) runs past the end of the {len(data)}-byte file")
  return struct.unpack_from(fmt, data, off)


def _cstr(table: bytes, off: int, where: str) -> str:
  end = table.find(b"\0", off)
  if off >= len(table) or end < 0: raise CubinError(f"{where}: name offset {off:#x} is outside its {len(table)}-byte string table")
  try:
    return table[off:end].decode("ascii")
  except UnicodeDecodeError:
    raise CubinError(f"{where}: name at string table offset {off:#x} is not ASCII") from None


def arch_of_flags(e_flags: int) -> str:
  """The SM arch an ELF header's e_flags name: bits 15:8 hold the SM version (0x5a = sm_90), as cuobjdump prints them."""
  return f"sm_{(e_flags >> 8) & 0xFF}"


def read_cubin(data: bytes) -> Cubin:
  """Parse a cubin; CubinError naming the offset on anything malformed."""
  data = bytes(data)
  if data[:4] != ELF_MAGIC: raise CubinError(f"offset 0x0: not an ELF file (magic {data[:4]!r}, a cubin starts with {ELF_MAGIC!r})")
  ei_class, ei_data, ei_version, ei_osabi = _unpack("4B", data, 4, "ELF identification")
  if ei_class != 2 or ei_data != 1: raise CubinError(f"offset 0x4: ELF class {ei_class}, data {ei_data}: a cubin is 64-bit little-endian (2, 1)")
  if ei_osabi not in ELFOSABI_CUDA: raise CubinError(f"offset 0x7: OS ABI {ei_osabi:#x}, a cubin's is CUDA's (0x33 or 0x41)")
  (e_type, e_machine, e_version, e_entry, e_phoff, e_shoff, e_flags, e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum,
   e_shstrndx) = _unpack("<HHIQQQIHHHHHH", data, 16, "ELF header")
  if e_machine != EM_CUDA: raise CubinError(f"offset 0x12: machine {e_machine}, a cubin's is EM_CUDA ({EM_CUDA})")
  if e_shentsize != 64: raise CubinError(f"offset 0x3a: section header size {e_shentsize}, ELF64's is 64")
  if e_shnum == 0 or e_shoff + 64 * e_shnum > len(data):
    raise CubinError(f"offset {e_shoff:#x}: {e_shnum} section headers do not fit the {len(data)}-byte file")
  if e_shstrndx >= e_shnum: raise CubinError(f"offset 0x3e: section name table index {e_shstrndx} >= {e_shnum} sections")
  raw = []
  for i in range(e_shnum):
    at = e_shoff + 64 * i
    name, typ, flags, _addr, off, size, link, info, _align, entsize = _unpack("<IIQQQQIIQQ", data, at, f"section header {i}")
    if typ != SHT_NOBITS and (off + size > len(data)):
      raise CubinError(f"offset {at:#x}: section {i}'s data [{off:#x}, {off + size:#x}) runs past the end of the {len(data)}-byte file")
    raw.append((name, typ, flags, off, size, link, info, entsize, at))
  _, _, _, sh_off, sh_size, *_ = raw[e_shstrndx]
  names = data[sh_off:sh_off + sh_size]
  sections = [_Section(i, _cstr(names, r[0], f"section header {i} at {r[8]:#x}") if i else "", *r[1:]) for i, r in enumerate(raw)]
  by_name = {s.name: s for s in sections}
  body = lambda s: data[s.offset:s.offset + s.size] if s.type != SHT_NOBITS else b""
  symbols = _symbols(data, sections, body)
  kernels = {}
  for sym_index, (name, value, size, info, other, shndx) in enumerate(symbols):
    if info & 0xF != STT_FUNC or not other & STO_CUDA_ENTRY: continue
    text = by_name.get(f".text.{name}")
    if text is None or text.index != shndx:
      raise CubinError(f"symbol {sym_index} ({name}): a kernel entry whose code is not in a section .text.{name} (section {shndx})")
    kernels[name] = _kernel(name, sym_index, text, data, sections, by_name, body, symbols)
  if not kernels: raise CubinError("the cubin has no kernel entry (no FUNC symbol marked as an entry with a .text.<name> section)")
  return Cubin(arch_of_flags(e_flags), kernels)


def _symbols(data: bytes, sections: list[_Section], body) -> list[tuple[str, int, int, int, int, int]]:
  symtab = [s for s in sections if s.type == SHT_SYMTAB]
  if len(symtab) != 1: raise CubinError(f"the cubin has {len(symtab)} symbol tables, not 1")
  st = symtab[0]
  if st.entsize != 24 or st.size % 24: raise CubinError(f"offset {st.header_at:#x}: symbol table entries of {st.entsize} bytes in {st.size}, ELF64's are 24")
  if st.link >= len(sections) or sections[st.link].type != SHT_STRTAB:
    raise CubinError(f"offset {st.header_at:#x}: the symbol table's string table (section {st.link}) is not a string table")
  strtab = body(sections[st.link])
  out = []
  for i in range(st.size // 24):
    at = st.offset + 24 * i
    name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", data, at)
    if shndx >= len(sections) and shndx < 0xFF00: raise CubinError(f"offset {at:#x}: symbol {i} is in section {shndx}, of {len(sections)}")
    out.append((_cstr(strtab, name, f"symbol {i} at {at:#x}"), value, size, info, other, shndx))
  return out


def _attributes(data: bytes, s: _Section) -> list[tuple[int, int, int, bytes]]:
  """(attribute, format, file offset, value bytes) of an .nv.info section; a u16 value is returned as 2 bytes."""
  out, pos, end = [], s.offset, s.offset + s.size
  while pos < end:
    if pos + 4 > end: raise CubinError(f"offset {pos:#x}: {s.name} ends inside an attribute header ({end - pos} bytes left, 4 needed)")
    fmt, attr, value = struct.unpack_from("<BBH", data, pos)
    if fmt == EIFMT_SVAL:
      if pos + 4 + value > end: raise CubinError(f"offset {pos:#x}: {s.name} attribute {attr:#x} holds {value} bytes, {end - pos - 4} are left")
      out.append((attr, fmt, pos, data[pos + 4:pos + 4 + value]))
      pos += 4 + value
    elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
      out.append((attr, fmt, pos, data[pos + 2:pos + 4]))
      pos += 4
    else:
      raise CubinError(f"offset {pos:#x}: {s.name} attribute {attr:#x} has format {fmt}; valid formats: 1 (NVAL), 2 (BVAL), 3 (HVAL), 4 (SVAL)")
  return out


def _sval(attr: int, fmt: int, pos: int, value: bytes, size: int, where: str) -> tuple:
  if fmt != EIFMT_SVAL or len(value) % size or not value:
    raise CubinError(f"offset {pos:#x}: {where} attribute {attr:#x} must be EIFMT_SVAL data of a multiple of {size} bytes, "
                     f"got format {fmt} with {len(value)} bytes")
  return struct.unpack(f"<{len(value) // 4}I", value)


def _hval(attr: int, fmt: int, pos: int, value: bytes, where: str) -> int:
  if fmt not in (EIFMT_HVAL, EIFMT_BVAL): raise CubinError(f"offset {pos:#x}: {where} attribute {attr:#x} must be EIFMT_HVAL, got format {fmt}")
  return struct.unpack("<H", value)[0] & (0xFF if fmt == EIFMT_BVAL else 0xFFFF)


def _kernel(name: str, sym_index: int, text: _Section, data: bytes, sections, by_name, body, symbols) -> CubinKernel:
  info = by_name.get(f".nv.info.{name}")
  if info is None: raise CubinError(f"kernel {name}: no .nv.info.{name} section (its parameter layout)")
  where = f".nv.info.{name}"
  params, param_base, param_size, barriers, max_threads, reqntid = {}, None, None, 0, None, None
  for attr, fmt, pos, value in _attributes(data, info):
    if attr == EIATTR_KPARAM_INFO:
      _index, ordinal_offset, flags = _sval(attr, fmt, pos, value, 12, where)
      ordinal, offset, size = ordinal_offset & 0xFFFF, ordinal_offset >> 16, (flags >> 18) & 0x3FFF
      if (flags >> 12) & 0x1F != KPARAM_CBANK: raise CubinError(f"offset {pos:#x}: parameter {ordinal} of {name} is not in the constant bank")
      if ordinal in params: raise CubinError(f"offset {pos:#x}: parameter {ordinal} of {name} is described twice")
      params[ordinal] = KernelParam(ordinal, offset, size)
    elif attr == EIATTR_PARAM_CBANK:
      _bank_symbol, packed = _sval(attr, fmt, pos, value, 8, where)
      param_base, param_size_cb = packed & 0xFFFF, packed >> 16
      if param_size is None: param_size = param_size_cb
    elif attr == EIATTR_CBANK_PARAM_SIZE: param_size = _hval(attr, fmt, pos, value, where)
    elif attr == EIATTR_NUM_BARRIERS: barriers = _hval(attr, fmt, pos, value, where)
    elif attr in (EIATTR_MAX_THREADS, EIATTR_REQNTID):
      dims = _sval(attr, fmt, pos, value, 12, where)
      if attr == EIATTR_MAX_THREADS: max_threads = dims
      else: reqntid = dims
  if param_base is None: raise CubinError(f"kernel {name}: {where} has no EIATTR_PARAM_CBANK (where its parameters start in constant bank 0)")
  ordered = [params[i] for i in sorted(params)]
  if sorted(params) != list(range(len(params))): raise CubinError(f"kernel {name}: parameter ordinals {sorted(params)} are not 0..{len(params) - 1}")
  for p in ordered:
    if p.offset + p.size > (param_size or 0):
      raise CubinError(f"kernel {name}: parameter {p.ordinal} at [{p.offset}, {p.offset + p.size}) is outside the {param_size}-byte parameter space")
  regs, frame, stack, unbounded = _per_function(data, by_name, sym_index, name)
  banks = {}
  for s in sections:  # the kernel's own banks (.nv.constant0.<name>, ...) and the module's (.nv.constant3: .const data)
    if not s.name.startswith(".nv.constant"): continue
    digits, _, owner = s.name[len(".nv.constant"):].partition(".")
    if owner not in ("", name): continue
    if not digits.isdigit(): raise CubinError(f"offset {s.header_at:#x}: constant bank section {s.name} has no bank number")
    if owner or int(digits) not in banks: banks[int(digits)] = body(s)
  if 0 in banks and len(banks[0]) < param_base + (param_size or 0):
    raise CubinError(f"kernel {name}: .nv.constant0.{name} holds {len(banks[0])} bytes, fewer than the parameters need ({param_base} + {param_size})")
  shared = by_name.get(f".nv.shared.{name}")
  bank_sections = [s for s in sections if s.name.startswith(".nv.constant") and s.name[len(".nv.constant"):].partition(".")[2] in ("", name)]
  global_sections = {n: (by_name[n].size, body(by_name[n])) for n in (".nv.global", ".nv.global.init") if n in by_name}
  targets = [text, *bank_sections, *([by_name[".nv.global.init"]] if ".nv.global.init" in by_name else [])]
  return CubinKernel(name, body(text), text.offset, ordered, param_base, param_size or 0, regs, frame, max(stack, frame),
                     shared.size if shared else 0, barriers, max_threads, reqntid, banks, _relocations(data, sections, targets, symbols),
                     global_sections, _variables(sections, symbols), stack_unbounded=unbounded)


def _variables(sections: list[_Section], symbols) -> dict[str, CubinVariable]:
  """The OBJECT symbols in the sections a loader places for the module (VARIABLE_SECTIONS); one outside its section is
  a CubinError."""
  out = {}
  for i, (name, value, size, info, _other, shndx) in enumerate(symbols):
    if info & 0xF != STT_OBJECT or not 0 < shndx < len(sections) or sections[shndx].name not in VARIABLE_SECTIONS: continue
    s = sections[shndx]
    if value + size > s.size: raise CubinError(f"symbol {i} ({name}): [{value:#x}, {value + size:#x}) is outside {s.name} ({s.size} bytes)")
    out[name] = CubinVariable(name, s.name, value, size)
  return out


def _per_function(data: bytes, by_name, sym_index: int, name: str) -> tuple[int, int, int, bool]:
  """(registers, frame size, stack size, whether ptxas left the stack unbounded) of the kernel whose symbol is
  `sym_index`, from the file-wide .nv.info."""
  info = by_name.get(".nv.info")
  if info is None: raise CubinError(f"kernel {name}: no .nv.info section (its register count)")
  regs, frame, stack, unbounded = None, 0, 0, False
  for attr, fmt, pos, value in _attributes(data, info):
    if attr not in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE, EIATTR_MIN_STACK_SIZE, EIATTR_MAX_STACK_SIZE): continue
    sym, amount = _sval(attr, fmt, pos, value, 8, ".nv.info")
    if sym != sym_index: continue
    if attr == EIATTR_REGCOUNT: regs = amount
    elif attr == EIATTR_FRAME_SIZE: frame = amount
    elif amount == STACK_SIZE_UNKNOWN: unbounded = True
    else: stack = max(stack, amount)
  if regs is None: raise CubinError(f"kernel {name}: .nv.info has no EIATTR_REGCOUNT for its symbol {sym_index}")
  if not 1 <= regs <= 255: raise CubinError(f"kernel {name}: register count {regs}; valid 1..255")
  return regs, frame, stack, unbounded


def _relocations(data: bytes, sections, targets: list[_Section], symbols) -> list[Relocation]:
  """The relocations against `targets` (the sections the loader places), with their symbols resolved to a section."""
  out, by_index = [], {t.index: t for t in targets}
  for s in sections:
    if s.type not in (SHT_REL, SHT_RELA) or s.info not in by_index: continue
    target, size = by_index[s.info], 24 if s.type == SHT_RELA else 16
    if s.size % size: raise CubinError(f"offset {s.header_at:#x}: {s.name} is {s.size} bytes, not whole {size}-byte entries")
    for at in range(s.offset, s.offset + s.size, size):
      r_offset, r_info = struct.unpack_from("<QQ", data, at)
      addend = struct.unpack_from("<q", data, at + 16)[0] if s.type == SHT_RELA else None
      if r_offset + 4 > target.size: raise CubinError(f"offset {at:#x}: relocation at {r_offset:#x} is outside {target.name} ({target.size} bytes)")
      sym = r_info >> 32
      if sym >= len(symbols): raise CubinError(f"offset {at:#x}: relocation names symbol {sym}, the symbol table has {len(symbols)}")
      name, value, _, _, _, shndx = symbols[sym]
      out.append(Relocation(target.name, r_offset, r_info & 0xFFFFFFFF, name, sections[shndx].name if 0 < shndx < len(sections) else "",
                            value, addend))
  return out
