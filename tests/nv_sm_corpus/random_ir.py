"""Random LLVM IR programs for the SM's differential test: straight-line arithmetic in i8/i16/i32/i64/float/double, if/else
diamonds on data-dependent conditions (threads diverge), and short data-dependent loops, over the inputs %a (i32),
%b (i64), %c (double); the result %r (i64) folds the last integer and the last float (NaN made canonical, since
hosts keep NaN payloads PTX does not). Every operation is defined for every input (divisors made non-zero and not
-1, shift amounts masked, float->int through the saturating intrinsics). program_with_calls puts a program in a
device function."""
from __future__ import annotations
import random

TYPES = ("i8", "i16", "i32", "i64", "float", "double")
BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}


class Gen:
  def __init__(self, seed: int):
    self.rng = random.Random(seed)
    self.n = 0
    self.lines: list[str] = []
    self.pool = {"i8": [], "i16": [], "i32": ["%a"], "i64": ["%b"], "float": [], "double": ["%c"]}
    self.block = "entry0"

  def new(self) -> str:
    self.n += 1
    return f"%v{self.n}"

  def pick(self, t: str) -> str:
    if not self.pool[t]: self.pool[t].append(self.convert_into(t))
    return self.rng.choice(self.pool[t][-6:])

  def emit(self, t: str, text: str) -> str:
    v = self.new()
    self.lines.append(f"{v} = {text}")
    self.pool[t].append(v)
    return v

  def convert_into(self, t: str) -> str:
    r = self.rng
    if t == "float": return self.emit(t, f"fptrunc double {self.pick('double')} to float")
    if t == "double": return self.emit(t, f"sitofp i32 {self.pick('i32')} to double")
    if t == "i32": return self.emit(t, f"trunc i64 {self.pick('i64')} to i32")
    if t in ("i8", "i16"): return self.emit(t, f"trunc i32 {self.pick('i32')} to {t}")
    return self.emit(t, f"sext i32 {self.pick('i32')} to i64")

  def op(self) -> None:
    r = self.rng
    t = r.choice(TYPES)
    if t in BITS:
      n = BITS[t]
      a, b = self.pick(t), self.pick(t)
      k = r.randrange(14)
      if k < 6: self.emit(t, f"{r.choice(['add', 'sub', 'mul', 'and', 'or', 'xor'])} {t} {a}, {b}")
      elif k == 6:
        s = self.emit(t, f"and {t} {b}, {n - 1}")
        self.emit(t, f"{r.choice(['shl', 'lshr', 'ashr'])} {t} {a}, {s}")
      elif k == 7:
        o = self.emit(t, f"or {t} {b}, 1")
        m1 = self.new(); self.lines.append(f"{m1} = icmp eq {t} {o}, -1")
        d = self.emit(t, f"select i1 {m1}, {t} 5, {t} {o}")
        self.emit(t, f"{r.choice(['udiv', 'sdiv', 'urem', 'srem'])} {t} {a}, {d}")
      elif k == 8:
        c = self.new(); self.lines.append(f"{c} = icmp {r.choice(['slt', 'ult', 'eq', 'sge', 'ugt'])} {t} {a}, {b}")
        self.emit(t, f"select i1 {c}, {t} {a}, {t} {self.pick(t)}")
      elif k == 9: self.emit(t, f"add {t} {a}, {r.choice([1, -1, 7, 255, -65536, 1 << 20])}")
      elif k == 10: self.convert_into(t)
      elif k == 11:
        f = r.choice(["float", "double"])
        self.emit(t, f"call {t} @llvm.fpto{r.choice('su')}i.sat.{t}.{'f32' if f == 'float' else 'f64'}({f} {self.pick(f)})")
      elif k == 12:
        f = r.choice(["smin", "umax", "ctpop", "abs"])
        rest = {"smin": f", {t} {b}", "umax": f", {t} {b}", "ctpop": "", "abs": ", i1 false"}[f]
        self.emit(t, f"call {t} @llvm.{f}.{t}({t} {a}{rest})")
      elif t == "i64": self.emit(t, f"zext i32 {self.pick('i32')} to i64")
      else: self.emit(t, f"trunc i64 {self.pick('i64')} to {t}")
    else:
      s = "f32" if t == "float" else "f64"
      a, b = self.pick(t), self.pick(t)
      k = r.randrange(9)
      if k < 4: self.emit(t, f"{r.choice(['fadd', 'fsub', 'fmul', 'fdiv'])} {t} {a}, {b}")
      elif k == 4: self.emit(t, f"call {t} @llvm.fma.{s}({t} {a}, {t} {b}, {t} {self.pick(t)})")
      elif k == 5:
        x = self.emit(t, f"call {t} @llvm.fabs.{s}({t} {a})")
        self.emit(t, f"call {t} @llvm.sqrt.{s}({t} {x})")
      elif k == 6:
        c = self.new(); self.lines.append(f"{c} = fcmp {r.choice(['olt', 'ugt', 'oeq', 'une'])} {t} {a}, {b}")
        self.emit(t, f"select i1 {c}, {t} {a}, {t} {self.pick(t)}")
      elif k == 7: self.emit(t, f"{r.choice(['sitofp', 'uitofp'])} {r.choice(['i32', 'i64'])} {self.pick('i32')} to {t}"
                             .replace("i64 %", "i32 %"))
      else: self.convert_into(t)

  def straight(self, k: int) -> None:
    for _ in range(k): self.op()

  def diamond(self, depth: int) -> None:
    """if (cond) { ops } else { ops }, values merged with phis."""
    r = self.rng
    t = r.choice(["i32", "i64"])
    c = self.new()
    self.lines.append(f"{c} = icmp {r.choice(['slt', 'ugt', 'eq', 'ne'])} {t} {self.pick(t)}, {self.pick(t)}")
    i = self.n
    lt, lf, lj = f"then{i}", f"else{i}", f"join{i}"
    self.lines.append(f"br i1 {c}, label %{lt}, label %{lf}")
    saved = {k: list(v) for k, v in self.pool.items()}
    ends = []
    for lab in (lt, lf):
      self.pool = {k: list(v) for k, v in saved.items()}
      self.lines.append(f"{lab}:")
      self.block = lab
      self.body(depth + 1, r.randint(1, 4))
      ends.append((self.block, {k: self.pool[k][-1] if self.pool[k] else None for k in TYPES}))
      self.lines.append(f"br label %{lj}")
    self.lines.append(f"{lj}:")
    self.block = lj
    self.pool = saved
    for t2 in TYPES:
      (b1, v1), (b2, v2) = ends
      if v1[t2] is None or v2[t2] is None: continue
      self.emit(t2, f"phi {t2} [{v1[t2]}, %{b1}], [{v2[t2]}, %{b2}]")

  def loop(self, depth: int) -> None:
    """for (k = 0; k < (a & 7); k++) acc = f(acc, ...): a data-dependent trip count."""
    i = self.n + 1
    pre = self.block
    cnt = self.emit("i32", f"and i32 {self.pick('i32')}, 7")
    t = self.rng.choice(["i32", "i64", "double"])
    init = self.pick(t)
    lh, lb, lx = f"head{i}", f"lbody{i}", f"lexit{i}"
    self.lines.append(f"br label %{lh}")
    self.lines.append(f"{lh}:")
    k, acc, k1, acc1 = f"%k{i}", f"%acc{i}", f"%k{i}n", f"%acc{i}n"
    self.lines.append(f"{k} = phi i32 [0, %{pre}], [{k1}, %{lb}]")
    self.lines.append(f"{acc} = phi {t} [{init}, %{pre}], [{acc1}, %{lb}]")
    self.lines.append(f"%lc{i} = icmp slt i32 {k}, {cnt}")
    self.lines.append(f"br i1 %lc{i}, label %{lb}, label %{lx}")
    self.lines.append(f"{lb}:")
    kk = f"%kx{i}"
    if t == "double":
      self.lines.append(f"{kk} = sitofp i32 {k} to double")
      self.lines.append(f"{acc1} = call double @llvm.fma.f64(double {acc}, double 1.5, double {kk})")
    else:
      self.lines.append(f"{kk} = {'sext' if t == 'i64' else 'add'} i32 {k}{' to i64' if t == 'i64' else ', 3'}")
      self.lines.append(f"{acc1} = mul {t} {acc}, {kk}")
    self.lines.append(f"{k1} = add i32 {k}, 1")
    self.lines.append(f"br label %{lh}")
    self.lines.append(f"{lx}:")
    self.block = lx
    self.pool[t].append(acc)

  def body(self, depth: int, parts: int) -> None:
    for _ in range(parts):
      k = self.rng.random()
      if k < 0.2 and depth < 2: self.diamond(depth)
      elif k < 0.3 and depth < 2: self.loop(depth)
      else: self.straight(self.rng.randint(1, 5))

  def program(self) -> str:
    self.lines.append("br label %entry0")
    self.lines.append("entry0:")
    self.body(0, self.rng.randint(2, 6))
    small = self.emit("i64", f"sext i16 {self.pick('i16')} to i64")
    i = self.emit("i64", f"xor i64 {self.pick('i64')}, {small}")
    f = self.pick("double")
    self.lines += [f"%fn = fcmp uno double {f}, 0.0", f"%fc = select i1 %fn, double 0x7FF8000000000000, double {f}",
                   "%fb = bitcast double %fc to i64", f"%r = xor i64 {i}, %fb"]
    return "\n".join(self.lines)


def program(seed: int) -> tuple[list[str], str, str]:
  """(argument types, result type, body) of random program `seed`."""
  return ["i32", "i64", "double"], "i64", Gen(seed).program()


def program_with_calls(seed: int) -> tuple[list[str], str, str, str]:
  """(argument types, result type, body, helper): random program `seed` as a noinline function the body calls twice
  (two inlined copies on the SM, its branches and loops inside a call, threads diverging within it)."""
  f = f"@rf{seed}"
  helper = (f"define internal i64 {f}(i32 %a, i64 %b, double %c) noinline {{\nstart:\n{Gen(seed).program()}\nret i64 %r\n}}\n")
  body = (f"%r1 = call i64 {f}(i32 %a, i64 %b, double %c)\n%a2 = xor i32 %a, 5\n%b2 = add i64 %b, %r1\n"
          f"%r2 = call i64 {f}(i32 %a2, i64 %b2, double %c)\n%r = sub i64 %r2, %r1")
  return ["i32", "i64", "double"], "i64", body, helper
