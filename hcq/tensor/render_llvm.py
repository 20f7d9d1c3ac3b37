"""Renderer: a LoopKernel as LLVM IR text for the host CPU (render_amd.py reuses the writer for AMD gfx11).

The function is `void NAME(ptr out, ptr in1, ..., i64 start, i64 end)`; [start, end) is the range of the
thread axis (the outermost loop). Loop counters and accumulators live in allocas that LLVM's SROA turns into
registers. Vector code uses LLVM vector types directly (no reliance on the loop vectorizer); exp/exp2/log/log2
in float32 are inline polynomials so that they vectorize, the rest of the math goes to LLVM intrinsics."""
from __future__ import annotations
import itertools
import math
import struct
from hcq.drivers.cpu.jit import CLEANUP_ONLY
from hcq.tensor.dtype import DType, dtypes
from hcq.tensor.loops import LoopKernel, axis_var, plan
from hcq.memo import Memo
from hcq.tensor.render_gemm import gemm_layout, render_gemm, workspace_bytes
from hcq.tensor.view import contiguous_strides
from hcq.tensor.schedule import KOp
from hcq.tensor.symbolic import Expr, Num, Var, Sum, Mul, Div, Mod, Valid, linear_coefficient, substitute, variables


class Renderer:
  """The seam between the loop IR and a target. A renderer turns a LoopKernel into source its device compiles, and
  says how to launch it. Targets: LLVMCPURenderer (here), AMDGCNRenderer (render_amd.py), NVPTXRenderer (render_nv.py)."""
  target = "abstract"
  def adapt(self, lk: LoopKernel) -> LoopKernel:
    """The loop plan as this target runs it (the CPU's plan as is; a GPU may drop SIMD lanes, unrolls, threads)."""
    return lk
  stores_views = False  # whether some kernel may store through a view (KernelSpec.out_view): then stores_through(spec) says which
  def render(self, lk: LoopKernel) -> str: raise NotImplementedError
  def launch(self, lk: LoopKernel) -> tuple[tuple[int, ...], tuple[int, ...] | None, tuple[int, ...]]:
    """(global_size, local_size, vals) of one run of the rendered kernel."""
    raise NotImplementedError
  def workspace(self, lk: LoopKernel) -> int:
    """Bytes of device memory each workgroup of the rendered kernel is given beside its buffers (0: none)."""
    return 0


def float_literal(value: float, dtype: DType) -> str:
  """An exact LLVM literal (LLVM takes floats as the hex of the double, halves as 0xH); bfloat16 values live in
  float registers, so theirs is the float of the bf16-rounded value."""
  import numpy as np
  if dtype == dtypes.float16: return "0xH%04X" % int(np.array(value, np.float16).view(np.uint16))
  if dtype == dtypes.bfloat16:
    from hcq.tensor.dtype import f32_to_bf16
    value = float(np.array([int(f32_to_bf16(np.array([value], np.float32))[0]) << 16], np.uint32).view(np.float32)[0])
  if dtype == dtypes.float32: value = float(np.float32(value))
  return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


def const_literal(value, dtype: DType) -> str:
  if dtype == dtypes.bool: return "true" if value else "false"
  if dtype.is_float: return float_literal(float(value), dtype)
  v = int(value) & ((1 << dtype.bits) - 1)
  if v >= 1 << (dtype.bits - 1): v -= 1 << dtype.bits  # LLVM prints integers signed
  return str(v)


def suffix(dtype: DType, width: int) -> str:
  """Intrinsic type suffix: f32, v16f32, i64, v8i1 ..."""
  base = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16"}.get(dtype.llvm, dtype.llvm)
  return f"v{width}{base}" if width > 1 else base


# every CPU function's attributes (the generic writer's and render_gemm's): AVX-512 registers where the host has them
CPU_ATTRIBUTES = '\n\nattributes #0 = { nounwind "min-legal-vector-width"="512" "prefer-vector-width"="512" }\n'
# a float sum's accumulators take this many iterations of the innermost reduce loop, then are added to a running total,
# which takes as many blocks before it is added to the next (levels as deep as the loop is long): the error grows with
# the block and the depth, not with the loop length (a float32 accumulator of ones stops growing at 2^24)
SUM_BLOCK = 256
MIN_VALUE = {"SUM": lambda d: 0, "MAX": lambda d: -math.inf if d.is_float else (0 if d.kind in "ub" else -(1 << (d.bits - 1))),
             "MIN": lambda d: math.inf if d.is_float else (1 if d.kind == "b" else ((1 << d.bits) - 1 if d.kind == "u" else (1 << (d.bits - 1)) - 1))}


class Value:
  """A rendered SSA value: its name, dtype and lane count (1 = scalar)."""
  __slots__ = ("name", "dtype", "width")
  def __init__(self, name: str, dtype: DType, width: int): self.name, self.dtype, self.width = name, dtype, width


class LLVMCPURenderer(Renderer):
  """Loop IR → LLVM IR for the host CPU (see the module docstring)."""
  target = "cpu"
  stores_views = True

  def __init__(self) -> None:
    self._through: Memo[bool] = Memo()   # spec key -> stores_through (planning it costs ~5 ms of a call)

  def stores_through(self, spec) -> bool:
    """Only the packed matmul kernel stores through a view (its ragged edge tiles masked): render_gemm. Kept per
    spec key, as the runtime keeps the compiled kernel."""
    return self._through.get(spec.key, lambda: gemm_layout(plan(spec, "probe")) is not None)

  def render(self, lk: LoopKernel) -> str:
    gemm = gemm_layout(lk)
    if lk.spec.out_view is not None and gemm is None: raise ValueError(f"{lk.name}: only a packed matmul stores through a view")
    if gemm is None:   # a kernel without SIMD lanes of its own leaves its loops to O3's vectoriser (a sum over an axis of
      # 3, 4x slower without it); one with them needs only the clean-up passes (half the compile time)
      return (CLEANUP_ONLY + "\n" if lk.vec_axis is not None else "") + _KernelWriter(lk).write()
    return (render_gemm(lk, gemm) + "\n\n" + _KernelWriter(lk).hcq_entry(len(lk.spec.buf_dtypes), workspace_bytes(lk, gemm))
            + CPU_ATTRIBUTES)

  def workspace(self, lk: LoopKernel) -> int:
    """Bytes of workspace a workgroup of the kernel needs (the packed matmul's packs), 0 for none."""
    gemm = gemm_layout(lk)
    return 0 if gemm is None else workspace_bytes(lk, gemm)

  def launch(self, lk: LoopKernel):
    """The thread axis's extent, cut by the device into chunks on multiples of its loop step (vals[0])."""
    if lk.thread_axis is None: return (1,), None, (1,)
    return (lk.spec.full_shape[lk.thread_axis],), None, (lk.step(lk.thread_axis),)


class _KernelWriter:
  """LoopKernel -> LLVM IR for the host CPU. Target hooks (overridden by _AMDKernelWriter): `gptr`/`pptr`/`alloca_space`,
  the pointer types of buffers and of allocas and the allocas' address space; `write`, the function around `global_body`; `alu`, ops a target lowers itself."""
  gptr = "ptr"  # buffers
  pptr = "ptr"  # allocas (loop counters, accumulators)
  alloca_space = ""

  def __init__(self, lk: LoopKernel):
    self.lk, self.spec = lk, lk.spec
    self.lines: list[str] = []
    self.allocas: list[str] = []
    self.decls: set[str] = set()
    self.count = 0
    self.W = lk.vec_width
    self.var_names: dict[str, str] = {}   # symbolic variable name -> LLVM i64 value
    self.regions: list[dict] = [{}]       # render caches, one per open loop body
    self.reduce_results: dict[tuple, Value] = {}

  # emission helpers
  def tmp(self) -> str:
    self.count += 1
    return f"%v{self.count}"

  def emit(self, text: str) -> str:
    name = self.tmp()
    self.lines.append(f"  {name} = {text}")
    return name

  def declare(self, ret: str, fn: str, args: str) -> None: self.decls.add(f"declare {ret} @{fn}({args})")

  def call(self, fn: str, ret: str, args: list[tuple[str, str]], flags: str = "") -> str:
    self.declare(ret, fn, ", ".join(t for t, _ in args))
    return self.emit(f"call {flags}{' ' if flags else ''}{ret} @{fn}({', '.join(f'{t} {v}' for t, v in args)})")

  def label(self, name: str) -> None: self.lines.append(f"{name}:")

  def ty(self, dtype: DType, width: int, mem: bool = False) -> str:
    base = dtype.llvm_mem if mem else dtype.llvm
    return f"<{width} x {base}>" if width > 1 else base

  def const(self, value, dtype: DType, width: int = 1) -> str:
    lit = const_literal(value, dtype)
    return f"splat ({dtype.llvm} {lit})" if width > 1 else lit

  def splat(self, v: Value, width: int) -> Value:
    if v.width == width or width == 1: return v
    t = v.dtype.llvm
    ins = self.emit(f"insertelement <{width} x {t}> poison, {t} {v.name}, i64 0")
    return Value(self.emit(f"shufflevector <{width} x {t}> {ins}, <{width} x {t}> poison, <{width} x i32> zeroinitializer"),
                 v.dtype, width)

  # index expressions
  def expr(self, e: Expr) -> str:
    if isinstance(e, Num): return str(e.value)
    if isinstance(e, Var): return self.var_names[e.name]
    for region in reversed(self.regions):  # computed once per loop body (a tile's copies share their index terms)
      if ("expr", e) in region: return region[("expr", e)]
    self.regions[-1][("expr", e)] = value = self._expr(e)
    return value

  def _expr(self, e: Expr) -> str:
    if isinstance(e, Sum):
      if e.const: return self.emit(f"add i64 {self.expr(Sum(e.terms, 0) if len(e.terms) > 1 else e.terms[0])}, {e.const}")  # copies differ by the constant
      acc = None
      for t in e.terms:
        v = self.expr(t)
        acc = v if acc is None else self.emit(f"add i64 {acc}, {v}")
      return acc
    if isinstance(e, Mul): return self.emit(f"mul i64 {self.expr(e.a)}, {e.c}")
    if isinstance(e, (Div, Mod)):
      a = self.expr(e.a)
      if e.a.vmin >= 0: return self.emit(f"{'udiv' if isinstance(e, Div) else 'urem'} i64 {a}, {e.c}")
      # floor semantics for negative numerators
      q = self.emit(f"sdiv i64 {a}, {e.c}")
      r = self.emit(f"srem i64 {a}, {e.c}")
      neg = self.emit(f"icmp slt i64 {r}, 0")
      if isinstance(e, Div): return self.emit(f"sub i64 {q}, {self.emit(f'zext i1 {neg} to i64')}")
      return self.emit(f"select i1 {neg}, i64 {self.emit(f'add i64 {r}, {e.c}')}, i64 {r}")
    raise TypeError(e)

  def valid(self, valid: Valid) -> str | None:
    if not valid.conds: return None
    if valid.always_false: return "false"
    acc = None
    for e, lo, hi in valid.conds:
      v = self.expr(e)
      parts = []
      if e.vmin < lo: parts.append(self.emit(f"icmp sge i64 {v}, {lo}"))
      if e.vmax >= hi: parts.append(self.emit(f"icmp slt i64 {v}, {hi}"))
      for p in parts: acc = p if acc is None else self.emit(f"and i1 {acc}, {p}")
    return acc

  # loops
  def loop(self, var: str, start: str, end: str, step: int, body) -> None:
    slot = f"%slot_{var}_{self.count}"
    self.count += 1
    self.allocas.append(f"  {slot} = alloca i64{self.alloca_space}")
    tag = f"{var}_{self.count}"
    self.lines.append(f"  store i64 {start}, {self.pptr} {slot}")
    self.lines.append(f"  br label %cond_{tag}")
    self.label(f"cond_{tag}")
    value = self.emit(f"load i64, {self.pptr} {slot}")
    more = self.emit(f"icmp slt i64 {value}, {end}")
    self.lines.append(f"  br i1 {more}, label %body_{tag}, label %exit_{tag}")
    self.label(f"body_{tag}")
    self.var_names[var] = value
    self.regions.append({})
    body()
    self.regions.pop()
    nxt = self.emit(f"add i64 {value}, {step}")
    self.lines.append(f"  store i64 {nxt}, {self.pptr} {slot}")
    self.lines.append(f"  br label %cond_{tag}" + (", !llvm.loop !0" if self.planned_loops() else ""))
    self.label(f"exit_{tag}")

  def nested_loops(self, axes: list[int], body, first_range: tuple[str, str] | None = None) -> None:
    if not axes: return body()
    axis = axes[0]
    start, end = first_range if first_range is not None else ("0", str(self.spec.full_shape[axis]))
    self.loop(f"a{axis}", start, end, self.lk.step(axis), lambda: self.nested_loops(axes[1:], body))

  # the kernel
  def write(self) -> str:
    lk, spec = self.lk, self.spec
    nbufs = len(spec.buf_dtypes)
    self.lines.append("entry:")
    body_start = len(self.lines)
    thread_range = ("%start", "%end") if lk.thread_axis is not None else None
    self.nested_loops(lk.loop_axes, self.global_body, thread_range)
    self.lines.append("  ret void")
    params = ", ".join([f"ptr noalias align 16 %b{i}" for i in range(nbufs)] + ["i64 %start", "i64 %end"])
    head = [f"define void @{lk.name}({params}) #0 {{"] + self.lines[:body_start] + self.allocas
    out = "\n".join(sorted(self.decls)) + "\n\n" + "\n".join(head + self.lines[body_start:] + ["}"])
    out += "\n\n" + self.hcq_entry(nbufs)
    out += CPU_ATTRIBUTES
    if self.planned_loops(): out += '!0 = distinct !{!0, !1, !2}\n!1 = !{!"llvm.loop.unroll.disable"}\n!2 = !{!"llvm.loop.vectorize.enable", i1 false}\n'
    return out

  def planned_loops(self) -> bool:
    """Whether the plan vectorized or unrolled the loops itself: then LLVM's loop vectorizer and unroller are told
    to leave them alone (they only cost compile time there: the matmul kernel ran at the same speed without them)."""
    return self.lk.vec_axis is not None or bool(self.lk.unroll)

  def hcq_entry(self, nbufs: int, workspace: int = 0) -> str:
    """`void NAME_hcq(ptr kernargs, i32 gid_x, gid_y, gid_z, local_x, local_y, local_z)`: the HCQ CPU device's
    kernel ABI (hcq.drivers.cpu). kernargs hold the buffer addresses, then i64 chunk and i64 extent; workgroup
    gid_x runs [gid_x*chunk, min((gid_x+1)*chunk, extent)) of the thread axis. So the same source also launches
    through hcq.Device("CPU") and its queues: args=["buffer"]*n + ["i64", "i64"], vals=(chunk, extent). A kernel with
    a `workspace` (bytes a workgroup) takes one more buffer after the others, and gid_x's part of it from gid_x *
    workspace: args=["buffer"]*(n+1) + ["i64", "i64"]."""
    name = self.lk.name
    lines = [f"define void @{name}_hcq(ptr %kernargs, i32 %gx, i32 %gy, i32 %gz, i32 %lx, i32 %ly, i32 %lz) #0 {{", "entry:"]
    ptrs = nbufs + (1 if workspace else 0)
    for i in range(ptrs + 2):
      lines.append(f"  %a{i}.p = getelementptr i8, ptr %kernargs, i64 {8 * i}")
      lines.append(f"  %a{i} = load {'ptr' if i < ptrs else 'i64'}, ptr %a{i}.p, align 8")
    chunk, extent = f"%a{ptrs}", f"%a{ptrs + 1}"
    lines += [f"  %g = zext i32 %gx to i64", f"  %start = mul i64 %g, {chunk}", f"  %end0 = add i64 %start, {chunk}",
              f"  %end = call i64 @llvm.umin.i64(i64 %end0, i64 {extent})"]
    args = [f"ptr %a{i}" for i in range(nbufs)]
    if workspace:
      lines += [f"  %ws.at = mul i64 %g, {workspace}", f"  %ws = getelementptr i8, ptr %a{nbufs}, i64 %ws.at"]
      args.append("ptr %ws")
    lines += [f"  call void @{name}({', '.join(args)}, i64 %start, i64 %end)", "  ret void", "}"]
    if "declare i64 @llvm.umin.i64(i64, i64)" not in self.decls: lines.append("declare i64 @llvm.umin.i64(i64, i64)")
    return "\n".join(lines)

  def combos(self) -> list[dict[int, int]]:
    """Offsets of every unrolled copy of the global axes."""
    axes = [a for a in self.lk.global_axes if self.lk.unroll.get(a, 1) > 1]
    out = []
    for combo in itertools.product(*[range(self.lk.unroll[a]) for a in axes]):
      out.append({a: c * (self.W if a == self.lk.vec_axis else 1) for a, c in zip(axes, combo)})
    return out

  def context(self, combo: dict[int, int], inner_offset: int, with_reduce: bool) -> dict[int, Expr]:
    """Index expression per axis for one unrolled copy; reduce axes only inside their loops."""
    ctx: dict[int, Expr] = {}
    for a in self.lk.global_axes: ctx[a] = self.tile_var(a) + combo.get(a, 0)
    if self.lk.accumulate_axis is not None: ctx[self.lk.accumulate_axis] = axis_var(self.spec, self.lk.accumulate_axis)
    if with_reduce:
      for a in self.lk.reduce_axes: ctx[a] = axis_var(self.spec, a)
      if self.lk.reduce_axes: ctx[self.lk.reduce_axes[-1]] = ctx[self.lk.reduce_axes[-1]] + inner_offset
    return ctx

  def tiled_axes(self) -> list[int]:
    """Unrolled output axes other than the vector axis (a register tile's rows)."""
    return [a for a in self.lk.global_axes if self.lk.unroll.get(a, 1) > 1 and a != self.lk.vec_axis]

  def tile_var(self, axis: int) -> Expr:
    """An output axis's loop variable; a tiled axis's as unroll * (its tile's number), so that an index that splits
    the axis by the tile (a matmul operand packed in register tiles: row // 6, row % 6) simplifies to plain terms."""
    u = self.lk.unroll.get(axis, 1)
    if axis not in self.tiled_axes(): return axis_var(self.spec, axis)
    return Var(f"a{axis}_tile", 0, (self.spec.full_shape[axis] - 1) // u) * u

  def lanes(self, with_reduce: bool) -> int:
    """SIMD lanes of values in this part of the kernel (a vectorized reduce axis is scalar outside its loop)."""
    if self.lk.vec_axis is None: return 1
    if self.lk.vec_axis in self.lk.reduce_axes and not with_reduce: return 1
    return self.W

  def inner_unroll(self) -> int:
    r = self.lk.reduce_axes
    return self.lk.unroll.get(r[-1], 1) if r and r[-1] == self.lk.vec_axis else 1

  def global_body(self) -> None:
    lk, spec = self.lk, self.spec
    for a in lk.global_axes:
      if f"a{a}" not in self.var_names: self.var_names[f"a{a}"] = "0"
    for a in self.tiled_axes(): self.var_names[f"a{a}_tile"] = self.emit(f"udiv exact i64 {self.var_names[f'a{a}']}, {lk.unroll[a]}")
    combos = self.combos()
    reduces = [n for n in spec.ast.toposort() if n.op == "REDUCE"]
    self.prefetch_next_tile(combos)
    for red in reduces: self.render_reduce(red, combos)
    if lk.store_in_reduce_loop:
      def store_body():
        for combo in combos:
          for u in range(self.inner_unroll()): self.store(combo, u * self.W, True)
      self.reduce_loops(store_body)
    else:
      def store_once():
        for combo in combos: self.store(combo, 0, False)
      self.once(store_once)

  def reduce_loops(self, body, flush=None, levels: int = 0) -> None:
    """The loops over the reduce axes around `body` (a GPU target may share them between the workgroup's lanes).
    With `levels` (a float sum, sum_levels()): the innermost loop runs in blocks of SUM_BLOCK iterations, blocks of
    SUM_BLOCK blocks, ... `levels` deep, with `flush(k)` after each block of level k."""
    axes = self.lk.reduce_axes
    if not levels: return self.nested_loops(axes, body)
    last, n = axes[-1], self.spec.full_shape[axes[-1]]
    step = self.lk.step(last)
    def level(k: int, start: str, end: str) -> None:   # [start, end) of the innermost axis in blocks of level k
      if k == 0: return self.loop(f"a{last}", start, end, step, body)
      span = SUM_BLOCK ** k * step
      def block():
        lo = self.var_names[f"b{k}_{last}"]
        hi = self.emit(f"add i64 {lo}, {span}")
        level(k - 1, lo, self.emit(f"select i1 {self.emit(f'icmp slt i64 {hi}, {end}')}, i64 {hi}, i64 {end}"))
        flush(k)
      self.loop(f"b{k}_{last}", start, end, span, block)
    def innermost():
      if levels == 1 and -(-n // step) <= SUM_BLOCK:   # short, inside long outer reduce loops: a flush after each pass
        level(0, "0", str(n))
        return flush(1)
      level(levels, "0", str(n))
    self.nested_loops(axes[:-1], innermost)

  def sum_levels(self) -> int:
    """How many levels of blocks a float sum's innermost reduce loop takes (0: none, it is short)."""
    axes = self.lk.reduce_axes
    if not axes: return 0
    iters = -(-self.spec.full_shape[axes[-1]] // self.lk.step(axes[-1]))
    if iters <= SUM_BLOCK:   # one flush per pass when long outer reduce loops repeat a loop worth it
      return 1 if iters >= 16 and math.prod(self.spec.full_shape[a] for a in axes[:-1]) > 1 else 0
    levels = 1
    while SUM_BLOCK ** (levels + 1) < iters: levels += 1
    return levels

  def once(self, body) -> None:
    """Run `body` once per output (a GPU target whose lanes share an output lets one lane do it)."""
    body()

  def combine_lanes(self, op: str, acc: Value) -> Value:
    """A reduction's value from this thread's part (a GPU target combines the parts of the workgroup's lanes)."""
    return acc

  def render_reduce(self, red: KOp, combos: list[dict[int, int]]) -> None:
    op = red.arg[0]
    dtype = red.dtype
    vec_in_reduce = self.lk.vec_axis in self.lk.reduce_axes
    width = self.W if self.lk.vec_axis is not None else 1
    copies = self.inner_unroll()
    slots = {}
    ident = self.const(MIN_VALUE[op](dtype), dtype, width)
    t = self.ty(dtype, width)
    for ci in range(len(combos)):
      for u in range(copies):
        slot = f"%acc{self.count}_{ci}_{u}"
        self.count += 1
        self.allocas.append(f"  {slot} = alloca {t}{self.alloca_space}")
        self.lines.append(f"  store {t} {ident}, {self.pptr} {slot}")
        slots[(ci, u)] = slot

    def body():
      for ci, combo in enumerate(combos):
        for u in range(copies):
          ctx = self.context(combo, u * self.W if vec_in_reduce else 0, True)
          x = self.splat(self.render(red.srcs[0], ctx, width, (ci, u)), width)
          acc = self.emit(f"load {t}, {self.pptr} {slots[(ci, u)]}")
          new = self.combine(op, Value(acc, dtype, width), x)
          self.lines.append(f"  store {t} {new.name}, {self.pptr} {slots[(ci, u)]}")
    levels = self.sum_levels() if op == "SUM" and dtype.is_float else 0
    totals = [slots]   # level 0: the accumulators; level k: the running total of level k-1's blocks
    for k in range(1, levels + 1):
      totals.append({})
      for key in slots:
        totals[k][key] = f"%total{self.count}"
        self.count += 1
        self.allocas.append(f"  {totals[k][key]} = alloca {t}{self.alloca_space}")
        self.lines.append(f"  store {t} {ident}, {self.pptr} {totals[k][key]}")
    def flush(k: int) -> None:   # level k-1 into level k (a plain fadd: not reassociated away), level k-1 restarts
      for key in slots:
        total, part = self.emit(f"load {t}, {self.pptr} {totals[k][key]}"), self.emit(f"load {t}, {self.pptr} {totals[k - 1][key]}")
        self.lines.append(f"  store {t} {self.emit(f'fadd {t} {total}, {part}')}, {self.pptr} {totals[k][key]}")
        self.lines.append(f"  store {t} {ident}, {self.pptr} {totals[k - 1][key]}")
    self.reduce_loops(body, flush, levels)
    totals = totals[-1]
    for ci in range(len(combos)):
      acc = Value(self.emit(f"load {t}, {self.pptr} {totals[(ci, 0)]}"), dtype, width)
      for u in range(1, copies):
        acc = self.combine(op, acc, Value(self.emit(f"load {t}, {self.pptr} {totals[(ci, u)]}"), dtype, width))
      if vec_in_reduce and width > 1: acc = self.horizontal(op, acc)
      self.reduce_results[(red.key, ci)] = self.combine_lanes(op, acc)

  def combine(self, op: str, a: Value, b: Value) -> Value:
    if op == "SUM": return self.alu("ADD", [a, b], a.dtype, reassoc=True)
    return self.alu(op, [a, b], a.dtype)

  def horizontal(self, op: str, v: Value) -> Value:
    d, s = v.dtype, suffix(v.dtype, v.width)
    if d == dtypes.bool: name = {"SUM": "or", "MAX": "or", "MIN": "and"}[op]
    elif d.is_float: name = {"SUM": "fadd", "MAX": "fmaximum", "MIN": "fminimum"}[op]
    else: name = {"SUM": "add", "MAX": "umax" if d.is_unsigned else "smax", "MIN": "umin" if d.is_unsigned else "smin"}[op]
    args = [(self.ty(d, v.width), v.name)]
    if name == "fadd": args = [(d.llvm, self.const(-0.0, d))] + args  # -0.0 is the identity of fadd
    return Value(self.call(f"llvm.vector.reduce.{name}.{s}", d.llvm, args, "reassoc" if name == "fadd" else ""), d, 1)

  def store(self, combo: dict[int, int], inner_offset: int, with_reduce: bool) -> None:
    spec = self.spec
    ctx = self.context(combo, inner_offset, with_reduce)
    width = self.lanes(with_reduce)
    key = (self.combos().index(combo) if combo else 0, inner_offset // max(self.W, 1))
    v = self.splat(self.render(spec.ast, ctx, width, key), width)
    idx = self.out_index(ctx)
    if self.lk.accumulate_axis is not None:  # later iterations of the accumulated axis add to what the earlier stored
      stored = self.read_at(0, spec.out_dtype, self.expr(idx), width)
      first = self.emit(f"icmp eq i64 {self.var_names[f'a{self.lk.accumulate_axis}']}, 0")
      v = Value(self.emit(f"select i1 {first}, {self.ty(v.dtype, width)} {v.name}, {self.ty(v.dtype, width)} "
                          f"{self.combine(spec.ast.arg[0], stored, v).name}"), v.dtype, width)
    self.write_memory(0, spec.out_dtype, idx, v)

  def out_index(self, ctx: dict[int, Expr]) -> Expr:
    """The element of the (contiguous) output that the axes' values in ctx store to."""
    idx: Expr = Num(0)
    for d, stride in enumerate(contiguous_strides(self.spec.out_shape)):
      if self.spec.out_shape[d] > 1: idx = idx + ctx[d] * stride
    return idx

  def prefetch_next_tile(self, combos: list[dict[int, int]]) -> None:
    """Prefetch (for writing) the outputs of the next register tile, which an accumulated axis reads back after its
    reduce loop: a load that misses then would stall the tile's start instead (measured ~10% of a packed matmul)."""
    tiled = self.tiled_axes()
    if self.lk.accumulate_axis is None or not tiled: return
    self.declare("void", "llvm.prefetch.p0", "ptr, i32, i32, i32")
    for combo in combos:
      ctx = self.context(combo, 0, False)
      ctx[tiled[0]] = ctx[tiled[0]] + self.lk.unroll[tiled[0]]
      ptr = self.emit(f"getelementptr {self.spec.out_dtype.llvm_mem}, {self.gptr} %b0, i64 {self.expr(self.out_index(ctx))}")
      self.lines.append(f"  call void @llvm.prefetch.p0(ptr {ptr}, i32 1, i32 3, i32 1)")

  def write_memory(self, buf: int, dtype: DType, idx: Expr, v: Value) -> None:
    mem_t = self.ty(dtype, v.width, mem=True)
    val = v.name
    if dtype == dtypes.bool: val = self.emit(f"zext {self.ty(dtype, v.width)} {val} to {mem_t}")
    if dtype == dtypes.bfloat16: val = self.bf16_bits(v)
    ptr = self.emit(f"getelementptr inbounds {dtype.llvm_mem}, {self.gptr} %b{buf}, i64 {self.expr(idx)}")
    self.lines.append(f"  store {mem_t} {val}, {self.gptr} {ptr}, align {self.align(dtype, v.width)}")

  # values
  def render(self, op: KOp, ctx: dict[int, Expr], width: int, copy_key) -> Value:
    if op.op == "REDUCE": return self.reduce_results[(op.key, copy_key[0])]
    key = (op.key, copy_key, width)
    if op.op == "LOAD":  # unrolled copies that read one element share its load (a register tile's row of b)
      idx, valid = self.index_of(op.arg[1], ctx)
      key = ("LOAD", op.arg[0], op.dtype, idx, valid, width)
    for region in reversed(self.regions):
      if key in region: return region[key]
    v = self.load(op.arg[0], op.dtype, idx, valid, width) if op.op == "LOAD" else self._render(op, ctx, width, copy_key)
    self.regions[-1][key] = v
    return v

  def lane_var(self, width: int) -> str | None:
    return f"a{self.lk.vec_axis}" if width > 1 else None

  def index_of(self, st, ctx: dict[int, Expr]) -> tuple[Expr, Valid]:
    idxs = [Num(0) if s == 1 else ctx[d] for d, s in enumerate(st.shape)]
    return st.index(idxs)

  def _render(self, op: KOp, ctx: dict[int, Expr], width: int, copy_key) -> Value:
    if op.op == "CONST":
      value, st = op.arg
      c = Value(self.const(value, op.dtype), op.dtype, 1)
      if st is None: return c
      _, valid = self.index_of(st, ctx)
      return self.masked(c, valid, width)
    if op.op == "GATHER": return self.gather(op, self.render(op.srcs[0], ctx, width, copy_key))
    if op.op == "MASK":
      inner = self.render(op.srcs[0], ctx, width, copy_key)
      _, valid = self.index_of(op.arg, ctx)
      return self.masked(inner, valid, width)
    srcs = [self.render(s, ctx, width, copy_key) for s in op.srcs]
    lanes = max(s.width for s in srcs)
    srcs = [self.splat(s, lanes) for s in srcs]
    if op.op == "CAST": return self.cast(srcs[0], op.dtype)
    if op.op == "BITCAST":
      src = srcs[0]
      if src.dtype == dtypes.bfloat16: src = Value(self.bf16_bits(src), dtypes.int16, lanes)
      if op.dtype == dtypes.bfloat16:
        bits = self.emit(f"bitcast {self.ty(src.dtype, lanes)} {src.name} to {self.ty(dtypes.int16, lanes)}") if src.dtype != dtypes.int16 else src.name
        return Value(self.bf16_from_bits(bits, lanes), op.dtype, lanes)
      return Value(self.emit(f"bitcast {self.ty(src.dtype, lanes)} {src.name} to {self.ty(op.dtype, lanes)}"), op.dtype, lanes)
    out = self.alu(op.arg, srcs, op.dtype)
    if op.dtype == dtypes.bfloat16 and op.arg not in ("MAX", "MIN", "NEG", "ABS", "WHERE", "TRUNC", "FLOOR"):
      out = self.round_bf16(out)  # bf16 arithmetic: every result rounded to bf16, like a bf16 ALU
    return out

  def lane_mask(self, valid: Valid, width: int) -> str:
    """<width x i1>: the mask per SIMD lane. Conditions linear in the lane variable compare a vector of
    base + c*lane; others are evaluated lane by lane."""
    lane = self.lane_var(width)
    var = Var(lane, 0, self.spec.full_shape[self.lk.vec_axis] - 1)
    acc = None
    steps = "<" + ", ".join(f"i64 {i}" for i in range(width)) + ">"
    for e, lo, hi in valid.conds:
      c = linear_coefficient(e, lane)
      if c is None:
        vec = "poison"
        for i in range(width):
          ok = self.valid(Valid(((substitute(e, {lane: var + i}), lo, hi),))) or "true"
          vec = self.emit(f"insertelement <{width} x i1> {vec}, i1 {ok}, i64 {i}")
        cond = vec
      else:
        base = self.splat(Value(self.expr(e), dtypes.int64, 1), width).name
        offs = self.emit(f"mul <{width} x i64> {steps}, splat (i64 {c})")
        ev = self.emit(f"add <{width} x i64> {base}, {offs}")
        ge = self.emit(f"icmp sge <{width} x i64> {ev}, splat (i64 {lo})")
        lt = self.emit(f"icmp slt <{width} x i64> {ev}, splat (i64 {hi})")
        cond = self.emit(f"and <{width} x i1> {ge}, {lt}")
      acc = cond if acc is None else self.emit(f"and <{width} x i1> {acc}, {cond}")
    return acc if acc is not None else f"splat (i1 true)"

  def masked(self, v: Value, valid: Valid, width: int) -> Value:
    """v where the mask holds, else 0; per lane when the mask depends on the vector axis."""
    lane = self.lane_var(width)
    if lane is not None and lane in valid.variables():
      mask = self.lane_mask(valid, width)
      v = self.splat(v, width)
      zero = self.const(0, v.dtype, width)
      return Value(self.emit(f"select <{width} x i1> {mask}, {self.ty(v.dtype, width)} {v.name}, {self.ty(v.dtype, width)} {zero}"), v.dtype, width)
    ok = self.valid(valid)
    if ok is None: return v
    zero = self.const(0, v.dtype, v.width)
    t = self.ty(v.dtype, v.width)
    return Value(self.emit(f"select i1 {ok}, {t} {v.name}, {t} {zero}"), v.dtype, v.width)

  def load(self, buf: int, dtype: DType, idx: Expr, valid: Valid, width: int) -> Value:
    lane = self.lane_var(width)
    if lane is not None and (lane in variables(idx) or lane in valid.variables()):
      if linear_coefficient(idx, lane) == 1 and lane not in valid.variables():
        return self.masked(self.read(buf, dtype, idx, valid, width), valid, 1)
      if linear_coefficient(idx, lane) == 1:
        # contiguous but masked per lane (a pad or cat along the vector axis): a masked vector load that
        # touches no memory in masked-off lanes
        mask = self.lane_mask(valid, width)
        ptr = self.emit(f"getelementptr {dtype.llvm_mem}, ptr %b{buf}, i64 {self.expr(idx)}")
        mem_t = self.ty(dtype, width, mem=True)
        mem_dtype = {dtypes.bool: dtypes.int8, dtypes.bfloat16: dtypes.int16}.get(dtype, dtype)
        v = self.call(f"llvm.masked.load.{suffix(mem_dtype, width)}.p0", mem_t,
                      [("ptr", ptr), ("i32", str(dtype.itemsize)), (f"<{width} x i1>", mask), (mem_t, "zeroinitializer")])
        return Value(self.from_memory(v, dtype, width), dtype, width)
      # gather: one scalar load per lane
      var = Var(lane, 0, self.spec.full_shape[self.lk.vec_axis] - 1)
      vec = "poison"
      for i in range(width):
        sub = {lane: var + i}
        x = self.masked(self.read(buf, dtype, substitute(idx, sub), valid.substitute(sub), 1), valid.substitute(sub), 1)
        vec = self.emit(f"insertelement {self.ty(dtype, width)} {vec}, {dtype.llvm} {x.name}, i64 {i}")
      return Value(vec, dtype, width)
    return self.masked(self.read(buf, dtype, idx, valid, 1), valid, 1)

  def gather(self, op: KOp, idx: Value) -> Value:
    """Buffer elements at computed positions: one scalar load per lane. The host checked the indices; the clamp to
    the buffer keeps a wrong one from reading outside it all the same."""
    (buf, size), dtype, w = op.arg, op.dtype, idx.width
    pos = self.cast(idx, dtypes.uint64 if idx.dtype.is_unsigned else dtypes.int64)
    it = self.ty(dtypes.int64, w)
    pos = Value(self.call(f"llvm.umin.{suffix(dtypes.int64, w)}", it, [(it, pos.name), (it, self.const(max(size - 1, 0), dtypes.int64, w))]), dtypes.int64, w)
    if w == 1: return self.read_at(buf, dtype, pos.name, 1)
    vec = "poison"
    for lane in range(w):
      x = self.read_at(buf, dtype, self.emit(f"extractelement {it} {pos.name}, i64 {lane}"), 1)
      vec = self.emit(f"insertelement {self.ty(dtype, w)} {vec}, {dtype.llvm} {x.name}, i64 {lane}")
    return Value(vec, dtype, w)

  def read(self, buf: int, dtype: DType, idx: Expr, valid: Valid, width: int) -> Value:
    i = self.expr(idx)
    ok = self.valid(valid)
    if ok is not None: i = self.emit(f"select i1 {ok}, i64 {i}, i64 0")  # never touch memory outside the mask
    return self.read_at(buf, dtype, i, width)

  def read_at(self, buf: int, dtype: DType, i: str, width: int) -> Value:
    """`width` elements of buffer `buf` from element `i` (an i64 value)."""
    ptr = self.emit(f"getelementptr inbounds {dtype.llvm_mem}, {self.gptr} %b{buf}, i64 {i}")
    mem_t = self.ty(dtype, width, mem=True)
    v = self.emit(f"load {mem_t}, {self.gptr} {ptr}, align {self.align(dtype, width)}")
    return Value(self.from_memory(v, dtype, width), dtype, width)

  def align(self, dtype: DType, width: int) -> int:
    """The alignment a buffer access of `width` elements can promise (an element's: a vector may start anywhere)."""
    return dtype.itemsize

  def from_memory(self, v: str, dtype: DType, width: int) -> str:
    """A loaded memory value as its register type (bool: i8 -> i1; bfloat16: i16 bits -> float)."""
    mem_t = self.ty(dtype, width, mem=True)
    if dtype == dtypes.bool: return self.emit(f"icmp ne {mem_t} {v}, {'zeroinitializer' if width > 1 else '0'}")
    if dtype == dtypes.bfloat16: return self.bf16_from_bits(v, width)
    return v

  def bf16_from_bits(self, bits: str, width: int) -> str:
    it, ft = self.ty(dtypes.int32, width), self.ty(dtypes.float32, width)
    wide = self.emit(f"zext {self.ty(dtypes.int16, width)} {bits} to {it}")
    return self.emit(f"bitcast {it} {self.emit(f'shl {it} {wide}, {self.i(16, width)}')} to {ft}")

  def bf16_bits(self, v: Value) -> str:
    """The i16 bits of a bf16 value held in a float register (already bf16-exact: the high half)."""
    w = v.width
    it = self.ty(dtypes.int32, w)
    bits = self.emit(f"bitcast {self.ty(dtypes.float32, w)} {v.name} to {it}")
    return self.emit(f"trunc {it} {self.emit(f'lshr {it} {bits}, {self.i(16, w)}')} to {self.ty(dtypes.int16, w)}")

  def round_bf16(self, v: Value) -> Value:
    """Round a float register to the nearest bfloat16 (ties to even), NaN kept quiet; stays a float."""
    w = v.width
    it, ft, bt = self.ty(dtypes.int32, w), self.ty(dtypes.float32, w), self.ty(dtypes.bool, w)
    bits = self.emit(f"bitcast {ft} {v.name} to {it}")
    odd = self.emit(f"and {it} {self.emit(f'lshr {it} {bits}, {self.i(16, w)}')}, {self.i(1, w)}")
    up = self.emit(f"add {it} {self.emit(f'add {it} {bits}, {self.i(0x7FFF, w)}')}, {odd}")
    rounded = self.emit(f"and {it} {up}, {self.i(-65536, w)}")
    quiet = self.emit(f"or {it} {self.emit(f'and {it} {bits}, {self.i(-65536, w)}')}, {self.i(0x400000, w)}")
    nan = self.emit(f"fcmp uno {ft} {v.name}, {v.name}")
    out = self.emit(f"select {bt} {nan}, {it} {quiet}, {it} {rounded}")
    return Value(self.emit(f"bitcast {it} {out} to {ft}"), v.dtype, w)

  # casts and ALU
  def cast(self, v: Value, to: DType) -> Value:
    src, w = v.dtype, v.width
    if src == to: return v
    st, tt = self.ty(src, w), self.ty(to, w)
    if to == dtypes.bool:
      if src.is_float: return Value(self.emit(f"fcmp une {st} {v.name}, {self.const(0.0, src, w)}"), to, w)
      return Value(self.emit(f"icmp ne {st} {v.name}, {self.const(0, src, w)}"), to, w)
    if src == dtypes.bool:
      return Value(self.emit(f"{'uitofp' if to.is_float else 'zext'} {st} {v.name} to {tt}"), to, w)
    if to == dtypes.bfloat16:  # through a float register, then rounded to bf16
      return self.round_bf16(Value(self.cast(v, dtypes.float32).name, to, w))
    if src == dtypes.bfloat16: return self.cast(Value(v.name, dtypes.float32, w), to)
    if src.is_float and to.is_float:
      if (src, to) == (dtypes.float64, dtypes.float16): return self.f64_to_f16(v)
      return Value(self.emit(f"{'fpext' if to.itemsize > src.itemsize else 'fptrunc'} {st} {v.name} to {tt}"), to, w)
    if src.is_float: return self.float_to_int(v, to)
    if to.is_float:
      return Value(self.emit(f"{'uitofp' if src.is_unsigned else 'sitofp'} {st} {v.name} to {tt}"), to, w)
    if to.bits == src.bits: return Value(v.name, to, w)
    if to.bits < src.bits: return Value(self.emit(f"trunc {st} {v.name} to {tt}"), to, w)
    return Value(self.emit(f"{'zext' if src.is_unsigned else 'sext'} {st} {v.name} to {tt}"), to, w)

  def float_to_int(self, v: Value, to: DType) -> Value:
    """float -> int as numpy computes it on x86-64, defined for every input (LLVM's fptosi is poison out of range):
    the CPU's truncating conversion to int32 or int64, which gives INT_MIN (x86's "integer indefinite") for NaN, inf
    and out of range; 8/16-bit ints truncate that int32; unsigned 32/64-bit ints convert x - 2^(bits-1) for
    x >= 2^(bits-1) and flip the top bit back (numpy's contiguous loop; its float16 -> uint32 truncates an int64)."""
    w = v.width
    bits = 64 if to.bits == 64 or (to == dtypes.uint32 and v.dtype == dtypes.float16) else 32
    if v.dtype == dtypes.float16: v = self.cast(v, dtypes.float32)   # exact; half cannot hold the 2^31 bounds
    it = self.ty(dtypes.int64 if bits == 64 else dtypes.int32, w)
    ft, bt, half = self.ty(v.dtype, w), self.ty(dtypes.bool, w), 2.0 ** (bits - 1)
    def truncate(x: str) -> str:   # x86 cvttss2si / cvttsd2si
      inside = self.emit(f"and {bt} {self.emit(f'fcmp oge {ft} {x}, {self.const(-half, v.dtype, w)}')}, "
                         f"{self.emit(f'fcmp olt {ft} {x}, {self.const(half, v.dtype, w)}')}")
      r = self.emit(f"fptosi {ft} {self.emit(f'select {bt} {inside}, {ft} {x}, {ft} {self.const(0.0, v.dtype, w)}')} to {it}")
      return self.emit(f"select {bt} {inside}, {it} {r}, {it} {self.const(-(1 << (bits - 1)), dtypes.int64 if bits == 64 else dtypes.int32, w)}")
    r = truncate(v.name)
    if to.is_unsigned and to.bits == bits:
      top = truncate(self.emit(f"fsub {ft} {v.name}, {self.const(half, v.dtype, w)}"))
      top = self.emit(f"xor {it} {top}, {self.const(-(1 << (bits - 1)), dtypes.int64 if bits == 64 else dtypes.int32, w)}")
      r = self.emit(f"select {bt} {self.emit(f'fcmp oge {ft} {v.name}, {self.const(half, v.dtype, w)}')}, {it} {top}, {it} {r}")
    if to.bits < bits: r = self.emit(f"trunc {it} {r} to {self.ty(to, w)}")
    return Value(r, to, w)

  def f64_to_f16(self, v: Value) -> Value:
    """double -> half without the __truncdfhf2 helper: round to float with round-to-odd (no double rounding),
    then the native float -> half conversion."""
    w = v.width
    ft, dt, it, bt = self.ty(dtypes.float32, w), self.ty(dtypes.float64, w), self.ty(dtypes.int32, w), self.ty(dtypes.bool, w)
    near = self.emit(f"fptrunc {dt} {v.name} to {ft}")
    back = self.emit(f"fpext {ft} {near} to {dt}")
    inexact = self.emit(f"fcmp one {dt} {back}, {v.name}")
    # toward zero: step back one ulp when rounding went away from zero
    away = self.emit(f"fcmp ogt {dt} {self.intrinsic('fabs', dtypes.float64, w, [back])}, {self.intrinsic('fabs', dtypes.float64, w, [v.name])}")
    bits = self.emit(f"bitcast {ft} {near} to {it}")
    down = self.emit(f"sub {it} {bits}, {self.emit(f'zext {bt} {away} to {it}')}")
    odd = self.emit(f"or {it} {down}, {self.emit(f'zext {bt} {inexact} to {it}')}")
    return Value(self.emit(f"fptrunc {ft} {self.emit(f'bitcast {it} {odd} to {ft}')} to {self.ty(dtypes.float16, w)}"), dtypes.float16, w)

  def intrinsic(self, name: str, d: DType, w: int, args: list[str]) -> str:
    t = self.ty(d, w)
    return self.call(f"llvm.{name}.{suffix(d, w)}", t, [(t, a) for a in args])

  def alu(self, op: str, srcs: list[Value], out: DType, reassoc: bool = False) -> Value:
    d = srcs[0].dtype
    w = max(s.width for s in srcs)
    t = self.ty(d, w)
    a = srcs[0].name
    b = srcs[1].name if len(srcs) > 1 else None
    fl = "reassoc contract " if reassoc else "contract "
    if op == "WHERE":
      vt = self.ty(srcs[1].dtype, w)
      return Value(self.emit(f"select {self.ty(dtypes.bool, w)} {a}, {vt} {srcs[1].name}, {vt} {srcs[2].name}"), out, w)
    if op in ("EXP", "LOG", "EXP2", "LOG2", "SIN", "COS", "SQRT", "POW") and d == dtypes.float16:
      wide = self.alu(op, [self.cast(s, dtypes.float32) for s in srcs], dtypes.float32)
      return self.cast(wide, d)
    if d.is_float:
      simple = {"ADD": "fadd", "SUB": "fsub", "MUL": "fmul", "DIV": "fdiv"}
      if op in simple: return Value(self.emit(f"{simple[op]} {fl if op != 'DIV' else ''}{t} {a}, {b}"), out, w)
      if op == "NEG": return Value(self.emit(f"fneg {t} {a}"), out, w)
      if op == "RECIP": return Value(self.emit(f"fdiv {t} {self.const(1.0, d, w)}, {a}"), out, w)
      cmp = {"CMPLT": "olt", "CMPLE": "ole", "CMPEQ": "oeq", "CMPNE": "une"}
      if op in cmp: return Value(self.emit(f"fcmp {cmp[op]} {t} {a}, {b}"), out, w)
      intr = {"MAX": "maximum", "MIN": "minimum", "POW": "pow", "SQRT": "sqrt", "SIN": "sin", "COS": "cos",
              "ABS": "fabs", "TRUNC": "trunc", "FLOOR": "floor"}
      if d in (dtypes.float32, dtypes.bfloat16) and op in ("EXP", "EXP2", "LOG", "LOG2"):
        return Value(getattr(self, f"poly_{op.lower()}")(a, w), out, w)
      if d in (dtypes.float32, dtypes.bfloat16) and op in ("SIN", "COS"):
        return Value(self.poly_sincos(a, w, op), out, w)
      intr.update({"EXP": "exp", "EXP2": "exp2", "LOG": "log", "LOG2": "log2"})
      if op in intr: return Value(self.intrinsic(intr[op], d, w, [x.name for x in srcs]), out, w)
      if op in ("IDIV", "MOD"): return self.float_divmod(op, srcs[0], srcs[1])
      raise NotImplementedError(f"{op} on {d.name}")
    # integers and bool
    signed = d.kind == "i"
    simple = {"ADD": "add", "SUB": "sub", "MUL": "mul", "AND": "and", "OR": "or", "XOR": "xor"}
    if d == dtypes.bool: simple.update({"ADD": "or", "MUL": "and", "MAX": "or", "MIN": "and"})
    if op in simple: return Value(self.emit(f"{simple[op]} {t} {a}, {b}"), out, w)
    if op == "NEG": return Value(self.emit(f"sub {t} {self.const(0, d, w)}, {a}"), out, w)
    if op == "NOT": return Value(self.emit(f"xor {t} {a}, {self.const(-1 if d != dtypes.bool else True, d, w)}"), out, w)
    cmp = {"CMPLT": "slt" if signed else "ult", "CMPLE": "sle" if signed else "ule", "CMPEQ": "eq", "CMPNE": "ne"}
    if op in cmp: return Value(self.emit(f"icmp {cmp[op]} {t} {a}, {b}"), out, w)
    if op in ("MAX", "MIN"):
      return Value(self.intrinsic(("s" if signed else "u") + op.lower(), d, w, [a, b]), out, w)
    if op == "ABS":
      if not signed: return srcs[0]
      return Value(self.call(f"llvm.abs.{suffix(d, w)}", t, [(t, a), ("i1", "false")]), out, w)
    if op in ("IDIV", "MOD"): return self.int_divmod(op, srcs[0], srcs[1], out)
    raise NotImplementedError(f"{op} on {d.name}")

  def fmod(self, a: str, b: str, d: DType, w: int) -> str:
    """C's fmod(a, b) (exact: the remainder is representable); LLVM's frem, which the CPU lowers to libm's fmodf/fmod."""
    return self.emit(f"frem {self.ty(d, w)} {a}, {b}")

  def float_divmod(self, op: str, av: Value, bv: Value) -> Value:
    """numpy's float floor_divide and remainder, step for step as its npy_divmod computes them (so inf // 2 is NaN,
    1 // -inf is -1, 0 % -1 is -0.0): mod = fmod(a, b), div = (a - mod) / b, both moved one step toward the divisor's
    sign when mod's sign differs, zeros signed, the quotient snapped to the nearest integer; b == 0 gives a / b and
    fmod(a, 0). float16 computes in float32 and rounds, as numpy's half loops do."""
    if av.dtype == dtypes.float16:
      return self.cast(self.float_divmod(op, self.cast(av, dtypes.float32), self.cast(bv, dtypes.float32)), dtypes.float16)
    d, w = av.dtype, max(av.width, bv.width)
    t, bt, a, b = self.ty(d, w), self.ty(dtypes.bool, w), av.name, bv.name
    zero, one = self.const(0.0, d, w), self.const(1.0, d, w)
    sel = lambda c, x, y: self.emit(f"select {bt} {c}, {t} {x}, {t} {y}")
    mod = self.fmod(a, b, d, w)
    quot = self.emit(f"fdiv {t} {a}, {b}")
    div = self.emit(f"fdiv {t} {self.emit(f'fsub {t} {a}, {mod}')}, {b}")
    mod_nz = self.emit(f"fcmp une {t} {mod}, {zero}")   # C truthiness: NaN is nonzero
    signs = self.emit(f"xor {bt} {self.emit(f'fcmp olt {t} {b}, {zero}')}, {self.emit(f'fcmp olt {t} {mod}, {zero}')}")
    step = self.emit(f"and {bt} {mod_nz}, {signs}")
    if op == "MOD":
      r = sel(mod_nz, sel(step, self.emit(f"fadd {t} {mod}, {b}"), mod), self.intrinsic("copysign", d, w, [zero, b]))
    else:
      div = sel(step, self.emit(f"fsub {t} {div}, {one}"), div)
      fl = self.intrinsic("floor", d, w, [div])
      up = self.emit(f"fcmp ogt {t} {self.emit(f'fsub {t} {div}, {fl}')}, {self.const(0.5, d, w)}")
      snapped = sel(up, self.emit(f"fadd {t} {fl}, {one}"), fl)
      r = sel(self.emit(f"fcmp une {t} {div}, {zero}"), snapped, self.intrinsic("copysign", d, w, [zero, quot]))
    return Value(sel(self.emit(f"fcmp oeq {t} {b}, {zero}"), quot if op == "IDIV" else mod, r), d, w)

  def int_divmod(self, op: str, av: Value, bv: Value, out: DType) -> Value:
    """numpy's floor division and modulo; x // 0 and x % 0 give 0 (numpy warns), MIN // -1 wraps."""
    d, w = av.dtype, max(av.width, bv.width)
    t, bt = self.ty(d, w), self.ty(dtypes.bool, w)
    a, b = av.name, bv.name
    zero, one = self.const(0, d, w), self.const(1, d, w)
    bzero = self.emit(f"icmp eq {t} {b}, {zero}")
    if d.is_unsigned:
      safe = self.emit(f"select {bt} {bzero}, {t} {one}, {t} {b}")
      r = self.emit(f"{'udiv' if op == 'IDIV' else 'urem'} {t} {a}, {safe}")
      return Value(self.emit(f"select {bt} {bzero}, {t} {zero}, {t} {r}"), out, w)
    bm1 = self.emit(f"icmp eq {t} {b}, {self.const(-1, d, w)}")
    bad = self.emit(f"or {bt} {bzero}, {bm1}")
    safe = self.emit(f"select {bt} {bad}, {t} {one}, {t} {b}")
    q = self.emit(f"sdiv {t} {a}, {safe}")
    r = self.emit(f"srem {t} {a}, {safe}")
    rnz = self.emit(f"icmp ne {t} {r}, {zero}")
    signs = self.emit(f"xor {bt} {self.emit(f'icmp slt {t} {r}, {zero}')}, {self.emit(f'icmp slt {t} {b}, {zero}')}")
    fix = self.emit(f"and {bt} {rnz}, {signs}")
    if op == "IDIV":
      qf = self.emit(f"sub {t} {q}, {self.emit(f'zext {bt} {fix} to {t}')}")
      qf = self.emit(f"select {bt} {bm1}, {t} {self.emit(f'sub {t} {zero}, {a}')}, {t} {qf}")
      return Value(self.emit(f"select {bt} {bzero}, {t} {zero}, {t} {qf}"), out, w)
    rf = self.emit(f"select {bt} {fix}, {t} {self.emit(f'add {t} {r}, {b}')}, {t} {r}")
    return Value(self.emit(f"select {bt} {bad}, {t} {zero}, {t} {rf}"), out, w)

  # float32 math as polynomials (vectorizable, ~1-2 ulp)
  def f(self, value: float, w: int) -> str: return self.const(value, dtypes.float32, w)
  def i(self, value: int, w: int) -> str: return self.const(value, dtypes.int32, w)

  def fma(self, a: str, b: str, c: str, w: int) -> str:
    return self.intrinsic("fma", dtypes.float32, w, [a, b, c])

  def exp_core(self, r: str, n: str, w: int) -> str:
    """e**r * 2**n for |r| <= ln2/2, n integral (as float): Taylor to degree 7, scaled in two steps."""
    ft, it = self.ty(dtypes.float32, w), self.ty(dtypes.int32, w)
    p = self.f(1 / 5040, w)
    for c in (1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1.0, 1.0): p = self.fma(p, r, self.f(c, w), w)
    ni = self.emit(f"fptosi {ft} {n} to {it}")
    half = self.emit(f"ashr {it} {ni}, {self.i(1, w)}")
    rest = self.emit(f"sub {it} {ni}, {half}")
    def pow2(k: str) -> str:
      bits = self.emit(f"shl {it} {self.emit(f'add {it} {k}, {self.i(127, w)}')}, {self.i(23, w)}")
      return self.emit(f"bitcast {it} {bits} to {ft}")
    return self.emit(f"fmul {ft} {self.emit(f'fmul {ft} {p}, {pow2(half)}')}, {pow2(rest)}")

  def keep_nan(self, x: str, result: str, w: int) -> str:
    ft = self.ty(dtypes.float32, w)
    nan = self.emit(f"fcmp uno {ft} {x}, {x}")
    return self.emit(f"select {self.ty(dtypes.bool, w)} {nan}, {ft} {x}, {ft} {result}")

  def clamp(self, x: str, lo: float, hi: float, w: int) -> str:
    x = self.intrinsic("minnum", dtypes.float32, w, [x, self.f(hi, w)])
    return self.intrinsic("maxnum", dtypes.float32, w, [x, self.f(lo, w)])

  def poly_exp(self, x: str, w: int) -> str:
    ft = self.ty(dtypes.float32, w)
    xc = self.clamp(x, -104.0, 89.0, w)
    n = self.intrinsic("rint", dtypes.float32, w, [self.emit(f"fmul {ft} {xc}, {self.f(1.4426950408889634, w)}")])
    r = self.fma(n, self.f(-0.693359375, w), xc, w)
    r = self.fma(n, self.f(2.12194440e-4, w), r, w)
    return self.keep_nan(x, self.exp_core(r, n, w), w)

  def poly_exp2(self, x: str, w: int) -> str:
    ft = self.ty(dtypes.float32, w)
    xc = self.clamp(x, -151.0, 129.0, w)
    n = self.intrinsic("rint", dtypes.float32, w, [xc])
    r = self.emit(f"fmul {ft} {self.emit(f'fsub {ft} {xc}, {n}')}, {self.f(0.6931471805599453, w)}")
    return self.keep_nan(x, self.exp_core(r, n, w), w)

  def log_parts(self, x: str, w: int) -> tuple[str, str]:
    """x = 2**e * m with m in [sqrt(1/2), sqrt(2)): returns (e as float, log(m))."""
    ft, it, bt = self.ty(dtypes.float32, w), self.ty(dtypes.int32, w), self.ty(dtypes.bool, w)
    tiny = self.emit(f"fcmp olt {ft} {x}, {self.f(1.1754943508222875e-38, w)}")
    xs = self.emit(f"select {bt} {tiny}, {ft} {self.emit(f'fmul {ft} {x}, {self.f(8388608.0, w)}')}, {ft} {x}")
    bits = self.emit(f"bitcast {ft} {xs} to {it}")
    shifted = self.emit(f"lshr {it} {bits}, {self.i(23, w)}")
    biased = self.emit(f"and {it} {shifted}, {self.i(255, w)}")
    e = self.emit(f"sub {it} {biased}, {self.i(127, w)}")
    adjust = self.emit(f"select {bt} {tiny}, {it} {self.i(23, w)}, {it} {self.i(0, w)}")
    e = self.emit(f"sub {it} {e}, {adjust}")
    mant = self.emit(f"and {it} {bits}, {self.i(0x7FFFFF, w)}")
    m = self.emit(f"bitcast {it} {self.emit(f'or {it} {mant}, {self.i(0x3F800000, w)}')} to {ft}")
    big = self.emit(f"fcmp ogt {ft} {m}, {self.f(1.4142135623730951, w)}")
    m = self.emit(f"select {bt} {big}, {ft} {self.emit(f'fmul {ft} {m}, {self.f(0.5, w)}')}, {ft} {m}")
    e = self.emit(f"add {it} {e}, {self.emit(f'zext {bt} {big} to {it}')}")
    s = self.emit(f"fdiv {ft} {self.emit(f'fsub {ft} {m}, {self.f(1.0, w)}')}, {self.emit(f'fadd {ft} {m}, {self.f(1.0, w)}')}")
    s2 = self.emit(f"fmul {ft} {s}, {s}")
    p = self.f(1 / 13, w)
    for c in (1 / 11, 1 / 9, 1 / 7, 1 / 5, 1 / 3, 1.0): p = self.fma(p, s2, self.f(c, w), w)
    logm = self.emit(f"fmul {ft} {self.emit(f'fmul {ft} {p}, {s}')}, {self.f(2.0, w)}")
    return self.emit(f"sitofp {it} {e} to {ft}"), logm

  def log_specials(self, x: str, result: str, w: int) -> str:
    ft, bt = self.ty(dtypes.float32, w), self.ty(dtypes.bool, w)
    out = self.emit(f"select {bt} {self.emit(f'fcmp oeq {ft} {x}, {self.f(math.inf, w)}')}, {ft} {x}, {ft} {result}")
    out = self.emit(f"select {bt} {self.emit(f'fcmp oeq {ft} {x}, {self.f(0.0, w)}')}, {ft} {self.f(-math.inf, w)}, {ft} {out}")
    out = self.emit(f"select {bt} {self.emit(f'fcmp ult {ft} {x}, {self.f(0.0, w)}')}, {ft} {self.f(math.nan, w)}, {ft} {out}")
    return out

  def poly_log(self, x: str, w: int) -> str:
    e, logm = self.log_parts(x, w)
    ft = self.ty(dtypes.float32, w)
    r = self.fma(e, self.f(-2.12194440e-4, w), logm, w)
    r = self.fma(e, self.f(0.693359375, w), r, w)
    return self.log_specials(x, r, w)

  def poly_log2(self, x: str, w: int) -> str:
    e, logm = self.log_parts(x, w)
    r = self.fma(logm, self.f(1.4426950408889634, w), e, w)
    return self.log_specials(x, r, w)

  def poly_sincos(self, x: str, w: int, op: str) -> str:
    """float32 sin/cos: Cody-Waite reduction by pi/4 and the Cephes sinf/cosf polynomials (~1 ulp for |x| < 8192).
    A vector with a larger, infinite or NaN input takes sincos_far (a branch, rarely taken)."""
    ft, it, bt = self.ty(dtypes.float32, w), self.ty(dtypes.int32, w), self.ty(dtypes.bool, w)
    ax = self.intrinsic("fabs", dtypes.float32, w, [x])
    j = self.emit(f"fptosi {ft} {self.emit(f'fmul {ft} {ax}, {self.f(4 / math.pi, w)}')} to {it}")
    j = self.emit(f"and {it} {self.emit(f'add {it} {j}, {self.i(1, w)}')}, {self.i(-2, w)}")  # round up to even
    y = self.emit(f"sitofp {it} {j} to {ft}")
    r = ax
    for c in (0.78515625, 2.4187564849853515625e-4, 3.77489497744594108e-8):
      r = self.fma(y, self.f(-c, w), r, w)
    result = self.sincos_reduced(x, r, j, w, op)
    # out of the polynomial's range (or inf/nan): the whole vector the slow way (a branch, rarely taken)
    slot = f"%sincos{self.count}"
    self.count += 1
    self.allocas.append(f"  {slot} = alloca {ft}{self.alloca_space}")
    self.lines.append(f"  store {ft} {result}, {self.pptr} {slot}")
    big = self.emit(f"fcmp ugt {ft} {ax}, {self.f(8192.0, w)}")
    anybig = self.call(f"llvm.vector.reduce.or.v{w}i1", "i1", [(bt, big)]) if w > 1 else big
    tag = self.count
    self.lines.append(f"  br i1 {anybig}, label %sincos_slow{tag}, label %sincos_done{tag}")
    self.label(f"sincos_slow{tag}")
    self.regions.append({})  # values made in the branch stay in it
    self.lines.append(f"  store {ft} {self.sincos_far(x, w, op)}, {self.pptr} {slot}")
    self.regions.pop()
    self.lines.append(f"  br label %sincos_done{tag}")
    self.label(f"sincos_done{tag}")
    return self.emit(f"load {ft}, {self.pptr} {slot}")

  def sincos_far(self, x: str, w: int, op: str) -> str:
    """float32 sin/cos of any input, |x| > 8192, inf and NaN included: libm's."""
    return self.intrinsic(op.lower(), dtypes.float32, w, [x])

  def sincos_reduced(self, x: str, r: str, j: str, w: int, op: str) -> str:
    """sin or cos of x from |x| = j * pi/4 + r (j even, |r| <= pi/4): the Cephes polynomials and the octant's signs."""
    ft, it, bt = self.ty(dtypes.float32, w), self.ty(dtypes.int32, w), self.ty(dtypes.bool, w)
    z = self.emit(f"fmul {ft} {r}, {r}")
    sp = self.fma(self.fma(self.f(-1.9515295891e-4, w), z, self.f(8.3321608736e-3, w), w), z, self.f(-1.6666654611e-1, w), w)
    sin_r = self.fma(self.emit(f"fmul {ft} {sp}, {z}"), r, r, w)
    cp = self.fma(self.fma(self.f(2.443315711809948e-5, w), z, self.f(-1.388731625493765e-3, w), w), z, self.f(4.166664568298827e-2, w), w)
    cos_r = self.fma(self.emit(f"fmul {ft} {cp}, {z}"), z, self.fma(z, self.f(-0.5, w), self.f(1.0, w), w), w)
    octant = self.emit(f"and {it} {j}, {self.i(7, w)}")
    flip = self.emit(f"icmp ugt {it} {octant}, {self.i(3, w)}")  # octants 4..7: the negative half-turn
    octant = self.emit(f"and {it} {octant}, {self.i(3, w)}")
    mid = self.emit(f"or {bt} {self.emit(f'icmp eq {it} {octant}, {self.i(1, w)}')}, {self.emit(f'icmp eq {it} {octant}, {self.i(2, w)}')}")
    if op == "SIN":
      val = self.emit(f"select {bt} {mid}, {ft} {cos_r}, {ft} {sin_r}")
      signbit = self.emit(f"icmp slt {it} {self.emit(f'bitcast {ft} {x} to {it}')}, {self.i(0, w)}")   # sin(-0.0) is -0.0
      neg = self.emit(f"xor {bt} {flip}, {signbit}")
    else:
      val = self.emit(f"select {bt} {mid}, {ft} {sin_r}, {ft} {cos_r}")
      neg = self.emit(f"xor {bt} {flip}, {self.emit(f'icmp ugt {it} {octant}, {self.i(1, w)}')}")
    return self.emit(f"select {bt} {neg}, {ft} {self.emit(f'fneg {ft} {val}')}, {ft} {val}")
