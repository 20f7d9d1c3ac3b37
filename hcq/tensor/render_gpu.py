"""The GPU targets' shared renderer: a LoopKernel as LLVM IR for a GPU backend of llvmlite (amdgcn in render_amd.py,
nvptx64 in render_nv.py), which differ only in the hooks of _GPUKernelWriter and in how they compile.

Two layouts. Elementwise kernels, and reductions with many outputs or short reduce loops: one workitem per output
element, the output axes flattened into the global workitem id (workgroup id * LOCAL + workitem id, the innermost
axis fastest so that neighbouring lanes touch neighbouring memory), reductions as loops inside the workitem. Long
reductions into few outputs (a sum of a whole tensor) and long rows (softmax): one workgroup per output element; its
lanes take every GROUP-th element of the reduce loop, then combine their parts by register shuffles in runs of 32 lanes
(shfl.sync.bfly on NV, ds_bpermute on AMD) and the runs' parts through shared memory (LDS; addrspace 3 on both
targets) after one barrier, and the stores that follow (a softmax row) are shared between the lanes the same way.
Matmuls take kernels_gpu.py's tiled kernel; elementwise kernels whose loads allow it move 4 elements per workitem.
The body is the CPU renderer's (_KernelWriter): only the pointer address spaces (buffers in global memory,
addrspace 1), the function around the body and the ops the GPU has no library for differ.

float32 exp/log/sin/cos are the CPU's inline polynomials (no device libraries); sin/cos past 8192 reduce through a
table of 2^e mod 2pi in float64; pow is exp2(y * log2|x|) with numpy's sign and special cases. float64 transcendentals
would be calls to libm, which a GPU does not have: they raise NotImplementedError naming the op, before LLVM sees them."""
from __future__ import annotations
import dataclasses
import math
from hcq.drivers.codegen import LOCK, codegen
from hcq.tensor.dtype import DType, dtypes
from hcq.tensor.kernels_gpu import VECTOR_LANES, MatmulMatch, match_matmul, vector_axis, write_matmul
from hcq.tensor.loops import LoopKernel
from hcq.tensor.render_llvm import Renderer, Value, _KernelWriter, const_literal

LOCAL = 128                 # workitems per workgroup (four AMD wave32s or two wave64s, four NV warps): a multiple of every wave size
GROUP_MIN_REDUCE = 32       # a reduce loop at least this long ...
GROUP_MAX_OUTPUTS = 4096    # ... into fewer outputs than this (too few workitems to fill a GPU) shares it between lanes
LANE_ELEMENTS = 8           # a tree's lanes take at least this many elements each (up to LOCAL lanes): fewer levels
GROUP_LONG_REDUCE = 256     # a reduce loop this long shares it between lanes for any number of outputs (softmax rows)
# float64 ops that LLVM's AMDGPU and NVPTX backends turn into libm calls (there is no libm on the GPU)
F64_LIBCALLS = ("EXP", "LOG", "EXP2", "LOG2", "SIN", "COS", "POW")


def _pi_scaled(bits: int) -> int:
  """pi * 2^bits, within a unit (Machin's formula in integers)."""
  one = 1 << (bits + 16)
  def atan_inv(n: int) -> int:   # atan(1/n) * one
    term, total, k, sign = one // n, one // n, 1, -1
    while term:
      term //= n * n
      k += 2
      total += sign * (term // k)
      sign = -sign
    return total
  return (16 * atan_inv(5) - 4 * atan_inv(239)) >> 16


def _split(value: int, scale: int, widths: tuple[int, ...]) -> list[float]:
  """value / 2^scale as doubles of at most `widths` significant bits each (the last takes the rest, truncated)."""
  out = []
  for bits in widths:
    shift = max(value.bit_length() - bits, 0)
    out.append(math.ldexp(value >> shift, shift - scale))
    value -= (value >> shift) << shift
  return out


# float32 sin/cos beyond 8192 (a GPU has no libm): |x| = m * 2^e with a 24-bit m, and 2^e mod 2pi from a table as three
# doubles (28, 28, 53 bits: m times each of the first two is exact), so m * (2^e mod 2pi) = |x| mod 2pi to ~2^-80; then
# Cody-Waite by pi/2 in three parts (27, 27, 53 bits: the quotient is below 2^26, so j * part is exact)
_PI_BITS = 400
_PI = _pi_scaled(_PI_BITS)
SINCOS_EXPONENTS = range(-10, 105)    # x = m * 2^e for 8192 <= |x| < 2^128
SINCOS_TABLE = [_split(1 << (e + _PI_BITS) if e <= 2 else (1 << (e + _PI_BITS)) % (2 * _PI), _PI_BITS, (28, 28, 53))
                for e in SINCOS_EXPONENTS]
HALF_PI_PARTS = _split(_PI, _PI_BITS + 1, (27, 27, 53))


def scalar_plan(lk: LoopKernel) -> LoopKernel:
  """The CPU plan without SIMD lanes, unrolls, a thread axis or an accumulated axis (a reduce axis again): output axes
  in memory order, one per workitem."""
  reduce_axes = sorted(lk.reduce_axes + ([lk.accumulate_axis] if lk.accumulate_axis is not None else []))
  return dataclasses.replace(lk, global_axes=sorted(lk.global_axes), reduce_axes=reduce_axes, vec_axis=None, vec_width=1,
                             unroll={}, thread_axis=None, accumulate_axis=None)


def gpu_plan(lk: LoopKernel) -> LoopKernel:
  """scalar_plan, then VECTOR_LANES elements per workitem along the axis kernels_gpu.vector_axis finds (16-byte loads)."""
  lk = scalar_plan(lk)
  axis = vector_axis(lk)
  return lk if axis is None else dataclasses.replace(lk, vec_axis=axis, vec_width=VECTOR_LANES)


def workitems(lk: LoopKernel) -> int:
  """How many workitems of one output element (one vector of them, the last maybe part of one) a launch runs."""
  return math.prod(-(-lk.spec.full_shape[a] // lk.step(a)) for a in lk.global_axes)


def group_size(lk: LoopKernel, wave_size: int = 32) -> int:
  """Lanes that share one output's reduce loop (a power of two from `wave_size` up to LOCAL: whole waves), or 0 for one
  workitem per output."""
  reduce = math.prod(lk.spec.full_shape[a] for a in lk.reduce_axes)
  if not lk.reduce_axes or reduce < GROUP_MIN_REDUCE or match_matmul(lk): return 0
  if workitems(lk) >= GROUP_MAX_OUTPUTS and reduce < GROUP_LONG_REDUCE: return 0
  return min(LOCAL, max(wave_size, 1 << (-(-reduce // LANE_ELEMENTS) - 1).bit_length()))


class _GPUKernelWriter(_KernelWriter):
  """The GPU kernel around _KernelWriter's body (see the module docstring); a target sets the hooks below."""
  gptr = "ptr addrspace(1)"              # buffers in global memory (addrspace 1 on amdgcn and nvptx)
  triple = ""                            # the module's target triple
  target_name = ""                       # "AMD", "NV": in refusals
  kernel_cc = ""                         # the kernel's calling convention
  ids = ("", "")                         # intrinsics: (workgroup id x, workitem id x), i32
  barrier_intrinsic = ""                 # void(): every lane of the workgroup waits here
  fence_scope: str | None = None         # syncscope of the fences around a barrier (None: the barrier itself orders memory)
  omit_barrier: int | None = None   # test-only: leave out the barrier of this index (the race tests plant a missing barrier)

  def attributes(self) -> str:
    """The kernel function's attribute group #0 (the target's workgroup size bound)."""
    return "nounwind"

  def workgroup_size(self) -> int:
    """Workitems per workgroup of this kernel's layout."""
    return self.matmul.tiles.threads if self.matmul else self.group or LOCAL

  def __init__(self, lk: LoopKernel, datalayout: str, wave_size: int = 32):
    super().__init__(gpu_plan(lk))
    self.datalayout, self.wave_size = datalayout, wave_size   # the target's lanes per wave (warp): layouts take whole waves
    self.matmul: MatmulMatch | None = match_matmul(self.lk)   # a tiled matmul (kernels_gpu.py)
    self.group = group_size(self.lk, wave_size)  # 0: one workitem per output
    self.globals: list[str] = []      # LDS arrays of the lane trees; sin/cos's table
    self.sincos_table = False         # whether the globals hold SINCOS_TABLE
    self.barriers = 0

  def unflatten(self, flat: str, axes: list[int], total: int) -> None:
    """Axis variables from a row-major flat index over `axes` (the last fastest; the vector axis counts vectors)."""
    stride = 1
    for a in reversed(axes):
      q = self.emit(f"udiv i64 {flat}, {stride}") if stride > 1 else flat
      step = self.lk.step(a)
      extent = -(-self.spec.full_shape[a] // step)
      v = self.emit(f"urem i64 {q}, {extent}") if stride * extent < total else q
      self.var_names[f"a{a}"] = self.emit(f"mul i64 {v}, {step}") if step > 1 else v
      stride *= extent

  def write(self) -> str:
    lk, spec = self.lk, self.spec
    total = workitems(lk)
    self.lines.append("entry:")
    body_start = len(self.lines)
    wg = self.emit(f"zext i32 {self.call(self.ids[0], 'i32', [])} to i64")
    self.lane = self.emit(f"zext i32 {self.call(self.ids[1], 'i32', [])} to i64")
    if self.matmul:
      write_matmul(self, self.matmul, wg)
    elif self.group:  # one workgroup per output: every lane reaches every barrier, so no early exit
      self.unflatten(wg, lk.global_axes, total)
      self.global_body()
    else:
      gid = self.emit(f"add i64 {self.emit(f'mul i64 {wg}, {LOCAL}')}, {self.lane}")
      inside = self.emit(f"icmp ult i64 {gid}, {total}")  # the last workgroup's spare workitems do nothing
      self.lines += [f"  br i1 {inside}, label %body, label %done", "body:"]
      self.unflatten(gid, lk.global_axes, total)
      self.vector_body_and_tail()
      self.lines += ["  br label %done", "done:"]
    self.lines.append("  ret void")
    params = ", ".join(f"{self.gptr} noalias align 16 %b{i}" for i in range(len(spec.buf_dtypes)))
    head = [f"define {self.kernel_cc} void @{lk.name}({params}) #0 {{"] + self.lines[:body_start] + self.allocas
    return (f'target triple = "{self.triple}"\ntarget datalayout = "{self.datalayout}"\n\n' + "\n".join(self.globals) +
            "\n" + "\n".join(sorted(self.decls)) + "\n\n" + "\n".join(head + self.lines[body_start:] + ["}"]) +
            f'\n\nattributes #0 = {{ {self.attributes()} }}\n')

  def planned_loops(self) -> bool: return False   # the GPU module carries no loop metadata (its loops are short)

  def vector_body_and_tail(self) -> None:
    """The body; a vector axis that is not a whole number of vectors (gpu_plan: then the only axis) ends in a tail the
    last workitem does one element at a time."""
    axis, width = self.lk.vec_axis, self.W
    extent = self.spec.full_shape[axis] if axis is not None else 0
    if axis is None or extent % width == 0: return self.global_body()
    first = self.var_names[f"a{axis}"]
    self.branch(self.emit(f"icmp ule i64 {first}, {extent - width}"), self.global_body)
    def tail():
      self.W = 1   # the writer's lane count: the tail's loads, values and stores are scalars
      self.loop(f"a{axis}", first, str(extent), 1, self.global_body)
      self.W = width
    self.branch(self.emit(f"icmp ugt i64 {first}, {extent - width}"), tail)

  # the grouped layout's hooks (see _KernelWriter): lanes share the reduce loops, combine in LDS, one lane stores
  def sum_levels(self) -> int: return 0 if self.group else super().sum_levels()   # grouped lanes share the loop: no blocks

  def reduce_loops(self, body, flush=None, levels: int = 0) -> None:
    if not self.group: return super().reduce_loops(body, flush, levels)
    extent = math.prod(self.spec.full_shape[a] for a in self.lk.reduce_axes)
    def lane_body():
      self.unflatten(self.var_names["r"], self.lk.reduce_axes, extent)
      body()
    self.loop("r", self.lane, str(extent), self.group, lane_body)

  def branch(self, cond: str, body) -> None:
    """`if cond: body()` (values made inside stay inside: a fresh render cache)."""
    self.count += 1
    tag = self.count
    self.lines += [f"  br i1 {cond}, label %then{tag}, label %join{tag}", f"then{tag}:"]
    self.regions.append({})
    body()
    self.regions.pop()
    self.lines += [f"  br label %join{tag}", f"join{tag}:"]

  def once(self, body) -> None:
    if not self.group: return body()
    self.branch(self.emit(f"icmp eq i64 {self.lane}, 0"), body)

  def barrier(self) -> None:
    """Every lane of the workgroup here, with its LDS writes visible to the others."""
    if self.fence_scope: self.lines.append(f'  fence syncscope("{self.fence_scope}") release')
    self.declare("void", self.barrier_intrinsic, "")
    if self.barriers != self.omit_barrier: self.lines.append(f"  call void @{self.barrier_intrinsic}()")
    self.barriers += 1
    if self.fence_scope: self.lines.append(f'  fence syncscope("{self.fence_scope}") acquire')

  shuffle_width = 32                # lanes that exchange registers by shuffle_word (a warp; 32 lanes of an AMD wave)

  def shuffle_word(self, word: str, mask: int) -> str:
    """The i32 `word` of the lane whose workitem id is this one's xor `mask` (every lane of the wave runs it)."""
    raise NotImplementedError

  def shuffle_xor(self, v: Value, mask: int) -> Value:
    """v of the lane whose workitem id is this one's xor `mask`, moved as 32-bit words by shuffle_word."""
    t = v.dtype.llvm
    bits = {"i1": 1, "i8": 8, "i16": 16, "half": 16, "i32": 32, "float": 32, "i64": 64, "double": 64}[t]
    raw = self.emit(f"bitcast {t} {v.name} to i{bits}") if t in ("half", "float", "double") else v.name
    if bits == 64:
      pair = self.emit(f"bitcast i64 {raw} to <2 x i32>")
      for i in range(2):
        word = self.shuffle_word(self.emit(f"extractelement <2 x i32> {pair}, i64 {i}"), mask)
        pair = self.emit(f"insertelement <2 x i32> {pair}, i32 {word}, i64 {i}")
      out = self.emit(f"bitcast <2 x i32> {pair} to i64")
    elif bits == 32:
      out = self.shuffle_word(raw, mask)
    else:
      out = self.emit(f"trunc i32 {self.shuffle_word(self.emit(f'zext i{bits} {raw} to i32'), mask)} to i{bits}")
    return Value(self.emit(f"bitcast i{bits} {out} to {t}") if t in ("half", "float", "double") else out, v.dtype, 1)

  def butterfly(self, op: str, v: Value, lanes: int) -> Value:
    """v combined over each aligned run of `lanes` lanes (a power of two up to shuffle_width); every lane gets it."""
    mask = lanes // 2
    while mask:
      v = self.combine(op, v, self.shuffle_xor(v, mask))
      mask //= 2
    return v

  def combine_lanes(self, op: str, acc: Value) -> Value:
    """The lane tree by register shuffles: each run of shuffle_width lanes combines its values, the runs' first lanes
    put them in shared memory, and after one barrier every run combines those parts (every lane gets the result)."""
    if not self.group: return acc
    width = self.shuffle_width
    v = self.butterfly(op, acc, min(self.group, width))
    if self.group <= width: return v
    d = acc.dtype
    t = "i8" if d == dtypes.bool else d.llvm
    runs = self.group // width
    lds = f"@lds{self.count}"
    self.count += 1
    self.globals.append(f"{lds} = internal addrspace(3) global [{runs} x {t}] poison, align 16")
    def slot(i: str) -> str:
      return self.emit(f"getelementptr inbounds [{runs} x {t}], ptr addrspace(3) {lds}, i64 0, i64 {i}")
    def put():
      val = self.emit(f"zext i1 {v.name} to i8") if d == dtypes.bool else v.name
      self.lines.append(f"  store {t} {val}, ptr addrspace(3) {slot(self.emit(f'udiv i64 {self.lane}, {width}'))}")
    self.branch(self.emit(f"icmp eq i64 {self.emit(f'urem i64 {self.lane}, {width}')}, 0"), put)
    self.barrier()
    part = self.emit(f"load {t}, ptr addrspace(3) {slot(self.emit(f'urem i64 {self.lane}, {runs}'))}")
    part = Value(self.emit(f"icmp ne i8 {part}, 0") if d == dtypes.bool else part, d, 1)
    return self.butterfly(op, part, runs)

  def align(self, dtype: DType, width: int) -> int:
    """A vector's size: gpu_plan vectorizes only loads whose first element is on the vector grid, and the output is
    contiguous with the vector axis innermost, so one 16-byte access (global_load_b128, ld.global.v4) serves."""
    return dtype.itemsize * width

  def alu(self, op: str, srcs: list[Value], out: DType, reassoc: bool = False) -> Value:
    d = srcs[0].dtype
    if d == dtypes.float64 and op in F64_LIBCALLS:
      raise NotImplementedError(f"float64 {op.lower()} is not supported on the {self.target_name} target yet (it needs a libm the GPU does "
                                f"not have); compute in float32 (.cast('float32')) or run on the CPU device")
    if op == "POW" and d in (dtypes.float32, dtypes.bfloat16):
      return Value(self.pow_f32(srcs[0].name, srcs[1].name), out, srcs[0].width)
    return super().alu(op, srcs, out, reassoc)

  def sincos_far(self, x: str, w: int, op: str) -> str:
    """float32 sin/cos of any input (SINCOS_TABLE's reduction in float64, then the Cephes polynomials); NaN for inf."""
    assert w == 1, "the GPU renderers are scalar"
    if not self.sincos_table:
      self.sincos_table = True
      for k in range(3):
        vals = ", ".join(f"double {const_literal(parts[k], dtypes.float64)}" for parts in SINCOS_TABLE)
        self.globals.append(f"@sincos_t{k} = internal addrspace(4) constant [{len(SINCOS_TABLE)} x double] [{vals}], align 8")
    d = lambda v: const_literal(v, dtypes.float64)
    bits = self.emit(f"bitcast float {self.intrinsic('fabs', dtypes.float32, 1, [x])} to i32")
    biased = self.emit(f"lshr i32 {bits}, 23")
    mantissa = self.emit(f"or i32 {self.emit(f'and i32 {bits}, 8388607')}, 8388608")   # the implicit bit: |x| > 8192
    m = self.emit(f"uitofp i32 {mantissa} to double")
    idx = self.call("llvm.umin.i32", "i32", [("i32", self.emit(f"sub i32 {biased}, {150 + SINCOS_EXPONENTS[0]}")), ("i32", str(len(SINCOS_TABLE) - 1))])
    idx = self.emit(f"zext i32 {idx} to i64")
    a = []
    for k in range(3):
      ptr = self.emit(f"getelementptr inbounds [{len(SINCOS_TABLE)} x double], ptr addrspace(4) @sincos_t{k}, i64 0, i64 {idx}")
      a.append(self.emit(f"fmul double {m}, {self.emit(f'load double, ptr addrspace(4) {ptr}, align 8')}"))
    j = self.intrinsic("rint", dtypes.float64, 1, [self.emit(f"fmul double {self.emit(f'fadd double {a[0]}, {a[1]}')}, {d(2 / math.pi)}")])
    r = a[0]
    for k, part in enumerate(HALF_PI_PARTS):   # (a0 - j*p0) exact, then the smaller terms
      r = self.emit(f"fsub double {r}, {self.emit(f'fmul double {j}, {d(part)}')}")
      if k < 2: r = self.emit(f"fadd double {r}, {a[k + 1]}")
    octants = self.emit(f"shl i32 {self.emit(f'fptosi double {j} to i32')}, 1")
    val = self.sincos_reduced(x, self.emit(f"fptrunc double {r} to float"), octants, 1, op)
    special = self.emit(f"icmp uge i32 {biased}, 255")   # inf or NaN
    return self.emit(f"select i1 {special}, float {self.f(math.nan, 1)}, float {val}")

  def pow_f32(self, x: str, y: str) -> str:
    """numpy's float32 power: exp2(y * log2|x|), negated for a negative x (-0 and -inf included) and an odd integral y,
    NaN for a finite negative x and a non-integral y; x**0 = 1**y = (-1)**inf = 1."""
    f32 = dtypes.float32
    mag = self.poly_exp2(self.emit(f"fmul float {y}, {self.poly_log2(self.intrinsic('fabs', f32, 1, [x]), 1)}"), 1)
    integral = self.emit(f"fcmp oeq float {self.intrinsic('trunc', f32, 1, [y])}, {y}")
    half = self.emit(f"fmul float {y}, {self.f(0.5, 1)}")
    half_frac = self.emit(f"fcmp one float {self.intrinsic('trunc', f32, 1, [half])}, {half}")
    sign = self.emit(f"icmp slt i32 {self.emit(f'bitcast float {x} to i32')}, 0")
    negate = self.emit(f"and i1 {sign}, {self.emit(f'and i1 {integral}, {half_frac}')}")
    r = self.emit(f"select i1 {negate}, float {self.emit(f'fneg float {mag}')}, float {mag}")
    below, not_ninf = self.emit(f"fcmp olt float {x}, {self.f(0.0, 1)}"), self.emit(f"fcmp one float {x}, {self.f(-math.inf, 1)}")
    finite_neg = self.emit(f"and i1 {below}, {not_ninf}")
    nan = self.emit(f"and i1 {finite_neg}, {self.emit(f'xor i1 {integral}, true')}")
    r = self.emit(f"select i1 {nan}, float {self.f(math.nan, 1)}, float {r}")
    y0, x1 = self.emit(f"fcmp oeq float {y}, {self.f(0.0, 1)}"), self.emit(f"fcmp oeq float {x}, {self.f(1.0, 1)}")
    # C's pow(-1, +-inf) is 1 (exp2(inf * log2(1)) would be NaN)
    ax, ay = self.intrinsic("fabs", f32, 1, [x]), self.intrinsic("fabs", f32, 1, [y])
    one_inf = self.emit(f"and i1 {self.emit(f'fcmp oeq float {ax}, {self.f(1.0, 1)}')}, {self.emit(f'fcmp oeq float {ay}, {self.f(math.inf, 1)}')}")
    x1 = self.emit(f"or i1 {x1}, {one_inf}")
    return self.emit(f"select i1 {self.emit(f'or i1 {y0}, {x1}')}, float {self.f(1.0, 1)}, float {r}")


class GPURenderer(Renderer):
  """Loop IR -> LLVM IR for a GPU (the module docstring's layouts); a target names its writer (and so its triple) and compiles."""
  writer: type[_GPUKernelWriter] = _GPUKernelWriter
  features = ""
  wave_size = 32       # lanes that run in lockstep (an AMD wave, an NV warp): workgroup sizes are multiples of it
  _machines: dict[tuple[str, str, str], tuple] = {}  # (triple, arch, features) -> (llvmlite.binding, target machine), once per process

  def __init__(self, arch: str):
    self.arch = arch

  def machine(self):
    """(llvmlite.binding, llvmlite's target machine for this triple and arch)."""
    with LOCK:   # target set-up and machines in LLVM's global state, as every compile's
      key = (self.writer.triple, self.arch, self.features)
      if key not in GPURenderer._machines:
        try:
          import llvmlite.binding as llvm
        except ImportError as e:
          raise RuntimeError(f"the {self.writer.target_name} tensor target needs llvmlite: pip install llvmlite") from e
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        tm = llvm.Target.from_triple(self.writer.triple).create_target_machine(cpu=self.arch, features=self.features, opt=3)
        GPURenderer._machines[key] = (llvm, tm)
      return GPURenderer._machines[key]

  def adapt(self, lk: LoopKernel) -> LoopKernel: return gpu_plan(lk)

  def render(self, lk: LoopKernel) -> str:
    _, tm = self.machine()
    return self.writer(lk, str(tm.target_data), self.wave_size).write()

  def launch(self, lk: LoopKernel):
    lk = gpu_plan(lk)
    if mm := match_matmul(lk): return (mm.workgroups(lk.spec.full_shape),), (mm.tiles.threads,), ()
    if group := group_size(lk, self.wave_size): return (workitems(lk),), (group,), ()
    return (max(1, -(-workitems(lk) // LOCAL)),), (LOCAL,), ()

  def optimised(self, src: str, emit):
    """emit(target machine, module) of LLVM IR parsed, verified and run through O3 (allocas become registers)."""
    llvm, tm = self.machine()
    with codegen(llvm):
      mod = llvm.parse_assembly(src)
      mod.verify()
      pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
      pb.getModulePassManager().run(mod, pb)
      return emit(tm, mod)
