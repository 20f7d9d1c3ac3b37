"""The emulated NVIDIA SM's speed (PTX, numpy lanes) next to the emulated AMD GPU's, on the same two kernels, in one run.

Lane-ops: on NV, PTX instructions executed x the threads executing them (every instruction is per thread); on AMD,
VALU wave-instructions x 32 lanes (bench/emu_speed.py). The NV kernels are CUDA C++ compiled by clang-19
(--cuda-device-only, sm_90, -O2); the AMD ones are bench/emu_speed.py's OpenCL C for gfx1100. Time is the launch
alone on NV (buffers mapped, parameters written) and the whole emu.run call on AMD. Peer: tinygrad's MOCKGPU NV runs
PTX through its own emulator; it is not installed here, so no figure is given for it.

  python bench/nv_emu_speed.py [--repeat 3]
"""
from __future__ import annotations
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

CUDA = r"""
extern "C" __global__ void fma3(float* d, const float* a, const float* b, const float* c) { int i = GID; d[i] = a[i] * b[i] + c[i]; }
extern "C" __global__ void matmul(float* c, const float* a, const float* b, int n) {
  int x = blockIdx_x * 16 + threadIdx_x, y = blockIdx_y * 16 + threadIdx_y;
  float acc = 0; for (int k = 0; k < n; k++) acc += a[y * n + k] * b[k * n + x]; c[y * n + x] = acc; }
"""


def cuda_to_ptx(src: str, arch: str = "sm_90") -> str:
  """CUDA C++ -> PTX with clang-19 (no CUDA SDK: the corpus prelude declares what the kernels use)."""
  prelude = os.path.join(HERE, "..", "tests", "nv_sm_corpus", "cuda_prelude.h")
  with tempfile.TemporaryDirectory() as d:
    cu, ptx = os.path.join(d, "k.cu"), os.path.join(d, "k.ptx")
    open(cu, "w").write(src)
    subprocess.run(["clang-19", "--cuda-device-only", "-nocudainc", "-nocudalib", f"--cuda-gpu-arch={arch}", "-O2", "-S",
                    "-Wno-unknown-cuda-version", "-include", prelude, "-x", "cuda", cu, "-o", ptx], check=True)
    return open(ptx).read()


def nv_run(mod, name: str, bufs: list, grid, block) -> tuple[float, int]:
  """Map bufs (arrays; scalars go into the parameters by value) and launch; (seconds, lane-ops)."""
  from hcq.asm.emu.memory import VirtualMemory
  vm, params, va = VirtualMemory(), b"", 0x1_0000_0000
  for x in bufs:
    if isinstance(x, np.ndarray):
      vm.map(va, x.nbytes, x.reshape(-1).view(np.uint8))
      params += np.uint64(va).tobytes()
      va += (x.nbytes + 0xffff) & ~0xffff
    else: params += x.tobytes()
  pbuf = np.zeros(4096, np.uint8)
  pbuf[:len(params)] = np.frombuffer(params, np.uint8)
  vm.map(0x1000, 4096, pbuf)
  t0 = time.perf_counter()
  st = mod.launch(name, vm, grid, block, params_va=0x1000)
  return time.perf_counter() - t0, st["lane_ops"]


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--repeat", type=int, default=3)
  args = ap.parse_args()
  from hcq.drivers.mock.nv.sm import PTXModule
  sys.path.insert(0, HERE)
  import emu_speed
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  mod = PTXModule.parse(cuda_to_ptx(CUDA), "nv_emu_speed.cu")
  co = read_code_object(emu_speed.build())
  rng = np.random.default_rng(0)
  n, m = 1 << 20, 256
  a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
  ma, mb = rng.standard_normal((m, m)).astype(np.float32), rng.standard_normal((m, m)).astype(np.float32)
  cases = [("fma3", "a*b+c, 2^20 f32", lambda: [np.zeros(n, np.float32), a, b, c], (n // 256, 1, 1), (256, 1, 1),
            lambda o: np.allclose(o[0], a * b + c, atol=1e-5), 100e6),
           ("matmul", "256x256 f32 matmul", lambda: [np.zeros((m, m), np.float32), ma, mb, np.int32(m)], (m // 16, m // 16, 1), (16, 16, 1),
            lambda o: np.allclose(o[0], ma @ mb, atol=1e-3), 200e6)]
  print(f"{'kernel':24s} {'NV time':>8s} {'NV lane-ops/s':>14s} {'target':>8s} {'AMD time':>9s} {'AMD lane-ops/s':>15s}")
  for name, what, make, grid, block, check, target in cases:
    best = amd = None
    for _ in range(args.repeat):
      argv = make()
      dt, ops = nv_run(mod, name, argv, grid, block)
      assert check(argv), f"NV {name}: wrong result"
      best = (dt, ops) if best is None or dt < best[0] else best
      argv = make()
      t0 = time.perf_counter()
      r = run(co, argv, grid[:2] if grid[1] > 1 else grid[:1], block[:2] if block[1] > 1 else block[:1], kernel=name)
      dt = time.perf_counter() - t0
      assert check(argv), f"AMD {name}: wrong result"
      amd = (dt, r.stats.valu_lane_ops) if amd is None or dt < amd[0] else amd
    print(f"{what:24s} {best[0]:7.3f}s {best[1] / best[0] / 1e6:13.1f}M {target / 1e6:7.0f}M {amd[0]:8.3f}s {amd[1] / amd[0] / 1e6:14.1f}M")


if __name__ == "__main__":
  main()
