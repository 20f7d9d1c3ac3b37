"""A tour of hcq.tensor: lazy numpy-like arrays compiled into fused CPU kernels.

  python examples/tensor_tour.py
"""
import numpy as np
from hcq.tensor import Tensor, dtypes
from hcq.tensor import runtime

x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
print("x =\n", x.numpy())
print("x.T @ x =\n", (x.T @ x).numpy())
print("softmax rows:\n", x.softmax(-1).numpy().round(4))
print("padded and flipped:\n", x.pad(((0, 1), (1, 0)))[::-1].numpy())
print("argmax per row:", x.argmax(axis=1).numpy(), " sum of int8s is int64:", Tensor([100, 100], dtype="int8").sum().dtype)
print("bfloat16 round trip:", Tensor([1.0, 3.14159], dtype=dtypes.bfloat16).numpy())

a, b, c = (Tensor.rand(1 << 20, seed=s) for s in range(3))
before = runtime.stats["kernels_run"]
total = (a * b + c).relu().sum().item()
print(f"relu(a*b+c).sum() over 2^20 = {total:.1f} in {runtime.stats['kernels_run'] - before} kernels "
      f"({runtime.stats['kernels_compiled']} compiled so far, {runtime.stats['compile_seconds'] * 1e3:.0f} ms compiling)")

# the same kernels through the HCQ core's CPU device: buffers from hcq.Device("CPU"), launches on its compute queue
q = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="HCQ:CPU")
print("softmax through HCQ queues matches:", np.allclose(q.softmax(-1).numpy(), x.softmax(-1).numpy()))
