"""Launch overhead on the emulated NVIDIA GPU (MOCKNV+NV) next to the emulated AMD GPU (MOCKKFD+AMD), in one run.

  python bench/nv_launch.py

Rows (host us per kernel, median (best) of 20 batches, timed with the emulated engines paused, then drained untimed; on
both boards the engines decode every launch but run no kernel, so the emulators' threads do not take the host's time).
Each figure is wall time, then the thread's CPU time (time.thread_time): on a shared machine the wall time also counts
the time other processes had the CPU, the CPU time does not:
  fresh launch     prg(...) of an empty kernel: argument packing, the launch block (QMD and constant bank 0 on NV,
                   kernargs on AMD) into the kernarg ring, the cached queue's patch slots, the submission (target <= 15)
  graph replay     one bound queue of 50 launches submitted again with new launch-block addresses (target <= 3)
"""
from __future__ import annotations
import os
import statistics
import sys
import time

import hcq
from hcq.sym import Variable

BATCH, K = 100, 50
EMPTY_PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry empty(.param .u64 a)
{
  ret;
}
"""


class Engines:
  """Pause and resume a device's emulated engines (what the GPU does is not timed)."""

  def __init__(self, dev):
    self.dev = dev
    if "MOCKNV" in str(dev.spec):
      gpu = dev.os.rm.gpu
      gpu.compute._run = lambda *args: None  # the compute class decodes each QMD; the SM runs nothing (as AMD's below)
      ring = gpu.doorbell

      def pause():  # doorbells go unheard (no channel thread wakes) until resume rings them all
        gpu.doorbell = lambda token: None

      def resume():
        gpu.doorbell = ring
        for ch in list(gpu.channels.values()): ch.doorbell.set()
      self.pause, self.resume = pause, resume
    else:
      gpu = next(iter(dev.os.kfd.nodes.values())).gpu
      gpu.shader_core = lambda g, state, cancel=None: None  # the CP consumes dispatches; nothing runs
      self.pause, self.resume = gpu.running.clear, gpu.running.set


def host_us(dev, engines: Engines, submit, per: int, prepare=lambda: None) -> tuple[float, float, float, float]:
  """(median, best) wall and (median, best) CPU host us per item over 20 timed batches."""
  wall, cpu = [], []
  for _ in range(20):
    args = prepare()
    engines.pause()
    t, c = time.perf_counter(), time.thread_time()
    submit(args)
    cpu.append((time.thread_time() - c) / per * 1e6)
    wall.append((time.perf_counter() - t) / per * 1e6)
    engines.resume()
    dev.synchronize()
  return statistics.median(wall), min(wall), statistics.median(cpu), min(cpu)


def row(dev_string: str) -> dict[str, float]:
  dev = hcq.Device(dev_string)
  engines = Engines(dev)
  if "MOCKNV" in dev_string: prg = dev.program(EMPTY_PTX)
  else:
    sys.path.insert(0, os.path.dirname(__file__))
    from launch import empty_kernel
    prg = dev.program(empty_kernel())
  buf = dev.alloc(64)
  for _ in range(2 * BATCH): prg(buf, global_size=4, local_size=64)
  dev.synchronize()

  def fresh(_) -> None:
    for _ in range(BATCH): prg(buf, global_size=4, local_size=64)

  out = {"fresh launch": host_us(dev, engines, fresh, BATCH)}
  q = dev.compute_queue()
  for i in range(K): q.exec(prg, Variable(f"ka{i}"), (4, 1, 1), (64, 1, 1))
  q.signal(dev.timeline_signal, Variable("t")).bind(dev)
  blocks = [prg.kernargs([buf], (), (4, 1, 1), (64, 1, 1)) for _ in range(K)]
  addrs = [prg.place_kernargs(b, 0) for b in blocks]
  out["graph replay (per kernel)"] = host_us(dev, engines, lambda vals: q.submit(dev, vals), K,
                                             lambda: {**{f"ka{i}": addrs[i] for i in range(K)}, "t": dev.next_timeline()})
  return out


def main() -> None:
  rows = {name: row(name) for name in ("MOCKNV+NV", "MOCKKFD+AMD")}
  targets = {"fresh launch": 15.0, "graph replay (per kernel)": 3.0}
  print(f"launch overhead, host us per kernel: median (best) of 20 batches, wall | CPU; engines paused; {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}, python {sys.version.split()[0]}")
  print(f"  {'':<26} {'MOCKNV+NV wall | CPU':>30} {'MOCKKFD+AMD wall | CPU':>30} {'target':>7}")
  fmt = lambda w, wb, c, cb: f"{w:7.1f} ({wb:5.1f}) | {c:6.1f} ({cb:5.1f})"
  for what, target in targets.items():
    nv, amd = rows["MOCKNV+NV"][what], rows["MOCKKFD+AMD"][what]
    print(f"  {what:<26} {fmt(*nv):>30} {fmt(*amd):>30} {target:7.1f}  {'PASS' if nv[0] <= target else 'FAIL'}")


if __name__ == "__main__":
  main()
