"""Element-wise kernels written as LLVM IR: each case is a scalar function body over %a, %b, %c; ir_cases.modules()
wraps every case of one type group into an NVPTX kernel (out[i] = f(a[i], b[i], c[i]), i = ctaid.x*ntid.x+tid.x) and
into a host loop over n elements, from the same text, so the SM and the host CPU run the same LLVM code.

Inputs that would be undefined in LLVM IR (division by zero or INT_MIN/-1, shifts past the width, fptosi out of
range) are avoided in the IR itself, not in the data."""
from __future__ import annotations

INT = ("i8", "i16", "i32", "i64")
WIDE = {"i8": "i16", "i16": "i32", "i32": "i64", "i64": "i128"}
BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}


def _safe_div(t: str) -> str:   # b|1, and -1 replaced by 3 (INT_MIN / -1 is undefined)
  return f"%b1 = or {t} %b, 1\n%m1 = icmp eq {t} %b1, -1\n%d = select i1 %m1, {t} 3, {t} %b1\n"


def int_cases(t: str) -> dict[str, tuple[str, str]]:
  """name -> (result type, body computing %r) for integer type t."""
  w, n = WIDE[t], BITS[t]
  c = {
    "add": f"%r = add {t} %a, %b", "sub": f"%r = sub {t} %a, %b", "mul": f"%r = mul {t} %a, %b",
    "udiv": _safe_div(t) + f"%r = udiv {t} %a, %d", "sdiv": _safe_div(t) + f"%r = sdiv {t} %a, %d",
    "urem": _safe_div(t) + f"%r = urem {t} %a, %d", "srem": _safe_div(t) + f"%r = srem {t} %a, %d",
    "shl": f"%s = and {t} %b, {n - 1}\n%r = shl {t} %a, %s", "lshr": f"%s = and {t} %b, {n - 1}\n%r = lshr {t} %a, %s",
    "ashr": f"%s = and {t} %b, {n - 1}\n%r = ashr {t} %a, %s",
    "andorxor": f"%x = and {t} %a, %b\n%y = or {t} %x, %c\n%r = xor {t} %y, %a",
    "smin": f"%r = call {t} @llvm.smin.{t}({t} %a, {t} %b)", "umax": f"%r = call {t} @llvm.umax.{t}({t} %a, {t} %b)",
    "cmpsel": f"%p = icmp slt {t} %a, %b\n%q = icmp ugt {t} %b, %c\n%x = select i1 %p, {t} %a, {t} %c\n%r = select i1 %q, {t} %x, {t} %b",
    "ctpop": f"%r = call {t} @llvm.ctpop.{t}({t} %a)", "ctlz": f"%r = call {t} @llvm.ctlz.{t}({t} %a, i1 false)",
    "cttz": f"%r = call {t} @llvm.cttz.{t}({t} %a, i1 false)", "bitreverse": f"%r = call {t} @llvm.bitreverse.{t}({t} %a)",
    "abs": f"%r = call {t} @llvm.abs.{t}({t} %a, i1 false)",
    "sadd_sat": f"%r = call {t} @llvm.sadd.sat.{t}({t} %a, {t} %b)", "usub_sat": f"%r = call {t} @llvm.usub.sat.{t}({t} %a, {t} %b)",
    "fshl": f"%r = call {t} @llvm.fshl.{t}({t} %a, {t} %b, {t} %c)",
    "mulhi_s": f"%x = sext {t} %a to {w}\n%y = sext {t} %b to {w}\n%z = mul {w} %x, %y\n%h = lshr {w} %z, {n}\n%r = trunc {w} %h to {t}",
    "mulhi_u": f"%x = zext {t} %a to {w}\n%y = zext {t} %b to {w}\n%z = mul {w} %x, %y\n%h = lshr {w} %z, {n}\n%r = trunc {w} %h to {t}",
    "madd": f"%x = mul {t} %a, %b\n%r = add {t} %x, %c",
  }
  if t != "i8": c["bswap"] = f"%r = call {t} @llvm.bswap.{t}({t} %a)"
  if t == "i64":   # i128 arithmetic: carry chains (add.cc/addc, sub.cc/subc)
    c["carry128"] = ("%x = zext i64 %a to i128\n%y = sext i64 %b to i128\n%z = add i128 %x, %y\n%w = sub i128 %z, %y\n"
                     "%v = sub i128 %w, %y\n%s = add i128 %v, %x\n%h = lshr i128 %s, 61\n%q = xor i128 %h, %s\n%r = trunc i128 %q to i64")
  return {k: (t, v) for k, v in c.items()}


def conv_cases() -> dict[str, tuple[str, str, str]]:
  """name -> (argument type, result type, body) for conversions between integer widths."""
  out = {}
  for s in INT:
    for d in INT:
      if BITS[s] < BITS[d]:
        out[f"sext_{s}_{d}"] = (s, d, f"%r = sext {s} %a to {d}")
        out[f"zext_{s}_{d}"] = (s, d, f"%r = zext {s} %a to {d}")
      elif BITS[s] > BITS[d]: out[f"trunc_{s}_{d}"] = (s, d, f"%r = trunc {s} %a to {d}")
  return out


FLOAT = ("float", "double")


def float_cases(t: str) -> dict[str, tuple[str, str]]:
  """Correctly rounded float operations (bit-exact against the host)."""
  s = "f32" if t == "float" else "f64"
  c = {
    "fadd": f"%r = fadd {t} %a, %b", "fsub": f"%r = fsub {t} %a, %b", "fmul": f"%r = fmul {t} %a, %b",
    "fdiv": f"%r = fdiv {t} %a, %b", "sqrt": f"%x = call {t} @llvm.fabs.{s}({t} %a)\n%r = call {t} @llvm.sqrt.{s}({t} %x)",
    "fma": f"%r = call {t} @llvm.fma.{s}({t} %a, {t} %b, {t} %c)", "fneg_fabs": f"%x = fneg {t} %a\n%y = call {t} @llvm.fabs.{s}({t} %b)\n%r = fadd {t} %x, %y",
    "minnum": f"%r = call {t} @llvm.minnum.{s}({t} %a, {t} %b)", "maxnum": f"%r = call {t} @llvm.maxnum.{s}({t} %a, {t} %b)",
    "copysign": f"%r = call {t} @llvm.copysign.{s}({t} %a, {t} %b)",
    "floor": f"%r = call {t} @llvm.floor.{s}({t} %a)", "ceil": f"%r = call {t} @llvm.ceil.{s}({t} %a)",
    "trunc": f"%r = call {t} @llvm.trunc.{s}({t} %a)", "rint": f"%r = call {t} @llvm.rint.{s}({t} %a)",
    "fcmp": f"%p = fcmp olt {t} %a, %b\n%q = fcmp uno {t} %b, %c\n%x = select i1 %p, {t} %a, {t} %c\n%r = select i1 %q, {t} %b, {t} %x",
    "fcmp_une": f"%p = fcmp une {t} %a, %b\n%q = fcmp oge {t} %a, %c\n%o = or i1 %p, %q\n%r = select i1 %o, {t} %c, {t} %a",
    "poly": f"%x = fmul {t} %a, %a\n%y = fmul {t} %x, %b\n%z = fsub {t} %y, %c\n%r = fdiv {t} %z, %b",
  }
  return {k: (t, v) for k, v in c.items()}


def fconv_cases() -> dict[str, tuple[str, str, str]]:
  out = {"fptrunc_f64_f32": ("double", "float", "%r = fptrunc double %a to float"),
         "fpext_f32_f64": ("float", "double", "%r = fpext float %a to double")}
  for f in FLOAT:
    for i in ("i32", "i64"):
      s = "f32" if f == "float" else "f64"
      out[f"sitofp_{i}_{s}"] = (i, f, f"%r = sitofp {i} %a to {f}")
      out[f"uitofp_{i}_{s}"] = (i, f, f"%r = uitofp {i} %a to {f}")
      out[f"fptosi_sat_{s}_{i}"] = (f, i, f"%r = call {i} @llvm.fptosi.sat.{i}.{s}({f} %a)")
      out[f"fptoui_sat_{s}_{i}"] = (f, i, f"%r = call {i} @llvm.fptoui.sat.{i}.{s}({f} %a)")
  return out


HALF = ("half", "bfloat")


def half_cases(t: str) -> dict[str, tuple[str, str]]:
  """f16/bf16 arithmetic, compared with an exact reference (the host JIT has no half arithmetic of its own)."""
  s = "f16" if t == "half" else "bf16"
  return {"hadd": (t, f"%r = fadd {t} %a, %b"), "hsub": (t, f"%r = fsub {t} %a, %b"), "hmul": (t, f"%r = fmul {t} %a, %b"),
          "hfma": (t, f"%r = call {t} @llvm.fma.{s}({t} %a, {t} %b, {t} %c)"), "hdiv": (t, f"%r = fdiv {t} %a, %b"),
          "hmax": (t, f"%r = call {t} @llvm.maxnum.{s}({t} %a, {t} %b)")}


APPROX = {  # name -> (nvvm intrinsic, numpy reference, bound kind, bound) from the PTX ISA's .approx.f32 sections
  "sin_approx": ("llvm.nvvm.sin.approx.f", "sin", "abs", 2 ** -20.9),
  "cos_approx": ("llvm.nvvm.cos.approx.f", "cos", "abs", 2 ** -20.9),
  "ex2_approx": ("llvm.nvvm.ex2.approx.f", "exp2", "ulp", 2),
  "lg2_approx": ("llvm.nvvm.lg2.approx.f", "log2", "abs", 2 ** -22.6),
  "rsqrt_approx": ("llvm.nvvm.rsqrt.approx.f", "rsqrt", "rel", 2 ** -22.9),
  "rcp_approx": ("llvm.nvvm.rcp.approx.ftz.f", "rcp", "ulp", 1),
  "sqrt_approx": ("llvm.nvvm.sqrt.approx.f", "sqrt", "rel", 2 ** -23),
}

DIRECTED = {  # name -> (nvvm intrinsic, operation, mode): rounding modifiers, against an exact rational reference
  f"{op}_{m}_{s}": (f"llvm.nvvm.{op}.{m}.{'f' if s == 'f32' else 'd'}", op, m, s)
  for op in ("add", "mul", "div", "fma") for m in ("rz", "rm", "rp") for s in ("f32", "f64")
}


def _kernel(name: str, targs: list[str], tout: str, body: str) -> tuple[str, str]:
  """(NVPTX kernel, host loop) IR for out[i] = f(args[i]...), the body pasted into both (no inliner runs here)."""
  loads = "".join(f"%g{v} = getelementptr {t}, ptr addrspace(1) %p{v}, i64 %i\n%{v} = load {t}, ptr addrspace(1) %g{v}\n"
                  for t, v in zip(targs, "abc"))
  params = ", ".join(f"ptr addrspace(1) %p{v}" for v in "abc"[:len(targs)])
  kern = (f"define void @{name}(ptr addrspace(1) %out, {params}) {{\n%tx = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
          "%bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n%bdim = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n"
          "%cn = mul i32 %bid, %bdim\n%i32 = add i32 %cn, %tx\n%i = zext i32 %i32 to i64\n" + loads + body + "\n" +
          f"%go = getelementptr {tout}, ptr addrspace(1) %out, i64 %i\nstore {tout} %r, ptr addrspace(1) %go\nret void\n}}\n")
  hparams = ", ".join(f"ptr %p{v}" for v in "abc"[:len(targs)])
  hloads = "".join(f"%g{v} = getelementptr {t}, ptr %p{v}, i64 %i\n%{v} = load {t}, ptr %g{v}\n" for t, v in zip(targs, "abc"))
  host = (f"define void @host_{name}(ptr %out, {hparams}, i64 %count) {{\nentry:\nbr label %loop\nloop:\n"
          "%i = phi i64 [0, %entry], [%i1, %latch]\n" + hloads + body + "\nbr label %latch\nlatch:\n" +
          f"%go = getelementptr {tout}, ptr %out, i64 %i\nstore {tout} %r, ptr %go\n%i1 = add i64 %i, 1\n"
          "%done = icmp eq i64 %i1, %count\nbr i1 %done, label %exit, label %loop\nexit:\nret void\n}\n")
  return kern, host


def module(cases: dict[str, tuple[list[str], str, str]], helpers: str = "") -> tuple[str, str]:
  """(NVPTX module, host module) IR for cases name -> (argument types, result type, body); `helpers` (functions the
  bodies call) go into both."""
  dev, host, ann = [], [], []
  for i, (name, (targs, tout, body)) in enumerate(cases.items()):
    k, h = _kernel(name, targs, tout, body)
    dev.append(k); host.append(h)
    ann.append(f"!{i} = !{{ptr @{name}, !\"kernel\", i32 1}}")
  sregs = "".join(f"declare i32 @llvm.nvvm.read.ptx.sreg.{r}.x()\n" for r in ("tid", "ctaid", "ntid"))
  devir = ('target triple = "nvptx64-nvidia-cuda"\n' + sregs + helpers + "\n".join(dev) +
           "!nvvm.annotations = !{" + ", ".join(f"!{i}" for i in range(len(ann))) + "}\n" + "\n".join(ann) + "\n")
  return devir, helpers + "\n".join(host)


# Device functions the call cases use: noinline, so the PTX has real `call`s (nothing inlines at this -O level either).
HELPERS = r"""
define internal i32 @h_gcd(i32 %a, i32 %b) noinline {
entry:
  br label %loop
loop:
  %x = phi i32 [%a, %entry], [%y, %body]
  %y = phi i32 [%b, %entry], [%t, %body]
  %z = icmp eq i32 %y, 0
  br i1 %z, label %done, label %body
body:
  %t = urem i32 %x, %y
  br label %loop
done:
  ret i32 %x
}
define internal {i64, i64} @h_divmod(i64 %a, i64 %b) noinline {
  %b1 = or i64 %b, 1
  %m1 = icmp eq i64 %b1, -1
  %d = select i1 %m1, i64 3, i64 %b1
  %q = sdiv i64 %a, %d
  %r = srem i64 %a, %d
  %s0 = insertvalue {i64, i64} undef, i64 %q, 0
  %s1 = insertvalue {i64, i64} %s0, i64 %r, 1
  ret {i64, i64} %s1
}
define internal i32 @h_sign(i32 %a) noinline {
entry:
  %n = icmp slt i32 %a, 0
  br i1 %n, label %neg, label %nonneg
neg:
  ret i32 -1
nonneg:
  %z = icmp eq i32 %a, 0
  br i1 %z, label %zero, label %pos
zero:
  ret i32 0
pos:
  %h = lshr i32 %a, 3
  ret i32 %h
}
define internal i32 @h_outer(i32 %a, i32 %b, i32 %c) noinline {
  %g = call i32 @h_gcd(i32 %a, i32 %b)
  %s = call i32 @h_sign(i32 %c)
  %g2 = call i32 @h_gcd(i32 %c, i32 %g)
  %x = mul i32 %g2, %s
  %r = add i32 %x, %g
  ret i32 %r
}
define internal i32 @h_rec(i32 %n, i32 %x) noinline {
entry:
  %z = icmp eq i32 %n, 0
  br i1 %z, label %done, label %rec
rec:
  %n1 = sub i32 %n, 1
  %x1 = mul i32 %x, 3
  %r = call i32 @h_rec(i32 %n1, i32 %x1)
  %y = xor i32 %r, %n
  %s = add i32 %y, %x
  ret i32 %s
done:
  ret i32 %x
}
define internal double @h_fp(double %a, float %b, i16 %c) noinline {
  %e = fpext float %b to double
  %m = fmul double %a, %e
  %ci = sitofp i16 %c to double
  %r = fadd double %m, %ci
  ret double %r
}
"""


def call_cases() -> dict[str, tuple[list[str], str, str]]:
  """name -> (argument types, result type, body) calling HELPERS: loops, several returns, a struct return, nesting,
  recursion (a real call stack on the SM)."""
  return {
    "call_gcd": (["i32", "i32"], "i32", "%r = call i32 @h_gcd(i32 %a, i32 %b)"),
    "call_divmod": (["i64", "i64"], "i64", "%s = call {i64, i64} @h_divmod(i64 %a, i64 %b)\n%q = extractvalue {i64, i64} %s, 0\n"
                    "%m = extractvalue {i64, i64} %s, 1\n%x = shl i64 %m, 40\n%r = xor i64 %q, %x"),
    "call_sign": (["i32"], "i32", "%r = call i32 @h_sign(i32 %a)"),
    "call_nested": (["i32", "i32", "i32"], "i32", "%r = call i32 @h_outer(i32 %a, i32 %b, i32 %c)"),
    "call_fp": (["double", "float", "i16"], "double", "%r = call double @h_fp(double %a, float %b, i16 %c)"),
    "call_recursive": (["i32", "i32"], "i32", "%d = and i32 %a, 15\n%r = call i32 @h_rec(i32 %d, i32 %b)"),   # depth 0-15
  }
