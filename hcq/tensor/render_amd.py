"""AMD gfx11 target: the GPU renderer (render_gpu.py: layouts, LDS trees, float32 math) for llvmlite's
amdgcn-amd-amdhsa, compiled to an ET_REL code object for the AMD program loader. Allocas live in private memory
(addrspace 5, which SROA turns into registers); the barriers are s_barrier between workgroup-scope fences; the lane
trees shuffle by ds_bpermute_b32."""
from __future__ import annotations
from hcq.tensor.render_gpu import GPURenderer, _GPUKernelWriter

ARCH = "gfx1100"


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
  """Loop IR -> LLVM IR for AMD gfx11 (see the module docstring); `compile` turns it into an ET_REL code object."""
  target = "amdgcn"
  writer = _AMDKernelWriter

  def __init__(self, arch: str = ARCH):
    super().__init__(arch)

  def compile(self, src: str) -> bytes:
    """LLVM IR -> optimised (O3, so allocas become registers) -> an ET_REL code object for the AMD program loader."""
    return self.optimised(src, lambda tm, mod: tm.emit_object(mod))
