"""hcq.tensor against numpy: every op and dtype, with the tolerance each op is held to stated next to it."""
import numpy as np
import pytest
from hcq.tensor import Tensor, dtypes
from hcq.tensor import runtime
from hcq.tensor.dtype import bf16_to_f32, f32_to_bf16, to_dtype

FLOATS = ["float16", "bfloat16", "float32", "float64"]
SIGNED = ["int8", "int16", "int32", "int64"]
UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
INTS = SIGNED + UNSIGNED
ALL = ["bool"] + INTS + FLOATS
# tolerance per float dtype for exact-by-IEEE ops (add, mul, ...): one rounding of the result plus FMA contraction
EXACT_TOL = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-6, "float64": 1e-12}
# transcendental functions: our float32 polynomials are within a few ulp; f16/bf16 compute in float32 and round
MATH_TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 5e-6, "float64": 1e-12}


def ref_dtype(name: str):
  """The numpy dtype the reference is computed in (bfloat16 has none: float32 with inputs rounded to bf16)."""
  return np.float32 if name == "bfloat16" else np.dtype(name)


def sample(shape, dtype: str, rng, low=-4, high=4, positive=False) -> np.ndarray:
  """Values representable in dtype (bf16 ones rounded to bf16), as the reference dtype."""
  if dtype == "bool": return rng.random(shape) < 0.5
  if dtype in INTS:
    info = np.iinfo(dtype)
    lo = 1 if positive else max(info.min, low * 8)
    return rng.integers(lo, min(info.max, high * 8) + 1, size=shape).astype(dtype)
  x = rng.uniform(0.05 if positive else low, high, size=shape)
  if dtype == "bfloat16": return bf16_to_f32(f32_to_bf16(x.astype(np.float32)))
  return x.astype(dtype)


def check(got: np.ndarray, want: np.ndarray, tol: float = 0.0, dtype: str | None = None):
  want = np.asarray(want)
  if dtype == "bfloat16": want = bf16_to_f32(f32_to_bf16(want.astype(np.float32)))
  assert got.shape == want.shape, (got.shape, want.shape)
  if tol == 0.0 or want.dtype.kind in "biu":
    np.testing.assert_array_equal(got, want)
  else:
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, equal_nan=True)


def T(x: np.ndarray, dtype: str) -> Tensor: return Tensor(x, dtype=dtype)


@pytest.fixture
def rng(): return np.random.default_rng(0)


# creation
@pytest.mark.parametrize("dtype", ALL)
def test_roundtrip(dtype, rng):
  x = sample((3, 5), dtype, rng)
  t = Tensor(x, dtype=dtype)
  assert t.dtype == to_dtype(dtype) and t.shape == (3, 5)
  check(t.numpy(), x)


def test_creation():
  np.testing.assert_array_equal(Tensor([[1, 2], [3, 4]]).numpy(), np.array([[1, 2], [3, 4]]))
  assert Tensor([1.5]).dtype == dtypes.float64 and Tensor([1]).dtype == dtypes.int64 and Tensor(True).dtype == dtypes.bool
  assert Tensor([1, 2], dtype=np.int32).dtype == dtypes.int32 and Tensor([1, 2], dtype="i16").dtype == dtypes.int16
  np.testing.assert_array_equal(Tensor.zeros(2, 3).numpy(), np.zeros((2, 3)))
  np.testing.assert_array_equal(Tensor.ones((2, 3), dtype="int8").numpy(), np.ones((2, 3), np.int8))
  np.testing.assert_array_equal(Tensor.full((4,), 7.5, dtype="float32").numpy(), np.full((4,), 7.5, np.float32))
  np.testing.assert_array_equal(Tensor.arange(2, 11, 3).numpy(), np.arange(2, 11, 3))
  np.testing.assert_array_equal(Tensor.arange(5, dtype="float32").numpy(), np.arange(5, dtype=np.float32))
  assert Tensor.empty(3, 4, dtype="float32").shape == (3, 4)
  a, b = Tensor.rand(8, 8, seed=3).numpy(), Tensor.rand(8, 8, seed=3).numpy()
  np.testing.assert_array_equal(a, b)
  assert a.dtype == np.float32 and (a >= 0).all() and (a < 1).all()
  n = Tensor.randn(10000, seed=1, dtype="float64").numpy()
  assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
  assert Tensor(np.float32(2.0)).shape == () and Tensor(3).item() == 3
  with pytest.raises(TypeError, match="unknown dtype"): Tensor([1], dtype="complex64")
  with pytest.raises(TypeError): Tensor(np.array(["a"]))


# elementwise binary
BINARY = {
  "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract), "mul": (lambda a, b: a * b, np.multiply),
  "div": (lambda a, b: a / b, np.true_divide), "maximum": (lambda a, b: a.maximum(b), np.maximum),
  "minimum": (lambda a, b: a.minimum(b), np.minimum),
}


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, dtype, rng):
  if dtype == "bool" and op in ("sub", "div"): pytest.skip("numpy rejects bool subtract; bool div tested below")
  ours, ref = BINARY[op]
  a = sample((4, 33), dtype, rng)
  b = sample((33,), dtype, rng, positive=(op == "div"))
  got = ours(T(a, dtype), T(b, dtype))
  with np.errstate(all="ignore"): want = ref(a, b)
  if dtype != "bfloat16": assert got.dtype.name == want.dtype.name, (got.dtype, want.dtype)
  check(got.numpy(), want, EXACT_TOL.get(dtype, 0) * (4 if op == "div" else 1), dtype if want.dtype.kind == "f" else None)


@pytest.mark.parametrize("dtype", INTS + ["float32", "float64"])
@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_floordiv_mod(op, dtype, rng):
  a = sample((64,), dtype, rng)
  b = sample((64,), dtype, rng, positive=dtype in UNSIGNED)
  if dtype in SIGNED: b[::3] = -b[::3]
  b[b == 0] = 3
  with np.errstate(all="ignore"): want = (np.floor_divide if op == "floordiv" else np.remainder)(a, b)
  got = (T(a, dtype) // T(b, dtype)) if op == "floordiv" else (T(a, dtype) % T(b, dtype))
  check(got.numpy(), want, 1e-5 if dtype.startswith("float") else 0)


FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1.5, -2.5, 7.0, -7.0, 1e30, -1e30, 1e-45, np.inf, -np.inf, np.nan]


def float_edge_pairs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
  """Every pair of FLOAT_EDGES (in `dtype`: 1e30 is inf in float16, 1e-45 is 0)."""
  with np.errstate(over="ignore"): e = np.array(FLOAT_EDGES, np.float64).astype(dtype)
  return np.repeat(e, len(e)), np.tile(e, len(e))


def mismatches(got: np.ndarray, want: np.ndarray, x: np.ndarray, y: np.ndarray, rtol: float = 0.0) -> list:
  """(x, y, got, want) where got is not want: NaN alike, zeros by sign, finite values within rtol."""
  got, want = got.astype(np.float64), want.astype(np.float64)
  same = (np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))
  same |= np.isfinite(want) & (want != 0) & (np.abs(got - want) <= rtol * np.abs(want))
  return [(float(x[i]), float(y[i]), float(got[i]), float(want[i])) for i in np.nonzero(~same)[0]]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_floordiv_mod_pow_at_the_edges_are_numpys(dtype):
  """//, % and ** over every pair of signed zeros, ones, halves, huge, tiny, inf and NaN: numpy's values, NaN and
  signed zeros included (inf // 2 is NaN, 1 // -inf is -1, 0 % -1 is -0.0)."""
  x, y = float_edge_pairs(dtype)
  # numpy's SIMD pow on an AVX-512 host rounds finite results up to a few ulp off (float32 3 ** 0.5, float64 1e30 ** 2:
  # 1e60 where the exact square of 1e30's double rounds to 1.0000000000000001e60, which hcq gives): finite results
  # within 4 ulp of it; NaN, infinities and zeros exact
  pow_tol = 4 * float(np.finfo(dtype).eps) if dtype != "float16" else 0.0
  with np.errstate(all="ignore"):
    for name, f, tol in [("//", lambda a, b: a // b, 0.0), ("%", lambda a, b: a % b, 0.0), ("**", lambda a, b: a ** b, pow_tol)]:
      bad = mismatches(f(T(x, dtype), T(y, dtype)).numpy(), f(x, y), x, y, tol)
      assert not bad, f"{dtype} {name}: (x, y, got, numpy) {bad[:8]}"
    for e in (0.5, 2, -1, 3, -0.5, 0, 1.5):   # a scalar exponent: numpy's array ** 0.5 is its sqrt ((-inf) ** 0.5 is NaN)
      bad = mismatches((T(x[::len(FLOAT_EDGES)], dtype) ** e).numpy(), x[::len(FLOAT_EDGES)] ** e, x[::len(FLOAT_EDGES)],
                       np.full(len(FLOAT_EDGES), e), pow_tol)
      assert not bad, f"{dtype} ** {e}: (x, y, got, numpy) {bad[:8]}"


def test_int_division_by_zero_is_zero():
  a = Tensor(np.array([5, -5, 0], np.int32))
  np.testing.assert_array_equal((a // 0).numpy(), [0, 0, 0])
  np.testing.assert_array_equal((a % 0).numpy(), [0, 0, 0])
  np.testing.assert_array_equal((Tensor(np.array([-128], np.int8)) // -1).numpy(), np.array([-128], np.int8))


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["lt", "le", "gt", "ge", "eq", "ne"])
def test_compare(op, dtype, rng):
  a, b = sample((5, 7), dtype, rng), sample((5, 7), dtype, rng)
  b[0] = a[0]  # some equal elements
  got = getattr(T(a, dtype), f"__{op}__")(T(b, dtype)).numpy()
  want = getattr(a, f"__{op}__")(b)
  assert got.dtype == np.bool_
  check(got, want)


def test_compare_out_of_range_scalar():
  a = np.array([-5, 0, 100], np.int8)
  np.testing.assert_array_equal((Tensor(a) < 300).numpy(), a < 300)
  np.testing.assert_array_equal((Tensor(a) == -1000).numpy(), a == -1000)
  np.testing.assert_array_equal((Tensor(a) > 1.5).numpy(), a > 1.5)


def test_compare_nan():
  a = Tensor(np.array([np.nan, 1.0, np.nan]))
  b = Tensor(np.array([np.nan, np.nan, 2.0]))
  np.testing.assert_array_equal((a == b).numpy(), [False, False, False])
  np.testing.assert_array_equal((a != b).numpy(), [True, True, True])
  np.testing.assert_array_equal((a < b).numpy(), [False, False, False])


@pytest.mark.parametrize("dtype", ["bool"] + INTS)
@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_bitwise(op, dtype, rng):
  a, b = sample((50,), dtype, rng), sample((50,), dtype, rng)
  got = getattr(T(a, dtype), f"__{op}__")(T(b, dtype)).numpy()
  check(got, getattr(a, f"__{op}__")(b))
  check((~T(a, dtype)).numpy(), ~a)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int8"])
def test_pow(dtype, rng):
  a = sample((40,), dtype, rng, positive=True)
  b = sample((40,), dtype, rng, low=0, high=1 if dtype in INTS else 3)
  if dtype in INTS: b = np.abs(b) % 4
  with np.errstate(all="ignore"): want = np.power(a, b)
  got = (T(a, dtype) ** T(b, dtype)).numpy()
  check(got, want, {"float16": 3e-3, "float32": 1e-5, "float64": 1e-12}.get(dtype, 0))
  check((T(a, dtype) ** 2).numpy(), a * a, EXACT_TOL.get(dtype, 0))
  if dtype.startswith("float"):
    check((2.0 ** T(b, dtype)).numpy(), np.power(np.array(2.0, a.dtype), b), MATH_TOL[dtype])
    neg = -a
    check((T(neg, dtype) ** 3.0).numpy(), np.power(neg, np.array(3.0, neg.dtype)), MATH_TOL[dtype] * 4)


# scalars follow NEP 50 (weak Python scalars)
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float16", "float32", "bool"])
@pytest.mark.parametrize("scalar", [2, 1.5, True])
def test_scalar_promotion(dtype, scalar, rng):
  a = sample((9,), dtype, rng)
  for ours, ref in [(lambda x: x + scalar, lambda x: x + scalar), (lambda x: scalar * x, lambda x: scalar * x),
                    (lambda x: x / scalar, lambda x: x / scalar)]:
    with np.errstate(all="ignore"): want = ref(a)
    got = ours(T(a, dtype)).numpy()
    assert got.dtype == want.dtype, (dtype, scalar, got.dtype, want.dtype)
    check(got, want, EXACT_TOL.get(dtype, 1e-12) if want.dtype.kind == "f" else 0)


def test_promotion_between_dtypes(rng):
  for x in ALL:
    for y in ALL:
      if "bfloat16" in (x, y): continue
      a, b = sample((3,), x, rng), sample((3,), y, rng)
      got = (T(a, x) * T(b, y))
      assert got.dtype.name == (a * b).dtype.name, (x, y)
  assert (Tensor([1.0], dtype="bf16") + Tensor([1], dtype="int8")).dtype == dtypes.bfloat16
  assert (Tensor([1.0], dtype="bf16") + Tensor([1.0], dtype="f16")).dtype == dtypes.float32
  assert (Tensor([1.0], dtype="bf16") * 2.0).dtype == dtypes.bfloat16


# unary
UNARY = {
  "neg": (lambda t: -t, np.negative, None), "abs": (lambda t: t.abs(), np.abs, None),
  "exp": (lambda t: t.exp(), np.exp, None), "log": (lambda t: t.log(), np.log, "positive"),
  "exp2": (lambda t: t.exp2(), np.exp2, None), "log2": (lambda t: t.log2(), np.log2, "positive"),
  "sqrt": (lambda t: t.sqrt(), np.sqrt, "positive"), "rsqrt": (lambda t: t.rsqrt(), lambda x: 1 / np.sqrt(x), "positive"),
  "sin": (lambda t: t.sin(), np.sin, None), "cos": (lambda t: t.cos(), np.cos, None),
  "relu": (lambda t: t.relu(), lambda x: np.maximum(x, 0), None),
  "sigmoid": (lambda t: t.sigmoid(), lambda x: 1 / (1 + np.exp(-x.astype(np.exp(x).dtype))), None),
  "tanh": (lambda t: t.tanh(), np.tanh, None),
}


@pytest.mark.parametrize("dtype", FLOATS + ["int32", "int8", "uint8"])
@pytest.mark.parametrize("op", list(UNARY))
def test_unary(op, dtype, rng):
  ours, ref, domain = UNARY[op]
  if dtype in INTS and op in ("neg", "abs", "relu") and dtype.startswith("u") and op == "neg": pytest.skip("unsigned negation wraps")
  a = sample((3, 67), dtype, rng, positive=domain == "positive")
  with np.errstate(all="ignore"): want = ref(a.astype(np.float32) if dtype == "bfloat16" else a)
  got = ours(T(a, dtype))
  tol = MATH_TOL.get(str(want.dtype) if dtype in INTS else dtype, 0)
  if dtype in INTS and op not in ("neg", "abs", "relu"): tol = MATH_TOL[want.dtype.name]
  check(got.numpy(), want, tol if want.dtype.kind == "f" else 0, dtype if want.dtype.kind == "f" else None)
  if dtype != "bfloat16": assert got.dtype.name == want.dtype.name


def test_math_special_values():
  x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1e-40, 88.0, 89.0, -104.0, 3.4e38], np.float32)
  t = Tensor(x)
  with np.errstate(all="ignore"):
    for ours, ref in [(t.exp(), np.exp(x)), (t.log(), np.log(x)), (t.exp2(), np.exp2(x)), (t.log2(), np.log2(x)), (t.sqrt(), np.sqrt(x))]:
      np.testing.assert_allclose(ours.numpy(), ref, rtol=5e-6, atol=1e-43, equal_nan=True)
  wide = np.linspace(-100, 100, 4001, dtype=np.float32)
  with np.errstate(over="ignore"): want = np.exp(wide)
  np.testing.assert_allclose(Tensor(wide).exp().numpy(), want, rtol=4e-7, atol=1e-40)  # denormals lose bits
  pos = np.exp(np.linspace(-80, 80, 4001)).astype(np.float32)
  np.testing.assert_allclose(Tensor(pos).log().numpy(), np.log(pos), rtol=4e-7, atol=1e-7)
  np.testing.assert_array_equal(Tensor(np.array([1, 2, 8, 1024], np.float32)).log2().numpy(), [0, 1, 3, 10])


def test_tanh_small_values_are_relative():
  x = np.array([1e-8, -3e-5, 0.01, 0.06, 0.07, 0.3, -2.0, 20.0, -np.inf, np.nan], np.float32)
  np.testing.assert_allclose(Tensor(x).tanh().numpy(), np.tanh(x), rtol=1e-6, atol=0)
  y = np.linspace(-3, 3, 1001)
  np.testing.assert_allclose(Tensor(y).tanh().numpy(), np.tanh(y), rtol=1e-12, atol=1e-15)


def test_sin_cos_polynomials():
  """float32 sin/cos are vector polynomials below |x| = 8192 and libm above (and for inf/nan): both within an ulp."""
  x = np.concatenate([np.linspace(-20, 20, 20001), [0, -0.0, 1e-30, np.pi, -np.pi / 2, 8191.9, 8192.5, 1e6, 3e38,
                                                    np.inf, -np.inf, np.nan]]).astype(np.float32)
  for op in ("sin", "cos"):
    with np.errstate(invalid="ignore"): want = getattr(np, op)(x.astype(np.float64))
    got = getattr(Tensor(x), op)().numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1.2e-7, equal_nan=True)
  tiny = np.array([1e-30, -3e-20, 1e-8] * 6, np.float32)
  np.testing.assert_allclose(Tensor(tiny).sin().numpy(), np.sin(tiny), rtol=1e-7, atol=0)


def test_where(rng):
  c = rng.random((4, 5)) < 0.5
  a = sample((4, 5), "float32", rng)
  b = sample((5,), "int32", rng)
  got = Tensor(c).where(Tensor(a), Tensor(b))
  want = np.where(c, a, b)
  assert got.dtype.name == want.dtype.name
  check(got.numpy(), want, 1e-7)
  check(Tensor(c).where(1.0, Tensor(a)).numpy(), np.where(c, 1.0, a))
  check((Tensor(a) > 0).where(Tensor(a), 0).numpy(), np.where(a > 0, a, 0))


@pytest.mark.parametrize("dtype", ALL)
def test_where_and_movement_every_dtype(dtype, rng):
  a, b = sample((4, 6), dtype, rng), sample((4, 6), dtype, rng)
  c = rng.random((4, 6)) < 0.5
  check(Tensor(c).where(T(a, dtype), T(b, dtype)).numpy(), np.where(c, a, b))
  t = T(a, dtype)
  check(t.T.pad(((1, 0), (0, 2)))[::-1, 1::2].numpy(), np.pad(a.T, ((1, 0), (0, 2)))[::-1, 1::2])
  check(Tensor.cat(t, T(b, dtype), axis=1).reshape(6, 8).flip(0).numpy(), np.flip(np.concatenate([a, b], axis=1).reshape(6, 8), 0))
  check(t[None, :, 2:3].expand(3, 4, 5).numpy(), np.broadcast_to(a[None, :, 2:3], (3, 4, 5)))


# casts
@pytest.mark.parametrize("src", ALL)
@pytest.mark.parametrize("dst", ALL)
def test_cast(src, dst, rng):
  x = sample((37,), src, rng, low=0, high=15)  # in range for every dtype
  got = T(x, src).cast(dst).numpy()
  if dst == "bfloat16": want = bf16_to_f32(f32_to_bf16(x.astype(np.float32)))
  else: want = x.astype(dst)
  check(got, want)


CAST_EDGES = [3e9, -3e9, 1e10, -1e10, 1e20, -1e20, np.inf, -np.inf, np.nan, 300.7, -300.7, 70000.5, -70000.5, 2.0**31, -2.0**31,
              -2.0**31 - 1, 2.0**32, 2.0**63, -2.0**63, 2.0**64, 1.8e19, 4.5e9, -1.5, -0.0, 0.99, 255.5, -129.0]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]


def cast_edges(src: str) -> np.ndarray:
  with np.errstate(over="ignore"): return np.array(CAST_EDGES, np.float64).astype(src)


@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
def test_float_to_int_casts_out_of_range_are_numpys(src):
  """Out of range, inf and NaN: numpy's results on x86-64 (3e9 -> int32 is INT32_MIN, not a wrapped -1294967296)."""
  x = cast_edges(src)
  for dst in INTS:
    with np.errstate(invalid="ignore"): want = x.astype(dst)
    check(T(x, src).cast(dst).numpy(), want)
    check((T(x, src) + 0).cast(dst).numpy(), want)   # computed, not only loaded


def test_bitcast(rng):
  x = sample((4, 6), "float32", rng)
  check(Tensor(x).bitcast("int32").numpy(), x.view(np.int32))
  check(Tensor(x).bitcast(np.uint32).numpy(), x.view(np.uint32))
  check((Tensor(x) * 2).bitcast("int32").numpy(), (x * 2).view(np.int32))
  check(Tensor(x).bitcast("uint8").numpy(), x.view(np.uint8))
  check(Tensor(x).bitcast("float64").numpy(), x.view(np.float64))
  check(Tensor(x).T.bitcast("float16").numpy(), np.ascontiguousarray(x.T).view(np.float16))
  y = sample((8,), "uint8", rng)
  check(Tensor(y).bitcast("bool").numpy(), y.view(np.bool_))
  with pytest.raises(ValueError): Tensor(np.zeros(3, np.uint8)).bitcast("int16")
  h = sample((6,), "float16", rng)
  check(Tensor(h).bitcast("int16").numpy(), h.view(np.int16))


# reductions
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("op", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
def test_reduce(op, dtype, axis, rng):
  x = sample((5, 6, 7), dtype, rng)
  if dtype == "bool" and op == "mean": x = x.astype(bool)
  got = getattr(T(x, dtype), op)(axis=axis)
  want = getattr(x, op)(axis=axis)
  tol = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-12}.get(dtype, 1e-12 if op == "mean" else 0)
  check(got.numpy(), want, tol, dtype if op in ("max", "min") or want.dtype.kind == "f" else None)
  if dtype != "bfloat16": assert got.dtype.name == want.dtype.name, (got.dtype, want.dtype)


@pytest.mark.parametrize("op", ["sum", "max", "min", "mean"])
def test_reduce_keepdims(op, rng):
  x = sample((3, 4, 5), "float32", rng)
  for kw in ({"keepdim": True}, {"keepdims": True}):
    got = getattr(Tensor(x), op)(axis=1, **kw).numpy()
    check(got, getattr(x, op)(axis=1, keepdims=True), 1e-6)
  check(getattr(Tensor(x), op)(keepdims=True).numpy(), getattr(x, op)(keepdims=True), 1e-5)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "float16", "bool", "float64"])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax(op, dtype, rng):
  x = sample((6, 9), dtype, rng, low=-2, high=2)  # small range: ties, the first one counts
  for axis in (None, 0, 1, -1):
    got = getattr(T(x, dtype), op)(axis=axis).numpy()
    check(got, getattr(x, op)(axis=axis))
  check(getattr(T(x, dtype), op)(axis=1, keepdims=True).numpy(), getattr(x, op)(axis=1, keepdims=True))


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float64"])
def test_any_all_var_std_clip(dtype, rng):
  x = sample((5, 6, 7), dtype, rng)
  t = T(x, dtype)
  for axis in (None, 0, (1, 2)):
    check(t.any(axis=axis).numpy(), x.any(axis=axis))
    check((t > 0).all(axis=axis, keepdims=True).numpy(), (x > 0).all(axis=axis, keepdims=True))
    if dtype != "bool":
      tol = 1e-5 if dtype == "float32" else 1e-10
      check(t.var(axis=axis).numpy(), x.var(axis=axis), tol)
      check(t.std(axis=axis, ddof=1).numpy(), x.std(axis=axis, ddof=1), tol)
  if dtype != "bool": check(t.clip(-1, 2).numpy(), x.clip(-1, 2))
  assert Tensor(np.zeros((0, 3))).any(axis=0).numpy().tolist() == [False] * 3
  assert Tensor(np.zeros((0, 3))).all().item() is True


def test_reduce_nan_and_empty():
  x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]], np.float32)
  check(Tensor(x).max(axis=1).numpy(), x.max(axis=1))
  check(Tensor(x).min(axis=1).numpy(), x.min(axis=1))
  check(Tensor(x).argmax(axis=1).numpy(), x.argmax(axis=1))
  assert Tensor(np.zeros((0, 3), np.float32)).sum(axis=0).numpy().tolist() == [0, 0, 0]
  with pytest.raises(ValueError, match="zero-size array"): Tensor(np.zeros((0,), np.float32)).max()


def test_sin_of_negative_zero_is_negative_zero():
  x = np.array([-0.0, 0.0, -1e-30], np.float32)
  got = Tensor(x).sin().numpy()
  assert got.tolist() == np.sin(x).tolist() and np.signbit(got).tolist() == [True, False, True]


def test_float32_sums_longer_than_an_accumulator_holds():
  """A float32 accumulator of ones stops growing at 2^24: a sum over 5 * 2^30 elements (a broadcast, nothing allocated;
  over 2^32, the count an accumulator per partial sum saturated at) is exact, and 2^27 copies of 0.1 and of 0.7 in
  rows and columns are within 1e-5 of the exact sum (numpy's pairwise sum is; naive accumulation was off by 10%)."""
  n = 5 << 30
  assert Tensor(np.ones(1, np.float32)).expand(n).sum().item() == n
  v = np.array([0.1, 0.7], np.float32)
  exact = v.astype(np.float64) * (1 << 27)
  check(Tensor(v).reshape(2, 1).expand(2, 1 << 27).sum(1).numpy(), exact, 1e-5)
  check(Tensor(v).reshape(1, 2).expand(1 << 27, 2).sum(0).numpy(), exact, 1e-5)
  check(Tensor(v).reshape(1, 2, 1).expand(1 << 13, 2, 1 << 14).sum((0, 2)).numpy(), exact, 1e-5)


@pytest.mark.parametrize("n", [1 << 16, (1 << 20) + 3, 3 << 18])
def test_big_reductions(n, rng):
  x = rng.standard_normal(n).astype(np.float32)
  check(Tensor(x).sum().numpy(), x.astype(np.float64).sum(), 2e-4)
  check(Tensor(x).max().numpy(), x.max())
  check(Tensor(x).argmax().numpy(), x.argmax())
  m = x.reshape(-1, 8) if n % 8 == 0 else x[: n - n % 8].reshape(-1, 8)
  check(Tensor(m).sum(axis=0).numpy(), m.astype(np.float64).sum(axis=0), 2e-4)


# movement
def test_movement(rng):
  x = sample((2, 3, 4), "float32", rng)
  t = Tensor(x)
  check(t.reshape(4, 6).numpy(), x.reshape(4, 6))
  check(t.reshape(-1, 2).numpy(), x.reshape(-1, 2))
  check(t.permute(2, 0, 1).numpy(), x.transpose(2, 0, 1))
  check(t.transpose().numpy(), x.transpose())
  check(t.T.numpy(), x.T)
  check(t.swapaxes(0, 2).numpy(), x.swapaxes(0, 2))
  check(t[:, :1].expand(3, 2, 5, 4).numpy(), np.broadcast_to(x[:, :1], (3, 2, 5, 4)))
  check(t.pad(1).numpy(), np.pad(x, 1))
  check(t.pad((1, 2)).numpy(), np.pad(x, (1, 2)))
  check(t.pad(((0, 0), (2, 1), (0, 3)), constant_values=9.5).numpy(), np.pad(x, ((0, 0), (2, 1), (0, 3)), constant_values=9.5))
  check(t.shrink(((0, 1), None, (1, 3))).numpy(), x[0:1, :, 1:3])
  check(t.flip().numpy(), np.flip(x))
  check(t.flip(1).numpy(), np.flip(x, 1))
  check(t.flip((0, 2)).numpy(), np.flip(x, (0, 2)))
  check(t.unsqueeze(1).squeeze().numpy(), x)
  # chains that need multi-view trackers (reshape of a permuted or padded view)
  check(t.permute(2, 0, 1).reshape(8, 3).numpy(), x.transpose(2, 0, 1).reshape(8, 3))
  check(t.pad(((1, 0), (0, 1), (0, 0))).reshape(3, 16).T.numpy(), np.pad(x, ((1, 0), (0, 1), (0, 0))).reshape(3, 16).T)
  check(t.flip(2).permute(1, 2, 0).reshape(6, 4)[::2, ::-3].numpy(), np.flip(x, 2).transpose(1, 2, 0).reshape(6, 4)[::2, ::-3])
  check((t.exp().pad(((0, 0), (1, 1), (0, 0))) + 1).numpy(), np.pad(np.exp(x), ((0, 0), (1, 1), (0, 0))) + 1, 1e-6)


@pytest.mark.parametrize("index", [
  0, -1, (1, 2), (slice(None), 1), slice(1, None), (slice(None, None, 2),), (slice(None), slice(None, None, -1)),
  (Ellipsis, 1), (None, 1), (1, None, slice(0, 3, 2)), (slice(None), slice(3, 0, -2), slice(None, None, 3)),
  (slice(5, 1),), (slice(-3, None), Ellipsis, slice(None, None, -2)), (slice(None, None, -1), 0, slice(1, 4, 2)),
])
def test_getitem(index, rng):
  x = sample((4, 5, 6), "int32", rng)
  check(Tensor(x)[index].numpy(), x[index])


def test_getitem_errors():
  t = Tensor(np.zeros((3, 4)))
  with pytest.raises(IndexError, match="out of bounds"): t[3]
  with pytest.raises(IndexError, match="too many indices"): t[0, 0, 0]
  with pytest.raises(IndexError, match="out of bounds for axis 0 with size 3"): t[[0, 3]]
  with pytest.raises(IndexError, match="integer or boolean arrays are valid indices"): t[1.5]
  with pytest.raises(IndexError, match="integer \\(or boolean\\) type"): t[np.array([1.0])]


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cat(axis, rng):
  parts = [sample((3, 4), "float32", rng), sample((3, 4), "int16", rng), sample((3, 4), "float32", rng)]
  if axis == 0: parts[1] = sample((2, 4), "int16", rng)
  else: parts[1] = sample((3, 2), "int16", rng)
  got = Tensor.cat(*[Tensor(p) for p in parts], axis=axis)
  want = np.concatenate(parts, axis=axis)
  assert got.dtype.name == want.dtype.name
  check(got.numpy(), want)
  check(Tensor.cat([Tensor(parts[0] > 0), Tensor(parts[2] > 0)], axis=0).numpy(), np.concatenate([parts[0] > 0, parts[2] > 0]))
  check(Tensor.stack([Tensor(parts[0]), Tensor(parts[2])], axis=1).numpy(), np.stack([parts[0], parts[2]], axis=1))


# matmul and softmax
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
                                    ((2, 1, 3, 4), (5, 4, 6)), ((64, 96), (96, 128)), ((37, 200), (200, 64)), ((8, 65), (65, 40))])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
def test_matmul(shapes, dtype, rng):
  a, b = sample(shapes[0], dtype, rng, low=-2, high=2), sample(shapes[1], dtype, rng, low=-2, high=2)
  got = Tensor(a, dtype=dtype) @ Tensor(b, dtype=dtype)
  want = a @ b
  assert got.dtype.name == want.dtype.name
  k = shapes[0][-1]
  check(got.numpy(), want, {"float16": 2e-3 * k, "float32": 1e-5, "float64": 1e-12}.get(dtype, 0))
  check(Tensor(a, dtype=dtype).dot(Tensor(b, dtype=dtype)).numpy(), want, {"float16": 2e-3 * k, "float32": 1e-5, "float64": 1e-12}.get(dtype, 0))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool", "int64", "bfloat16"])
def test_matmul_small_types(dtype, rng):
  a, b = sample((5, 70), dtype, rng, low=-2, high=2), sample((70, 64), dtype, rng, low=-2, high=2)
  got = (T(a, dtype) @ T(b, dtype)).numpy()
  if dtype == "bfloat16": check(got, a @ b, 3e-2 * 8)  # rounded to bf16 once at the end, sums up to ~100
  else: check(got, a @ b)


def test_matmul_large(rng):
  a, b = rng.standard_normal((256, 512)).astype(np.float32), rng.standard_normal((512, 384)).astype(np.float32)
  check((Tensor(a) @ Tensor(b)).numpy(), a @ b, 2e-4)
  check((Tensor(a).T.T @ Tensor(b.T).T).numpy(), a @ b, 2e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax(dtype, axis, rng):
  x = sample((7, 48), dtype, rng, low=-20, high=20)
  want = np.exp(x - x.max(axis, keepdims=True))
  want = want / want.sum(axis, keepdims=True)
  check(Tensor(x).softmax(axis).numpy(), want, {"float16": 3e-3, "float32": 2e-6, "float64": 1e-12}[dtype])
  shifted = x.astype(np.float64) - x.max(axis, keepdims=True)
  want_log = shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))
  check(Tensor(x).log_softmax(axis).numpy(), want_log, {"float16": 3e-2, "float32": 2e-5, "float64": 1e-10}[dtype])


# errors numpy raises too
def test_shape_errors():
  with pytest.raises(ValueError, match="could not be broadcast"): Tensor(np.zeros((2, 3))) + Tensor(np.zeros((4,)))
  with pytest.raises(ValueError, match="cannot reshape array of size 6 into shape"): Tensor(np.zeros((2, 3))).reshape(4)
  with pytest.raises(ValueError, match="matmul: Input operand 1 has a mismatch"): Tensor(np.zeros((2, 3))) @ Tensor(np.zeros((4, 2)))
  with pytest.raises(np.exceptions.AxisError): Tensor(np.zeros((2, 3))).sum(axis=2)
  with pytest.raises(ValueError, match="duplicate"): Tensor(np.zeros((2, 3))).sum(axis=(0, 0))
  with pytest.raises(ValueError, match="must match exactly"): Tensor.cat(Tensor(np.zeros((2, 3))), Tensor(np.zeros((2, 4))))
  with pytest.raises(TypeError, match="boolean negative"): -Tensor(np.array([True]))
  with pytest.raises(TypeError): Tensor(np.array([True])) - Tensor(np.array([True]))
  with pytest.raises(OverflowError): Tensor(np.zeros(3, np.int8)) + 300
  with pytest.raises(ValueError, match="broadcast"): Tensor(np.zeros((2, 3))).expand(4, 3)
  with pytest.raises(ValueError): Tensor(np.zeros((2, 3))).permute(0, 0)


# the compiler: fusion, caching, devices
def kernels_for(t: Tensor) -> int:
  before = runtime.stats["kernels_run"]
  t.realize()
  return runtime.stats["kernels_run"] - before


def test_fusion(rng):
  a, b, c = [Tensor(sample((4096,), "float32", rng)) for _ in range(3)]
  assert kernels_for(((a * b + c).relu() * 2).exp()) == 1
  assert kernels_for((a * b + c).relu().sum()) == 1
  m = Tensor(sample((64, 256), "float32", rng))
  assert kernels_for(m.softmax()) == 1
  assert kernels_for((m.sum(axis=1, keepdim=True) * 2 + 1).sqrt()) == 1
  big = Tensor(sample((1 << 20,), "float32", rng))
  assert kernels_for((big * big).sum()) == 2  # split in two so both cores share the long reduction


def test_long_chains_are_cut():
  x = Tensor(np.ones(10, np.float32))
  want = np.ones(10, np.float32)
  for _ in range(2000):  # deeper than Python's recursion limit if it were one kernel
    x = x * 1.001 + 0.5
    want = want * np.float32(1.001) + np.float32(0.5)
  check(x.numpy(), want, 1e-5)


def test_broadcast_of_expensive_values_is_realized(rng):
  a = sample((64, 48), "float32", rng)
  t = Tensor(a)
  assert kernels_for(t.exp() @ t.T) == 2  # exp(a) once into a buffer, then the matmul reads it
  check((t.exp() @ t.T).numpy(), np.exp(a) @ a.T, 5e-4)  # sums of 48 products up to 200 in size, with cancellation


def test_compile_cache(rng):
  x = Tensor(sample((100,), "float32", rng))
  (x * 3 + 1).realize()
  before = runtime.stats["kernels_compiled"]
  y = Tensor(sample((100,), "float32", rng))
  (y * 3 + 1).realize()
  assert runtime.stats["kernels_compiled"] == before


def test_realize_and_to(rng):
  x = Tensor(sample((5,), "float32", rng))
  y = (x + 1).realize()
  assert y.node.realized
  assert y.to("CPU") is y
  with pytest.raises(ValueError, match="valid devices: AMD, NV, CPU"): y.to("TPU")
  check((y * 2).numpy(), (x.numpy() + 1) * 2)
  assert float(Tensor(np.array([2.5])).sum()) == 2.5 and len(y) == 5


def test_renderer_seam():
  from hcq.tensor.render_amd import AMDGCNRenderer
  from hcq.tensor.render_llvm import Renderer
  from hcq.tensor.render_nv import NVPTXRenderer
  assert issubclass(AMDGCNRenderer, Renderer) and issubclass(NVPTXRenderer, Renderer)


def test_device_interface():
  """The runtime's whole view of a device: alloc/copyin/copyout, compile, program (the CPU device's kernel ABI:
  kernargs = buffers, then i64 chunk and i64 extent, one workgroup per chunk), launch, synchronize."""
  from hcq.tensor.device import get_device
  dev = get_device("CPU")
  src = """define void @add1_hcq(ptr %args, i32 %gx, i32 %gy, i32 %gz, i32 %lx, i32 %ly, i32 %lz) {
entry:
  %a = load ptr, ptr %args
  %pb = getelementptr i8, ptr %args, i64 8
  %b = load ptr, ptr %pb
  %pc = getelementptr i8, ptr %args, i64 16
  %chunk = load i64, ptr %pc
  %pe = getelementptr i8, ptr %args, i64 24
  %extent = load i64, ptr %pe
  %g = zext i32 %gx to i64
  %start = mul i64 %g, %chunk
  %end0 = add i64 %start, %chunk
  %short = icmp slt i64 %extent, %end0
  %end = select i1 %short, i64 %extent, i64 %end0
  br label %loop
loop:
  %i = phi i64 [ %start, %entry ], [ %n, %loop ]
  %xa = getelementptr float, ptr %a, i64 %i
  %xb = getelementptr float, ptr %b, i64 %i
  %x = load float, ptr %xb
  %y = fadd float %x, 1.0
  store float %y, ptr %xa
  %n = add i64 %i, 1
  %c = icmp slt i64 %n, %end
  br i1 %c, label %loop, label %done
done:
  ret void
}"""
  prog = dev.program("add1", dev.compile(src), 2)
  out, inp = dev.alloc(4 * 1000), dev.alloc(4 * 1000)
  inp.copyin(np.arange(1000, dtype=np.float32))
  assert prog(out, inp, global_size=(1000,), vals=(8,), wait=True) >= 0  # GPU-style seconds from the queue's timestamps
  dev.synchronize()
  np.testing.assert_array_equal(out.copyout(np.empty(1000, np.float32)), np.arange(1000, dtype=np.float32) + 1)


# numpy's rules over every pair of dtypes and every kind of Python scalar: result dtype, value, and whether it raises
SWEEP_DTYPES = ["bool"] + INTS + ["float16", "float32", "float64"]
SWEEP_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
             "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "lt": lambda a, b: a < b, "eq": lambda a, b: a == b,
             "maximum": lambda a, b: (a.maximum(b) if isinstance(a, Tensor) else np.maximum(a, b))}


@pytest.mark.parametrize("left", SWEEP_DTYPES)
def test_numpy_rules_sweep(left):
  rng = np.random.default_rng(SWEEP_DTYPES.index(left))
  def values(dt):
    if dt == "bool": return rng.random(8) < 0.5
    return rng.integers(1, 9, 8).astype(dt) if dt in INTS else rng.uniform(0.5, 4, 8).astype(dt)
  a = values(left)
  for right in SWEEP_DTYPES + [2, 2.5, True, -3]:
    b = values(right) if isinstance(right, str) else right
    for name, op in SWEEP_OPS.items():
      with np.errstate(all="ignore"):
        try:
          want = np.asarray(op(a, b))
        except (TypeError, OverflowError) as e:
          with pytest.raises(type(e)): op(Tensor(a), Tensor(b) if isinstance(b, np.ndarray) else b).realize()
          continue
      got = op(Tensor(a), Tensor(b) if isinstance(b, np.ndarray) else b).numpy()
      assert got.dtype == want.dtype, (left, right, name, got.dtype, want.dtype)
      np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3, err_msg=f"{left} {name} {right}")
