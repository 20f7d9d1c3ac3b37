"""Add two vectors with a kernel written in the hcq.asm DSL, on the default AMD device (the emulated gfx1100 when
this machine has no AMD GPU).

  python examples/vector_add_asm.py
"""
import numpy as np

import hcq
from hcq.asm.kernel import Kernel
from hcq.asm.rdna3 import (global_load_b32, global_store_b32, s, s_endpgm, s_load_b64, s_load_b128, v, v_add_f32_e32,
                           v_lshl_add_u32, v_lshlrev_b32_e32)

# c[i] = a[i] + b[i]; s[0:1] holds the kernarg pointer, s2 the workgroup id, v0 the thread id
k = Kernel("vadd", args=[("a", "buffer"), ("b", "buffer"), ("c", "buffer")])
k.add(s_load_b128(s[4:7], s[0:1], 0), s_load_b64(s[8:9], s[0:1], 0x10),
      v_lshl_add_u32(v[0], s[2], 6, v[0]),   # i = group * 64 + thread
      v_lshlrev_b32_e32(v[1], 2, v[0]),      # byte offset
      "s_waitcnt lgkmcnt(0)",                 # DSL objects and assembly lines mix
      global_load_b32(v[2], v[1], s[4:5]), global_load_b32(v[3], v[1], s[6:7]),
      "s_waitcnt vmcnt(0)",
      v_add_f32_e32(v[2], v[2], v[3]),
      global_store_b32(v[1], v[2], s[8:9]),
      s_endpgm())

dev = hcq.Device("AMD")
prg = dev.program(k.to_elf())
n = 4096
a, b = np.random.default_rng(0).random((2, n), dtype=np.float32)
A, B, C = dev.alloc(4 * n).copyin(a), dev.alloc(4 * n).copyin(b), dev.alloc(4 * n)
secs = prg(A, B, C, global_size=n // 64, local_size=64, wait=True)
c = C.copyout(np.empty(n, np.float32))
print(f"{dev} ({dev.arch}): c = a + b over {n} floats, {secs * 1e6:.1f} us of GPU time, equal to numpy: {np.array_equal(c, a + b)}")
