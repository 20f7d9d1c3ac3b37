"""Tensor: a lazy n-dimensional array that feels like numpy and compiles to fused kernels.

Every op records a node in a lazy graph (hcq.tensor.lazy); `.numpy()`, `.item()` or `.realize()` schedule
the graph into fused kernels, compile them (cached by AST) and run them on the device."""
from __future__ import annotations
import math
import numbers
import weakref
from typing import NamedTuple
import numpy as np
from hcq.tensor.dtype import DType, dtypes, to_dtype, result_type, sum_dtype, least_float, bf16_to_f32, f32_to_bf16
from hcq.tensor.graph_template import GraphTemplate
from hcq.tensor.lazy import LazyNode
from hcq.tensor.device import get_device
from hcq.tensor import loops
from hcq.tensor import runtime

AxisError = np.exceptions.AxisError
Scalar = (bool, int, float, np.bool_)


def _shape_from(args) -> tuple[int, ...]:
  """Shape from f(2, 3) or f((2, 3))."""
  if len(args) == 1 and isinstance(args[0], (tuple, list)): args = tuple(args[0])
  return tuple(int(a) for a in args)


_dtype_cache: dict[tuple, DType] = {}
# Tensor.matmul's packed products by (operands' views, dtypes, plan): graph templates, no data (hcq.tensor.graph_template)
_MATMUL_GRAPHS: dict[tuple, GraphTemplate] = {}
MATMUL_GRAPHS_KEPT = 256


class _Product(NamedTuple):
  """A packed product of two tensors taken as they are: weak references to their nodes, the nodes' ops then (a view
  realized since reads differently), the settings it was planned under, and its template."""
  a: weakref.ref
  b: weakref.ref
  ops: tuple[str, str]
  settings: tuple
  template: GraphTemplate


# the last _Product: the same product again builds from its template without the checks and lookups before it
# (1000^2 on two threads: 163 of a call's 475 us of Python, run after a kernel has flushed the caches)
_last_product: list[_Product | None] = [None]


def _leaf(node: LazyNode) -> LazyNode:
  """The data a packed product reads an operand from: the node if it is realized, else the data under its view."""
  return node if node.realized else node.srcs[0]


def forget_matmul_graphs() -> None:
  """Drop the kept products' templates and the last product (tests that count templates start from none)."""
  _MATMUL_GRAPHS.clear()
  _last_product[0] = None


def _where_values(a, b):
  """numpy.where's value promotion, as a ufunc-like function (module level so dtype results cache by it)."""
  return np.where(True, a, b)


def _np_dtype_of(ufunc, *operands) -> DType:
  """Cached _resolve_dtype for tensor-only operands (Python scalars need their value: it may overflow)."""
  if all(isinstance(o, DType) for o in operands):
    key = (ufunc, operands)
    if key not in _dtype_cache: _dtype_cache[key] = _resolve_dtype(ufunc, *operands)
    return _dtype_cache[key]
  return _resolve_dtype(ufunc, *operands)


def _resolve_dtype(ufunc, *operands) -> DType:
  """numpy's result dtype of `ufunc` over DTypes and Python scalars (NEP 50: Python scalars are weak); bfloat16
  follows float16's rules, promoting to float32 against float16."""
  if any(isinstance(o, DType) and o == dtypes.bfloat16 for o in operands):
    # ask numpy with float16 standing in for bfloat16; a float16 answer means "the promoted float type"
    probe = [(np.zeros(1, np.float16) if o == dtypes.bfloat16 else np.zeros(1, o.np)) if isinstance(o, DType) else o for o in operands]
    with np.errstate(all="ignore"): out = to_dtype(ufunc(*probe).dtype)
    return result_type(*operands) if out == dtypes.float16 else out
  arrays = [np.zeros(1, o.np) if isinstance(o, DType) else o for o in operands]
  with np.errstate(all="ignore"): return to_dtype(ufunc(*arrays).dtype)


def _normalize_axes(axis, ndim: int) -> tuple[int, ...]:
  if axis is None: return tuple(range(ndim))
  axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
  out = []
  for a in axes:
    a = int(a)
    if not -ndim <= a < max(ndim, 1) or (ndim == 0 and a not in (0, -1)): raise AxisError(a, ndim)
    out.append(a % ndim if ndim else 0)
  if len(set(out)) != len(out): raise ValueError("duplicate value in 'axis'")
  return tuple(out)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  """numpy's broadcasting of shapes, with numpy's error when they do not broadcast."""
  ndim = max((len(s) for s in shapes), default=0)
  padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
  out = []
  for dims in zip(*padded):
    sizes = {d for d in dims if d != 1}
    if len(sizes) > 1:
      raise ValueError("operands could not be broadcast together with shapes " + " ".join(str(tuple(s)).replace(" ", "") for s in shapes))
    out.append(sizes.pop() if sizes else 1)
  return tuple(out)


INDEX_TYPES = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean arrays are "
               "valid indices")


def _is_advanced(index) -> bool:
  """Whether a numpy index has an advanced part (an integer or boolean array, a list, a Tensor or a bool)."""
  parts = index if isinstance(index, tuple) else (index,)
  return any(isinstance(i, (Tensor, np.ndarray, list, bool, np.bool_)) for i in parts)


class Tensor:
  """A lazy array. Create from numpy arrays, lists or scalars (numpy's dtype rules), or with zeros/ones/full/
  arange/empty/rand/randn; combine with numpy-style operators; get results with .numpy()."""
  __slots__ = ("node",)
  __array_priority__ = 1000  # numpy defers to our operators (np_array + tensor -> Tensor)

  def __init__(self, data, dtype=None, device: str | None = None):
    if isinstance(data, LazyNode):
      self.node = data
      return
    if isinstance(data, Tensor):
      self.node = data.cast(dtype).node if dtype is not None else data.node
      return
    want = to_dtype(dtype) if dtype is not None else None
    arr = np.asarray(data)
    if arr.dtype.kind not in "biuf": raise TypeError(f"cannot make a Tensor from {arr.dtype} data: numbers and bools only")
    if arr.dtype.name not in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"):
      arr = arr.astype(np.float64 if arr.dtype.kind == "f" else np.int64)
    dt = want or to_dtype(arr.dtype)
    if dt == dtypes.bfloat16: host = f32_to_bf16(arr.astype(np.float32))
    else: host = np.ascontiguousarray(arr.astype(dt.np, copy=False))
    dev = get_device(device)
    buf = dev.alloc(max(host.nbytes, dt.itemsize))
    if host.nbytes: buf.copyin(host)
    self.node = LazyNode.from_buffer(buf, arr.shape, dt, dev.name)

  # basic properties
  @property
  def shape(self) -> tuple[int, ...]:
    """The dimensions."""
    return self.node.shape
  @property
  def dtype(self) -> DType:
    """The element type."""
    return self.node.dtype
  @property
  def ndim(self) -> int:
    """The number of dimensions."""
    return len(self.node.shape)
  @property
  def size(self) -> int:
    """The number of elements."""
    return self.node.size
  def numel(self) -> int:
    """The number of elements."""
    return self.node.size
  @property
  def device(self) -> str:
    """The device name: "CPU", "AMD", "MOCKKFD+AMD", ... (see hcq.tensor.device.get_device)."""
    return self.node.device
  @property
  def T(self) -> Tensor:
    """The axes reversed (numpy's .T)."""
    return self.transpose()
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of unsized object")
    return self.shape[0]
  def __repr__(self) -> str: return f"<Tensor {self.shape} {self.dtype.name} on {self.device}{'' if self.node.realized else ' (lazy)'}>"
  __hash__ = object.__hash__

  # creation
  @staticmethod
  def full(shape, fill_value, dtype=None, device: str | None = None) -> Tensor:
    """A tensor of `shape` filled with `fill_value` (dtype from the value like numpy, unless given)."""
    shape = _shape_from((shape,)) if not isinstance(shape, int) else (shape,)
    dt = to_dtype(dtype) if dtype is not None else to_dtype(np.asarray(fill_value).dtype)
    return Tensor(LazyNode.const(fill_value, dt, shape, get_device(device).name))
  @staticmethod
  def zeros(*shape, dtype="float64", device: str | None = None) -> Tensor:
    """Zeros (float64 by default, like numpy)."""
    return Tensor.full(_shape_from(shape), 0, dtype, device)
  @staticmethod
  def ones(*shape, dtype="float64", device: str | None = None) -> Tensor:
    """Ones (float64 by default, like numpy)."""
    return Tensor.full(_shape_from(shape), 1, dtype, device)
  @staticmethod
  def empty(*shape, dtype="float64", device: str | None = None) -> Tensor:
    """An uninitialized tensor."""
    dt, shape = to_dtype(dtype), _shape_from(shape)
    dev = get_device(device)
    return Tensor(LazyNode.from_buffer(dev.alloc(max(math.prod(shape), 1) * dt.itemsize), shape, dt, dev.name))
  @staticmethod
  def arange(start, stop=None, step=1, dtype=None, device: str | None = None) -> Tensor:
    """numpy.arange: [start, stop) by step."""
    arr = np.arange(start, stop, step) if stop is not None else np.arange(0, start, step)
    return Tensor(arr, dtype=dtype, device=device)
  _seed = 0
  @staticmethod
  def manual_seed(seed: int) -> None:
    """Seed for rand/randn calls that are not given a seed."""
    Tensor._seed = seed
  @staticmethod
  def _rng(seed):
    if seed is None:
      seed = Tensor._seed
      Tensor._seed += 1
    return np.random.default_rng(seed)
  @staticmethod
  def rand(*shape, seed: int | None = None, dtype="float32", device: str | None = None) -> Tensor:
    """Uniform [0, 1) samples, reproducible from `seed` (or the manual_seed sequence)."""
    dt = to_dtype(dtype)
    arr = Tensor._rng(seed).random(_shape_from(shape), dtype=np.float64)
    return Tensor(arr, dtype=dt, device=device)
  @staticmethod
  def randn(*shape, seed: int | None = None, dtype="float32", device: str | None = None) -> Tensor:
    """Standard normal samples, reproducible from `seed` (or the manual_seed sequence)."""
    arr = Tensor._rng(seed).standard_normal(_shape_from(shape))
    return Tensor(arr, dtype=to_dtype(dtype), device=device)

  # running
  def realize(self) -> Tensor:
    """Compute this tensor now (it stays a Tensor; later ops read the result)."""
    runtime.realize([self.node], get_device(self.device))
    return self

  def numpy(self) -> np.ndarray:
    """The values as a numpy array (bfloat16 comes back as float32, numpy having no bfloat16)."""
    self.realize()  # every realized node is a contiguous buffer of its shape
    host = np.empty(self.shape, self.dtype.np)
    if host.size: self.node.buffer.copyout(host)  # a buffer may be larger (empty tensors still get one element)
    return bf16_to_f32(host) if self.dtype == dtypes.bfloat16 else host

  def item(self):
    """The single value as a Python scalar."""
    if self.size != 1: raise ValueError("can only convert an array of size 1 to a Python scalar")
    return self.numpy().reshape(()).item()
  def tolist(self):
    """The values as nested Python lists."""
    return self.numpy().tolist()
  def __bool__(self) -> bool:
    if self.size != 1: raise ValueError("The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()")
    return bool(self.item())
  def __float__(self) -> float: return float(self.item())
  def __int__(self) -> int: return int(self.item())
  def __array__(self, dtype=None, copy=None): return self.numpy() if dtype is None else self.numpy().astype(dtype)

  def to(self, device: str) -> Tensor:
    """This tensor on `device` (a DEV string: "CPU", "AMD", "MOCKKFD+AMD", ...), copied through the host."""
    dev = get_device(device)
    return self if dev.name == self.device else Tensor(self.numpy(), dtype=self.dtype, device=dev.name)

  def contiguous(self) -> Tensor:
    """A tensor with its own contiguous buffer (a kernel boundary)."""
    return Tensor(self.node.contiguous())

  # types
  def cast(self, dtype) -> Tensor:
    """Convert values to `dtype` (numpy's astype; floats to ints truncate; out of range, inf and NaN give numpy's x86-64 results: docs/tensor.md)."""
    return Tensor(self.node.cast(to_dtype(dtype)))
  astype = cast

  def bitcast(self, dtype) -> Tensor:
    """Reinterpret the bits (numpy's .view): same width anywhere; other widths change the last axis and need
    contiguous data (the tensor is realized)."""
    dt = to_dtype(dtype)
    if dt == self.dtype: return self
    if dt.itemsize == self.dtype.itemsize and dtypes.bool not in (dt, self.dtype): return Tensor(self.node.bitcast(dt))
    shape = list(self.shape)
    if dt.itemsize != self.dtype.itemsize:
      if not shape: raise ValueError("Changing the dtype of a 0d array is only supported if the itemsize is unchanged")
      nbytes = shape[-1] * self.dtype.itemsize
      if nbytes % dt.itemsize:
        raise ValueError("When changing to a larger dtype, its size must be a divisor of the total size in bytes of the last axis of the array.")
      shape[-1] = nbytes // dt.itemsize
    src = self.contiguous().realize()
    return Tensor(LazyNode.from_buffer(src.node.buffer, tuple(shape), dt, self.device))
  view = bitcast

  # elementwise
  def _operand(self, other):
    if isinstance(other, Tensor):
      if other.device != self.device:
        raise ValueError(f"tensors on different devices ({self.device} and {other.device}): move one with .to()")
      return other
    if isinstance(other, (np.ndarray, np.generic)): return Tensor(other, device=self.device)
    if isinstance(other, (list, tuple)): return Tensor(np.asarray(other), device=self.device)
    if isinstance(other, Scalar) or isinstance(other, numbers.Number): return other
    raise TypeError(f"unsupported operand {type(other).__name__}")

  def _const_like(self, value, dtype: DType, shape) -> Tensor:
    return Tensor(LazyNode.const(value, dtype, shape, self.device))

  def _binary(self, op: str, other, ufunc, reverse: bool = False, compute: DType | None = None,
              out: DType | None = None) -> Tensor:
    other = self._operand(other)
    x_dt = self.dtype
    y_dt = other.dtype if isinstance(other, Tensor) else other
    args = (y_dt, x_dt) if reverse else (x_dt, y_dt)
    dt = _np_dtype_of(ufunc, *args) if compute is None else compute
    if isinstance(other, Tensor):
      shape = broadcast_shapes(self.shape, other.shape)
      y = other.cast(dt)._broadcast_to(shape)
    else:
      shape = self.shape
      y = self._const_like(other, dt, shape)
    x = self.cast(dt)._broadcast_to(shape)
    a, b = (y, x) if reverse else (x, y)
    return Tensor(a.node.alu(op, b.node, dtype=out))

  def _broadcast_to(self, shape: tuple[int, ...]) -> Tensor:
    if self.shape == shape: return self
    x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape) if self.ndim < len(shape) else self
    return Tensor(x.node.movement("expand", tuple(shape)))

  def _no_bool(self, what: str, other=None) -> None:
    others = [other.dtype if isinstance(other, Tensor) else type(other)] if other is not None else []
    if self.dtype == dtypes.bool and all(o in (dtypes.bool, bool) for o in others):
      raise TypeError(f"numpy boolean {what}, the operator is not supported for bool, use logical ops instead")

  def add(self, other, reverse=False) -> Tensor:
    """x + y (bool + bool is logical or, like numpy)."""
    return self._binary("ADD", other, np.add, reverse)
  def sub(self, other, reverse=False) -> Tensor:
    """x - y (not for two bools, like numpy)."""
    self._no_bool("subtract", other)
    return self._binary("SUB", other, np.subtract, reverse)
  def mul(self, other, reverse=False) -> Tensor:
    """x * y."""
    return self._binary("MUL", other, np.multiply, reverse)
  def div(self, other, reverse=False) -> Tensor:
    """True division (ints divide as float64, like numpy)."""
    return self._binary("DIV", other, np.true_divide, reverse)
  def floordiv(self, other, reverse=False) -> Tensor:
    """numpy's floor_divide (x // 0 gives 0 for integers)."""
    return self._binary("IDIV", other, np.floor_divide, reverse)
  def mod(self, other, reverse=False) -> Tensor:
    """numpy's remainder: the result takes the divisor's sign."""
    return self._binary("MOD", other, np.remainder, reverse)
  def pow(self, other, reverse=False) -> Tensor:
    """x ** y. Integer powers are computed in float64 and converted back (exact below 2**53); a float x ** 0.5 is
    sqrt(x), as numpy computes it."""
    other = self._operand(other)
    if not reverse and not isinstance(other, Tensor) and other == 2: return self * self
    dt = _np_dtype_of(np.power, *((other.dtype if isinstance(other, Tensor) else other, self.dtype) if reverse else (self.dtype, other.dtype if isinstance(other, Tensor) else other)))
    # numpy's float power with a scalar exponent 0.5 is its sqrt ((-inf) ** 0.5 is nan, (-0.0) ** 0.5 is -0.0)
    if dt.is_float and not reverse and not isinstance(other, Tensor) and other == 0.5: return self.cast(dt).sqrt()
    if dt.is_float: return self._binary("POW", other, np.power, reverse)
    return self.cast(dtypes.float64)._binary("POW", other, np.power, reverse, compute=dtypes.float64).cast(dt)
  def maximum(self, other) -> Tensor:
    """Elementwise max; NaN wins (numpy.maximum)."""
    return self._binary("MAX", other, np.maximum)
  def minimum(self, other) -> Tensor:
    """Elementwise min; NaN wins (numpy.minimum)."""
    return self._binary("MIN", other, np.minimum)

  def _compare(self, op: str, other, ufunc, reverse=False) -> Tensor:
    other = self._operand(other)
    args = (self.dtype, other.dtype if isinstance(other, Tensor) else other)
    with np.errstate(all="ignore"):
      dt = result_type(*args) if not any(isinstance(a, DType) and a == dtypes.bfloat16 for a in args) else dtypes.float32
    if isinstance(other, int) and not isinstance(other, bool) and dt.is_int:
      info = np.iinfo(dt.np)
      if not info.min <= other <= info.max: dt = dtypes.float64  # numpy 2 compares out-of-range Python ints exactly
    return self._binary(op, other, ufunc, reverse, compute=dt, out=dtypes.bool)
  def __lt__(self, o) -> Tensor: return self._compare("CMPLT", o, np.less)
  def __le__(self, o) -> Tensor: return self._compare("CMPLE", o, np.less_equal)
  def __gt__(self, o) -> Tensor: return self._compare("CMPLT", o, np.greater, reverse=True)
  def __ge__(self, o) -> Tensor: return self._compare("CMPLE", o, np.greater_equal, reverse=True)
  def __eq__(self, o) -> Tensor: return self._compare("CMPEQ", o, np.equal)  # type: ignore[override]
  def __ne__(self, o) -> Tensor: return self._compare("CMPNE", o, np.not_equal)  # type: ignore[override]
  eq, ne, lt, le, gt, ge = __eq__, __ne__, __lt__, __le__, __gt__, __ge__

  def _bitwise(self, op: str, other, ufunc, reverse=False) -> Tensor:
    o = self._operand(other)
    odt = o.dtype if isinstance(o, Tensor) else None
    if self.dtype.is_float or (odt is not None and odt.is_float) or isinstance(o, float):
      raise TypeError(f"ufunc '{ufunc.__name__}' not supported for float inputs")
    return self._binary(op, other, ufunc, reverse)
  def __and__(self, o) -> Tensor: return self._bitwise("AND", o, np.bitwise_and)
  def __or__(self, o) -> Tensor: return self._bitwise("OR", o, np.bitwise_or)
  def __xor__(self, o) -> Tensor: return self._bitwise("XOR", o, np.bitwise_xor)
  def __rand__(self, o) -> Tensor: return self._bitwise("AND", o, np.bitwise_and, True)
  def __ror__(self, o) -> Tensor: return self._bitwise("OR", o, np.bitwise_or, True)
  def __rxor__(self, o) -> Tensor: return self._bitwise("XOR", o, np.bitwise_xor, True)
  def __invert__(self) -> Tensor:
    if self.dtype.is_float: raise TypeError("ufunc 'invert' not supported for float inputs")
    return Tensor(self.node.alu("NOT"))
  def logical_not(self) -> Tensor:
    """numpy.logical_not: a bool tensor."""
    return ~self.cast(dtypes.bool)

  def __add__(self, o) -> Tensor: return self.add(o)
  def __radd__(self, o) -> Tensor: return self.add(o, True)
  def __sub__(self, o) -> Tensor: return self.sub(o)
  def __rsub__(self, o) -> Tensor: return self.sub(o, True)
  def __mul__(self, o) -> Tensor: return self.mul(o)
  def __rmul__(self, o) -> Tensor: return self.mul(o, True)
  def __truediv__(self, o) -> Tensor: return self.div(o)
  def __rtruediv__(self, o) -> Tensor: return self.div(o, True)
  def __floordiv__(self, o) -> Tensor: return self.floordiv(o)
  def __rfloordiv__(self, o) -> Tensor: return self.floordiv(o, True)
  def __mod__(self, o) -> Tensor: return self.mod(o)
  def __rmod__(self, o) -> Tensor: return self.mod(o, True)
  def __pow__(self, o) -> Tensor: return self.pow(o)
  def __rpow__(self, o) -> Tensor: return self.pow(o, True)
  def __matmul__(self, o) -> Tensor: return self.matmul(o)
  def __rmatmul__(self, o) -> Tensor: return Tensor(o, device=self.device).matmul(self) if not isinstance(o, Tensor) else o.matmul(self)
  def __neg__(self) -> Tensor: return self.neg()
  def __pos__(self) -> Tensor: return self
  def __abs__(self) -> Tensor: return self.abs()

  def neg(self) -> Tensor:
    """-x (not for bool, like numpy)."""
    if self.dtype == dtypes.bool:
      raise TypeError("The numpy boolean negative, the `-` operator, is not supported, use the `~` operator or the logical_not function instead.")
    return Tensor(self.node.alu("NEG"))
  def abs(self) -> Tensor:
    """|x| (unsigned and bool unchanged)."""
    return self if self.dtype == dtypes.bool else Tensor(self.node.alu("ABS"))

  def _float_unary(self, op: str) -> Tensor:
    x = self.cast(least_float(self.dtype))
    return Tensor(x.node.alu(op))
  def exp(self) -> Tensor:
    """e**x (ints and bool give numpy's float type)."""
    return self._float_unary("EXP")
  def log(self) -> Tensor:
    """Natural logarithm (nan below 0, -inf at 0)."""
    return self._float_unary("LOG")
  def exp2(self) -> Tensor:
    """2**x."""
    return self._float_unary("EXP2")
  def log2(self) -> Tensor:
    """Base-2 logarithm (exact at powers of two)."""
    return self._float_unary("LOG2")
  def sqrt(self) -> Tensor:
    """Square root."""
    return self._float_unary("SQRT")
  def sin(self) -> Tensor:
    """Sine (radians)."""
    return self._float_unary("SIN")
  def cos(self) -> Tensor:
    """Cosine (radians)."""
    return self._float_unary("COS")
  def rsqrt(self) -> Tensor:
    """1 / sqrt(x)."""
    return Tensor(self.sqrt().node.alu("RECIP"))
  def reciprocal(self) -> Tensor:
    """1 / x (ints give numpy's float type)."""
    return Tensor(self._float_unary("RECIP").node) if not self.dtype.is_float else Tensor(self.node.alu("RECIP"))
  def relu(self) -> Tensor:
    """max(x, 0) (NaN stays NaN)."""
    return self.maximum(0)
  def sigmoid(self) -> Tensor:
    """1 / (1 + exp(-x))."""
    x = self.cast(least_float(self.dtype))
    return 1 / (1 + (-x).exp())
  def tanh(self) -> Tensor:
    """tanh, accurate relative to x near 0 too (a short series there, (1-e)/(1+e) with e = exp(-2|x|) elsewhere)."""
    x = self.cast(least_float(self.dtype))
    ax = x.abs()
    e = (ax * -2).exp()
    x2 = x * x
    series = x2 * (21844 / 6081075) + (-1382 / 155925)
    for c in (62 / 2835, -17 / 315, 2 / 15, -1 / 3, 1.0): series = series * x2 + c
    small = ax * series  # Taylor to x^13: below 1e-17 relative error for |x| < 1/16
    r = (ax < 0.0625).where(small, (1 - e) / (1 + e))
    return (x < 0).where(-r, r)
  def floor(self) -> Tensor:
    """Round down (ints unchanged)."""
    return Tensor(self.node.alu("FLOOR")) if self.dtype.is_float else self
  def trunc(self) -> Tensor:
    """Round toward zero (ints unchanged)."""
    return Tensor(self.node.alu("TRUNC")) if self.dtype.is_float else self
  def isnan(self) -> Tensor:
    """Where x is NaN (a bool tensor)."""
    return self != self if self.dtype.is_float else self._const_like(False, dtypes.bool, self.shape)

  def where(self, x, y) -> Tensor:
    """Elementwise `x if self else y` (numpy.where(self, x, y))."""
    x, y = self._operand(x), self._operand(y)
    dt = _np_dtype_of(_where_values, *(v.dtype if isinstance(v, Tensor) else v for v in (x, y)))
    shape = broadcast_shapes(self.shape, *(v.shape for v in (x, y) if isinstance(v, Tensor)))
    vals = [(v.cast(dt)._broadcast_to(shape) if isinstance(v, Tensor) else self._const_like(v, dt, shape)) for v in (x, y)]
    cond = self.cast(dtypes.bool)._broadcast_to(shape)
    return Tensor(cond.node.alu("WHERE", vals[0].node, vals[1].node))

  # reductions
  def _reduce(self, op: str, axes: tuple[int, ...]) -> Tensor:
    """REDUCE keeping dims; big reductions into few outputs are split in two so every core gets a share."""
    n_red = math.prod(self.shape[a] for a in axes)
    n_out = self.size // max(n_red, 1)
    if n_red >= 1 << 16 and n_out < 64:
      parts = next((p for p in (256, 128, 64, 32, 16, 8, 4, 2) if n_red % p == 0 and n_red // p >= 1024), None)
      if parts is not None:
        keep = [a for a in range(self.ndim) if a not in axes]
        x = self.permute(*(keep + list(axes))).reshape(n_out, parts, n_red // parts)
        partial = Tensor(x.node.reduce(op, (2,)))
        total = Tensor(partial.node.reduce(op, (1,)))
        return total.reshape(tuple(1 if a in axes else s for a, s in enumerate(self.shape)))
    return Tensor(self.node.reduce(op, axes))

  def _reduce_api(self, op: str, axis, keepdim: bool, keepdims, acc: DType) -> Tensor:
    keep = keepdims if keepdims is not None else keepdim
    axes = _normalize_axes(axis, self.ndim)
    if op != "SUM" and any(self.shape[a] == 0 for a in axes):
      name = {"MAX": "maximum", "MIN": "minimum"}[op]
      raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    x = self.cast(acc)
    if self.size == 0:
      out = self._const_like(0, acc, tuple(1 if a in axes else s for a, s in enumerate(self.shape)))
    else:
      out = x._reduce(op, axes)
    return out if keep else out.reshape(tuple(s for a, s in enumerate(self.shape) if a not in axes))

  def sum(self, axis=None, keepdim: bool = False, keepdims=None, dtype=None) -> Tensor:
    """Sum over axes (numpy's accumulator: small ints to int64, float16 summed in float32)."""
    out_dt = to_dtype(dtype) if dtype is not None else sum_dtype(self.dtype)
    acc = dtypes.float32 if out_dt in (dtypes.float16, dtypes.bfloat16) else out_dt
    return self._reduce_api("SUM", axis, keepdim, keepdims, acc).cast(out_dt)
  def max(self, axis=None, keepdim: bool = False, keepdims=None) -> Tensor:
    """Maximum over axes (NaN propagates, like numpy)."""
    return self._reduce_api("MAX", axis, keepdim, keepdims, self.dtype)
  def min(self, axis=None, keepdim: bool = False, keepdims=None) -> Tensor:
    """Minimum over axes (NaN propagates, like numpy)."""
    return self._reduce_api("MIN", axis, keepdim, keepdims, self.dtype)
  def mean(self, axis=None, keepdim: bool = False, keepdims=None, dtype=None) -> Tensor:
    """Mean over axes (ints give float64; float16 is accumulated in float32, like numpy)."""
    out_dt = to_dtype(dtype) if dtype is not None else (self.dtype if self.dtype.is_float else dtypes.float64)
    acc = dtypes.float32 if out_dt in (dtypes.float16, dtypes.bfloat16) else out_dt
    axes = _normalize_axes(axis, self.ndim)
    n = math.prod(self.shape[a] for a in axes)
    s = self._reduce_api("SUM", axes, True, None, acc)
    out = (s * (1.0 / n) if n else s * math.nan).cast(out_dt)
    keep = keepdims if keepdims is not None else keepdim
    return out if keep else out.reshape(tuple(d for a, d in enumerate(self.shape) if a not in axes))

  def any(self, axis=None, keepdim: bool = False, keepdims=None) -> Tensor:
    """Whether any element along the axes is true (nonzero)."""
    if self.size == 0:  # numpy: False over nothing
      axes, keep = _normalize_axes(axis, self.ndim), keepdims if keepdims is not None else keepdim
      shape = tuple(1 if a in axes else s for a, s in enumerate(self.shape)) if keep else tuple(s for a, s in enumerate(self.shape) if a not in axes)
      return Tensor.full(shape, False, device=self.device)
    return self.cast(dtypes.bool)._reduce_api("MAX", axis, keepdim, keepdims, dtypes.bool)
  def all(self, axis=None, keepdim: bool = False, keepdims=None) -> Tensor:
    """Whether every element along the axes is true (nonzero)."""
    return (~self.cast(dtypes.bool)).any(axis, keepdim, keepdims).logical_not()
  def var(self, axis=None, ddof: int = 0, keepdim: bool = False, keepdims=None) -> Tensor:
    """Variance (numpy.var): mean of squared deviations, divided by n - ddof; one fused kernel."""
    x = self.cast(self.dtype if self.dtype.is_float else dtypes.float64)
    axes = _normalize_axes(axis, self.ndim)
    n = math.prod(self.shape[a] for a in axes)
    dev = x - x.mean(axes, keepdim=True)
    out = (dev * dev).sum(axes, keepdim=True) * (1.0 / max(n - ddof, 0) if n - ddof > 0 else math.nan)
    out = out.cast(x.dtype)
    keep = keepdims if keepdims is not None else keepdim
    return out if keep else out.reshape(tuple(d for a, d in enumerate(self.shape) if a not in axes))
  def std(self, axis=None, ddof: int = 0, keepdim: bool = False, keepdims=None) -> Tensor:
    """Standard deviation (numpy.std)."""
    return self.var(axis, ddof, keepdim, keepdims).sqrt()
  def clip(self, min=None, max=None) -> Tensor:
    """numpy.clip: min and max are scalars or tensors (either may be None)."""
    out = self
    if min is not None: out = out.maximum(min)
    if max is not None: out = out.minimum(max)
    return out
  def square(self) -> Tensor:
    """x * x."""
    return self * self

  def _arg_reduce(self, op: str, axis, keepdim: bool, keepdims) -> Tensor:
    keep = keepdims if keepdims is not None else keepdim
    if axis is None:
      flat = self.reshape(-1)
      out = flat._arg_reduce(op, 0, False, None)
      return out.reshape((1,) * self.ndim) if keep else out
    ax = _normalize_axes(axis, self.ndim)[0]
    n = self.shape[ax]
    if n == 0: raise ValueError(f"attempt to get {'argmax' if op == 'MAX' else 'argmin'} of an empty sequence")
    best = self._reduce_api(op, ax, True, None, self.dtype)
    hit = self == best
    if self.dtype.is_float: hit = hit | self.isnan()  # numpy returns the first NaN
    idx = Tensor.arange(n, 0, -1, dtype="int64", device=self.device).reshape(tuple(n if a == ax else 1 for a in range(self.ndim)))
    first = hit.where(idx, 0)._reduce_api("MAX", ax, True, None, dtypes.int64)
    out = n - first
    return out if keep else out.reshape(tuple(s for a, s in enumerate(self.shape) if a != ax))
  def argmax(self, axis=None, keepdim: bool = False, keepdims=None) -> Tensor:
    """Index of the first maximum (over the flattened tensor when axis is None), int64."""
    return self._arg_reduce("MAX", axis, keepdim, keepdims)
  def argmin(self, axis=None, keepdim: bool = False, keepdims=None) -> Tensor:
    """Index of the first minimum, int64."""
    return self._arg_reduce("MIN", axis, keepdim, keepdims)

  # movement
  def reshape(self, *shape) -> Tensor:
    """numpy.reshape; one dim may be -1."""
    shape = list(_shape_from(shape))
    if shape.count(-1) > 1: raise ValueError("can only specify one unknown dimension")
    if -1 in shape:
      known = math.prod(s for s in shape if s != -1)
      if known == 0 or self.size % known:
        raise ValueError(f"cannot reshape array of size {self.size} into shape {tuple(shape)}")
      shape[shape.index(-1)] = self.size // known
    if any(s < 0 for s in shape) or math.prod(shape) != self.size:
      raise ValueError(f"cannot reshape array of size {self.size} into shape {tuple(shape)}")
    if tuple(shape) == self.shape: return self
    if self.size == 0: return self._const_like(0, self.dtype, tuple(shape))
    return Tensor(self.node.movement("reshape", tuple(shape)))
  def flatten(self) -> Tensor:
    """The elements as one axis (free: a view)."""
    return self.reshape(-1)

  def permute(self, *order) -> Tensor:
    """Reorder axes: order[i] is the old axis that becomes axis i."""
    order = _shape_from(order)
    if sorted(a % self.ndim if self.ndim else a for a in order) != list(range(self.ndim)): raise ValueError("axes don't match array")
    order = tuple(a % self.ndim for a in order)
    if order == tuple(range(self.ndim)): return self
    return Tensor(self.node.movement("permute", order))
  def transpose(self, *axes) -> Tensor:
    """numpy.transpose: reverse the axes, or permute them as given."""
    if not axes or axes == (None,): return self.permute(*reversed(range(self.ndim)))
    return self.permute(*axes)
  def swapaxes(self, a: int, b: int) -> Tensor:
    """numpy.swapaxes."""
    order = list(range(self.ndim))
    a, b = _normalize_axes(a, self.ndim)[0], _normalize_axes(b, self.ndim)[0]
    order[a], order[b] = order[b], order[a]
    return self.permute(*order)

  def expand(self, *shape) -> Tensor:
    """numpy.broadcast_to (size-1 dims stretch; new dims are prepended); -1 keeps a dim."""
    shape = _shape_from(shape)
    if len(shape) < self.ndim: raise ValueError(f"input operand has more dimensions than allowed by the axis remapping")
    own = (1,) * (len(shape) - self.ndim) + self.shape
    shape = tuple(o if s == -1 else s for s, o in zip(shape, own))
    for s, o in zip(shape, own):
      if o != 1 and s != o:
        raise ValueError(f"operands could not be broadcast together with remapped shapes [original->remapped]: {self.shape} and requested shape {shape}")
    return self._broadcast_to(shape)
  broadcast_to = expand

  def unsqueeze(self, axis: int) -> Tensor:
    """A new size-1 axis at `axis` (numpy.expand_dims)."""
    axis = axis if axis >= 0 else axis + self.ndim + 1
    return self.reshape(self.shape[:axis] + (1,) + self.shape[axis:])
  expand_dims = unsqueeze
  def squeeze(self, axis=None) -> Tensor:
    """Drop size-1 axes (all, or those given)."""
    axes = _normalize_axes(axis, self.ndim) if axis is not None else tuple(a for a, s in enumerate(self.shape) if s == 1)
    for a in axes:
      if self.shape[a] != 1: raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    return self.reshape(tuple(s for a, s in enumerate(self.shape) if a not in axes))

  def shrink(self, arg) -> Tensor:
    """Keep [lo, hi) along each axis (None keeps the axis whole)."""
    arg = tuple((0, s) if a is None else (int(a[0]), int(a[1])) for a, s in zip(arg, self.shape))
    for (lo, hi), s in zip(arg, self.shape):
      if not 0 <= lo <= hi <= s: raise ValueError(f"shrink {arg} is outside the shape {self.shape}")
    if all(a == (0, s) for a, s in zip(arg, self.shape)): return self
    return Tensor(self.node.movement("shrink", arg))

  def pad(self, pad_width, constant_values=0) -> Tensor:
    """numpy.pad in constant mode; pad_width as numpy takes it: n, (before, after) or one pair per axis."""
    pw = np.asarray(pad_width, dtype=np.int64)
    try:
      pw = np.broadcast_to(pw.reshape(-1, 2) if pw.size == 2 and pw.ndim == 1 else (pw if pw.ndim == 2 else pw.reshape(-1, 1)), (self.ndim, 2)) if pw.ndim != 2 or pw.shape != (self.ndim, 2) else pw
    except ValueError:
      raise ValueError(f"operands could not be broadcast together with remapped shapes [original->remapped]: {np.asarray(pad_width).shape} and requested shape ({self.ndim}, 2)") from None
    if (pw < 0).any(): raise ValueError("index can't contain negative values")
    arg = tuple((int(b), int(a)) for b, a in pw)
    if all(p == (0, 0) for p in arg): return self
    out = Tensor(self.node.movement("pad", arg))
    if constant_values != 0:
      inside = Tensor(LazyNode.const(True, dtypes.bool, self.shape, self.device).movement("pad", arg))
      out = inside.where(out, Tensor(LazyNode.const(constant_values, self.dtype, out.shape, self.device)))
    return out

  def flip(self, axis=None) -> Tensor:
    """numpy.flip: reverse the order along the axes (all when None)."""
    axes = _normalize_axes(axis, self.ndim)
    axes = tuple(a for a in axes if self.shape[a] > 1)
    return Tensor(self.node.movement("flip", axes)) if axes else self

  def __getitem__(self, index) -> Tensor:
    """numpy indexing. Basic (ints, slices with steps, None, Ellipsis) is a free view; advanced (integer arrays,
    boolean masks, lists or Tensors of them, mixed with basic parts by numpy's rules) gathers the elements in a kernel."""
    if _is_advanced(index): return self._gather(index)
    if not isinstance(index, tuple): index = (index,)
    for i in index:
      if not isinstance(i, (int, np.integer, slice)) and i is not None and i is not Ellipsis: raise IndexError(INDEX_TYPES)
    if sum(1 for i in index if i is Ellipsis) > 1: raise IndexError("an index can only have a single ellipsis ('...')")
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if n_real > self.ndim:
      raise IndexError(f"too many indices for array: array is {self.ndim}-dimensional, but {n_real} were indexed")
    if Ellipsis in [i for i in index if i is Ellipsis]:
      k = [j for j, i in enumerate(index) if i is Ellipsis][0]
      index = index[:k] + (slice(None),) * (self.ndim - n_real) + index[k + 1:]
    else:
      index = index + (slice(None),) * (self.ndim - n_real)
    x = self
    shrink, flips, steps, final_shape, dim = [], [], [], [], 0
    for i in index:
      if i is None:
        final_shape.append(1)
        continue
      size = self.shape[dim]
      if isinstance(i, (int, np.integer)):
        i = int(i)
        if not -size <= i < size: raise IndexError(f"index {i} is out of bounds for axis {dim} with size {size}")
        i %= size
        shrink.append((i, i + 1)); steps.append(1)
      else:
        start, stop, step = i.indices(size)
        if step > 0:
          n = max(0, (stop - start + step - 1) // step)
          shrink.append((start, start + max(n - 1, 0) * step + (1 if n else 0))); steps.append(step)
        else:
          n = max(0, (start - stop - step - 1) // -step)
          lo = start - (n - 1) * -step if n else 0
          shrink.append((lo, lo + (n - 1) * -step + 1 if n else 0)); steps.append(-step)
          if n: flips.append(dim)
        final_shape.append(n)
      dim += 1
    x = x.shrink(shrink)
    if flips: x = x.flip(flips)
    if any(s != 1 for s in steps):
      if x.size: x = Tensor(x.node.movement("stride", tuple(steps)))
      else: x = x._const_like(0, x.dtype, tuple((s + k - 1) // k for s, k in zip(x.shape, steps)))
    return x.reshape(tuple(final_shape))

  def _positions(self, index) -> np.ndarray:
    """Where each element of self[index] sits in self (row-major), by numpy's own indexing rules and errors, applied to
    the positions on the host (index arrays on a device are brought to the host: their bounds are checked there)."""
    def host(i):
      if isinstance(i, Tensor): return i.numpy()
      if isinstance(i, (list, np.ndarray)) and np.asarray(i).dtype.kind not in "biu" and np.asarray(i).size:
        raise IndexError("arrays used as indices must be of integer (or boolean) type")
      if not isinstance(i, list): return i
      arr = np.asarray(i)
      return arr.astype(np.intp) if arr.size == 0 else arr   # numpy reads an empty list ([], [[]]) as integer positions
    index = tuple(host(i) for i in index) if isinstance(index, tuple) else host(index)
    # each axis's coordinate as a broadcast (copy-free) view of an arange, indexed: host memory of the result's size
    pos = np.broadcast_to(np.zeros((), np.int64), self.shape)[index]
    stride = 1
    for d in reversed(range(self.ndim)):
      coord = np.arange(self.shape[d], dtype=np.int64).reshape([-1 if a == d else 1 for a in range(self.ndim)])
      pos = pos + np.broadcast_to(coord, self.shape)[index] * stride
      stride *= self.shape[d]
    return pos

  def _gather(self, index) -> Tensor:
    pos = self._positions(index)
    if pos.size == 0: return self._const_like(0, self.dtype, pos.shape)
    return Tensor(self.node.gather(Tensor(pos, device=self.device).node))

  def __setitem__(self, index, value) -> None:
    """numpy's item assignment, any index (basic or advanced): `value` is cast to this dtype (numpy's errors for Python
    scalars that do not fit) and broadcast to the selection; a repeated position takes the last value, like numpy.
    The tensor gets the new value in place of the old; tensors computed from it before keep the old one (nothing
    aliases: there are no views to write through)."""
    pos = self._positions(index)
    if isinstance(value, Tensor):
      v = self._operand(value).cast(self.dtype)
    elif isinstance(value, (np.ndarray, list, tuple)):
      v = Tensor(np.asarray(value), device=self.device).cast(self.dtype)
    else:
      probe = np.empty((), np.float32 if self.dtype == dtypes.bfloat16 else self.dtype.np)
      probe[()] = value  # numpy's OverflowError / ValueError for a scalar that does not fit
      v = self._const_like(probe.item() if self.dtype != dtypes.bfloat16 else float(value), self.dtype, ())
    try:
      fits = broadcast_shapes(v.shape, pos.shape) == pos.shape
    except ValueError:
      fits = False
    if not fits: raise ValueError(f"could not broadcast input array from shape {v.shape} into shape {pos.shape}")
    if pos.size == 0: return
    src = np.full(self.size, -1, np.int32 if pos.size < 1 << 31 else np.int64)  # which value lands where
    src[pos.reshape(-1)] = np.arange(pos.size)  # numpy assigns in order: the last write to a position wins
    picked = Tensor(v._broadcast_to(pos.shape).reshape(-1).node.gather(Tensor(np.maximum(src, 0), device=self.device).node))
    new = Tensor(src >= 0, device=self.device).where(picked, self.reshape(-1))
    self.node = new.reshape(self.shape).node

  @staticmethod
  def cat(*tensors, axis: int = 0) -> Tensor:
    """numpy.concatenate along `axis` (types promoted like numpy)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)): tensors = tuple(tensors[0])
    if not tensors: raise ValueError("need at least one array to concatenate")
    device = next((t.device for t in tensors if isinstance(t, Tensor)), None)
    ts = [t if isinstance(t, Tensor) else Tensor(t, device=device) for t in tensors]
    if any(t.device != device for t in ts): raise ValueError(f"tensors on different devices ({', '.join(sorted({t.device for t in ts}))}): move them with .to()")
    if any(t.ndim == 0 for t in ts): raise ValueError("zero-dimensional arrays cannot be concatenated")
    ndim = ts[0].ndim
    for k, t in enumerate(ts):
      if t.ndim != ndim:
        raise ValueError(f"all the input array dimensions except for the concatenation axis must match exactly, but along dimension 0, "
                         f"the array at index 0 has {ndim} dimension(s) and the array at index {k} has {t.ndim} dimension(s)")
    ax = _normalize_axes(axis, ndim)[0]
    for k, t in enumerate(ts):
      for d in range(ndim):
        if d != ax and t.shape[d] != ts[0].shape[d]:
          raise ValueError(f"all the input array dimensions except for the concatenation axis must match exactly, but along dimension {d}, "
                           f"the array at index 0 has size {ts[0].shape[d]} and the array at index {k} has size {t.shape[d]}")
    dt = result_type(*[t.dtype for t in ts])
    total = sum(t.shape[ax] for t in ts)
    out, offset = None, 0
    for t in ts:
      widths = [(0, 0)] * ndim
      widths[ax] = (offset, total - offset - t.shape[ax])
      offset += t.shape[ax]
      part = t.cast(dt).pad(widths)
      out = part if out is None else Tensor(out.node.alu("OR" if dt == dtypes.bool else "ADD", part.node))
    return out
  concatenate = cat

  @staticmethod
  def stack(tensors, axis: int = 0) -> Tensor:
    """numpy.stack: join along a new axis."""
    device = next((t.device for t in tensors if isinstance(t, Tensor)), None)
    ts = [t if isinstance(t, Tensor) else Tensor(t, device=device) for t in tensors]
    return Tensor.cat(*[t.unsqueeze(axis) for t in ts], axis=axis)

  def _as_buffer_view(self) -> Tensor:
    """This tensor if it is realized data or one view of it contiguous along its last axis (loads affine in the
    index, rows as runs of memory), else a realized copy."""
    node = self.node
    if node.realized: return self
    if node.op == "VIEW" and node.srcs[0].realized and len(node.arg.views) == 1 and node.arg.views[0].strides[-1] == 1: return self
    return self.contiguous()

  # compound ops
  def matmul(self, other) -> Tensor:
    """numpy.matmul: 1-D operands are promoted and the added axis removed; leading axes broadcast."""
    last = _last_product[0]
    if (last is not None and isinstance(other, Tensor) and last.a() is self.node and last.b() is other.node
        and last.ops == (self.node.op, other.node.op) and last.settings == loops.matmul_settings()):
      return Tensor(last.template.build((_leaf(self.node), _leaf(other.node))))
    other = self._operand(other) if isinstance(other, Tensor) else Tensor(other, device=self.device)
    if self.ndim == 0 or other.ndim == 0: raise ValueError("matmul: Input operand does not have enough dimensions (has 0)")
    a = self.reshape(1, self.shape[0]) if self.ndim == 1 else self
    b = other.reshape(other.shape[0], 1) if other.ndim == 1 else other
    if a.shape[-1] != b.shape[-2]:
      raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature (n?,k),(k,m?)->(n?,m?) "
                       f"(size {b.shape[-2]} is different from {a.shape[-1]})")
    dt = _np_dtype_of(np.matmul, a.dtype, b.dtype)
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    acc = dtypes.float32 if dt in (dtypes.float16, dtypes.bfloat16) else dt
    panel = loops.TILE_VECTORS * (64 // acc.itemsize)  # the register tile's vectors of output columns
    nb = len(batch)
    B = tuple(range(nb))
    n_pad = -(-n // panel) * panel
    mul, red = ("MUL", "SUM") if acc != dtypes.bool else ("AND", "MAX")
    # (on a GPU the plain graph below is what the renderer tiles through shared memory: kernels_gpu.py)
    packed = (get_device(self.device).renderer.target == "cpu" and k >= 64 and n >= 2 * panel and m >= 4 and acc != dtypes.bool
              and (n_pad - n) * 8 <= n)
    # a packed float32/float64 GEMM packs its operands itself (render_gemm), reading them through their views, so an
    # operand that is a plain view of data stays one and anything else is realized first
    packs_itself = packed and acc in (dtypes.float32, dtypes.float64)
    a, b = a.cast(acc), b.cast(acc)
    if packs_itself: a, b = a._as_buffer_view(), b._as_buffer_view()
    as_they_are = a.node is self.node and b.node is other.node   # no cast, reshape or copy made: the last product's key
    if packed:
      rows = loops.TILE_ROWS[0]
      splits, kc, blocks, block_rows, col_blocks, block_panels = loops.matmul_plan(m, k, n_pad // panel, panel * acc.itemsize, acc.itemsize)
    # a packed product over data (or views of it) is the same graph for the same views, dtypes and plan: kept as a
    # template over the two buffers (the first call builds it; the others skip its dozen movement ops)
    bases = (_leaf(a.node), _leaf(b.node)) if packs_itself else ()
    key = None
    if packs_itself and all(x.realized for x in bases):
      key = (tuple((x.node.arg, base.shape, base.dtype, base.device) for x, base in zip((a, b), bases)), bases[0] is bases[1],
             self.ndim, other.ndim, dt, (rows, panel, splits, kc, blocks, block_rows, col_blocks, block_panels))
      if key in _MATMUL_GRAPHS:
        if as_they_are: self._remember_product(other, _MATMUL_GRAPHS[key])
        return Tensor(_MATMUL_GRAPHS[key].build(bases))
    a = a._broadcast_to(batch + (m, k))
    b = b._broadcast_to(batch + (k, n))
    if packed:
      # a packed GEMM: b in column panels and a in register tiles (a tile's rows interleaved per k), each cut into k
      # chunks and copied so that the kernel walks both in order, one stream each. The kernel's loops (loops.plan):
      # k chunks (summed into the output), row blocks (threads), column blocks, the row block's register tiles, the
      # column block's panels: a tile's chunk of a stays in L1 while the column block's panels pass (from L2), and
      # the tile's outputs move along its rows. Zeros pad m, n and k to whole blocks and chunks; the result's
      # padding is cut off by a view
      n_pad = col_blocks * block_panels * panel
      m_pad, np_ = blocks * block_rows, n_pad // panel
      a = a.pad(((0, 0),) * nb + ((0, m_pad - m), (0, splits * kc - k)))
      b = b.pad(((0, 0),) * nb + ((0, splits * kc - k), (0, n_pad - n)))
      a = a.reshape(batch + (m_pad // rows, rows, splits, kc)).permute(*B, nb + 2, nb, nb + 3, nb + 1)
      b = b.reshape(batch + (splits, kc, np_, panel)).permute(*B, nb, nb + 2, nb + 1, nb + 3)
      if not packs_itself: a, b = a.contiguous(), b.contiguous()
      full = batch + (splits, blocks, block_rows, col_blocks, block_panels, panel, kc)
      at = a.permute(*B, nb, nb + 1, nb + 3, nb + 2).reshape(batch + (splits, blocks, block_rows, 1, 1, 1, kc))
      bt = b.permute(*B, nb, nb + 1, nb + 3, nb + 2).reshape(batch + (splits, 1, 1, col_blocks, block_panels, panel, kc))
      reduce_axes = (nb, len(full) - 1)
    else:
      bt = b.swapaxes(-1, -2).reshape(batch + (1, n, k))
      full = batch + (m, n, k)
      at = a.reshape(batch + (m, 1, k))
      m_pad, n_pad, reduce_axes = m, n, (len(full) - 1,)
    prod = Tensor(at._broadcast_to(full).node.alu(mul, bt._broadcast_to(full).node))
    out = prod._reduce(red, reduce_axes) if k else prod._const_like(0, acc, full[:-1] + (1,))
    out = out.reshape(batch + (m_pad, n_pad)).shrink(tuple((0, s) for s in batch) + ((0, m), (0, n))).cast(dt)
    if self.ndim == 1: out = out.reshape(out.shape[:-2] + (n,))
    if other.ndim == 1: out = out.reshape(out.shape[:-1])
    if key is not None:
      if len(_MATMUL_GRAPHS) >= MATMUL_GRAPHS_KEPT: _MATMUL_GRAPHS.clear()   # a program of ever new shapes: start over
      _MATMUL_GRAPHS[key] = GraphTemplate(out.node, bases)
      if as_they_are: self._remember_product(other, _MATMUL_GRAPHS[key])
    return out
  dot = matmul

  def _remember_product(self, other: Tensor, template: GraphTemplate) -> None:
    """Keep `template` as the last product, of this tensor and `other` as they are now (_last_product)."""
    _last_product[0] = _Product(weakref.ref(self.node), weakref.ref(other.node), (self.node.op, other.node.op), loops.matmul_settings(), template)

  def softmax(self, axis: int = -1) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `axis`: one fused kernel."""
    x = self.cast(least_float(self.dtype))
    e = (x - x.max(axis, keepdim=True)).exp()
    return e / e.sum(axis, keepdim=True)

  def log_softmax(self, axis: int = -1) -> Tensor:
    """x - max - log(sum(exp(x - max))) along `axis`, stable for large inputs."""
    x = self.cast(least_float(self.dtype))
    m = x - x.max(axis, keepdim=True)
    return m - m.exp().sum(axis, keepdim=True).log()

