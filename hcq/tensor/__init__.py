"""hcq.tensor: a small tensor compiler — lazy Tensor → fused kernels → LLVM IR → run on a device (CPU now).

  from hcq.tensor import Tensor
  x = Tensor.rand(1024, 1024, dtype="float32")
  (x @ x).softmax().numpy()
"""
from hcq.tensor.dtype import DType, dtypes
from hcq.tensor.tensor import Tensor

__all__ = ["Tensor", "DType", "dtypes"]
