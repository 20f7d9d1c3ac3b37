"""C declarations (libclang) -> a ctypes module: records, typedefs, enums, macros and function-like macros.

Layout is exact by construction and by check: every record is built with real ctypes while generating,
compared with clang's size and per-field bit offsets, and padded explicitly where ctypes cannot say
what C says (over-aligned types). A record that still disagrees stops the generator.
"""
from __future__ import annotations
import ast
import ctypes
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

from hcq.autogen.generator.clangtools import GeneratorError, Macro, cindex, evaluate, macros, parse
from hcq.autogen.generator.macro_py import CAST_HELPER, translate_function_macro

# clang's builtin type kinds -> ctypes name; signedness and width follow the LP64 Linux ABI.
_BUILTINS = {"BOOL": "c_bool", "CHAR_S": "c_char", "SCHAR": "c_int8", "CHAR_U": "c_uint8", "UCHAR": "c_uint8",
             "SHORT": "c_int16", "USHORT": "c_uint16", "INT": "c_int32", "UINT": "c_uint32", "LONG": "c_int64",
             "ULONG": "c_uint64", "LONGLONG": "c_int64", "ULONGLONG": "c_uint64", "FLOAT": "c_float",
             "DOUBLE": "c_double", "LONGDOUBLE": "c_longdouble", "WCHAR": "c_int32", "CHAR16": "c_uint16", "CHAR32": "c_uint32"}
# ctypes bitfields must be integer types; these stand in for char and bool bitfields (same size and signedness).
_BITFIELD_TYPE = {"c_char": "c_int8", "c_bool": "c_uint8"}


@dataclass
class CType:
  """A C type as ctypes: the expression the module writes, and the object used to check layout now."""
  expr: str
  obj: type


@dataclass
class Record:
  name: str
  cursor: object
  is_union: bool
  c_spelling: str | None                            # how C names it, for the layout tests
  fields: list[tuple] = field(default_factory=list)  # (name, CType, bits or None)
  anonymous: list[str] = field(default_factory=list)
  pack: int | None = None
  c_align: int | None = None                       # C's alignment where ctypes (before 3.13) cannot reach it
  built: type | None = None


@dataclass
class BindingSpec:
  """One generated module: headers whose declarations it holds, and how to parse them."""
  module: str
  package: str
  headers: list[Path]
  args: list[str] = field(default_factory=list)
  cplusplus: bool = False
  prelude: str = ""      # text before the #includes (e.g. a standard header the kernel header assumes)
  namespaces: tuple[str, ...] = ()  # C++ namespaces whose names the module holds (for code that uses them unqualified)


class BindingGenerator:
  def __init__(self, spec: BindingSpec):
    self.spec = spec
    self.ci = cindex()
    self.own = {str(h.resolve()) for h in spec.headers}
    self.args = (["-x", "c++", "-std=c++17"] if spec.cplusplus else ["-x", "c", "-std=gnu11"]) + spec.args
    self.source = spec.prelude + "".join(f'#include "{h}"\n' for h in spec.headers)
    self.records: dict[str, Record] = {}     # by where the definition stands, in emission order
    self.typedefs: list[tuple[str, CType]] = []
    self.enums: dict[str, int] = {}          # enum constant -> value, in header order
    self.enum_types: list[tuple[str, CType]] = []

  # ---- walking the translation unit ----
  def run(self) -> str:
    tu = parse(self.source, self.args, filename="hcq_autogen_input.cpp" if self.spec.cplusplus else "hcq_autogen_input.c")
    self._walk(tu.cursor)
    body = self._emit_types()
    body += self._emit_macros(tu)
    return body

  def _is_own(self, c) -> bool:
    return c.location.file is not None and str(Path(c.location.file.name).resolve()) in self.own

  def _walk(self, parent) -> None:
    K = self.ci.CursorKind
    for c in parent.get_children():
      if c.kind in (K.NAMESPACE, K.UNEXPOSED_DECL) or c.kind.name == "LINKAGE_SPEC": self._walk(c)  # namespaces, extern "C"
      elif not self._is_own(c): continue
      elif c.kind in (K.STRUCT_DECL, K.UNION_DECL) and c.is_definition() and not self._unnamed(c): self._record(c)
      elif c.kind == K.TYPEDEF_DECL: self._typedef(c)
      elif c.kind == K.ENUM_DECL and c.is_definition(): self._enum(c)

  @staticmethod
  def _usr(c) -> str:
    # Where the definition stands: USRs of two anonymous unions in one struct are equal, their places are not.
    return f"{c.location.file}:{c.location.line}:{c.location.column}"

  def _anonymous_member(self, f) -> bool:
    """A field that is an anonymous struct/union whose members C reaches directly (not an unnamed type of a named field)."""
    decl = f.type.get_canonical().get_declaration()
    return decl.kind in (self.ci.CursorKind.STRUCT_DECL, self.ci.CursorKind.UNION_DECL) and bool(self.ci.conf.lib.clang_Cursor_isAnonymousRecordDecl(decl))

  @staticmethod
  def _unnamed(c) -> bool:
    """A record or enum written without a tag. clang spells one as "(unnamed at ...)", or by its typedef's name
    (`typedef struct { } x_t;`): then the name is not among the tokens before the body's `{`."""
    if not c.spelling or "(unnamed" in c.spelling or "(anonymous" in c.spelling: return True
    head = []
    for t in c.get_tokens():
      if t.spelling == "{": break
      head.append(t.spelling)
    return c.spelling not in head

  def _record(self, c, name: str | None = None) -> Record:
    c = c.get_definition() or c
    usr = self._usr(c)
    if usr in self.records: return self.records[usr]
    if c.get_definition() is None:  # opaque struct: only ever used behind a pointer
      raise GeneratorError(f"{c.spelling} is incomplete but used by value")
    is_union = c.kind == self.ci.CursorKind.UNION_DECL
    kw = "union" if is_union else "struct"
    if name is None:
      if self._unnamed(c): raise GeneratorError(f"unnamed {kw} at {usr} is used before anything names it")
      name = f"{kw}_{c.spelling}"
    c_spelling = f"{kw} {c.spelling}" if not self.spec.cplusplus else "::".join(self._scope(c) + [c.spelling])
    rec = Record(name, c, is_union, c_spelling)
    self._layout(rec)
    self.records[usr] = rec
    return rec

  def _scope(self, c) -> list[str]:
    out, p = [], c.semantic_parent
    while p is not None and p.kind != self.ci.CursorKind.TRANSLATION_UNIT:
      out.insert(0, p.spelling)
      p = p.semantic_parent
    return out

  def _typedef(self, c) -> None:
    under = c.underlying_typedef_type
    decl = under.get_canonical().get_declaration()
    K = self.ci.CursorKind
    if decl.kind in (K.STRUCT_DECL, K.UNION_DECL) and self._unnamed(decl) and self._usr(decl) not in self.records:
      # `typedef struct { ... } name_t;` names the record by its typedef
      rec = self._record(decl, name=c.spelling)
      rec.c_spelling = "::".join(self._scope(c) + [c.spelling]) if self.spec.cplusplus else c.spelling
      return
    if decl.kind == K.ENUM_DECL and self._unnamed(decl): self._enum(decl)
    try:
      t = self._ctype(under)
    except GeneratorError:
      return  # function pointer or other type that has no ctypes meaning here; nothing refers to it by value
    if t.expr != c.spelling: self.typedefs.append((c.spelling, t))

  def _enum(self, c) -> None:
    if any(n == c.spelling for n, _ in self.enum_types): return
    for k in c.get_children():
      if k.kind == self.ci.CursorKind.ENUM_CONSTANT_DECL: self.enums.setdefault(k.spelling, k.enum_value)
    if not self._unnamed(c):
      self.enum_types.append((f"enum_{c.spelling}", self._ctype(c.enum_type)))

  # ---- types ----
  def _ctype(self, t) -> CType:
    TK = self.ci.TypeKind
    if t.kind in (TK.ELABORATED, TK.TYPEDEF, TK.UNEXPOSED) and t.get_canonical() != t: return self._ctype(t.get_canonical())
    if t.kind == TK.ELABORATED: t = t.get_named_type()
    if t.kind.name in _BUILTINS:
      n = _BUILTINS[t.kind.name]
      return CType(n, getattr(ctypes, n))
    if t.kind == TK.ENUM: return self._ctype(t.get_declaration().enum_type)
    if t.kind == TK.POINTER: return CType("c_void_p", ctypes.c_void_p)
    if t.kind == TK.RECORD:
      rec = self._record(t.get_declaration())
      return CType(rec.name, rec.built)
    if t.kind == TK.CONSTANTARRAY:
      e = self._ctype(t.element_type)
      return CType(f"{e.expr} * {t.element_count}", e.obj * t.element_count)
    if t.kind == TK.INCOMPLETEARRAY:  # flexible array member: zero-length, as C lays it out
      e = self._ctype(t.element_type)
      return CType(f"{e.expr} * 0", e.obj * 0)
    raise GeneratorError(f"no ctypes type for {t.spelling} ({t.kind})")

  # ---- layout ----
  def _layout(self, rec: Record) -> None:
    K = self.ci.CursorKind
    c = rec.cursor
    fields, expected = [], []
    for i, f in enumerate(c.type.get_fields()):
      if self._anonymous_member(f):
        decl = f.type.get_canonical().get_declaration()
        kw = "union" if decl.kind == K.UNION_DECL else "struct"
        inner = self._record(decl, name=f"{kw}_{rec.name.split('_', 1)[1]}_{i}")
        inner.c_spelling = None
        name = f"_{i}"
        rec.anonymous.append(name)
        t = CType(inner.name, inner.built)
      else:
        name = f.spelling
        elem = f.type.get_canonical()
        while elem.kind in (self.ci.TypeKind.CONSTANTARRAY, self.ci.TypeKind.INCOMPLETEARRAY): elem = elem.element_type.get_canonical()
        decl = elem.get_declaration()
        if decl.kind in (K.STRUCT_DECL, K.UNION_DECL) and self._unnamed(decl) and self._usr(decl) not in self.records:
          # `struct { ... } name;`: the unnamed type takes its name from the field; C reaches it only through it
          kw = "union" if decl.kind == K.UNION_DECL else "struct"
          self._record(decl, name=f"{kw}_{rec.name.split('_', 1)[1]}_{name}").c_spelling = None
        t = self._ctype(f.type)
      bits = f.get_bitfield_width() if f.is_bitfield() else None
      if bits is not None and not f.spelling: continue  # unnamed bitfield: padding, which C's offsets already show
      if bits is not None and t.expr in _BITFIELD_TYPE:
        n = _BITFIELD_TYPE[t.expr]
        t = CType(n, getattr(ctypes, n))
      fields.append((name, t, bits))
      expected.append((name, f.get_field_offsetof(), bits))
    size = c.type.get_size()
    # __attribute__((packed)) and #pragma pack lower a record's alignment below its members': that is ctypes' _pack_.
    if ctypes.alignment(self._build(rec, fields)) > c.type.get_align(): rec.pack = c.type.get_align()
    if not rec.is_union: fields, expected = self._bitfield_containers(rec, fields, expected, size)
    # Insert explicit padding where ctypes would place a field earlier than C does (over-aligned members).
    for _ in range(len(fields) + 2):
      built = self._build(rec, fields)
      gap = self._first_gap(built, expected)
      if gap is None: break
      idx, missing = gap
      pad = _pad_name(fields)
      fields.insert(idx, (pad, CType(f"c_uint8 * {missing}", ctypes.c_uint8 * missing), None))
      expected.insert(idx, (pad, None, None))
    tail = size - ctypes.sizeof(built)
    if tail > 0:
      fields.append(("_hcq_pad_tail", CType(f"c_uint8 * {tail}", ctypes.c_uint8 * tail), None))
      built = self._build(rec, fields)
    self._check(rec, built, expected, size)
    if c.type.get_align() > ctypes.alignment(built): rec.c_align = c.type.get_align()
    rec.fields, rec.built = fields, built

  def _bitfield_containers(self, rec: Record, fields: list[tuple], expected: list[tuple], size: int) -> tuple[list, list]:
    """Re-express bitfields so that ctypes places each at C's bit offset.

    ctypes (before 3.14) lays out a run of bitfields of mixed sizes unlike gcc and clang do, so every
    run becomes containers of one size each (8, 4, 2 or 1 bytes, signedness per field), placed where C
    placed the bits, with unnamed padding bits and bytes between them.
    """
    out_f, out_e = [], []
    cursor, box = 0, None  # ctypes' byte cursor; the open container as (start byte, size, next free bit)
    limits, limit = [], size  # for each field, where the next non-bitfield member starts in C
    for (_, t, bits), (_, at, _) in zip(reversed(fields), reversed(expected)):
      limits.insert(0, limit)
      if bits is None: limit = at // 8
    for (name, t, bits), (_, at, _), limit in zip(fields, expected, limits):
      if bits is None:
        out_f.append((name, t, None))
        out_e.append((name, at, None))
        cursor, box = at // 8 + ctypes.sizeof(t.obj), None
        continue
      signed = t.expr.startswith("c_int")
      if box is None or at < box[2] or at + bits > (box[0] + box[1]) * 8:
        box = self._container(rec, name, at, bits, cursor, limit)
        if box[0] > cursor:
          pad = box[0] - cursor
          out_f.append((_pad_name(out_f), CType(f"c_uint8 * {pad}", ctypes.c_uint8 * pad), None))
          out_e.append((out_f[-1][0], None, None))
        box = (box[0], box[1], box[0] * 8)
        cursor = box[0] + box[1]
      if at > box[2]:
        out_f.append((_pad_name(out_f), _int_ctype(box[1], False), at - box[2]))
        out_e.append((out_f[-1][0], None, None))
      out_f.append((name, _int_ctype(box[1], signed), bits))
      out_e.append((name, at, bits))
      box = (box[0], box[1], at + bits)
    return out_f, out_e

  @staticmethod
  def _container(rec: Record, name: str, at: int, bits: int, cursor: int, limit: int) -> tuple[int, int]:
    """The widest container (start byte, size) that holds bits [at, at+bits), starts at or after `cursor`
    at ctypes' alignment, and ends by `limit` (where C's next non-bitfield member starts)."""
    for width in (8, 4, 2, 1):
      align = min(width, rec.pack) if rec.pack else width
      start = (at // 8) // align * align
      if start >= cursor and at + bits <= (start + width) * 8 and start + width <= limit: return start, width
    raise GeneratorError(f"{rec.c_spelling or rec.name}.{name}: no ctypes container holds bits {at}..{at + bits - 1}")

  def _build(self, rec: Record, fields: list[tuple]) -> type:
    ns = {"_fields_": [(n, t.obj) if b is None else (n, t.obj, b) for n, t, b in fields]}
    if rec.pack: ns["_pack_"] = rec.pack
    if rec.anonymous: ns["_anonymous_"] = tuple(rec.anonymous)
    return type(rec.name, (ctypes.Union if rec.is_union else ctypes.Structure,), ns)

  @staticmethod
  def _bit_offset(built: type, name: str) -> int:
    d = getattr(built, name)
    # ctypes bitfield descriptors pack (bit width << 16 | bit offset) into .size
    return d.offset * 8 + (d.size & 0xffff if d.size >> 16 else 0)

  def _first_gap(self, built: type, expected: list[tuple]) -> tuple[int, int] | None:
    for i, (name, want, bits) in enumerate(expected):
      if want is None: continue
      got = self._bit_offset(built, name)
      if got < want and bits is None and (want - got) % 8 == 0: return i, (want - got) // 8
      if got != want: return None
    return None

  def _check(self, rec: Record, built: type, expected: list[tuple], size: int) -> None:
    bad = [f"{n}: ctypes bit {self._bit_offset(built, n)}, C bit {w}" for n, w, _ in expected if w is not None and self._bit_offset(built, n) != w]
    if ctypes.sizeof(built) != size: bad.append(f"sizeof: ctypes {ctypes.sizeof(built)}, C {size}")
    if bad: raise GeneratorError(f"{rec.c_spelling}: ctypes layout differs from clang's: " + "; ".join(bad))

  # ---- emission ----
  def _emit_types(self) -> str:
    out = []
    if self.records:
      out.append("\n# records: declared first so that any order of use works, laid out below")
      for r in self.records.values():
        # _c_name_: how C spells the type (tests compile it with gcc; nested anonymous records have none).
        # _c_align_: C's alignment of an over-aligned record; parents place it with explicit padding.
        attrs = ([f"_c_name_ = {r.c_spelling!r}"] if r.c_spelling else []) + ([f"_c_align_ = {r.c_align}"] if r.c_align else [])
        body = "; ".join(attrs) or "pass"
        out.append(f"class {r.name}({'Union' if r.is_union else 'Structure'}): {body}")
      for r in self.records.values():
        out.append("")
        if r.pack: out.append(f"{r.name}._pack_ = {r.pack}")
        if r.anonymous: out.append(f"{r.name}._anonymous_ = {tuple(r.anonymous)!r}")
        items = [f"({n!r}, {t.expr})" if b is None else f"({n!r}, {t.expr}, {b})" for n, t, b in r.fields]
        out.append(f"{r.name}._fields_ = [" + ("\n  " + ",\n  ".join(items) + ",\n" if items else "") + "]")
    if self.typedefs or self.enum_types:
      out.append("\n# typedefs and enum types")
      seen = {r.name for r in self.records.values()}
      for n, t in self.enum_types + self.typedefs:
        if n in seen or keyword.iskeyword(n): continue
        seen.add(n)
        out.append(f"{n} = {t.expr}")
    if self.enums:
      out.append("\n# enum constants")
      out += [f"{n} = {_literal(v)}" for n, v in self.enums.items()]
    return "\n".join(out) + "\n"

  def _emit_macros(self, tu) -> str:
    ms = [m for m in macros(tu, self.own) if m.body and not m.name.startswith("__") and not keyword.iskeyword(m.name)]
    known = set(self.enums) | {r.name for r in self.records.values()}
    objects = {m.name: " ".join(m.body) for m in ms if m.params is None and m.name not in known}
    values = evaluate(objects, self.source, self.args)
    for m in ms:  # string macros ("vfio-pci"): clang tokenized them; adjacent literals concatenate as in C
      if m.params is None and all(t.startswith('"') for t in m.body): values[m.name] = "".join(ast.literal_eval(t) for t in m.body)
    constants = known | set(values)
    # Function macros may call each other in any order: shrink the candidate set until every survivor translates.
    functions = {m.name for m in ms if m.params is not None}
    while True:
      defs = {m.name: translate_function_macro(m, constants, functions) for m in ms if m.name in functions}
      failed = {n for n, d in defs.items() if d is None}
      if not failed: break
      functions -= failed
    out, skipped = [], []
    for m in ms:
      if m.params is None and m.name in values: out.append(f"{m.name} = {_literal(values[m.name])}")
      elif m.params is not None and m.name in defs: out.append(defs[m.name])
      elif m.name not in known: skipped.append(m.name)
    text = ""
    if any("_c_cast(" in line for line in out): text += CAST_HELPER
    if out: text += "\n# macros\n" + "\n".join(out) + "\n"
    if skipped:
      text += "\n# macros left out (types, statements, attributes, fragments, or built on other headers' macros):\n"
      text += "\n".join(_wrap_comment(skipped)) + "\n"
    return text


def _pad_name(fields: list[tuple]) -> str:
  """A fresh name for a padding member: tests and users skip members named _hcq_pad* (C headers have their own _pad members)."""
  return f"_hcq_pad{sum(1 for f in fields if f[0].startswith('_hcq_pad'))}"


def _int_ctype(size: int, signed: bool) -> CType:
  n = f"c_{'' if signed else 'u'}int{size * 8}"
  return CType(n, getattr(ctypes, n))


def _literal(v) -> str:
  if isinstance(v, bool): return str(int(v))
  if isinstance(v, int): return hex(v) if v > 255 else str(v)
  return repr(v)


def _wrap_comment(names: list[str], width: int = 110) -> list[str]:
  lines, cur = [], "#"
  for n in names:
    if len(cur) + len(n) + 1 > width:
      lines.append(cur)
      cur = "#"
    cur += " " + n
  return lines + [cur]


def generate_bindings(spec: BindingSpec, header_line: str) -> str:
  """The full text of a generated ctypes module for `spec`."""
  body = BindingGenerator(spec).run()
  used = sorted(n for n in set(re.findall(r"\b(c_\w+|Structure|Union)\b", body)) if hasattr(ctypes, n))
  imports = f"from ctypes import {', '.join(used)}\n" if used else ""
  doc = f'"""ctypes bindings for {", ".join(h.name for h in spec.headers)} (generated; see hcq.autogen)."""\n'
  return header_line + doc + imports + body
