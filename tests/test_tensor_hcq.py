"""hcq.tensor on the HCQ core's CPU device ("HCQ:CPU"): the same kernels, launched through hcq.Device("CPU")'s
compute queue and timeline instead of straight from the JIT, give the same results as numpy (a subset of the
suite, sized for CI time; tolerances as in test_tensor.py)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hcq.tensor import Tensor
from tests.test_tensor_random import run_program

DEV = "HCQ:CPU"


@pytest.fixture(scope="module", autouse=True)
def core_device():
  try:
    from hcq.tensor.device import get_device
    return get_device(DEV)
  except Exception as e:  # the core is another layer, built alongside
    pytest.skip(f"hcq.Device('CPU') is not available: {e}")


@pytest.fixture
def rng(): return np.random.default_rng(7)


def test_elementwise_and_reduce(rng):
  a, b, c = (rng.standard_normal(1 << 16).astype(np.float32) for _ in range(3))
  ta, tb, tc = (Tensor(x, device=DEV) for x in (a, b, c))
  np.testing.assert_allclose((ta * tb + tc).relu().sum().item(), np.maximum(a * b + c, 0).astype(np.float64).sum(), rtol=1e-5)
  np.testing.assert_allclose((ta.exp() - tb.abs().sqrt()).numpy(), np.exp(a) - np.sqrt(np.abs(b)), rtol=5e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16", "bfloat16", "bool"])
def test_dtypes_roundtrip_and_cast(dtype, rng):
  x = (rng.standard_normal((8, 48)) * 4).astype(np.float32)
  t = Tensor(x, dtype=dtype, device=DEV)
  want = x.astype(dtype) if dtype != "bfloat16" else Tensor(x, dtype="bfloat16").numpy()
  np.testing.assert_array_equal(t.numpy(), want)
  np.testing.assert_array_equal(t.cast("float64").numpy(), np.asarray(want).astype(np.float64))


def test_softmax_matmul_movement(rng):
  x = rng.standard_normal((96, 256)).astype(np.float32)
  t = Tensor(x, device=DEV)
  e = np.exp(x - x.max(-1, keepdims=True))
  np.testing.assert_allclose(t.softmax(-1).numpy(), e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)
  np.testing.assert_allclose((t @ t.T).numpy(), x @ x.T, rtol=1e-4, atol=1e-3)
  np.testing.assert_array_equal(t.T[::-3, 2:9].pad(((1, 0), (0, 2))).numpy(), np.pad(x.T[::-3, 2:9], ((1, 0), (0, 2))))
  np.testing.assert_array_equal(t.argmax(axis=1).numpy(), x.argmax(axis=1))
  np.testing.assert_array_equal(Tensor.cat(t[:10], t[20:25], axis=0).numpy(), np.concatenate([x[:10], x[20:25]]))


def test_devices_do_not_mix(rng):
  x = rng.standard_normal(4).astype(np.float32)
  with pytest.raises(ValueError, match="different devices"): Tensor(x) + Tensor(x, device=DEV)
  np.testing.assert_array_equal((Tensor(x).to(DEV) + Tensor(x, device=DEV)).numpy(), x + x)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_programs_through_queues(data):
  run_program(data, "float32", device=DEV)
