"""hcq's CPU float32 matmul against numpy's (OpenBLAS) on one core, as paired ratios: each process pins itself to one
CPU, runs numpy and hcq calls alternately and reports the median over its pairs of numpy's time / hcq's time (and
the ratio of the bests); several processes in a row show the spread. The machine's own speed drifts between and
within processes (both libraries slow down together), which a ratio of two calls made side by side mostly cancels.

  python bench/matmul_pairs.py 2048 2048 2048 --calls 8 --processes 3
  PYTHONPATH=/path/to/other/tree python bench/matmul_pairs.py ...   (another tree's hcq: run both, alternated)
"""
from __future__ import annotations
import argparse
import os
import statistics
import subprocess
import sys
import time


def child(m: int, k: int, n: int, calls: int) -> str:
  """One process's figures: pinned to one CPU, one thread per library, process CPU time per call."""
  os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # before numpy and hcq count their threads
  import numpy as np
  from hcq.tensor import Tensor
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
  ta, tb = Tensor(a), Tensor(b)
  (ta @ tb).realize()
  a @ b
  t_np, t_hcq = [], []
  for _ in range(calls):
    t0 = time.process_time()
    a @ b
    t_np.append(time.process_time() - t0)
    t0 = time.process_time()
    (ta @ tb).realize()
    t_hcq.append(time.process_time() - t0)
  paired = statistics.median(x / y for x, y in zip(t_np, t_hcq))
  return (f"numpy best {min(t_np) * 1e3:.1f} ms, hcq best {min(t_hcq) * 1e3:.1f} ms, best ratio {min(t_np) / min(t_hcq):.3f}, "
          f"median paired ratio {paired:.3f}")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("m", type=int)
  parser.add_argument("k", type=int)
  parser.add_argument("n", type=int)
  parser.add_argument("--calls", type=int, default=8, help="calls of each library per process (default 8)")
  parser.add_argument("--processes", type=int, default=3, help="processes in a row (default 3)")
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if min(args.m, args.k, args.n, args.calls, args.processes) < 1: parser.error("sizes, --calls and --processes must be positive")
  if args.child:
    print(child(args.m, args.k, args.n, args.calls), flush=True)
    return
  env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
  print(f"{args.m}x{args.k} @ {args.k}x{args.n} float32, one core, {args.calls} calls each per process (numpy time / hcq time: "
        "above 1 is hcq faster)")
  for p in range(args.processes):
    out = subprocess.run([sys.executable, __file__, str(args.m), str(args.k), str(args.n), "--calls", str(args.calls), "--child"],
                         env=env, capture_output=True, text=True)
    if out.returncode: sys.exit(f"process {p + 1} failed:\n{out.stderr}")
    print(f"process {p + 1}: {out.stdout.strip()}", flush=True)


if __name__ == "__main__":
  main()
