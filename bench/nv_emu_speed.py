"""The emulated NVIDIA SM's speed (PTX, numpy lanes) next to the emulated AMD GPU's, on the same two kernels, in one run.

Lane-ops: on NV, PTX instructions executed x the threads executing them (every instruction is per thread); on AMD,
VALU wave-instructions x 32 lanes (bench/emu_speed.py). The NV kernels are CUDA C++ compiled by clang-19
(--cuda-device-only, sm_90, -O2); the AMD ones are bench/emu_speed.py's OpenCL C for gfx1100. Time is the launch
alone on NV (buffers mapped, parameters written) and the whole emu.run call on AMD.

Peer: none is run. tinygrad's MOCKGPU NV (test/mockgpu/nv/nvgpu.py in its repository, not in its wheel; read at commit
a9069c177a) does not execute PTX in Python: its QMD handler passes the kernel's PTX text to `ptx_run` of gpuocelot's
native library (test/mockgpu/helpers.py opens libgpuocelot), which tinygrad's CI downloads prebuilt from a release of
its gpuocelot fork. No package registry this project reaches ships that library, and building it from source
(gpuocelot's ocelot/CMakeLists.txt) needs LLVM 15's development libraries, Boost, flex, bison, GLEW and curses, three
git submodules, and a C++ build of about 180 files: not attempted on the shared 2-CPU development machine. So the
figure would be gpuocelot's C++ emulator's, run through tinygrad; a machine with libgpuocelot installed could add it.

With --baseline REF the emulated SM of git revision REF (its drivers/mock/nv/sm, extracted to a temporary folder)
runs the same launches, alternating with this tree's, so a before/after on a shared machine sees the same load.

  python bench/nv_emu_speed.py [--repeat 3] [--baseline main]
"""
from __future__ import annotations
import argparse
import importlib
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


def nv_run(mod, name: str, bufs: list, grid, block) -> tuple[float, float, int]:
  """Launch with bufs mapped (tests/nv_sm_tools.launch); (wall seconds, CPU seconds, lane-ops)."""
  from tests.nv_sm_tools import launch
  t0, c0 = time.perf_counter(), time.process_time()
  st = launch(mod, name, bufs, grid, block)
  return time.perf_counter() - t0, time.process_time() - c0, st["lane_ops"]


def baseline_sm(ref: str, into: str):
  """The emulated SM package as git revision `ref` has it, imported under another name from `into`."""
  root = os.path.join(HERE, "..")
  tar = subprocess.run(["git", "-C", root, "archive", ref, "drivers/mock/nv/sm"], check=True, capture_output=True).stdout
  subprocess.run(["tar", "-x", "-C", into], input=tar, check=True)
  os.rename(os.path.join(into, "drivers", "mock", "nv", "sm"), os.path.join(into, "sm_baseline"))
  sys.path.insert(0, into)
  return importlib.import_module("sm_baseline")


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--baseline", metavar="REF", help="also run the emulated SM of this git revision, alternately")
  args = ap.parse_args()
  from hcq.drivers.mock.nv.sm import PTXModule
  sys.path.insert(0, HERE)
  import emu_speed
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.emu import run
  from tests.nv_sm_tools import cuda_to_ptx
  ptx = cuda_to_ptx(CUDA, "sm_90")
  mod = PTXModule.parse(ptx, "nv_emu_speed.cu")
  tmp = tempfile.TemporaryDirectory()
  base = baseline_sm(args.baseline, tmp.name).PTXModule.parse(ptx, "nv_emu_speed.cu") if args.baseline else None
  co = read_code_object(emu_speed.build())
  rng = np.random.default_rng(0)
  n, m = 1 << 20, 256
  a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
  ma, mb = rng.standard_normal((m, m)).astype(np.float32), rng.standard_normal((m, m)).astype(np.float32)
  want_fma, want_mm = a * b + c, ma @ mb   # once, before any timing: a BLAS call's idle threads would bill CPU time
  cases = [("fma3", "a*b+c, 2^20 f32", lambda: [np.zeros(n, np.float32), a, b, c], (n // 256, 1, 1), (256, 1, 1),
            lambda o: np.allclose(o[0], want_fma, atol=1e-5), 100e6),
           ("matmul", "256x256 f32 matmul", lambda: [np.zeros((m, m), np.float32), ma, mb, np.int32(m)], (m // 16, m // 16, 1), (16, 16, 1),
            lambda o: np.allclose(o[0], want_mm, atol=1e-3), 200e6)]
  print("lane-ops/s by wall time (by CPU time of this process in brackets: the machine may be shared); best of", args.repeat)
  print("peer (tinygrad's MOCKGPU NV): not run: it executes PTX in gpuocelot's native library, not installed here "
        "(this bench's docstring says why)")
  cols = ["NV (this tree)"] + ([f"NV ({args.baseline})"] if base else []) + ["AMD emulator"]
  print(f"{'kernel':20s} " + " ".join(f"{c:>26s}" for c in cols) + f" {'NV target':>10s}")
  keep = lambda old, new: new if old is None or new[0] < old[0] else old
  for name, what, make, grid, block, check, target in cases:
    best = {c: None for c in cols}
    for _ in range(args.repeat):
      for col, sm in [(cols[0], mod)] + ([(cols[1], base)] if base else []):
        argv = make()
        r = nv_run(sm, name, argv, grid, block)
        assert check(argv), f"{col} {name}: wrong result"
        best[col] = keep(best[col], r)
      argv = make()
      t0, c0 = time.perf_counter(), time.process_time()
      r = run(co, argv, grid[:2] if grid[1] > 1 else grid[:1], block[:2] if block[1] > 1 else block[:1], kernel=name)
      dt, cpu = time.perf_counter() - t0, time.process_time() - c0
      assert check(argv), f"AMD {name}: wrong result"
      best["AMD emulator"] = keep(best["AMD emulator"], (dt, cpu, r.stats.valu_lane_ops))
    rate = lambda r: f"{r[0]:6.3f}s {r[2] / r[0] / 1e6:6.1f}M ({r[2] / r[1] / 1e6:6.1f}M)"
    print(f"{what:20s} " + " ".join(f"{rate(best[c]):>26s}" for c in cols) + f" {target / 1e6:9.0f}M")


if __name__ == "__main__":
  main()
