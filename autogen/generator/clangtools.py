"""Thin layer over libclang: parse a header, list its macros, and let clang evaluate constant expressions.

clang, not a hand-written parser, decides what C means here: macro values are evaluated by
declaring `static const __auto_type v = (MACRO);` in a synthetic translation unit and asking
clang for the initializer's value and signedness.
"""
from __future__ import annotations
import ctypes
from dataclasses import dataclass
from pathlib import Path


class GeneratorError(Exception):
  """A generator input is missing or unusable; the message names it and how to get it."""


def cindex():
  """The clang.cindex module (PyPI `libclang`), with the evaluation entry points typed."""
  try:
    import clang.cindex as ci
  except ImportError as e:
    raise GeneratorError("the generator needs libclang's Python bindings: pip install 'libclang>=16' (or pip install -e '.[autogen]')") from e
  lib = ci.conf.lib
  if not getattr(lib, "_hcq_typed", False):
    vp = ctypes.c_void_p
    for name, res, args in [("clang_Cursor_Evaluate", vp, [ci.Cursor]), ("clang_EvalResult_getKind", ctypes.c_int, [vp]),
                            ("clang_EvalResult_isUnsignedInt", ctypes.c_uint, [vp]),
                            ("clang_EvalResult_getAsUnsigned", ctypes.c_ulonglong, [vp]),
                            ("clang_EvalResult_getAsLongLong", ctypes.c_longlong, [vp]),
                            ("clang_EvalResult_getAsDouble", ctypes.c_double, [vp]),
                            ("clang_EvalResult_getAsStr", ctypes.c_char_p, [vp]),
                            ("clang_EvalResult_dispose", None, [vp]),
                            ("clang_Cursor_isMacroFunctionLike", ctypes.c_uint, [ci.Cursor]),
                            ("clang_Cursor_isAnonymousRecordDecl", ctypes.c_uint, [ci.Cursor])]:
      fn = getattr(lib, name)
      fn.restype, fn.argtypes = res, args
    lib._hcq_typed = True
  return ci


CLANG_BUILTIN_HEADERS = Path("/usr/lib/llvm-19/lib/clang/19/include")


def builtin_include_args() -> list[str]:
  """libclang's PyPI wheel ships no compiler headers (stddef.h, stdint.h): take clang 19's from Debian."""
  if not (CLANG_BUILTIN_HEADERS / "stddef.h").is_file():
    raise GeneratorError(f"{CLANG_BUILTIN_HEADERS}/stddef.h is missing: apt-get install -y libclang-common-19-dev (comes with clang-19)")
  return ["-isystem", str(CLANG_BUILTIN_HEADERS)]


def parse(source: str, args: list[str], filename: str = "hcq_autogen_input.c"):
  """Parse C (or C++ with `-x c++` in args) source text; raise GeneratorError on any error diagnostic."""
  ci = cindex()
  args = [*builtin_include_args(), *args]
  opts = ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD | ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES
  tu = ci.Index.create().parse(filename, args=["-ferror-limit=0", *args], unsaved_files=[(filename, source)], options=opts)
  errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
  if errors:
    shown = "\n  ".join(f"{d.location.file}:{d.location.line}:{d.location.column}: {d.spelling}" for d in errors[:10])
    raise GeneratorError(f"clang could not parse {filename} ({len(errors)} errors):\n  {shown}")
  return tu


@dataclass(frozen=True)
class Macro:
  """A #define as clang tokenized it: name, parameter names (None for object-like), body tokens, file."""
  name: str
  params: tuple[str, ...] | None
  body: tuple[str, ...]
  file: str
  line: int


def macros(tu, files: set[str]) -> list[Macro]:
  """Every macro defined in one of `files` (absolute paths), in definition order; a later #define wins."""
  ci = cindex()
  out: dict[str, Macro] = {}
  for c in tu.cursor.get_children():
    if c.kind != ci.CursorKind.MACRO_DEFINITION or c.location.file is None: continue
    fname = str(Path(c.location.file.name).resolve())
    if fname not in files: continue
    toks = [t.spelling for t in c.get_tokens()][1:]
    params = None
    if ci.conf.lib.clang_Cursor_isMacroFunctionLike(c):
      close = toks.index(")")
      params = tuple(t for t in toks[1:close] if t != ",")
      toks = toks[close + 1:]
    out.pop(c.spelling, None)
    out[c.spelling] = Macro(c.spelling, params, tuple(toks), fname, c.location.line)
  return list(out.values())


def evaluate(decls: dict[str, str], prelude: str, args: list[str]) -> dict[str, int | float | str]:
  """Evaluate C constant expressions with clang. `decls` maps a name to an expression; the result maps
  each name whose expression is a compile-time integer, float or string literal to its value
  (integers signed or unsigned as C types them). Expressions that do not compile are left out."""
  ci = cindex()
  lib = ci.conf.lib
  var = {f"__hcq_v{i}": name for i, name in enumerate(decls)}
  auto = "auto" if "c++" in args else "__auto_type"
  body = "".join(f"static const {auto} {v} = ({decls[n]});\n" for v, n in var.items())
  # Errors are expected here (macros that are statements, types or fragments), so no error check.
  tu = ci.Index.create().parse("hcq_autogen_eval.c", args=["-ferror-limit=0", "-Wno-everything", *builtin_include_args(), *args],
                               unsaved_files=[("hcq_autogen_eval.c", prelude + "\n" + body)])
  # clang recovers from an error and may still give the declaration a value ((15:0) evaluates to 15): a
  # declaration whose line has an error diagnostic is left out.
  bad_lines = {d.location.line for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error and d.location.file is not None
               and d.location.file.name == "hcq_autogen_eval.c"}
  values: dict[str, int | float | str] = {}
  for c in tu.cursor.get_children():
    if c.kind != ci.CursorKind.VAR_DECL or c.spelling not in var or c.location.line in bad_lines: continue
    r = lib.clang_Cursor_Evaluate(c)
    if not r: continue
    kind = lib.clang_EvalResult_getKind(r)
    if kind == 1:    # CXEval_Int
      values[var[c.spelling]] = lib.clang_EvalResult_getAsUnsigned(r) if lib.clang_EvalResult_isUnsignedInt(r) else lib.clang_EvalResult_getAsLongLong(r)
    elif kind == 2:  # CXEval_Float
      values[var[c.spelling]] = lib.clang_EvalResult_getAsDouble(r)
    elif kind == 4:  # CXEval_StrLiteral
      values[var[c.spelling]] = lib.clang_EvalResult_getAsStr(r).decode()
    lib.clang_EvalResult_dispose(r)
  return values
