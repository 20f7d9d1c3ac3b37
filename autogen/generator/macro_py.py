"""Function-like C macros that compute an integer -> Python functions.

Only macros built from integer literals, parameters, known constants, other such macros, casts to
integer types and the arithmetic/bitwise operators are taken: for those, C and Python agree on
precedence (comparisons and logical operators do not, so a macro using them is left out).
Integer results are exact; the C type's width applies where the caller stores them (tests compare
with gcc in the C result type's width).
"""
from __future__ import annotations
import keyword
import re

from hcq.autogen.generator.clangtools import Macro

_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)([uUlL]*)$")
_OPERATORS = {"+", "-", "*", "%", "<<", ">>", "&", "|", "^", "~", "(", ")", ","}
_INT_TYPES = {  # type word sequence -> (bits, signed)
  "char": (8, True), "signed char": (8, True), "unsigned char": (8, False), "short": (16, True), "unsigned short": (16, False),
  "int": (32, True), "signed": (32, True), "signed int": (32, True), "unsigned": (32, False), "unsigned int": (32, False),
  "long": (64, True), "unsigned long": (64, False), "long long": (64, True), "unsigned long long": (64, False),
  "size_t": (64, False), "uintptr_t": (64, False),
  **{f"{p}{b}": (b, s) for b in (8, 16, 32, 64) for p, s in (("uint", False), ("int", True), ("__u", False), ("__s", True), ("u", False), ("s", True))},
  **{f"{p}{b}_t": (b, s) for b in (8, 16, 32, 64) for p, s in (("uint", False), ("int", True))},
}
_TYPE_WORDS = {w for t in _INT_TYPES for w in t.split()}

CAST_HELPER = '''
def _c_cast(value: int, bits: int, signed: bool) -> int:
  """A C cast to an integer type of `bits` width: wrap, then reinterpret the sign."""
  value &= (1 << bits) - 1
  return value - (1 << bits) if signed and value >> (bits - 1) else value
'''


class _Unsupported(Exception):
  pass


def translate_function_macro(m: Macro, constants: set[str], functions: set[str]) -> str | None:
  """A `def NAME(params): return expr` for macro `m`, or None when it is not a simple value macro.
  `constants` are names the module defines as values, `functions` the macros it defines as functions."""
  params = {p: p + "_" if keyword.iskeyword(p) else p for p in m.params or ()}
  if "..." in params or not m.body: return None
  try:
    expr, pos = _expression(list(m.body), 0, params, constants, functions)
    if pos != len(m.body): raise _Unsupported
  except (_Unsupported, IndexError):
    return None
  text = f"def {m.name}({', '.join(params.values())}): return {expr}"
  try:
    compile(text, m.name, "exec")
  except SyntaxError:
    return None
  return text


def _expression(toks: list[str], i: int, params, constants, functions, depth: int = 0) -> tuple[str, int]:
  """Translate tokens from i until an unmatched ')' or ',' (or the end); returns (python, next index)."""
  out = []
  while i < len(toks):
    t = toks[i]
    if t in (")", ","):
      if depth == 0: raise _Unsupported  # stray close or a top-level comma operator
      break
    if t == "(":
      cast = _cast_type(toks, i)
      if cast is not None:
        bits, signed, i = cast
        operand, i = _operand(toks, i, params, constants, functions, depth)
        out.append(f"_c_cast({operand}, {bits}, {signed})")
        continue
      inner, i = _expression(toks, i + 1, params, constants, functions, depth + 1)
      if toks[i] != ")": raise _Unsupported
      out.append(f"({inner})")
      i += 1
      continue
    operand, i = _operand(toks, i, params, constants, functions, depth)
    out.append(operand)
  return " ".join(out), i


def _operand(toks: list[str], i: int, params, constants, functions, depth: int) -> tuple[str, int]:
  """One token or call; unary operators and binary operators pass through as they are."""
  t = toks[i]
  if t == "(":
    inner, j = _expression(toks, i + 1, params, constants, functions, depth + 1)
    if toks[j] != ")": raise _Unsupported
    return f"({inner})", j + 1
  if t == "/": return "//", i + 1
  if t in _OPERATORS: return t, i + 1
  num = _NUMBER.match(t)
  if num:
    lit = num.group(1)
    return (("0o" + lit[1:]) if len(lit) > 1 and lit[0] == "0" and lit[1] not in "xX" else lit), i + 1
  if t in params: return params[t], i + 1
  if t in functions and i + 1 < len(toks) and toks[i + 1] == "(":
    args, j = [], i + 2
    while True:
      a, j = _expression(toks, j, params, constants, functions, depth + 1)
      args.append(a)
      if toks[j] == ")": break
      j += 1  # ','
    return f"{t}({', '.join(args)})", j + 1
  if t in constants: return t, i + 1
  raise _Unsupported(t)


def _cast_type(toks: list[str], i: int) -> tuple[int, bool, int] | None:
  """If toks[i] opens a cast to an integer type, its (bits, signed, index after ')')."""
  j = i + 1
  while j < len(toks) and toks[j] in _TYPE_WORDS: j += 1
  if j == i + 1 or j >= len(toks) or toks[j] != ")": return None
  words = " ".join(toks[i + 1:j]).replace(" int", "").strip() if toks[i + 1] != "int" else "int"
  spec = _INT_TYPES.get(words) or _INT_TYPES.get(" ".join(toks[i + 1:j]))
  if spec is None: return None
  return spec[0], spec[1], j + 1
