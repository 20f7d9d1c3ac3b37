"""NVIDIA target: the GPU renderer (render_gpu.py: layouts, shared-memory trees, float32 math) for llvmlite's
nvptx64-nvidia-cuda, optimised and emitted as PTX by llvmlite, then compiled to a cubin by ptxas in the NV program path (dev.program of the
PTX: hcq.drivers.nv.compile), loaded and launched on the NV device's compute queue.

What differs from AMD: allocas stay in the generic address space (the NVPTX datalayout has no alloca address space;
SROA makes them registers); workgroup and workitem ids are %ctaid.x and %tid.x; the tree barrier is bar.sync 0
(llvm.nvvm.barrier0), which itself orders the block's shared and global memory accesses (PTX ISA, bar: "guarantees
that memory accesses requested by the threads prior to the barrier are performed relative to all threads
participating"), so no fences. float32 math is the same inline polynomials as on AMD (not PTX's .approx
instructions), so results match the AMD and CPU devices to the same bounds."""
from __future__ import annotations
import math
from hcq.tensor.dtype import DType, dtypes
from hcq.tensor.render_gpu import GPURenderer, _GPUKernelWriter

ARCH = "sm_90"


class _NVKernelWriter(_GPUKernelWriter):
  triple, target_name, kernel_cc = "nvptx64-nvidia-cuda", "NV", "ptx_kernel"
  ids = ("llvm.nvvm.read.ptx.sreg.ctaid.x", "llvm.nvvm.read.ptx.sreg.tid.x")
  barrier_intrinsic = "llvm.nvvm.barrier0"

  def shuffle_word(self, word: str, mask: int) -> str:   # a warp is 32 threads on every architecture (PTX ISA: WARP_SZ)
    args = [("i32", "-1"), ("i32", word), ("i32", str(mask)), ("i32", "31")]   # all lanes, xor mask, clamp
    return self.call("llvm.nvvm.shfl.sync.bfly.i32", "i32", args)

  def fmod(self, a: str, b: str, d: DType, w: int) -> str:
    """C's fmod, exactly. LLVM's NVPTX backend lowers frem to a - b * trunc(a / b) (PTX has no float remainder), wrong
    once a / b overflows or rounds (1 % 1e-45 gave -inf, inf % inf inf): here the significands' long division instead,
    one bit of the exponent difference per step (at most 254 steps for float32, 2046 for float64)."""
    assert w == 1, "the GPU renderers are scalar"
    d = dtypes.float32 if self.ty(d, 1) == "float" else d   # bfloat16 computes in float32 registers
    assert d in (dtypes.float32, dtypes.float64), d.name     # float16 came here as float32 (float_divmod)
    ft, it, mbits, shift = ("float", "i32", 23, 150) if d == dtypes.float32 else ("double", "i64", 52, 1075)
    def parts(x: str) -> tuple[str, str]:   # (significand with its implicit bit, biased exponent; 1 for subnormals)
      bits = self.emit(f"bitcast {ft} {self.intrinsic('fabs', d, 1, [x])} to {it}")
      e = self.emit(f"lshr {it} {bits}, {mbits}")
      m = self.emit(f"and {it} {bits}, {(1 << mbits) - 1}")
      normal = self.emit(f"icmp ne {it} {e}, 0")
      return (self.emit(f"select i1 {normal}, {it} {self.emit(f'or {it} {m}, {1 << mbits}')}, {it} {m}"),
              self.emit(f"select i1 {normal}, {it} {e}, {it} 1"))
    (mx, ex), (my, ey) = parts(a), parts(b)
    my = self.emit(f"select i1 {self.emit(f'icmp eq {it} {my}, 0')}, {it} 1, {it} {my}")   # b == 0: NaN below, no urem by 0
    slot = f"%fmod{self.count}"
    self.count += 1
    self.allocas.append(f"  {slot} = alloca {it}")
    self.lines.append(f"  store {it} {self.emit(f'urem {it} {mx}, {my}')}, ptr {slot}")
    steps = self.emit(f"select i1 {self.emit(f'icmp ugt {it} {ex}, {ey}')}, {it} {self.emit(f'sub {it} {ex}, {ey}')}, {it} 0")
    steps = self.emit(f"zext {it} {steps} to i64") if it == "i32" else steps
    def step():
      r = self.emit(f"load {it}, ptr {slot}")
      doubled = self.emit(f"shl {it} {r}, 1")
      self.lines.append(f"  store {it} {self.emit(f'urem {it} {doubled}, {my}')}, ptr {slot}")
    self.loop("fmod", "0", steps, 1, step)
    # r * 2^(ey - shift) is the remainder's magnitude, representable: scaled in float64 by two powers of two (each normal)
    ey64 = self.emit(f"zext {it} {ey} to i64") if it == "i32" else ey
    scale = self.emit(f"sub i64 {ey64}, {shift}")
    half = self.emit(f"ashr i64 {scale}, 1")
    def pow2(k: str) -> str:
      biased = self.emit(f"add i64 {k}, 1023")
      return self.emit(f"bitcast i64 {self.emit(f'shl i64 {biased}, 52')} to double")
    r = self.emit(f"uitofp {it} {self.emit(f'load {it}, ptr {slot}')} to double")
    r = self.emit(f"fmul double {r}, {pow2(half)}")
    r = self.emit(f"fmul double {r}, {pow2(self.emit(f'sub i64 {scale}, {half}'))}")
    r = self.emit(f"fptrunc double {r} to float") if ft == "float" else r
    r = self.call(f"llvm.copysign.{'f32' if ft == 'float' else 'f64'}", ft, [(ft, r), (ft, a)])
    ax = self.intrinsic("fabs", d, 1, [a])
    small = self.emit(f"fcmp olt {ft} {ax}, {self.intrinsic('fabs', d, 1, [b])}")
    r = self.emit(f"select i1 {small}, {ft} {a}, {ft} {r}")
    nan = self.emit(f"or i1 {self.emit(f'fcmp uno {ft} {a}, {b}')}, {self.emit(f'fcmp oeq {ft} {b}, {self.const(0.0, d, 1)}')}")
    nan = self.emit(f"or i1 {nan}, {self.emit(f'fcmp oeq {ft} {ax}, {self.const(math.inf, d, 1)}')}")
    return self.emit(f"select i1 {nan}, {ft} {self.const(math.nan, d, 1)}, {ft} {r}")


class NVPTXRenderer(GPURenderer):
  """Loop IR -> LLVM IR for NVIDIA sm_80 and newer (see the module docstring); `compile` turns it into a cubin."""
  target = "nvptx"
  writer = _NVKernelWriter

  def __init__(self, arch: str = ARCH):
    super().__init__(arch)
    from hcq.drivers.nv.compile import ptx_features
    self.features = ptx_features(arch)

  def compile(self, src: str) -> str:
    """LLVM IR -> optimised (O3) -> PTX (llvmlite's NVPTX backend). The NV program path takes it from there: ptxas
    makes the cubin, and the PTX's .param types give the kernel's argument kinds (buffers are .u64 .ptr .global)."""
    return self.optimised(src, lambda tm, mod: tm.emit_assembly(mod))
