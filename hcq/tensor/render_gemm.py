"""A packed matmul's kernel as LLVM IR in the exact shape it runs: phi loops and a register-tile micro-kernel.

The packed GEMM (Tensor.matmul: `a` in register tiles of `rows` interleaved rows, `b` in column panels, k in chunks)
plans into a register-tiled loop kernel whose loads are affine in every loop. For float32 and float64 on the CPU this
module renders it without the generic writer's allocas: loop counters and the tile's accumulators are phis, the
micro-kernel's k loop is unrolled (x4 where kc allows) and per k step loads the panel's row of `b` as native vectors
(two ymm for a 16-float panel on AVX2), broadcasts the tile's `rows` values of `a` and issues rows x vectors
`llvm.fma` calls. The IR needs no mid-level passes (SROA, instcombine, LICM were all the generic kernel needed them
for), so it is marked for code generation only: 25-35 ms of compile instead of 55-85 ms. Any other kernel (another
dtype, a mask on a load, an index that is not affine in the loops) returns None and takes the generic writer."""
from __future__ import annotations
from dataclasses import dataclass
from hcq.drivers.cpu.jit import CODEGEN_ONLY
from hcq.tensor.dtype import dtypes
from hcq.tensor.loops import LoopKernel, host_simd_registers
from hcq.tensor.symbolic import Expr, Num, Var, linear_coefficient, substitute, variables
from hcq.tensor.view import contiguous_strides

NATIVE_BYTES = 64 if host_simd_registers() >= 32 else 32  # one SIMD register: zmm with AVX-512, else ymm


@dataclass
class Affine:
  """A buffer index as const + sum(coef[var] * var) over the loop counters q0.., the tile row r, lane l and k."""
  const: int
  coef: dict[str, int]

  def at(self, **values: int) -> int: return self.const + sum(self.coef.get(k, 0) * v for k, v in values.items())


@dataclass
class GemmLayout:
  """What the micro-kernel needs: loops (axis, step) outer to inner, the thread and accumulated loops' depths, the
  tile (rows x vectors of lanes), kc, and the affine indices of the output and of the broadcast and vector operands."""
  loops: list[tuple[int, int]]
  thread_depth: int | None
  accumulate_depth: int
  row_depth: int
  rows: int
  columns: int
  kc: int
  out: Affine
  bcast: tuple[int, Affine]   # (buffer, index): the operand broadcast across lanes (a)
  vector: tuple[int, Affine]  # (buffer, index): the operand contiguous along lanes (b)


def _affine(e: Expr, values: dict[str, Expr], names: list[str]) -> Affine | None:
  e = substitute(e, values)
  if not variables(e) <= set(names): return None
  coef = {n: linear_coefficient(e, n) for n in names}
  if any(c is None for c in coef.values()): return None
  const = substitute(e, {n: Num(0) for n in names})
  return Affine(const.value, coef) if isinstance(const, Num) else None


def gemm_layout(lk: LoopKernel) -> GemmLayout | None:
  """The layout of a packed float matmul kernel (sum over k of load * load into a register tile, k chunks accumulated
  into the output), or None for any other kernel."""
  spec, F = lk.spec, lk.spec.full_shape
  red = spec.ast
  if lk.accumulate_axis is None or len(lk.reduce_axes) != 1 or lk.vec_axis not in lk.global_axes: return None
  if red.op != "REDUCE" or red.arg[0] != "SUM" or spec.out_dtype not in (dtypes.float32, dtypes.float64): return None
  mul = red.srcs[0]
  if mul.op != "ALU" or mul.arg != "MUL" or any(s.op != "LOAD" or s.dtype != spec.out_dtype for s in mul.srcs): return None
  tiled = [a for a in lk.global_axes if lk.unroll.get(a, 1) > 1 and a != lk.vec_axis]
  if len(tiled) != 1: return None
  row_axis, vec_axis, k_axis = tiled[0], lk.vec_axis, lk.reduce_axes[0]
  loops = [(a, lk.step(a)) for a in lk.loop_axes]
  values: dict[str, Expr] = {f"a{a}": Var(f"q{d}", 0, F[a] // s - 1) * s for d, (a, s) in enumerate(loops)}
  rows, columns = lk.unroll[row_axis], lk.step(vec_axis)
  depth = {a: d for d, (a, _) in enumerate(loops)}
  values[f"a{row_axis}"] = values[f"a{row_axis}"] + Var("r", 0, rows - 1)
  values[f"a{vec_axis}"] = values[f"a{vec_axis}"] + Var("l", 0, columns - 1)
  values[f"a{k_axis}"] = Var("k", 0, F[k_axis] - 1)
  names = [f"q{d}" for d in range(len(loops))] + ["r", "l", "k"]
  indices = []
  for ld in mul.srcs:
    idx, valid = ld.arg[1].index([Num(0) if s == 1 else Var(f"a{d}", 0, s - 1) for d, s in enumerate(ld.arg[1].shape)])
    if valid.conds: return None
    indices.append((ld.arg[0], _affine(idx, values, names)))
  strides = contiguous_strides(spec.out_shape)
  out = _affine(sum((Var(f"a{d}", 0, s - 1) * strides[d] for d, s in enumerate(spec.out_shape) if s > 1), Num(0)), values, names)
  if out is None or any(a is None for _, a in indices) or out.coef["l"] != 1 or out.coef["k"] != 0: return None
  bc = [(b, a) for b, a in indices if a.coef["l"] == 0]
  vec = [(b, a) for b, a in indices if a.coef["l"] == 1]
  if len(bc) != 1 or len(vec) != 1: return None
  thread = depth[lk.thread_axis] if lk.thread_axis is not None else None
  return GemmLayout(loops, thread, depth[lk.accumulate_axis], depth[row_axis], rows, columns, F[k_axis], out, bc[0], vec[0])


def render_gemm(lk: LoopKernel, g: GemmLayout) -> str:
  """`void NAME(ptr out, ptr in..., i64 start, i64 end)` for the layout: the generic kernel's signature and loops
  ([start, end) of the thread axis), each tile's k loop a micro-kernel of phis, the first k chunk stored and the others
  added to the output."""
  spec = lk.spec
  T = "float" if spec.out_dtype == dtypes.float32 else "double"
  isz = spec.out_dtype.itemsize
  N = min(NATIVE_BYTES // isz, g.columns)
  V, nv = f"<{N} x {T}>", g.columns // N
  fma = f"llvm.fma.v{N}{'f32' if isz == 4 else 'f64'}"
  L: list[str] = []
  e = L.append
  qs = [f"%q{d}" for d in range(len(g.loops))]

  def offset(name: str, a: Affine) -> str:   # the tile's base index from the loop counters, as an i64 value
    cur = str(a.const)
    for d, q in enumerate(qs):
      c = a.coef.get(f"q{d}", 0)
      if c:
        e(f"  %{name}.m{d} = mul i64 {q}, {c}")
        e(f"  %{name}.s{d} = add i64 {cur}, %{name}.m{d}")
        cur = f"%{name}.s{d}"
    return cur

  def tile() -> None:
    ob, ab, bb = offset("o", g.out), offset("a", g.bcast[1]), offset("b", g.vector[1])
    e(f"  %op = getelementptr inbounds {T}, ptr %b0, i64 {ob}")
    e(f"  %ap = getelementptr inbounds {T}, ptr %b{g.bcast[0]}, i64 {ab}")
    e(f"  %bp = getelementptr inbounds {T}, ptr %b{g.vector[0]}, i64 {bb}")
    for r in range(g.rows):   # the next tile's outputs, which it reads back: a miss then would stall its start
      for j in range(0, g.columns, 64 // isz):   # one per cache line
        e(f"  %pf{r}_{j} = getelementptr {T}, ptr %op, i64 {g.out.coef[f'q{g.row_depth}'] + g.out.at(r=r, l=j) - g.out.const}")
        e(f"  call void @llvm.prefetch.p0(ptr %pf{r}_{j}, i32 1, i32 3, i32 1)")
    e("  br label %kl")
    e("kl:")
    e("  %k = phi i64 [ 0, %tile ], [ %k.next, %kl ]")
    U = next(u for u in (4, 2, 1) if g.kc % u == 0)
    next_panel = g.vector[1].coef.get(f"q{g.row_depth - 1}", 0) if g.row_depth else 0  # the panel loop's step in b
    acc = {(r, j): f"%acc{r}_{j}" for r in range(g.rows) for j in range(nv)}
    for (r, j), name in acc.items(): e(f"  {name} = phi {V} [ zeroinitializer, %tile ], [ %f{U - 1}_{r}_{j}, %kl ]")
    bk, ak = g.vector[1].coef["k"], g.bcast[1].coef["k"]
    for u in range(U):
      e(f"  %kk{u} = add i64 %k, {u}")
      e(f"  %bk{u} = mul i64 %kk{u}, {bk}")
      e(f"  %ak{u} = mul i64 %kk{u}, {ak}")
      if next_panel:  # the next panel's row of b into L2 (one line per k): max +4-6% on 1024^2, pairs alternated
        e(f"  %pn{u} = add i64 %bk{u}, {next_panel}")
        e(f"  %pq{u} = getelementptr {T}, ptr %bp, i64 %pn{u}")
        e(f"  call void @llvm.prefetch.p0(ptr %pq{u}, i32 0, i32 2, i32 1)")
      for j in range(nv):
        e(f"  %bi{u}_{j} = add i64 %bk{u}, {g.vector[1].at(l=j * N) - g.vector[1].const}")
        e(f"  %bq{u}_{j} = getelementptr inbounds {T}, ptr %bp, i64 %bi{u}_{j}")
        e(f"  %bv{u}_{j} = load {V}, ptr %bq{u}_{j}, align {isz}")
      for r in range(g.rows):
        e(f"  %ai{u}_{r} = add i64 %ak{u}, {g.bcast[1].at(r=r) - g.bcast[1].const}")
        e(f"  %aq{u}_{r} = getelementptr inbounds {T}, ptr %ap, i64 %ai{u}_{r}")
        e(f"  %as{u}_{r} = load {T}, ptr %aq{u}_{r}, align {isz}")
        e(f"  %ae{u}_{r} = insertelement {V} poison, {T} %as{u}_{r}, i64 0")
        e(f"  %av{u}_{r} = shufflevector {V} %ae{u}_{r}, {V} poison, <{N} x i32> zeroinitializer")
        for j in range(nv):
          e(f"  %f{u}_{r}_{j} = call {V} @{fma}({V} %av{u}_{r}, {V} %bv{u}_{j}, {V} {acc[r, j]})")
          acc[r, j] = f"%f{u}_{r}_{j}"
    e(f"  %k.next = add i64 %k, {U}")
    e(f"  %k.more = icmp ult i64 %k.next, {g.kc}")
    e("  br i1 %k.more, label %kl, label %kdone")
    e("kdone:")   # the first k chunk stores, the others add to what the earlier ones stored
    e(f"  %first = icmp eq i64 %q{g.accumulate_depth}, 0")
    e("  br i1 %first, label %store, label %add")
    e("add:")
    outs = {(r, j): g.out.at(r=r, l=j * N) - g.out.const for r in range(g.rows) for j in range(nv)}
    for (r, j), o in outs.items():
      e(f"  %cq{r}_{j} = getelementptr inbounds {T}, ptr %op, i64 {o}")
      e(f"  %co{r}_{j} = load {V}, ptr %cq{r}_{j}, align {isz}")
      e(f"  %cs{r}_{j} = fadd {V} %co{r}_{j}, {acc[r, j]}")
    e("  br label %store")
    e("store:")
    for r, j in outs: e(f"  %fin{r}_{j} = phi {V} [ {acc[r, j]}, %kdone ], [ %cs{r}_{j}, %add ]")
    for (r, j), o in outs.items():
      e(f"  %sq{r}_{j} = getelementptr inbounds {T}, ptr %op, i64 {o}")
      e(f"  store {V} %fin{r}_{j}, ptr %sq{r}_{j}, align {isz}")

  def loops(d: int, pred: str) -> None:   # loop d and those inside it, entered from block `pred`
    if d == len(g.loops):
      e("  br label %tile")
      e("tile:")
      tile()
      return
    axis, step = g.loops[d]
    lo, hi = "0", str(spec.full_shape[axis] // step)
    if d == g.thread_depth:
      e(f"  %lo{d} = sdiv i64 %start, {step}")
      e(f"  %hi.r{d} = add i64 %end, {step - 1}")
      e(f"  %hi{d} = sdiv i64 %hi.r{d}, {step}")
      e(f"  %any{d} = icmp slt i64 %lo{d}, %hi{d}")
      e(f"  br i1 %any{d}, label %h{d}, label %x{d}")
      lo, hi = f"%lo{d}", f"%hi{d}"
    else:
      e(f"  br label %h{d}")
    e(f"h{d}:")
    e(f"  %q{d} = phi i64 [ {lo}, %{pred} ], [ %n{d}, %latch{d} ]")
    loops(d + 1, f"h{d}")
    e(f"  br label %latch{d}")
    e(f"latch{d}:")
    e(f"  %n{d} = add i64 %q{d}, 1")
    e(f"  %c{d} = icmp slt i64 %n{d}, {hi}")
    e(f"  br i1 %c{d}, label %h{d}, label %x{d}")
    e(f"x{d}:")

  params = ", ".join([f"ptr noalias align 16 %b{i}" for i in range(len(spec.buf_dtypes))] + ["i64 %start", "i64 %end"])
  e(f"define void @{lk.name}({params}) #0 {{")
  e("entry:")
  loops(0, "entry")
  e("  ret void")
  e("}")
  head = [CODEGEN_ONLY, f"declare {V} @{fma}({V}, {V}, {V})", "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)", ""]
  return "\n".join(head + L)
