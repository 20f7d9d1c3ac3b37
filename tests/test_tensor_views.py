"""Views and shape trackers against numpy's own views, with no compiler involved: random chains of movement
ops (and their composition, as the scheduler does when a view sits on top of computed values) must address
exactly the elements numpy's strided views do, with pads reading 0."""
import itertools
import numpy as np
from hypothesis import given, settings, strategies as st
from hcq.tensor.symbolic import Num, Var, add, div, mod, mul, linear_coefficient, substitute
from hcq.tensor.view import ShapeTracker


def evaluate(st_: ShapeTracker, base: np.ndarray) -> np.ndarray:
  """Read `base` (flat) through the tracker, element by element, with the symbolic index code."""
  out = np.zeros(st_.shape, base.dtype)
  for idx in itertools.product(*[range(s) for s in st_.shape]):
    e, valid = st_.index([Num(i) for i in idx])
    ok = all(lo <= c.value < hi for c, lo, hi in valid.conds)
    out[idx] = base[e.value] if ok else 0
  return out


def random_chain(data, st_: ShapeTracker, ref: np.ndarray, steps: int):
  for _ in range(steps):
    op = data.draw(st.sampled_from(["reshape", "permute", "pad", "shrink", "flip", "stride", "expand"]))
    shape = ref.shape
    if op == "reshape" and ref.size:
      n = ref.size
      dims = [d for d in range(1, n + 1) if n % d == 0]
      a = data.draw(st.sampled_from(dims))
      new = (a, n // a) if data.draw(st.booleans()) else (n // a, 1, a)
      st_, ref = st_.reshape(new), ref.reshape(new)
    elif op == "permute" and ref.ndim:
      order = tuple(data.draw(st.permutations(range(ref.ndim))))
      st_, ref = st_.permute(order), ref.transpose(order)
    elif op == "pad" and ref.ndim:
      arg = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in shape)
      st_, ref = st_.pad(arg), np.pad(ref, arg)
    elif op == "shrink" and ref.ndim:
      arg = []
      for s in shape:
        lo = data.draw(st.integers(0, s))
        arg.append((lo, data.draw(st.integers(lo, s))))
      st_, ref = st_.shrink(tuple(arg)), ref[tuple(slice(lo, hi) for lo, hi in arg)]
    elif op == "flip" and ref.ndim:
      axes = tuple(sorted(set(data.draw(st.lists(st.integers(0, ref.ndim - 1), min_size=1, max_size=ref.ndim)))))
      st_, ref = st_.flip(axes), np.flip(ref, axes)
    elif op == "stride" and ref.ndim:
      steps_ = tuple(data.draw(st.integers(1, 3)) for _ in shape)
      st_, ref = st_.stride(steps_), ref[tuple(slice(None, None, k) for k in steps_)]
    elif op == "expand" and ref.ndim:
      d = data.draw(st.integers(0, ref.ndim - 1))
      if shape[d] == 1:
        new = shape[:d] + (3,) + shape[d + 1:]
        st_, ref = st_.expand(new), np.broadcast_to(ref, new)
  return st_, ref


@settings(max_examples=800, deadline=None)
@given(st.data())
def test_views_match_numpy(data):
  shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
  base = np.arange(1, int(np.prod(shape)) + 1)
  st_, ref = random_chain(data, ShapeTracker.contiguous(shape), base.reshape(shape), data.draw(st.integers(1, 5)))
  if ref.size > 2000: return
  np.testing.assert_array_equal(evaluate(st_, base), ref)
  # a second chain built over a contiguous tensor of that shape, composed (a view over a computed value)
  outer, ref2 = random_chain(data, ShapeTracker.contiguous(ref.shape), np.ascontiguousarray(ref), data.draw(st.integers(1, 4)))
  if ref2.size > 2000: return
  np.testing.assert_array_equal(evaluate(st_.compose(outer), base), ref2)


def test_symbolic_simplification():
  i, j = Var("i", 0, 9), Var("j", 0, 3)
  assert div(add(mul(i, 4), j), 4) == i and mod(add(mul(i, 4), j), 4) == j
  assert div(add(mul(i, 4), 8), 4) == add(i, 2)
  assert linear_coefficient(add(mul(i, 4), j), "j") == 1 and linear_coefficient(div(j, 2), "j") is None
  e = add(mod(add(mul(i, 6), j), 4), 1)
  for iv in range(10):
    for jv in range(4):
      assert substitute(e, {"i": Num(iv), "j": Num(jv)}) == Num((iv * 6 + jv) % 4 + 1)


def random_index(rng: np.random.Generator, ranges: dict[str, tuple[int, int]], depth: int):
  """(folded expression, reference): a random tree of + * // % built through the folding constructors, and the same
  tree as plain Python floor arithmetic on a dict of values."""
  if depth == 0 or rng.random() < 0.2:
    if rng.random() < 0.15:
      k = int(rng.integers(-4, 9))
      return Num(k), lambda env: k
    name = str(rng.choice(list(ranges)))
    return Var(name, *ranges[name]), lambda env: env[name]
  a, fa = random_index(rng, ranges, depth - 1)
  op, c = int(rng.integers(4)), int(rng.integers(1, 10))
  if op == 0:
    b, fb = random_index(rng, ranges, depth - 1)
    return add(a, b), lambda env: fa(env) + fb(env)
  if op == 1:
    c -= 4  # negative and zero factors too
    return mul(a, c), lambda env: fa(env) * c
  if op == 2: return div(a, c), lambda env: fa(env) // c
  return mod(a, c), lambda env: fa(env) % c


def test_index_folding_equals_plain_integer_arithmetic():
  """Index expressions over variables with ranges, folded as they are built, equal the unfolded floor arithmetic at
  every point of the ranges and stay within their own [vmin, vmax] (seeded random trees: x // c with x up to c,
  nested // and %, sums that straddle 0)."""
  rng = np.random.default_rng(16)
  for case in range(1500):
    ranges = {n: tuple(sorted(int(v) for v in rng.integers(lo, hi, 2))) for n, lo, hi in (("i", -3, 30), ("j", 0, 6))}
    e, ref = random_index(rng, ranges, 4)
    for i, j in itertools.product(range(ranges["i"][0], ranges["i"][1] + 1), sorted(set(ranges["j"]))):
      want, got = ref({"i": i, "j": j}), substitute(e, {"i": Num(i), "j": Num(j)})
      assert got == Num(want) and e.vmin <= want <= e.vmax, f"case {case}: {e} at i={i}, j={j} is {got}, want {want} in [{e.vmin}, {e.vmax}]"
