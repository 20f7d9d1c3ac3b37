"""The CPU matmul against numpy on odd shapes: 1, primes, and sizes one below, at and one above the register tile's
rows and column panels (hcq.tensor.loops.TILE_ROWS, TILE_VECTORS) and the packing threshold (k >= 64, n >= two
panels, at most 1/8 of n padding), on contiguous, transposed, strided and batched operands. f32 sums in another
order than numpy's: tolerances grow with k."""
import gc
import re
import weakref
from types import SimpleNamespace
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hcq.tensor import Tensor
from hcq.tensor.device import get_device
from hcq.tensor.loops import TILE_ROWS, TILE_VECTORS
from hcq.tensor.schedule import Scheduler

ROWS, PANEL = TILE_ROWS[0], TILE_VECTORS * 16  # f32 columns per panel


def packed(t: Tensor, panel: int = PANEL) -> bool:
  """Whether t's schedule runs the packed, register-tiled kernel (its loop space ends in the 6 packed axes: k chunks,
  row blocks, rows, panels, panel columns, k; `panel` columns: PANEL for float32)."""
  return any(len(i.kernel.full_shape) >= 5 and i.kernel.full_shape[-2] == panel and i.kernel.reduce_axes for i in schedule_of(t))


def f32_tol(k: int) -> float: return 2e-6 * max(k, 8) ** 0.5 * 4  # rounding of a k-term f32 sum of O(1) products, with margin


SHAPES = [(1, 1, 1), (1, 257, 97), (7, 13, 97), (97, 257, 13), (13, 97, 8 * PANEL + 1), (ROWS - 1, 64, 2 * PANEL),
          (ROWS + 1, 63, 2 * PANEL), (ROWS + 1, 64, 2 * PANEL - 1), (2 * ROWS + 1, 97, 8 * PANEL - 1), (257, 257, 9 * PANEL - 3)]


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_odd_shapes(m, k, n):
  rng = np.random.default_rng(m * 1000003 + k * 1009 + n)
  a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
  got = (Tensor(a) @ Tensor(b)).numpy()
  np.testing.assert_allclose(got, a @ b, rtol=f32_tol(k), atol=f32_tol(k) * 4)


def test_odd_shapes_take_the_packed_path():
  """The straddlers above exercise the packed kernel where its conditions hold, and the plain one where not."""
  want = {(13, 97, 8 * PANEL + 1): True, (ROWS - 1, 64, 2 * PANEL): True, (ROWS + 1, 63, 2 * PANEL): False,
          (ROWS + 1, 64, 2 * PANEL - 1): False, (2 * ROWS + 1, 97, 8 * PANEL - 1): True, (257, 257, 9 * PANEL - 3): True,
          (13, 97, 2 * PANEL + 1): False, (7, 13, 97): False}  # 2 panels + 1 column would pad n by more than 1/8
  for (m, k, n), expect in want.items():
    assert packed(Tensor(np.ones((m, k), np.float32)) @ Tensor(np.ones((k, n), np.float32))) == expect, (m, k, n)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
@pytest.mark.parametrize("k", [97, 301])  # one k chunk; two (padded to 2 x 151), the second added to the first's output
def test_matmul_packed_other_dtypes(dtype, k):
  rng = np.random.default_rng(5)
  a, b = rng.integers(-3, 4, (ROWS + 1, k)).astype(dtype), rng.integers(-3, 4, (k, 8 * PANEL + 5)).astype(dtype)
  got = (Tensor(a) @ Tensor(b)).numpy()
  assert got.dtype == (a @ b).dtype
  np.testing.assert_array_equal(got, a @ b)  # small integers: every sum is exact in either type


def test_matmul_transposed_strided_and_batched():
  rng = np.random.default_rng(7)
  a, b = rng.standard_normal((131, 97)).astype(np.float32), rng.standard_normal((97 * 2, 8 * PANEL + 7)).astype(np.float32)
  tol = f32_tol(97)
  at, bs = Tensor(a.T.copy()).T, Tensor(b)[::2]  # a transposed view and every other row of b
  np.testing.assert_allclose((at @ bs).numpy(), a @ b[::2], rtol=tol, atol=4 * tol)
  np.testing.assert_allclose((Tensor(b[::2].T.copy()).T.T @ at.T).numpy(), b[::2].T @ a.T, rtol=tol, atol=4 * tol)
  x, y = rng.standard_normal((2, 3, 13, 97)).astype(np.float32), rng.standard_normal((3, 97, 8 * PANEL + 1)).astype(np.float32)
  assert packed(Tensor(x) @ Tensor(y))
  np.testing.assert_allclose((Tensor(x) @ Tensor(y)).numpy(), x @ y, rtol=tol, atol=4 * tol)


def test_matmul_with_epilogue():
  rng = np.random.default_rng(11)
  a, b = rng.standard_normal((37, 200)).astype(np.float32), rng.standard_normal((200, 8 * PANEL + 2)).astype(np.float32)
  tol = f32_tol(200)
  np.testing.assert_allclose(((Tensor(a) @ Tensor(b)).relu() * 2 + 1).numpy(), np.maximum(a @ b, 0) * 2 + 1, rtol=tol, atol=8 * tol)


def test_matmul_1000():
  """One medium size: 1000 is no multiple of the tile rows (6 or 8) nor of the panel."""
  rng = np.random.default_rng(1000)
  a, b = rng.standard_normal((1000, 1000)).astype(np.float32), rng.standard_normal((1000, 1000)).astype(np.float32)
  got = (Tensor(a) @ Tensor(b)).numpy()
  np.testing.assert_allclose(got, a @ b, rtol=f32_tol(1000), atol=f32_tol(1000) * 4)


def test_matmul_row_blocks_and_k_chunks(monkeypatch):
  """With small caches a modest shape takes every branch of the packed path: rows in several padded blocks and k
  in padded chunks whose products the kernel adds to the output one after the other."""
  from hcq.tensor import loops
  monkeypatch.setattr(loops, "L1_BYTES", 8 << 10)
  monkeypatch.setattr(loops, "L2_BYTES", 64 << 10)
  m, k, n = 97, 701, 8 * PANEL + 1
  chunks, kc = loops.matmul_k_chunks(k, PANEL * 4)
  assert chunks > 1 and chunks * kc > k and loops.matmul_row_blocks(m, kc, 4)[0] > 1
  rng = np.random.default_rng(97)
  a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
  t = Tensor(a) @ Tensor(b)
  assert packed(t)
  np.testing.assert_allclose(t.numpy(), a @ b, rtol=f32_tol(k), atol=f32_tol(k) * 4)


def schedule_of(t: Tensor) -> list:
  """The items t's schedule would run (nothing runs: t stays lazy)."""
  sched = Scheduler(get_device("CPU"))
  sched.realize(t.node)
  items = list(sched.items)
  sched.undo()
  return items


def kernel_sources(t: Tensor) -> list[str]:
  """The CPU sources of the kernels t's schedule would compile (nothing runs: t stays lazy)."""
  from hcq.tensor import loops
  dev = get_device("CPU")
  sched = Scheduler(dev)
  sched.realize(t.node)
  out = [dev.renderer.render(dev.renderer.adapt(loops.plan(i.kernel, f"k{n}"))) for n, i in enumerate(sched.items)]
  sched.undo()
  return out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32"])
def test_float_matmul_kernel_is_the_micro_kernel(monkeypatch, dtype, threads):
  """Float packed matmuls (float16 accumulates in float32) render as the hand-shaped micro-kernel (render_gemm: code
  generation only, llvm.fma on native vectors), on one thread (no thread axis) and two; int32 keeps the generic writer.
  k = 301 is two chunks (the second added to the first's output) of 152, a multiple of the x4 unroll."""
  from hcq.tensor import loops
  from hcq.drivers.cpu.jit import CODEGEN_ONLY
  from hcq.tensor.render_gemm import NATIVE_BYTES
  monkeypatch.setattr(loops, "THREADS", threads)
  rng = np.random.default_rng(3)
  m, k, n = 6 * ROWS + 5, 301, 8 * PANEL + 5
  a, b = rng.integers(-3, 4, (m, k)).astype(dtype), rng.integers(-3, 4, (k, n)).astype(dtype)
  t = Tensor(a) @ Tensor(b)
  gemm = [s for s in kernel_sources(t) if s.startswith(CODEGEN_ONLY)]
  assert len(gemm) == (dtype != "int32")
  if gemm:  # one SIMD register per vector
    assert (f"@llvm.fma.v{NATIVE_BYTES // 8}f64" if dtype == "float64" else f"@llvm.fma.v{NATIVE_BYTES // 4}f32") in gemm[0]
  np.testing.assert_array_equal(t.numpy(), a @ b)  # small integers: every sum is exact in each type


def test_float_matmul_packs_views_in_its_kernel():
  """float32 operands that are views of data (a slice with an offset, a pad on the low side of both axes, a batch
  broadcast) are packed by the matmul kernel itself through their masks: one kernel, numpy's result. A transposed
  operand (not contiguous along its last axis) is copied first: two kernels."""
  from hcq.drivers.cpu.jit import CODEGEN_ONLY
  rng = np.random.default_rng(11)
  x, y = rng.standard_normal((2 * ROWS + 9, 203)).astype(np.float32), rng.standard_normal((197, 8 * PANEL + 7)).astype(np.float32)
  a, b = Tensor(x)[3:, 1:201], Tensor(y).pad(((3, 0), (2, 0)))[:, : 8 * PANEL + 5]
  want = x[3:, 1:201] @ np.pad(y, ((3, 0), (2, 0)))[:, : 8 * PANEL + 5]
  t = a @ b
  sources = kernel_sources(t)
  assert len(sources) == 1 and sources[0].startswith(CODEGEN_ONLY)  # the product stores the cropped result itself
  np.testing.assert_allclose(t.numpy(), want, rtol=f32_tol(200), atol=f32_tol(200) * 4)
  batched = Tensor(x[:, :197])[None].expand(3, *x[:, :197].shape) @ Tensor(y)
  np.testing.assert_allclose(batched.numpy(), np.broadcast_to(x[:, :197], (3, *x[:, :197].shape)) @ y, rtol=f32_tol(197), atol=f32_tol(197) * 4)
  transposed = Tensor(np.ascontiguousarray(x[:, :197].T)).T @ Tensor(y)
  assert len([s for s in kernel_sources(transposed) if not s.startswith(CODEGEN_ONLY)]) >= 1
  np.testing.assert_allclose(transposed.numpy(), x[:, :197] @ y, rtol=f32_tol(197), atol=f32_tol(197) * 4)


@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_blocks_chunks_and_skips_padded_tiles(monkeypatch, threads):
  """render_gemm's layout against numpy, with small caches and blocks so that a modest shape has several row blocks,
  column blocks and k chunks: b's column block packed per row block and k chunk (each thread its own), each tile
  passing over the block's panels; the last row block's tiles that lie wholly past m are skipped (the padded output
  rows they would write are cut off by the view)."""
  from hcq.drivers.cpu.jit import CODEGEN_ONLY
  from hcq.tensor import loops
  monkeypatch.setattr(loops, "THREADS", threads)
  monkeypatch.setattr(loops, "L1_BYTES", 8 << 10)
  monkeypatch.setattr(loops, "L2_BYTES", 64 << 10)
  monkeypatch.setattr(loops, "MATMUL_A_BLOCK", 1 / 64)   # 16 KiB of a per row block
  m, k, n = 173, 301, 8 * PANEL + 5
  chunks, kc = loops.matmul_k_chunks(k, PANEL * 4)
  blocks, block_rows = loops.matmul_row_blocks(m, kc, 4, threads)
  col_blocks, _ = loops.matmul_col_blocks(9, kc, PANEL * 4)
  assert chunks > 1 and blocks > 1 and col_blocks > 1 and blocks * block_rows - m >= ROWS  # a whole padded tile
  rng = np.random.default_rng(173)
  a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
  t = Tensor(a) @ Tensor(b)
  gemm = [s for s in kernel_sources(t) if s.startswith(CODEGEN_ONLY)]
  assert len(gemm) == 1 and "\npb.p:" in gemm[0] and "%rl.hi" in gemm[0]
  np.testing.assert_allclose(t.numpy(), a @ b, rtol=f32_tol(k), atol=f32_tol(k) * 4)


@pytest.mark.parametrize("threads", [1, 2])
def test_gemm_packs_live_in_the_workspace(monkeypatch, threads):
  """The packs live in the device's workspace (HCQDevice.workspace: a workgroup's share from gid_x), not on a stack,
  so any thread may run the kernel: with PACK_BYTES raised to 12 MiB and row blocks to 11.5 MiB, an 11 MiB k chunk of
  a (more than a usual 8 MiB stack) packs and multiplies on each thread, and the kernel has no alloca for it."""
  import re
  from hcq.drivers.cpu.jit import CODEGEN_ONLY
  from hcq.tensor import loops, render_gemm
  monkeypatch.setattr(loops, "THREADS", threads)
  monkeypatch.setattr(loops, "MATMUL_A_BLOCK", 11.5)
  monkeypatch.setattr(render_gemm, "PACK_BYTES", 12 << 20)
  rng = np.random.default_rng(7)
  k = loops.matmul_k_chunks(1 << 20, PANEL * 4)[1]   # one whole k chunk
  a, b = rng.standard_normal((threads * (11 << 20) // (4 * k) + ROWS, k)).astype(np.float32), rng.standard_normal((k, 2 * PANEL)).astype(np.float32)
  t = Tensor(a) @ Tensor(b)
  gemm = [s for s in kernel_sources(t) if s.startswith(CODEGEN_ONLY)]
  assert len(gemm) == 1 and int(re.search(r"%ws.at = mul i64 %g, (\d+)", gemm[0])[1]) >= 11 << 20
  assert max([int(x) * 4 for x in re.findall(r"alloca \[(\d+) x float\]", gemm[0])], default=0) < 1 << 20
  np.testing.assert_allclose(t.numpy(), a @ b, rtol=f32_tol(k), atol=f32_tol(k) * 4)


def test_workspace_is_one_buffer_that_grows_and_keeps_the_old():
  """HCQDevice.workspace: one buffer for every kernel while it is large enough; a larger need gets at least twice the
  old, and the old stays allocated (a launch queued before may still use it)."""
  from hcq.tensor.device import HCQDevice
  dev = HCQDevice("CPU")
  small = dev.workspace(1000)
  assert dev.workspace(10) is small and small.nbytes >= 1000
  big = dev.workspace(small.nbytes + 1)
  assert big is not small and big.nbytes >= 2 * small.nbytes and dev.workspace(5) is big
  assert dev._workspaces == [small, big] and not small.freed


def test_packed_graph_template_rebuilds_the_same_graph_over_new_data(monkeypatch):
  """Tensor.matmul keeps a packed product's graph as a template keyed on the operands' views, dtypes and plan: a
  second product of the same kind schedules the same kernel (same spec key) over the new buffers; products that
  differ in an operand's view (another offset), in sharing one buffer (x @ x) or in the plan get their own."""
  from hcq.tensor import loops, tensor as tensor_mod
  rng = np.random.default_rng(23)
  m, k, n = 2 * ROWS + 1, 97, 8 * PANEL + 3
  x, y, z = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(3))

  def spec_keys(t: Tensor) -> list[str]:
    sched = Scheduler(get_device("CPU"))
    sched.realize(t.node)
    keys = [i.kernel.key for i in sched.items]
    sched.undo()
    return keys

  tensor_mod.forget_matmul_graphs()
  first = Tensor(x)[:m, :k] @ Tensor(y)[:k]
  assert len(tensor_mod._MATMUL_GRAPHS) == 1
  again = Tensor(z)[:m, :k] @ Tensor(x)[:k]   # built from the template
  assert len(tensor_mod._MATMUL_GRAPHS) == 1 and spec_keys(again) == spec_keys(first)
  gc.disable()   # nothing keeps a rebuilt graph (and the buffer it is realized into) alive: no cycle to wait for
  try:
    dropped = weakref.ref((Tensor(z)[:m, :k] @ Tensor(y)[:k]).realize().node)
    assert dropped() is None
  finally:
    gc.enable()
  tol = f32_tol(k)
  np.testing.assert_allclose(again.numpy(), z[:m, :k] @ x[:k], rtol=tol, atol=4 * tol)
  np.testing.assert_allclose(first.numpy(), x[:m, :k] @ y[:k], rtol=tol, atol=4 * tol)
  shifted = Tensor(z)[1:m + 1, 2:k + 2] @ Tensor(x)[3:k + 3]
  assert len(tensor_mod._MATMUL_GRAPHS) == 2
  np.testing.assert_allclose(shifted.numpy(), z[1:m + 1, 2:k + 2] @ x[3:k + 3], rtol=tol, atol=4 * tol)
  for s in (x, y):   # one buffer on both sides, then two buffers with the same views: their own templates
    w = Tensor(s)
    np.testing.assert_allclose((w[:m] @ w).numpy(), s[:m] @ s, rtol=f32_tol(n), atol=4 * f32_tol(n))
  np.testing.assert_allclose((Tensor(x)[:m] @ Tensor(z)).numpy(), x[:m] @ z, rtol=f32_tol(n), atol=4 * f32_tol(n))
  assert len(tensor_mod._MATMUL_GRAPHS) == 4
  monkeypatch.setattr(loops, "L1_BYTES", 4 << 10)   # k in two chunks: another plan, another graph
  np.testing.assert_allclose((Tensor(z)[:m, :k] @ Tensor(x)[:k]).numpy(), z[:m, :k] @ x[:k], rtol=tol, atol=4 * tol)
  assert len(tensor_mod._MATMUL_GRAPHS) == 5


def test_the_same_product_again_builds_from_its_template_at_once(monkeypatch):
  """The last product of two tensors taken as they are is remembered (weakly): the same two again build from its
  template without planning, but not after a setting the plan reads changed, with the operands swapped or shared, or
  after a view operand was realized in place (it then reads differently); nothing keeps the operands alive. Each
  result is numpy's."""
  from hcq.tensor import loops, tensor as tensor_mod
  rng = np.random.default_rng(31)
  n = 8 * PANEL + 3
  x, y = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
  plans = []
  real_plan = loops.matmul_plan
  monkeypatch.setattr(loops, "matmul_plan", lambda *a: plans.append(a) or real_plan(*a))
  tol = f32_tol(n)

  def check(t: Tensor, want: np.ndarray, planned: int) -> None:
    np.testing.assert_allclose(t.numpy(), want, rtol=tol, atol=4 * tol)
    assert len(plans) == planned
  tensor_mod.forget_matmul_graphs()
  tx, ty = Tensor(x), Tensor(y)
  check(tx @ ty, x @ y, 1)
  check(tx @ ty, x @ y, 1)
  monkeypatch.setattr(loops, "L1_BYTES", 4 << 10)   # another plan (k in two chunks)
  check(tx @ ty, x @ y, 2)
  check(tx @ ty, x @ y, 2)
  check(ty @ tx, y @ x, 3)
  check(tx @ tx, x @ x, 4)
  view = Tensor(y)[1:, 2:]   # a view of data: packed through its view; the same after it is realized in place
  check(tx[:, 1:] @ view, x[:, 1:] @ y[1:, 2:], 5)
  rows = tx[:, 1:]
  check(rows @ view, x[:, 1:] @ y[1:, 2:], 6)
  check(rows @ view, x[:, 1:] @ y[1:, 2:], 6)
  view.realize()
  assert view.node.realized
  check(rows @ view, x[:, 1:] @ y[1:, 2:], 7)
  left, right = Tensor(x), Tensor(y)
  (left @ right).realize()
  gone = weakref.ref(left.node), weakref.ref(right.node)
  del left, right
  assert gone[0]() is None and gone[1]() is None


def test_packed_template_keeps_its_kernel_and_knows_when_it_does_not_apply(monkeypatch):
  """A templated product's root remembers its scheduled kernel (spec, output bytes, the leaf slot of each input
  buffer): later products of the template schedule it without building an AST. It is not taken where two leaves
  now share one buffer that did not before (the kernel would load it twice over slots the spec does not have), nor
  where a consumer's kernel already computed the product's reduction (realizing the product must not compute it
  again). Each case checks numpy's result."""
  from hcq.tensor import schedule, tensor as tensor_mod
  rng = np.random.default_rng(29)
  m, k, n = 2 * ROWS + 1, 97, 8 * PANEL + 3
  x, y, z = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(3))
  tol = f32_tol(n)
  built = []
  real_build = schedule._KernelBuilder.build
  monkeypatch.setattr(schedule._KernelBuilder, "build", lambda self, *a: built.append(1) or real_build(self, *a))

  def items(t: Tensor):
    sched = Scheduler(get_device("CPU"))
    sched.realize(t.node)
    got = list(sched.items)
    sched.undo()
    return got

  tensor_mod.forget_matmul_graphs()
  tx, ty, tz = Tensor(x), Tensor(y), Tensor(z)
  first = (tx @ ty).realize()   # builds the template and schedules its root: the kernel is kept
  (template,) = tensor_mod._MATMUL_GRAPHS.values()
  assert template.kernel is not None and built
  built.clear()
  again = tz @ tx
  (item,) = items(again)
  assert not built and item.kernel is template.kernel[0]
  assert [b for b in item.buffers[1:]] == [tz.node.buffer, tx.node.buffer]
  np.testing.assert_allclose(again.numpy(), z @ x, rtol=tol, atol=4 * tol)
  np.testing.assert_allclose(first.numpy(), x @ y, rtol=tol, atol=4 * tol)
  # a second node over x's buffer (a realized contiguous() of data is that data): the same key, but the kernel kept
  # loads one buffer for both operands, so two buffers must not take it (nor, here, the other way round)
  tw = tx.contiguous().realize()
  assert tw.node is not tx.node and tw.node.buffer is tx.node.buffer
  tensor_mod.forget_matmul_graphs()
  shared = (tx @ tw).realize()
  (template,) = tensor_mod._MATMUL_GRAPHS.values()
  assert template.kernel is not None and len(template.kernel[2]) == 1
  two = tz @ tx
  (item,) = items(two)
  assert len(item.buffers) == 3 and item.kernel is not template.kernel[0]
  np.testing.assert_allclose(two.numpy(), z @ x, rtol=tol, atol=4 * tol)
  np.testing.assert_allclose(shared.numpy(), x @ x, rtol=tol, atol=4 * tol)
  tensor_mod.forget_matmul_graphs()
  (tz @ tx).realize()
  (item,) = items(tx @ tw)
  assert len(item.buffers) == 2
  # a consumer computes the product's reduction first: realizing the (cropped) product is then a copy of it
  later = tz @ ty
  plus = (later + 1).realize()
  (item,) = items(later)
  assert all(op.op != "REDUCE" for op in item.kernel.ast.toposort()) and len(item.buffers) == 2
  np.testing.assert_allclose(later.numpy(), z @ y, rtol=tol, atol=4 * tol)
  np.testing.assert_allclose(plus.numpy(), z @ y + 1, rtol=tol, atol=4 * tol)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("valid", [1, PANEL // 4, PANEL // 4 + 1, PANEL // 2, PANEL // 2 + 1, PANEL - 1])
def test_a_last_panel_half_in_the_padding_runs_the_narrow_k_loop(monkeypatch, threads, valid):
  """A cropped product whose last column panel holds `valid` columns: at most half a panel takes the k loop over the
  panel's first half (render_gemm's %kn), more takes the whole panel; with zmm vectors (two a panel), at most a
  quarter takes it over the first half vector, as a ymm (a zmm core may run as two ymm halves); either way every
  column is numpy's (a narrow loop taken one column too early would drop the panel's middle column)."""
  from hcq.tensor import loops, render_gemm
  monkeypatch.setattr(loops, "THREADS", threads)
  m, k, n = 2 * ROWS + 1, 97, 8 * PANEL + valid
  rng = np.random.default_rng(valid)
  a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
  t = Tensor(a) @ Tensor(b)
  (src,) = kernel_sources(t)
  lanes = render_gemm.NATIVE_BYTES // 4
  quarter = render_gemm.NATIVE_BYTES == 64 and PANEL == 2 * lanes and valid <= lanes // 2
  assert ("%kn.k = phi" in src) == (valid <= PANEL // 2)
  assert (f"%kn.acc0_0 = phi <{lanes // 2} x float>" in src) == quarter
  np.testing.assert_allclose(t.numpy(), a @ b, rtol=f32_tol(k), atol=f32_tol(k) * 4)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", ["a chunk + 1", "a chunk + 3", "two chunks", "three chunks + 1"])
def test_the_last_k_chunk_stops_at_k(monkeypatch, threads, case):
  """k padded to equal chunks (loops.matmul_k_chunks): the last chunk's k loop and b's pack stop at k rounded up to
  the loop's unroll (render_gemm's %kend), not at the chunk's length, where the two differ; the results are numpy's
  whatever the last chunk holds (k - 1 of it valid after rounding, or 1 past a whole step)."""
  from hcq.tensor import loops
  monkeypatch.setattr(loops, "THREADS", threads)
  monkeypatch.setattr(loops, "L1_BYTES", 8 << 10)   # chunks of at most `longest` k rows
  longest = (8 << 10) // (PANEL * 4)
  k, want_chunks, short = {"a chunk + 1": (longest + 1, 2, True), "a chunk + 3": (longest + 3, 2, True),
                           "two chunks": (2 * longest, 2, False), "three chunks + 1": (3 * longest + 1, 4, True)}[case]
  chunks, kc = loops.matmul_k_chunks(k, PANEL * 4)
  assert chunks == want_chunks
  m, n = 2 * ROWS + 1, 8 * PANEL - 3
  rng = np.random.default_rng(k)
  a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
  t = Tensor(a) @ Tensor(b)
  (src,) = kernel_sources(t)
  last, unroll = k - (chunks - 1) * kc, int(re.search(r"%kw\.kn = add i64 %kw\.k, (\d+)", src)[1])
  assert unroll in (2, 4) and ("%kend = select" in src) == short and (f"i64 {-(-last // unroll) * unroll}, i64 {kc}" in src) == short
  np.testing.assert_allclose(t.numpy(), a @ b, rtol=f32_tol(k), atol=f32_tol(k) * 4)


@pytest.mark.parametrize("rows,columns,lanes,kc,want", [(8, 32, 16, 256, 2), (6, 16, 8, 256, 4), (6, 16, 8, 254, 2), (8, 32, 16, 255, 1),
                                                         (8, 16, 8, 256, 2), (4, 8, 8, 256, 4), (16, 32, 16, 12, 1)])
def test_the_k_loop_unrolls_to_32_fmas_a_pass_where_kc_allows(rows, columns, lanes, kc, want):
  """rows x vectors FMAs per step of k: the fewest steps (1, 2, 4) that divide kc and make 32; else the most that divide
  kc (AVX2's 6 x 2 ymm tile: 4 steps; AVX-512's 8 x 2 zmm: 2)."""
  from hcq.tensor.render_gemm import k_unroll
  assert k_unroll(SimpleNamespace(rows=rows, columns=columns, kc=kc), lanes) == want


CROPPED = [(1000, 1000, 1000), (ROWS + 1, 64, 8 * PANEL + 3), (13, 97, 8 * PANEL + 1), (2 * ROWS + 1, 97, 8 * PANEL - 1),
           (257, 257, 9 * PANEL - 3), (97, 701, 8 * PANEL + 1)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m,k,n", CROPPED)
def test_cropped_product_is_one_kernel_storing_only_the_result(monkeypatch, threads, m, k, n):
  """Where n is no multiple of the panel (or m of the row block) the packed kernel stores the product straight into
  the m x n result (Scheduler._kernel_through, render_gemm's masked edge tiles): one kernel, with a store view, and
  nothing written past the result: run into a buffer with a NaN tail, the tail stays NaN. Small caches give the
  last shape several k chunks (the edge tiles' masked loads of what the earlier chunks stored)."""
  from hcq.tensor import loops, runtime
  monkeypatch.setattr(loops, "THREADS", threads)
  if k == 701:
    monkeypatch.setattr(loops, "L1_BYTES", 8 << 10)
    monkeypatch.setattr(loops, "L2_BYTES", 64 << 10)
  rng = np.random.default_rng(m + k + n)
  a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
  t = Tensor(a) @ Tensor(b)
  dev = get_device("CPU")
  sched = Scheduler(dev)
  sched.realize(t.node)
  items = sched.items
  sched.undo()
  assert len(items) == 1 and items[0].kernel.out_view is not None and items[0].kernel.out_shape[-2] == PANEL
  tail = 4 * PANEL * (ROWS + 1)
  out = dev.alloc((m * n + tail) * 4).copyin(np.full(m * n + tail, np.nan, np.float32))
  items[0].buffers[0] = out
  runtime.run_item(items[0], dev)
  dev.synchronize()
  got = out.copyout(np.empty(m * n + tail, np.float32))
  assert np.isnan(got[m * n:]).all()
  np.testing.assert_allclose(got[:m * n].reshape(m, n), a @ b, rtol=f32_tol(k), atol=f32_tol(k) * 4)


def test_cropped_product_batched_transposed_and_other_dtypes():
  """The store view on a batch (each batch's result a crop of its own padded product), a transposed a, float64; a
  float16 product keeps its cast kernel, which reads the padded float32 product (no store view)."""
  rng = np.random.default_rng(19)
  x, y = rng.standard_normal((2, 3, 13, 97)), rng.standard_normal((3, 97, 8 * PANEL + 1))
  for dtype in ("float32", "float64"):
    a, b = x.astype(dtype), y.astype(dtype)
    tol = f32_tol(97) if dtype == "float32" else 1e-12
    np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=tol, atol=4 * tol)
    at = Tensor(np.ascontiguousarray(a[0, 0].T)).T
    np.testing.assert_allclose((at @ Tensor(b[1])).numpy(), a[0, 0] @ b[1], rtol=tol, atol=4 * tol)
  h, g = x[0, 0].astype(np.float16), y[0].astype(np.float16)
  sched = Scheduler(get_device("CPU"))
  sched.realize((Tensor(h) @ Tensor(g)).node)
  assert all(i.kernel.out_view is None for i in sched.items)
  sched.undo()
  np.testing.assert_allclose((Tensor(h) @ Tensor(g)).numpy().astype(np.float32), (h.astype(np.float32) @ g.astype(np.float32)),
                             rtol=2e-2, atol=0.1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_packed_matmul_on_drawn_shapes_is_numpys(data):
  """Drawn packed products (hypothesis): m from 4, k from 64 over one to four k chunks (an L1 of 4-16 KiB), n whose
  last panel holds from one column to all, one or two threads, float32 or float64, a transposed a or b, each on the
  packed path: numpy's values (through the last chunk's short k loop, the narrow loops and the edge tiles)."""
  from hcq.tensor import loops
  dtype = data.draw(st.sampled_from(["float32", "float64"]), label="dtype")
  panel = PANEL * 4 // np.dtype(dtype).itemsize
  m, k = data.draw(st.integers(4, 3 * ROWS + 2), label="m"), data.draw(st.integers(64, 400), label="k")
  n = data.draw(st.integers(2 * panel, 9 * panel).filter(lambda n: (-(-n // panel) * panel - n) * 8 <= n), label="n")
  threads, l1 = data.draw(st.sampled_from([1, 2]), label="threads"), data.draw(st.sampled_from([4, 8, 16]), label="L1 KiB") << 10
  ta, tb = data.draw(st.booleans(), label="a transposed"), data.draw(st.booleans(), label="b transposed")
  rng = np.random.default_rng(m * 7919 + k * 31 + n)
  a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
  saved = loops.THREADS, loops.L1_BYTES
  loops.THREADS, loops.L1_BYTES = threads, l1
  try:
    x = Tensor(np.ascontiguousarray(a.T)).T if ta else Tensor(a)
    y = Tensor(np.ascontiguousarray(b.T)).T if tb else Tensor(b)
    t = x @ y
    assert packed(t, panel)
    got = t.numpy()
  finally:
    loops.THREADS, loops.L1_BYTES = saved
  tol = f32_tol(k) if dtype == "float32" else 1e-12 * k
  np.testing.assert_allclose(got, a @ b, rtol=tol, atol=4 * tol)
