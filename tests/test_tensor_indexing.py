"""Advanced indexing (integer arrays, boolean masks, mixed with basic parts) and item assignment against numpy: same
values, same shapes (numpy's placement of the broadcast index dimensions), same errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hcq.tensor import Tensor, runtime

X = np.arange(120).reshape(4, 5, 6) * 3 - 100


@pytest.mark.parametrize("index", [
  [0, 2, -1], ([1, 3], [0, 4]), (slice(None), [4, 0, 0]), ([0, 3], slice(1, 4), [5, -6]), (1, [0, 2], slice(None, None, 2)),
  (np.array([[0, 1], [3, 2]]),), (Ellipsis, [-1, 0]), (slice(None), None, [3, 1]), ([[0], [2]], [1, 2, 3]),
  (X > 50,), (X[:, :, 0] > 0,), (slice(1, 3), X[0, :, 0] % 2 == 0), (np.array([], np.int64),), ([2, 2], 1, [0, 5]),
  (True,), (Ellipsis, np.array([True, False, True, False, False, True])), ([0, 1], None, slice(None), [2, 3]),
  [], ([[]],), (slice(None), []), ([], []), ([], slice(1, 3)), (None, [], Ellipsis),   # empty lists are integer positions
])
@pytest.mark.parametrize("dtype", ["int32", "float16", "bool"])
def test_advanced_getitem(index, dtype):
  x = X.astype(dtype)
  index = index if isinstance(index, tuple) else (index,)
  got = Tensor(x)[index].numpy()
  want = x[index]
  assert got.shape == want.shape and got.dtype == want.dtype
  np.testing.assert_array_equal(got, want)


def test_index_tensors_and_fusion():
  x = np.linspace(-3, 3, 30, dtype=np.float32).reshape(5, 6)
  t = Tensor(x)
  idx = Tensor(np.array([4, 0, 2]))
  np.testing.assert_array_equal(t[idx].numpy(), x[[4, 0, 2]])
  np.testing.assert_array_equal(t[t.argmax(axis=0)].numpy(), x[x.argmax(axis=0)])  # an index computed on the device
  before = runtime.stats["kernels_run"]
  out = (t.exp()[[1, 3], 2:] * 2).sum(axis=1).numpy()  # exp realized once, then gather, multiply and sum fuse
  np.testing.assert_allclose(out, (np.exp(x)[[1, 3], 2:] * 2).sum(axis=1), rtol=1e-6)
  assert runtime.stats["kernels_run"] - before <= 3


def test_vectorized_gather():
  """Wide rows take the CPU's SIMD path: a vector of positions, then one load per lane."""
  from hcq.tensor.device import get_device
  from hcq.tensor.loops import plan
  from hcq.tensor.schedule import Scheduler
  x = np.random.default_rng(2).standard_normal((50, 64)).astype(np.float32)
  rows = np.array([49, 0, 7, 7, 23, -1, 12, 30])
  t = Tensor(x, device="CPU")[rows] * 2
  sched = Scheduler(get_device("CPU"))
  sched.realize(t.node)
  assert plan(sched.items[-1].kernel, "k").vec_width > 1
  np.testing.assert_array_equal((Tensor(x, device="CPU")[rows] * 2).numpy(), x[rows] * 2)


def test_index_errors_are_numpys():
  t = Tensor(X)
  with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"): t[[0, 4]]
  with pytest.raises(IndexError, match="index -7 is out of bounds for axis 1 with size 5"): t[:, [-7]]
  with pytest.raises(IndexError, match="boolean index did not match"): t[np.ones(3, bool)]
  with pytest.raises(IndexError, match="shape mismatch"): t[[0, 1], [0, 1, 2]]
  with pytest.raises(IndexError, match="integer \\(or boolean\\) type"): t[[0.5, 1.0]]
  with pytest.raises(IndexError, match="valid indices"): t["a"]


@pytest.mark.parametrize("index,value", [
  (1, 7), ((slice(None), 2), np.arange(6)), ((slice(1, 3), slice(None, None, -2), 0), -1), ([0, 2], 5.9),
  (([0, 0, 3], [1, 1, 4], 2), [10, 20, 30]), (([0, 0, 3], [1, 1, 4]), [[10], [20], [30]]), (X > 30, 0),
  ((Ellipsis, [5, 0]), np.array([[1], [2], [3], [4], [5]])),
  ((2, X[2, :, 0] < -10, slice(2, 4)), [8, 9]), ((slice(None), None, 1), np.zeros((4, 1, 6))), ([], 5), ((slice(None), []), 1),
])
@pytest.mark.parametrize("dtype", ["int16", "float32"])
def test_setitem(index, value, dtype):
  x = X.astype(dtype)
  t = Tensor(x)
  before = (t + 0).realize()
  t[index] = value
  want = x.copy()
  want[index] = value
  np.testing.assert_array_equal(t.numpy(), want)
  np.testing.assert_array_equal(before.numpy(), x)  # earlier results keep their values


def test_setitem_values_follow_numpy():
  t = Tensor(np.zeros(4, np.int8))
  with pytest.raises(OverflowError, match="out of bounds for int8"): t[0] = 300
  with pytest.raises(ValueError, match="could not broadcast input array from shape \\(3,\\) into shape \\(2,\\)"): t[:2] = [1, 2, 3]
  t[1:3] = Tensor(np.array([1.7, -2.2]))  # a float tensor cast to the int8 tensor (numpy's unsafe cast on assignment)
  np.testing.assert_array_equal(t.numpy(), np.array([0, 1, -2, 0], np.int8))
  b = Tensor(np.zeros(3, np.float32), dtype="bfloat16")
  b[[2]] = 1.00390625  # rounds to bfloat16
  np.testing.assert_array_equal(b.numpy(), np.array([0, 0, 1.0], np.float32))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_indices(data):
  shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
  x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
  index = []
  for s in shape:
    kind = data.draw(st.sampled_from(["int", "slice", "array", "mask", "all"]))
    if kind == "int": index.append(data.draw(st.integers(-s, s - 1)))
    elif kind == "slice": index.append(slice(data.draw(st.integers(-s, s)), None, data.draw(st.sampled_from([1, 2, -1]))))
    elif kind == "array": index.append(np.array(data.draw(st.lists(st.integers(-s, s - 1), min_size=1, max_size=3))))
    elif kind == "mask": index.append(np.array(data.draw(st.lists(st.booleans(), min_size=s, max_size=s))))
    else: index.append(slice(None))
  if data.draw(st.booleans()): index.insert(data.draw(st.integers(0, len(index))), None)
  index = tuple(index)
  try:
    want = x[index]
  except IndexError as e:
    with pytest.raises(IndexError, match=str(e)[:20]): Tensor(x)[index]
    return
  np.testing.assert_array_equal(Tensor(x)[index].numpy(), want)
  t, y = Tensor(x), x.copy()
  y[index] = -want - 1
  t[index] = Tensor(-want - 1)
  np.testing.assert_array_equal(t.numpy(), y)
