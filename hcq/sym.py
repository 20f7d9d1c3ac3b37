"""Symbolic integers for queues: values known only at submit time (buffer addresses, sizes, signal values).

A queue that records `Variable("a") + 16` keeps a patch slot there; `submit(var_vals={"a": ...})` writes
the value in without rebuilding the queue, which is how a built queue is replayed (graph replay).
"""
from __future__ import annotations
from dataclasses import dataclass

class Sym:
  """An integer expression over named variables: `v + k`, and its low/high 32-bit halves."""

  def eval(self, var_vals: dict[str, int]) -> int:
    raise NotImplementedError

  def __add__(self, k: int) -> "Sym":
    return Offset(self, int(k)) if k else self

  __radd__ = __add__

  def lo32(self) -> "Sym":
    return Bits(self, 0)

  def hi32(self) -> "Sym":
    return Bits(self, 32)


@dataclass(frozen=True, eq=False)
class Variable(Sym):
  """A named value supplied at submit time, optionally range-checked."""
  name: str
  lo: int = 0
  hi: int = (1 << 64) - 1

  def eval(self, var_vals: dict[str, int]) -> int:
    try:
      v = var_vals[self.name]
    except KeyError:
      raise KeyError(f"no value for variable {self.name!r} at submit; given: {', '.join(var_vals) or 'none'}") from None
    if not self.lo <= v <= self.hi: raise ValueError(f"variable {self.name!r} = {v} is outside its range {self.lo}..{self.hi}")
    return v

  def __repr__(self) -> str:
    return f"Variable({self.name!r})"


@dataclass(frozen=True, eq=False)
class Offset(Sym):
  base: Sym
  k: int

  def eval(self, var_vals: dict[str, int]) -> int:
    return self.base.eval(var_vals) + self.k

  def __add__(self, k: int) -> Sym:
    return Offset(self.base, self.k + int(k))


@dataclass(frozen=True, eq=False)
class Bits(Sym):
  """32 bits of a value starting at `shift` (how 64-bit addresses go into 32-bit packet words)."""
  base: Sym
  shift: int

  def eval(self, var_vals: dict[str, int]) -> int:
    return (self.base.eval(var_vals) >> self.shift) & 0xffffffff


def resolve(v, var_vals: dict[str, int]) -> int:
  """An int as it is, a Sym evaluated."""
  return v.eval(var_vals) if isinstance(v, Sym) else v


def lo32(v):
  return v.lo32() if isinstance(v, Sym) else v & 0xffffffff


def hi32(v):
  return v.hi32() if isinstance(v, Sym) else (v >> 32) & 0xffffffff
