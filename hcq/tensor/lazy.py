"""The lazy graph: every Tensor op adds a `LazyNode`; nothing runs until a result is asked for.

Node ops:
  BUFFER      realized data in a device buffer (contiguous, node.shape/node.dtype over the buffer's bytes)
  CONST       a scalar (shape ()); broadcast by VIEW nodes on top
  ALU         elementwise op, arg = op name (see ALU_OPS), all srcs have node.shape
  CAST        value conversion to node.dtype; BITCAST reinterprets bits of the same width
  REDUCE      arg = (op, axes) with op in SUM/MAX/MIN; reduced axes keep size 1
  VIEW        arg = ShapeTracker from srcs[0].shape to node.shape (movement ops; free until loaded)
  GATHER      srcs (data, index): data.reshape(-1)[index], node.shape = index.shape (data is realized first;
              indices are checked on the host before they get here)
  CONTIGUOUS  forces srcs[0] into its own buffer
When a node is realized it turns into a BUFFER node in place, so every user sees the data."""
from __future__ import annotations
import math
from typing import Any
from hcq.tensor.dtype import DType, dtypes
from hcq.tensor.view import ShapeTracker

UNARY_OPS = ("NEG", "EXP", "LOG", "EXP2", "LOG2", "SIN", "COS", "SQRT", "RECIP", "ABS", "NOT", "TRUNC", "FLOOR")
BINARY_OPS = ("ADD", "SUB", "MUL", "DIV", "IDIV", "MOD", "MAX", "MIN", "POW", "AND", "OR", "XOR",
              "CMPLT", "CMPLE", "CMPEQ", "CMPNE")
TERNARY_OPS = ("WHERE",)
ALU_OPS = UNARY_OPS + BINARY_OPS + TERNARY_OPS
REDUCE_OPS = ("SUM", "MAX", "MIN")


class LazyNode:
  """One node of the lazy graph (see the module docstring for the ops)."""
  __slots__ = ("op", "srcs", "arg", "shape", "dtype", "buffer", "device", "depth", "template", "__weakref__")

  def __init__(self, op: str, srcs: tuple[LazyNode, ...], arg: Any, shape: tuple[int, ...], dtype: DType,
               buffer=None, device: str = "CPU"):
    self.op, self.srcs, self.arg, self.shape, self.dtype, self.buffer, self.device = op, srcs, arg, tuple(shape), dtype, buffer, device
    self.depth = 1 + max((s.depth for s in srcs), default=-1)  # longest chain of ops below (bounds kernel size)
    self.template = None  # (GraphTemplate, its leaves) on the root of a graph a template built (its kernel is kept there)

  def __repr__(self) -> str: return f"<{self.op} {self.arg if self.op != 'VIEW' else ''} {self.shape} {self.dtype.name}>"

  @property
  def size(self) -> int: return math.prod(self.shape)
  @property
  def realized(self) -> bool: return self.op == "BUFFER"

  def become_buffer(self, buffer) -> None:
    """Turn this node into realized data in place (all users now load from `buffer`)."""
    self.op, self.srcs, self.arg, self.buffer, self.template = "BUFFER", (), None, buffer, None

  # builders
  @staticmethod
  def from_buffer(buffer, shape, dtype: DType, device: str = "CPU") -> LazyNode:
    return LazyNode("BUFFER", (), None, shape, dtype, buffer, device)

  @staticmethod
  def const(value, dtype: DType, shape: tuple[int, ...] = (), device: str = "CPU") -> LazyNode:
    value = bool(value) if dtype == dtypes.bool else (float(value) if dtype.is_float else int(value))
    node = LazyNode("CONST", (), value, (), dtype, device=device)
    if shape == (): return node
    return node.movement("reshape", (1,) * len(shape)).movement("expand", tuple(shape))

  def alu(self, op: str, *others: LazyNode, dtype: DType | None = None) -> LazyNode:
    assert op in ALU_OPS, op
    for o in others: assert o.shape == self.shape, (op, self.shape, o.shape)
    out_dtype = dtype if dtype is not None else (dtypes.bool if op.startswith("CMP") else (others[0].dtype if op == "WHERE" else self.dtype))
    return LazyNode("ALU", (self,) + others, op, self.shape, out_dtype, device=self.device)

  def cast(self, dtype: DType) -> LazyNode:
    if dtype == self.dtype: return self
    return LazyNode("CAST", (self,), None, self.shape, dtype, device=self.device)

  def bitcast(self, dtype: DType) -> LazyNode:
    assert dtype.itemsize == self.dtype.itemsize
    return LazyNode("BITCAST", (self,), None, self.shape, dtype, device=self.device)

  def reduce(self, op: str, axes: tuple[int, ...]) -> LazyNode:
    assert op in REDUCE_OPS, op
    axes = tuple(sorted(a for a in axes if self.shape[a] != 1))
    if not axes: return self
    shape = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
    return LazyNode("REDUCE", (self,), (op, axes), shape, self.dtype, device=self.device)

  def gather(self, index: LazyNode) -> LazyNode:
    """This node's elements (in row-major order) at the integer positions in `index`."""
    assert index.dtype.is_int, index.dtype
    return LazyNode("GATHER", (self, index), None, index.shape, self.dtype, device=self.device)

  def contiguous(self) -> LazyNode:
    return LazyNode("CONTIGUOUS", (self,), None, self.shape, self.dtype, device=self.device)

  def movement(self, method: str, arg) -> LazyNode:
    """Apply one ShapeTracker movement method (reshape/permute/expand/pad/shrink/flip/stride)."""
    base = self.srcs[0] if self.op == "VIEW" else self
    st = self.arg if self.op == "VIEW" else ShapeTracker.contiguous(self.shape)
    new_st = getattr(st, method)(arg)
    if new_st.shape == base.shape and new_st.is_contiguous: return base
    return LazyNode("VIEW", (base,), new_st, new_st.shape, self.dtype, device=self.device)
