"""Runtime support for generated modules: `Register` and the lazy `RegisterTable` behind hcq.autogen.am.<block>.

Hand-written, not generated. Kept free of imports at module level: every generated register module
imports it, and `import hcq.autogen.am.gc_11_0_0` must stay cheap (see bench/import_cost.py).

A generated register module holds one string with a line per register name (without its lower-case
prefix), written by hcq.autogen.generator.registers:

    COMPUTE_PGM_RSRC1 reg:1bb2:0 | VGPRS:0:3f SGPRS:6:3c0 ...

Left of `|`: each C register of that name as prefix:offset[:segment] (hex; `reg`/`mm` registers carry
their BASE_IDX as segment, indirect `ix`/config `cfg` registers none). Right of `|`: the fields as
NAME:shift:mask (hex) in header order. A field the header defines inconsistently is marked `!` (or has
an empty shift or mask): its C constants stay reachable, but it is not in `Register.fields`.
"""
from __future__ import annotations

_LOWER = "abcdefghijklmnopqrstuvwxyz"


class Register:
  """One hardware register: its C name (e.g. "regCOMPUTE_PGM_RSRC1"), `offset` as the header gives it (dword
  offset within the segment for `reg`/`mm`, index for indirect `ix`, config-space address for `cfg`),
  `segment` (the header's BASE_IDX; None where it has none, as for `ix`/`cfg`) and its bit `fields`
  (lower-case name -> (shift, mask)). Treat `fields` as read-only."""
  __slots__ = ("name", "offset", "segment", "fields")

  def __init__(self, name: str, offset: int, segment: int | None, fields: dict[str, tuple[int, int]]):
    self.name, self.offset, self.segment, self.fields = name, offset, segment, fields

  def encode(self, **values: int) -> int:
    """The register value with each named field set (others 0): `reg.encode(vgprs=3, sgprs=2)`.
    ValueError for an unknown field or a value that does not fit the field; TypeError for a non-integer."""
    out = 0
    for key, value in values.items():
      field = self.fields.get(key)
      if field is None: raise ValueError(self._unknown_field(key))
      shift, mask = field
      if not isinstance(value, int): raise TypeError(f"{self.name}.{key}: value must be an int, got {type(value).__name__} {value!r}")
      limit = mask >> shift
      if not 0 <= value <= limit:
        raise ValueError(f"{self.name}.{key}: value {value} ({value:#x}) does not fit the field's {limit.bit_length()} bits "
                         f"(bits {shift + limit.bit_length() - 1}:{shift}, valid 0..{limit:#x})")
      out |= value << shift
    return out

  def decode(self, value: int) -> dict[str, int]:
    """Every field's value in a register value, by lower-case field name, in header order."""
    return {key: (value & mask) >> shift for key, (shift, mask) in self.fields.items()}

  def _unknown_field(self, key: str) -> str:
    if not self.fields: return f"{self.name} has no fields in its header; got {key}="
    if key.lower() in self.fields: return f"{self.name} has no field {key!r}: field names are lower-case, use {key.lower()}="
    import difflib  # only on this error path: keeps the import of generated modules cheap
    close = difflib.get_close_matches(key.lower(), self.fields, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return f"{self.name} has no field {key!r}.{hint} Valid fields: {', '.join(self.fields)}"

  def __repr__(self) -> str:
    seg = "" if self.segment is None else f" segment={self.segment}"
    parts = []
    for key, (shift, mask) in self.fields.items():
      top = shift + (mask >> shift).bit_length() - 1
      parts.append(f"{key}[{top}:{shift}]" if top != shift else f"{key}[{shift}]")
    return f"<Register {self.name} offset={self.offset:#x}{seg} fields: {' '.join(parts) or '(none)'}>"


class MissingName(AttributeError):
  """An attribute a generated register module does not have; close matches are looked up only when printed."""

  def __init__(self, module: str, name: str, candidates):
    super().__init__(f"module {module!r} has no register or constant {name!r}")
    self.module, self.missing, self._candidates = module, name, candidates

  def __str__(self) -> str:
    import difflib  # only when the message is shown: hasattr() probes stay cheap
    close = difflib.get_close_matches(self.missing, self._candidates(self.missing), n=3, cutoff=0.75)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"module {self.module!r} has no register or constant {self.missing!r}{hint}"


def parse_line(line: str) -> tuple[str, list[tuple[str, int, int | None]], dict[str, tuple[int, int]], dict[str, int]]:
  """One table line -> (bare name, [(prefix, offset, segment)], fields by lower-case name, C field constants)."""
  head, _, tail = line.partition(" |")
  bare, *regs = head.split()
  registers = []
  for r in regs:
    prefix, offset, *segment = r.split(":")
    registers.append((prefix, int(offset, 16), int(segment[0], 16) if segment else None))
  fields: dict[str, tuple[int, int]] = {}
  constants: dict[str, int] = {}
  for f in tail.split():
    name, shift, mask = f.split(":")
    usable = not name.startswith("!") and shift and mask
    name = name.lstrip("!")
    if shift: constants[f"{bare}__{name}__SHIFT"] = int(shift, 16)
    if mask: constants[f"{bare}__{name}_MASK"] = int(mask, 16)
    if usable: fields[name.lower()] = (int(shift, 16), int(mask, 16))
  return bare, registers, fields, constants


class RegisterTable:
  """The data of one generated register module, read on first use. Its `attribute` serves as the module's
  `__getattr__` (PEP 562): `regX`/`mmX`/`ixX`/`cfgX` -> Register, `regX_BASE_IDX`, `X__F__SHIFT` and
  `X__F_MASK` -> int, each built once and then cached in the module's globals."""
  __slots__ = ("_globals", "_data", "_lines", "_names")

  def __init__(self, module_globals: dict, data: str):
    self._globals, self._data = module_globals, data
    self._lines: dict[str, str] | None = None
    self._names: list[str] | None = None

  def _line(self, bare: str) -> str | None:
    if self._lines is None:  # one split of the data: a few ms even for the largest block
      self._lines = {ln[:ln.index(" ")]: ln for ln in self._data.split("\n") if ln}
    return self._lines.get(bare)

  def lookup(self, name: str) -> Register | int | None:
    """The Register or integer constant for a C name, or None; uncached."""
    if "__" in name:  # a field constant: BARE__FIELD__SHIFT or BARE__FIELD_MASK
      line = self._line(name.partition("__")[0])
      return None if line is None else parse_line(line)[3].get(name)
    base_idx = name.endswith("_BASE_IDX")
    stem = name[:-9] if base_idx else name
    rest = stem.lstrip(_LOWER)
    prefix = stem[:len(stem) - len(rest)]
    if not prefix or (line := self._line(rest)) is None: return None
    bare, registers, fields, _ = parse_line(line)
    for p, offset, segment in registers:
      if p != prefix: continue
      return segment if base_idx else Register(name, offset, segment, fields)
    return None

  def attribute(self, name: str):
    """PEP 562 module __getattr__: build, cache and return a register or constant; MissingName if there is none."""
    if name == "__all__": return [n for n in self.names() if not n.startswith("_")]
    value = None if name.startswith("_") else self.lookup(name)
    if value is None: raise MissingName(self._globals["__name__"], name, self._candidates)
    self._globals[name] = value
    return value

  def constants(self) -> dict[str, int | Register]:
    """Every C name of the module with its value (Register for registers), in table order; builds them all."""
    out: dict[str, int | Register] = {}
    for line in self._data.split("\n"):
      if not line: continue
      bare, registers, fields, constants = parse_line(line)
      for prefix, offset, segment in registers:
        out[prefix + bare] = Register(prefix + bare, offset, segment, fields)
        if segment is not None: out[f"{prefix}{bare}_BASE_IDX"] = segment
      out.update(constants)
    return out

  def names(self) -> list[str]:
    """PEP 562 module __dir__: the module's globals and every C name it serves."""
    if self._names is None: self._names = list(self.constants())
    return sorted(set(self._globals) | set(self._names))

  def _candidates(self, name: str) -> list[str]:
    """Names to suggest for a misspelt `name`: the same kind (register, BASE_IDX, field constant) only,
    so that difflib has thousands rather than tens of thousands to compare."""
    if self._names is None: self._names = list(self.constants())
    if "__" in name: return [n for n in self._names if "__" in n and n.endswith(name[-5:])]
    if name.endswith("_BASE_IDX"): return [n for n in self._names if n.endswith("_BASE_IDX")]
    return [n for n in self._names if "__" not in n and not n.endswith("_BASE_IDX")]


class FieldTable:
  """The DRF fields of a generated NVIDIA module (hcq.autogen.nv.*), read on first use.

  NVIDIA's class headers give a method's byte offset (`#define NVC56F_SEM_EXECUTE (0x0000006c)`) and its
  fields as bit ranges (`#define NVC56F_SEM_EXECUTE_OPERATION 2:0`); QMD headers give fields of one wide
  structure as `MW(hi:lo)`. The generator groups each field under its method (or QMD version) and writes
  one line per group: `GROUP OFFSET FIELD:hi:lo ...` (hex bit numbers; OFFSET is the group macro's value, a
  method's byte offset in a class header, or `-` for a QMD, whose fields count from bit 0 of the structure). `register(GROUP)` gives a Register whose fields are the lower-case field
  names (an indexed field `F(i)` as `f_<i>`); a QMD's Register encodes to one integer of all its bits.
  """
  __slots__ = ("_data", "_lines", "_cache")

  def __init__(self, data: str):
    self._data = data
    self._lines: dict[str, str] | None = None
    self._cache: dict[str, Register] = {}

  def _table(self) -> dict[str, str]:
    if self._lines is None: self._lines = {ln[:ln.index(" ")]: ln for ln in self._data.split("\n") if ln}
    return self._lines

  @staticmethod
  def _key(c_field: str) -> str:
    return c_field.replace("(", "_").replace(")", "").lower()

  def register(self, name: str) -> Register:
    """The Register for a method or QMD version by its C name, e.g. "NVC56F_SEM_EXECUTE"; KeyError listing close names."""
    reg = self._cache.get(name)
    if reg is not None: return reg
    line = self._table().get(name)
    if line is None:
      import difflib  # only on this error path
      close = difflib.get_close_matches(name, self._table(), n=3, cutoff=0.6)
      raise KeyError(f"no register (method or QMD) {name!r}" + (f"; did you mean {', '.join(close)}?" if close else ""))
    _, offset, *fields = line.split(" ")
    parsed = {}
    for f in fields:
      c_field, hi, lo = f.rsplit(":", 2)
      lo_bit = int(lo, 16)
      parsed[self._key(c_field)] = (lo_bit, ((1 << (int(hi, 16) - lo_bit + 1)) - 1) << lo_bit)
    reg = self._cache[name] = Register(name, 0 if offset == "-" else int(offset, 16), None, parsed)
    return reg

  def names(self) -> list[str]:
    """Every method/QMD name that has fields, in header order."""
    return list(self._table())

  def c_fields(self) -> list[tuple[str, str, str]]:
    """(C field expression, register name, field key) for every field: what gcc checks in the tests."""
    out = []
    for name, line in self._table().items():
      for f in line.split(" ")[2:]:
        c_field = f.rsplit(":", 2)[0]
        out.append((f"{name}_{c_field}", name, self._key(c_field)))
    return out
