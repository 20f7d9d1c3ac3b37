"""AMD target: the GPU renderer (render_gpu.py: layouts, lane trees, tiled kernels, float32 math) for llvmlite's
amdgcn-amd-amdhsa, compiled to an ET_REL code object for the AMD program loader. Allocas live in private memory
(addrspace 5, which SROA turns into registers); the barriers are s_barrier between workgroup-scope fences; the lane
trees shuffle by ds_bpermute_b32.

The wave size is the arch's: GCN/CDNA (gfx9, e.g. gfx942) runs wave64 only; RDNA (gfx10 and later: gfx1100, gfx1201)
runs wave32 or wave64 and is wave32 by default, wave64 on request (HCQ_AMD_WAVE_SIZE=64, or `wave_size=`). It reaches the
code as LLVM's wavefrontsize32/64 subtarget features, so the kernel descriptor's ENABLE_WAVEFRONT_SIZE32 bit (which the
driver turns into DISPATCH_INITIATOR.CS_W32_EN) and LLVM's own cross-lane lowering follow it; the layouts ask the
renderer's `wave_size` for their workgroup sizes (render_gpu.group_size)."""
from __future__ import annotations
import os
from hcq.tensor.render_gpu import GPURenderer, _GPUKernelWriter

ARCH = "gfx1100"
WAVE_SIZE_ENV = "HCQ_AMD_WAVE_SIZE"


def wave_sizes(arch: str) -> tuple[int, ...]:
  """The wave sizes `arch` runs, its default first. LLVM AMDGPU.td gives every GFX9 processor FeatureWavefrontSize64
  alone and lets GFX10+ take either (GCNSubtarget picks wavefrontsize32 when neither is asked for); with
  +wavefrontsize32 on gfx942 LLVM 22 emits no kernel at all, so the refusal has to be ours."""
  major = arch[3:-2]   # gfx<major><minor><stepping>, the last two one hex digit each
  if not arch.startswith("gfx") or not major.isdigit():
    raise ValueError(f"{arch!r} is not an AMD gfx arch (gfx1100, gfx1201, gfx942, ...)")
  return (32, 64) if int(major) >= 10 else (64,)


def choose_wave_size(arch: str, wave_size: int | None = None) -> int:
  """`wave_size`, else HCQ_AMD_WAVE_SIZE, else the arch's default; one the arch runs, or a ValueError naming them."""
  valid = wave_sizes(arch)
  if wave_size is not None:
    asked, what = wave_size, f"wave_size={wave_size}"
  elif os.environ.get(WAVE_SIZE_ENV):
    text = os.environ[WAVE_SIZE_ENV]
    asked, what = int(text) if text.isdigit() else None, f"{WAVE_SIZE_ENV}={text}"
  else:
    return valid[0]
  if asked not in valid: raise ValueError(f"{what}: {arch} runs wave size {' or '.join(map(str, valid))}")
  return asked


class _AMDKernelWriter(_GPUKernelWriter):
  pptr = "ptr addrspace(5)"              # allocas in private memory (the amdgcn datalayout's A5)
  alloca_space = ", addrspace(5)"
  triple, target_name, kernel_cc = "amdgcn-amd-amdhsa", "AMD", "amdgpu_kernel"
  ids = ("llvm.amdgcn.workgroup.id.x", "llvm.amdgcn.workitem.id.x")
  barrier_intrinsic = "llvm.amdgcn.s.barrier"
  fence_scope = "workgroup"              # s_barrier alone does not order memory (AMDGPU memory model: fences around it)
  def shuffle_word(self, word: str, mask: int) -> str:
    # ds_bpermute_b32 reads lane (address / 4) mod the wave size (RDNA3 ISA, DS_BPERMUTE_B32): an xor below 32 stays in
    # its run of 32 lanes in a wave32 and a wave64 alike, so the trees need no wave size
    lane = self.emit(f"trunc i64 {self.lane} to i32")
    addr = self.emit(f"shl i32 {self.emit(f'xor i32 {lane}, {mask}')}, 2")
    return self.call("llvm.amdgcn.ds.bpermute", "i32", [("i32", addr), ("i32", word)])

  def attributes(self) -> str: return f'nounwind "amdgpu-flat-work-group-size"="1,{self.workgroup_size()}"'


class AMDGCNRenderer(GPURenderer):
  """Loop IR -> LLVM IR for an AMD arch at its wave size (see the module docstring); `compile` turns it into an ET_REL
  code object."""
  target = "amdgcn"
  writer = _AMDKernelWriter

  def __init__(self, arch: str = ARCH, wave_size: int | None = None):
    super().__init__(arch)
    self.wave_size = choose_wave_size(arch, wave_size)
    # one feature on and the other off, as LLVM's own tests spell a wave size
    self.features = "+wavefrontsize64,-wavefrontsize32" if self.wave_size == 64 else "+wavefrontsize32,-wavefrontsize64"

  def compile(self, src: str) -> bytes:
    """LLVM IR -> optimised (O3, so allocas become registers) -> an ET_REL code object for the AMD program loader."""
    return self.optimised(src, lambda tm, mod: tm.emit_object(mod))
