"""The tiled GPU kernels (hcq/tensor/kernels_gpu.py, render_gpu.py) on both emulated GPUs, MOCKKFD+AMD and MOCKNV+NV,
against numpy: the shared-memory matmul on shapes that straddle its tiles (primes, 1, tile +- 1, batched, transposed,
fused producers), the lane trees of long rows (register shuffles within 32 lanes), elementwise kernels with 16-byte loads, and the
matmul's barriers shown to matter under the AMD emulator's interleaved waves (HCQ_EMU_INTERLEAVE, set for every test
by conftest.py). Shapes are small (the emulators run ~100M lane-ops/s); HCQ_TENSOR_GPU_LARGE=1 adds large ones."""
import os
import numpy as np
import pytest
from hcq.tensor import Tensor, runtime
from hcq.tensor import kernels_gpu, render_gpu
from tests.tools import require_module

LARGE = os.environ.get("HCQ_TENSOR_GPU_LARGE") == "1"


@pytest.fixture(params=["MOCKKFD+AMD", "MOCKNV+NV"], scope="module")
def dev(request):
  require_module("llvmlite")
  return request.param


def plans(fn, *arrays, dev: str):
  """The GPU plans (as the renderer adapts them) of the kernels fn(*tensors) schedules."""
  from hcq.tensor.device import get_device
  from hcq.tensor.loops import plan
  from hcq.tensor.schedule import Scheduler
  device = get_device(dev)
  sched = Scheduler(device)
  sched.realize(fn(*(Tensor(a, device=dev) for a in arrays)).node)
  return [device.renderer.adapt(plan(item.kernel, "k")) for item in sched.items], device.renderer


def operands(rng, m, k, n, batch_a=(), batch_b=(), dtype=np.float32):
  return rng.standard_normal(batch_a + (m, k)).astype(dtype), rng.standard_normal(batch_b + (k, n)).astype(dtype)


# (m, k, n): primes, 1, a whole tile, tile +- 1 on each axis; k = 1, m or n = 1 and m x n < 256 take the plain layouts
SHAPES = [(37, 29, 11), (64, 16, 64), (65, 17, 63), (67, 3, 5), (2, 5, 67), (5, 1, 3), (1, 7, 5), (31, 64, 1)]


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_shapes_against_numpy(dev, m, k, n):
  a, b = operands(np.random.default_rng(m * 100 + n), m, k, n)
  tiled = [kernels_gpu.match_matmul(lk) for lk in plans(lambda x, y: x @ y, a, b, dev=dev)[0]]
  assert any(tiled) == (m > 1 and n > 1 and k > 1 and m * n >= kernels_gpu.MIN_OUTPUTS), tiled
  np.testing.assert_allclose((Tensor(a, device=dev) @ Tensor(b, device=dev)).numpy(), a @ b, rtol=2e-5, atol=2e-5)


def test_matmul_views_batches_and_dtypes(dev):
  """Transposed and broadcast operands, batches, a fused producer and a pad; float16 inputs, int32 and uint8 (exact, wrapping
  as numpy does) and float64."""
  rng = np.random.default_rng(3)
  a, b = operands(rng, 17, 13, 19)
  at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)
  A = lambda x: Tensor(x, device=dev)
  cases = [
    ("a.T @ b.T", lambda: A(at).T @ A(bt).T, a @ b),
    ("batched, broadcast", lambda: A(a[None].repeat(3, 0)) @ A(b), a[None].repeat(3, 0) @ b),
    ("batch of both", lambda: A(np.stack([a, 2 * a])) @ A(np.stack([b, -b])), np.stack([a @ b, -2 * (a @ b)])),
    ("fused producer", lambda: (A(a) * 2 + 1).relu() @ A(b), np.maximum(a * 2 + 1, 0) @ b),
    ("padded operand", lambda: A(a).pad(((0, 0), (2, 3))) @ A(np.pad(b, ((2, 3), (0, 0)), constant_values=1)), a @ b + 0),
    ("float16 inputs", lambda: A(a.astype(np.float16)) @ A(b.astype(np.float16)),
     (a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32)).astype(np.float16)),
  ]
  for name, fn, want in cases:
    got = fn().numpy()
    tol = 2e-2 if got.dtype == np.float16 else 2e-5
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=tol, atol=tol, err_msg=name)
  ai, bi = rng.integers(-50, 50, (9, 31)).astype(np.int32), rng.integers(-50, 50, (31, 37)).astype(np.int32)
  np.testing.assert_array_equal((A(ai) @ A(bi)).numpy(), ai @ bi)
  np.testing.assert_array_equal((A(ai.astype(np.uint8)) @ A(bi.astype(np.uint8))).numpy(), ai.astype(np.uint8) @ bi.astype(np.uint8))
  np.testing.assert_allclose((A(a.astype(np.float64)) @ A(b.astype(np.float64))).numpy(), a.astype(np.float64) @ b, rtol=1e-12)


def test_large_register_tiles(dev, monkeypatch):
  """The 128 x 128 block with 8 x 8 register tiles (chosen from 512 up) on a small shape, straddling its edges."""
  monkeypatch.setattr(kernels_gpu, "LARGE_FROM", 1)
  monkeypatch.setattr(runtime, "_cache", {})
  a, b = operands(np.random.default_rng(5), 129, 5, 130)
  (lk,), _ = plans(lambda x, y: x @ y, a, b, dev=dev)
  assert kernels_gpu.match_matmul(lk).tiles == kernels_gpu.LARGE_TILES
  np.testing.assert_allclose((Tensor(a, device=dev) @ Tensor(b, device=dev)).numpy(), a @ b, rtol=2e-5, atol=2e-5)


@pytest.mark.skipif(not LARGE, reason="large emulated matmuls: HCQ_TENSOR_GPU_LARGE=1")
@pytest.mark.parametrize("m,k,n", [(257, 129, 255), (513, 64, 520)])
def test_large_matmuls(dev, m, k, n):
  a, b = operands(np.random.default_rng(7), m, k, n)
  np.testing.assert_allclose((Tensor(a, device=dev) @ Tensor(b, device=dev)).numpy(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("barrier", [0, 1])
def test_a_missing_matmul_barrier_shows_under_interleaving(barrier, monkeypatch):
  """A planted bug on AMD (the wavefront emulator interleaves a workgroup's waves): barrier 0 (slices copied before any
  wave reads them) or barrier 1 (read before the next k step overwrites them) left out gives wrong results in some
  interleaving; with both the results are right in the same interleavings."""
  require_module("llvmlite")
  from hcq.tensor.render_amd import _AMDKernelWriter
  a, b = operands(np.random.default_rng(9), 64, 32, 64)   # one block, two k steps
  def product(omit, seed: str) -> np.ndarray:
    monkeypatch.setattr(runtime, "_cache", {})
    monkeypatch.setattr(_AMDKernelWriter, "omit_barrier", omit)
    monkeypatch.setenv("HCQ_EMU_INTERLEAVE", seed)
    return (Tensor(a, device="MOCKKFD+AMD") @ Tensor(b, device="MOCKKFD+AMD")).numpy()
  seeds = [str(s) for s in range(1, 4)]
  assert all(np.allclose(product(None, s), a @ b, rtol=2e-5, atol=2e-5) for s in seeds)
  assert any(not np.allclose(product(barrier, s), a @ b, rtol=1e-3, atol=1e-3) for s in seeds), "the race did not show"


def test_long_rows_take_the_lane_tree_however_many_outputs(dev, monkeypatch):
  """Rows of GROUP_LONG_REDUCE+ elements share each row between a workgroup's lanes even with many outputs (softmax
  over 4096 rows of 4096); shorter rows into many outputs keep a workitem per row. Checked on a small shape by lowering
  the output bound; every dtype the shuffles carry (by 32-bit words) against numpy."""
  monkeypatch.setattr(render_gpu, "GROUP_MAX_OUTPUTS", 8)
  monkeypatch.setattr(runtime, "_cache", {})
  x = np.random.default_rng(1).standard_normal((12, 300)).astype(np.float32)
  (lk,), renderer = plans(lambda t: t.sum(1), x, dev=dev)
  assert render_gpu.group_size(lk) == 64   # 300 elements: 64 lanes of at least LANE_ELEMENTS each, two runs of 32
  (lk,), _ = plans(lambda t: t[:, :100].sum(1), x, dev=dev)
  assert render_gpu.group_size(lk) == 0
  shuffle = "llvm.nvvm.shfl.sync.bfly.i32" if dev.endswith("NV") else "llvm.amdgcn.ds.bpermute"
  assert shuffle in renderer.render(plans(lambda t: t.sum(1), x, dev=dev)[0][0])
  A = Tensor(x, device=dev)
  softmax = np.exp(x - x.max(1, keepdims=True))
  cases = [(A.sum(1), x.sum(1), 1e-5), (A.max(1), x.max(1), 0), (A.softmax(1), softmax / softmax.sum(1, keepdims=True), 1e-6),
           (A.argmin(1), x.argmin(1), 0), (A.cast("float64").sum(1), x.astype(np.float64).sum(1), 1e-12),
           ((A * 20).cast("int8").min(1), (x * 20).astype(np.int8).min(1), 0), ((A > 2).any(1), (x > 2).any(1), 0),
           ((A * 1e3).cast("int64").sum(1), (x * 1e3).astype(np.int64).sum(1), 0),
           (A.cast("float16").max(1), x.astype(np.float16).max(1), 0)]
  for got, want, tol in cases:
    got = got.numpy()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def test_elementwise_kernels_load_four_aligned_elements(dev):
  """Contiguous loads whose first lane is on a multiple of 4 elements become one 16-byte load per workitem (a 1-D kernel
  of any length: the last workitem does the tail one element at a time); a slice off that alignment, rows whose length
  is not a multiple of 4, values not 32 bits wide or a per-lane op keep one element per workitem. All match numpy."""
  rng = np.random.default_rng(2)
  x, y = rng.standard_normal((6, 40)).astype(np.float32), rng.standard_normal((1, 40)).astype(np.float32)
  cases = [(lambda a, b: a * b + 1, x, y, True), (lambda a, b: (a - b).exp(), x, y, True),
           (lambda a, b: a[:, 4:20] + b[:, 8:24], x, y, True), (lambda a, b: a[:, 1:17] + b[:, :16], x, y, False),
           (lambda a, b: a[:, :38] + b[:, :38], x, y, False), (lambda a, b: a.sin() + b, x, y, False),
           (lambda a, b: a.T[:36] * 2 + b.T[:36], x, y, False), (lambda a, b: a.cast("float64") + b, x, y, False),
           (lambda a, b: (a < b).where(a, b * 2), x, y, True), (lambda a, b: a.cast("uint16") + 1, x, y, False),
           (lambda a, b: a.reshape(-1)[:237] * 3 + b.reshape(-1)[:1], x, y, True),     # 59 vectors and a tail of 1
           (lambda a, b: a.reshape(-1)[1:238] * 3, x, y, False)]
  for fn, a, b, wide in cases:
    (lk,), renderer = plans(fn, a, b, dev=dev)
    assert (lk.vec_width == kernels_gpu.VECTOR_LANES) == wide
    assert ("load <4 x float>, ptr addrspace(1)" in renderer.render(lk)) == wide
    got, want = fn(Tensor(a, device=dev), Tensor(b, device=dev)).numpy(), fn(Tensor(a, device="CPU"), Tensor(b, device="CPU")).numpy()
    np.testing.assert_allclose(got, want, rtol=5e-6, atol=1e-6)


def test_the_speed_bench_runs_on_the_emulated_gpu(capsys):
  """bench/tensor_gpu.py (what tools/hardware_check.sh runs on a real GPU) at a small scale: its table comes out."""
  require_module("llvmlite")
  import importlib.util
  from pathlib import Path
  path = Path(__file__).resolve().parent.parent / "bench" / "tensor_gpu.py"
  spec = importlib.util.spec_from_file_location("tensor_gpu_bench", path)
  bench = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(bench)
  assert bench.main(["--dev", "MOCKNV+NV", "--scale", "0.02", "--repeat", "1"]) == 0
  out = capsys.readouterr().out
  assert "| fused relu(a*b+c)" in out and "| softmax 64x64 f32 |" in out and "| matmul 64^2 f32 |" in out, out
  assert bench.main(["--dev", "MOCKNV+NV"]) == 0 and "is emulated" in capsys.readouterr().out
