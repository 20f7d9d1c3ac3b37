"""Register operands for the DSL and the parser: v[0], s[4:7] (inclusive, as in assembly), ttmp[0], and the
special registers VCC, EXEC, M0, NULL, SCC, ..."""
from __future__ import annotations
import re


class Reg:
  """A register operand: file 'v' (index = VGPR number) or 's' (value = scalar operand encoding), `count`
  consecutive registers, `half` 'l'/'h' for a 16-bit half of a VGPR."""
  __slots__ = ("file", "value", "count", "half")

  def __init__(self, file: str, value: int, count: int = 1, half: str | None = None) -> None:
    self.file, self.value, self.count, self.half = file, value, count, half

  @property
  def l(self) -> "Reg": return Reg(self.file, self.value, 1, "l")  # noqa: E743 - the assembly spelling

  @property
  def h(self) -> "Reg": return Reg(self.file, self.value, 1, "h")

  def __neg__(self):
    return _modified()(self, neg=True)

  def __abs__(self):
    return _modified()(self, abs=True)

  def __eq__(self, other: object) -> bool:
    return isinstance(other, Reg) and (self.file, self.value, self.count, self.half) == (other.file, other.value, other.count, other.half)

  def __hash__(self) -> int: return hash((self.file, self.value, self.count, self.half))

  def __str__(self) -> str:
    if self.file in ("v", "a"):
      if self.half: return f"v{self.value}.{self.half}"
      f = self.file
      return f"{f}{self.value}" if self.count == 1 else f"{f}[{self.value}:{self.value + self.count - 1}]"
    name = SPECIAL_NAMES.get((self.value, self.count))
    if name: return name[1]
    file, first = ("ttmp", self.value - 108) if 108 <= self.value < 124 else ("s", self.value)
    return f"{file}{first}" if self.count == 1 else f"{file}[{first}:{first + self.count - 1}]"

  def __repr__(self) -> str:
    if self.file in ("v", "a"):
      f = self.file
      base = f"{f}[{self.value}]" if self.count == 1 else f"{f}[{self.value}:{self.value + self.count - 1}]"
      return base + (f".{self.half}" if self.half else "")
    name = SPECIAL_NAMES.get((self.value, self.count))
    if name: return name[0]
    file, first = ("ttmp", self.value - 108) if 108 <= self.value < 124 else ("s", self.value)
    return f"{file}[{first}]" if self.count == 1 else f"{file}[{first}:{first + self.count - 1}]"


_MODIFIED: list = []


def _modified():
  """hcq.asm.build.Modified, imported on first use (build imports this module), then kept: -v[1] is hot DSL code."""
  if not _MODIFIED:
    from hcq.asm.build import Modified
    _MODIFIED.append(Modified)
  return _MODIFIED[0]


class RegFile:
  """v[3] is one register; v[4:7] is four (inclusive, as assembly writes it)."""

  def __init__(self, file: str, first: int, size: int) -> None:
    self.file, self.first, self.size = file, first, size
    # one Reg per register, made once: v[i] is the hot path of DSL code (Reg objects are never changed)
    self.singles = tuple(Reg(file if file in ("v", "a") else "s", first + i, 1) for i in range(size))

  def __getitem__(self, key: int | slice) -> Reg:
    if type(key) is int and 0 <= key < self.size: return self.singles[key]
    if isinstance(key, slice):
      if key.step is not None or key.start is None or key.stop is None:
        raise IndexError(f"{self.file}[a:b] takes an inclusive range a:b, got {key}")
      lo, hi = key.start, key.stop
    else: lo = hi = key
    if not 0 <= lo <= hi < self.size: raise IndexError(f"{self.file}[{lo}:{hi}] is out of range ({self.file}0..{self.file}{self.size - 1})")
    return Reg(self.file if self.file in ("v", "a") else "s", self.first + lo, hi - lo + 1)


v = RegFile("v", 0, 256)
s = RegFile("s", 0, 106)
ttmp = RegFile("ttmp", 108, 16)
a = RegFile("a", 0, 256)  # gfx90a+ accumulation registers (AGPRs): MFMA operands, DS/FLAT/buffer data

# (encoding, count) -> (DSL name, assembly name)
SPECIAL_NAMES = {(106, 1): ("VCC_LO", "vcc_lo"), (107, 1): ("VCC_HI", "vcc_hi"), (106, 2): ("VCC", "vcc"),
                 (124, 1): ("NULL", "null"), (124, 2): ("NULL64", "null"), (125, 1): ("M0", "m0"),
                 (126, 1): ("EXEC_LO", "exec_lo"), (127, 1): ("EXEC_HI", "exec_hi"), (126, 2): ("EXEC", "exec"),
                 (235, 1): ("SRC_SHARED_BASE", "src_shared_base"), (236, 1): ("SRC_SHARED_LIMIT", "src_shared_limit"),
                 (237, 1): ("SRC_PRIVATE_BASE", "src_private_base"), (238, 1): ("SRC_PRIVATE_LIMIT", "src_private_limit"),
                 (239, 1): ("SRC_POPS_EXITING_WAVE_ID", "src_pops_exiting_wave_id"), (251, 1): ("VCCZ", "src_vccz"),
                 (252, 1): ("EXECZ", "src_execz"), (253, 1): ("SCC", "src_scc"), (254, 1): ("LDS_DIRECT", "src_lds_direct")}
VCC_LO, VCC_HI, VCC = Reg("s", 106), Reg("s", 107), Reg("s", 106, 2)
EXEC_LO, EXEC_HI, EXEC = Reg("s", 126), Reg("s", 127), Reg("s", 126, 2)
NULL, M0, SCC, VCCZ, EXECZ, LDS_DIRECT = Reg("s", 124), Reg("s", 125), Reg("s", 253), Reg("s", 251), Reg("s", 252), Reg("s", 254)
SRC_SHARED_BASE, SRC_SHARED_LIMIT = Reg("s", 235), Reg("s", 236)
SRC_PRIVATE_BASE, SRC_PRIVATE_LIMIT = Reg("s", 237), Reg("s", 238)
SRC_POPS_EXITING_WAVE_ID = Reg("s", 239)
NULL64 = Reg("s", 124, 2)
OFF = "off"

_REG = re.compile(r"^(v|s|ttmp|a)(?:(\d+)(\.[lh])?|\[\s*(\d+)\s*(?::\s*(\d+)\s*)?\])$")  # v1, v1.l, v[1:2], v[1]
_LIST = re.compile(r"^\[\s*((?:v|s|ttmp|a)\d+)((?:\s*,\s*(?:v|s|ttmp|a)\d+)*)\s*\]$")  # [s4, s5]: consecutive registers
_BY_NAME = {asm: (value, count) for (value, count), (_, asm) in SPECIAL_NAMES.items() if count == 1 or asm not in ("null",)}
_BY_NAME.update({"vcc": (106, 2), "exec": (126, 2), "null": (124, 1)})
_BY_NAME.update({"scc": (253, 1), "vccz": (251, 1), "execz": (252, 1), "lds_direct": (254, 1), "shared_base": (235, 1),
                 "shared_limit": (236, 1), "private_base": (237, 1), "private_limit": (238, 1), "pops_exiting_wave_id": (239, 1)})


_FILE_SIZE = {"v": 256, "a": 256, "s": 106, "ttmp": 16}  # s106 up are other registers' encodings (vcc_lo, ...)


def past_file(token: str, sgprs: int = 106) -> str | None:
  """Why a register token runs past its register file ('s[104:107] is past s105'), or None; `sgprs`: the arch's
  SGPR count (gfx9: 102)."""
  m = _REG.match(token)
  if not m: return None
  file = m.group(1)
  first, last = (int(m.group(2)),) * 2 if m.group(2) is not None else (int(m.group(4)), int(m.group(5) or m.group(4)))
  n = sgprs if file == "s" else _FILE_SIZE[file]
  return f"{token} is past {file}{n - 1} (the last {'VGPR' if file == 'v' else 'AGPR' if file == 'a' else 'SGPR' if file == 's' else 'trap register'})" \
    if last >= n else None


def parse_register(token: str, vgpr_lists: bool = True) -> Reg | None:
  """Assembly register text -> Reg, or None if the token is not a register (names are lower case: llvm-mc reads
  V1 or VCC_LO as a symbol)."""
  t = token
  lst = _LIST.match(t)
  if lst and (vgpr_lists or lst.group(1)[0] != "v" or not lst.group(2)):  # the text parser keeps [v1, v2] for an image's NSA addresses
    regs = [parse_register(x.strip()) for x in (lst.group(1) + lst.group(2)).split(",")]
    if any(r is None or r.count != 1 or r.half or r.file != regs[0].file or r.value != regs[0].value + i for i, r in enumerate(regs)): return None
    return Reg(regs[0].file, regs[0].value, len(regs))
  m = _REG.match(t)
  if m:
    file = m.group(1)
    if m.group(2) is not None: first, count = int(m.group(2)), 1
    else: first, count = int(m.group(4)), int(m.group(5) or m.group(4)) - int(m.group(4)) + 1
    if count < 1: return None
    if file == "v": return Reg("v", first, count, m.group(3)[1] if m.group(3) else None)
    if file == "a": return None if m.group(3) else Reg("a", first, count)
    if m.group(3) or past_file(t): return None  # s106 is not vcc_lo, nor ttmp16 null: parser.py names the error
    return Reg("s", first + (108 if file == "ttmp" else 0), count)
  if t in _BY_NAME:
    value, count = _BY_NAME[t]
    return Reg("s", value, count)
  return None
