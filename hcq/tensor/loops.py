"""Loop IR: how one kernel's index space becomes loops, and which loops are vectorized, unrolled and threaded.

`plan(spec)` looks at every load's index expression along each axis (contiguous, broadcast or gathered) and
picks: the vector axis (an output axis where the store is contiguous, or the innermost reduce axis), a second
output axis to unroll when loads are shared across it (register tiling for matmul-like kernels), an unroll of
the vector axis or of the reduce loop for more independent accumulators, and the axis split across threads."""
from __future__ import annotations
from dataclasses import dataclass, field
import math
import os
from hcq.memo import Memo
from hcq.tensor.schedule import KernelSpec, KOp
from hcq.tensor.symbolic import Var, Num, Expr, linear_coefficient
from hcq.tensor.view import contiguous_strides

def usable_cpus() -> int:
  """CPUs this process may run on (its affinity mask, not the machine's count), at most 8."""
  from hcq.drivers.cpu.device import usable_cpus as affinity
  return min(affinity(), 8)


THREADS = usable_cpus()
MIN_THREADED_WORK = 1 << 15  # loop-space elements below which one thread is faster than handing off
VECTOR_BYTES = 64            # one AVX-512 register; LLVM splits wider-than-native vectors itself
REDUCE_UNROLL = tuple(int(x) for x in os.environ.get("HCQ_REDUCE_UNROLL", "4,2").split(","))  # accumulators per reduce


def host_simd_registers() -> int:
  """SIMD registers of the host's widest vector unit: 32 with AVX-512 (zmm0-31), else 16 (ymm0-15 on AVX/AVX2;
  the 16 of 64-byte vectors on other hosts are a guess). Read from /proc/cpuinfo's flags: no LLVM at import."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("flags"): return 32 if "avx512f" in line.split() else 16
  except OSError:
    pass
  return 16


# A register tile of matmul is TILE_ROWS rows x TILE_VECTORS vectors of VECTOR_BYTES: rows*vectors*VECTOR_BYTES
# bytes of accumulators, which must leave registers for the loaded vectors and the broadcast row values. With 16
# 32-byte registers (AVX2) that is 6 rows x 1 vector (12 ymm accumulators), with 32 64-byte ones 8 x 2 (16 zmm).
_WIDE = host_simd_registers() >= 32
TILE_VECTORS = int(os.environ.get("HCQ_TILE_VECTORS", "2" if _WIDE else "1"))  # vectors of columns per register tile
TILE_ROWS = tuple(int(x) for x in os.environ.get("HCQ_TILE_ROWS", "8,6,4,3,2" if _WIDE else "6,4,3,2").split(","))  # rows per register tile


def cache_bytes(index: int, default: int) -> int:
  """The size of cpu0's cache `index` from sysfs (index0 is L1d, index2 L2), or `default` where it cannot be read."""
  try:
    with open(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size") as f: text = f.read().strip()
    return int(text[:-1]) << {"K": 10, "M": 20}[text[-1]] if text[-1] in "KM" else int(text)
  except (OSError, ValueError, KeyError):
    return default


L1_BYTES = cache_bytes(0, 32 << 10)
L2_BYTES = cache_bytes(2, 512 << 10)
MATMUL_A_BLOCK = float(os.environ.get("HCQ_MATMUL_A_BLOCK", "6"))  # MiB a row block's k chunk of a fills at most (in L3)
MATMUL_B_BLOCK = float(os.environ.get("HCQ_MATMUL_B_BLOCK", "0.5"))  # share of L2 a column block's k chunk of b fills
MATMUL_B_SLICE = float(os.environ.get("HCQ_MATMUL_B_SLICE", "1"))  # share of L1 a column panel's k chunk of b fills


def matmul_k_chunks(k: int, panel_bytes: int) -> tuple[int, int]:
  """(chunks, chunk length) for a packed matmul's k: chunks as long as one column panel's slice of b (chunk x
  panel_bytes) fills MATMUL_B_SLICE of L1: each register tile streams that slice from L2 per call, its own chunk of
  a (rows x chunk) kept near in L1 and L2; longer chunks mean fewer passes over the output (each chunk adds to it) and
  fewer calls (2048^2 float32: 4 chunks of 512 rather than 8 of 256). The chunks are equal, so k is padded with zeros
  to chunks x length, a multiple of 4 (the micro-kernel's unroll)."""
  longest = max(8, int(L1_BYTES * MATMUL_B_SLICE) // panel_bytes)
  chunks = -(-k // longest)
  return chunks, -(-k // (4 * chunks)) * 4


def _least_waste(count: int, fit: int, rounds: int = 1) -> tuple[int, int]:
  """(groups, per group) covering `count` items in groups of at most `fit` (at least fit // 2): the least padding of
  count plus idle items of the last round of groups across `rounds` threads, then the largest groups."""
  fit = max(1, min(fit, count))
  def waste(per: int) -> int: return -(-(-(-count // per)) // rounds) * rounds * per - count
  per = min(range(max(1, fit // 2), fit + 1), key=lambda t: (waste(t), -t))
  return -(-count // per), per


def matmul_row_blocks(m: int, kc: int, itemsize: int, threads: int | None = None) -> tuple[int, int]:
  """(blocks, rows per block) for a packed matmul's m rows: each block a whole number of TILE_ROWS[0]-row register
  tiles; a block's k chunk of a (rows x kc, packed once per k chunk and read back from L3 for each column block) is
  at most MATMUL_A_BLOCK MiB, and there are at least as many blocks as threads (the threads split the blocks)."""
  rows, threads = TILE_ROWS[0], threads or THREADS
  tiles = -(-m // rows)
  fit = max(1, int(MATMUL_A_BLOCK * (1 << 20)) // (rows * kc * itemsize))
  blocks, per_block = _least_waste(tiles, min(fit, -(-tiles // threads)), threads)
  return blocks, per_block * rows


def matmul_col_blocks(panels: int, kc: int, panel_bytes: int) -> tuple[int, int]:
  """(blocks, panels per block) for a packed matmul's column panels: a block's k chunk of b (panels x kc x
  panel_bytes, packed once per row block and k chunk) fills at most MATMUL_B_BLOCK of L2, where it stays while the
  row block's register tiles each pass over all its panels; the least padding of the panels first (n is padded to
  whole blocks)."""
  return _least_waste(panels, int(L2_BYTES * MATMUL_B_BLOCK) // (kc * panel_bytes))


_MATMUL_PLANS: Memo[tuple[int, int, int, int, int, int]] = Memo()


def matmul_settings() -> tuple:
  """The settings a packed matmul's plan and graph read besides its operands (tests change them)."""
  return L1_BYTES, L2_BYTES, MATMUL_B_SLICE, MATMUL_B_BLOCK, MATMUL_A_BLOCK, THREADS, TILE_ROWS[0], TILE_VECTORS


def matmul_plan(m: int, k: int, panels: int, panel_bytes: int, itemsize: int) -> tuple[int, int, int, int, int, int]:
  """(k chunks, kc, row blocks, rows per block, column blocks, panels per block) of a packed matmul: the three
  functions above, kept per shape and per the settings they read (each product asks; tests change the settings)."""
  key = (m, k, panels, panel_bytes, itemsize) + matmul_settings()

  def make() -> tuple[int, int, int, int, int, int]:
    splits, kc = matmul_k_chunks(k, panel_bytes)
    return (splits, kc) + matmul_row_blocks(m, kc, itemsize) + matmul_col_blocks(panels, kc, panel_bytes)
  return _MATMUL_PLANS.get(key, make)


@dataclass
class LoopKernel:
  """A kernel as loops. Axes index spec.full_shape; size-1 axes have no loop (index 0).

  global_axes: output axes looped outside the reductions, outer to inner; global_axes[0] is thread_axis when set
  (the compiled function takes its [start, end) range). reduce_axes: loops of every reduction (and of the
  store when the output keeps those axes), outer to inner. vec_axis/vec_width: the axis whose innermost
  vec_width iterations are SIMD lanes. unroll: axis -> copies per loop iteration (for the vector axis, copies
  of the vector). accumulate_axis: a reduce axis looped just inside the outermost output loop instead of inside the
  output loops (not in reduce_axes): each of its iterations adds its partial result to the stored output (k chunks of
  a packed matmul, so that the other loops see one chunk's slice of each operand)."""
  spec: KernelSpec
  name: str
  global_axes: list[int]
  reduce_axes: list[int]
  vec_axis: int | None = None
  vec_width: int = 1
  unroll: dict[int, int] = field(default_factory=dict)
  thread_axis: int | None = None
  accumulate_axis: int | None = None

  def step(self, axis: int) -> int:
    """How far one loop iteration advances `axis`."""
    return self.unroll.get(axis, 1) * (self.vec_width if axis == self.vec_axis else 1)

  def describe(self) -> str:
    """The loop nest as text (HCQ_TENSOR_DEBUG=3 prints it)."""
    F = self.spec.full_shape
    def head(axis: int, depth: int) -> str:
      notes = []
      if axis == self.thread_axis: notes.append("split across threads")
      if axis == self.vec_axis: notes.append(f"{self.vec_width} SIMD lanes")
      if self.unroll.get(axis, 1) > 1: notes.append(f"x{self.unroll[axis]} unrolled")
      rng = "[start, end)" if axis == self.thread_axis else f"[0, {F[axis]})"
      return "  " * depth + f"for a{axis} in {rng} step {self.step(axis)}" + (f"   # {', '.join(notes)}" if notes else "")
    lines = [head(a, d) for d, a in enumerate(self.loop_axes)]
    if self.accumulate_axis is not None: lines[self.loop_axes.index(self.accumulate_axis)] += "   # accumulated into the output"
    depth = len(self.loop_axes)
    reduces = [n for n in self.spec.ast.toposort() if n.op == "REDUCE"]
    for r in reduces:
      lines += [head(a, depth + d) for d, a in enumerate(self.reduce_axes)]
      lines.append("  " * (depth + len(self.reduce_axes)) + f"acc_{r.key[:6]} {'+' if r.arg[0] == 'SUM' else r.arg[0].lower()}= ...")
    if self.store_in_reduce_loop:
      lines += [head(a, depth + d) for d, a in enumerate(self.reduce_axes)]
      depth += len(self.reduce_axes)
    lines.append("  " * depth + f"out[...] = ...   # {self.spec.out_dtype.name} {self.spec.out_shape}")
    return "\n".join(lines)

  @property
  def loop_axes(self) -> list[int]:
    """The loops outside the reductions, outer to inner: global_axes with accumulate_axis just inside the first."""
    if self.accumulate_axis is None: return self.global_axes
    return self.global_axes[:1] + [self.accumulate_axis] + self.global_axes[1:]

  @property
  def store_in_reduce_loop(self) -> bool:
    """Whether the output keeps the reduce axes (stored inside loops over them, after the reductions)."""
    return bool(self.spec.reduce_axes) and self.spec.out_shape == self.spec.full_shape


def axis_var(spec: KernelSpec, axis: int) -> Var: return Var(f"a{axis}", 0, spec.full_shape[axis] - 1)


_LOAD_INDEX: Memo[tuple[Expr, frozenset[str]]] = Memo()  # (spec key, op key) -> load_index: plan asks for each load's
# index once per axis and pass (a packed matmul's plan: 3.3 ms, most of it rebuilding the same indices)


def load_index(op: KOp, spec: KernelSpec) -> tuple[Expr, frozenset[str]]:
  """A load's (or masked op's) buffer index over all axis variables, and the variables its mask reads."""
  def make() -> tuple[Expr, frozenset[str]]:
    st = op.arg[1] if op.op in ("LOAD", "CONST") else op.arg
    idx, valid = st.index([Num(0) if s == 1 else axis_var(spec, d) for d, s in enumerate(st.shape)])
    return idx, frozenset(valid.variables())
  return _LOAD_INDEX.get((spec.key, op.key), make)


def access_kind(op: KOp, spec: KernelSpec, axis: int) -> str:
  """'contig' (stride 1 along axis), 'masked' (stride 1 with a mask along it: a pad or cat, an llvm.masked.load),
  'bcast' (does not depend on it) or 'gather'."""
  if op.op == "CONST" and op.arg[1] is None: return "bcast"
  idx, mask_vars = load_index(op, spec)
  name = f"a{axis}"
  if op.op == "MASK": return "bcast" if name not in mask_vars else "gather"
  c = linear_coefficient(idx, name)
  if name in mask_vars: return "masked" if c == 1 and op.op == "LOAD" else "gather"
  if c == 0: return "bcast"
  return "contig" if c == 1 else "gather"


def plan(spec: KernelSpec, name: str) -> LoopKernel:
  """Choose loops, vectorization, unrolling and threading for one kernel."""
  F, A = spec.full_shape, spec.reduce_axes
  global_axes = [d for d, s in enumerate(F) if s > 1 and d not in A]
  reduce_axes = [d for d in A if F[d] > 1]
  lk = LoopKernel(spec, name, global_axes, reduce_axes)
  nodes = spec.ast.toposort()
  loads = [n for n in nodes if n.op in ("LOAD", "MASK") or (n.op == "CONST" and n.arg[1] is not None)]
  out_strides = contiguous_strides(spec.out_shape)
  has_reduce = any(n.op == "REDUCE" for n in nodes)
  # vector width from the widest type touched, so one vector is one register of it
  widest = max([n.dtype.itemsize for n in nodes] + [spec.out_dtype.itemsize])
  best = None
  for width in (VECTOR_BYTES // widest, VECTOR_BYTES // widest // 2, 4):
    width = max(min(width, 32), 1)
    if width < 2: continue
    inner_reduce = reduce_axes[-1:] if reduce_axes else []
    for axis in global_axes + inner_reduce:
      if F[axis] % width: continue
      in_store = axis in global_axes or lk.store_in_reduce_loop
      if in_store and out_strides[axis] != 1: continue
      kinds = [access_kind(n, spec, axis) for n in loads]
      score = sum({"contig": 2, "masked": 1, "bcast": 1, "gather": -4}[k] for k in kinds) + (2 if in_store else 0)
      if best is None or score > best[0]: best = (score, axis, width)
    if best is not None: break
  if best is not None and best[0] > 0:
    _, lk.vec_axis, lk.vec_width = best
  # transcendental bodies are long already: fewer copies keep compile time under budget at the same speed
  heavy = any(n.op == "ALU" and n.arg in ("EXP", "LOG", "EXP2", "LOG2", "SIN", "COS", "POW") for n in nodes)
  if has_reduce and lk.vec_axis is not None:
    if lk.vec_axis in global_axes and not heavy:
      # register tiling: unroll another output axis whose loads reuse the vector loads (matmul's rows)
      # (masked too: a matmul whose kernel packs b itself reads b's padded columns through the pad's mask)
      vector_loads = [n for n in loads if n.op == "LOAD" and access_kind(n, spec, lk.vec_axis) in ("contig", "masked")]
      for axis in reversed(global_axes):
        if axis == lk.vec_axis: continue
        if any(access_kind(n, spec, axis) == "bcast" for n in vector_loads):
          for factor in TILE_ROWS:
            if F[axis] % factor == 0:
              lk.unroll[axis] = factor
              break
          break
      for vectors in (TILE_VECTORS, 2):
        if F[lk.vec_axis] % (vectors * lk.vec_width) == 0:
          lk.unroll[lk.vec_axis] = vectors
          break
    elif lk.vec_axis not in global_axes:
      for factor in [f for f in REDUCE_UNROLL if not heavy or f <= 2]:
        if F[lk.vec_axis] % (factor * lk.vec_width) == 0:
          lk.unroll[lk.vec_axis] = factor
          break
  # a copy that no vector fits (a matmul operand into register tiles: rows of 6 innermost) unrolls a short innermost
  # axis itself: LLVM's loop vectorizer spent 100+ ms of compile time on that loop for no gain
  if lk.vec_axis is None and spec.ast.op == "LOAD" and global_axes and F[global_axes[-1]] <= 8:
    lk.unroll[global_axes[-1]] = F[global_axes[-1]]
  # a register-tiled axis goes innermost (just outside the vector axis), or just outside the innermost other axis
  # that only the vector loads depend on (a packed matmul's column panels): the tile's rows of the broadcast operand
  # then stay in L1 while the panels pass, and the tile's outputs move along the rows, one line per panel
  tiled = [a for a in lk.unroll if a != lk.vec_axis and a in global_axes]
  rest = [a for a in global_axes if a not in tiled and a != lk.vec_axis]
  if tiled:
    readers = {a: [n for n in loads if access_kind(n, spec, a) != "bcast"] for a in rest}   # the loads each axis moves
    vector_only = [a for a in rest if readers[a] and all(access_kind(n, spec, lk.vec_axis) != "bcast" for n in readers[a])]
    order = [a for a in rest if a not in vector_only[-1:]] + tiled + vector_only[-1:]
  else:
    order = rest + tiled
  order += [lk.vec_axis] if lk.vec_axis in global_axes else []
  lk.global_axes = order
  # threads split the first output axis with enough iterations; it becomes the outermost loop
  if THREADS > 1 and math.prod(F) >= MIN_THREADED_WORK:
    for axis in order:
      if F[axis] // lk.step(axis) >= THREADS:
        lk.thread_axis = axis
        lk.global_axes = [axis] + [a for a in order if a != axis]
        break
  # a register tile whose reduction has an outer axis (a packed matmul's k chunks) loops that axis outside the tiles
  # and adds each chunk's sums to the output: the chunk's slices of both operands then stay in cache across the tiles
  if tiled and len(reduce_axes) >= 2 and spec.ast.op == "REDUCE" and spec.ast.dtype == spec.out_dtype and not lk.store_in_reduce_loop:
    lk.accumulate_axis, lk.reduce_axes = reduce_axes[0], reduce_axes[1:]
  return lk
