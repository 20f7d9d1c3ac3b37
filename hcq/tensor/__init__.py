"""hcq.tensor: a small tensor compiler — lazy Tensor → fused kernels → LLVM IR → launched on an HCQ device's queue
(the CPU, or an AMD gfx11 GPU: real, or the emulated MOCKKFD+AMD). `DEV` or device= picks it (docs/tensor.md).

  from hcq.tensor import Tensor
  x = Tensor.rand(1024, 1024, dtype="float32")
  (x @ x).softmax().numpy()
  Tensor.rand(256, device="MOCKKFD+AMD").exp().sum().item()
"""
from hcq.tensor.dtype import DType, dtypes
from hcq.tensor.tensor import Tensor

__all__ = ["Tensor", "DType", "dtypes"]
