"""MODE: round modes (s_round_mode / s_setreg, what LLVM emits for llvm.set.rounding with constrained FP) and denormal
flushing on the packed (VOP3P), dual-issue (VOPD) and division-scale paths."""
from __future__ import annotations
import ctypes
from fractions import Fraction

import numpy as np
import pytest

from tests.test_emu_llvm import _llvm, _wrappers

f16, f32, f64, u32 = np.float16, np.float32, np.float64, np.uint32
N = 256
# LLVM's llvm.set.rounding encoding: 0 toward zero, 1 nearest even, 2 upward, 3 downward
LLVM_MODES = {"rtz": 0, "up": 2, "down": 3}
OPS = {  # name: (ret, args, body using %x0.. and the constrained intrinsics)
  "fadd_f32": ("float", ("float", "float"), "%r = call float @llvm.experimental.constrained.fadd.f32(float %x0, float %x1, {md})"),
  "fsub_f32": ("float", ("float", "float"), "%r = call float @llvm.experimental.constrained.fsub.f32(float %x0, float %x1, {md})"),
  "fmul_f32": ("float", ("float", "float"), "%r = call float @llvm.experimental.constrained.fmul.f32(float %x0, float %x1, {md})"),
  "fma_f32": ("float", ("float", "float", "float"), "%r = call float @llvm.experimental.constrained.fma.f32(float %x0, float %x1, float %x2, {md})"),
  "fadd_f64": ("double", ("double", "double"), "%r = call double @llvm.experimental.constrained.fadd.f64(double %x0, double %x1, {md})"),
  "fmul_f64": ("double", ("double", "double"), "%r = call double @llvm.experimental.constrained.fmul.f64(double %x0, double %x1, {md})"),
  "fma_f64": ("double", ("double", "double", "double"), "%r = call double @llvm.experimental.constrained.fma.f64(double %x0, double %x1, double %x2, {md})"),
  "fptrunc_f64": ("float", ("double",), "%r = call float @llvm.experimental.constrained.fptrunc.f32.f64(double %x0, {md})"),
  "sitofp_i32": ("float", ("i32",), "%r = call float @llvm.experimental.constrained.sitofp.f32.i32(i32 %x0, {md})"),
}
DECLS = """declare void @llvm.set.rounding(i32)
declare float @llvm.experimental.constrained.fadd.f32(float, float, metadata, metadata)
declare float @llvm.experimental.constrained.fsub.f32(float, float, metadata, metadata)
declare float @llvm.experimental.constrained.fmul.f32(float, float, metadata, metadata)
declare float @llvm.experimental.constrained.fma.f32(float, float, float, metadata, metadata)
declare double @llvm.experimental.constrained.fadd.f64(double, double, metadata, metadata)
declare double @llvm.experimental.constrained.fmul.f64(double, double, metadata, metadata)
declare double @llvm.experimental.constrained.fma.f64(double, double, double, metadata, metadata)
declare float @llvm.experimental.constrained.fptrunc.f32.f64(double, metadata, metadata)
declare float @llvm.experimental.constrained.sitofp.f32.i32(i32, metadata, metadata)
"""
T = {"float": f32, "double": f64, "i32": np.int32}


def _inputs(rng, t):
  if t == "i32": return rng.integers(-2**31, 2**31, N, dtype=np.int64).astype(np.int32)
  dt = T[t]
  fi = np.finfo(dt)
  # magnitudes from subnormal to near overflow, so that sums and products round, underflow and overflow
  e = rng.integers(fi.minexp - fi.nmant, fi.maxexp, N)
  x = (rng.choice([-1.0, 1.0], N) * np.ldexp(rng.uniform(1, 2, N), e)).astype(dt) if dt == f32 else np.ldexp(rng.uniform(1, 2, N), e) * rng.choice([-1.0, 1.0], N)
  x[: N // 2] = (rng.standard_normal(N // 2) * 3).astype(dt)   # half of them ordinary numbers (inexact sums)
  x[:4] = [0.0, -0.0, fi.max, fi.tiny]
  return x.astype(dt)


@pytest.mark.parametrize("mode", list(LLVM_MODES))
@pytest.mark.parametrize("op", list(OPS))
def test_round_mode_vs_host(op, mode):
  """llvm.set.rounding + constrained FP, compiled for gfx1100 (s_round_mode) and for the host (MXCSR), bit for bit."""
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  llvm = _llvm()
  ret, args, body = OPS[op]
  md = 'metadata !"round.dynamic", metadata !"fpexcept.ignore"'
  params = ", ".join(f"{t} %x{k}" for k, t in enumerate(args))
  fn = (f"define internal {ret} @f({params}) alwaysinline strictfp {{\n  call void @llvm.set.rounding(i32 {LLVM_MODES[mode]}) strictfp\n"
        f"  {body.format(md=md)} strictfp\n  call void @llvm.set.rounding(i32 1) strictfp\n  ret {ret} %r\n}}\n")
  gpu_src, host_src = _wrappers(ret, args)
  call = f"@f({', '.join(f'{t} %v{k}' for k, t in enumerate(args))})"
  gpu_src, host_src = gpu_src.replace(call, call + " strictfp"), host_src.replace(call, call + " strictfp")
  gmod = llvm.parse_assembly('target triple = "amdgcn-amd-amdhsa"\n' + DECLS + fn + gpu_src)
  co = read_code_object(llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu="gfx1100", opt=2).emit_object(gmod))
  hmod = llvm.parse_assembly(DECLS + fn + host_src)
  engine = llvm.create_mcjit_compiler(hmod, llvm.Target.from_default_triple().create_target_machine(opt=2, codemodel="jitdefault"))
  engine.finalize_object()
  host = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (len(args) + 1)), ctypes.c_int64)(engine.get_function_address("host"))
  rng = np.random.default_rng(hash((op, mode)) & 0xffff)
  ins = [_inputs(rng, t) for t in args]
  want, got = np.zeros(N, T[ret]), np.zeros(N, T[ret])
  host(want.ctypes.data, *(x.ctypes.data for x in ins), N)
  run(co, [got, *ins], (N // 64,), (64,), kernel="k")
  ui = f"u{want.itemsize}"
  same = (got.view(ui) == want.view(ui)) | (np.isnan(got) & np.isnan(want))
  bad = np.nonzero(~same)[0][:4]
  assert same.all(), f"{op} {mode}: lanes {bad.tolist()} inputs {[x[bad].tolist() for x in ins]} gpu {got[bad].tolist()} host {want[bad].tolist()}"


# ---- f16 and the f16/f64 mode field, against exact rationals ------------------------------------------------------------
def _round_ref(x: Fraction, dt, mode: int):
  """x rounded to dt under MODE round mode (1 up, 2 down, 3 toward zero): the candidates around the nearest value."""
  with np.errstate(over="ignore"):
    near = dt(float(x)) if abs(x) < 2 ** 1100 else dt(np.inf if x > 0 else -np.inf)
    cands = {near, np.nextafter(near, dt(np.inf)), np.nextafter(near, dt(-np.inf))}
  val = lambda c: Fraction(float(c)) if np.isfinite(c) else (Fraction(10) ** 400 * (1 if c > 0 else -1))
  if mode == 1: return min((c for c in cands if val(c) >= x), key=val)
  if mode == 2: return max((c for c in cands if val(c) <= x), key=val)
  return min((c for c in cands if abs(val(c)) <= abs(x)), key=lambda c: abs(x) - abs(val(c)))


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_round_mode_f16(mode):
  """MODE.FP_ROUND[3:2] (f16/f64): v_add/mul/fma_f16 and v_cvt_f16_f32; [1:0] stays nearest even meanwhile."""
  from hcq.asm.emu.snippet import run_snippet
  rng = np.random.default_rng(mode)
  a, b, c = (rng.uniform(-65504, 65504, 32) * rng.choice([1, 1e-3, 1e-5], 32)).astype(f16), rng.uniform(-4, 4, 32).astype(f16), rng.uniform(-2, 2, 32).astype(f16)
  x32 = (rng.standard_normal(32) * 1000).astype(f32)
  x32[:3] = [70000.0, -1e-6, 65519.0]
  st = run_snippet(f"s_round_mode {mode << 2}\nv_add_f16 v4, v0, v1\nv_mul_f16 v5, v0, v1\nv_fma_f16 v6, v0, v1, v2\nv_cvt_f16_f32 v7, v3\n"
                   "v_add_f32 v8, v3, v1", v={0: a.view(np.uint16).astype(u32), 1: b.view(np.uint16).astype(u32),
                                              2: c.view(np.uint16).astype(u32), 3: x32})
  F = lambda v: Fraction(float(v))
  got = lambda r: (st.v[r, 0] & u32(0xffff)).astype(np.uint16).view(f16)
  for r, exact in ((4, [F(x) + F(y) for x, y in zip(a, b)]), (5, [F(x) * F(y) for x, y in zip(a, b)]),
                   (6, [F(x) * F(y) + F(z) for x, y, z in zip(a, b, c)]), (7, [F(x) for x in x32])):
    want = np.array([_round_ref(e, f16, mode) for e in exact], f16)
    assert (got(r).view(np.uint16) == want.view(np.uint16)).all(), (r, np.nonzero(got(r) != want)[0][:4])
  assert (st.v[8, 0].view(f32) == x32 + (st.v[1, 0] & u32(0xffff)).view(f32)).all()   # f32 field: still nearest even


def test_round_mode_from_setreg_and_descriptor():
  """s_setreg of MODE[3:0] sets the mode as s_round_mode does; toward zero keeps f32 overflow finite."""
  from hcq.asm.emu.snippet import run_snippet
  big = np.full(32, np.finfo(f32).max, f32)
  st = run_snippet("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 3\nv_add_f32 v1, v0, v0\nv_mul_f32 v2, v0, -2.0", v={0: big})
  assert (st.v[1, 0].view(f32) == big).all() and (st.v[2, 0].view(f32) == -big).all()


# ---- denormal flushing beyond VOP1/2/3 ---------------------------------------------------------------------------------
DEN32, DEN16 = f32(1e-40), f16(6e-8)


@pytest.mark.parametrize("denorm,f32_kept,f16_kept", [(0xf, True, True), (0xc, False, True), (0x3, True, False), (0x0, False, False)])
def test_flush_packed_dual_and_div_scale(denorm, f32_kept, f16_kept):
  """MODE.FP_DENORM (s_denorm_mode): v_pk_*_f16 and v_fma_mix / v_dot2 follow the f16 field for f16 values and the
  f32 field for f32 ones; VOPD's f32 ops and v_div_scale_f32 the f32 field."""
  from hcq.asm.emu.snippet import run_snippet
  h = int(DEN16.view(np.uint16))
  st = run_snippet(f"s_denorm_mode {denorm}\nv_pk_add_f16 v3, v4, v4\nv_pk_mul_f16 v9, v4, 1.0\n"
                   "v_dual_mul_f32 v5, v0, v1 :: v_dual_add_f32 v6, v0, v0\n"
                   "v_fma_mix_f32 v7, v0, v1, v4 op_sel_hi:[0,0,1]\nv_div_scale_f32 v8, vcc_lo, v0, v1, v0\n"
                   "v_dot2_f32_f16 v10, v4, v11, 0",
                   v={0: np.full(32, DEN32), 1: np.full(32, 1.0, f32), 4: np.full(32, h | (h << 16), u32), 11: np.full(32, 0x3c003c00, u32)})
  v = lambda r: st.v[r, 0, 0]
  assert v(3) == ((2 * h) | (2 * h << 16) if f16_kept else 0)
  assert v(9) == (h if f16_kept else 0)   # an f16 inline constant is 1.0 in the low half, 0 in the high half
  assert v(5).view(f32) == (DEN32 if f32_kept else 0) and v(6).view(f32) == (2 * DEN32 if f32_kept else 0)
  assert v(7).view(f32) == (DEN32 if f32_kept else 0) + (f32(DEN16) if f16_kept else 0)
  assert (v(8).view(f32) == f32(np.ldexp(float(DEN32), 64))) == f32_kept   # a tiny numerator is scaled up unless flushed
  assert v(10).view(f32) == ((2 * f32(DEN16)) if f16_kept else 0)


def test_round_mode_in_vopd():
  """VOPD's f32 halves (add, mul, fmac, fmaak) round as their VOP2 forms under MODE.FP_ROUND."""
  from hcq.asm.emu.snippet import run_snippet
  rng = np.random.default_rng(5)
  a, b = rng.uniform(-4, 4, 32).astype(f32), rng.uniform(-4, 4, 32).astype(f32) * f32(1e-3)
  for mode in (1, 2, 3):
    dual = run_snippet(f"s_round_mode {mode}\nv_mov_b32 v5, v0\nv_dual_add_f32 v2, v0, v1 :: v_dual_fmac_f32 v5, v0, v1\n"
                       "v_dual_mul_f32 v6, v0, v1 :: v_dual_fmaak_f32 v7, v0, v1, 0x3f800000", v={0: a, 1: b})
    single = run_snippet(f"s_round_mode {mode}\nv_mov_b32 v5, v0\nv_add_f32 v2, v0, v1\nv_fmac_f32 v5, v0, v1\nv_mul_f32 v6, v0, v1\n"
                         "v_fmaak_f32 v7, v0, v1, 0x3f800000", v={0: a, 1: b})
    for r in (2, 5, 6, 7): assert (dual.v[r, 0] == single.v[r, 0]).all(), (mode, r)
    assert not (dual.v[2, 0] == (a + b).view(u32)).all()   # the mode did change something
