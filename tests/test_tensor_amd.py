"""hcq.tensor on the emulated GPUs: MOCKKFD+AMD (the real AMD driver over the mock KFD, gfx1100 wavefront emulator)
and MOCKNV+NV (the real NV driver over the mock RM, the emulated H200's SM running the kernels' PTX). A representative
subset of the suite, compared with numpy and with the same program on the CPU device; every test runs on AMD, the
NV_SUBSET on NV (HCQ_TENSOR_NV_FULL=1: all but the AMD-only ones). Sizes are small: the emulators run ~100M
lane-ops/s. Tolerances are test_tensor.py's (float32 math: our polynomials, within a few ulp, on both GPUs).

More AMD targets take the TARGET_SUBSET in the normal run (HCQ_TENSOR_AMD_TARGETS=all or HCQ_TEST_ALL_BOARDS=1: every test):
`MOCKKFD+AMD/wave64` is the gfx1100 board with the renderer built for wave64 (the driver dispatches it as wave64); every
other emulated board of tests/amd_boards.py as `MOCKKFD+AMD::<arch>`: gfx1201 (wave32) and gfx942 (the wave64-only
CDNA3 target on the emulated MI300X)."""
import math
import os
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hcq.tensor import Tensor, runtime
from tests.amd_boards import ALL_BOARDS, ARCHS as AMD_BOARDS, board
from tests.test_tensor import ALL, EXACT_TOL, MATH_TOL, check, sample
from tests.test_tensor_random import run_program
from tests.tools import require_module

DEV = "MOCKKFD+AMD"   # the device under test (the gpu fixture sets it)
F32 = "float32"
NV_FULL = os.environ.get("HCQ_TENSOR_NV_FULL") == "1"
TARGETS_ALL = os.environ.get("HCQ_TENSOR_AMD_TARGETS") == "all" or ALL_BOARDS   # the all-boards sweep takes every test too
# on NV in the normal run (the SM emulator is slower per kernel than the AMD one; ptxas adds ~0.1 s per kernel)
NV_SUBSET = {"test_every_unary_op_f32", "test_every_binary_op_f32_with_broadcasting", "test_reductions", "test_matmul_and_softmax",
             "test_float64_arithmetic_works_and_math_says_why", "test_reduction_layouts", "test_fused_chain_is_one_kernel_pass",
             "test_casts", "test_devices_do_not_mix_and_move", "test_float_floordiv_mod_pow_at_the_edges_are_numpys"}
# on the other AMD targets in the normal run: what the wave size changes (workgroup sizes, the LDS trees and their
# barriers, partial waves at the ends of a grid) plus a sample of the rest
TARGET_SUBSET = {"test_wave_size_reaches_the_code_object", "test_reductions_straddling_32_and_64_lanes", "test_reduction_layouts",
                 "test_a_missing_tree_barrier_shows_under_interleaving", "test_matmul_and_softmax", "test_long_reduction_is_split",
                 "test_every_unary_op_f32", "test_casts", "test_random_programs_on_amd"}
# AMD-only: the planted barrier race needs the wavefront emulator's interleaving (HCQ_EMU_INTERLEAVE); the inline
# constants are a gfx11 true16 encoding question; wave sizes are AMD's
AMD_ONLY = {"test_a_missing_tree_barrier_shows_under_interleaving", "test_float16_with_inline_constants",
            "test_wave_size_reaches_the_code_object", "test_wave_size_is_the_archs"}
EXPECTED_WAVE = 32    # the wave size the AMD target under test must build for (the gpu fixture sets it)
# partition boards (gfx942:cpx: one XCC, no split) in the all-boards sweep only: the tensor target does not change there
OTHER_AMD_GPUS = ["MOCKKFD+AMD/wave64"] + [f"MOCKKFD+AMD::{a}" for a in sorted(set(AMD_BOARDS) - {"gfx1100"}) if ALL_BOARDS or ":" not in a]


def pytest_generate_tests(metafunc):
  """Every test on AMD (wave32 gfx1100); the TARGET_SUBSET on the other AMD targets (all with HCQ_TENSOR_AMD_TARGETS=all);
  on NV the NV_SUBSET (all but AMD_ONLY with HCQ_TENSOR_NV_FULL=1)."""
  name = metafunc.function.__name__
  on_nv = name not in AMD_ONLY and (NV_FULL or name in NV_SUBSET)
  on_others = TARGETS_ALL or name in TARGET_SUBSET
  gpus = ["MOCKKFD+AMD"] + (OTHER_AMD_GPUS if on_others else []) + (["MOCKNV+NV"] if on_nv else [])
  metafunc.parametrize("gpu", gpus, indirect=True, scope="module")


@pytest.fixture(scope="module", autouse=True)
def gpu(request):
  """The emulated GPU under test, as DEV for A() and the tests. `MOCKKFD+AMD/wave64` is the gfx1100 device with a wave64
  renderer (and its own kernel cache)."""
  global DEV, EXPECTED_WAVE
  require_module("llvmlite")
  from hcq.tensor import device as tensor_device
  from hcq.tensor.render_amd import AMDGCNRenderer
  DEV, _, variant = request.param.partition("/")
  wave64_only = "::" in DEV and board(DEV.partition("::")[2]).wave_front_size == 64   # gfx942 and its partitions
  EXPECTED_WAVE = 64 if variant == "wave64" or wave64_only else int(os.environ.get("HCQ_AMD_WAVE_SIZE") or 32)
  with pytest.MonkeyPatch.context() as mp:
    dev = tensor_device.get_device(DEV)
    if variant == "wave64":
      mp.setattr(dev, "renderer", AMDGCNRenderer(dev.renderer.arch, wave_size=64))
      mp.setattr(runtime, "_cache", {})   # the cache is per device name: the wave32 kernels are not these
    yield dev


def wave_size() -> int:
  """Lanes per wave (per warp on NV) of the device under test's kernels."""
  from hcq.tensor.device import get_device
  return get_device(DEV).renderer.wave_size


def target_name() -> str:
  """How refusals name the device under test's target."""
  return "NV" if DEV.endswith("NV") else "AMD"


@pytest.fixture
def rng(): return np.random.default_rng(11)


def A(x, dtype=None) -> Tensor: return Tensor(x, dtype=dtype, device=DEV)


def both(fn, *arrays, dtype=None) -> tuple[np.ndarray, np.ndarray]:
  """fn run on the GPU under test and on the CPU device, over the same inputs."""
  return fn(*(A(a, dtype) for a in arrays)).numpy(), fn(*(Tensor(a, dtype=dtype, device="CPU") for a in arrays)).numpy()


UNARY = {
  "neg": (lambda t: -t, np.negative, 0), "abs": (lambda t: t.abs(), np.abs, 0), "relu": (lambda t: t.relu(), lambda x: np.maximum(x, 0), 0),
  "square": (lambda t: t.square(), np.square, EXACT_TOL[F32]), "floor": (lambda t: t.floor(), np.floor, 0),
  "trunc": (lambda t: t.trunc(), np.trunc, 0), "reciprocal": (lambda t: t.reciprocal(), np.reciprocal, EXACT_TOL[F32]),
  "exp": (lambda t: t.exp(), np.exp, MATH_TOL[F32]), "exp2": (lambda t: t.exp2(), np.exp2, MATH_TOL[F32]),
  "log": (lambda t: t.abs().log(), lambda x: np.log(np.abs(x)), MATH_TOL[F32]),
  "log2": (lambda t: t.abs().log2(), lambda x: np.log2(np.abs(x)), MATH_TOL[F32]),
  "sqrt": (lambda t: t.abs().sqrt(), lambda x: np.sqrt(np.abs(x)), EXACT_TOL[F32]),
  "rsqrt": (lambda t: t.abs().rsqrt(), lambda x: 1 / np.sqrt(np.abs(x)), EXACT_TOL[F32] * 2),
  "sin": (lambda t: t.sin(), np.sin, MATH_TOL[F32]), "cos": (lambda t: t.cos(), np.cos, MATH_TOL[F32]),
  "sigmoid": (lambda t: t.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), MATH_TOL[F32]), "tanh": (lambda t: t.tanh(), np.tanh, MATH_TOL[F32]),
}


def test_every_unary_op_f32(rng):
  x = sample((5, 37), F32, rng, -6, 6)
  x[0, :4] = [0.0, -0.0, 1e-3, 30.0]
  for name, (ours, ref, tol) in UNARY.items():
    got, cpu = both(ours, x)
    with np.errstate(all="ignore"): check(got, ref(x), tol)
    check(got, cpu, tol)  # the same kernels' CPU rendering


BINARY = {
  "add": (lambda a, b: a + b, np.add, EXACT_TOL[F32]), "sub": (lambda a, b: a - b, np.subtract, EXACT_TOL[F32]),
  "mul": (lambda a, b: a * b, np.multiply, EXACT_TOL[F32]), "div": (lambda a, b: a / b, np.divide, EXACT_TOL[F32]),
  "floordiv": (lambda a, b: a // b, np.floor_divide, EXACT_TOL[F32]), "mod": (lambda a, b: a % b, np.remainder, 1e-5),
  "pow": (lambda a, b: a.abs() ** b, lambda a, b: np.abs(a) ** b, 2e-5), "maximum": (lambda a, b: a.maximum(b), np.maximum, 0),
  "minimum": (lambda a, b: a.minimum(b), np.minimum, 0), "lt": (lambda a, b: a < b, np.less, 0), "le": (lambda a, b: a <= b, np.less_equal, 0),
  "eq": (lambda a, b: a == b, np.equal, 0), "ne": (lambda a, b: a != b, np.not_equal, 0),
  "where": (lambda a, b: (a > b).where(a, b * 2), lambda a, b: np.where(a > b, a, b * 2), 0),
  "clip": (lambda a, b: a.clip(-1, b), lambda a, b: np.clip(a, -1, b), 0),
}


def test_every_binary_op_f32_with_broadcasting(rng):
  x, y = sample((4, 1, 24), F32, rng), sample((3, 1), F32, rng, 0.5, 3)
  y[0, 0] = x[0, 0, 0]  # an equal pair for ==, <=
  for name, (ours, ref, tol) in BINARY.items():
    got, cpu = both(ours, x, y)
    with np.errstate(all="ignore"): check(got, ref(x, y), tol)
    check(got, cpu, tol)


def test_pow_special_cases():
  x = np.array([-2.0, -2.0, -2.0, 0.0, 0.0, -0.0, -0.0, 1.0, np.nan, 2.0, -8.0, np.inf, -np.inf, -np.inf, 3.0], np.float32)
  y = np.array([3.0, 2.0, 0.5, -1.0, 2.0, -1.0, 0.5, np.nan, 0.0, -3.0, 1 / 3, 2.0, 3.0, 0.5, 7.5], np.float32)
  with np.errstate(all="ignore"): check((A(x) ** A(y)).numpy(), x ** y, 2e-6)


def test_int64_to_float_casts_at_the_edges():
  """int64 -> float32/float16 on the emulated GPU (LLVM's lowering counts the sign bits with v_cls_i32): 2^62 + 1 gave
  1.0 and INT64_MAX gave -2.0 while v_cls_i32 was one short."""
  from tests.test_emu_edges import edge_values
  u = np.array(edge_values(64) + [2**62 + 1, 2**63 - 1], np.uint64)
  for arr in (u.view(np.int64), u):
    for dst in ("float32", "float16", "float64"):
      with np.errstate(over="ignore"): want = arr.astype(dst)
      got = A(arr).cast(dst).numpy()
      assert (got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")).all(), (arr.dtype, dst)


def sincos_inputs(n: int, rng) -> np.ndarray:
  """float32 inputs for sin/cos past the polynomial's 8192: a sweep to 1e6, log-spaced magnitudes up to 3.4e38, the
  float32s nearest to (and next after) multiples of pi/2 (the reduction's hardest cases), and the range's ends."""
  k = np.round(10.0 ** rng.uniform(3.8, 37.5, n))
  near = (k * (np.pi / 2)).astype(np.float32)
  x = np.concatenate([np.linspace(-1e6, 1e6, n), rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(3.9, 38.5, n), near,
                      np.nextafter(near, np.float32(np.inf)), [8192.0005, 16384.0, 2.0**24 + 2, 1e38, 3.4028235e38]])
  with np.errstate(over="ignore"): x = x.astype(np.float32)
  return x[np.isfinite(x)]


def test_sin_cos_past_8192_within_2_ulp():
  """float32 sin/cos for |x| > 8192 on the GPU (no libm there): the reduction mod 2pi in float64 from a table of
  2^e mod 2pi, then the polynomials; within 2 ulp of the exact value everywhere (the hardware's v_sin_f32 of
  x / 2pi was off by up to 1e12 ulp past 8192). HCQ_TENSOR_SINCOS_SWEEP=N for N points per kind (default 4000)."""
  x = sincos_inputs(int(os.environ.get("HCQ_TENSOR_SINCOS_SWEEP", "4000")), np.random.default_rng(8192))
  for name, nf in [("sin", np.sin), ("cos", np.cos)]:
    got = getattr(A(x), name)().numpy().astype(np.float64)
    exact = nf(x.astype(np.float64))
    ulps = np.abs(got - exact) / np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 2, f"{name}: {ulps.max():.1f} ulp at x = {x[np.argmax(ulps)]!r}"
  special = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, -9000.0], np.float32)
  with np.errstate(invalid="ignore"):
    check(A(special).sin().numpy(), np.sin(special), MATH_TOL[F32])
    check(A(special).cos().numpy(), np.cos(special), MATH_TOL[F32])
  assert np.signbit(A(special).sin().numpy()[3])   # sin(-0.0) is -0.0


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_float_floordiv_mod_pow_at_the_edges_are_numpys(dtype):
  """As on the CPU: // and % exactly numpy's; ** numpy's special values, finite results within pow's 2e-5."""
  from tests.test_tensor import FLOAT_EDGES, float_edge_pairs, mismatches
  x, y = float_edge_pairs(dtype)
  with np.errstate(all="ignore"):
    for name, f, rtol in [("//", lambda a, b: a // b, 0.0), ("%", lambda a, b: a % b, 0.0), ("**", lambda a, b: a ** b, 2e-5 if dtype == F32 else 1e-3)]:
      bad = mismatches(f(A(x, dtype), A(y, dtype)).numpy(), f(x, y), x, y, rtol)
      assert not bad, f"{dtype} {name}: (x, y, got, numpy) {bad[:8]}"
    col = x[::len(FLOAT_EDGES)]
    bad = mismatches((A(col, dtype) ** 0.5).numpy(), col ** 0.5, col, col * 0 + 0.5)
    assert not bad, bad


@pytest.mark.parametrize("src,dst", [("float32", "float16"), ("float16", "float32"), ("float32", "int8"), ("int8", "float32"),
                                     ("float32", "int64"), ("int64", "float32"), ("float32", "bfloat16"), ("bfloat16", "float32"),
                                     ("int64", "int8"), ("uint8", "int32"), ("float32", "bool"), ("bool", "float16"),
                                     ("float16", "int16"), ("float64", "float32")])
def test_casts(src, dst, rng):
  x = sample((3, 21), src, rng, -150, 150)
  got, cpu = both(lambda t: t.cast(dst), x, dtype=src)
  check(got, cpu)
  ref = Tensor(x, dtype=src, device="CPU").numpy()
  with np.errstate(invalid="ignore"): check(got, ref.astype(dst) if dst != "bfloat16" else cpu)


@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
def test_float_to_int_casts_out_of_range_are_numpys(src):
  from tests.test_tensor import INTS, cast_edges
  x = cast_edges(src)
  for dst in INTS:
    with np.errstate(invalid="ignore"): want = x.astype(dst)
    check(A(x, src).cast(dst).numpy(), want)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16", "float16"])
def test_other_dtypes_arithmetic(dtype, rng):
  x, y = sample((2, 19), dtype, rng, 1, 9, positive=True), sample((2, 19), dtype, rng, 1, 9, positive=True)
  tol = EXACT_TOL.get(dtype, 0)
  for fn in (lambda a, b: a * b - a, lambda a, b: a // b + a % b, lambda a, b: (a < b).where(a, b), lambda a, b: a.maximum(b),
             lambda a, b: (a + b).sum(axis=1)):
    got, cpu = both(fn, x, y, dtype=dtype)
    check(got, cpu, tol)
  if dtype != "float16":
    check((A(x) & A(y) | (A(x) ^ 3)).numpy(), x & y | (x ^ 3))
    check((A(x) * A(y) - A(x)).numpy(), x * y - x)


@pytest.mark.parametrize("axis,keepdim", [(None, False), (0, True), (1, False), ((0, 2), True), (-1, True)])
def test_reductions(axis, keepdim, rng):
  x = sample((6, 7, 33), F32, rng)
  t = A(x)
  for name in ("max", "min"): check(getattr(t, name)(axis=axis, keepdim=keepdim).numpy(), getattr(x, name)(axis=axis, keepdims=keepdim))
  for name in ("sum", "mean"):  # float32 sums in another order than numpy's: within rounding of the float64 result
    check(getattr(t, name)(axis=axis, keepdim=keepdim).numpy(), getattr(x.astype(np.float64), name)(axis=axis, keepdims=keepdim), 1e-5)
  check(t.var(axis=axis, keepdim=keepdim).numpy(), x.var(axis=axis, keepdims=keepdim), 1e-5)
  if axis is None or isinstance(axis, int):
    check(t.argmax(axis=axis, keepdim=keepdim).numpy(), x.argmax(axis=axis, keepdims=keepdim))
    check(t.argmin(axis=axis).numpy(), x.argmin(axis=axis))
  i = sample((6, 7, 33), "int32", rng)
  check(A(i).sum(axis=axis, keepdim=keepdim).numpy(), i.sum(axis=axis, keepdims=keepdim))
  check((A(x) > 0).any(axis=axis).numpy(), (x > 0).any(axis=axis))


def test_long_reduction_is_split(rng):
  x = sample(1 << 16, F32, rng)
  before = runtime.stats["kernels_run"]
  check(A(x).sum().numpy(), x.astype(np.float64).sum(), 1e-5)
  assert runtime.stats["kernels_run"] - before == 2  # partial sums, then their sum


def test_movement(rng):
  x = sample((4, 6, 5), F32, rng)
  t = A(x)
  check(t.reshape(6, 20).numpy(), x.reshape(6, 20))
  check(t.permute(2, 0, 1).numpy(), x.transpose(2, 0, 1))
  check(t.pad(((1, 0), (0, 2), (3, 1))).numpy(), np.pad(x, ((1, 0), (0, 2), (3, 1))))
  check(t.flip(1).numpy(), np.flip(x, 1))
  check(t[1:3, ::-2, 1::2].numpy(), x[1:3, ::-2, 1::2])
  check(t[:, None, 2].expand(4, 3, 5).numpy(), np.broadcast_to(x[:, None, 2], (4, 3, 5)))
  check(Tensor.cat(t, t[:2] * 2, axis=0).numpy(), np.concatenate([x, x[:2] * 2]))
  check(Tensor.stack([t[0], t[1]], axis=1).numpy(), np.stack([x[0], x[1]], axis=1))
  check((t.T + 1).reshape(-1)[::7].numpy(), (x.T + 1).reshape(-1)[::7])
  check(t[[3, 0], :, [1, -1]].numpy(), x[[3, 0], :, [1, -1]])  # advanced indexing: a gather kernel
  check(t[x > 1].numpy(), x[x > 1])
  t[1:3, [0, 5]] = -7.0
  y = x.copy()
  y[1:3, [0, 5]] = -7.0
  check(t.numpy(), y)


def test_matmul_and_softmax(rng):
  a, b = sample((17, 70), F32, rng), sample((70, 64), F32, rng)
  check((A(a) @ A(b)).numpy(), a @ b, 1e-5)
  c, d = sample((2, 5, 9), F32, rng), sample((9, 3), F32, rng)
  check((A(c) @ A(d)).numpy(), c @ d, 1e-5)
  s = sample((9, 130), F32, rng, -20, 20)
  e = np.exp(s - s.max(-1, keepdims=True))
  check(A(s).softmax(-1).numpy(), e / e.sum(-1, keepdims=True), 2e-6)
  check(A(s).log_softmax(0).numpy(), s - s.max(0) - np.log(np.exp(s - s.max(0)).sum(0)), 2e-5)


def test_fused_chain_is_one_kernel_pass(rng):
  a, b, c = (sample(3000, F32, rng) for _ in range(3))
  before = runtime.stats["kernels_run"]
  got = (A(a) * A(b) + A(c)).relu().sum().item()
  assert runtime.stats["kernels_run"] - before == 1
  np.testing.assert_allclose(got, np.maximum(a * b + c, 0).astype(np.float64).sum(), rtol=1e-5)


def test_float64_arithmetic_works_and_math_says_why(rng):
  x = sample((3, 8), "float64", rng, 0.5, 4)
  check((A(x) * 3 / (A(x) + 1)).sqrt().numpy(), np.sqrt(x * 3 / (x + 1)), 1e-12)
  t = A(x).exp() + 1
  for _ in range(2):  # the failed realize leaves the graph lazy: it fails again rather than reading an unwritten buffer
    with pytest.raises(NotImplementedError, match=f"float64 exp is not supported on the {target_name()} target"): t.numpy()
  with pytest.raises(NotImplementedError, match="float64 pow"): (A(x) ** 2.5).numpy()


def test_devices_do_not_mix_and_move(rng):
  x = sample(9, F32, rng)
  with pytest.raises(ValueError, match="different devices"): Tensor(x, device="CPU") + A(x)
  t = A(x).to("CPU") + Tensor(x, device="CPU")
  assert t.device == "CPU"
  check(t.numpy(), x + x)
  bf = Tensor(x, dtype="bfloat16", device="CPU").to(DEV)
  assert bf.device == DEV and bf.dtype.name == "bfloat16"


@settings(max_examples=int(os.environ.get("HCQ_TENSOR_AMD_EXAMPLES", "12")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_programs_on_amd(data):
  run_program(data, "float32", device=DEV)


def test_reduction_layouts(rng):
  """Long reductions into few outputs share each output's loop between a workgroup's lanes (a shuffle tree); short
  ones, or many outputs, keep one workitem per output. Both give numpy's results."""
  from hcq.tensor.device import get_device
  from hcq.tensor.loops import plan
  from hcq.tensor.render_gpu import group_size
  from hcq.tensor.schedule import Scheduler
  renderer = get_device(DEV).renderer
  x = sample((5, 300), F32, rng)
  cases = [(lambda t: t.max(axis=1), 64), (lambda t: t.softmax(1), 64), (lambda t: t[:, :40].sum(axis=1), 32),
           (lambda t: t.sum(axis=0), 0), (lambda t: t[:, :20].min(axis=1), 0), (lambda t: (t > 0).all(axis=1), 64),
           (lambda t: t.reshape(1, 1500).sum(axis=1), 128)]
  for fn, lanes in cases:
    sched = Scheduler(get_device(DEV))
    sched.realize(fn(A(x)).node)
    lk = renderer.adapt(plan([i for i in sched.items if i.kernel.reduce_axes][-1].kernel, "k"))
    want = max(lanes, wave_size()) if lanes else 0   # whole waves
    assert group_size(lk, wave_size()) == want
    assert (renderer.writer.barrier_intrinsic in renderer.render(lk)) == (want > 32)   # 32 lanes: shuffles only
    np.testing.assert_allclose(fn(A(x)).numpy(), fn(Tensor(x, device="CPU")).numpy(), rtol=2e-6, atol=1e-6)


def test_float16_with_inline_constants():
  """A true16 f16 VALU op's float inline constant (1.0, 0.5, ...) is the f16 value."""
  x = np.array([1, 0, 2, -1.5], np.float16)
  check((A(x) * 0.5 + 1).numpy(), x * np.float16(0.5) + np.float16(1))


SWEEP_UNARY = {"neg": lambda t: -t, "abs": lambda t: t.abs(), "exp": lambda t: t.exp(), "log": lambda t: t.abs().log(),
               "sqrt": lambda t: t.abs().sqrt(), "sin": lambda t: t.sin(), "exp2": lambda t: t.exp2(), "recip": lambda t: t.reciprocal(),
               "floor": lambda t: t.floor(), "invert": lambda t: ~t, "sigmoid": lambda t: t.sigmoid(), "tanh": lambda t: t.tanh()}
SWEEP_BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
                "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "pow": lambda a, b: a ** b, "max": lambda a, b: a.maximum(b),
                "lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "and": lambda a, b: a & b, "where": lambda a, b: (a < b).where(a, b)}
SWEEP_CASTS = ["bool", "int8", "uint16", "int64", "uint64", "float16", "bfloat16", "float32", "float64"]
SWEEP_REDUCE = {"sum": lambda t: t.sum(axis=1), "max": lambda t: t.max(axis=1), "min": lambda t: t.min(), "argmax": lambda t: t.argmax(axis=1)}


# CI sweeps the dtypes the other tests here do not (float32, int32 have their own); HCQ_TENSOR_AMD_SWEEP=all sweeps all 13
SWEEP_DTYPES = ALL if os.environ.get("HCQ_TENSOR_AMD_SWEEP") == "all" else \
  ["bool", "int8", "uint16", "int64", "uint64", "float16", "bfloat16", "float64"]


@pytest.mark.parametrize("dtype", SWEEP_DTYPES)
def test_every_dtype_op_and_cast_matches_the_cpu(dtype, rng):
  """Each op, reduction and cast of `dtype` gives the CPU device's result, or (float64 math, which needs a libm) raises
  NotImplementedError on AMD exactly where the CPU gives a float64 transcendental."""
  from hcq.tensor import dtypes
  x, y = sample((3, 40), dtype, rng, 1, 4, positive=True), sample((3, 40), dtype, rng, 1, 4, positive=True)
  cases = [(n, f, (x,)) for n, f in SWEEP_UNARY.items()] + [(n, f, (x, y)) for n, f in SWEEP_BINARY.items()]
  cases += [(n, f, (x,)) for n, f in SWEEP_REDUCE.items()]
  cases += [(f"cast->{to}", lambda t, to=to: t.cast(to), (x,)) for to in SWEEP_CASTS]
  wrong, refused = set(), set()
  for name, fn, args in cases:
    try:
      with np.errstate(all="ignore"):
        want_t = fn(*(Tensor(a, dtype=dtype, device="CPU") for a in args))
        want = want_t.numpy()
    except (TypeError, ValueError, OverflowError):
      continue  # numpy refuses this op for this dtype, and so do we (test_tensor.py)
    try:
      got = fn(*(Tensor(a, dtype=dtype, device=DEV) for a in args)).numpy()
    except NotImplementedError as e:
      assert "float64" in str(e) and f"{target_name()} target" in str(e), e
      refused.add(name)
      continue
    assert got.dtype == want.dtype and got.shape == want.shape, name
    tol = 2e-3 if want_t.dtype in (dtypes.float16, dtypes.bfloat16) else 1e-5 if want.dtype.kind == "f" else 0
    if not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, equal_nan=True): wrong.add(name)
  assert not wrong, wrong
  math64 = {"exp", "log", "sin", "exp2", "sigmoid", "tanh"}
  expect_refused = math64 if dtype in ("int32", "int64", "uint32", "uint64", "float64") else set()  # their math is float64
  if dtype not in ("float16", "bfloat16", "float32"): expect_refused = expect_refused | {"pow"}  # integer ** goes through float64
  assert refused == expect_refused, refused


def test_a_missing_tree_barrier_shows_under_interleaving(monkeypatch, rng):
  """A planted bug: the lane tree without its one barrier (each wave's leader puts the wave's part in LDS, then every
  lane reads all the waves' parts) reads slots before they are written. With the waves interleaved
  (HCQ_EMU_INTERLEAVE, as tests run) the sums are wrong; with the barrier they are right; in lockstep the bug would
  not show."""
  from hcq.tensor.render_amd import _AMDKernelWriter
  x = sample((8, 1000), F32, rng)   # 128 lanes a row: four wave32s or two wave64s
  x = np.abs(x) + 1
  def row_sums(omit, seed: str) -> np.ndarray:
    monkeypatch.setattr(runtime, "_cache", {})
    monkeypatch.setattr(_AMDKernelWriter, "omit_barrier", omit)
    monkeypatch.setenv("HCQ_EMU_INTERLEAVE", seed)
    return A(x).sum(axis=1).numpy()
  np.testing.assert_allclose(row_sums(None, "1"), x.sum(axis=1), rtol=2e-6)
  # each seed is one interleaving; the race need not show in every one
  assert any(not np.allclose(row_sums(0, str(seed)), x.sum(axis=1), rtol=1e-3) for seed in range(1, 5)), "the race did not show"
  np.testing.assert_allclose(row_sums(0, "off"), x.sum(axis=1), rtol=2e-6)


def test_wave_size_reaches_the_code_object():
  """The renderer's wave size is the code object's (.wavefront_size and the descriptor's ENABLE_WAVEFRONT_SIZE32 bit,
  which the driver turns into the dispatch's wave mode), and every workgroup it launches is whole waves."""
  from hcq.asm.codeobject import read_code_object
  from hcq.autogen import amdgpu_kd as kd
  from hcq.tensor.device import get_device
  from hcq.tensor.loops import plan
  from hcq.tensor.schedule import Scheduler
  dev = get_device(DEV)
  wave = wave_size()
  assert wave == EXPECTED_WAVE
  x = sample((3, 40), F32, np.random.default_rng(3))
  for fn in (lambda t: t + 1, lambda t: t.sum(axis=1), lambda t: t[:, :32].max(axis=1)):
    sched = Scheduler(dev)
    sched.realize(fn(A(x)).node)
    lk = dev.renderer.adapt(plan(sched.items[-1].kernel, "k"))
    k = read_code_object(dev.compile(dev.renderer.render(lk))).kernels["k"]
    assert k.wavefront_size == wave
    assert bool(k.descriptor.kernel_code_properties & kd.KERNEL_CODE_PROPERTY_ENABLE_WAVEFRONT_SIZE32) == (wave == 32)
    _, local, _ = dev.renderer.launch(lk)
    assert local[0] % wave == 0, local
  assert runtime.get_kernel(sched.items[-1].kernel, dev).program.prog.wave32 == (wave == 32)   # the driver's dispatch mode


@pytest.mark.parametrize("n", [1, 32, 33, 64, 65, 129] + ([31, 63, 97] if TARGETS_ALL else []))
def test_reductions_straddling_32_and_64_lanes(n, rng):
  """Exact results at sizes around one and two waves of either size: grouped reductions (few outputs, a reduce loop of
  n shared by 32..128 lanes), one workitem per output over n outputs, and elementwise grids of n workitems (the last
  wave partly idle). Integers and integer-valued floats, so any order of summation is exact."""
  i = rng.integers(-50, 50, size=(3, n)).astype(np.int32)
  f = i.astype(np.float32)
  for axis in (1, None):
    check(A(i).sum(axis=axis).numpy(), i.sum(axis=axis))
    check(A(f).sum(axis=axis).numpy(), f.sum(axis=axis))
    check(A(f).max(axis=axis).numpy(), f.max(axis=axis))
    check(A(f).argmax(axis=axis).numpy(), f.argmax(axis=axis))
    check((A(i) > 0).any(axis=axis).numpy(), (i > 0).any(axis=axis))
  check(A(i).T.sum(axis=1).numpy(), i.T.sum(axis=1))   # n outputs, one workitem each
  check((A(f) * 2 - 1).numpy(), f * 2 - 1)


def test_wave_size_is_the_archs(monkeypatch):
  """gfx9 runs wave64 only, gfx10+ wave32 by default and wave64 on request (argument, then HCQ_AMD_WAVE_SIZE); anything
  else is refused with the sizes the arch runs (LLVM would build gfx942 wave32 into a code object with no kernel)."""
  from hcq.tensor.render_amd import WAVE_SIZE_ENV, AMDGCNRenderer, wave_sizes
  monkeypatch.delenv(WAVE_SIZE_ENV, raising=False)
  assert [wave_sizes(a) for a in ("gfx942", "gfx90a", "gfx1100", "gfx1201")] == [(64,), (64,), (32, 64), (32, 64)]
  assert [AMDGCNRenderer(a).wave_size for a in ("gfx942", "gfx1100", "gfx1201")] == [64, 32, 32]
  assert AMDGCNRenderer("gfx1100", wave_size=64).features == "+wavefrontsize64,-wavefrontsize32"
  with pytest.raises(ValueError, match="wave_size=32: gfx942 runs wave size 64$"): AMDGCNRenderer("gfx942", wave_size=32)
  with pytest.raises(ValueError, match="wave_size=16: gfx1100 runs wave size 32 or 64"): AMDGCNRenderer("gfx1100", wave_size=16)
  with pytest.raises(ValueError, match="'sm_90' is not an AMD gfx arch"): AMDGCNRenderer("sm_90")
  monkeypatch.setenv(WAVE_SIZE_ENV, "64")
  assert AMDGCNRenderer("gfx1100").wave_size == 64 and AMDGCNRenderer("gfx1100", wave_size=32).wave_size == 32
  for bad in ("32", "wave64"):
    monkeypatch.setenv(WAVE_SIZE_ENV, bad)
    with pytest.raises(ValueError, match=f"HCQ_AMD_WAVE_SIZE={bad}: gfx942 runs wave size 64"): AMDGCNRenderer("gfx942")
