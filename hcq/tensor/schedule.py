"""Scheduler: turns the lazy graph into an ordered list of fused kernels.

One kernel computes one output node. Elementwise ops, casts and movement ops fuse freely (movement ops become
the index expressions of loads). A reduction fuses with its elementwise producers, and with its consumers when
they see it through a plain expand (softmax's x - max(x) is one kernel); every reduction of a kernel reduces
the same axes of the same full shape. Anything else - a reduce of another shape, a CONTIGUOUS - is realized
first as its own kernel and loaded."""
from __future__ import annotations
from dataclasses import dataclass, field
import hashlib
import math
from typing import Any, NamedTuple
from hcq.tensor.dtype import DType
from hcq.tensor.lazy import LazyNode
from hcq.tensor.view import ShapeTracker, contiguous_strides


CHAIN_LIMIT = 64  # ops in a chain before a kernel boundary is forced


class KOp:
  """A node of a kernel's AST. op: LOAD (arg (buffer index, tracker)), CONST (arg (value, tracker or None for
  mask)), ALU (arg op name), CAST, BITCAST, REDUCE (arg (op, axes)), MASK (arg tracker: zero outside its mask),
  GATHER (arg (buffer index, buffer elements): the buffer at the integer positions srcs[0] computes).
  `shape` is the index space it is evaluated in: the kernel's full shape or that shape with reduce axes 1."""
  __slots__ = ("op", "srcs", "arg", "dtype", "shape", "key")

  def __init__(self, op: str, srcs: tuple[KOp, ...], arg: Any, dtype: DType, shape: tuple[int, ...]):
    self.op, self.srcs, self.arg, self.dtype, self.shape = op, srcs, arg, dtype, shape
    text = repr((op, arg, dtype.name, shape, tuple(s.key for s in srcs)))
    self.key = hashlib.sha256(text.encode()).hexdigest()[:24]

  def __repr__(self) -> str: return f"KOp({self.op}, {self.arg!r}, {self.dtype.name})"

  def toposort(self) -> list[KOp]:
    """Every node below and including this one, sources first, each once."""
    seen, order = set(), []
    def visit(n: KOp):
      if n.key in seen: return
      seen.add(n.key)
      for s in n.srcs: visit(s)
      order.append(n)
    visit(self)
    return order


@dataclass
class KernelSpec:
  """What one kernel computes: store `ast` (evaluated over out_shape) into buffer 0. Loads index buffers 1...
  full_shape is the loop space (out_shape with reduce axes at their full size); reduce_axes may be empty.
  out_view: where each element of out_shape goes in buffer 0 and whether it is stored at all (a crop's cut-off
  elements are not); None: buffer 0 is out_shape in row-major order. Only a renderer with `stores_views` whose
  `stores_through` accepts the spec gets one."""
  ast: KOp
  out_shape: tuple[int, ...]
  out_dtype: DType
  full_shape: tuple[int, ...]
  reduce_axes: tuple[int, ...]
  buf_dtypes: tuple[DType, ...]
  out_view: ShapeTracker | None = None
  key: str = ""

  def __post_init__(self):
    text = repr((self.ast.key, self.out_shape, self.out_dtype.name, self.full_shape, self.reduce_axes,
                 tuple(d.name for d in self.buf_dtypes), self.out_view))
    self.key = hashlib.sha256(text.encode()).hexdigest()[:24]


@dataclass
class ScheduleItem:
  """A kernel and the buffers it runs on (buffers[0] is written)."""
  kernel: KernelSpec
  buffers: list = field(default_factory=list)


class KeptKernel(NamedTuple):
  """What the scheduler made of a graph template's root (hcq.tensor.graph_template.GraphTemplate.kernel): its one
  kernel, the output's bytes, the leaf slot of each input buffer and which leaves shared a buffer then (_sharing)."""
  spec: KernelSpec
  nbytes: int
  slots: tuple[int, ...]
  sharing: tuple[int, ...]


def _sharing(leaves: tuple[LazyNode, ...]) -> tuple[int, ...] | None:
  """For each leaf, the first leaf with the same buffer (a kernel loads a shared buffer once); None while a leaf is
  not data."""
  if not all(x.realized for x in leaves): return None
  return tuple(next(j for j, y in enumerate(leaves) if y.buffer is x.buffer) for x in leaves)


def _untouched(root: LazyNode, leaves: tuple[LazyNode, ...]) -> bool:
  """Whether no node between `root` and `leaves` is data yet (a consumer's kernel may have computed one: then the
  scheduler's own path uses it rather than computing the graph again)."""
  stop, stack, seen = {id(x) for x in leaves}, list(root.srcs), set()
  while stack:
    n = stack.pop()
    if id(n) in stop or id(n) in seen: continue
    if n.realized: return False
    seen.add(id(n))
    stack.extend(n.srcs)
  return True


def _is_reshape_alias(node: LazyNode) -> bool:
  """A VIEW that only reshapes a contiguous source: its data is the source's buffer as is."""
  if node.op != "VIEW": return False
  st: ShapeTracker = node.arg
  return len(st.views) == 1 and st.views[0].is_contiguous


class Scheduler:
  """Collects ScheduleItems for the nodes asked for, allocating output buffers on `device` as it goes."""

  def __init__(self, device):
    self.device = device
    self.items: list[ScheduleItem] = []
    self.done: list[tuple[LazyNode, tuple]] = []  # nodes turned into buffers, with what they were

  def _become_buffer(self, node: LazyNode, buffer) -> None:
    self.done.append((node, (node.op, node.srcs, node.arg, node.template)))
    node.become_buffer(buffer)

  def undo(self) -> None:
    """Turn the nodes scheduled so far back into what they were (their kernels did not all run: a compile error)."""
    for node, (op, srcs, arg, template) in reversed(self.done):
      node.op, node.srcs, node.arg, node.buffer, node.template = op, srcs, arg, None, template
    self.done.clear()

  def realize(self, node: LazyNode) -> None:
    """Schedule whatever `node` needs so that afterwards it is a BUFFER node."""
    if node.realized: return
    if node.template is None: return self._realize(node)
    template, leaves = node.template
    kept: KeptKernel | None = template.kernel
    if kept is not None and kept.sharing == _sharing(leaves) and _untouched(node, leaves):
      # the same graph over other data (none of its inner nodes computed since): the same kernel, its AST not rebuilt
      out = self.device.alloc(kept.nbytes)
      self.items.append(ScheduleItem(kept.spec, [out] + [leaves[i].buffer for i in kept.slots]))
      self._become_buffer(node, out)
      return
    before = len(self.items)
    self._realize(node)
    new = self.items[before:]
    if kept is None and len(new) == 1 and new[0].buffers[0] is node.buffer and (sharing := _sharing(leaves)) is not None:
      slots = tuple(next((i for i, x in enumerate(leaves) if x.buffer is b), None) for b in new[0].buffers[1:])
      if None not in slots: template.kernel = KeptKernel(new[0].kernel, node.buffer.nbytes, slots, sharing)

  def _realize(self, node: LazyNode) -> None:
    if node.depth > CHAIN_LIMIT: self._cut_long_chains(node)
    if node.op == "CONTIGUOUS" or _is_reshape_alias(node):
      src = node.srcs[0]
      if node.op == "CONTIGUOUS" and src.op == "VIEW" and not _is_reshape_alias(src):
        self._kernel(node, src)  # a copy kernel gathers the view into a new buffer
        return
      self.realize(src)
      self._become_buffer(node, src.buffer)
      return
    self._kernel(node, node)

  def _cut_long_chains(self, root: LazyNode) -> None:
    """Realize ops where a chain crosses a multiple of CHAIN_LIMIT, shallowest first, so that no kernel (and no
    recursion over one) grows with the length of the user's program."""
    cuts, seen, stack = [], set(), [root]
    while stack:  # iterative: the graph may be deeper than Python's recursion limit
      n = stack.pop()
      if id(n) in seen or n.realized: continue
      seen.add(id(n))
      band = n.depth // CHAIN_LIMIT
      if n is not root and n.op in ("ALU", "CAST") and any(s.depth // CHAIN_LIMIT < band for s in n.srcs): cuts.append(n)
      stack.extend(n.srcs)
    for n in sorted(cuts, key=lambda n: n.depth): self.realize(n)

  def _kernel(self, node: LazyNode, value: LazyNode) -> None:
    crop = _crop_of_reduce(value)
    if crop is not None and self._kernel_through(node, *crop): return
    full_shape, reduce_axes = _find_context(value, value.shape)
    builder = _KernelBuilder(self, full_shape, reduce_axes)
    ast = builder.build(value, ShapeTracker.contiguous(value.shape))
    if not builder.fused_reduce: full_shape, reduce_axes = value.shape, ()
    out = self.device.alloc(max(node.size, 1) * node.dtype.itemsize)
    spec = KernelSpec(ast, node.shape, node.dtype, full_shape, reduce_axes,
                      (node.dtype,) + tuple(d for _, d in builder.buffers))
    self.items.append(ScheduleItem(spec, [out] + [b for b, _ in builder.buffers]))
    self._become_buffer(node, out)

  def _kernel_through(self, node: LazyNode, reduce: LazyNode, out_view: ShapeTracker) -> bool:
    """`node`, a crop of an unrealized reduction, computed by the reduction's kernel storing through `out_view`
    straight into node's buffer (no copy kernel after it), where the device's renderer takes such a kernel."""
    renderer = getattr(self.device, "renderer", None)
    if not getattr(renderer, "stores_views", False): return False   # asked before building: the AMD and NV renderers never do
    full_shape, reduce_axes = reduce.srcs[0].shape, reduce.arg[1]
    builder = _KernelBuilder(self, full_shape, reduce_axes)
    ast = builder.build(reduce, ShapeTracker.contiguous(reduce.shape))
    spec = KernelSpec(ast, reduce.shape, reduce.dtype, full_shape, reduce_axes,
                      (reduce.dtype,) + tuple(d for _, d in builder.buffers), out_view)
    if not builder.fused_reduce or not renderer.stores_through(spec):
      # the inputs it realized stay realized (they are needed either way); the kernel is built the usual way
      return False
    out = self.device.alloc(max(node.size, 1) * node.dtype.itemsize)
    self.items.append(ScheduleItem(spec, [out] + [b for b, _ in builder.buffers]))
    self._become_buffer(node, out)
    return True


def _crop_of_reduce(node: LazyNode) -> tuple[LazyNode, ShapeTracker] | None:
  """(reduction, store view) where `node` is a VIEW that keeps a leading corner of an unrealized reduction's output
  read as a row-major array P (a matmul's padded product: its padding cut off) and a copy would otherwise gather it:
  the store view maps each of the reduction's elements to its place in node's row-major buffer, or to none."""
  if node.op != "VIEW" or node.srcs[0].op != "REDUCE" or node.srcs[0].realized or _is_reshape_alias(node): return None
  red, st = node.srcs[0], node.arg
  if len(st.views) != 1 or st.views[0].mask is not None or st.views[0].offset != 0: return None
  dims = [(s, stride) for s, stride in zip(st.shape, st.views[0].strides) if s > 1]   # size-1 axes take no place
  if not dims or dims[-1][1] != 1 or any(stride < 1 for _, stride in dims) or red.size % dims[0][1]: return None
  # P's extents: the first from the reduction's size, each other from the ratio of the strides around it
  padded = [red.size // dims[0][1]] + [dims[i - 1][1] // dims[i][1] for i in range(1, len(dims))]
  if any(dims[i - 1][1] != dims[i][1] * padded[i] for i in range(1, len(dims))): return None
  kept = tuple(s for s, _ in dims)
  if any(p < s for p, s in zip(padded, kept)): return None
  return red, ShapeTracker.contiguous(kept).pad(tuple((0, p - s) for p, s in zip(padded, kept))).reshape(red.shape)


HEAVY_OPS = ("EXP", "LOG", "EXP2", "LOG2", "SIN", "COS", "POW", "SQRT", "DIV", "IDIV", "MOD", "RECIP")


def _expensive(node: LazyNode, budget: int = 8) -> bool:
  """Whether the unrealized elementwise graph under `node` has a transcendental/division op or `budget` ops, and
  no reduction: a value computed from a reduction (layernorm's 1/sqrt(var)) is better recomputed per element than
  split off, which would read the reduction's input a second time."""
  stack, seen, count = [node], set(), 0
  heavy = False
  while stack:
    n = stack.pop()
    if n.op == "REDUCE": return False
    if id(n) in seen or n.op not in ("ALU", "CAST", "BITCAST", "VIEW"): continue
    seen.add(id(n))
    if n.op == "ALU":
      count += 1
      heavy = heavy or n.arg in HEAVY_OPS or count >= budget
    stack.extend(n.srcs)
  return heavy


def _find_context(node: LazyNode, out_shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
  """The kernel's full shape and reduce axes: those of the first reduction reachable without crossing a
  buffer whose output or input shape is the kernel's output shape; else (out_shape, ())."""
  stack, seen = [node], set()
  while stack:
    n = stack.pop()
    if id(n) in seen: continue
    seen.add(id(n))
    if n.op == "REDUCE":
      src_shape, axes = n.srcs[0].shape, n.arg[1]
      if n.shape == out_shape or src_shape == out_shape: return src_shape, axes
      continue
    if n.op in ("ALU", "CAST", "BITCAST", "VIEW"): stack.extend(reversed(n.srcs))
  return out_shape, ()


class _KernelBuilder:
  """Builds one kernel's AST, realizing (through the scheduler) whatever cannot fuse into it."""

  def __init__(self, scheduler: Scheduler, full_shape, reduce_axes):
    self.scheduler = scheduler
    self.full_shape, self.reduce_axes = tuple(full_shape), tuple(reduce_axes)
    self.reduced_shape = tuple(1 if i in self.reduce_axes else s for i, s in enumerate(self.full_shape))
    self.buffers: list[tuple[Any, DType]] = []
    self.memo: dict[tuple[int, ShapeTracker], KOp] = {}
    self.fused_reduce = False

  def buffer_index(self, buf, dtype: DType) -> int:
    for i, (b, d) in enumerate(self.buffers):
      if b is buf and d == dtype: return i + 1
    self.buffers.append((buf, dtype))
    return len(self.buffers)

  def build(self, node: LazyNode, st: ShapeTracker) -> KOp:
    key = (id(node), st)
    if key not in self.memo: self.memo[key] = self._build(node, st)
    return self.memo[key]

  def _can_fuse_reduce(self, node: LazyNode, st: ShapeTracker) -> bool:
    if not self.reduce_axes or node.srcs[0].shape != self.full_shape or node.arg[1] != self.reduce_axes: return False
    if len(st.views) != 1: return False
    v = st.views[0]
    if v.mask is not None or v.offset != 0 or v.shape not in (self.full_shape, self.reduced_shape): return False
    cs = contiguous_strides(node.shape)
    return all(v.strides[d] == (cs[d] if node.shape[d] != 1 else 0) for d in range(len(v.shape)))

  def _build(self, node: LazyNode, st: ShapeTracker) -> KOp:
    shape = st.shape
    masked = any(v.mask is not None for v in st.views)
    if node.op == "BUFFER":
      return KOp("LOAD", (), (self.buffer_index(node.buffer, node.dtype), st), node.dtype, shape)
    if node.op == "CONST":
      return KOp("CONST", (), (node.arg, st if masked else None), node.dtype, shape)
    if node.op == "VIEW":
      src = node.srcs[0]
      if src.op in ("ALU", "CAST") and math.prod(node.shape) >= 4 * max(src.size, 1) and _expensive(src):
        self.scheduler.realize(src)  # broadcasting would recompute it for every copy (exp before a matmul)
      return self.build(src, node.arg.compose(st))
    if node.op in ("ALU", "CAST", "BITCAST"):
      srcs = tuple(self.build(s, st) for s in node.srcs)
      out = KOp(node.op, srcs, node.arg, node.dtype, shape)
      # a masked view (pad) over computed values must read 0 outside, not f(0)
      return KOp("MASK", (out,), st, node.dtype, shape) if masked else out
    if node.op == "GATHER":
      data = node.srcs[0]
      self.scheduler.realize(data)  # loaded at computed positions: it must be a buffer in row-major order
      out = KOp("GATHER", (self.build(node.srcs[1], st),), (self.buffer_index(data.buffer, data.dtype), data.size), node.dtype, shape)
      return KOp("MASK", (out,), st, node.dtype, shape) if masked else out
    if node.op == "REDUCE" and self._can_fuse_reduce(node, st):
      self.fused_reduce = True
      src = self.build(node.srcs[0], ShapeTracker.contiguous(self.full_shape))
      return KOp("REDUCE", (src,), node.arg, node.dtype, self.reduced_shape)
    # REDUCE that cannot fuse, CONTIGUOUS: their own kernels first
    self.scheduler.realize(node)
    return self.build(node, st)
