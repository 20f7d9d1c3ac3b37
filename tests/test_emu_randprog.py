"""(No tests here: imported by test_emu_random.py.) A seeded random-program generator for the emulator's differential tests: expression trees over uint and float,
divergent if/else and loops with per-lane trip counts. Each program is printed as an OpenCL kernel and evaluated
with numpy (vectorised over work-items, loops under masks) from the same tree, so the two cannot drift apart.

Integers are `uint` and `ulong` (wrapping; signed only where C defines it: compares, >>, guarded /), floats are f32
with -ffp-contract=off and -cl-fp32-correctly-rounded-divide-sqrt so that every C operation is one correctly rounded
IEEE operation. At the top level a statement may also swap values between work-items through LDS (with barriers)."""
from __future__ import annotations
import random

import numpy as np

u32, i32, f32, u64, i64 = np.uint32, np.int32, np.float32, np.uint64, np.int64
N = 128   # work-items per program
PRELUDE = ('#define BARRIER() do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); '
           '__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)\n')


class Gen:
  def __init__(self, seed: int):
    self.r = random.Random(seed)
    self.ivars, self.fvars = ["v0", "v1"], ["f0", "f1"]

  def lexpr(self, d: int):
    """ulong expressions: built from the uint variables, wrapping at 64 bits."""
    r = self.r
    if d <= 0 or r.random() < 0.3:
      # leaves are variables: clang-19 miscompiles `udiv i64 -1, (zext i32 x)` into a 32-bit divide (LLVM 22 does not;
      # see tests/test_emu_random.py), so constant all-ones numerators are kept out
      a, b = r.choice(self.ivars), r.choice(self.ivars)
      if r.random() < 0.5: return f"((ulong){a} << 32 | (ulong){b})", lambda e, a=a, b=b: (e[a].astype(u64) << u64(32)) | e[b].astype(u64)
      return f"(ulong){a}", lambda e, a=a: e[a].astype(u64)
    (ta, fa), (tb, fb) = self.lexpr(d - 1), self.lexpr(d - 1)
    k = r.randrange(6)
    if k == 0: return f"({ta} + {tb})", lambda e: fa(e) + fb(e)
    if k == 1: return f"({ta} * {tb})", lambda e: fa(e) * fb(e)
    if k == 2: return f"({ta} ^ ({tb} >> 7))", lambda e: fa(e) ^ (fb(e) >> u64(7))
    if k == 3: return f"({ta} / ({tb} | 1ul))", lambda e: fa(e) // (fb(e) | u64(1))
    if k == 4: return f"({ta} % ({tb} | 1ul))", lambda e: fa(e) % (fb(e) | u64(1))
    return f"(ulong)((long){ta} >> ({tb} & 63ul))", lambda e: (fa(e).view(i64) >> (fb(e) & u64(63)).astype(i64)).view(u64)

  # expressions are (C text, numpy evaluator(env) -> array)
  def iexpr(self, d: int):
    r = self.r
    if d <= 0 or r.random() < 0.25:
      if r.random() < 0.7:
        v = r.choice(self.ivars)
        return v, lambda e, v=v: e[v]
      c = r.choice([0, 1, 2, 3, 7, 31, 255, 0x7fffffff, 0x80000000, 0xffffffff, r.getrandbits(32)])
      return f"{c}u", lambda e, c=c: np.full(N, c, u32)
    k = r.randrange(12)
    (ta, fa), (tb, fb) = self.iexpr(d - 1), self.iexpr(d - 1)
    if k <= 5:
      op = "+-*&|^"[k]
      fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor}[op]
      return f"({ta} {op} {tb})", lambda e: fn(fa(e), fb(e))
    if k == 6: return f"({ta} << ({tb} & 31u))", lambda e: fa(e) << (fb(e) & u32(31))
    if k == 7: return f"({ta} >> ({tb} & 31u))", lambda e: fa(e) >> (fb(e) & u32(31))
    if k == 8: return f"(uint)((int){ta} >> ({tb} & 31u))", lambda e: (fa(e).view(i32) >> (fb(e) & u32(31)).astype(i32)).view(u32)
    if k == 9: return f"({ta} / ({tb} | 1u))", lambda e: fa(e) // (fb(e) | u32(1))
    if k == 10:
      return (f"(uint)((int){ta} / ((int)({tb} & 255u) | 1))",
              lambda e: (np.trunc(fa(e).view(i32).astype(np.float64) / ((fb(e) & u32(255)) | u32(1)).astype(np.float64)).astype(np.int64).astype(u32)))
    if r.random() < 0.15:
      tl, fl = self.lexpr(2)
      return f"(uint)({tl} >> 13)", lambda e: (fl(e) >> u64(13)).astype(u32)
    (tc, fc), = [self.cond(d - 1)]
    return f"({tc} ? {ta} : {tb})", lambda e: np.where(fc(e), fa(e), fb(e))

  def fexpr(self, d: int):
    r = self.r
    if d <= 0 or r.random() < 0.25:
      if r.random() < 0.7:
        v = r.choice(self.fvars)
        return v, lambda e, v=v: e[v]
      c = r.choice([0.0, 1.0, -1.5, 0.25, 3.0, 1e-3, 1e30, r.uniform(-8, 8)])
      c32 = f32(c)
      return f"{float(c32)!r}f", lambda e, c=c32: np.full(N, c, f32)
    k = r.randrange(8)
    (ta, fa), (tb, fb) = self.fexpr(d - 1), self.fexpr(d - 1)
    if k == 6: return f"({ta} / {tb})", lambda e: fa(e) / fb(e)
    if k == 7: return f"__builtin_sqrtf({ta})", lambda e: np.sqrt(fa(e))
    if k <= 2:
      op = "+-*"[k]
      fn = {"+": np.add, "-": np.subtract, "*": np.multiply}[op]
      return f"({ta} {op} {tb})", lambda e: fn(fa(e), fb(e))
    if k == 3:
      (tc, fc) = self.cond(d - 1)
      return f"({tc} ? {ta} : {tb})", lambda e: np.where(fc(e), fa(e), fb(e))
    if k == 4:
      ti, fi = self.iexpr(d - 1)
      return f"(float)((int)({ti} & 0xffffu) - 30000)", lambda e: ((fi(e) & u32(0xffff)).astype(i32) - 30000).astype(f32)
    return f"({ta} < {tb} ? {ta} : {tb})", lambda e: np.where(fa(e) < fb(e), fa(e), fb(e))

  def cond(self, d: int):
    r = self.r
    if r.random() < 0.5:
      (ta, fa), (tb, fb) = self.iexpr(d), self.iexpr(d)
      op = r.choice(["<", "==", "!=", ">="])
      signed = r.random() < 0.5
      fn = {"<": np.less, "==": np.equal, "!=": np.not_equal, ">=": np.greater_equal}[op]
      if signed: return f"((int){ta} {op} (int){tb})", lambda e: fn(fa(e).view(i32), fb(e).view(i32))
      return f"({ta} {op} {tb})", lambda e: fn(fa(e), fb(e))
    (ta, fa), (tb, fb) = self.fexpr(d), self.fexpr(d)
    op = r.choice(["<", "<=", ">", "=="])
    fn = {"<": np.less, "<=": np.less_equal, ">": np.greater, "==": np.equal}[op]
    return f"({ta} {op} {tb})", lambda e: fn(fa(e), fb(e))

  def statements(self, count: int, depth: int = 0):
    """(C lines, evaluator(env, mask)) for `count` statements."""
    r = self.r
    lines, steps = [], []
    for _ in range(count):
      k = r.randrange(11)
      if k == 10 and depth == 0:
        mask = r.choice([1, 2, 5, 31, 63])
        lines += [f"lds[l] = v0; lfs[l] = f1; BARRIER(); v1 = lds[l ^ {mask}u]; f0 = lfs[(l * 5u + {mask}u) & 63u]; BARRIER();"]
        def exchange(e, m, mask=mask):
          lane = np.arange(N)
          base = lane & ~63
          e["v1"] = np.where(m, e["v0"][base | ((lane & 63) ^ mask)], e["v1"])
          e["f0"] = np.where(m, e["f1"][base | (((lane & 63) * 5 + mask) & 63)], e["f0"])
        steps.append(exchange)
        continue
      if k < 4 or depth >= 2:
        if r.random() < 0.5:
          t, f = self.iexpr(3); v = r.choice(self.ivars)
        else:
          t, f = self.fexpr(3); v = r.choice(self.fvars)
        lines.append(f"{v} = {t};")
        steps.append(lambda e, m, v=v, f=f: e.__setitem__(v, np.where(m, f(e), e[v])))
      elif k < 7:
        tc, fc = self.cond(2)
        la, fa = self.statements(r.randrange(1, 3), depth + 1)
        lb, fb = self.statements(r.randrange(0, 3), depth + 1)
        lines += [f"if ({tc}) {{", *la, "} else {", *lb, "}"]
        def step(e, m, fc=fc, fa=fa, fb=fb):
          c = fc(e)
          fa(e, m & c); fb(e, m & ~c)
        steps.append(step)
      else:
        ti, fi = self.iexpr(1)
        body, fbody = self.statements(r.randrange(1, 3), depth + 1)
        var = f"k{depth}"
        lines += [f"{{ uint n{depth} = {ti} & 7u;", f"for (uint {var} = 0; {var} < n{depth}; {var}++) {{", f"  v0 += {var};", *body, "} }"]
        def loop(e, m, fi=fi, fbody=fbody):
          n = fi(e) & u32(7)
          for it in range(7):
            act = m & (u32(it) < n)
            if not act.any(): break
            e["v0"] = np.where(act, e["v0"] + u32(it), e["v0"])
            fbody(e, act)
        steps.append(loop)
    def run(e, m):
      for s in steps: s(e, m)
    return lines, run


def program(seed: int) -> tuple[str, callable]:
  """Kernel `p<seed>(uint* io, float* fo, const uint* ia, const float* fa)` and its numpy evaluator."""
  g = Gen(seed)
  lines, run = g.statements(g.r.randrange(2, 6))
  src = "\n".join([
    f"__kernel void p{seed}(__global uint* io, __global float* fo, __global const uint* ia, __global const float* fa) {{",
    "  __local uint lds[64]; __local float lfs[64]; uint l = __builtin_amdgcn_workitem_id_x();",
    "  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + l;",
    f"  uint v0 = ia[i], v1 = ia[(i * 7u) & {N - 1}u]; float f0 = fa[i], f1 = fa[(i * 3u) & {N - 1}u];",
    *("  " + l for l in lines),
    "  io[i] = v0 ^ (v1 * 3u); fo[i] = f0 - f1;", "}"])
  def evaluate(ia: np.ndarray, fa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(N)
    env = {"v0": ia.copy(), "v1": ia[(i * 7) & (N - 1)].copy(), "f0": fa.copy(), "f1": fa[(i * 3) & (N - 1)].copy()}
    with np.errstate(all="ignore"):
      run(env, np.ones(N, bool))
      return env["v0"] ^ (env["v1"] * u32(3)), env["f0"] - env["f1"]
  return src, evaluate
