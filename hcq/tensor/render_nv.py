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
from hcq.tensor.render_gpu import GPURenderer, _GPUKernelWriter

ARCH = "sm_90"


class _NVKernelWriter(_GPUKernelWriter):
  triple, target_name, kernel_cc = "nvptx64-nvidia-cuda", "NV", "ptx_kernel"
  ids = ("llvm.nvvm.read.ptx.sreg.ctaid.x", "llvm.nvvm.read.ptx.sreg.tid.x")
  barrier_intrinsic = "llvm.nvvm.barrier0"


class NVPTXRenderer(GPURenderer):
  """Loop IR -> LLVM IR for NVIDIA sm_80 and newer (see the module docstring); `compile` turns it into a cubin."""
  target = "nvptx"
  triple, writer = "nvptx64-nvidia-cuda", _NVKernelWriter

  def __init__(self, arch: str = ARCH):
    super().__init__(arch)
    from hcq.drivers.nv.compile import ptx_features
    self.features = ptx_features(arch)

  def compile(self, src: str) -> str:
    """LLVM IR -> optimised (O3) -> PTX (llvmlite's NVPTX backend). The NV program path takes it from there: ptxas
    makes the cubin, and the PTX's .param types give the kernel's argument kinds (buffers are .u64 .ptr .global)."""
    return self.optimised(src, lambda tm, mod: tm.emit_assembly(mod))
