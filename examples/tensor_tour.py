"""A tour of hcq.tensor: lazy numpy-like arrays compiled into fused kernels, run on HCQ devices (the CPU, AMD GPUs).

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

# indexing like numpy: integer arrays and boolean masks gather; item assignment
x[x > 6] = 0
print("x[[2, 0], 1:] after x[x > 6] = 0:\n", x[[2, 0], 1:].numpy())

# the same program on an AMD GPU (gfx11 code objects from llvmlite's amdgcn target); without one, the emulated gfx1100
g = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="MOCKKFD+AMD")
print("softmax on the emulated gfx1100 matches the CPU:", np.allclose(g.softmax(-1).numpy(), g.to("CPU").softmax(-1).numpy()))
