"""A float matmul's kernel as LLVM IR in the exact shape it runs: in-kernel packing, phi loops and a register-tile
micro-kernel.

Tensor.matmul plans a float32/float64 product on the CPU as a register-tiled loop kernel over `a` and `b` as they
are (through their views and pads: loads and masks affine in every loop). This module renders it without the generic
writer's allocas: each operand is packed into the workgroup's workspace at the start of the deepest loop outside the tiles it
depends on (a row block's tiles of `a`, each row's k chunk as it is; a column block's panels of `b`), a pad's zeros
coming from masked loads or a run of zeros; each register tile then passes over all the panels of the column block
(its chunk of `a` stays in L1, `b`'s panels stream from L2, its outputs move along the rows); loop counters and the
tile's accumulators are phis; the micro-kernel's k loop is unrolled to 32 FMAs a pass (k_unroll) and per k
step loads the panel's row of `b` as native vectors (two ymm for a 16-float panel on AVX2), broadcasts the tile's
`rows` values of `a` and issues rows x vectors `llvm.fma` calls (a tile whose panel's last half, or with zmm vectors
last three quarters, lie in a cropped n's padding runs a second k loop over the rest only; the last k chunk's loop
stops at k, not at the chunk's padded length). The IR needs no mid-level passes, so it is marked
for code generation only. Any other kernel (another dtype, an index or mask that is not affine in the loops, packs
over PACK_BYTES) returns None and takes the generic writer."""
from __future__ import annotations
from dataclasses import dataclass
from hcq.drivers.cpu.jit import CODEGEN_ONLY
from hcq.tensor.dtype import dtypes
from hcq.tensor.loops import LoopKernel, host_simd_registers
from hcq.memo import Memo
from hcq.tensor.symbolic import Expr, Num, Var, linear_coefficient, substitute, variables
from hcq.tensor.view import ShapeTracker

NATIVE_BYTES = 64 if host_simd_registers() >= 32 else 32  # one SIMD register: zmm with AVX-512, else ymm
# the packs live in the workgroup's workspace (a device buffer the caller passes: `workspace_bytes` a workgroup), not
# on a stack, so that any thread runs the kernel (the CPU device's engine, its workers, a host thread that waits): 8 MiB
# holds b's packed k chunk beside a's block for n up to about 7,000 (kc = 256, float32); a kernel whose packs would
# pass this even with b packed one panel at a time (an unblocked product of a tall a) takes the generic writer
PACK_BYTES = 8 << 20


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
  out: Operand     # buffer 0's index, and where a view crops it the conditions of an element being stored
  bcast: Operand   # the operand broadcast across lanes (a), packed per row block into [tile][row][k]
  vector: Operand  # the operand contiguous along lanes (b), packed into [panel][k][lane]
  bcast_pack_depth: int
  vector_pack_depth: int
  tiles: int       # the row loop's count: a's pack holds them all
  panel_depth: int  # the column panels' loop
  panels: int      # the panels b's pack holds: all of the panel loop's (1 where b has no panel loop)
  row_limit: tuple[Affine, int] | None  # a's row index and its end where m is padded: tiles past it are skipped

  def pack_sizes(self, lanes: int) -> tuple[int, int, int]:
    """(a tile's k chunk in whole vectors of `lanes`, a's pack, b's pack) in elements."""
    a_len = -(-self.kc // lanes) * lanes
    return a_len, self.tiles * self.rows * a_len, self.panels * self.kc * self.columns


def _affine(e: Expr, values: dict[str, Expr], names: list[str]) -> Affine | None:
  e = substitute(e, values)
  if not variables(e) <= set(names): return None
  coef = {n: linear_coefficient(e, n) for n in names}
  if any(c is None for c in coef.values()): return None
  const = substitute(e, {n: Num(0) for n in names})
  return Affine(const.value, coef) if isinstance(const, Num) else None


_LAYOUTS: Memo[GemmLayout | None] = Memo()


def gemm_layout(lk: LoopKernel) -> GemmLayout | None:
  """The layout of a packed float matmul kernel (sum over k of load * load into a register tile, k chunks accumulated
  into the output), or None for any other kernel. Kept per loop plan (the scheduler's probe and the render of one
  product ask for the same one: 2 ms each)."""
  key = (lk.spec.key, tuple(lk.global_axes), tuple(lk.reduce_axes), lk.vec_axis, lk.vec_width, tuple(sorted(lk.unroll.items())),
         lk.thread_axis, lk.accumulate_axis, PACK_BYTES)
  return _LAYOUTS.get(key, lambda: _gemm_layout(lk))


def _gemm_layout(lk: LoopKernel) -> GemmLayout | None:
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
  if lk.accumulate_axis is not None:  # k chunks outermost: a's and b's packs then never repeat (per thread)
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
  out_view = spec.out_view or ShapeTracker.contiguous(spec.out_shape)
  idx, valid = out_view.index([Num(0) if s == 1 else Var(f"a{d}", 0, s - 1) for d, s in enumerate(spec.out_shape)])
  out = Operand(0, _affine(idx, values, names), [(_affine(e, values, names), lo, hi) for e, lo, hi in valid.conds])
  if out.index is None or any(c[0] is None or c[0].coef["k"] for c in out.conds): return None
  if out.index.coef["l"] != 1 or out.index.coef["k"] != 0: return None
  bc = [o for o in operands if not o.depends("l") and o.index.coef["k"] == 1]   # packed by runs along k
  vec = [o for o in operands if o.index.coef["l"] == 1 and not o.depends("r")]
  if len(bc) != 1 or len(vec) != 1: return None
  row_depth = depth[row_axis]
  # b's column panels: the innermost loop b depends on, inside the row loop (loops.plan puts it there): each register
  # tile passes over all the panels of b's pack, its own chunk of a staying in L1. Every other loop inside the row
  # loop runs once
  panel = max((d for d, (a, s) in enumerate(loops) if vec[0].depends(f"q{d}") and F[a] // s > 1), default=-1)
  if -1 < panel < row_depth or (panel > row_depth and bc[0].depends(f"q{panel}")): return None
  if any(F[a] // s != 1 for d, (a, s) in enumerate(loops) if d > row_depth and d != panel): return None
  # each operand is packed at the start of the deepest loop outside the row loop it depends on; b must not depend on
  # the row loop and neither pack may sit inside the thread loop's split (both cover the row loop's whole range)
  def pack_depth(o: Operand) -> int: return max([d for d in range(row_depth) if o.depends(f"q{d}")], default=-1)
  thread = depth[lk.thread_axis] if lk.thread_axis is not None else None
  if vec[0].depends(f"q{row_depth}") or thread == row_depth: return None
  acc = depth[lk.accumulate_axis] if lk.accumulate_axis is not None else None
  isz, lanes = spec.out_dtype.itemsize, NATIVE_BYTES // spec.out_dtype.itemsize
  # a pad of m: a bound on a's row that moves one per tile row and `rows` per tile (the last block's padded tiles)
  row_limit = next(((a, hi) for a, _, hi in bc[0].conds if a.coef["r"] == 1 and a.coef[f"q{row_depth}"] == rows
                    and a.coef["k"] == a.coef["l"] == 0), None)
  panels = F[loops[panel][0]] // loops[panel][1] if panel >= 0 else 1
  g = GemmLayout(loops, thread, acc, row_depth, rows, columns, F[k_axis], out, bc[0], vec[0], pack_depth(bc[0]),
                 pack_depth(vec[0]), F[row_axis] // rows, panel, panels, row_limit)
  if sum(g.pack_sizes(lanes)[1:]) * isz <= PACK_BYTES: return g
  return None


def _round64(nbytes: int) -> int: return -(-nbytes // 64) * 64


def _lanes(g: GemmLayout, isz: int) -> int:   # elements in the kernel's vectors: a native register's, or the panel's
  return min(NATIVE_BYTES // isz, g.columns)


FMAS_PER_PASS = 32   # the least the micro-kernel's k loop issues per pass where kc allows


def k_unroll(g: GemmLayout, lanes: int) -> int:
  """The micro-kernel's k loop's unroll: the fewest steps of k (1, 2 or 4, dividing kc) whose FMAs fill a pass with
  FMAS_PER_PASS (the loop's own adds and branch then cost nothing beside them; more only costs compile time: the 8 x 2
  zmm tile unrolled 2 instead of 4 ran at the same speed, paired, and 1000^2's kernel has 10% fewer IR lines), else
  the most that divide kc. AVX2's 6 x 2 ymm tile: 4."""
  per_step = g.rows * (g.columns // lanes)
  fits = [u for u in (1, 2, 4) if g.kc % u == 0]
  return next((u for u in fits if per_step * u >= FMAS_PER_PASS), fits[-1])


def last_k_steps(g: GemmLayout, chunks: int, lanes: int) -> int | None:
  """How far the k loop runs in the last of `chunks` k chunks, in whole unrolled steps, where k's padding to chunks x
  kc leaves it shorter than kc (1000 = 3 x 252 + 244: the padding's zeros are not multiplied); None where it does not.
  k's end comes from an operand's pad condition that moves one per k and kc per chunk."""
  acc = f"q{g.accumulate_depth}" if g.accumulate_depth is not None else None
  for a, lo, hi in g.bcast.conds + g.vector.conds:
    if a.coef.get("k") != 1 or a.const < lo or any(c and n not in ("k", acc) for n, c in a.coef.items()): continue
    if acc is not None and a.coef.get(acc) != g.kc: continue
    valid = hi - a.const - g.kc * (chunks - 1)   # of the last chunk's kc
    u = k_unroll(g, lanes)
    steps = -(-valid // u) * u
    return steps if 0 < steps < g.kc else None
  return None


def workspace_bytes(lk: LoopKernel, g: GemmLayout) -> int:
  """The workspace a workgroup of the kernel needs: a's pack, then b's, each from a 64-byte boundary."""
  isz = lk.spec.out_dtype.itemsize
  _, a_pack, b_pack = g.pack_sizes(_lanes(g, isz))
  return _round64(a_pack * isz) + _round64(b_pack * isz)


def render_gemm(lk: LoopKernel, g: GemmLayout) -> str:
  """`void NAME(ptr out, ptr in..., i64 start, i64 end)` for the layout: the generic kernel's signature and loops
  ([start, end) of the thread axis) plus `ptr ws`, the workgroup's workspace (`workspace_bytes`) after the buffers;
  each operand packed into the workspace where its loops change (a: the row block's
  tiles, [tile][row][k]; b: the column block's panels, [panel][k][lane]; zeros where a pad's mask is false), each
  tile's k loop a micro-kernel of phis over the packs, the first k chunk stored and the others added to the output."""
  spec = lk.spec
  T = "float" if spec.out_dtype == dtypes.float32 else "double"
  isz = spec.out_dtype.itemsize
  N = _lanes(g, isz)
  V, nv = f"<{N} x {T}>", g.columns // N
  vt = f"v{N}{'f32' if isz == 4 else 'f64'}"
  fma, masked_load, masked_store = f"llvm.fma.{vt}", f"llvm.masked.load.{vt}.p0", f"llvm.masked.store.{vt}.p0"
  tiles = g.tiles
  qs = [f"%q{d}" for d in range(len(g.loops))]
  a_len, a_pack, b_pack = g.pack_sizes(N)
  chunks = spec.full_shape[g.loops[g.accumulate_depth][0]] // g.loops[g.accumulate_depth][1] if g.accumulate_depth is not None else 1
  last = last_k_steps(g, chunks, N)
  k_end = str(g.kc) if last is None else "%kend" if g.accumulate_depth is not None else str(last)
  L: list[str] = []
  sums: dict[tuple, str] = {}   # lin's sums of counters emitted in the current block (reused there: fewer IR instructions)

  def e(line: str) -> None:
    if not line.startswith(" "): sums.clear()   # a label: a new block, where the last one's values may not dominate
    L.append(line)
  decls: set[str] = set()   # intrinsics of other widths the kernel calls

  def lin(name: str, a: Affine, terms: dict[str, str | int], depth: int = len(g.loops)) -> str:
    """const + sum(coef * value) as an i64 value, over the counters of the `depth` outermost loops (those open
    where it is emitted) and `terms` (name -> IR value or number); any other counter counts as 0. Numbers fold into
    the constant; a sum of the same values already emitted in the block is reused."""
    names = {f"q{d}": q for d, q in enumerate(qs[:depth])} | terms
    const = a.const + sum(a.coef.get(n, 0) * v for n, v in names.items() if isinstance(v, int))
    parts = tuple((v, a.coef[n]) for n, v in names.items() if a.coef.get(n, 0) and not isinstance(v, int))
    if not parts: return str(const)
    if (cur := sums.get(parts)) is None:
      for i, (v, c) in enumerate(parts):
        if c != 1: e(f"  %{name}.m{i} = mul i64 {v}, {c}")
        m = v if c == 1 else f"%{name}.m{i}"
        if i: e(f"  %{name}.s{i} = add i64 {cur}, {m}")
        cur = m if not i else f"%{name}.s{i}"
      sums[parts] = cur
    if const: e(f"  %{name}.c = add i64 {cur}, {const}")
    return f"%{name}.c" if const else cur

  def above(a: Affine, lo: int) -> bool:   # a >= lo wherever it is evaluated: counters are never negative
    return a.const >= lo and all(c >= 0 for c in a.coef.values())

  def in_bounds(name: str, value: str, a: Affine, lo: int, hi: int) -> str:
    """`lo <= value < hi` as an i1, where value is `a` at some point."""
    e(f"  %{name}.hi = icmp slt i64 {value}, {hi}")
    if above(a, lo): return f"%{name}.hi"
    e(f"  %{name}.lo = icmp sge i64 {value}, {lo}")
    e(f"  %{name}.ok = and i1 %{name}.lo, %{name}.hi")
    return f"%{name}.ok"

  def run_start(tag: str, o: Operand, terms: dict[str, str | int], var: str, depth: int,
                moving_as: list | None = None) -> tuple[str, str | None, list]:
    """Where a run of `o` along `var` (its coefficient is 1) starts, for `terms` in the body of loop `depth - 1`; the
    pad's conditions that do not move along the run as one i1 (None: no such condition); those that do as (value at
    var = 0, var's coefficient, lo, hi), or `moving_as` where another run's are the same. Lanes past the run's end are
    the reader's to mask (lane_mask's `limit`)."""
    src = lin(f"{tag}.s", o.index, terms | {var: 0}, depth)
    e(f"  %{tag}.sp = getelementptr {T}, ptr %b{o.buf}, i64 {src}")
    fixed, moving = None, []
    for i, (a, lo, hi) in enumerate(o.conds):
      if a.coef.get(var, 0) and moving_as is not None: continue
      v = lin(f"{tag}.c{i}", a, terms | {var: 0}, depth)
      if a.coef.get(var, 0):
        moving.append((v, a.coef[var], lo, hi, not above(a, lo)))
        continue
      ok = in_bounds(f"{tag}.b{i}", v, a, lo, hi)
      if fixed is not None: e(f"  %{tag}.f{i} = and i1 {fixed}, {ok}")
      fixed = ok if fixed is None else f"%{tag}.f{i}"
    return f"%{tag}.sp", fixed, moving if moving_as is None else moving_as

  def read_start(tag: str, o: Operand, terms: dict[str, str | int], var: str, depth: int,
                 moving_as: list | None = None) -> tuple[str, None, list]:
    """run_start for a run that is read: where a condition that does not move along the run fails, the run starts
    in %zeros instead (plain loads in the copy loop, no mask to build per vector)."""
    src, fixed, moving = run_start(tag, o, terms, var, depth, moving_as)
    if fixed is None: return src, None, moving
    e(f"  %{tag}.zp = select i1 {fixed}, ptr {src}, ptr %zeros")
    return f"%{tag}.zp", None, moving

  def lane_mask(tag: str, start: tuple[str, str | None, list], v: str, limit: int = N) -> str | None:
    """The lanes of the run's native vector at element `v` whose pad conditions hold and whose index is below
    `limit` (None: all, unconditionally); a moving condition is affine in the lane: its value at 0, plus the
    coefficient times the lane's index."""
    _, fixed, moving = start
    if fixed is None and not moving and limit == N: return None
    mask = f"<{', '.join(f'i1 {int(x < limit)}' for x in range(N))}>" if limit < N else None
    splat = lambda x: f"<{', '.join([f'i64 {x}'] * N)}>"
    lane_numbers = f"<{', '.join(f'i32 {x}' for x in range(N))}>"
    def vector(name: str, scalar: str, ty: str) -> str:
      e(f"  %{tag}.{name}e = insertelement <{N} x {ty}> poison, {ty} {scalar}, i64 0")
      e(f"  %{tag}.{name} = shufflevector <{N} x {ty}> %{tag}.{name}e, <{N} x {ty}> poison, <{N} x i32> zeroinitializer")
      return f"%{tag}.{name}"
    if fixed is not None:
      fx = vector("fx", fixed, "i1")
      if mask is not None: e(f"  %{tag}.fl = and <{N} x i1> {fx}, {mask}")
      mask = fx if mask is None else f"%{tag}.fl"
    for i, (v0, c, lo, hi, check_lo) in enumerate(moving):
      at = v
      if c != 1:
        e(f"  %{tag}.m{i} = mul i64 {v}, {c}")
        at = f"%{tag}.m{i}"
      e(f"  %{tag}.a{i} = add i64 {v0}, {at}")
      if c == 1:   # lane x holds where lo <= a + x < hi: x against hi - a and lo - a, clamped to [0, N] to fit i32
        def compare(pred: str, b: int, name: str) -> str:   # (i32 lanes: an i64 vector compare costs code generation 2-3x more)
          e(f"  %{tag}.{name}d = sub i64 {b}, %{tag}.a{i}")
          e(f"  %{tag}.{name}x = call i64 @llvm.smax.i64(i64 %{tag}.{name}d, i64 0)")
          e(f"  %{tag}.{name}n = call i64 @llvm.smin.i64(i64 %{tag}.{name}x, i64 {N})")
          e(f"  %{tag}.{name}t = trunc i64 %{tag}.{name}n to i32")
          return f"icmp {pred} <{N} x i32> {lane_numbers}, {vector(name, f'%{tag}.{name}t', 'i32')}"
      else:
        w = vector(f"b{i}", f"%{tag}.a{i}", "i64")
        e(f"  %{tag}.w{i} = add <{N} x i64> {w}, <{', '.join(f'i64 {x * c}' for x in range(N))}>")
        def compare(pred: str, b: int, name: str) -> str: return f"icmp {pred} <{N} x i64> %{tag}.w{i}, {splat(b)}"
      e(f"  %{tag}.ok{i} = {compare('slt', hi, f'h{i}')}")
      ok = f"%{tag}.ok{i}"
      if check_lo:
        e(f"  %{tag}.lo{i} = {compare('sge', lo, f'l{i}')}")
        e(f"  %{tag}.in{i} = and <{N} x i1> %{tag}.ok{i}, %{tag}.lo{i}")
        ok = f"%{tag}.in{i}"
      if mask is not None: e(f"  %{tag}.all{i} = and <{N} x i1> {mask}, {ok}")
      mask = ok if mask is None else f"%{tag}.all{i}"
    return mask

  def run_load(tag: str, start: tuple[str, str | None, list], v: str, limit: int = N, mask: str | None = "") -> str:
    """The native vector of the run at element `v`: a plain load, or a masked one (zeros) where a pad's conditions
    fail or past `limit` lanes (`mask`: that mask where the caller has built it, None where it has none)."""
    e(f"  %{tag}.p = getelementptr {T}, ptr {start[0]}, i64 {v}")
    if mask == "": mask = lane_mask(tag, start, v, limit)
    if mask is None:
      e(f"  %{tag}.x = load {V}, ptr %{tag}.p, align {isz}")
      return f"%{tag}.x"
    e(f"  %{tag}.x = call {V} @{masked_load}(ptr %{tag}.p, i32 {isz}, <{N} x i1> {mask}, {V} zeroinitializer)")
    return f"%{tag}.x"

  def store_rows(tag: str, rows: list[str], v: str) -> None:   # a tile's rows of a at element v of their chunks
    for r, x in enumerate(rows):
      e(f"  %{tag}.o{r} = add i64 {v}, {r * a_len}")
      e(f"  %{tag}.q{r} = getelementptr inbounds {T}, ptr %pa.d, i64 %{tag}.o{r}")
      e(f"  store {V} {x}, ptr %{tag}.q{r}, align {N * isz}")

  def pack_a(pred: str) -> str:   # the row block's tiles of a, [tile][row][k]: each row's k chunk copied as it is
    e("  br label %pa.t")
    e("pa.t:")
    e(f"  %pa.tq = phi i64 [ 0, %{pred} ], [ %pa.tn, %pa.kx ]")
    e(f"  %pa.to = mul i64 %pa.tq, {g.rows * a_len}")
    e(f"  %pa.d = getelementptr inbounds {T}, ptr %apack, i64 %pa.to")
    # the rows' pads along k (k's padding to whole chunks) are one mask for all rows where they do not depend on the row
    shared = all(not a.coef.get("r") for a, _, _ in g.bcast.conds if a.coef.get("k"))
    starts = [read_start("pa.r0", g.bcast, {f"q{g.row_depth}": "%pa.tq", "r": 0}, "k", g.bcast_pack_depth + 1)]
    starts += [read_start(f"pa.r{r}", g.bcast, {f"q{g.row_depth}": "%pa.tq", "r": r}, "k", g.bcast_pack_depth + 1,
                          starts[0][2] if shared else None) for r in range(1, g.rows)]
    def loads(tag: str, v: str, limit: int = N) -> list[str]:
      mask = lane_mask(f"{tag}m", starts[0], v, limit) if shared else ""
      return [run_load(f"{tag}{r}", st, v, limit, mask) for r, st in enumerate(starts)]
    whole, tail = divmod(g.kc, N)   # the chunk's whole vectors in a loop; the rest, one masked vector per row
    e(f"  br label %pa.{'k' if whole else 'kx'}")
    if whole:
      e("pa.k:")
      e("  %pa.v = phi i64 [ 0, %pa.t ], [ %pa.vn, %pa.k ]")
      rows = loads("pa.k", "%pa.v")
      for r in range(g.rows):   # the same place in the next tile's rows, into L2 (short runs far apart: 5% -> 3.5% of 1024^2)
        e(f"  %pa.pf{r} = getelementptr {T}, ptr %pa.k{r}.p, i64 {g.bcast.index.coef[f'q{g.row_depth}']}")
        e(f"  call void @llvm.prefetch.p0(ptr %pa.pf{r}, i32 0, i32 2, i32 1)")
      store_rows("pa.k", rows, "%pa.v")
      e(f"  %pa.vn = add i64 %pa.v, {N}")
      e(f"  %pa.more = icmp slt i64 %pa.vn, {whole * N}")
      e("  br i1 %pa.more, label %pa.k, label %pa.kx")
    e("pa.kx:")
    if tail: store_rows("pa.e", loads("pa.e", str(whole * N), tail), str(whole * N))
    e("  %pa.tn = add i64 %pa.tq, 1")
    e(f"  %pa.tc = icmp slt i64 %pa.tn, {tiles}")
    e("  br i1 %pa.tc, label %pa.t, label %pa.done")
    e("pa.done:")
    return "pa.done"

  def pack_b(pred: str) -> str:   # b's column panels, [panel][k][lane]: per k, the row's panels in order
    e("  br label %pb.k")
    e("pb.k:")
    e(f"  %pb.kq = phi i64 [ 0, %{pred} ], [ %pb.kn, %pb.px ]")
    terms: dict[str, str | int] = {"k": "%pb.kq"}
    e(f"  %pb.d = mul i64 %pb.kq, {g.columns}")
    dest = "%pb.d"
    if g.panels > 1:
      e("  br label %pb.p")
      e("pb.p:")
      e("  %pb.pq = phi i64 [ 0, %pb.k ], [ %pb.pn, %pb.p ]")
      terms[f"q{g.panel_depth}"] = "%pb.pq"
      e(f"  %pb.po = mul i64 %pb.pq, {g.kc * g.columns}")
      e("  %pb.pd = add i64 %pb.d, %pb.po")
      dest = "%pb.pd"
    e(f"  %pb.dp = getelementptr inbounds {T}, ptr %bpack, i64 {dest}")
    start = read_start("pb.r", g.vector, terms, "l", g.vector_pack_depth + 1)
    for j in range(nv):
      x = run_load(f"pb.l{j}", start, str(j * N))
      # each of the panel's lines 16 rows of b ahead, into L2 (rows start new streams, from memory; a 128-byte panel's
      # second line too: 1000^2 on one core 0.5-1.5% faster, its rows' 4000 bytes leaving a panel across three lines)
      if j % max(1, 64 // (N * isz)) == 0:
        e(f"  %pb.pf{j} = getelementptr {T}, ptr %pb.l{j}.p, i64 {16 * g.vector.index.coef['k']}")
        e(f"  call void @llvm.prefetch.p0(ptr %pb.pf{j}, i32 0, i32 2, i32 1)")
      e(f"  %pb.q{j} = getelementptr inbounds {T}, ptr %pb.dp, i64 {j * N}")
      e(f"  store {V} {x}, ptr %pb.q{j}, align {N * isz}")
    if g.panels > 1:
      e("  %pb.pn = add i64 %pb.pq, 1")
      e(f"  %pb.pc = icmp slt i64 %pb.pn, {g.panels}")
      e("  br i1 %pb.pc, label %pb.p, label %pb.px")
    else:
      e("  br label %pb.px")
    e("pb.px:")
    e("  %pb.kn = add i64 %pb.kq, 1")
    e(f"  %pb.kc = icmp slt i64 %pb.kn, {k_end}")
    e("  br i1 %pb.kc, label %pb.k, label %pb.done")
    e("pb.done:")
    return "pb.done"

  def packs(depth: int, pred: str) -> str:   # the packs that belong at the start of this loop's body (-1: entry)
    if g.bcast_pack_depth == depth: pred = pack_a(pred)
    if g.vector_pack_depth == depth: pred = pack_b(pred)
    return pred

  def tile() -> None:
    ob = lin("o", g.out.index, {})
    e(f"  %op = getelementptr inbounds {T}, ptr %b0, i64 {ob}")
    e(f"  %ao = mul i64 %q{g.row_depth}, {a_len * g.rows}")
    e(f"  %ap = getelementptr inbounds {T}, ptr %apack, i64 %ao")
    outs = {(r, j): g.out.index.at(r=r, l=j * N) - g.out.index.const for r in range(g.rows) for j in range(nv)}
    for (r, j), o in outs.items(): e(f"  %cq{r}_{j} = getelementptr {T}, ptr %op, i64 {o}")   # (an edge tile: some past the buffer, so not inbounds)
    # the outputs the tile reads back, into L1 (a miss would stall its end; rows a power of two apart share an L1 set
    # and the k loop evicts them, so from L2), and the next tile's (the next panel's, or the next row tile's) into L2
    inner = g.panel_depth if g.panels > 1 else g.row_depth
    next_tile = g.out.index.coef[f"q{inner}"]
    for r in range(g.rows):
      for j in range(0, nv, 64 // isz // N):   # one per cache line
        e(f"  call void @llvm.prefetch.p0(ptr %cq{r}_{j}, i32 1, i32 3, i32 1)")
        e(f"  %pf{r}_{j} = getelementptr {T}, ptr %cq{r}_{j}, i64 {next_tile}")
        e(f"  call void @llvm.prefetch.p0(ptr %pf{r}_{j}, i32 1, i32 2, i32 1)")
    U = k_unroll(g, N)
    # the next tile's k chunk of a into L2, a share per panel: it comes from L3 in `rows` runs too short for the
    # hardware's stream prefetch (2048^2, hcq / numpy, paired medians: 0.92-0.98 -> 0.96-1.05); one prefetch per k
    # iteration stepping through the share, not a burst at the tile's start (which stalled on the misses: 0.92-1.00 ->
    # 0.99-1.02 at 2048^2)
    line, share = 64 // isz, -(-g.rows * a_len // (64 // isz) // g.panels)
    # elements per k iteration of a loop unrolled `unroll` times, so that the loop covers the share (0: no prefetch)
    step_ahead = lambda unroll: -(-share * line * unroll // g.kc) if g.panels > 1 else 0
    if g.panels > 1:
      e(f"  %apn = mul i64 %q{g.panel_depth}, {share * line}")
      e(f"  %apb = add i64 %apn, {g.rows * a_len}")
      e(f"  %apq = getelementptr {T}, ptr %ap, i64 %apb")
    bp = "%bpack"
    if g.panels > 1:   # this panel's k chunk in the pack of all panels
      e(f"  %bpo = mul i64 %q{g.panel_depth}, {g.kc * g.columns}")
      e(f"  %bp = getelementptr inbounds {T}, ptr %bpack, i64 %bpo")
      bp = "%bp"

    def k_loop(tag: str, vectors: int, U: int, lanes: int = N, exit: str = "kdone") -> dict[tuple[int, int], str]:
      """The k loop as block `tag` (entered from %tile, left to `exit`) over the panel's first `vectors` vectors of
      `lanes` elements, unrolled U times; the accumulators it ends with. It steps pointers into both packs (the IR
      addresses as the machine code does: no loop strength reduction needed, jit.CODEGEN_ONLY)."""
      V, fma = f"<{lanes} x {T}>", f"llvm.fma.v{lanes}{'f32' if isz == 4 else 'f64'}"
      if lanes != N: decls.add(f"declare {V} @{fma}({V}, {V}, {V})")
      e(f"{tag}:")
      e(f"  %{tag}.k = phi i64 [ 0, %tile ], [ %{tag}.kn, %{tag} ]")
      e(f"  %{tag}.b = phi ptr [ {bp}, %tile ], [ %{tag}.bn, %{tag} ]")
      e(f"  %{tag}.a = phi ptr [ %ap, %tile ], [ %{tag}.an, %{tag} ]")
      if step_ahead(U): e(f"  %{tag}.p = phi ptr [ %apq, %tile ], [ %{tag}.pn, %{tag} ]")
      acc = {(r, j): f"%{tag}.acc{r}_{j}" for r in range(g.rows) for j in range(vectors)}
      for (r, j), name in acc.items(): e(f"  {name} = phi {V} [ zeroinitializer, %tile ], [ %{tag}.f{U - 1}_{r}_{j}, %{tag} ]")
      if step_ahead(U):
        e(f"  call void @llvm.prefetch.p0(ptr %{tag}.p, i32 0, i32 2, i32 1)")
        e(f"  %{tag}.pn = getelementptr {T}, ptr %{tag}.p, i64 {step_ahead(U)}")
      for u in range(U):
        for j in range(vectors):
          e(f"  %{tag}.bq{u}_{j} = getelementptr inbounds {T}, ptr %{tag}.b, i64 {u * g.columns + j * N}")
          e(f"  %{tag}.bv{u}_{j} = load {V}, ptr %{tag}.bq{u}_{j}, align {lanes * isz}")
        for r in range(g.rows):
          e(f"  %{tag}.aq{u}_{r} = getelementptr inbounds {T}, ptr %{tag}.a, i64 {u + r * a_len}")
          e(f"  %{tag}.as{u}_{r} = load {T}, ptr %{tag}.aq{u}_{r}, align {isz}")
          e(f"  %{tag}.ae{u}_{r} = insertelement {V} poison, {T} %{tag}.as{u}_{r}, i64 0")
          e(f"  %{tag}.av{u}_{r} = shufflevector {V} %{tag}.ae{u}_{r}, {V} poison, <{lanes} x i32> zeroinitializer")
          for j in range(vectors):
            e(f"  %{tag}.f{u}_{r}_{j} = call {V} @{fma}({V} %{tag}.av{u}_{r}, {V} %{tag}.bv{u}_{j}, {V} {acc[r, j]})")
            acc[r, j] = f"%{tag}.f{u}_{r}_{j}"
      e(f"  %{tag}.bn = getelementptr inbounds {T}, ptr %{tag}.b, i64 {U * g.columns}")
      e(f"  %{tag}.an = getelementptr inbounds {T}, ptr %{tag}.a, i64 {U}")
      e(f"  %{tag}.kn = add i64 %{tag}.k, {U}")
      e(f"  %{tag}.more = icmp ult i64 %{tag}.kn, {k_end}")
      e(f"  br i1 %{tag}.more, label %{tag}, label %{exit}")
      return acc

    # a panel whose columns from its half (n = 1000 with 16-column panels: 8 of the last one's 16) or, with zmm vectors,
    # its quarter on lie wholly in a cropped n's padding runs a k loop over its first part only: the padding's FMAs are
    # not issued (a ymm FMA costs half a zmm one where the core runs zmm as two halves, as Zen 4 does, and no more
    # elsewhere). Emitted only where some tile can take it: the column condition's largest value, at that part's end
    column = next(((a, hi) for a, _, hi in g.out.conds if a.coef.get("l", 0) > 0 and not a.coef.get("r", 0)), None)
    narrow_lanes = 0   # the columns the narrow loop covers
    if column is not None and nv % 2 == 0:
      col, end = column
      top = col.const + sum(max(0, col.coef.get(f"q{d}", 0)) * (spec.full_shape[ax] // st - 1) for d, (ax, st) in enumerate(g.loops))
      parts = ([N // 2] if nv == 2 and N * isz == 64 else []) + [g.columns // 2]
      narrow_lanes = next((w for w in parts if top + col.coef["l"] * w >= end), 0)
    if narrow_lanes:
      e(f"  %nw.c = add i64 {lin('nw', column[0], {'r': 0, 'l': 0})}, {narrow_lanes * column[0].coef['l']}")
      e(f"  %nw = icmp sge i64 %nw.c, {column[1]}")
      e("  br i1 %nw, label %kn, label %kw")
    else:
      e("  br label %kw")
    acc = k_loop("kw", nv, U)
    # the narrow loop runs for the last panel only: unrolled twice, not four times (its IR and compile time halved)
    if narrow_lanes:
      lanes = min(narrow_lanes, N)
      narrow = k_loop("kn", narrow_lanes // lanes, min(U, 2), lanes, "kn.x")
      e("kn.x:")   # a narrower vector's accumulators widened (the lanes past it: zeros, cropped anyway)
      if lanes < N:
        for (r, j), x in list(narrow.items()):
          e(f"  %kx{r}_{j} = shufflevector <{lanes} x {T}> {x}, <{lanes} x {T}> zeroinitializer, <{N} x i32> <{', '.join(f'i32 {i}' for i in range(N))}>")
          narrow[r, j] = f"%kx{r}_{j}"
      e("  br label %kdone")
    e("kdone:")
    if narrow_lanes:   # the accumulators of whichever loop ran (the narrow one's past its part: zeros, cropped anyway)
      for r, j in list(acc):
        e(f"  %kd{r}_{j} = phi {V} [ {acc[r, j]}, %kw ], [ {narrow.get((r, j), 'zeroinitializer')}, %kn.x ]")
        acc[r, j] = f"%kd{r}_{j}"

    def finish(pred: str) -> None:
      """The tile's outputs from block `pred`: the first k chunk stores, the others add to what the earlier ones stored."""
      final = dict(acc)
      if g.accumulate_depth is not None:
        e(f"  %first = icmp eq i64 %q{g.accumulate_depth}, 0")
        e("  br i1 %first, label %store, label %add")
        e("add:")
        for r, j in outs:
          e(f"  %co{r}_{j} = load {V}, ptr %cq{r}_{j}, align {isz}")
          e(f"  %cs{r}_{j} = fadd {V} %co{r}_{j}, {acc[r, j]}")
        e("  br label %store")
        e("store:")
        for r, j in outs:
          e(f"  %fin{r}_{j} = phi {V} [ {acc[r, j]}, %{pred} ], [ %cs{r}_{j}, %add ]")
          final[r, j] = f"%fin{r}_{j}"
      for r, j in outs: e(f"  store {V} {final[r, j]}, ptr %cq{r}_{j}, align {isz}")

    if not g.out.conds:
      finish("kdone")
      return
    # a cropped output (the padding of a matmul's n or m not stored): tiles wholly inside store as above; an edge
    # tile goes through a scratch tile and a loop over its rows, each row's vectors stored under the crop's lane masks
    # (a masked store per vector of every tile cost more than the crop's copy kernel; the edge tile's rows unrolled,
    # 20% of the kernel's compile time; a scalar loop over its elements, ~1% of 1000^2's kernel)
    inside = None
    for i, (a, lo, hi) in enumerate(g.out.conds):   # each condition at the tile's corners, where it is extreme
      v0 = lin(f"ti{i}", a, {"r": 0, "l": 0})
      span = {"r": g.rows - 1, "l": g.columns - 1}
      top, bottom = (sum(max(0, sign * a.coef[n]) * x for n, x in span.items()) for sign in (1, -1))
      e(f"  %ti{i}.top = add i64 {v0}, {top}")
      e(f"  %ti{i}.bot = sub i64 {v0}, {bottom}")
      ok = in_bounds(f"ti{i}.in", f"%ti{i}.top", a, lo, hi) if above(a, lo) else None
      if ok is None:
        e(f"  %ti{i}.hi = icmp slt i64 %ti{i}.top, {hi}")
        e(f"  %ti{i}.lo = icmp sge i64 %ti{i}.bot, {lo}")
        e(f"  %ti{i}.ok = and i1 %ti{i}.lo, %ti{i}.hi")
        ok = f"%ti{i}.ok"
      if inside is not None: e(f"  %ti{i}.all = and i1 {inside}, {ok}")
      inside = ok if inside is None else f"%ti{i}.all"
    e(f"  br i1 {inside}, label %inner, label %edge")
    e("inner:")
    finish("inner")
    e("  br label %tiledone")
    e("edge:")
    for (r, j) in outs:
      e(f"  %es{r}_{j} = getelementptr inbounds {T}, ptr %scratch, i64 {r * g.columns + j * N}")
      e(f"  store {V} {acc[r, j]}, ptr %es{r}_{j}, align {N * isz}")
    if g.accumulate_depth is not None: e(f"  %ed.first = icmp eq i64 %q{g.accumulate_depth}, 0")
    e("  br label %er")
    e("er:")   # per row: each vector stored under the crop's lane mask (what the earlier k chunks stored added)
    e("  %er.r = phi i64 [ 0, %edge ], [ %er.n, %er ]")
    e(f"  %er.s = mul i64 %er.r, {g.columns}")
    row = run_start("eo", g.out, {"r": "%er.r"}, "l", len(g.loops))
    for j in range(nv):
      e(f"  %ex{j}.o = add i64 %er.s, {j * N}")
      e(f"  %ex{j}.p = getelementptr inbounds {T}, ptr %scratch, i64 %ex{j}.o")
      e(f"  %ex{j}.x = load {V}, ptr %ex{j}.p, align {N * isz}")
      e(f"  %eo{j}.p = getelementptr {T}, ptr {row[0]}, i64 {j * N}")
      mask, x = lane_mask(f"eo{j}", row, str(j * N)), f"%ex{j}.x"
      if mask is None: mask = f"<{', '.join(['i1 1'] * N)}>"
      if g.accumulate_depth is not None:
        e(f"  %eo{j}.y = call {V} @{masked_load}(ptr %eo{j}.p, i32 {isz}, <{N} x i1> {mask}, {V} zeroinitializer)")
        e(f"  %eo{j}.s = fadd {V} %eo{j}.y, {x}")
        e(f"  %eo{j}.v = select i1 %ed.first, {V} {x}, {V} %eo{j}.s")
        x = f"%eo{j}.v"
      e(f"  call void @{masked_store}({V} {x}, ptr %eo{j}.p, i32 {isz}, <{N} x i1> {mask})")
    e("  %er.n = add i64 %er.r, 1")
    e(f"  %er.more = icmp slt i64 %er.n, {g.rows}")
    e("  br i1 %er.more, label %er, label %tiledone")
    e("tiledone:")

  def loops(d: int, pred: str) -> None:   # loop d and those inside it, entered from block `pred`
    if d == len(g.loops):
      e("  br label %tile")
      e("tile:")
      tile()
      return
    axis, step = g.loops[d]
    lo, hi = "0", str(spec.full_shape[axis] // step)
    if d == g.row_depth and g.row_limit is not None:   # the block's tiles that hold a row of a (at least one)
      row, end = g.row_limit
      first = lin("rl", row, {"r": 0}, d)
      e(f"  %rl.left = sub i64 {end + g.rows - 1}, {first}")
      e(f"  %rl.tiles = sdiv i64 %rl.left, {g.rows}")
      e(f"  %rl.fewer = icmp slt i64 %rl.tiles, {hi}")
      e(f"  %rl.hi = select i1 %rl.fewer, i64 %rl.tiles, i64 {hi}")
      hi = "%rl.hi"
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
    if d == g.accumulate_depth and k_end != str(g.kc):   # the last k chunk's k loop and b's pack are shorter
      e(f"  %klast = icmp eq i64 %q{d}, {chunks - 1}")
      e(f"  %kend = select i1 %klast, i64 {last}, i64 {g.kc}")
    loops(d + 1, packs(d, f"h{d}"))
    e(f"  br label %latch{d}")
    e(f"latch{d}:")
    e(f"  %n{d} = add i64 %q{d}, 1")
    e(f"  %c{d} = icmp slt i64 %n{d}, {hi}")
    e(f"  br i1 %c{d}, label %h{d}, label %x{d}")
    e(f"x{d}:")

  params = ", ".join([f"ptr noalias align 16 %b{i}" for i in range(len(spec.buf_dtypes))] + ["ptr noalias align 64 %ws", "i64 %start", "i64 %end"])
  e(f"define void @{lk.name}({params}) #0 {{")
  e("entry:")
  e("  %apack = getelementptr i8, ptr %ws, i64 0")
  e(f"  %bpack = getelementptr i8, ptr %ws, i64 {_round64(a_pack * isz)}")
  if g.out.conds: e(f"  %scratch = alloca [{g.rows * g.columns} x {T}], align 64")   # a cropped output's edge tile
  # a run that lies wholly in a pad (rows of a past m, rows of b past k) is read from zeros
  if any(not c.coef.get(var, 0) for o, var in ((g.bcast, "k"), (g.vector, "l")) for c, _, _ in o.conds):
    zeros = max(a_len, g.columns)
    e(f"  %zeros = alloca [{zeros} x {T}], align 64")
    e(f"  call void @llvm.memset.p0.i64(ptr align 64 %zeros, i8 0, i64 {zeros * isz}, i1 false)")
  loops(0, packs(-1, "entry"))
  e("  ret void")
  e("}")
  head = [CODEGEN_ONLY, f"declare {V} @{fma}({V}, {V}, {V})", f"declare {V} @{masked_load}(ptr, i32, <{N} x i1>, {V})",
          f"declare void @{masked_store}({V}, ptr, i32, <{N} x i1>)",
          "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)", "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)",
          "declare i64 @llvm.smax.i64(i64, i64)", "declare i64 @llvm.smin.i64(i64, i64)", *sorted(decls), ""]
  return "\n".join(head + L)
