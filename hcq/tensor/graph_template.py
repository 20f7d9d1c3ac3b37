"""A lazy graph kept as a template over its leaves, to rebuild the same graph over other leaves without redoing the
movement ops that made it (Tensor.matmul's packed product: a dozen pads, reshapes and permutes per call).

A template holds no buffers: its leaves are numbered slots, and each inner node is kept as (op, arg, shape, dtype,
device, sources). Whoever caches a template keys it on everything the graph was built from besides the leaves' data."""
from __future__ import annotations
from hcq.tensor.lazy import LazyNode

_Template = tuple  # int: a leaf's slot; else (op, arg, shape, dtype, device, tuple of _Template)


class GraphTemplate:
  """The graph under `root` with the nodes `leaves` (which it must reach only as leaves: nothing under them is kept)
  turned into slots."""
  __slots__ = ("tree", "kernel")

  def __init__(self, root: LazyNode, leaves: tuple[LazyNode, ...]):
    self.tree = _keep(root, {id(n): i for i, n in enumerate(leaves)}, {})
    self.kernel = None   # what the scheduler made of the root once (hcq.tensor.schedule.KeptKernel)
    root.template = (self, leaves)

  def build(self, leaves: tuple[LazyNode, ...]) -> LazyNode:
    """The graph over `leaves` (new nodes; a node the template shares between users is shared in the result too)."""
    root = _make(self.tree, leaves, {})
    root.template = (self, leaves)
    return root


def _keep(n: LazyNode, slots: dict[int, int], memo: dict[int, _Template]) -> _Template | int:
  if id(n) in slots: return slots[id(n)]
  if n.op in ("BUFFER", "GATHER") or n.buffer is not None: raise ValueError(f"a template cannot hold {n!r}: it is data, not a leaf slot")
  if id(n) not in memo: memo[id(n)] = (n.op, n.arg, n.shape, n.dtype, n.device, tuple(_keep(s, slots, memo) for s in n.srcs))
  return memo[id(n)]


def _make(t: _Template | int, leaves: tuple[LazyNode, ...], memo: dict[int, LazyNode]) -> LazyNode:
  # a module function, not a closure: a recursive closure is a reference cycle that would keep the new nodes (and
  # the buffers they are realized into) alive until the cyclic garbage collector runs
  if isinstance(t, int): return leaves[t]
  if id(t) not in memo:
    op, arg, shape, dtype, device, srcs = t
    memo[id(t)] = LazyNode(op, tuple(_make(s, leaves, memo) for s in srcs), arg, shape, dtype, device=device)
  return memo[id(t)]
