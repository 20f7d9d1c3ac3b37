"""AMD register modules hcq.autogen.am.<block> from linux-source's asic_reg `<block>_offset.h` + `<block>_sh_mask.h`.

offset.h defines `regFOO 0x1bb2` and `regFOO_BASE_IDX 0` (older blocks `mmFOO`; indirect `ixFOO` and PCI
config `cfgFOO` registers have no BASE_IDX); sh_mask.h defines `FOO__FIELD__SHIFT` and `FOO__FIELD_MASK`.
clang reads both headers and evaluates every value; this module only sorts names into registers and
fields, checks that they agree, and writes the compact table that hcq.autogen.support reads lazily.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from pathlib import Path

from hcq.autogen.generator import clangtools
from hcq.autogen.generator.clangtools import GeneratorError
from hcq.autogen.generator.sources import LINUX_SOURCE_PKG, generated_header_line, linux_source
from hcq.autogen.support import Register, RegisterTable

# (module name under hcq.autogen.am, offset header, sh_mask header, linux-source package), paths below its drivers/gpu/drm/amd.
# gc_12_0_0 (RDNA4) first appears in Linux 6.11 and gc_9_4_3 (MI300) after 6.1, so both come from linux-source-6.12.
BLOCKS: list[tuple[str, str, str, str]] = [
  (name, f"include/asic_reg/{folder}/{name}_offset.h", f"include/asic_reg/{folder}/{name}_sh_mask.h", package)
  for folder, name, package in [("gc", "gc_11_0_0", LINUX_SOURCE_PKG), ("nbio", "nbio_4_3_0", LINUX_SOURCE_PKG),
                                ("oss", "osssys_6_0_0", LINUX_SOURCE_PKG), ("hdp", "hdp_6_0_0", LINUX_SOURCE_PKG),
                                ("mmhub", "mmhub_3_0_0", LINUX_SOURCE_PKG),
                                ("gc", "gc_12_0_0", "linux-source-6.12"),
                                ("gc", "gc_9_4_3", "linux-source-6.12")]
]

# Fields the upstream headers define inconsistently, by C name (BLOCK__FIELD), with what is wrong. Such a
# field keeps its raw C constants but is left out of Register.fields, since encode/decode could only get it
# wrong. A defect not listed here stops the generator: look at the header, then list it with the reason.
KNOWN_DEFECTS: dict[str, str] = {
  "GL1C_UTCL0_CNTL1__FORCE_IN_ORDER": "gc_11_0_0: mask 0x06000000 starts below shift 27 and overlaps FORCE_MISS",
  "SQ_CONFIG__DISABLE_SGPR_RD_KILL": "gc_11_0_0: __SHIFT without _MASK",
  "SQ_CONFIG__WCLK_HYSTERESIS_CNT": "gc_11_0_0: __SHIFT without _MASK",
  "PCIE_LC_RXRECOVER_RXSTANDBY_CNTL__LC_RX_L0S_STANDBY_EN": "nbio_4_3_0: _MASK without __SHIFT",
}

_LOWER = "abcdefghijklmnopqrstuvwxyz"


@dataclass
class _Row:
  """Everything under one bare name (FOO): its registers (prefix, offset, segment) and fields (C name -> [shift, mask])."""
  registers: list[tuple[str, int, int | None]] = field(default_factory=list)
  fields: dict[str, list[int | None]] = field(default_factory=dict)
  dropped: dict[str, str] = field(default_factory=dict)  # C field name -> defect


def read_values(offset_h: Path, sh_mask_h: Path) -> tuple[list[clangtools.Macro], dict[str, int | float | str]]:
  """The macros of both headers in definition order, and their values as clang evaluates them."""
  files = [Path(offset_h).resolve(), Path(sh_mask_h).resolve()]
  source = "".join(f'#include "{f}"\n' for f in files)
  # A redefinition with a different value would silently win in C; make it a parse error instead.
  tu = clangtools.parse(source, ["-Werror=macro-redefined"])
  found = [m for m in clangtools.macros(tu, {str(f) for f in files}) if m.params is not None or m.body]  # drop include guards
  values = clangtools.evaluate({m.name: m.name for m in found if m.params is None}, source, [])
  return found, values


def _split_prefix(name: str) -> tuple[str, str]:
  rest = name.lstrip(_LOWER)
  return name[:len(name) - len(rest)], rest


def _collect(found: list[clangtools.Macro], values: dict, offset_file: str) -> dict[str, _Row]:
  """Sort macros into rows by bare name; GeneratorError listing every name that fits neither header's scheme."""
  errors: list[str] = []
  rows: dict[str, _Row] = {}
  offsets: dict[str, tuple[str, str, int]] = {}
  segments: dict[str, int] = {}
  for m in found:
    where = f"{Path(m.file).name}:{m.line}: {m.name}"
    value = values.get(m.name)
    if m.params is not None or not isinstance(value, int) or value < 0:
      errors.append(f"{where}: not a non-negative integer constant ({' '.join(m.body)})")
      continue
    if m.file == offset_file:
      prefix, rest = _split_prefix(m.name)
      if not prefix or not rest or "__" in rest:
        errors.append(f"{where}: not a register name (lower-case prefix, then a name without '__')")
      elif rest.endswith("_BASE_IDX"):
        segments[m.name[:-9]] = value
      else:
        offsets[m.name] = (prefix, rest, value)
    else:
      kind, core = (0, m.name[:-7]) if m.name.endswith("__SHIFT") else (1, m.name[:-5]) if m.name.endswith("_MASK") else (None, "")
      parts = core.split("__")
      if kind is None or len(parts) != 2 or not all(parts) or _split_prefix(parts[0])[0]:
        errors.append(f"{where}: not a field constant REGISTER__FIELD__SHIFT or REGISTER__FIELD_MASK")
        continue
      rows.setdefault(parts[0], _Row()).fields.setdefault(parts[1], [None, None])[kind] = value
  for stem in segments:
    if stem not in offsets: errors.append(f"{stem}_BASE_IDX: BASE_IDX without a register {stem}")
  if errors: raise GeneratorError(f"{len(errors)} macros do not fit the register header scheme:\n  " + "\n  ".join(errors[:20]))
  # Registers first, in offset.h order; bare names that only have fields (kept as constants) after them.
  ordered: dict[str, _Row] = {}
  for name, (prefix, bare, offset) in offsets.items():
    ordered.setdefault(bare, rows.pop(bare, None) or _Row()).registers.append((prefix, offset, segments.get(name)))
  ordered.update(rows)
  return ordered


def _field_defect(shift: int | None, mask: int | None) -> str | None:
  """Why a (shift, mask) pair is not a usable field, or None: the mask must be one run of bits starting at shift."""
  if shift is None: return "_MASK without __SHIFT"
  if mask is None: return "__SHIFT without _MASK"
  run = mask >> shift
  if mask == 0 or mask & ((1 << shift) - 1) or not run & 1 or run & (run + 1):
    return f"mask {mask:#x} is not one run of bits starting at shift {shift}"
  return None


def _check(rows: dict[str, _Row]) -> None:
  """Drop KNOWN_DEFECTS that are defective; GeneratorError for any other inconsistent field or overlap."""
  errors: list[str] = []

  def bad(bare: str, name: str, why: str) -> None:
    if f"{bare}__{name}" in KNOWN_DEFECTS: rows[bare].dropped[name] = why
    else: errors.append(f"{bare}__{name}: {why}")

  for bare, row in rows.items():
    lower: dict[str, str] = {}
    usable: dict[str, int] = {}  # field -> mask
    for name, (shift, mask) in row.fields.items():
      if (other := lower.setdefault(name.lower(), name)) != name: errors.append(f"{bare}: fields {other} and {name} differ only in case")
      if (why := _field_defect(shift, mask)) is not None: bad(bare, name, why)
      else: usable[name] = mask
    used: dict[int, str] = {}  # bit -> field, over the usable fields
    for name, mask in usable.items():
      clash = sorted({used[b] for b in range(mask.bit_length()) if mask >> b & 1 and b in used})
      if clash:
        bad(bare, name, f"bits {mask:#x} overlap field(s) {', '.join(clash)}")
        continue
      used.update({b: name for b in range(mask.bit_length()) if mask >> b & 1})
  if errors: raise GeneratorError(f"{len(errors)} inconsistent register fields (list real header defects in registers.KNOWN_DEFECTS):\n  "
                                  + "\n  ".join(errors[:20]))


def _line(bare: str, row: _Row) -> str:
  """One table line in the format hcq.autogen.support.parse_line reads."""
  regs = [f"{p}:{o:x}" + ("" if s is None else f":{s:x}") for p, o, s in row.registers]
  fields = [("!" if name in row.dropped else "") + f"{name}:{'' if s is None else f'{s:x}'}:{'' if m is None else f'{m:x}'}"
            for name, (s, m) in row.fields.items()]
  return " ".join([bare, *regs, "|", *fields])


def _verify(data: str, found: list[clangtools.Macro], values: dict) -> None:
  """Read the table back through the runtime's own lookup: every C name must give clang's value, and nothing more."""
  table = RegisterTable({"__name__": "verify"}, data)
  wrong = []
  for m in found:
    got = table.lookup(m.name)
    if isinstance(got, Register): got = got.offset
    if got != values[m.name]: wrong.append(f"{m.name}: {got!r} != {values[m.name]!r}")
  extra = set(table.constants()) - {m.name for m in found}
  if wrong or extra:
    raise GeneratorError(f"the generated table does not read back as the headers: {wrong[:5]} extra {sorted(extra)[:5]}")


def generate(offset_h: Path, sh_mask_h: Path, header_line: str) -> str:
  """The text of module hcq.autogen.am.<block> for one offset.h/sh_mask.h pair; `header_line` (with its newline)
  comes first. GeneratorError on a macro that is neither a register nor a field, a BASE_IDX without its register,
  or a field with an inconsistent shift/mask or overlapping another (unless listed in KNOWN_DEFECTS)."""
  offset_h, sh_mask_h = Path(offset_h), Path(sh_mask_h)
  found, values = read_values(offset_h, sh_mask_h)
  rows = _collect(found, values, str(offset_h.resolve()))
  _check(rows)
  data = "\n".join(_line(bare, row) for bare, row in rows.items())
  _verify(f"\n{data}\n", found, values)

  block = offset_h.name.removesuffix("_offset.h")
  kinds: dict[str, int] = {}
  for row in rows.values():
    for p, _, _ in row.registers: kinds[p] = kinds.get(p, 0) + 1
  bases = sorted({p for row in rows.values() for p, _, s in row.registers if s is not None})
  nfields = sum(len(r.fields) - len(r.dropped) for r in rows.values() if r.registers)
  orphans = [bare for bare, r in rows.items() if not r.registers]
  stats = ", ".join(f"{n} {p}" for p, n in sorted(kinds.items()))
  dropped = [f"#   {bare}__{name}: {why}" for bare, r in rows.items() for name, why in r.dropped.items()]
  out = [header_line.rstrip("\n"),
         f'"""AMD {block} registers. Each register ({", ".join(f"`{p}FOO`" for p in kinds)}) is a hcq.autogen.support.Register built on first use;',
         f"{', '.join(f'`{p}FOO_BASE_IDX`' for p in bases)}, `FOO__FIELD__SHIFT` and `FOO__FIELD_MASK` are the headers' integer"
         " constants under their C names.",
         '"""',
         f"# {sum(kinds.values())} registers ({stats}) with {nfields} fields; {len(orphans)} field groups without a register"
         " (their constants only).",
         *(["# Header defects left out of Register.fields (their constants remain):", *dropped] if dropped else []),
         "from hcq.autogen.support import RegisterTable", "", "",
         "def __getattr__(name: str):", "  return _TABLE.attribute(name)", "", "",
         "def __dir__() -> list[str]:", "  return _TABLE.names()", "", "",
         "# One line per name without its prefix: prefix:offset[:segment]... | FIELD:shift:mask ... (hex; see hcq.autogen.support).",
         f'_TABLE = RegisterTable(globals(), """\n{data}\n""")', ""]
  return "\n".join(out)


def build(module: str) -> str:
  """The text of hcq.autogen.am.<module> (one of BLOCKS) from the installed linux-source package."""
  for name, offset_rel, sh_mask_rel, package in BLOCKS:
    if name == module:
      offset_h, sh_mask_h = linux_source(offset_rel, package), linux_source(sh_mask_rel, package)
      return generate(offset_h, sh_mask_h, generated_header_line(package, [offset_h, sh_mask_h]))
  raise GeneratorError(f"no register block {module!r}; valid: {', '.join(b[0] for b in BLOCKS)}")
