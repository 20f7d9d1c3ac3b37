"""Random programs (hypothesis) run by hcq.tensor and by numpy side by side: movement ops, elementwise ops,
reductions, matmul and softmax in random orders, so fusion and view combinations nobody wrote a test for get
checked. Floats compare with rtol/atol 1e-4 (float32) and 1e-9 (float64); integers compare exactly."""
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st
from hcq.tensor import Tensor

SETTINGS = dict(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def factorizations(n: int) -> list[tuple[int, ...]]:
  """A few shapes with n elements."""
  out = [(n,)]
  for a in range(2, n + 1):
    if n % a == 0:
      out.append((a, n // a))
      for b in range(2, n // a + 1):
        if (n // a) % b == 0: out.append((a, b, n // a // b))
  return out


class Program:
  """Pairs of (hcq Tensor, numpy array) built op by op from draws."""

  def __init__(self, data, dtype: str, sizes=st.integers(1, 5), max_dims: int = 4, device: str = "CPU"):
    self.data, self.dtype, self.sizes, self.max_dims, self.device = data, dtype, sizes, max_dims, device
    self.values: list[tuple[Tensor, np.ndarray]] = []

  def draw(self, strategy): return self.data.draw(strategy)

  def new_input(self, shape=None):
    if shape is None: shape = tuple(self.draw(st.lists(self.sizes, min_size=0, max_size=self.max_dims)))
    seed = self.draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    if self.dtype.startswith("float"): x = rng.uniform(-2, 2, size=shape).astype(self.dtype)
    else: x = rng.integers(-20, 20, size=shape).astype(self.dtype)
    self.values.append((Tensor(x, device=self.device), x))

  def pick(self) -> tuple[Tensor, np.ndarray]: return self.values[self.draw(st.integers(0, len(self.values) - 1))]

  def step(self):
    t, x = self.pick()
    floats = self.dtype.startswith("float")
    kinds = ["unary", "binary", "binary_scalar", "movement", "movement", "reduce", "where"]
    if floats: kinds += ["softmax"]
    if x.ndim >= 1: kinds += ["matmul"]
    kind = self.draw(st.sampled_from(kinds))
    if kind == "unary":
      ops = ["neg", "abs", "relu"] + (["sin", "cos", "tanh", "sigmoid", "exp_tanh", "sqrt_abs"] if floats else [])
      op = self.draw(st.sampled_from(ops))
      table = {
        "neg": (lambda a: -a, lambda a: -a), "abs": (lambda a: a.abs(), np.abs), "relu": (lambda a: a.relu(), lambda a: np.maximum(a, 0)),
        "sin": (lambda a: a.sin(), np.sin), "cos": (lambda a: a.cos(), np.cos), "tanh": (lambda a: a.tanh(), np.tanh),
        "sigmoid": (lambda a: a.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
        "exp_tanh": (lambda a: a.tanh().exp(), lambda a: np.exp(np.tanh(a))), "sqrt_abs": (lambda a: a.abs().sqrt(), lambda a: np.sqrt(np.abs(a))),
      }
      ours, ref = table[op]
      self.values.append((ours(t), ref(x).astype(x.dtype)))
    elif kind in ("binary", "binary_scalar", "where"):
      if kind == "binary_scalar":
        other_t = other_x = self.draw(st.sampled_from([2, -1, 3]) if not floats else st.sampled_from([0.5, -1.25, 2.0]))
      else:
        # another value whose shape broadcasts: a suffix of ours with some dims set to 1
        keep = self.draw(st.integers(0, x.ndim))
        shape = tuple(1 if self.draw(st.booleans()) else s for s in x.shape[x.ndim - keep:])
        self.new_input(shape)
        other_t, other_x = self.values[-1]
      if kind == "where":
        self.values.append(((t > other_t).where(t, other_t), np.where(x > other_x, x, other_x).astype(x.dtype)))
        return
      op = self.draw(st.sampled_from(["add", "sub", "mul", "maximum", "minimum"]))
      table = {"add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract), "mul": (lambda a, b: a * b, np.multiply),
               "maximum": (lambda a, b: a.maximum(b), np.maximum), "minimum": (lambda a, b: a.minimum(b), np.minimum)}
      ours, ref = table[op]
      self.values.append((ours(t, other_t), ref(x, other_x).astype(x.dtype)))
    elif kind == "movement":
      ops = ["reshape", "permute", "flip", "pad", "slice", "expand", "cat"]
      op = self.draw(st.sampled_from(ops))
      if op == "reshape":
        shape = self.draw(st.sampled_from(factorizations(x.size))) if x.size > 0 else x.shape
        self.values.append((t.reshape(shape), x.reshape(shape)))
      elif op == "permute" and x.ndim:
        order = self.draw(st.permutations(range(x.ndim)))
        self.values.append((t.permute(*order), x.transpose(order)))
      elif op == "flip" and x.ndim:
        axes = tuple(sorted(set(self.draw(st.lists(st.integers(0, x.ndim - 1), min_size=1, max_size=x.ndim)))))
        self.values.append((t.flip(axes), np.flip(x, axes)))
      elif op == "pad" and x.ndim:
        widths = [(self.draw(st.integers(0, 2)), self.draw(st.integers(0, 2))) for _ in range(x.ndim)]
        self.values.append((t.pad(widths), np.pad(x, widths)))
      elif op == "slice" and x.ndim:
        index = []
        for s in x.shape:
          start, stop = self.draw(st.integers(-s, s)), self.draw(st.integers(-s, s))
          if self.draw(st.booleans()): start, stop = None, None
          step = self.draw(st.sampled_from([1, 1, 2, -1, -2, 3]))
          index.append(slice(start, stop, step))
        index = tuple(index)
        if x[index].size == 0: return
        self.values.append((t[index], x[index]))
      elif op == "expand":
        if x.ndim >= self.max_dims + 1: return
        shape = (self.draw(st.integers(1, 3)),) + x.shape
        self.values.append((t.expand(shape), np.broadcast_to(x, shape)))
      elif op == "cat" and x.ndim:
        axis = self.draw(st.integers(0, x.ndim - 1))
        shape = list(x.shape)
        shape[axis] = self.draw(st.integers(1, 3))
        self.new_input(tuple(shape))
        other_t, other_x = self.values[-1]
        self.values.append((Tensor.cat(t, other_t, axis=axis), np.concatenate([x, other_x], axis=axis)))
    elif kind == "reduce" and x.ndim and x.size:
      op = self.draw(st.sampled_from(["sum", "max", "min"] + (["mean"] if floats else []) + ["argmax"]))
      axis = self.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)))
      keep = self.draw(st.booleans())
      ref = getattr(x, op)(axis=axis, keepdims=keep)
      got = getattr(t, op)(axis=axis, keepdims=keep)
      if op in ("sum", "argmax"): ref = ref.astype(x.dtype) if op == "sum" else ref
      if op == "sum": got = got.cast(self.dtype)
      if op == "argmax":
        if floats: return  # ties between rounded float values may pick a different first index; ints test it exactly
        got, ref = got.cast(self.dtype), ref.astype(self.dtype)
      self.values.append((got, np.asarray(ref)))
    elif kind == "softmax" and x.ndim and x.size:
      axis = self.draw(st.integers(-x.ndim, x.ndim - 1))
      e = np.exp(x - x.max(axis, keepdims=True))
      self.values.append((t.softmax(axis), (e / e.sum(axis, keepdims=True)).astype(x.dtype)))
    elif kind == "matmul" and x.ndim:
      n = self.draw(self.sizes)
      self.new_input((x.shape[-1], n))
      other_t, other_x = self.values[-1]
      self.values.append((t @ other_t, x @ other_x))


def run_program(data, dtype: str, sizes=st.integers(1, 5), max_dims: int = 4, device: str = "CPU"):
  prog = Program(data, dtype, sizes, max_dims, device)
  prog.new_input()
  for _ in range(data.draw(st.integers(1, 8))): prog.step()
  # check the final value and one intermediate (so that shared subgraphs are realized in both orders)
  for t, x in [prog.values[-1], prog.pick()]:
    got = t.numpy()
    assert got.shape == x.shape, (got.shape, x.shape)
    if dtype.startswith("float"):
      tol = 1e-4 if dtype == "float32" else 1e-9
      np.testing.assert_allclose(got, x, rtol=tol, atol=tol * max(1.0, float(np.abs(x).max(initial=0))))
    else:
      np.testing.assert_array_equal(got, x)


@settings(**SETTINGS)
@given(st.data())
def test_random_program_float32(data): run_program(data, "float32")


@settings(**SETTINGS)
@given(st.data())
def test_random_program_float64(data): run_program(data, "float64")


@settings(**SETTINGS)
@given(st.data())
def test_random_program_int32(data): run_program(data, "int32")


# sizes that take the vectorized, unrolled and register-tiled code paths (multiples of 8, 16, 32 lanes)
BIG = st.sampled_from([1, 3, 8, 16, 32, 64])


@settings(**{**SETTINGS, "max_examples": 80})
@given(st.data())
def test_random_program_vectorized_float32(data): run_program(data, "float32", BIG, 3)


@settings(**{**SETTINGS, "max_examples": 60})
@given(st.data())
def test_random_program_vectorized_int32(data): run_program(data, "int32", BIG, 3)
