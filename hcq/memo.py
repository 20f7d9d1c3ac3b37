"""A bounded memo for what is derived per shape and asked for again and again (a program's launch queue per grid; the
tensor compiler's load indices, matmul layouts and plans): kept per key, started over when a new key finds it full (a
program of ever new shapes), shared by threads."""
from __future__ import annotations
from typing import Callable, Generic, Hashable, TypeVar

T = TypeVar("T")
_MISSING = object()


class Memo(Generic[T]):
  """make() per key, computed once while kept; None is a value like any other."""

  def __init__(self, limit: int = 4096):
    self.limit = limit
    self._kept: dict[Hashable, T] = {}

  def __len__(self) -> int: return len(self._kept)

  def __getitem__(self, key: Hashable) -> T: return self._kept[key]

  def get(self, key: Hashable, make: Callable[[], T]) -> T:
    hit = self._kept.get(key, _MISSING)   # read once: another thread may clear the dict between a test and a read
    if hit is _MISSING:
      hit = make()
      if len(self._kept) >= self.limit: self._kept.clear()
      self._kept[key] = hit
    return hit
