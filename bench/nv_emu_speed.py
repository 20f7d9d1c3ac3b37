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
import sys
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


def nv_run(mod, name: str, bufs: list, grid, block) -> tuple[float, float, int]:
  """Launch with bufs mapped (tests/nv_sm_tools.launch); (wall seconds, CPU seconds, lane-ops)."""
  from tests.nv_sm_tools import launch
  t0, c0 = time.perf_counter(), time.process_time()
  st = launch(mod, name, bufs, grid, block)
  return time.perf_counter() - t0, time.process_time() - c0, st["lane_ops"]


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--repeat", type=int, default=3)
  args = ap.parse_args()
  from hcq.drivers.mock.nv.sm import PTXModule
  sys.path.insert(0, HERE)
  import emu_speed
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  from tests.nv_sm_tools import cuda_to_ptx
  mod = PTXModule.parse(cuda_to_ptx(CUDA, "sm_90"), "nv_emu_speed.cu")
  co = read_code_object(emu_speed.build())
  rng = np.random.default_rng(0)
  n, m = 1 << 20, 256
  a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
  ma, mb = rng.standard_normal((m, m)).astype(np.float32), rng.standard_normal((m, m)).astype(np.float32)
  cases = [("fma3", "a*b+c, 2^20 f32", lambda: [np.zeros(n, np.float32), a, b, c], (n // 256, 1, 1), (256, 1, 1),
            lambda o: np.allclose(o[0], a * b + c, atol=1e-5), 100e6),
           ("matmul", "256x256 f32 matmul", lambda: [np.zeros((m, m), np.float32), ma, mb, np.int32(m)], (m // 16, m // 16, 1), (16, 16, 1),
            lambda o: np.allclose(o[0], ma @ mb, atol=1e-3), 200e6)]
  print("lane-ops/s by wall time (by CPU time of this process in brackets: the machine may be shared)")
  print(f"{'kernel':24s} {'NV time':>8s} {'NV lane-ops/s':>22s} {'target':>7s} {'AMD time':>9s} {'AMD lane-ops/s':>22s}")
  for name, what, make, grid, block, check, target in cases:
    best = amd = None
    for _ in range(args.repeat):
      argv = make()
      dt, cpu, ops = nv_run(mod, name, argv, grid, block)
      assert check(argv), f"NV {name}: wrong result"
      best = (dt, cpu, ops) if best is None or dt < best[0] else best
      argv = make()
      t0, c0 = time.perf_counter(), time.process_time()
      r = run(co, argv, grid[:2] if grid[1] > 1 else grid[:1], block[:2] if block[1] > 1 else block[:1], kernel=name)
      dt, cpu = time.perf_counter() - t0, time.process_time() - c0
      assert check(argv), f"AMD {name}: wrong result"
      amd = (dt, cpu, r.stats.valu_lane_ops) if amd is None or dt < amd[0] else amd
    rate = lambda r: f"{r[2] / r[0] / 1e6:9.1f}M ({r[2] / r[1] / 1e6:7.1f}M)"
    print(f"{what:24s} {best[0]:7.3f}s {rate(best):>22s} {target / 1e6:6.0f}M {amd[0]:8.3f}s {rate(amd):>22s}")


if __name__ == "__main__":
  main()
