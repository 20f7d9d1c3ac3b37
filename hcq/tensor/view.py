"""Views: how a tensor's index space maps onto a buffer, so movement ops cost nothing until a kernel loads.

A `View` is shape + strides + offset + an optional mask (the in-bounds box; outside it the value is 0, which is
how pad works). A `ShapeTracker` is a stack of views: when a reshape cannot be expressed by new strides, a new
contiguous view is pushed and the index is unravelled through the one below (with // and %)."""
from __future__ import annotations
from dataclasses import dataclass
import math
from hcq.tensor.symbolic import Expr, Num, Valid, num, div, mod


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
  strides, acc = [], 1
  for s in reversed(shape):
    strides.append(acc if s != 1 else 0)
    acc *= s
  return tuple(reversed(strides))


@dataclass(frozen=True)
class View:
  """shape, strides (0 = broadcast), offset, and mask ((lo, hi) per dim, or None when all in bounds)."""
  shape: tuple[int, ...]
  strides: tuple[int, ...]
  offset: int = 0
  mask: tuple[tuple[int, int], ...] | None = None

  @staticmethod
  def contiguous(shape: tuple[int, ...]) -> View: return View(tuple(shape), contiguous_strides(tuple(shape)))

  @property
  def is_contiguous(self) -> bool:
    return self.offset == 0 and self.mask is None and self.strides == contiguous_strides(self.shape)

  def canonical(self) -> View:
    """Strides of size-1 dims are irrelevant (set 0); an all-in-bounds mask is dropped."""
    strides = tuple(0 if s == 1 else st for s, st in zip(self.shape, self.strides))
    mask = self.mask
    if mask is not None and all(lo == 0 and hi == s for (lo, hi), s in zip(mask, self.shape)): mask = None
    if mask is not None and any(lo >= hi for lo, hi in mask):  # nothing valid: the view reads only zeros
      mask, strides = tuple((0, 0) for _ in self.shape), tuple(0 for _ in self.shape)
      return View(self.shape, strides, 0, mask)
    return View(self.shape, strides, self.offset, mask)

  def index(self, idxs: list[Expr]) -> tuple[Expr, Valid]:
    """Buffer offset and validity for the given per-dim index expressions."""
    off: Expr = Num(self.offset)
    valid = Valid()
    for i, (idx, st) in enumerate(zip(idxs, self.strides)):
      if st: off = off + idx * st
      if self.mask is not None:
        lo, hi = self.mask[i]
        valid = valid.and_(idx, lo, hi)
    return off, valid

  # movement ops (each returns a new View; reshape may fail and return None)
  def permute(self, order: tuple[int, ...]) -> View:
    return View(tuple(self.shape[i] for i in order), tuple(self.strides[i] for i in order), self.offset,
                None if self.mask is None else tuple(self.mask[i] for i in order))

  def expand(self, shape: tuple[int, ...]) -> View:
    mask = None if self.mask is None else tuple(m if s == n else ((0, n) if m != (0, 0) else (0, 0))
                                                for m, s, n in zip(self.mask, self.shape, shape))
    return View(tuple(shape), tuple(st if s == n else 0 for st, s, n in zip(self.strides, self.shape, shape)),
                self.offset, mask).canonical()

  def shrink(self, arg: tuple[tuple[int, int], ...]) -> View:
    offset = self.offset + sum(lo * st for (lo, _), st in zip(arg, self.strides))
    mask = None
    if self.mask is not None:
      mask = tuple((max(mlo, lo) - lo, max(min(mhi, hi), max(mlo, lo)) - lo) for (mlo, mhi), (lo, hi) in zip(self.mask, arg))
    return View(tuple(hi - lo for lo, hi in arg), self.strides, offset, mask).canonical()

  def pad(self, arg: tuple[tuple[int, int], ...]) -> View:
    shape = tuple(s + b + a for s, (b, a) in zip(self.shape, arg))
    offset = self.offset - sum(b * st for (b, _), st in zip(arg, self.strides))
    base = self.mask if self.mask is not None else tuple((0, s) for s in self.shape)
    mask = tuple((lo + b, hi + b) for (lo, hi), (b, _) in zip(base, arg))
    return View(shape, self.strides, offset, mask).canonical()

  def flip(self, axes: tuple[int, ...]) -> View:
    strides = list(self.strides)
    offset = self.offset
    mask = list(self.mask) if self.mask is not None else None
    for a in axes:
      offset += (self.shape[a] - 1) * strides[a]
      strides[a] = -strides[a]
      if mask is not None: mask[a] = (self.shape[a] - mask[a][1], self.shape[a] - mask[a][0])
    return View(self.shape, tuple(strides), offset, None if mask is None else tuple(mask)).canonical()

  def stride(self, steps: tuple[int, ...]) -> View:
    """Every steps[d]-th element along each dim (steps > 0)."""
    shape = tuple((s + k - 1) // k for s, k in zip(self.shape, steps))
    mask = None
    if self.mask is not None:
      mask = tuple(((lo + k - 1) // k, (hi + k - 1) // k) for (lo, hi), k in zip(self.mask, steps))
    return View(shape, tuple(st * k for st, k in zip(self.strides, steps)), self.offset, mask).canonical()

  def reshape(self, shape: tuple[int, ...]) -> View | None:
    """The same elements under a new shape, or None when no single view can express it."""
    if self.shape == shape: return self
    if self.mask is not None:
      # a masked view reshapes only by adding/removing size-1 dims
      if [s for s in self.shape if s != 1] != [s for s in shape if s != 1]: return None
      inner = View(self.shape, self.strides, self.offset, None).reshape(shape)
      old_masks = iter([m for m, s in zip(self.mask, self.shape) if s != 1])
      mask = tuple(next(old_masks) if s != 1 else (0, 1) for s in shape)
      if any(m == (0, 0) for m in self.mask): mask = tuple((0, 0) for _ in shape)
      return View(inner.shape, inner.strides, inner.offset, mask).canonical()
    # numpy's no-copy reshape: walk groups of old and new dims that cover the same number of elements
    old = [(s, st) for s, st in zip(self.shape, self.strides) if s != 1]
    new_strides = [0] * len(shape)
    oi, ni = 0, 0
    new_nz = [i for i, s in enumerate(shape) if s != 1]
    while oi < len(old) or ni < len(new_nz):
      if oi >= len(old) or ni >= len(new_nz): return None
      o_end, n_end = oi + 1, ni + 1
      o_size, n_size = old[oi][0], shape[new_nz[ni]]
      while o_size != n_size:
        if o_size < n_size:
          if o_end >= len(old): return None
          o_size *= old[o_end][0]; o_end += 1
        else:
          if n_end >= len(new_nz): return None
          n_size *= shape[new_nz[n_end]]; n_end += 1
      # the old group must be one contiguous run in memory
      for k in range(oi, o_end - 1):
        if old[k][1] != old[k + 1][1] * old[k + 1][0]: return None
      st = old[o_end - 1][1]
      for k in range(n_end - 1, ni - 1, -1):
        new_strides[new_nz[k]] = st
        st *= shape[new_nz[k]]
      oi, ni = o_end, n_end
    return View(tuple(shape), tuple(new_strides), self.offset, None).canonical()


@dataclass(frozen=True)
class ShapeTracker:
  """A stack of views; views[-1] is what the tensor's shape sees, views[0] addresses the buffer."""
  views: tuple[View, ...]

  @staticmethod
  def contiguous(shape: tuple[int, ...]) -> ShapeTracker: return ShapeTracker((View.contiguous(tuple(shape)),))

  @property
  def shape(self) -> tuple[int, ...]: return self.views[-1].shape
  @property
  def is_contiguous(self) -> bool: return len(self.views) == 1 and self.views[0].is_contiguous
  def size(self) -> int: return math.prod(self.shape)

  def index(self, idxs: list[Expr]) -> tuple[Expr, Valid]:
    """Buffer element offset and validity for per-dim index expressions of this tracker's shape."""
    idx, valid = self.views[-1].index([num(i) for i in idxs])
    for v in reversed(self.views[:-1]):
      # unravel the linear index (row-major over v.shape) into v's dims
      sub, acc = [], 1
      for s in reversed(v.shape):
        sub.append(mod(div(idx, acc), s) if s > 1 else Num(0))  # an empty view is only reached under a false mask
        acc *= max(s, 1)
      idx, valid2 = v.index(list(reversed(sub)))
      valid = Valid(valid.conds + valid2.conds)
    return idx, valid

  def _replace_last(self, v: View) -> ShapeTracker: return ShapeTracker(self.views[:-1] + (v,))

  def permute(self, order: tuple[int, ...]) -> ShapeTracker: return self._replace_last(self.views[-1].permute(order))
  def expand(self, shape: tuple[int, ...]) -> ShapeTracker: return self._replace_last(self.views[-1].expand(shape))
  def shrink(self, arg) -> ShapeTracker: return self._replace_last(self.views[-1].shrink(tuple(arg)))
  def pad(self, arg) -> ShapeTracker: return self._replace_last(self.views[-1].pad(tuple(arg)))
  def flip(self, axes) -> ShapeTracker: return self._replace_last(self.views[-1].flip(tuple(axes)))
  def stride(self, steps) -> ShapeTracker: return self._replace_last(self.views[-1].stride(tuple(steps)))

  def reshape(self, shape: tuple[int, ...]) -> ShapeTracker:
    v = self.views[-1].reshape(tuple(shape))
    if v is not None: return self._replace_last(v)
    return ShapeTracker(self.views + (View.contiguous(tuple(shape)),))

  def compose(self, outer: ShapeTracker) -> ShapeTracker:
    """The tracker for `outer` (built over a contiguous tensor of this tracker's shape) read through this one."""
    if self.is_contiguous: return outer
    if outer.is_contiguous and outer.shape == self.shape: return self
    if len(outer.views) == 1 and outer.views[0].mask is None and outer.views[0].offset == 0:
      # a pure reshape/permute/expand of a contiguous layout often maps onto the last view's strides directly
      merged = _merge_strided(self.views[-1], outer.views[0])
      if merged is not None: return self._replace_last(merged)
    return ShapeTracker(self.views + outer.views)


def _merge_strided(base: View, v: View) -> View | None:
  """v (over base.shape laid out contiguously) as one view over base's buffer, when v's every nonzero stride is a
  contiguous stride of a single base dim and v's extent along it fits in that dim (no carries between dims)."""
  cs = contiguous_strides(base.shape)
  strides = []
  used: dict[int, int] = {}
  for st, s in zip(v.strides, v.shape):
    if st == 0 or s == 1:
      strides.append(0)
      continue
    dims = [d for d, c in enumerate(cs) if c == st and base.shape[d] >= s]
    if len(dims) != 1 or dims[0] in used: return None
    d = dims[0]
    used[d] = s
    strides.append(base.strides[d])
  for d, s in used.items():
    if s != base.shape[d] and base.mask is not None: return None
  if base.mask is not None and any(lo >= hi for lo, hi in base.mask):  # reads nothing but zeros
    return View(v.shape, tuple(0 for _ in v.shape), 0, tuple((0, 0) for _ in v.shape))
  if base.mask is not None:
    # the mask follows the dims that were picked; every base dim must be covered once in full
    if sorted(used) != [d for d in range(len(base.shape)) if base.shape[d] != 1]: return None
    mask = []
    for st, s in zip(v.strides, v.shape):
      if st == 0 or s == 1: mask.append((0, s))
      else: mask.append(base.mask[[d for d, c in enumerate(cs) if c == st][0]])
    return View(v.shape, tuple(strides), base.offset, tuple(mask)).canonical()
  return View(v.shape, tuple(strides), base.offset, None).canonical()
