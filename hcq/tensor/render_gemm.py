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
class Operand:
  """A load of the product: its buffer, affine index, and validity (lo <= affine < hi for each condition: a pad)."""
  buf: int
  index: Affine
  conds: list[tuple[Affine, int, int]]

  def depends(self, name: str) -> bool: return any(a.coef.get(name, 0) for a in [self.index] + [c[0] for c in self.conds])


@dataclass
class GemmLayout:
  """What the micro-kernel needs: loops (axis, step) outer to inner, the thread and accumulated loops' depths, the
  tile (rows x vectors of lanes), kc, the affine index of the output, the broadcast and vector operands, and the loop
  depths whose bodies start by packing them (-1: once, at entry)."""
  loops: list[tuple[int, int]]
  thread_depth: int | None
  accumulate_depth: int | None
  row_depth: int
  rows: int
  columns: int
  kc: int
  out: Affine
  bcast: Operand   # the operand broadcast across lanes (a), packed per row block into [tile][k][row]
  vector: Operand  # the operand contiguous along lanes (b), packed per column panel into [k][lane]
  bcast_pack_depth: int
  vector_pack_depth: int


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
  if len(lk.reduce_axes) != 1 or lk.vec_axis not in lk.global_axes: return None
  if red.op != "REDUCE" or red.arg[0] != "SUM" or spec.out_dtype not in (dtypes.float32, dtypes.float64): return None
  mul = red.srcs[0]
  if mul.op != "ALU" or mul.arg != "MUL" or any(s.op != "LOAD" or s.dtype != spec.out_dtype for s in mul.srcs): return None
  tiled = [a for a in lk.global_axes if lk.unroll.get(a, 1) > 1 and a != lk.vec_axis]
  if len(tiled) != 1: return None
  row_axis, vec_axis, k_axis = tiled[0], lk.vec_axis, lk.reduce_axes[0]
  order = lk.loop_axes
  if lk.thread_axis is None and lk.accumulate_axis is not None:  # k chunks outermost: a's pack then never repeats
    order = [lk.accumulate_axis] + [a for a in order if a != lk.accumulate_axis]
  loops = [(a, lk.step(a)) for a in order]
  values: dict[str, Expr] = {f"a{a}": Var(f"q{d}", 0, F[a] // s - 1) * s for d, (a, s) in enumerate(loops)}
  rows, columns = lk.unroll[row_axis], lk.step(vec_axis)
  depth = {a: d for d, (a, _) in enumerate(loops)}
  values[f"a{row_axis}"] = values[f"a{row_axis}"] + Var("r", 0, rows - 1)
  values[f"a{vec_axis}"] = values[f"a{vec_axis}"] + Var("l", 0, columns - 1)
  values[f"a{k_axis}"] = Var("k", 0, F[k_axis] - 1)
  names = [f"q{d}" for d in range(len(loops))] + ["r", "l", "k"]
  operands = []
  for ld in mul.srcs:
    idx, valid = ld.arg[1].index([Num(0) if s == 1 else Var(f"a{d}", 0, s - 1) for d, s in enumerate(ld.arg[1].shape)])
    conds = [(_affine(e, values, names), lo, hi) for e, lo, hi in valid.conds]
    index = _affine(idx, values, names)
    if index is None or any(c[0] is None for c in conds): return None
    operands.append(Operand(ld.arg[0], index, conds))
  strides = contiguous_strides(spec.out_shape)
  out = _affine(sum((Var(f"a{d}", 0, s - 1) * strides[d] for d, s in enumerate(spec.out_shape) if s > 1), Num(0)), values, names)
  if out is None or out.coef["l"] != 1 or out.coef["k"] != 0: return None
  bc = [o for o in operands if not o.depends("l") and o.index.coef["k"] == 1]   # packed by runs along k
  vec = [o for o in operands if o.index.coef["l"] == 1 and not o.depends("r")]
  if len(bc) != 1 or len(vec) != 1: return None
  row_depth = depth[row_axis]
  # the tile is the innermost loop body: loops inside the row loop run once
  if any(F[a] // s != 1 for a, s in loops[row_depth + 1:]): return None
  # each operand is packed at the start of the deepest loop it depends on; b's panel must not depend on the row loop
  # and neither pack may sit inside it or inside the thread loop's split (both cover the row loop's whole range)
  def pack_depth(o: Operand) -> int: return max([d for d in range(row_depth) if o.depends(f"q{d}")], default=-1)
  thread = depth[lk.thread_axis] if lk.thread_axis is not None else None
  if vec[0].depends(f"q{row_depth}") or thread == row_depth: return None
  acc = depth[lk.accumulate_axis] if lk.accumulate_axis is not None else None
  return GemmLayout(loops, thread, acc, row_depth, rows, columns, F[k_axis], out, bc[0], vec[0], pack_depth(bc[0]), pack_depth(vec[0]))


def render_gemm(lk: LoopKernel, g: GemmLayout) -> str:
  """`void NAME(ptr out, ptr in..., i64 start, i64 end)` for the layout: the generic kernel's signature and loops
  ([start, end) of the thread axis); each operand packed into a stack buffer where its loops change (a: the row block's
  tiles, [tile][k][row]; b: the panel, [k][lane]; zeros where a pad's mask is false), each tile's k loop a
  micro-kernel of phis over the packs, the first k chunk stored and the others added to the output."""
  spec = lk.spec
  T = "float" if spec.out_dtype == dtypes.float32 else "double"
  isz = spec.out_dtype.itemsize
  N = min(NATIVE_BYTES // isz, g.columns)
  V, nv = f"<{N} x {T}>", g.columns // N
  vt = f"v{N}{'f32' if isz == 4 else 'f64'}"
  fma, masked_load = f"llvm.fma.{vt}", f"llvm.masked.load.{vt}.p0"
  tiles = spec.full_shape[g.loops[g.row_depth][0]] // g.rows   # the row loop's count: a's pack holds them all
  qs = [f"%q{d}" for d in range(len(g.loops))]
  # a's pack holds each row's k chunk in whole vectors plus one cache line, so that a tile's rows do not share L1 sets
  a_stride = -(-g.kc // N) * N + 64 // isz
  L: list[str] = []
  e = L.append

  def lin(name: str, a: Affine, terms: dict[str, str]) -> str:
    """const + sum(coef * value) as an i64 value, over the counters of the loops outside the row loop and `terms`
    (name -> IR value); the loops inside the row loop run once (at 0)."""
    cur = str(a.const)
    names = {f"q{d}": q for d, q in enumerate(qs[:g.row_depth])} | terms
    for n, v in names.items():
      c = a.coef.get(n, 0)
      if c:
        e(f"  %{name}.m{n} = mul i64 {v}, {c}")
        e(f"  %{name}.s{n} = add i64 {cur}, %{name}.m{n}")
        cur = f"%{name}.s{n}"
    return cur

  def copy_run(tag: str, o: Operand, terms: dict[str, str], var: str, count: int, dst: str, pred: str) -> str:
    """Copy `count` elements of `o` along `var` (its coefficient is 1) from where `terms` point to `dst`, in native
    vectors; lanes where a pad's condition fails (or past `count`) read as 0 through a masked load. Returns the block
    it ends in."""
    src = lin(f"{tag}.s", o.index, terms | {var: "0"})
    e(f"  %{tag}.sp = getelementptr {T}, ptr %b{o.buf}, i64 {src}")
    conds = [(lin(f"{tag}.c{i}", a, terms | {var: "0"}), a.coef.get(var, 0), lo, hi) for i, (a, lo, hi) in enumerate(o.conds)]
    if count % N: conds.append(("0", 1, 0, count))   # the last vector's lanes past the run
    e(f"  br label %{tag}")
    e(f"{tag}:")
    e(f"  %{tag}.v = phi i64 [ 0, %{pred} ], [ %{tag}.vn, %{tag} ]")   # the run's element index, a vector at a time
    e(f"  %{tag}.p = getelementptr {T}, ptr %{tag}.sp, i64 %{tag}.v")
    if conds:   # each condition is affine in `var`: its value at 0, plus var's coefficient times the lane's index
      mask = None
      for i, (v0, c, lo, hi) in enumerate(conds):
        splat = lambda x: f"<{', '.join([f'i64 {x}'] * N)}>"
        e(f"  %{tag}.m{i} = mul i64 %{tag}.v, {c}")
        e(f"  %{tag}.a{i} = add i64 {v0}, %{tag}.m{i}")
        e(f"  %{tag}.e{i} = insertelement <{N} x i64> poison, i64 %{tag}.a{i}, i64 0")
        e(f"  %{tag}.b{i} = shufflevector <{N} x i64> %{tag}.e{i}, <{N} x i64> poison, <{N} x i32> zeroinitializer")
        e(f"  %{tag}.w{i} = add <{N} x i64> %{tag}.b{i}, <{', '.join(f'i64 {x * c}' for x in range(N))}>")
        e(f"  %{tag}.lo{i} = icmp sge <{N} x i64> %{tag}.w{i}, {splat(lo)}")
        e(f"  %{tag}.hi{i} = icmp slt <{N} x i64> %{tag}.w{i}, {splat(hi)}")
        e(f"  %{tag}.ok{i} = and <{N} x i1> %{tag}.lo{i}, %{tag}.hi{i}")
        if mask is not None: e(f"  %{tag}.all{i} = and <{N} x i1> {mask}, %{tag}.ok{i}")
        mask = f"%{tag}.ok{i}" if mask is None else f"%{tag}.all{i}"
      e(f"  %{tag}.x = call {V} @{masked_load}(ptr %{tag}.p, i32 {isz}, <{N} x i1> {mask}, {V} zeroinitializer)")
    else:
      e(f"  %{tag}.x = load {V}, ptr %{tag}.p, align {isz}")
    e(f"  %{tag}.q = getelementptr inbounds {T}, ptr {dst}, i64 %{tag}.v")
    e(f"  store {V} %{tag}.x, ptr %{tag}.q, align {N * isz}")
    e(f"  %{tag}.vn = add i64 %{tag}.v, {N}")
    e(f"  %{tag}.more = icmp slt i64 %{tag}.vn, {count}")
    e(f"  br i1 %{tag}.more, label %{tag}, label %{tag}.done")
    e(f"{tag}.done:")
    return f"{tag}.done"

  def pack_a(pred: str) -> str:   # the row block's tiles of a, row by row ([tile][row][k], rows a_stride apart)
    e("  br label %pa.t")
    e("pa.t:")
    e(f"  %pa.tq = phi i64 [ 0, %{pred} ], [ %pa.tn, %pa.r{g.rows - 1}.done ]")
    e(f"  %pa.to = mul i64 %pa.tq, {g.rows * a_stride}")
    last = "pa.t"
    for r in range(g.rows):
      e(f"  %pa.d{r} = getelementptr inbounds {T}, ptr %apack, i64 %pa.to")
      e(f"  %pa.dr{r} = getelementptr inbounds {T}, ptr %pa.d{r}, i64 {r * a_stride}")
      last = copy_run(f"pa.r{r}", g.bcast, {f"q{g.row_depth}": "%pa.tq", "r": str(r)}, "k", g.kc, f"%pa.dr{r}", last)
    e("  %pa.tn = add i64 %pa.tq, 1")
    e(f"  %pa.tc = icmp slt i64 %pa.tn, {tiles}")
    e("  br i1 %pa.tc, label %pa.t, label %pa.done")
    e("pa.done:")
    return "pa.done"

  def pack_b(pred: str) -> str:   # the column panel of b, [k][lane]
    e("  br label %pb.k")
    e("pb.k:")
    e(f"  %pb.kq = phi i64 [ 0, %{pred} ], [ %pb.kn, %pb.r.done ]")
    e(f"  %pb.d = mul i64 %pb.kq, {g.columns}")
    e("  %pb.dp = getelementptr inbounds {T}, ptr %bpack, i64 %pb.d".replace("{T}", T))
    copy_run("pb.r", g.vector, {"k": "%pb.kq"}, "l", g.columns, "%pb.dp", "pb.k")
    e("  %pb.kn = add i64 %pb.kq, 1")
    e(f"  %pb.kc = icmp slt i64 %pb.kn, {g.kc}")
    e("  br i1 %pb.kc, label %pb.k, label %pb.done")
    e("pb.done:")
    return "pb.done"

  def packs(depth: int, pred: str) -> str:   # the packs that belong at the start of this loop's body (-1: entry)
    if g.bcast_pack_depth == depth: pred = pack_a(pred)
    if g.vector_pack_depth == depth: pred = pack_b(pred)
    return pred

  def tile() -> None:
    ob = lin("o", g.out, {f"q{g.row_depth}": f"%q{g.row_depth}"})
    e(f"  %op = getelementptr inbounds {T}, ptr %b0, i64 {ob}")
    e(f"  %ao = mul i64 %q{g.row_depth}, {a_stride * g.rows}")
    e(f"  %ap = getelementptr inbounds {T}, ptr %apack, i64 %ao")
    for r in range(g.rows):   # the next tile's outputs, which it reads back: a miss then would stall its start
      for j in range(0, g.columns, 64 // isz):   # one per cache line
        e(f"  %pf{r}_{j} = getelementptr {T}, ptr %op, i64 {g.out.coef[f'q{g.row_depth}'] + g.out.at(r=r, l=j) - g.out.const}")
        e(f"  call void @llvm.prefetch.p0(ptr %pf{r}_{j}, i32 1, i32 3, i32 1)")
    next_panel = g.vector.index.coef.get(f"q{g.vector_pack_depth}", 0) if g.vector_pack_depth >= 0 else 0
    start = "tile"
    if next_panel:   # this tile's share of the rows the next pack of b reads (far apart: misses stalled the pack)
      share, ck = -(-g.kc // tiles), g.vector.index.coef["k"]
      e(f"  %bn = getelementptr {T}, ptr %b{g.vector.buf}, i64 {lin('bn', g.vector.index, {'k': '0', 'l': '0'})}")
      e(f"  %bs = mul i64 %q{g.row_depth}, {share * ck}")
      e(f"  %bs1 = add i64 %bs, {next_panel}")
      e("  br label %pf")
      e("pf:")
      e("  %pfi = phi i64 [ 0, %tile ], [ %pfn, %pf ]")
      e(f"  %pfm = mul i64 %pfi, {ck}")
      e("  %pfo = add i64 %bs1, %pfm")
      e(f"  %pfq = getelementptr {T}, ptr %bn, i64 %pfo")
      e("  call void @llvm.prefetch.p0(ptr %pfq, i32 0, i32 2, i32 1)")
      e("  %pfn = add i64 %pfi, 1")
      e(f"  %pfc = icmp slt i64 %pfn, {share}")
      e("  br i1 %pfc, label %pf, label %pfdone")
      e("pfdone:")
      start = "pfdone"
    e("  br label %kl")
    e("kl:")
    e(f"  %k = phi i64 [ 0, %{start} ], [ %k.next, %kl ]")
    U = next(u for u in (4, 2, 1) if g.kc % u == 0)
    acc = {(r, j): f"%acc{r}_{j}" for r in range(g.rows) for j in range(nv)}
    for (r, j), name in acc.items(): e(f"  {name} = phi {V} [ zeroinitializer, %{start} ], [ %f{U - 1}_{r}_{j}, %kl ]")
    for u in range(U):
      e(f"  %kk{u} = add i64 %k, {u}")
      e(f"  %bk{u} = mul i64 %kk{u}, {g.columns}")
      for j in range(nv):
        e(f"  %bi{u}_{j} = add i64 %bk{u}, {j * N}")
        e(f"  %bq{u}_{j} = getelementptr inbounds {T}, ptr %bpack, i64 %bi{u}_{j}")
        e(f"  %bv{u}_{j} = load {V}, ptr %bq{u}_{j}, align {N * isz}")
      for r in range(g.rows):
        e(f"  %ai{u}_{r} = add i64 %kk{u}, {r * a_stride}")
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
    outs = {(r, j): g.out.at(r=r, l=j * N) - g.out.const for r in range(g.rows) for j in range(nv)}
    if g.accumulate_depth is not None:
      e(f"  %first = icmp eq i64 %q{g.accumulate_depth}, 0")
      e("  br i1 %first, label %store, label %add")
      e("add:")
      for (r, j), o in outs.items():
        e(f"  %cq{r}_{j} = getelementptr inbounds {T}, ptr %op, i64 {o}")
        e(f"  %co{r}_{j} = load {V}, ptr %cq{r}_{j}, align {isz}")
        e(f"  %cs{r}_{j} = fadd {V} %co{r}_{j}, {acc[r, j]}")
      e("  br label %store")
      e("store:")
      for r, j in outs: e(f"  %fin{r}_{j} = phi {V} [ {acc[r, j]}, %kdone ], [ %cs{r}_{j}, %add ]")
    final = {(r, j): f"%fin{r}_{j}" if g.accumulate_depth is not None else acc[r, j] for r, j in outs}
    for (r, j), o in outs.items():
      e(f"  %sq{r}_{j} = getelementptr inbounds {T}, ptr %op, i64 {o}")
      e(f"  store {V} {final[r, j]}, ptr %sq{r}_{j}, align {isz}")

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
    loops(d + 1, packs(d, f"h{d}"))
    e(f"  br label %latch{d}")
    e(f"latch{d}:")
    e(f"  %n{d} = add i64 %q{d}, 1")
    e(f"  %c{d} = icmp slt i64 %n{d}, {hi}")
    e(f"  br i1 %c{d}, label %h{d}, label %x{d}")
    e(f"x{d}:")

  params = ", ".join([f"ptr noalias align 16 %b{i}" for i in range(len(spec.buf_dtypes))] + ["i64 %start", "i64 %end"])
  e(f"define void @{lk.name}({params}) #0 {{")
  e("entry:")
  e(f"  %apack = alloca [{tiles * g.rows * a_stride} x {T}], align 64")
  e(f"  %bpack = alloca [{g.kc * g.columns} x {T}], align 64")
  loops(0, packs(-1, "entry"))
  e("  ret void")
  e("}")
  head = [CODEGEN_ONLY, f"declare {V} @{fma}({V}, {V}, {V})", f"declare {V} @{masked_load}(ptr, i32, <{N} x i1>, {V})",
          "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)", ""]
  return "\n".join(head + L)
