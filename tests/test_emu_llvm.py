"""Differential tests from LLVM IR: one scalar function @f, compiled by llvmlite both for gfx1100 (an ET_REL code object,
run in the emulator over every element) and for the host CPU (MCJIT, a loop over the elements), results compared
bit for bit (NaNs as NaNs: x86 and AMD differ in their default NaN payload)."""
from __future__ import annotations
import ctypes

import numpy as np
import pytest

from tests.tools import require_module

T = {"float": np.float32, "double": np.float64, "half": np.float16, "i32": np.int32, "i64": np.int64, "i16": np.int16, "i8": np.int8}
N = 256




def _llvm():
  llvm = require_module("llvmlite.binding")
  for init in ("initialize_all_targets", "initialize_all_asmprinters", "initialize_native_target", "initialize_native_asmprinter"):
    if hasattr(llvm, init): getattr(llvm, init)()
  return llvm


def _wrappers(ret: str, args: tuple[str, ...]) -> tuple[str, str]:
  """The gfx1100 kernel and the host loop around @f(args) -> ret."""
  gpu = [f"define amdgpu_kernel void @k(ptr addrspace(1) %out, {', '.join(f'ptr addrspace(1) %a{i}' for i in range(len(args)))}) {{",
         "  %wg = call i32 @llvm.amdgcn.workgroup.id.x()", "  %ti = call i32 @llvm.amdgcn.workitem.id.x()",
         "  %b = shl i32 %wg, 6", "  %g = add i32 %b, %ti", "  %i = zext i32 %g to i64"]
  for k, t in enumerate(args):
    gpu += [f"  %p{k} = getelementptr {t}, ptr addrspace(1) %a{k}, i64 %i", f"  %v{k} = load {t}, ptr addrspace(1) %p{k}"]
  gpu += [f"  %r = call {ret} @f({', '.join(f'{t} %v{k}' for k, t in enumerate(args))})",
          f"  %po = getelementptr {ret}, ptr addrspace(1) %out, i64 %i", f"  store {ret} %r, ptr addrspace(1) %po", "  ret void", "}",
          "declare i32 @llvm.amdgcn.workgroup.id.x()", "declare i32 @llvm.amdgcn.workitem.id.x()"]
  host = [f"define void @host(ptr %out, {', '.join(f'ptr %a{i}' for i in range(len(args)))}, i64 %n) {{", "entry:", "  br label %loop", "loop:",
          "  %i = phi i64 [0, %entry], [%next, %loop]"]
  for k, t in enumerate(args):
    host += [f"  %p{k} = getelementptr {t}, ptr %a{k}, i64 %i", f"  %v{k} = load {t}, ptr %p{k}"]
  host += [f"  %r = call {ret} @f({', '.join(f'{t} %v{k}' for k, t in enumerate(args))})",
           f"  %po = getelementptr {ret}, ptr %out, i64 %i", f"  store {ret} %r, ptr %po", "  %next = add i64 %i, 1",
           "  %done = icmp eq i64 %next, %n", "  br i1 %done, label %exit, label %loop", "exit:", "  ret void", "}"]
  return "\n".join(gpu), "\n".join(host)


CASES = {
  # name: (ret, args, body of @f, input kind per arg)
  "fdiv_sqrt": ("float", ("float", "float"), "%q = fdiv float %x0, %x1\n%s = call float @llvm.sqrt.f32(float %q)\n%r = fadd float %s, %q", "pos"),
  "fma_minmax": ("float", ("float", "float", "float"), "%m = call float @llvm.fma.f32(float %x0, float %x1, float %x2)\n%n = call float @llvm.minnum.f32(float %m, float %x0)\n%r = call float @llvm.maxnum.f32(float %n, float %x1)", "any"),
  "fcmp_select": ("float", ("float", "float"), "%c = fcmp ult float %x0, %x1\n%d = fcmp one float %x0, 0.5\n%e = and i1 %c, %d\n%r = select i1 %e, float %x0, float %x1", "any"),
  "round_family": ("float", ("float",), "%a = call float @llvm.floor.f32(float %x0)\n%b = call float @llvm.ceil.f32(float %x0)\n%c = call float @llvm.rint.f32(float %x0)\n%d = call float @llvm.round.f32(float %x0)\n%e = fadd float %a, %b\n%g = fmul float %c, %d\n%r = fsub float %e, %g", "any"),
  "fptosi_sat": ("i32", ("float",), "%s = fmul float %x0, 1.0e9\n%r = call i32 @llvm.fptosi.sat.i32.f32(float %s)", "any"),
  "uitofp64": ("float", ("i64",), "%r = uitofp i64 %x0 to float", "int"),
  "sitofp64_double": ("double", ("i64",), "%r = sitofp i64 %x0 to double", "int"),
  "double_div": ("double", ("double", "double"), "%q = fdiv double %x0, %x1\n%s = call double @llvm.sqrt.f64(double %x0)\n%r = call double @llvm.fma.f64(double %q, double %s, double %x1)", "pos"),
  "half_math": ("half", ("half", "half"), "%a = fmul half %x0, %x1\n%b = fadd half %a, %x0\n%c = fdiv half %b, %x1\n%r = call half @llvm.fma.f16(half %c, half %x0, half %b)", "pos"),
  "half_ext": ("float", ("half", "float"), "%e = fpext half %x0 to float\n%t = fptrunc float %x1 to half\n%u = fpext half %t to float\n%r = fadd float %e, %u", "any"),
  "int_div": ("i32", ("i32", "i32"), "%d = or i32 %x1, 1\n%q = sdiv i32 %x0, %d\n%u = udiv i32 %x0, %d\n%s = srem i32 %x0, %d\n%a = add i32 %q, %u\n%r = xor i32 %a, %s", "int"),
  "int_bits": ("i32", ("i32", "i32"), "%a = call i32 @llvm.ctpop.i32(i32 %x0)\n%b = call i32 @llvm.ctlz.i32(i32 %x1, i1 false)\n%c = call i32 @llvm.cttz.i32(i32 %x0, i1 false)\n%d = call i32 @llvm.bitreverse.i32(i32 %x1)\n%e = call i32 @llvm.bswap.i32(i32 %x0)\n%f = call i32 @llvm.fshl.i32(i32 %x0, i32 %x1, i32 %a)\n%g = add i32 %a, %b\n%h = xor i32 %c, %d\n%i = add i32 %e, %f\n%j = xor i32 %g, %h\n%r = add i32 %i, %j", "int"),
  "int_sat": ("i32", ("i32", "i32"), "%a = call i32 @llvm.sadd.sat.i32(i32 %x0, i32 %x1)\n%b = call i32 @llvm.usub.sat.i32(i32 %x0, i32 %x1)\n%c = call i32 @llvm.smin.i32(i32 %a, i32 %b)\n%d = call i32 @llvm.umax.i32(i32 %x0, i32 %x1)\n%e = call i32 @llvm.abs.i32(i32 %x0, i1 false)\n%f = add i32 %c, %d\n%r = xor i32 %e, %f", "int"),
  "i64_math": ("i64", ("i64", "i64"), "%d = or i64 %x1, 1\n%q = udiv i64 %x0, %d\n%s = srem i64 %x0, %d\n%m = mul i64 %x0, %x1\n%sh = and i64 %x1, 63\n%l = lshr i64 %x0, %sh\n%a = ashr i64 %m, %sh\n%p = call i64 @llvm.ctpop.i64(i64 %x0)\n%t1 = add i64 %q, %s\n%t2 = xor i64 %l, %a\n%t3 = add i64 %t1, %t2\n%r = add i64 %t3, %p", "int"),
  "mulhi_i128": ("i64", ("i64", "i64"), "%a = zext i64 %x0 to i128\n%b = sext i64 %x1 to i128\n%m = mul i128 %a, %b\n%h = lshr i128 %m, 64\n%r = trunc i128 %h to i64", "int"),
  "i16_i8": ("i32", ("i16", "i8"), "%a = sext i16 %x0 to i32\n%b = zext i8 %x1 to i32\n%c = mul i16 %x0, %x0\n%d = sext i16 %c to i32\n%e = mul i32 %a, %b\n%r = sub i32 %e, %d", "int"),
  "exp_log": ("float", ("float",), "%a = call float @llvm.exp2.f32(float %x0)\n%b = call float @llvm.log2.f32(float %a)\n%r = fsub float %b, %x0", "small"),
  "ldexp_frexp": ("float", ("float", "i32"), "%e = and i32 %x1, 63\n%s = sub i32 %e, 32\n%l = call float @llvm.ldexp.f32.i32(float %x0, i32 %s)\n%fr = call { float, i32 } @llvm.frexp.f32.i32(float %l)\n%m = extractvalue { float, i32 } %fr, 0\n%x = extractvalue { float, i32 } %fr, 1\n%xf = sitofp i32 %x to float\n%r = fadd float %m, %xf", "any"),
  "fpclass_minimum": ("float", ("float", "float"), "%c = call i1 @llvm.is.fpclass.f32(float %x0, i32 516)\n%m = call float @llvm.minimum.f32(float %x0, float %x1)\n%n = call float @llvm.maximum.f32(float %x0, float %x1)\n%s = fsub float %n, %m\n%r = select i1 %c, float 1.0, float %s", "any"),
  "overflow_flags": ("i32", ("i32", "i32"), "%a = call { i32, i1 } @llvm.umul.with.overflow.i32(i32 %x0, i32 %x1)\n%b = call { i32, i1 } @llvm.sadd.with.overflow.i32(i32 %x0, i32 %x1)\n%av = extractvalue { i32, i1 } %a, 0\n%ao = extractvalue { i32, i1 } %a, 1\n%bo = extractvalue { i32, i1 } %b, 1\n%az = zext i1 %ao to i32\n%bz = zext i1 %bo to i32\n%s = shl i32 %bz, 1\n%t = or i32 %az, %s\n%r = xor i32 %av, %t", "int"),
  "i64_bits": ("i64", ("i64", "i64"), "%a = call i64 @llvm.ctlz.i64(i64 %x0, i1 false)\n%b = call i64 @llvm.bitreverse.i64(i64 %x1)\n%c = call i64 @llvm.fshr.i64(i64 %x0, i64 %x1, i64 %a)\n%d = add i64 %b, %c\n%r = xor i64 %d, %a", "int"),
  "f64_round_cvt": ("i64", ("double",), "%a = call double @llvm.floor.f64(double %x0)\n%b = call double @llvm.rint.f64(double %x0)\n%s = fadd double %a, %b\n%r = call i64 @llvm.fptosi.sat.i64.f64(double %s)", "any"),
}
DECLS = """declare float @llvm.sqrt.f32(float)
declare double @llvm.sqrt.f64(double)
declare float @llvm.fma.f32(float, float, float)
declare double @llvm.fma.f64(double, double, double)
declare half @llvm.fma.f16(half, half, half)
declare float @llvm.minnum.f32(float, float)
declare float @llvm.maxnum.f32(float, float)
declare float @llvm.floor.f32(float)
declare float @llvm.ceil.f32(float)
declare float @llvm.rint.f32(float)
declare float @llvm.round.f32(float)
declare float @llvm.exp2.f32(float)
declare float @llvm.log2.f32(float)
declare i32 @llvm.fptosi.sat.i32.f32(float)
declare i32 @llvm.ctpop.i32(i32)
declare i64 @llvm.ctpop.i64(i64)
declare i32 @llvm.ctlz.i32(i32, i1)
declare i32 @llvm.cttz.i32(i32, i1)
declare i32 @llvm.bitreverse.i32(i32)
declare i32 @llvm.bswap.i32(i32)
declare i32 @llvm.fshl.i32(i32, i32, i32)
declare i32 @llvm.sadd.sat.i32(i32, i32)
declare i32 @llvm.usub.sat.i32(i32, i32)
declare i32 @llvm.smin.i32(i32, i32)
declare i32 @llvm.umax.i32(i32, i32)
declare i32 @llvm.abs.i32(i32, i1)
declare float @llvm.ldexp.f32.i32(float, i32)
declare { float, i32 } @llvm.frexp.f32.i32(float)
declare i1 @llvm.is.fpclass.f32(float, i32)
declare float @llvm.minimum.f32(float, float)
declare float @llvm.maximum.f32(float, float)
declare { i32, i1 } @llvm.umul.with.overflow.i32(i32, i32)
declare { i32, i1 } @llvm.sadd.with.overflow.i32(i32, i32)
declare i64 @llvm.ctlz.i64(i64, i1)
declare i64 @llvm.bitreverse.i64(i64)
declare i64 @llvm.fshr.i64(i64, i64, i64)
declare double @llvm.floor.f64(double)
declare double @llvm.rint.f64(double)
declare i64 @llvm.fptosi.sat.i64.f64(double)
"""


def _fma16(a, b, c): return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float16)


def _half_math(x0, x1):
  a = x0 * x1; b = a + x0; c = (b.astype(np.float32) / x1.astype(np.float32)).astype(np.float16)
  return _fma16(c, x0, b)


NUMPY_REF = {"half_math": _half_math, "half_ext": lambda x0, x1: x0.astype(np.float32) + x1.astype(np.float16).astype(np.float32)}


def _inputs(rng, t: str, kind: str) -> np.ndarray:
  dt = T[t]
  if dt().dtype.kind == "f":
    if kind == "pos": x = rng.uniform(0.1, 100, N)
    elif kind == "small": x = rng.uniform(-20, 20, N)
    else:
      x = rng.standard_normal(N) * 10.0 ** rng.integers(-3, 4, N)
      x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 0.5, -2.5]
    return x.astype(dt)
  info = np.iinfo(dt)
  x = rng.integers(info.min, info.max, N, dtype=np.int64, endpoint=True).astype(dt)
  x[:4] = [0, -1, info.min, info.max]
  return x


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  if a.dtype.kind != "f": return a == b
  return (a.view(f"u{a.itemsize}") == b.view(f"u{a.itemsize}")) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("name", list(CASES))
def test_ir_gpu_vs_host(name):
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  llvm = _llvm()
  ret, args, body, kind = CASES[name]
  params = ", ".join(f"{t} %x{k}" for k, t in enumerate(args))
  fn = f"define internal {ret} @f({params}) alwaysinline {{\n" + "\n".join("  " + l for l in body.splitlines()) + f"\n  ret {ret} %r\n}}\n"
  gpu_src, host_src = _wrappers(ret, args)
  # gfx1100: ET_REL code object from llvmlite
  gmod = llvm.parse_assembly('target triple = "amdgcn-amd-amdhsa"\n' + DECLS + fn + gpu_src)
  gmod.verify()
  tm = llvm.Target.from_triple("amdgcn-amd-amdhsa").create_target_machine(cpu="gfx1100", opt=2)
  co = read_code_object(tm.emit_object(gmod))
  # host: MCJIT
  hmod = llvm.parse_assembly(DECLS + fn + host_src)
  hmod.verify()
  htm = llvm.Target.from_default_triple().create_target_machine(opt=2, codemodel="jitdefault")
  engine = llvm.create_mcjit_compiler(hmod, htm)
  if name not in NUMPY_REF: engine.finalize_object()
  host = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (len(args) + 1)), ctypes.c_int64)(engine.get_function_address("host"))
  rng = np.random.default_rng(len(name))
  ins = [_inputs(rng, t, kind) for t in args]
  want = np.zeros(N, T[ret]); got = np.zeros(N, T[ret])
  if name in NUMPY_REF: want = NUMPY_REF[name](*ins)   # the host JIT has no half runtime (libcalls MCJIT cannot resolve)
  else: host(want.ctypes.data, *(x.ctypes.data for x in ins), N)
  run(co, [got, *ins], (N // 64,), (64,), kernel="k")
  same = _same(got, want)
  if name == "fma_minmax": same |= (got == 0) & (want == 0)   # minnum/maxnum may return either zero (LLVM LangRef)
  if name == "exp_log":   # libm vs the gfx11 expansion: both within a few ulp of the truth
    same = np.abs(got - want) <= 4e-6 * np.maximum(1, np.abs(ins[0]))
  bad = np.nonzero(~same)[0][:5]
  assert same.all(), f"{name}: lanes {bad.tolist()}: inputs {[x[bad].tolist() for x in ins]} gpu {got[bad].tolist()} host {want[bad].tolist()}"
