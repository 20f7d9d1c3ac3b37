"""Integer index expressions for the loop IR: variables with ranges, +, * const, // const, % const, < const.

Small and eager: constructors fold constants and use the variables' ranges to drop needless // and %, so that
simple views give plain affine indices the renderer can vectorize."""
from __future__ import annotations
from dataclasses import dataclass


class Expr:
  """An integer expression with a known range [vmin, vmax]."""
  vmin: int
  vmax: int
  def __add__(self, o) -> Expr: return add(self, o)
  def __radd__(self, o) -> Expr: return add(self, o)
  def __mul__(self, o: int) -> Expr: return mul(self, o)
  def __rmul__(self, o: int) -> Expr: return mul(self, o)
  def __floordiv__(self, o: int) -> Expr: return div(self, o)
  def __mod__(self, o: int) -> Expr: return mod(self, o)


@dataclass(frozen=True, eq=True)
class Num(Expr):
  value: int
  @property
  def vmin(self) -> int: return self.value
  @property
  def vmax(self) -> int: return self.value


@dataclass(frozen=True, eq=True)
class Var(Expr):
  name: str
  lo: int
  hi: int  # inclusive
  @property
  def vmin(self) -> int: return self.lo
  @property
  def vmax(self) -> int: return self.hi


@dataclass(frozen=True, eq=True)
class Sum(Expr):
  terms: tuple[Expr, ...]  # no Num among them
  const: int
  @property
  def vmin(self) -> int: return sum(t.vmin for t in self.terms) + self.const
  @property
  def vmax(self) -> int: return sum(t.vmax for t in self.terms) + self.const


@dataclass(frozen=True, eq=True)
class Mul(Expr):
  a: Expr
  c: int
  @property
  def vmin(self) -> int: return min(self.a.vmin * self.c, self.a.vmax * self.c)
  @property
  def vmax(self) -> int: return max(self.a.vmin * self.c, self.a.vmax * self.c)


@dataclass(frozen=True, eq=True)
class Div(Expr):
  a: Expr
  c: int  # > 0, floor division
  @property
  def vmin(self) -> int: return self.a.vmin // self.c
  @property
  def vmax(self) -> int: return self.a.vmax // self.c


@dataclass(frozen=True, eq=True)
class Mod(Expr):
  a: Expr
  c: int  # > 0, floor modulo
  @property
  def vmin(self) -> int: return 0
  @property
  def vmax(self) -> int: return self.c - 1


def num(x) -> Expr: return x if isinstance(x, Expr) else Num(int(x))


def _terms(e: Expr) -> tuple[list[Expr], int]:
  if isinstance(e, Num): return [], e.value
  if isinstance(e, Sum): return list(e.terms), e.const
  return [e], 0


def add(a, b) -> Expr:
  a, b = num(a), num(b)
  ta, ca = _terms(a)
  tb, cb = _terms(b)
  # merge terms that are the same expression times a constant
  coef: dict[Expr, int] = {}
  for t in ta + tb:
    base, c = (t.a, t.c) if isinstance(t, Mul) else (t, 1)
    coef[base] = coef.get(base, 0) + c
  terms = tuple(base if c == 1 else Mul(base, c) for base, c in coef.items() if c != 0)
  if not terms: return Num(ca + cb)
  if len(terms) == 1 and ca + cb == 0: return terms[0]
  return Sum(terms, ca + cb)


def mul(a, c: int) -> Expr:
  a = num(a)
  c = int(c)
  if c == 0: return Num(0)
  if c == 1: return a
  if isinstance(a, Num): return Num(a.value * c)
  if isinstance(a, Mul): return mul(a.a, a.c * c)
  if isinstance(a, Sum):
    out: Expr = Num(a.const * c)
    for t in a.terms: out = add(out, mul(t, c))
    return out
  return Mul(a, c)


def div(a, c: int) -> Expr:
  a = num(a)
  assert c > 0
  if c == 1: return a
  if isinstance(a, Num): return Num(a.value // c)
  if a.vmin >= 0 and a.vmax < c: return Num(0)
  if a.vmin // c == a.vmax // c: return Num(a.vmin // c)
  if isinstance(a, Mul) and a.c % c == 0: return mul(a.a, a.c // c)
  if isinstance(a, Sum):
    # pull out terms that are multiples of c: (c*x + rest + q*c + r) // c == x + q + (rest + r) // c
    whole = [t for t in a.terms if isinstance(t, Mul) and t.c % c == 0]
    q, r = divmod(a.const, c)
    if whole or q:
      rest: Expr = Num(r)
      for t in a.terms:
        if t not in whole: rest = add(rest, t)
      out: Expr = Num(q)
      for t in whole: out = add(out, mul(t.a, t.c // c))
      return add(out, div(rest, c))
  if isinstance(a, Div): return div(a.a, a.c * c)
  return Div(a, c)


def mod(a, c: int) -> Expr:
  a = num(a)
  assert c > 0
  if c == 1: return Num(0)
  if isinstance(a, Num): return Num(a.value % c)
  if a.vmin >= 0 and a.vmax < c: return a
  if isinstance(a, Mul) and a.c % c == 0: return Num(0)
  if isinstance(a, Sum):
    kept = [t for t in a.terms if not (isinstance(t, Mul) and t.c % c == 0)]
    if len(kept) != len(a.terms) or a.const >= c or a.const < 0:
      rest: Expr = Num(a.const % c)
      for t in kept: rest = add(rest, t)
      return mod(rest, c)
  if isinstance(a, Mod) and a.c % c == 0: return mod(a.a, c)
  return Mod(a, c)


def substitute(e: Expr, values: dict[str, Expr]) -> Expr:
  """`e` with variables replaced (by name)."""
  if isinstance(e, Num): return e
  if isinstance(e, Var): return values.get(e.name, e)
  if isinstance(e, Sum):
    out: Expr = Num(e.const)
    for t in e.terms: out = add(out, substitute(t, values))
    return out
  if isinstance(e, Mul): return mul(substitute(e.a, values), e.c)
  if isinstance(e, Div): return div(substitute(e.a, values), e.c)
  if isinstance(e, Mod): return mod(substitute(e.a, values), e.c)
  raise TypeError(e)


def variables(e: Expr) -> set[str]:
  """Names of the variables `e` depends on."""
  if isinstance(e, Var): return {e.name}
  if isinstance(e, Sum): return set().union(*[variables(t) for t in e.terms])
  if isinstance(e, (Mul, Div, Mod)): return variables(e.a)
  return set()


def linear_coefficient(e: Expr, name: str) -> int | None:
  """c if `e` == c*name + (terms without name), else None (name under // or %)."""
  if isinstance(e, Num): return 0
  if isinstance(e, Var): return 1 if e.name == name else 0
  if isinstance(e, Mul):
    inner = linear_coefficient(e.a, name)
    return None if inner is None else inner * e.c
  if isinstance(e, Sum):
    total = 0
    for t in e.terms:
      c = linear_coefficient(t, name)
      if c is None: return None
      total += c
    return total
  return 0 if name not in variables(e) else None


@dataclass(frozen=True)
class Valid:
  """A conjunction of lo <= expr < hi conditions (a view's mask, expressed over the loop variables)."""
  conds: tuple[tuple[Expr, int, int], ...] = ()

  def and_(self, e: Expr, lo: int, hi: int) -> Valid:
    if e.vmin >= lo and e.vmax < hi: return self  # always true
    return Valid(self.conds + ((e, lo, hi),))

  @property
  def always_false(self) -> bool: return any(e.vmax < lo or e.vmin >= hi or lo >= hi for e, lo, hi in self.conds)
  def variables(self) -> set[str]: return set().union(*[variables(e) for e, _, _ in self.conds]) if self.conds else set()
  def substitute(self, values: dict[str, Expr]) -> Valid:
    out = Valid()
    for e, lo, hi in self.conds: out = out.and_(substitute(e, values), lo, hi)
    return out
