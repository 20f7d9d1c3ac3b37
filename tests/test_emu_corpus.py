"""Differential corpus: OpenCL C kernels (tests/test_emu_kernels.py) compiled by clang-19 for gfx1100, run in the
emulator, compared with numpy. Exact where the ISA result is exact; within the documented ulp for approximations."""
from __future__ import annotations
import os
import zlib
import subprocess
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from tests.tools import require_module, require_tool

f16, f32, f64, i32, u32, i64, u64 = np.float16, np.float32, np.float64, np.int32, np.uint32, np.int64, np.uint64
SEED_OFFSET = int(os.environ.get("EMU_CORPUS_SEED", "0"))   # vary to draw other inputs
CLANG_FLAGS = ["-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib", "-O2"]




def compile_cl(path: str, out_dir: str, extra: list[str] = ()) -> bytes:
  """OpenCL C -> linked gfx1100 code object (clang-19, ld.lld-19)."""
  clang, lld = require_tool("clang-19"), require_tool("ld.lld-19")
  obj, so = os.path.join(out_dir, "k.o"), os.path.join(out_dir, "k.so")
  subprocess.run([clang, *CLANG_FLAGS, *extra, "-c", path, "-o", obj], check=True, capture_output=True)
  subprocess.run([lld, "-shared", obj, "-o", so], check=True, capture_output=True)
  return open(so, "rb").read()


def corpus_source(tmp_path_factory) -> str:
  """The corpus written out as a .cl file (once per session)."""
  from tests.test_emu_kernels import SOURCE
  path = tmp_path_factory.getbasetemp() / "emu_kernels.cl"
  if not path.exists(): path.write_text(SOURCE)
  return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  from hcq.asm.codeobject import read_code_object
  return read_code_object(compile_cl(corpus_source(tmp_path_factory), str(tmp_path_factory.mktemp("emu"))))


@dataclass
class Case:
  name: str
  make: Callable          # rng -> list of args
  ref: Callable           # args (inputs as given) -> {arg index: expected output}
  grid: tuple = (4,)
  local: tuple = (64,)
  ulp: float = 0          # 0: bit-exact (NaN equal to NaN)
  atol: float = 0         # absolute tolerance as well (sin/cos near their zeros)


def _nonzero(x): return np.where(x == 0, 7, x).astype(x.dtype)
def rnd(rng, n, lo=-4, hi=4, dt=f32): return rng.uniform(lo, hi, n).astype(dt)
def ints(rng, n, lo=-2**31, hi=2**31, dt=i32): return rng.integers(lo, hi, n, dtype=np.int64).astype(dt)
N = 256


def _fma(a, b, c):
  from fractions import Fraction
  return np.array([float(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c)]).astype(f32)


def _div_i32(a, b):
  q = np.trunc(a.astype(f64) / b.astype(f64)).astype(i64)
  return q.astype(i32), (a.astype(i64) - q * b.astype(i64)).astype(i32)


CASES = [
  Case("f32_saxpy", lambda r: [rnd(r, N), rnd(r, N), f32(1.5), i32(N - 3)],
       lambda a: {0: np.where(np.arange(N) < N - 3, _fma(np.full(N, 1.5, f32), a[1], a[0]), a[0])}),
  Case("f32_ops", lambda r: [np.zeros(8 * N, f32), rnd(r, N), rnd(r, N)],
       lambda a: {0: np.stack([a[1] + a[2], a[1] - a[2], a[1] * a[2], np.fmin(a[1], a[2]), np.fmax(a[1], a[2]),
                               np.where(a[1] < a[2], a[1], -a[2]), np.abs(a[1]) * 2, np.copysign(a[1], a[2])], 1).reshape(-1)}),
  Case("f32_div", lambda r: [np.zeros(N, f32), rnd(r, N), rnd(r, N, 0.5, 8)], lambda a: {0: a[1] / a[2]}, ulp=2.5),
  Case("f32_sqrt", lambda r: [np.zeros(N, f32), rnd(r, N, 0, 100)], lambda a: {0: np.sqrt(a[1])}),
  Case("f32_round", lambda r: [np.zeros(4 * N, f32), rnd(r, N, -10, 10)],
       lambda a: {0: np.stack([np.floor(a[1]), np.ceil(a[1]), np.trunc(a[1]), np.rint(a[1])], 1).reshape(-1)}),
  Case("f32_math", lambda r: [np.zeros(4 * N, f32), rnd(r, N, -4, 4)],
       lambda a: {0: np.stack([np.exp(a[1].astype(f64)), np.log(a[1].astype(f64) + 5), np.exp2(a[1].astype(f64)),
                               np.log2(a[1].astype(f64) + 5)], 1).reshape(-1).astype(f32)}, ulp=2),
  Case("f32_trig", lambda r: [np.zeros(2 * N, f32), rnd(r, N, -3, 3)],
       lambda a: {0: np.stack([np.sin(a[1].astype(f64)), np.cos(a[1].astype(f64))], 1).reshape(-1).astype(f32)}, ulp=64, atol=1e-6),
  Case("f32_fma", lambda r: [np.zeros(N, f32), rnd(r, N), rnd(r, N), rnd(r, N)], lambda a: {0: _fma(a[1], a[2], a[3])}),
  Case("f32_cvt", lambda r: [np.zeros(2 * N, i32), np.zeros(2 * N, f32), rnd(r, N, -1e5, 1e5), ints(r, N)],
       lambda a: {0: np.stack([np.trunc(a[2]).astype(i32), np.trunc(np.abs(a[2])).astype(u32).view(i32)], 1).reshape(-1),
                  1: np.stack([a[3].astype(f32), a[3].view(u32).astype(f32)], 1).reshape(-1)}),
  Case("f32_relu_clamp", lambda r: [np.zeros(N, f32), rnd(r, N)], lambda a: {0: np.where(a[1] > 0, np.minimum(a[1], f32(1.5)), f32(0.01) * a[1])}),
  Case("f32_poly", lambda r: [np.zeros(N, f32), rnd(r, N, -1, 1)],
       lambda a: {0: _poly(a[1])}),
  Case("f16_ops", lambda r: [np.zeros(4 * N, f16), rnd(r, N, dt=f16), rnd(r, N, dt=f16)],
       lambda a: {0: np.stack([a[1] + a[2], a[1] * a[2], a[1] - a[2], np.maximum(a[1], a[2])], 1).reshape(-1)}),
  Case("f16_cvt", lambda r: [np.zeros(N, f32), np.zeros(N, f16), rnd(r, N, dt=f16), rnd(r, N, -70000, 70000)],
       lambda a: {0: a[2].astype(f32) * 3, 1: a[3].astype(f16)}),
  Case("f16_vec2", lambda r: [np.zeros(2 * N, f16), rnd(r, 2 * N, dt=f16), rnd(r, 2 * N, dt=f16)],
       lambda a: {0: _fma16(a[1], a[2], a[1])}),
  Case("f64_ops", lambda r: [np.zeros(4 * N, f64), rnd(r, N, dt=f64), rnd(r, N, dt=f64)],
       lambda a: {0: np.stack([a[1] + a[2], a[1] * a[2], a[1] - a[2] * 0.5, np.minimum(a[1], a[2])], 1).reshape(-1)}, ulp=0.5),
  Case("f64_div_sqrt", lambda r: [np.zeros(2 * N, f64), rnd(r, N, 0.1, 9, f64), rnd(r, N, 0.5, 8, f64)],
       lambda a: {0: np.stack([a[1] / a[2], np.sqrt(a[1])], 1).reshape(-1)}),
  Case("f64_cvt", lambda r: [np.zeros(2 * N, f64), np.zeros(N, f32), rnd(r, N, -1e6, 1e6), ints(r, N, -2**62, 2**62, i64)],
       lambda a: {0: np.stack([a[2].astype(f64), a[3].astype(f64)], 1).reshape(-1), 1: (a[2].astype(f64) * 1.0000001).astype(f32)}),
  Case("i32_arith", lambda r: [np.zeros(8 * N, i32), ints(r, N), ints(r, N)], lambda a: {0: _i32_arith(a[1], a[2])}),
  Case("i32_div", lambda r: [np.zeros(2 * N, i32), ints(r, N), _nonzero(ints(r, N, -1000, 1000))],
       lambda a: {0: np.stack(_div_i32(a[1], a[2]), 1).reshape(-1)}),
  Case("u32_div", lambda r: [np.zeros(2 * N, u32), ints(r, N, 0, 2**32, u32), ints(r, N, 1, 2**32, u32)],
       lambda a: {0: np.stack([a[1] // a[2], a[1] % a[2]], 1).reshape(-1)}),
  Case("i32_bits", lambda r: [np.zeros(4 * N, i32), np.r_[0, ints(r, N - 1, 0, 2**32, u32)].astype(u32)], lambda a: {0: _bits(a[1])}),
  Case("i32_small", lambda r: [np.zeros(N, np.uint8), np.zeros(N, np.uint16), ints(r, N, 0, 256, np.uint8), ints(r, N, -2**15, 2**15, np.int16)],
       lambda a: {0: (a[2].astype(i32) * 3 + 1).astype(np.uint8), 1: (a[3].astype(i32) * 2 - a[2]).astype(np.uint16)}),
  Case("i64_arith", lambda r: [np.zeros(6 * N, i64), ints(r, N, -2**63, 2**63, i64), ints(r, N, -2**63, 2**63, i64)], lambda a: {0: _i64_arith(a[1], a[2])}),
  Case("i64_div", lambda r: [np.zeros(2 * N, u64), r.integers(0, 2**64, N, dtype=u64), np.r_[r.integers(1, 2**64, N // 2, dtype=u64), r.integers(1, 2**20, N // 2, dtype=u64)]],
       lambda a: {0: np.stack([a[1] // a[2], a[1] % a[2]], 1).reshape(-1)}),
  Case("i64_sdiv", lambda r: [np.zeros(N, i64), ints(r, N, -2**62, 2**62, i64), _nonzero(ints(r, N, -2**40, 2**40, i64))],
       lambda a: {0: np.array([abs(int(x)) // abs(int(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(a[1], a[2])], i64)}),
  Case("cf_ifelse", lambda r: [np.zeros(N, i32), ints(r, N, -1000, 1000)], lambda a: {0: _ifelse(a[1])}),
  Case("cf_collatz", lambda r: [np.zeros(N, i32), ints(r, N, 1, 10000)], lambda a: {0: _collatz(a[1])}),
  Case("cf_nested", lambda r: [np.zeros(N, i32), ints(r, N, 0, 100)], lambda a: {0: _nested(a[1])}),
  Case("cf_switch", lambda r: [np.zeros(N, i32), ints(r, N, -1000, 1000)], lambda a: {0: _switch(a[1])}),
  Case("cf_early_return", lambda r: [np.full(N, -7, i32), ints(r, N, -100, 100)], lambda a: {0: np.where(a[1] < 0, -7, a[1] + 1)}),
  Case("lds_reduce", lambda r: [np.zeros(4, f32), rnd(r, 1024)], lambda a: {0: _tree_sum(a[1].reshape(4, 256))}, grid=(4,), local=(256,)),
  Case("lds_reverse", lambda r: [np.zeros(N, i32), ints(r, N)], lambda a: {0: a[1].reshape(-1, 128)[:, ::-1].reshape(-1)}, grid=(2,), local=(128,)),
  Case("lds_scan", lambda r: [np.zeros(N, i32), ints(r, N, -1000, 1000)], lambda a: {0: np.cumsum(a[1].reshape(-1, 64), 1).reshape(-1).astype(i32)}),
  Case("lds_matmul", lambda r: [np.zeros(32 * 32, f32), rnd(r, 32 * 32, -1, 1), rnd(r, 32 * 32, -1, 1), i32(32)],
       lambda a: {0: _matmul_ref(a[1].reshape(32, 32), a[2].reshape(32, 32)).reshape(-1)}, grid=(2, 2), local=(16, 16)),
  Case("atom_hist", lambda r: [np.zeros(16, u32), ints(r, N, 0, 2**32, u32)], lambda a: {0: np.bincount(a[1] & 15, minlength=16).astype(u32)}),
  Case("atom_minmax", lambda r: [np.array([-2**31, 2**31 - 1, 0, 0], i32), ints(r, N)],
       lambda a: {0: np.array([a[1].max(), a[1].min(), np.bitwise_or.reduce(np.left_shift(1, a[1] & 31).astype(u32)).view(i32), np.bitwise_xor.reduce(a[1])], i32)}),
  Case("atom_ret", lambda r: [np.zeros(N, u32), np.zeros(1, u32)], lambda a: {1: np.array([N], u32)}),
  Case("atom_cas_float", lambda r: [np.zeros(1, f32), (ints(r, N, -64, 64) / 4).astype(f32)], lambda a: {0: np.array([a[1].sum()], f32)}),
  Case("atom_lds_hist", lambda r: [np.zeros(16, u32), ints(r, N, 0, 2**32, u32)], lambda a: {0: np.bincount(a[1] & 15, minlength=16).astype(u32)}),
  Case("atom_lds_cas", lambda r: [np.zeros(4, u32), ints(r, N, 0, 1000, u32)], lambda a: {0: a[1].reshape(4, 64).sum(1).astype(u32)}),
  Case("mem_private", lambda r: [np.zeros(N, i32), ints(r, N, 0, 2**10)],
       lambda a: {0: (a[1][a[1] & 31] + a[1][(a[1] >> 5) & 31]) * (np.arange(N) + 1)}),
  Case("mem_float4", lambda r: [np.zeros(4 * N, f32), rnd(r, 4 * N)],
       lambda a: {0: (lambda v: np.stack([v[:, 3], v[:, 2] * 2, v[:, 1] + v[:, 0], v[:, 0]], 1))(a[1].reshape(-1, 4)).reshape(-1)}),
  Case("mem_2d", lambda r: [np.zeros(32 * 16, i32)], lambda a: {0: (np.arange(16)[:, None] * 1000 + np.arange(32)[None, :]).reshape(-1)},
       grid=(4, 4), local=(8, 4)),
  Case("wmma_f16", lambda r: [np.zeros(256, f32), rnd(r, 256, -2, 2, f16), rnd(r, 256, -2, 2, f16), rnd(r, 256)],
       lambda a: {0: (a[1].astype(f64).reshape(16, 16) @ a[2].astype(f64).reshape(16, 16) + a[3].reshape(16, 16)).astype(f32).reshape(-1)},
       grid=(1,), local=(32,), ulp=1),
  Case("wmma_iu8", lambda r: [np.zeros(256, i32), ints(r, 256, -128, 128, np.int8), ints(r, 256, -128, 128, np.int8), ints(r, 256, -2**20, 2**20)],
       lambda a: {0: (a[1].astype(i64).reshape(16, 16) @ a[2].astype(i64).reshape(16, 16) + a[3].reshape(16, 16)).astype(i32).reshape(-1)},
       grid=(1,), local=(32,)),
  Case("mem_gather", lambda r: [np.zeros(N, f32), rnd(r, N), ints(r, N, 0, N)], lambda a: {0: a[1][a[2]]}),
]


def _poly(x):
  r = np.zeros_like(x)
  for k in range(8): r = _fma(r, x, np.full_like(x, k + 1))
  return r


def _fma16(a, b, c): return (a.astype(f64) * b.astype(f64) + c.astype(f64)).astype(f16)
def _tree_sum(x):
  x = x.copy()
  k = 128
  while k: x[:, :k] = x[:, :k] + x[:, k:2 * k]; k //= 2
  return x[:, 0]


def _matmul_ref(a, b):
  c = np.zeros((a.shape[0], b.shape[1]), f32)
  for k in range(a.shape[1]): c = _fma(np.repeat(a[:, k], b.shape[1]), np.tile(b[k], a.shape[0]), c.reshape(-1)).reshape(c.shape)
  return c


def _i32_arith(x, y):
  xi, yi = x.astype(i64), y.astype(i64)
  out = [(xi + yi), (xi * yi), x ^ (y << (3)), x >> (y & 31), (x.view(u32) >> (y & 31).astype(u32)).view(i32),
         np.minimum(x, y).astype(i64) + np.maximum(x, y), np.abs(xi), (xi * yi) >> 32]
  return np.stack([np.asarray(o).astype(i64).astype(np.uint64).astype(u32).view(i32) if np.asarray(o).dtype != i32 else o for o in out], 1).reshape(-1)


def _bits(x):
  pc = np.array([bin(int(v)).count("1") for v in x])
  clz = np.array([32 - int(v).bit_length() for v in x])
  ctz = np.array([(int(v) & -int(v)).bit_length() - 1 if v else 32 for v in x])
  return np.stack([pc, clz, ctz, ((x >> 5) & 0x3ff) | (x << 27)], 1).astype(np.int64).astype(u32).view(i32).reshape(-1)


def _i64_arith(x, y):
  m = lambda v: np.array([((int(a)) + 2**63) % 2**64 - 2**63 for a in v], i64)
  xs, ys = [int(a) for a in x], [int(b) for b in y]
  cols = [m([a + b for a, b in zip(xs, ys)]), m([a * b for a, b in zip(xs, ys)]), m([a - b for a, b in zip(xs, ys)]),
          np.array([a >> (b & 63) for a, b in zip(xs, ys)], i64), np.minimum(x, y), m([((a % 2**64) >> 3) ^ b for a, b in zip(xs, ys)])]
  return np.stack(cols, 1).reshape(-1)


def _ifelse(a):
  out = []
  for i, x in enumerate(a.tolist()):
    if i & 1:
      x = x * 3 + 1
      if x & 4: x -= 100
    else: x = int(x / 2)
    out.append(x)
  return np.array(out, i32)


def _collatz(a):
  out = []
  for x in a.tolist():
    s = 0
    while x > 1 and s < 1000: x = 3 * x + 1 if x & 1 else x // 2; s += 1
    out.append(s)
  return np.array(out, i32)


def _nested(a):
  out = []
  for i, v in enumerate(a.tolist()):
    acc = 0
    for j in range(v & 15):
      if j == 7: break
      for k in range(j):
        if (k ^ i) & 1: continue
        acc += k * j
    out.append(acc)
  return np.array(out, i32)


def _switch(a):
  out = []
  for x in a.tolist():
    c = x & 7
    out.append(10 if c == 0 else x * 2 if c == 1 else -x if c in (2, 3) else x >> 2 if c == 5 else 7)
  return np.array(out, i32)


def _equal(got, exp, ulp, atol=0.0):
  got, exp = np.asarray(got), np.asarray(exp).astype(got.dtype)
  if got.dtype.kind != "f" or ulp == 0:
    if got.dtype.kind == "f": return np.array_equal(got.view(f"u{got.itemsize}"), exp.view(f"u{got.itemsize}")) or np.array_equal(got, exp, equal_nan=True)
    return np.array_equal(got, exp)
  sp = np.spacing(np.abs(exp)).astype(f64)
  return bool(np.all((np.abs(got.astype(f64) - exp.astype(f64)) <= np.maximum(ulp * sp, atol)) | (np.isnan(got) & np.isnan(exp))))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus(corpus, case: Case):
  from hcq.asm.emu import run
  rng = np.random.default_rng(zlib.crc32(case.name.encode()) + SEED_OFFSET)
  args = case.make(rng)
  inputs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
  run(corpus, args, case.grid, case.local, kernel=case.name, max_instructions=10**8)
  with np.errstate(all="ignore"): expected = case.ref(inputs)
  for idx, exp in expected.items():
    got = args[idx]
    if not _equal(got, exp, case.ulp, case.atol):
      bad = np.nonzero(~np.isclose(got.astype(f64), np.asarray(exp).astype(f64), rtol=0, atol=0, equal_nan=True))[0][:5]
      pytest.fail(f"{case.name} arg {idx}: first mismatches at {bad.tolist()}: got {got[bad].tolist()}, expected {np.asarray(exp)[bad].tolist()}")


def test_corpus_size():
  assert len(CASES) >= 30


@pytest.fixture(scope="module")
def corpus64(tmp_path_factory):
  from hcq.asm.codeobject import read_code_object
  return read_code_object(compile_cl(corpus_source(tmp_path_factory), str(tmp_path_factory.mktemp("emu64")), ["-mwavefrontsize64"]))


WAVE64 = ["f32_ops", "i32_div", "i64_div", "cf_collatz", "cf_nested", "lds_reduce", "lds_scan", "lds_matmul", "atom_hist", "atom_ret",
          "atom_cas_float", "mem_private", "mem_2d", "f16_vec2", "f64_div_sqrt", "wmma_f16", "wmma_iu8"]


def wave64_case(name: str) -> Case:
  """A corpus case for wave64 code: the WMMA kernels need one full wave of 64 lanes."""
  import dataclasses
  case = next(c for c in CASES if c.name == name)
  return dataclasses.replace(case, local=(64,)) if name.startswith("wmma") else case


@pytest.mark.parametrize("name", WAVE64)
def test_corpus_wave64(corpus64, name):
  assert corpus64.kernels[name].wavefront_size == 64
  test_corpus(corpus64, wave64_case(name))


@pytest.fixture(scope="module")
def corpus_dpp(tmp_path_factory):
  """The corpus with LLVM's DPP atomic optimizer: wave reductions through DPP row ops and v_permlanex16."""
  from hcq.asm.codeobject import read_code_object
  return read_code_object(compile_cl(corpus_source(tmp_path_factory), str(tmp_path_factory.mktemp("emudpp")),
                                     ["-mllvm", "-amdgpu-atomic-optimizer-strategy=DPP"]))


@pytest.mark.parametrize("name", [c.name for c in CASES if c.name.startswith("atom_")])
def test_corpus_dpp_atomics(corpus_dpp, name):
  test_corpus(corpus_dpp, next(c for c in CASES if c.name == name))


def llvmlite_corpus(tmp_path_factory, mcpu: str):
  """The corpus through clang-19's IR and llvmlite's newer LLVM for `mcpu` (an ET_REL object; true16 code on gfx11+)."""
  from hcq.asm.codeobject import read_code_object
  llvm = require_module("llvmlite.binding")
  for init in ("initialize_all_targets", "initialize_all_asmprinters"):
    if hasattr(llvm, init): getattr(llvm, init)()
  ll = str(tmp_path_factory.mktemp(f"emull_{mcpu}") / "k.ll")
  subprocess.run([require_tool("clang-19"), *CLANG_FLAGS, f"-mcpu={mcpu}", "-S", "-emit-llvm", corpus_source(tmp_path_factory), "-o", ll],
                 check=True, capture_output=True)
  tm = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu=mcpu, opt=2)
  return read_code_object(tm.emit_object(llvm.parse_assembly(open(ll).read())))


@pytest.fixture(scope="module")
def corpus_llvmlite(tmp_path_factory):
  return llvmlite_corpus(tmp_path_factory, "gfx1100")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_llvmlite(corpus_llvmlite, case):
  test_corpus(corpus_llvmlite, case)


DIV_SRC = r"""
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define GID() (__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x())
__kernel void fdiv(__global float* o, __global const float* a, __global const float* b) { o[GID()] = a[GID()] / b[GID()]; }
__kernel void fsqrt(__global float* o, __global const float* a, __global const float* b) { o[GID()] = sqrt(a[GID()]); }
__kernel void ddiv(__global double* o, __global const double* a, __global const double* b) { o[GID()] = a[GID()] / b[GID()]; }
__kernel void dsqrt(__global double* o, __global const double* a, __global const double* b) { o[GID()] = sqrt(a[GID()]); }
"""


@pytest.mark.parametrize("kernel", ["fdiv", "fsqrt", "ddiv", "dsqrt"])
def test_correctly_rounded_div_sqrt_full_range(tmp_path, kernel):
  """-cl-fp32-correctly-rounded-divide-sqrt and f64: LLVM's div_scale/rcp/fma/div_fmas/div_fixup sequences (and the sqrt
  expansions) must give IEEE results over the whole exponent range, subnormals, overflow and specials included."""
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  (tmp_path / "d.cl").write_text(DIV_SRC)
  co = read_code_object(compile_cl(str(tmp_path / "d.cl"), str(tmp_path), ["-cl-fp32-correctly-rounded-divide-sqrt"]))
  dt, (lo, hi) = (f32, (-150, 128)) if kernel[0] == "f" else (f64, (-1075, 1024))
  rng = np.random.default_rng(7)
  n = 4096
  mk = lambda: (rng.choice([-1, 1], n) * np.ldexp(rng.uniform(1, 2, n), rng.integers(lo, hi, n))).astype(dt)
  a, b = mk(), mk()
  if kernel.endswith("sqrt"): a = np.abs(a)
  a[:8], b[:8] = [0, -0.0, np.inf, 1, 1, np.nan, 5e-324 if dt == f64 else 1e-45, 3], [1, 1, 2, 0, -0.0, 1, 3, np.inf]
  o = np.zeros(n, dt)
  run(co, [o, a, b], (n // 64,), (64,), kernel=kernel)
  with np.errstate(all="ignore"): exp = np.sqrt(a) if kernel.endswith("sqrt") else a / b
  bad = np.nonzero(~((o == exp) | (np.isnan(o) & np.isnan(exp))))[0]
  assert bad.size == 0, f"{kernel}: {bad.size} wrong, e.g. {[(a[i], b[i], o[i], exp[i]) for i in bad[:4]]}"


FLAT_SRC = r"""
__attribute__((noinline)) int sum3(int* p, int k) { return p[k] + p[k + 1] + p[k + 2]; }
__kernel void flat(__global int* out, __global int* in) {
  __local int lds[64]; int priv[8]; int l = __builtin_amdgcn_workitem_id_x();
  lds[l] = in[l] * 2; for (int i = 0; i < 8; i++) priv[i] = in[i] + l;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  int* g = (l & 1) ? (int*)lds : (l & 2) ? (int*)priv : (int*)in;
  out[l] = sum3(g, l & 3); }
"""


def test_generic_pointers_and_calls(tmp_path):
  """OpenCL 2.0 generic pointers into LDS, private memory and global memory (flat_* through the apertures
  src_shared_base / src_private_base), read in a real function call (s_swappc_b64 / s_setpc_b64, stack in scratch)."""
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  (tmp_path / "f.cl").write_text(FLAT_SRC)
  co = read_code_object(compile_cl(str(tmp_path / "f.cl"), str(tmp_path), ["-cl-std=CL2.0"]))
  inp, out = np.arange(64, dtype=i32) * 3 + 1, np.zeros(64, i32)
  run(co, [out, inp], (1,), (64,), kernel="flat")
  srcs = [inp * 2 if l & 1 else inp[:8] + l if l & 2 else inp for l in range(64)]
  assert (out == [s[l & 3] + s[(l & 3) + 1] + s[(l & 3) + 2] for l, s in enumerate(srcs)]).all()
