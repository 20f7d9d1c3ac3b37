"""Differential corpus for the emulated SM: LLVM IR through llvmlite's NVPTX backend and CUDA C++ through clang-19,
run on the SM and compared with the host (the same IR JIT-compiled by llvmlite, numpy, exact rationals).
Integers and correctly rounded float operations bit-exact; .approx operations within the PTX ISA's bounds.
HCQ_NV_SM_RANDOM=N runs N random programs (default 50)."""
from __future__ import annotations
import ctypes
import math
import os
import sys
from fractions import Fraction

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "nv_sm_corpus"))
import cuda_cases as CC  # noqa: E402
import ir_cases as C  # noqa: E402
from cuda_cases import cuda_cases, mma_inputs  # noqa: E402
from tests.nv_sm_tools import HostJIT, cuda_to_ptx, ir_to_ptx, launch  # noqa: E402

from hcq.drivers.mock.nv.sm import PTXModule  # noqa: E402

N = 256
NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "float": np.float32, "double": np.float64,
      "half": np.float16, "bfloat": np.uint16}


def ints(t: str, rng, n: int = N) -> np.ndarray:
  dt = NP[t]
  info = np.iinfo(dt)
  v = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
  special = np.array([0, 1, -1, info.min, info.max, 2, info.min + 1, 7], dt)
  v[:special.size] = special
  v[special.size:2 * special.size] = rng.integers(-40, 40, special.size)   # small values: shifts, near-equal compares
  return v


def floats(t: str, rng, n: int = N) -> np.ndarray:
  dt = NP[t]
  fi = np.finfo(dt)
  span = 8 if t == "half" else 20   # f16 tops out at 65504
  v = (rng.standard_normal(n) * np.exp2(rng.integers(-span, span, n))).astype(dt)
  special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, fi.tiny, -fi.tiny / 4, fi.max, 1.0, -1.5, 2.5, 0.5, 3.0], dt)
  v[:special.size] = special
  v[special.size:2 * special.size] = rng.permutation(special)
  return v


def same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """Equal bit for bit, any NaN matching any NaN (PTX returns the canonical NaN, a host keeps payloads)."""
  if got.dtype.kind == "f": return (got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")) | (np.isnan(got) & np.isnan(want))
  return got == want


def run_group(cases: dict, inputs, arch: str = "sm_80", helpers: str = ""):
  """Compile cases (name -> (arg types, result type, body)) for the SM and the host, run both; yields
  (name, sm result, host result, args)."""
  dev, host = C.module(cases, helpers)
  mod = PTXModule.parse(ir_to_ptx(dev, arch), "corpus.ptx")
  jit = HostJIT(host)
  for name, (targs, tout, _) in cases.items():
    args = [inputs(t, k) for k, t in enumerate(targs)]
    out_sm, out_host = np.zeros(N, NP[tout]), np.zeros(N, NP[tout])
    launch(mod, name, [out_sm] + args, (N // 128,), (128,), local_bytes=1024)   # a recursive case's stack: 1 KiB, the NV default
    f = jit.fn(f"host_{name}", None, *([ctypes.c_void_p] * (1 + len(targs))), ctypes.c_int64)
    f(out_host.ctypes.data, *[a.ctypes.data for a in args], N)
    yield name, out_sm, out_host, args


@pytest.mark.parametrize("t", C.INT)
def test_integer_ops_match_host(t):
  rng = np.random.default_rng(BITS_SEED := C.BITS[t])
  cases = {f"{k}_{t}": ([t, t, t], rt, body) for k, (rt, body) in C.int_cases(t).items()}
  data = [ints(t, rng) for _ in range(3)]
  bad = [(n, np.argmax(~same_bits(s, h))) for n, s, h, _ in run_group(cases, lambda ty, k: data[k]) if not same_bits(s, h).all()]
  assert not bad, f"{t}: results differ from the host in {bad}"


def test_integer_conversions_match_host():
  rng = np.random.default_rng(1)
  cases = {k: ([s], d, body) for k, (s, d, body) in C.conv_cases().items()}
  bad = [n for n, s, h, _ in run_group(cases, lambda ty, k: ints(ty, rng)) if not same_bits(s, h).all()]
  assert not bad, f"conversions differ from the host: {bad}"


@pytest.mark.parametrize("t", C.FLOAT)
def test_float_ops_match_host_bit_exact(t):
  rng = np.random.default_rng(2)
  data = [floats(t, rng) for _ in range(3)]
  cases = {f"{k}_{t}": ([t, t, t], rt, body) for k, (rt, body) in C.float_cases(t).items()}
  bad = []
  for n, s, h, args in run_group(cases, lambda ty, k: data[k]):
    ok = same_bits(s, h)
    if n.startswith(("minnum", "maxnum")): ok |= (s == 0) & (h == 0)   # LLVM leaves the sign of a zero result open here
    if not ok.all():
      i = int(np.argmax(~ok))
      bad.append(f"{n}[{i}]: SM {s[i]!r} host {h[i]!r} from {[a[i] for a in args]}")
  assert not bad, "\n".join(bad)


def test_float_conversions_match_host():
  rng = np.random.default_rng(3)
  cases = {k: ([s], d, body) for k, (s, d, body) in C.fconv_cases().items()}
  def inputs(ty, k):
    if ty in C.FLOAT:
      v = floats(ty, rng)
      v[20:60] = (rng.standard_normal(40) * 2.0 ** rng.integers(0, 70, 40)).astype(NP[ty])   # near and past the int ranges
      return v
    return ints(ty, rng)
  bad = []
  for n, s, h, args in run_group(cases, inputs):
    ok = same_bits(s, h)
    if not ok.all():
      i = int(np.argmax(~ok))
      bad.append(f"{n}[{i}]: SM {s[i]!r} host {h[i]!r} from {args[0][i]!r}")
  assert not bad, "\n".join(bad)


def test_device_function_calls_match_host():
  """Calls of noinline functions (a loop, several returns, a struct return, nested calls, mixed argument types)."""
  rng = np.random.default_rng(11)
  def inputs(ty, k):
    if ty in ("float", "double"): return floats(ty, rng)
    v = ints(ty, rng)
    return v if ty != "i32" or k != 1 else v & 0x7fff   # small divisors: gcd loops of a few steps
  bad = [(n, int(np.argmax(~same_bits(s, h)))) for n, s, h, _ in run_group(C.call_cases(), inputs, helpers=C.HELPERS)
         if not same_bits(s, h).all()]
  assert not bad, f"calls differ from the host: {bad}"


BARRIER_IR = r"""target triple = "nvptx64-nvidia-cuda"
@s = internal addrspace(3) global [64 x i32] undef, align 4
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare void @llvm.nvvm.barrier.cta.sync.count(i32, i32)
declare void @llvm.nvvm.barrier.cta.arrive.count(i32, i32)
define void @produce_consume(ptr addrspace(1) %out, ptr addrspace(1) %in) {
entry:
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %b256 = mul i32 %b, 256
  %g = add i32 %b256, %t
  %g64 = zext i32 %g to i64
  %po = getelementptr i32, ptr addrspace(1) %out, i64 %g64
  %isprod = icmp ult i32 %t, 64
  br i1 %isprod, label %prod, label %notprod
prod:
  %pi = getelementptr i32, ptr addrspace(1) %in, i64 %g64
  %v = load i32, ptr addrspace(1) %pi
  %v3 = mul i32 %v, 3
  %t64 = zext i32 %t to i64
  %ps = getelementptr [64 x i32], ptr addrspace(3) @s, i64 0, i64 %t64
  store i32 %v3, ptr addrspace(3) %ps
  call void @llvm.nvvm.barrier.cta.arrive.count(i32 1, i32 128)
  store i32 0, ptr addrspace(1) %po
  ret void
notprod:
  %iscons = icmp ult i32 %t, 128
  br i1 %iscons, label %cons, label %idle
cons:
  call void @llvm.nvvm.barrier.cta.sync.count(i32 1, i32 128)
  %r = sub i32 127, %t
  %r64 = zext i32 %r to i64
  %pr = getelementptr [64 x i32], ptr addrspace(3) @s, i64 0, i64 %r64
  %w = load i32, ptr addrspace(3) %pr
  %w1 = add i32 %w, 1
  store i32 %w1, ptr addrspace(1) %po
  ret void
idle:
  store i32 -1, ptr addrspace(1) %po
  ret void
}
!nvvm.annotations = !{!0}
!0 = !{ptr @produce_consume, !"kernel", i32 1}
"""


def test_counted_barrier_and_arrive_from_llvm_ir():
  """barrier.cta.arrive.count / sync.count through llvmlite: warps 0-1 produce and arrive, warps 2-3 wait and read
  what they wrote, warps 4-7 never take part (the barrier completes with 128 threads)."""
  ptx = ir_to_ptx(BARRIER_IR, "sm_80")
  assert "barrier.arrive" in ptx and "barrier.sync" in ptx
  x = np.random.default_rng(13).integers(-1000, 1000, 8 * 256).astype(np.int32)
  out = np.zeros_like(x)
  launch(PTXModule.parse(ptx, "barrier.ptx"), "produce_consume", [out, x], (8,), (256,))
  blk = x.reshape(8, 256)
  want = np.concatenate([np.zeros((8, 64), np.int32), blk[:, 63::-1] * 3 + 1, np.full((8, 128), -1, np.int32)], 1)
  np.testing.assert_array_equal(out.reshape(8, 256), want)

MMA_IR = {  # PTX form -> (LLVM intrinsic, A registers, B registers, fragment register type in the IR)
  "m16n8k16_f16": ("llvm.nvvm.mma.m16n8k16.row.col.f32.f32", 4, 2, "<2 x half>"),
  "m16n8k16_bf16": ("llvm.nvvm.mma.m16n8k16.row.col.bf16", 4, 2, "i32"),
  "m16n8k8_f16": ("llvm.nvvm.mma.m16n8k8.row.col.f32.f32", 2, 1, "<2 x half>"),
  "m16n8k8_bf16": ("llvm.nvvm.mma.m16n8k8.row.col.bf16", 2, 1, "i32"),
  "m16n8k8_tf32": ("llvm.nvvm.mma.m16n8k8.row.col.tf32", 4, 2, "i32"),
}


def isa_position(form: str, operand: str, lane: int, i: int) -> tuple[int, int]:
  """(row, column) of element i of a lane's fragment, as the PTX ISA's "Matrix Fragments for mma.m16n8k16 / k8"
  sections state them (written out here, independently of the emulated SM)."""
  g, t = lane >> 2, lane % 4
  if operand == "C": return (g if i < 2 else g + 8), t * 2 + (i & 1)
  if form.endswith("tf32"):
    if operand == "A": return (g if i in (0, 2) else g + 8), (t if i in (0, 1) else t + 4)
    return (t if i == 0 else t + 4), g
  if form.startswith("m16n8k16"):
    if operand == "A": return (g if i in (0, 1, 4, 5) else g + 8), t * 2 + (i & 1) + (8 if i >= 4 else 0)
    return t * 2 + (i & 1) + (8 if i >= 2 else 0), g
  if operand == "A": return (g if i < 2 else g + 8), t * 2 + (i & 1)
  return t * 2 + i, g


def mma_ir(name: str, intr: str, na: int, nb: int, ft: str) -> str:
  """A kernel: each lane loads its na + nb fragment words and 4 accumulators, runs the intrinsic, stores its 4 results."""
  n = na + nb
  lines = ["%l = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()", "%l64 = zext i32 %l to i64", f"%ab0 = mul i64 %l64, {n}", "%c0 = mul i64 %l64, 4"]
  for j in range(n):
    lines += [f"%ia{j} = add i64 %ab0, {j}", f"%pa{j} = getelementptr i32, ptr addrspace(1) %ab, i64 %ia{j}", f"%w{j} = load i32, ptr addrspace(1) %pa{j}"]
    lines += [f"%v{j} = bitcast i32 %w{j} to {ft}"] if ft != "i32" else [f"%v{j} = add i32 %w{j}, 0"]
  for j in range(4):
    lines += [f"%ic{j} = add i64 %c0, {j}", f"%pc{j} = getelementptr float, ptr addrspace(1) %c, i64 %ic{j}", f"%f{j} = load float, ptr addrspace(1) %pc{j}"]
  args = ", ".join([f"{ft} %v{j}" for j in range(n)] + [f"float %f{j}" for j in range(4)])
  lines.append(f"%r = call {{float, float, float, float}} @{intr}({args})")
  for j in range(4):
    lines += [f"%d{j} = extractvalue {{float, float, float, float}} %r, {j}", f"%po{j} = getelementptr float, ptr addrspace(1) %out, i64 %ic{j}",
              f"store float %d{j}, ptr addrspace(1) %po{j}"]
  sig = ", ".join([ft] * n + ["float"] * 4)
  return (f"declare {{float, float, float, float}} @{intr}({sig})\n"
          f"define void @{name}(ptr addrspace(1) %out, ptr addrspace(1) %ab, ptr addrspace(1) %c) {{\n" + "\n".join(lines) + "\nret void\n}\n")


@pytest.mark.parametrize("form", list(MMA_IR))
def test_mma_from_llvm_ir_matches_numpy(form):
  """mma.sync through llvmlite's NVPTX intrinsics: fragments laid out and D read back by the ISA's positions."""
  intr, na, nb, ft = MMA_IR[form]
  k = int(form.split("_")[0].split("k")[1])
  ab = form.split("_")[1]
  rng = np.random.default_rng(12)
  A, B, C, _ = mma_inputs(rng, k, ab)
  per = 1 if ab == "tf32" else 2   # elements per .b32 register
  bits = lambda v: int(np.float16(v).view(np.uint16)) if ab == "f16" else int(np.float32(v).view(np.uint32)) >> (16 if ab == "bf16" else 0)
  words = np.zeros((32, na + nb), np.uint32)
  cfrag = np.zeros((32, 4), np.float32)
  for lane in range(32):
    for opnd, M, nreg, base in (("A", A, na, 0), ("B", B, nb, na)):
      for i in range(nreg * per):
        r, c = isa_position(form, opnd, lane, i)
        words[lane, base + i // per] |= np.uint32(bits(M[r, c]) << (16 * (i % per)))
    for i in range(4): cfrag[lane, i] = C[isa_position(form, "C", lane, i)]
  ir = ('target triple = "nvptx64-nvidia-cuda"\ndeclare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n' + mma_ir("mma", intr, na, nb, ft) +
        '!nvvm.annotations = !{!0}\n!0 = !{ptr @mma, !"kernel", i32 1}\n')
  mod = PTXModule.parse(ir_to_ptx(ir, "sm_80"), f"mma_{form}.ptx")
  assert any(i.op == "mma" for i in mod.kernels["mma"].instrs)
  out = np.zeros((32, 4), np.float32)
  launch(mod, "mma", [out, words, cfrag], (1,), (32,))
  D = np.zeros((16, 8))
  for lane in range(32):
    for i in range(4): D[isa_position(form, "C", lane, i)] = out[lane, i]
  np.testing.assert_allclose(D, A @ B + C, rtol=1e-6, atol=1e-6)

# --- exact references ---------------------------------------------------------------------------------------------
FORMATS = {"f64": (53, -1022, 1023), "f32": (24, -126, 127), "f16": (11, -14, 15), "bf16": (8, -126, 127)}


def round_exact(x: Fraction, fmt: str, mode: str) -> float:
  """x rounded to fmt by mode (rn: ties to even), with subnormals and overflow: an independent reference."""
  p, emin, emax = FORMATS[fmt]
  if x == 0: return 0.0
  neg, a = x < 0, abs(x)
  e = a.numerator.bit_length() - a.denominator.bit_length()
  if Fraction(2) ** e > a: e -= 1
  q = Fraction(2) ** (max(e, emin) - p + 1)
  n, rem = divmod(a, q)
  n = int(n)
  up = {"rn": rem > q / 2 or (rem == q / 2 and n % 2 == 1), "rz": False, "rp": rem > 0 and not neg, "rm": rem > 0 and neg}[mode]
  r = (n + up) * q
  big = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
  if r > big: r = math.inf if (mode == "rn" or (mode == "rp" and not neg) or (mode == "rm" and neg)) else big
  v = float(r) if r != math.inf else math.inf
  return -v if neg else v


def bf16_value(bits: np.ndarray) -> np.ndarray:
  return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def test_half_and_bfloat_ops_match_exact_rounding():
  rng = np.random.default_rng(4)
  fails = []
  for t in C.HALF:
    fmt = "f16" if t == "half" else "bf16"
    if t == "half": data = [floats(t, rng) for _ in range(3)]
    else: data = [(floats("float", rng).view(np.uint32) >> 16).astype(np.uint16) for _ in range(3)]
    vals = [d.astype(np.float64) if t == "half" else bf16_value(d) for d in data]
    cases = {f"{k}_{fmt}": ([t, t, t], rt, body) for k, (rt, body) in C.half_cases(t).items()}
    dev, _ = C.module(cases)
    mod = PTXModule.parse(ir_to_ptx(dev, "sm_90"), "half.ptx")
    for name, (_, _, body) in cases.items():
      out = np.zeros(N, NP[t])
      launch(mod, name, [out] + data, (N // 128,), (128,))
      got = out.astype(np.float64) if t == "half" else bf16_value(out)
      op = name.split("_")[0]
      for i in range(N):
        a, b, c = (v[i] for v in vals)
        if not all(math.isfinite(x) for x in (a, b, c)) or (op == "hdiv" and b == 0): continue
        exact = {"hadd": lambda: Fraction(a) + Fraction(b), "hsub": lambda: Fraction(a) - Fraction(b),
                 "hmul": lambda: Fraction(a) * Fraction(b), "hfma": lambda: Fraction(a) * Fraction(b) + Fraction(c),
                 "hdiv": lambda: Fraction(a) / Fraction(b), "hmax": lambda: max(Fraction(a), Fraction(b))}[op]()
        want = round_exact(exact, fmt, "rn")
        if got[i] != want and not (got[i] == 0 and want == 0):
          fails.append(f"{name}[{i}]: {a!r}, {b!r}, {c!r} -> SM {got[i]!r}, exact {want!r}")
  assert not fails, "\n".join(fails[:10])


def test_directed_rounding_matches_exact_rounding():
  rng = np.random.default_rng(5)
  cases, kinds = {}, {}
  for name, (intr, op, mode, s) in C.DIRECTED.items():
    t = "float" if s == "f32" else "double"
    n = 3 if op == "fma" else 2
    body = f"%r = call {t} @{intr}(" + ", ".join(f"{t} %{v}" for v in "abc"[:n]) + ")"
    cases[name] = ([t] * n, t, body)
    kinds[name] = (op, mode, s, t)
  dev, _ = C.module(cases)
  mod = PTXModule.parse(ir_to_ptx(dev), "directed.ptx")
  fails = []
  for name, (op, mode, s, t) in kinds.items():
    args = [(rng.standard_normal(N) * np.exp2(rng.integers(-30, 30, N))).astype(NP[t]) for _ in cases[name][0]]
    args[0][:4] = np.array([1.0, 1.0, -1.0, 3.0], NP[t])
    if op == "div": args[1][:4] = np.array([3.0, -3.0, 3.0, 7.0], NP[t])
    out = np.zeros(N, NP[t])
    launch(mod, name, [out] + args, (N // 128,), (128,))
    for i in range(N):
      fr = [Fraction(float(x[i])) for x in args]
      exact = {"add": lambda: fr[0] + fr[1], "mul": lambda: fr[0] * fr[1], "div": lambda: fr[0] / fr[1],
               "fma": lambda: fr[0] * fr[1] + fr[2]}[op]()
      want = round_exact(exact, s, mode)
      if float(out[i]) != want: fails.append(f"{name}[{i}]: {[float(x[i]) for x in args]} -> SM {float(out[i])!r}, exact {want!r}")
  assert not fails, "\n".join(fails[:10])


def test_approximations_within_ptx_bounds():
  rng = np.random.default_rng(6)
  cases = {name: (["float"], "float", f"%r = call float @{intr}(float %a)") for name, (intr, *_rest) in C.APPROX.items()}
  dev, _ = C.module(cases)
  mod = PTXModule.parse(ir_to_ptx(dev), "approx.ptx")
  for name, (_, ref, kind, bound) in C.APPROX.items():
    x = rng.uniform(-np.pi, np.pi, N).astype(np.float32) if ref in ("sin", "cos") else \
        rng.uniform(-100, 100, N).astype(np.float32) if ref == "exp2" else np.abs(floats("float", rng)) + np.float32(1e-30)
    x = x[np.isfinite(x)] if ref != "exp2" else x
    x = np.resize(x, N).astype(np.float32)
    out = np.zeros(N, np.float32)
    launch(mod, name, [out, x], (N // 128,), (128,))
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
      want = {"sin": np.sin, "cos": np.cos, "exp2": np.exp2, "log2": np.log2, "rsqrt": lambda v: 1 / np.sqrt(v),
              "rcp": lambda v: 1 / v, "sqrt": np.sqrt}[ref](xd)
    fin = np.isfinite(want) & (np.abs(want) < 3e38) & (np.abs(want) > 1.2e-38)
    got = out.astype(np.float64)
    if kind == "abs":   # an f32 result cannot be closer than half its ulp: the stated absolute bound is the mantissa's
      err = np.abs(got - want) / np.maximum(1.0, np.spacing(np.abs(want).astype(np.float32)).astype(np.float64) / bound)
    elif kind == "rel": err = np.abs(got - want) / np.abs(want)
    else: err = np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert (err[fin] <= bound).all(), f"{name}: error {err[fin].max()} above the PTX bound {bound} ({kind})"


# --- CUDA C++ through clang-19 ------------------------------------------------------------------------------------
with open(CC.KERNELS_CU) as _f: CU = _f.read()


@pytest.fixture(scope="module", params=["sm_80", "sm_90"])
def cuda_mod(request):
  return PTXModule.parse(cuda_to_ptx(CU, request.param), f"kernels.cu ({request.param})")


@pytest.mark.parametrize("name,make,grid,block,check", list(cuda_cases()), ids=[c[0] for c in cuda_cases()])
def test_cuda_kernel(cuda_mod, name, make, grid, block, check):
  args = make()
  launch(cuda_mod, name, args, grid, block, shared_bytes=CC.SHARED.get(name), local_bytes=CC.LOCAL.get(name))
  assert check(args), f"{name}: wrong result"


# --- random programs ----------------------------------------------------------------------------------------------
import random_ir  # noqa: E402

RANDOM = int(os.environ.get("HCQ_NV_SM_RANDOM", "50"))
PER_MODULE = 25


@pytest.mark.parametrize("first", range(0, RANDOM, PER_MODULE))
def test_random_programs_match_host(first):
  """Random straight-line, branching and looping LLVM IR, a quarter of it inside device functions: the SM's results
  equal the host's bit for bit."""
  rng = np.random.default_rng(first)
  seeds = range(first, min(first + PER_MODULE, RANDOM))
  cases, helpers = {}, ""
  for s in seeds:   # every fourth program runs inside a device function, called twice
    if s % 4 == 3:
      *case, helper = random_ir.program_with_calls(s)
      cases[f"rand{s}"], helpers = tuple(case), helpers + helper
    else: cases[f"rand{s}"] = random_ir.program(s)
  data = {"i32": ints("i32", rng), "i64": ints("i64", rng), "double": floats("double", rng)}
  bad = []
  for name, s, h, args in run_group(cases, lambda ty, k: data[ty], helpers=helpers):
    if not np.array_equal(s, h):
      i = int(np.argmax(s != h))
      bad.append(f"{name} (HCQ_NV_SM_RANDOM seed {name[4:]}): thread {i} SM {s[i]:#x} host {h[i]:#x} from {[a[i] for a in args]}")
  assert not bad, "\n".join(bad)


# --- the corpus on a device: tools/nv_sm_corpus.py ----------------------------------------------------------------
def test_device_corpus_mode_dry_run_on_the_emulated_gpu(tmp_path):
  """The mode a session lent a GPU runs (docs/hardware.md): a bundle built here (a sample of kernels), run in a fresh
  process through tools/hardware_check.sh on MOCKNV+NV; a result that differs from the bundle's is a FAIL row."""
  import subprocess
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  sys.path.insert(0, os.path.join(root, "tools"))
  import nv_sm_corpus as T
  out = str(tmp_path / "bundle.npz")
  sample = ["call_nested", "mma_tf32_m16n8k8", "module_variables", "recursive_sum"]   # recursion and module variables on the driver path too
  bundle = T.build("sm_90", out, only=sample)
  r = subprocess.run(["bash", os.path.join(root, "tools", "hardware_check.sh"), "run", "--bundle", out, "--dev", "MOCKNV+NV"],
                     env={**os.environ, "HCQ_SCRIPT": "tools/nv_sm_corpus.py", "PYTHON": sys.executable}, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0 and f"{len(sample)} of {len(sample)} kernels passed" in r.stdout, r.stdout + r.stderr
  import hcq
  bundle["call_nested/0"] = bundle["call_nested/0"].copy()
  bundle["call_nested/0"][5] ^= 1
  rows = {n: (ok, d) for n, ok, d in T.compare(hcq.Device("MOCKNV+NV"), bundle)}
  assert not rows["call_nested"][0] and "argument 0: 1 bytes differ" in rows["call_nested"][1], rows["call_nested"]
  assert all(ok for n, (ok, _) in rows.items() if n != "call_nested")
