"""The CUDA C++ corpus's cases (kernels.cu): for each kernel its inputs, grid, block and a check of the results against
numpy or an exact model. Shared by tests/test_nv_sm_corpus.py (the emulated SM) and tools/nv_sm_corpus.py (a real GPU
against the emulated results); needs only numpy."""
from __future__ import annotations
import os

import numpy as np

KERNELS_CU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels.cu")
SHARED = {"dynamic_shared_reverse": 256 * 4}   # bytes of shared memory a launch gives beyond the static ones
# bytes of stack per thread for kernels ptxas cannot bound (recursion): the NV driver's default, as cudaLimitStackSize's
LOCAL = {"recursive_sum": 1024}
# Kernels whose results may differ between two correct GPUs: the order of atomics (which thread gets which old value,
# the rounding of float atomic sums) and the tensor core's accumulation (mma.sync: ops_mma.py's docstring).
ORDER_DEPENDENT = {"atomic_old_values", "atomic_add_float_shared", "module_variables"}


def cuda_cases():
  rng = np.random.default_rng(7)
  f = rng.standard_normal(4096).astype(np.float32)
  i = rng.integers(-1000, 1000, 4096).astype(np.int32)
  u = rng.integers(0, 1 << 32, 4096, dtype=np.uint64).astype(np.uint32)
  d = rng.standard_normal(1024)
  hist_in = rng.integers(0, 64, 4096).astype(np.int32)
  m = 64
  ma, mb = rng.standard_normal((m, m)).astype(np.float32), rng.standard_normal((m, m)).astype(np.float32)
  lane = np.arange(4096) % 32
  def ballot(p):
    return np.array([sum(int(b) << j for j, b in enumerate(p[w * 32:(w + 1) * 32])) for w in range(p.size // 32)], np.uint64).astype(np.uint32)
  def collatz(v):
    out = []
    for x in v.tolist():
      x, n = x & 0xffff | 1, 0
      while x != 1 and n < 1000: x, n = (x // 2 if x % 2 == 0 else 3 * x + 1), n + 1
      out.append(n)
    return np.array(out, np.int32)
  yield "reduce_shared", lambda: [np.zeros(16, np.float32), f], (16,), (256,), lambda o: np.allclose(o[0], f.reshape(16, 256).sum(1), atol=1e-4)
  yield "reduce_warp_shfl", lambda: [np.zeros(1, np.int32), i], (16,), (256,), lambda o: o[0][0] == i.sum()
  yield "atomic_add_int", lambda: [np.zeros(1, np.int32), i], (16,), (256,), lambda o: o[0][0] == i.sum()
  yield "atomic_ops", lambda: [np.array([0, 1 << 30, -(1 << 30), 0, 0xff, 0, 0, 0], np.int32), i], (16,), (256,), lambda o: (
    o[0][1] == min(i.min(), 1 << 30) and o[0][2] == max(i.max(), -(1 << 30)) and o[0][3] == np.bitwise_xor.reduce(i)
    and o[0][4] == (np.bitwise_or.reduce(i) | 0xff) and o[0][5] == 4096 and o[0][6] == 0xffff)
  yield "atomic_old_values", lambda: [np.zeros(4096, np.uint32), np.zeros(1, np.uint32)], (16,), (256,), lambda o: (
    np.array_equal(np.sort(o[0]), np.arange(4096)) and o[1][0] == 4096)
  yield "atomic_cas_max_float", lambda: [np.array([-np.inf], np.float32), f], (16,), (256,), lambda o: o[0][0] == f.max()
  yield "atomic_add_float_shared", lambda: [np.zeros(16, np.float32), f], (16,), (256,), lambda o: np.allclose(o[0], f.reshape(16, 256).sum(1), atol=1e-3)
  yield "histogram_shared", lambda: [np.zeros(64, np.int32), hist_in], (16,), (256,), lambda o: np.array_equal(o[0], np.bincount(hist_in, minlength=64))
  yield "vote_ballot", lambda: [np.zeros(128, np.uint32), i], (16,), (256,), lambda o: np.array_equal(o[0], ballot(i > 0))
  yield "vote_all_any", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0], np.repeat(
    [(w > -990).all() * 2 + (w > 990).any() for w in i.reshape(-1, 32)], 32))
  yield "shfl_modes", lambda: [np.zeros(4096 * 4, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0].reshape(4, -1), np.stack([
    np.take_along_axis(i.reshape(-1, 32), (np.arange(32) ^ 5)[None].repeat(128, 0), 1).reshape(-1),
    np.where(lane >= 3, np.roll(i, 3), i), np.where(lane < 29, np.roll(i, -3), i), np.repeat(i.reshape(-1, 32)[:, 7], 32)]))
  yield "match_any", lambda: [np.zeros(4096, np.uint32), hist_in & 3], (16,), (256,), lambda o: np.array_equal(o[0], np.concatenate([
    [sum(1 << j for j in range(32) if w[j] == w[k]) for k in range(32)] for w in (hist_in & 3).reshape(-1, 32)]).astype(np.uint32))
  yield "divergent_loop", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0], collatz(i))
  yield "nested_divergence", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0], np.where(
    i > 0, np.where(i % 3 == 0, i * 2, i + 7), np.where(i & 1 == 1, -i, i >> 1)).astype(np.int32))
  yield "early_exit_barrier", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(
    o[0].reshape(16, 256)[:, :128], (i.reshape(16, 256)[:, :128] + i.reshape(16, 256)[:, 127::-1]))
  yield "matmul_tiled", lambda: [np.zeros((m, m), np.float32), ma, mb, np.int32(m)], (m // 16, m // 16), (16, 16), lambda o: np.allclose(o[0], ma @ mb, atol=1e-3)
  yield "transpose_shared", lambda: [np.zeros((m, m), np.float32), ma, np.int32(m)], (m // 16, m // 16), (16, 16), lambda o: np.array_equal(o[0], ma.T)
  yield "scan_shared", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0], np.cumsum(i.reshape(16, 256), 1).reshape(-1).astype(np.int32))
  mix = ((u.astype(np.uint64) * np.uint64(2654435761)) ^ (u.astype(np.uint64) << np.uint64(17))).view(np.int64)
  yield "int64_mix", lambda: [np.zeros(4096, np.int64), u], (16,), (256,), lambda o: np.array_equal(o[0], np.sign(mix) * (np.abs(mix) // 7))
  yield "double_ops", lambda: [np.zeros(1024, np.float64), d], (4,), (256,), lambda o: np.allclose(o[0], np.sqrt(np.abs(d)) * d + 1.0 / (1.0 + d * d), rtol=1e-15)
  yield "byte_short_ops", lambda: [np.zeros(4096, np.uint8), np.zeros(4096, np.int16), i], (16,), (256,), lambda o: (
    np.array_equal(o[0], (i.astype(np.uint8) * np.uint8(3) + np.uint8(1))) and np.array_equal(o[1], (i.astype(np.int16) * np.int16(-5)) >> 1))
  yield "dynamic_shared_reverse", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0], i.reshape(16, 256)[:, ::-1].reshape(-1))
  yield "grid_stride_2d", lambda: [np.zeros((48, 40), np.int32), np.int32(40), np.int32(48)], (3, 4), (8, 8), lambda o: np.array_equal(
    o[0], (np.arange(48)[:, None] * 1000 + np.arange(40)[None, :]).astype(np.int32))
  yield "local_array", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0], np.array(
    [sum(v * (((k * 7 + v) & 15) + 1) for k in range(0, 16, 3)) for v in i.tolist()], np.int64).astype(np.int32))

  # device-function calls
  poly = lambda x, y: (x.astype(np.int64) ** 2 - 3 * y + 7).astype(np.int32)
  gid = np.arange(4096, dtype=np.int64)
  def steps(v):
    out = []
    for x in v.tolist():
      x, n = x | 1, 0
      while x != 1 and n < 500: x, n = ((3 * x + 1) & 0xffffffff if x & 1 else x >> 1), n + 1
      out.append(n)
    return np.array(out, np.int64)
  outer = lambda x: poly(x, x + 1).astype(np.int64) + poly(x >> 2, np.int64(5))
  yield "call_simple", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0], poly(i, gid))
  yield "call_divergent", lambda: [np.zeros(4096, np.int64), i], (16,), (256,), lambda o: np.array_equal(
    o[0], np.where(i > 0, steps(i & 0xffff), poly(i, np.int64(1))))
  yield "call_nested", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(
    o[0], (outer(i.astype(np.int64)) + outer(gid)).astype(np.int32))
  yield "call_mixed_types", lambda: [np.zeros(4096, np.float32), i], (16,), (256,), lambda o: np.array_equal(
    o[0], (i.astype(np.float32) * np.float32(0.5)) * gid.astype(np.float32) + i.astype(np.int16).astype(np.float32))
  # barriers with a thread count and bar.arrive
  blk = i.reshape(16, 256)
  yield "barrier_count", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0].reshape(16, 256), np.concatenate(
    [np.zeros((16, 64), np.int32), blk[:, :64] * 3 + 1, np.full((16, 128), -1, np.int32)], 1))
  yield "barrier_arrive", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0].reshape(16, 256), np.concatenate(
    [np.zeros((16, 64), np.int32), (blk[:, :64] ^ 0x55)[:, ::-1], np.full((16, 128), -2, np.int32)], 1))
  # mad.cc / madc chain: the 128-bit product
  w = rng.integers(0, 1 << 64, 2 * 1024, dtype=np.uint64)
  w[:4] = [0xffffffffffffffff, 0xffffffffffffffff, 0, 0xffffffff00000001]
  prod = [int(x) * int(y) for x, y in zip(w[0::2].tolist(), w[1::2].tolist())]
  want128 = np.array([[p & (2 ** 64 - 1), p >> 64] for p in prod], np.uint64).reshape(-1)
  yield "mad_carry_chain", lambda: [np.zeros(2048, np.uint64), w], (4,), (256,), lambda o: np.array_equal(o[0], want128)
  # module variables: a __device__ table, a zeroed __device__ counter, __constant__ coefficients
  coef, table = np.array([7, -3, 11, 2]), np.array([3, -1, 4, -1, 5, -9, 2, 6])
  yield "module_variables", lambda: [np.zeros(4096, np.int32), np.zeros(4096, np.uint32), i], (16,), (256,), lambda o: (
    np.array_equal(o[0], (i * coef[i & 3] + table[np.arange(4096) & 7]).astype(np.int32)) and np.array_equal(np.sort(o[1]), np.arange(4096)))
  # recursion: rsum(a, n) = a[0] for n = 1, else rsum(a, n / 2) * 3 + rsum(a + n / 2, n - n / 2), in int32
  def rsum(a, n): return int(a[0]) if n == 1 else (rsum(a, n // 2) * 3 + rsum(a[n // 2:], n - n // 2)) & 0xffffffff
  yield "recursive_sum", lambda: [np.zeros(4096, np.int32), i], (16,), (256,), lambda o: np.array_equal(o[0], np.array(
    [rsum(i[g & ~63:], (int(i[g]) & 31) + 1) for g in range(4096)], np.int64).astype(np.uint32).view(np.int32))
  # f16 and bf16 conversions (round to nearest even) and f16 arithmetic (a * a + a: one fma.rn.f16)
  h16 = f.astype(np.float16)
  fbits = f.view(np.uint32)   # not `u`: the int64_mix case's inputs, which its lambda reads when it runs
  bf = ((fbits + np.uint32(0x7fff) + ((fbits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
  yield "half_bf16_convert", lambda: [np.zeros(4096, np.uint16), np.zeros(4096, np.uint16), np.zeros(4096, np.float32), f], (16,), (256,), lambda o: (
    np.array_equal(o[0], (h16.astype(np.float64) * h16 + h16).astype(np.float16).view(np.uint16)) and np.array_equal(o[1], bf)
    and np.array_equal(o[2], h16.astype(np.float32) + (bf.astype(np.uint32) << np.uint32(16)).view(np.float32)))
  # f64: exp within 2 ulp of numpy's (a polynomial of fma steps), sqrt.rn bit-exact
  def exp_sqrt(o):
    e, r = o[0][0::2], o[0][1::2]
    return bool((np.abs(e - np.exp(d)) <= 2 * np.spacing(np.exp(d))).all() and np.array_equal(r, np.sqrt(np.abs(d) + 1.0 / 3.0)))
  yield "f64_exp_sqrt", lambda: [np.zeros(2048, np.float64), d], (4,), (256,), exp_sqrt
  # vote.uni and match.all per warp: half the warps uniform, half not
  vw = np.where(np.arange(4096) // 32 % 2 == 0, np.repeat(i[::32], 32), i).astype(np.int32)
  vw[64 * 32:64 * 32 + 16] ^= 0x100   # a warp equal in v, not in w
  def vote_want(x):
    out = []
    for wv in x.reshape(-1, 32):
      same_v, same_w = len(set((wv & 1).tolist())) == 1, len(set((wv >> 8).tolist())) == 1
      out += [int(same_v) | int(same_w) << 1 | int(same_w) << 2 | int(same_w) << 3] * 32
    return np.array(out, np.uint32)
  yield "vote_uni_match_all", lambda: [np.zeros(4096, np.uint32), vw], (16,), (256,), lambda o: np.array_equal(o[0], vote_want(vw))
  # atomics: cas and exchange on shared memory, u64 min/max and f64 add on global
  prod = (i.astype(np.int64) * 977).view(np.uint64)
  yield "atomics_mixed", lambda: [np.array([2 ** 64 - 1, 0, 0, 0] + [0] * 16, np.uint64), np.zeros(1, np.float64), i], (16,), (256,), lambda o: (
    o[0][0] == prod.min() and o[0][1] == prod.max() and (o[0][4:] == 4).all() and o[1][0] == i.sum())
  # mma.sync: D = A @ B + C from numpy on the same (exactly representable) inputs
  for name, (k, fmt) in MMA.items():
    A, B, C, ab = mma_inputs(rng, k, fmt)
    want = (A.astype(np.float64) @ B.astype(np.float64) + C).astype(np.float32)
    yield name, (lambda ab=ab, C=C: [np.zeros((16, 8), np.float32), *ab, C.astype(np.float32)]), (1,), (32,), (
      lambda o, want=want: np.allclose(o[0], want, rtol=1e-6, atol=1e-6))


MMA = {"mma_f16_m16n8k16": (16, "f16"), "mma_bf16_m16n8k16": (16, "bf16"), "mma_f16_m16n8k8": (8, "f16"),
       "mma_bf16_m16n8k8": (8, "bf16"), "mma_tf32_m16n8k8": (8, "tf32")}


def mma_inputs(rng, k: int, fmt: str):
  """A (16xk), B (kx8) in fmt as float64 values, C (16x8) f32, and A, B as the raw arrays the kernel reads."""
  A, B = rng.standard_normal((16, k)), rng.standard_normal((k, 8))
  C = rng.standard_normal((16, 8)).astype(np.float32).astype(np.float64)
  if fmt == "f16":
    raw = [A.astype(np.float16), B.astype(np.float16)]
    return raw[0].astype(np.float64), raw[1].astype(np.float64), C, [x.view(np.uint16) for x in raw]
  bits = [x.astype(np.float32).view(np.uint32) & np.uint32(0xffff0000 if fmt == "bf16" else 0xffffe000) for x in (A, B)]
  vals = [x.view(np.float32).astype(np.float64) for x in bits]
  raw = [(x >> np.uint32(16)).astype(np.uint16) for x in bits] if fmt == "bf16" else bits
  return vals[0], vals[1], C, raw
