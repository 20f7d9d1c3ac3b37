"""Launch overhead on the emulated AMD GPU (MOCKKFD+AMD), host side and end to end.

  python bench/launch.py

Rows:
  fresh launch, host only    prg(...) with the emulated engines paused: what the host pays per launch (target <= 15 us)
  graph replay, host only    one bound queue of K launches submitted again: host us per kernel (target <= 3 us)
  end to end, CP only        launch + the command processor consuming every packet, no shader execution
  end to end, empty kernel   the same with the wavefront emulator running the kernel (when it is attached)
The peer figure for end to end: tinygrad's mock AMD device, 1,794 us per launch of an 11-instruction kernel
(865 us under its JIT), measured on this machine; the aim is 30x less.
"""
from __future__ import annotations
import os
import statistics
import subprocess
import sys
import tempfile
import time

import hcq
from hcq.sym import Variable

PEER_US = 1794.0
BATCH = 100  # launches per timed batch: fits the 64 KiB ring without waiting for the engine


def empty_kernel() -> bytes:
  with tempfile.TemporaryDirectory() as d:
    src = os.path.join(d, "k.cl")
    open(src, "w").write("__kernel void empty(__global int *a) { }\n")
    subprocess.run(["clang-19", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib", "-O2", "-c", src, "-o", f"{d}/k.o"], check=True)
    subprocess.run(["ld.lld-19", "-shared", f"{d}/k.o", "-o", f"{d}/k.so"], check=True)
    return open(f"{d}/k.so", "rb").read()


def main() -> None:
  dev = hcq.Device("MOCKKFD+AMD")
  gpu = next(iter(dev.os.kfd.nodes.values())).gpu
  core = gpu.shader_core
  prg = dev.program(empty_kernel())
  buf = dev.alloc(64)
  rows = []

  gpu.shader_core = lambda g, state, cancel=None: None  # the CP consumes the dispatch packets; nothing runs
  for _ in range(2 * BATCH): prg(buf, global_size=4, local_size=64)
  dev.synchronize()

  def host_only(submit, per: int, prepare=lambda: None) -> float:
    """Median host us per item of `submit()`, timed with the emulated engines paused, then drained untimed."""
    samples = []
    for _ in range(20):
      args = prepare()
      gpu.running.clear()
      t = time.perf_counter()
      submit(args)
      samples.append((time.perf_counter() - t) / per * 1e6)
      gpu.running.set()
      dev.synchronize()
    return statistics.median(samples)

  def fresh(_) -> None:
    for _ in range(BATCH): prg(buf, global_size=4, local_size=64)
  rows.append(("fresh launch, host only", host_only(fresh, BATCH), 15.0))

  k = 50
  q = dev.compute_queue()
  for i in range(k): q.exec(prg, Variable(f"ka{i}"), (4, 1, 1), (64, 1, 1))
  q.signal(dev.timeline_signal, Variable("t")).bind(dev)
  kargs = [dev.kernargs.write(prg.kernargs([buf], (), (4, 1, 1), (64, 1, 1)), 0) for _ in range(k)]
  rows.append(("graph replay, host only (per kernel)",
               host_only(lambda vals: q.submit(dev, vals), k, lambda: {**{f"ka{i}": kargs[i] for i in range(k)}, "t": dev.next_timeline()}), 3.0))

  n = 500
  t = time.perf_counter()
  for _ in range(n): prg(buf, global_size=4, local_size=64)
  dev.synchronize()
  rows.append(("end to end, CP only", (time.perf_counter() - t) / n * 1e6, PEER_US / 30))

  if core is not None:
    gpu.shader_core = core
    t = time.perf_counter()
    for _ in range(n): prg(buf, global_size=4, local_size=64)
    dev.synchronize()
    rows.append(("end to end, empty kernel", (time.perf_counter() - t) / n * 1e6, PEER_US / 30))
  else:
    rows.append(("end to end, empty kernel", float("nan"), PEER_US / 30))

  print(f"launch overhead on {dev} ({dev.arch}), python {sys.version.split()[0]}")
  print(f"  {'case':40s} {'us':>9s} {'target':>8s} {'vs peer 1794us':>15s}")
  for name, us, target in rows:
    verdict = "n/a (no shader core attached)" if us != us else ("PASS" if us <= target else "FAIL")
    peer = f"{PEER_US / us:.0f}x" if "end to end" in name and us == us else ""
    print(f"  {name:40s} {us:9.2f} {target:8.1f} {peer:>15s}  {verdict}")


if __name__ == "__main__":
  main()
