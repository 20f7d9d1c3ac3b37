"""The compiler's decisions, checked directly: what fuses into one kernel, how loops are planned (vector axis,
register tile, threads), what the LLVM IR uses, and that kernels are cached by AST. These guard the speed the
benchmarks measure without timing anything."""
import numpy as np
import pytest
from hcq.tensor import Tensor, runtime
from hcq.tensor.device import get_device
from hcq.tensor.loops import (L1_BYTES, L2_BYTES, MATMUL_A_BLOCK, MATMUL_B_BLOCK, MATMUL_B_SLICE, THREADS, TILE_ROWS, TILE_VECTORS,
                              host_simd_registers, matmul_col_blocks, matmul_k_chunks, matmul_row_blocks, plan)
from hcq.tensor.schedule import Scheduler
from hcq.tensor.render_llvm import _KernelWriter
from hcq.drivers.cpu.jit import CODEGEN_ONLY


def schedule(t: Tensor):
  """The schedule for t, without running it."""
  sched = Scheduler(get_device("CPU"))
  sched.realize(t.node)
  return sched.items


def f32(*shape): return Tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))


def test_elementwise_chain_is_one_kernel():
  a, b, c = f32(64, 64), f32(64), f32(64, 1)
  items = schedule(((a * b + c).relu().exp() / 3).sqrt())
  assert len(items) == 1 and items[0].kernel.reduce_axes == ()


def test_reduce_fuses_producers_and_expand_consumers():
  x = f32(32, 256)
  items = schedule(x.softmax(-1))
  assert len(items) == 1
  k = items[0].kernel
  assert k.reduce_axes == (1,) and k.out_shape == (32, 256) and k.full_shape == (32, 256)
  assert sum(1 for n in k.ast.toposort() if n.op == "REDUCE") == 2  # max and sum, same loop space


def test_reduce_of_different_axes_splits():
  x = f32(8, 16, 32)
  items = schedule(x.sum(axis=2, keepdim=True).max(axis=0))
  assert len(items) == 2


def test_keepdims_false_reshape_is_free():
  x = f32(16, 32)
  items = schedule(x.sum(axis=1))
  assert len(items) == 1  # the reshape to (16,) aliases the reduced buffer


def test_padded_computation_reads_zero_outside():
  x = f32(4, 4)
  items = schedule(x.exp().pad(((1, 1), (0, 0))))
  assert any(n.op == "MASK" for n in items[0].kernel.ast.toposort())


def i32(*shape): return Tensor(np.random.default_rng(0).integers(-3, 4, shape).astype(np.int32))


def test_matmul_plan_is_a_register_tile():
  a, b = f32(240, 1024), f32(1024, 256)  # 240 rows: whole tiles of 6 (AVX2) and 8 (AVX-512) rows; k in 2+ chunks
  items = schedule(a @ b)
  assert len(items) == 1  # float32 on the CPU: one kernel that packs a's row blocks and b's panels itself
  lk = plan(items[-1].kernel, "mm")
  assert lk.vec_width == 16 and lk.unroll[lk.vec_axis] == TILE_VECTORS
  tiled = [ax for ax in lk.unroll if ax != lk.vec_axis]
  assert len(tiled) == 1 and lk.unroll[tiled[0]] == TILE_ROWS[0]
  if THREADS > 1: assert lk.thread_axis is not None and lk.thread_axis != tiled[0]
  # the k chunks loop just inside the outermost loop, summed into the output; the chunk itself is the reduce loop
  assert lk.accumulate_axis is not None and lk.loop_axes[1] == lk.accumulate_axis and lk.reduce_axes == [len(lk.spec.full_shape) - 1]
  src = get_device("CPU").renderer.render(lk)  # the hand-shaped micro-kernel (render_gemm): every index affine in the loops
  assert src.startswith(CODEGEN_ONLY) and "@llvm.fma.v" in src and " udiv " not in src and " urem " not in src
  # a's and b's packs in the workgroup's workspace (no stack buffers), which the entry point passes from gid_x
  assert src.count(" alloca ") == 0 and "%pa.t" in src and "%pb.k" in src and "%ws.at = mul i64 %g, " in src
  items = schedule(i32(240, 512) @ i32(512, 256))  # integers: a and b packed by copy kernels, then the generic writer
  assert len(items) == 3
  src = _KernelWriter(plan(items[-1].kernel, "mm")).write()
  assert "<16 x i32>" in src
  assert src.count(" udiv ") + src.count(" urem ") == 1  # a's tile-interleaved index is plain terms of the tile's number


def test_matmul_packing_copies_are_planned():
  """b's padded panels load as masked vectors (not per-lane gathers); a's tiles (rows of 6 or 8 innermost) unroll the
  rows; every planned loop tells LLVM not to vectorize or unroll it again (compile time)."""
  a, b = i32(100, 300), i32(300, 16 * 15 + 5)  # n padded by 11 columns, k into 2 chunks (float32 packs in its kernel)
  items = schedule(a @ b)
  a_pack, b_pack = (plan(i.kernel, f"pack{j}") for j, i in enumerate(items[:2]))
  if a_pack.spec.out_shape[-1] == 16 * TILE_VECTORS: a_pack, b_pack = b_pack, a_pack
  assert a_pack.spec.out_shape[-1] == TILE_ROWS[0] and b_pack.spec.out_shape[-1] == 16 * TILE_VECTORS   # panels of TILE_VECTORS x 16 columns
  assert b_pack.vec_axis == len(b_pack.spec.full_shape) - 1 and "llvm.masked.load" in get_device("CPU").renderer.render(b_pack)
  if TILE_ROWS[0] <= 8: assert a_pack.unroll == {len(a_pack.spec.full_shape) - 1: TILE_ROWS[0]}
  for lk in (a_pack, b_pack, plan(items[2].kernel, "mm")):
    src = _KernelWriter(lk).write()
    assert '!{!"llvm.loop.unroll.disable"}' in src and src.count("!llvm.loop !0") == src.count("br label %cond_") // 2


def test_matmul_tile_fits_the_register_file():
  """The register tile's accumulators leave registers for the loaded b vectors and the broadcast a value."""
  registers, native_bytes = (32, 64) if host_simd_registers() >= 32 else (16, 32)
  accumulators = TILE_ROWS[0] * TILE_VECTORS * (64 // native_bytes)
  assert accumulators + TILE_VECTORS * (64 // native_bytes) + 1 <= registers


@pytest.mark.parametrize("k,chunks", [(64, 1), (512, 1), (513, 2), (1000, 2), (1024, 2), (2048, 4), (4096, 8)])
def test_matmul_k_chunks_fit_l1(k, chunks):
  got, kc = matmul_k_chunks(k, 64)  # a 16-float32 panel
  assert got * kc >= k and (got - 1) * kc < k and kc * 64 <= L1_BYTES * MATMUL_B_SLICE and kc % 4 == 0  # the micro-kernel's x4 unroll
  if L1_BYTES == 32 << 10 and MATMUL_B_SLICE == 1: assert got == chunks


@pytest.mark.parametrize("m,kc,threads,blocks", [(1024, 512, 1, 1), (1024, 512, 2, 2), (1000, 500, 2, 2), (2048, 512, 1, 1),
                                                 (2048, 512, 2, 2), (8192, 512, 1, 3), (8192, 512, 2, 4), (7, 64, 1, 1),
                                                 (7, 64, 2, 2), (5, 64, 2, 1)])
def test_matmul_row_blocks_cover_m_in_whole_tiles(m, kc, threads, blocks):
  """A row block's chunk of a stays under MATMUL_A_BLOCK MiB; each thread gets a block where m has a tile for it."""
  got_blocks, rows = matmul_row_blocks(m, kc, 4, threads)
  assert rows % TILE_ROWS[0] == 0 and got_blocks * rows >= m and (got_blocks - 1) * rows < m
  assert rows * kc * 4 <= MATMUL_A_BLOCK * (1 << 20) or rows == TILE_ROWS[0]
  assert got_blocks >= min(threads, -(-m // TILE_ROWS[0]))
  if TILE_ROWS[0] == 6 and MATMUL_A_BLOCK == 6: assert got_blocks == blocks


@pytest.mark.parametrize("panels,kc,blocks,per_block", [(128, 512, 16, 8), (64, 512, 8, 8), (63, 500, 9, 7), (32, 512, 4, 8),
                                                       (61, 512, 9, 7), (3, 512, 1, 3), (1, 64, 1, 1)])
def test_matmul_col_blocks_fill_half_of_l2(panels, kc, blocks, per_block):
  """A column block's chunk of b (panels x kc x 64 bytes for float32) fills at most MATMUL_B_BLOCK of L2 (at least
  one panel), with the least padding of the panels."""
  got = matmul_col_blocks(panels, kc, 64)
  assert got[0] * got[1] >= panels and (got[0] - 1) * got[1] < panels
  assert got[1] * kc * 64 <= L2_BYTES * MATMUL_B_BLOCK or got[1] == 1
  if L2_BYTES == 512 << 10 and MATMUL_B_BLOCK == 0.5: assert got == (blocks, per_block)


def test_softmax_vectorizes_the_row():
  lk = plan(schedule(f32(64, 512).softmax(-1))[0].kernel, "sm")
  assert lk.vec_axis == 1 and lk.vec_width == 16
  src = get_device("CPU").renderer.render(lk)
  assert "llvm.vector.reduce.fmaximum" in src and "llvm.vector.reduce.fadd" in src
  assert "@llvm.exp." not in src  # float32 exp is the inline polynomial


def test_long_sum_is_split_for_threads():
  items = schedule((f32(1 << 20) * 2).sum())
  assert len(items) == 2
  first = plan(items[0].kernel, "partial")
  if THREADS > 1: assert first.thread_axis is not None


def test_kernels_are_cached_by_ast():
  x = f32(100, 30)
  (x.exp() + 1).realize()
  compiled = runtime.stats["kernels_compiled"]
  y = f32(100, 30) * 1  # same AST over another buffer... with one more op: a new kernel
  (y.exp() + 1).realize()
  assert runtime.stats["kernels_compiled"] == compiled + 1
  (f32(100, 30).exp() + 1).realize()
  assert runtime.stats["kernels_compiled"] == compiled + 1


def test_code_needs_only_libm_on_older_cpus():
  """bf16 and f16 conversions must not call compiler-rt helpers (__truncsfbf2, __truncdfhf2), which a JIT in a
  Python process cannot count on; only libm functions may be called. Checked for a Haswell-class target."""
  import re
  import llvmlite.binding as llvm
  from hcq.drivers.cpu.jit import host_jit
  host_jit()
  features = llvm.get_host_cpu_features()
  for k in list(features.keys()):
    if k.startswith(("avx512", "amx", "avxvnni", "avx10")): features[k] = False
  tm = llvm.Target.from_default_triple().create_target_machine(cpu="haswell", features=features.flatten(), opt=2, codemodel="jitdefault")
  x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
  graphs = []
  for dt in ("bfloat16", "float16", "float64"):
    t = Tensor(np.abs(x) + 0.5, dtype=dt)
    graphs += [t.exp() * t, t.log2().sum(axis=1), t.cast("float16"), t.cast("bfloat16"), t.cast("int8"), t.softmax(), (t > 1).where(t, -t)]
  graphs += [Tensor(x).cast("float64").cast("float16"), Tensor(x, dtype="bfloat16").bitcast("int16"), Tensor(x).cast("bfloat16").max(axis=0)]
  called = set()
  for g in graphs:
    for item in schedule(g):
      asm = tm.emit_assembly(llvm.parse_assembly(get_device("CPU").renderer.render(plan(item.kernel, "k"))))
      called |= set(re.findall(r"movabsq\s+\$([A-Za-z_]\w*)", asm)) | set(re.findall(r"\b(__\w+)", asm))
  called.discard("k")  # the HCQ-ABI entry point calling the kernel itself
  assert called <= {"exp", "expf", "log", "logf", "log2", "log2f", "exp2", "exp2f", "pow", "powf", "sin", "sinf", "cos", "cosf", "fmod", "fmodf"}, called


def test_loop_nest_description():
  lk = plan(schedule(f32(64, 512).softmax(-1))[0].kernel, "sm")
  text = lk.describe()
  assert "max=" in text and "+=" in text and "16 SIMD lanes" in text and text.count("for a1") == 3


def test_kernels_launch_through_the_hcq_cpu_device():
  """The rendered source's `NAME_hcq` entry point is the HCQ CPU device's kernel ABI: loaded and launched by hand on
  hcq.Device("CPU") with four workgroups (the runtime picks one per core), a fused softmax matches numpy."""
  import hcq
  dev = hcq.Device("CPU")
  x = np.random.default_rng(1).standard_normal((64, 512)).astype(np.float32)
  item = schedule(Tensor(x).softmax(-1))[0]
  lk = plan(item.kernel, "tensor_softmax_abi_test")
  src = get_device("CPU").renderer.render(lk)
  bufs = [dev.alloc(b.nbytes) for b in item.buffers]
  for core_buf, ours in zip(bufs[1:], item.buffers[1:]): core_buf.copyin(ours.copyout(np.empty(ours.nbytes, np.uint8)))
  prog = dev.program(src, name=f"{lk.name}_hcq", args=["buffer"] * len(bufs) + ["i64", "i64"])
  extent = item.kernel.full_shape[lk.thread_axis] if lk.thread_axis is not None else 1
  step = lk.step(lk.thread_axis) if lk.thread_axis is not None else 1
  chunk = -(-extent // (4 * step)) * step  # four workgroups, each a whole number of loop steps
  prog(*bufs, global_size=(-(-extent // chunk), 1, 1), local_size=(1, 1, 1), vals=(chunk, extent), wait=True)
  got = bufs[0].copyout(np.empty((64, 512), np.float32))
  e = np.exp(x - x.max(-1, keepdims=True))
  np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=2e-6, atol=1e-7)


def test_free_list_reuses_and_evicts():
  from hcq.tensor.device import FreeList, get_device
  released = []
  fl = FreeList(limit=100)
  fl.give(40, "a", released.append)
  fl.give(40, "b", released.append)
  assert fl.take(40) == "b" and fl.take(40) == "a" and fl.take(40) is None
  fl.give(60, "c", released.append)
  fl.give(50, "d", released.append)  # over the limit: the oldest goes back
  assert released == ["c"] and fl.take(50) == "d"
  fl.give(500, "huge", released.append)
  assert released == ["c", "huge"]
  dev = get_device("CPU")
  first = dev.alloc(1 << 20)
  address = first.address
  del first
  assert dev.alloc(1 << 20).address == address  # a dropped buffer's memory comes back


def test_kernel_code_stays_small(monkeypatch):
  """A guard against blow-ups (an unroll or gather that multiplies code size), without a clock: compile time is
  bench/tensor_vs_peers.py's figure (issue 7: <= 50 ms per kernel). Today's kernels are 60-330 lines of IR."""
  a, b, c = f32(3 << 16), f32(3 << 16), f32(3 << 16)
  m1, m2 = f32(320, 192), f32(192, 320)
  s = f32(96, 1536)
  monkeypatch.setattr(runtime, "_cache", {})  # compile each kernel here, even if an earlier test made it
  lines = {}
  for name, t in [("fused", (a * b + c).relu().sum()), ("matmul", m1 @ m2), ("softmax", s.softmax(-1))]:
    before = set(runtime._cache)
    t.realize()
    lines[name] = [len(ck.source.splitlines()) for key, ck in runtime._cache.items() if key not in before]
  assert all(lines.values()) and all(n < 1500 for ns in lines.values() for n in ns), lines


def test_layernorm_is_one_kernel():
  x = f32(64, 256)
  out = (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + 1e-5).sqrt()
  assert len(schedule(out)) == 1  # 1/sqrt(var) is recomputed per element rather than re-reading x in a 2nd kernel
  xs = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
  t = Tensor(xs)
  want = (xs - xs.mean(-1, keepdims=True)) / np.sqrt(xs.var(-1, keepdims=True) + 1e-5)
  np.testing.assert_allclose(((t - t.mean(-1, keepdim=True)) / (t.var(-1, keepdim=True) + 1e-5).sqrt()).numpy(), want, rtol=1e-5, atol=1e-5)


def test_codegen_switches_loop_strength_reduction_per_module():
  """drivers.codegen turns LLVM's loop strength reduction off for CODEGEN_ONLY IR and back on for the rest: a loop
  whose index the reduction rewrites compiles to other code inside codegen(strength_reduction=False), and to the
  first code again afterwards (the switch is a process-wide option, so a leak would change every later kernel)."""
  import llvmlite.binding as llvm
  from hcq.drivers.codegen import codegen
  from hcq.drivers.cpu.jit import host_jit
  host_jit()
  tm = llvm.Target.from_default_triple().create_target_machine(cpu="x86-64", opt=3)
  ir = """define void @f(ptr %p, i64 %n) {
entry:
  br label %l
l:
  %i = phi i64 [ 0, %entry ], [ %i.n, %l ]
  %j = mul i64 %i, 3
  %q = getelementptr float, ptr %p, i64 %j
  store float 1.0, ptr %q
  %i.n = add i64 %i, 1
  %c = icmp slt i64 %i.n, %n
  br i1 %c, label %l, label %x
x:
  ret void
}"""
  def asm(strength_reduction: bool) -> str:
    with codegen(llvm, strength_reduction): return tm.emit_assembly(llvm.parse_assembly(ir))
  reduced = asm(True)
  assert asm(False) != reduced
  assert asm(True) == reduced


def test_generic_cpu_kernels_take_the_clean_up_passes():
  """The CPU renderer's generic kernels with SIMD lanes start with CLEANUP_ONLY: the JIT runs only its short pipeline
  on them, which must still put every alloca (loop counters, accumulators) into registers; a kernel without lanes of
  its own (a sum over an axis of 3) keeps O3, whose vectoriser it needs. All compute numpy's results."""
  import llvmlite.binding as llvm
  from hcq.drivers.codegen import codegen
  from hcq.drivers.cpu.jit import CLEANUP_ONLY, _clean_up, host_jit
  _, tm, _ = host_jit()
  rng = np.random.default_rng(3)
  x, v = rng.standard_normal((67, 128)).astype(np.float32), rng.standard_normal(128).astype(np.float32)
  t3 = rng.standard_normal((40, 50, 3)).astype(np.float32)
  e = np.exp(x - x.max(-1, keepdims=True))
  graphs = [(lambda: (Tensor(x) * Tensor(v)).exp(), np.exp(x * v)), (lambda: Tensor(x).softmax(-1), e / e.sum(-1, keepdims=True)),
            (lambda: Tensor(x).sum(axis=0), x.sum(axis=0)), (lambda: (Tensor(x) > 0).where(Tensor(x), -Tensor(x)).max(axis=1), np.abs(x).max(axis=1)),
            (lambda: Tensor(t3).sum(axis=2), t3.sum(axis=2))]
  seen = set()
  for build, want in graphs:
    items = schedule(build())
    assert items
    for item in items:
      lk = plan(item.kernel, "k")
      src = get_device("CPU").renderer.render(lk)
      assert src.startswith(CLEANUP_ONLY) == (lk.vec_axis is not None)
      seen.add(lk.vec_axis is not None)
      if lk.vec_axis is None: continue
      with codegen(llvm):
        mod = llvm.parse_assembly(src)
        _clean_up(llvm, mod, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3)))
        assert " alloca " not in str(mod)
    np.testing.assert_allclose(build().numpy(), want, rtol=1e-5, atol=1e-5)
  assert seen == {True, False}


def test_memo_keeps_none_starts_over_when_full_and_serves_threads():
  """hcq.memo.Memo (load indices, gemm layouts, stores_through): None is kept like any value (a kernel that is
  no matmul is asked once), a full memo starts over, and threads sharing one get each key's own value."""
  import threading
  from hcq.memo import Memo
  calls: list[str] = []
  def make(k: str):
    return lambda: calls.append(k)   # None
  m: Memo[None] = Memo(limit=2)
  assert m.get("a", make("a")) is None and m.get("a", make("a")) is None and calls == ["a"]
  m.get("b", make("b"))
  m.get("c", make("c"))   # full at two keys: started over before c
  m.get("a", make("a"))
  assert calls == ["a", "b", "c", "a"]
  shared: Memo[int] = Memo(limit=5)
  wrong: list[tuple[int, int]] = []
  def worker(seed: int) -> None:
    for i in range(2000):
      k = (seed * 7 + i) % 11
      v = shared.get(k, lambda: k * k)
      if v != k * k: wrong.append((k, v))
  threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert wrong == []
