"""Tiled GPU kernels shared by the AMD and NV renderers (render_gpu.py): a matmul through shared memory (LDS) with
register blocking, and the test for elementwise kernels that can move four elements per load.

Matmul. A kernel whose value is a sum over one reduce axis k of a product x * y, where x does not depend on an output
axis n and y not on another output axis m, is a (batched) matmul whatever views x and y read through (transposes,
broadcasts, casts, pads: they are rendered by the shared writer at the coordinates the tile asks for). One workgroup
computes a BM x BN block of the output; each of its workitems a TM x TN register tile. k goes in steps of BK: the
workgroup copies x's BM x BK and y's BK x BN slices into shared memory (zeros past the edges of m, n and k), waits at a
barrier, each workitem multiplies its TM rows by its TN columns for the BK steps from shared memory, and waits again
before the next copy overwrites the slices. The output is stored inside its bounds only."""
from __future__ import annotations
from dataclasses import dataclass
import math
from hcq.tensor.dtype import dtypes
from hcq.tensor.loops import LoopKernel, access_kind, load_index
from hcq.tensor.schedule import KOp
from hcq.tensor.symbolic import Num, Var, linear_coefficient, substitute, variables


@dataclass(frozen=True)
class MatmulTiles:
  """A workgroup's BM x BN output block, k slices of BK through shared memory, each workitem's TM x TN register tile."""
  bm: int
  bn: int
  bk: int
  tm: int
  tn: int

  @property
  def threads(self) -> int: return (self.bm // self.tm) * (self.bn // self.tn)


SMALL_TILES = MatmulTiles(64, 64, 16, 4, 4)      # 256 workitems, 16 accumulators each
LARGE_TILES = MatmulTiles(128, 128, 16, 8, 8)    # 256 workitems, 64 accumulators each: twice the FMAs per shared load
LARGE_FROM = 512                                 # m and n at least this use LARGE_TILES (fewer idle edge blocks below)
MIN_OUTPUTS = 256     # m x n below this (one output per workitem of a block) keeps the plain layouts: the block would idle


@dataclass(frozen=True)
class MatmulMatch:
  """Which axes of a kernel's full shape are a matmul's m, n, k (the rest are batch axes), and its two factors."""
  m: int
  n: int
  k: int
  batch: tuple[int, ...]
  x: KOp        # depends on m and k, not n
  y: KOp        # depends on n and k, not m
  tiles: MatmulTiles

  def workgroups(self, shape: tuple[int, ...]) -> int:
    t = self.tiles
    return math.prod(shape[a] for a in self.batch) * -(-shape[self.m] // t.bm) * -(-shape[self.n] // t.bn)


def depends_on(op: KOp, spec, axis: int) -> bool:
  """Whether the value of `op` changes along `axis` (some load, mask or masked constant under it reads it)."""
  return any(access_kind(n, spec, axis) != "bcast" for n in op.toposort()
             if n.op in ("LOAD", "MASK") or (n.op == "CONST" and n.arg[1] is not None))


def match_matmul(lk: LoopKernel) -> MatmulMatch | None:
  """The matmul `lk` computes, or None (see the module docstring). Needs m and n above 1 (a matrix-vector product keeps
  the lane trees), m x n of MIN_OUTPUTS or more and a numeric dtype (bool matmul is an OR of ANDs)."""
  spec = lk.spec
  ast = spec.ast
  if ast.op != "REDUCE" or ast.arg[0] != "SUM" or len(lk.reduce_axes) != 1 or lk.accumulate_axis is not None: return None
  if ast.dtype != spec.out_dtype or ast.dtype == dtypes.bool or lk.store_in_reduce_loop: return None
  src = ast.srcs[0]
  if src.op != "ALU" or src.arg != "MUL": return None
  x, y = src.srcs
  outs = list(lk.global_axes)
  xd = {a: depends_on(x, spec, a) for a in outs}
  yd = {a: depends_on(y, spec, a) for a in outs}
  ms = [a for a in outs if xd[a] and not yd[a]]
  ns = [a for a in outs if yd[a] and not xd[a]]
  if not ms or not ns: return None
  m, n = max(ms), max(ns)   # the innermost of each (an axis split by a reshape: its outer part is a batch axis)
  F = spec.full_shape
  if F[m] * F[n] < MIN_OUTPUTS: return None
  tiles = LARGE_TILES if F[m] >= LARGE_FROM and F[n] >= LARGE_FROM else SMALL_TILES
  return MatmulMatch(m, n, lk.reduce_axes[0], tuple(a for a in sorted(outs) if a not in (m, n)), x, y, tiles)


def write_matmul(w, mm: MatmulMatch, wg: str) -> None:
  """The tiled matmul's body into `w` (a render_gpu._GPUKernelWriter with its workgroup id `wg` and w.lane, the
  workitem id; see the module docstring)."""
  from hcq.tensor.render_llvm import Value
  spec, t = w.spec, mm.tiles
  F = spec.full_shape
  M, N, K = F[mm.m], F[mm.n], F[mm.k]
  d = spec.out_dtype
  T = d.llvm
  zero = w.const(0, d)
  cols = t.bn // t.tn   # workitems along a block's columns
  # the workgroup's block: batch index, block row, block column (columns fastest: neighbouring workgroups share x)
  lane = w.lane
  tiles_n, tiles_m = -(-N // t.bn), -(-M // t.bm)
  block_n = w.emit(f"urem i64 {wg}, {tiles_n}")
  rest = w.emit(f"udiv i64 {wg}, {tiles_n}")
  block_m = w.emit(f"urem i64 {rest}, {tiles_m}")
  w.unflatten(w.emit(f"udiv i64 {rest}, {tiles_m}"), list(mm.batch), math.prod(F[a] for a in mm.batch))
  m0, n0 = w.emit(f"mul i64 {block_m}, {t.bm}"), w.emit(f"mul i64 {block_n}, {t.bn}")
  # this workitem's register tile in the block
  row_in, col_in = w.emit(f"udiv i64 {lane}, {cols}"), w.emit(f"urem i64 {lane}, {cols}")
  row0 = w.emit(f"add i64 {m0}, {w.emit(f'mul i64 {row_in}, {t.tm}')}")
  col0 = w.emit(f"add i64 {n0}, {w.emit(f'mul i64 {col_in}, {t.tn}')}")
  lds_x, lds_y = f"@mm_x{w.count}", f"@mm_y{w.count}"
  w.count += 1
  w.globals.append(f"{lds_x} = internal addrspace(3) global [{t.bk * t.bm} x {T}] poison, align 16")
  w.globals.append(f"{lds_y} = internal addrspace(3) global [{t.bk * t.bn} x {T}] poison, align 16")
  accs = []
  for i in range(t.tm * t.tn):
    slot = f"%mm_acc{i}"
    w.allocas.append(f"  {slot} = alloca {T}{w.alloca_space}")
    w.lines.append(f"  store {T} {zero}, {w.pptr} {slot}")
    accs.append(slot)

  def at(coords: dict[int, object]) -> dict[int, object]:
    """The index context of the batch axes (this workgroup's) with `coords` for the others."""
    return {**{a: Var(f"a{a}", 0, F[a] - 1) for a in mm.batch}, **coords}

  def coord(name: str, start: str, extent: int) -> tuple[Var, str]:
    """A Var for `start` clamped into [0, extent) (so that a load past the edge reads inside its buffer), and
    whether `start` was inside."""
    w.var_names[name] = w.call("llvm.umin.i64", "i64", [("i64", start), ("i64", str(extent - 1))])
    return Var(name, 0, extent - 1), w.emit(f"icmp ult i64 {start}, {extent}")

  def stage(op: KOp, lds: str, outer_axis: int, outer0: str, width: int, k0: str, k_major: bool, tag: str) -> None:
    """Copy op's `width` x BK slice (rows from outer0 along outer_axis) into lds[kk * width + r], zero outside."""
    for j in range(width * t.bk // t.threads):
      e = w.emit(f"add i64 {lane}, {j * t.threads}")
      # x reads along k (threads along k: its rows are contiguous in k for a row-major x); y along n
      r, kk = ((w.emit(f"urem i64 {e}, {width}"), w.emit(f"udiv i64 {e}, {width}")) if k_major else
               (w.emit(f"udiv i64 {e}, {t.bk}"), w.emit(f"urem i64 {e}, {t.bk}")))
      ov, o_ok = coord(f"{tag}_o{j}", w.emit(f"add i64 {outer0}, {r}"), F[outer_axis])
      kv, k_ok = coord(f"{tag}_k{j}", w.emit(f"add i64 {k0}, {kk}"), K)
      v = w.render(op, at({mm.m: Num(0), mm.n: Num(0), outer_axis: ov, mm.k: kv}), 1, (tag, j))
      v = w.emit(f"select i1 {w.emit(f'and i1 {o_ok}, {k_ok}')}, {T} {v.name}, {T} {zero}")
      slot = w.emit(f"add i64 {w.emit(f'mul i64 {kk}, {width}')}, {r}")
      ptr = w.emit(f"getelementptr inbounds {T}, ptr addrspace(3) {lds}, i64 {slot}")
      w.lines.append(f"  store {T} {v}, ptr addrspace(3) {ptr}")

  def tile_row(lds: str, width: int, kk: int, first: str, count: int) -> list[str]:
    """count values of lds[kk * width + first ...], one vector load (ds_read_b128 / ld.shared.v4)."""
    ptr = w.emit(f"getelementptr inbounds {T}, ptr addrspace(3) {lds}, i64 {w.emit(f'add i64 {first}, {kk * width}')}")
    vec = w.emit(f"load <{count} x {T}>, ptr addrspace(3) {ptr}, align {min(16, count * d.itemsize)}")
    return [w.emit(f"extractelement <{count} x {T}> {vec}, i64 {i}") for i in range(count)]

  def k_step():
    k0 = w.var_names["mm_k0"]
    stage(mm.x, lds_x, mm.m, m0, t.bm, k0, False, "mmx")
    stage(mm.y, lds_y, mm.n, n0, t.bn, k0, True, "mmy")
    w.barrier()
    sums = [Value(w.emit(f"load {T}, {w.pptr} {s}"), d, 1) for s in accs]
    xr = w.emit(f"sub i64 {row0}, {m0}")
    yc = w.emit(f"sub i64 {col0}, {n0}")
    for kk in range(t.bk):
      xs, ys = tile_row(lds_x, t.bm, kk, xr, t.tm), tile_row(lds_y, t.bn, kk, yc, t.tn)
      for i in range(t.tm):
        for j in range(t.tn):
          prod = w.alu("MUL", [Value(xs[i], d, 1), Value(ys[j], d, 1)], d)
          sums[i * t.tn + j] = w.combine("SUM", sums[i * t.tn + j], prod)
    for s, v in zip(accs, sums): w.lines.append(f"  store {T} {v.name}, {w.pptr} {s}")
    w.barrier()   # the next k step's copies overwrite what the slower workitems may still read
  w.loop("mm_k0", "0", str(K), t.bk, k_step)

  rows = [coord(f"mms_r{i}", w.emit(f"add i64 {row0}, {i}"), M) for i in range(t.tm)]
  cols = [coord(f"mms_c{j}", w.emit(f"add i64 {col0}, {j}"), N) for j in range(t.tn)]
  for i, (rv, r_ok) in enumerate(rows):
    for j, (cv, c_ok) in enumerate(cols):
      acc = Value(w.emit(f"load {T}, {w.pptr} {accs[i * t.tn + j]}"), d, 1)
      store = lambda ctx=at({mm.m: rv, mm.n: cv}), acc=acc: w.write_memory(0, d, w.out_index(ctx), acc)
      w.branch(w.emit(f"and i1 {r_ok}, {c_ok}"), store)


VECTOR_LANES = 4               # elements per wide load/store: 16 bytes of float32 (global_load_b128, ld.global.v4.f32)
VECTOR_OPS_REFUSED = ("SIN", "COS", "POW", "MOD", "IDIV")   # the GPU writer lowers these one lane at a time


def vector_axis(lk: LoopKernel) -> int | None:
  """The output axis an elementwise kernel can run VECTOR_LANES elements per workitem along, or None: the innermost
  output axis, its extent a multiple of the lanes (or the only axis: the last workitem then does the rest one element
  at a time), every load contiguous (stride 1, no mask along it) or broadcast
  along it and every contiguous load's first lane on a multiple of the lanes (so a 16-byte load is aligned), the
  values 32-bit (narrower ones would pack lanes into registers: NVPTX's add.s16x2, which the emulated SM lacks), no
  op the GPU writer lowers per lane, no gather."""
  spec = lk.spec
  if spec.reduce_axes or not lk.global_axes: return None
  axis = max(lk.global_axes)
  if spec.full_shape != spec.out_shape: return None
  # a row not a whole number of vectors: the next row's vectors would start off the grid; alone (1-D) it ends in a tail
  if spec.full_shape[axis] % VECTOR_LANES and any(a != axis for a in lk.global_axes): return None
  nodes = spec.ast.toposort()
  if spec.out_dtype.itemsize != 4: return None
  for n in nodes:   # 32-bit lanes (4 x 4 bytes a load); comparisons' bools live in registers only
    if n.op == "GATHER" or (n.op == "ALU" and n.arg in VECTOR_OPS_REFUSED): return None
    if n.dtype.itemsize != 4 and not (n.dtype == dtypes.bool and n.op == "ALU"): return None
  name = f"a{axis}"
  for n in nodes:
    if n.op == "MASK" or (n.op == "CONST" and n.arg[1] is not None):
      if access_kind(n, spec, axis) != "bcast": return None
    elif n.op == "LOAD":
      kind = access_kind(n, spec, axis)
      if kind == "bcast": continue
      if kind != "contig": return None
      idx, mask_vars = load_index(n, spec)
      if mask_vars: return None
      for v in variables(idx):   # the first lane's element: every other term and the offset multiples of the lanes
        c = linear_coefficient(idx, v)
        if v != name and (c is None or c % VECTOR_LANES): return None
      base = substitute(idx, {v: Num(0) for v in variables(idx)})
      if not isinstance(base, Num) or base.value % VECTOR_LANES: return None
  return axis

