"""Launch overhead on the emulated NVIDIA GPU (MOCKNV+NV) next to the emulated AMD GPU (MOCKKFD+AMD), in one run.

  python bench/nv_launch.py [--batches N]

Rows (host us per kernel over N timed batches (default 40), timed with the emulated engines paused, then drained
untimed; on both boards the engines decode every launch but run no kernel, so the emulators' threads do not take the
host's time). Each figure is the thread's CPU time (time.thread_time_ns: it leaves out the time other processes had
the CPU), best / median / worst of the batches, then the median wall time:
  fresh launch            prg(buf, global_size=4, local_size=64) of an empty kernel, 100 a batch: argument packing, the
                          launch block (QMD and constant bank 0 on NV, kernargs on AMD) into the kernarg ring, the methods
                          or packets, the submission (target <= 15). On NV the launch fast path (drivers/nv/launch_plan.py)
  fresh launch, generic   the same launches through the generic path (prg.fast_launch = False on NV: the cached launch
                          queue's patch slots and the pushbuffer copy; every NV launch took it before the fast path)
  graph replay            one bound queue of 50 launches submitted again with new launch-block addresses (target <= 3)
"""
from __future__ import annotations
import argparse
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


def host_us(dev, engines: Engines, submit, per: int, batches: int, prepare=lambda: None) -> tuple[float, float, float, float]:
  """(best, median, worst) thread CPU us and median wall us per item over `batches` timed batches."""
  wall, cpu = [], []
  for _ in range(batches):
    args = prepare()
    engines.pause()
    t, c = time.perf_counter_ns(), time.thread_time_ns()
    submit(args)
    cpu.append((time.thread_time_ns() - c) / per / 1e3)
    wall.append((time.perf_counter_ns() - t) / per / 1e3)
    engines.resume()
    dev.synchronize()
  return min(cpu), statistics.median(cpu), max(cpu), statistics.median(wall)


def row(dev_string: str, batches: int) -> dict[str, tuple]:
  dev = hcq.Device(dev_string)
  engines = Engines(dev)
  nv = "MOCKNV" in dev_string
  if nv: prg = dev.program(EMPTY_PTX)
  else:
    sys.path.insert(0, os.path.dirname(__file__))
    from launch import empty_kernel
    prg = dev.program(empty_kernel())
  buf = dev.alloc(64)
  for _ in range(2 * BATCH): prg(buf, global_size=4, local_size=64)
  dev.synchronize()

  def fresh(_) -> None:
    for _ in range(BATCH): prg(buf, global_size=4, local_size=64)

  def generic(_) -> None:
    prg.fast_launch = False
    try:
      fresh(None)
    finally:
      prg.fast_launch = True

  out = {"fresh launch": host_us(dev, engines, fresh, BATCH, batches)}
  if nv: out["fresh launch, generic"] = host_us(dev, engines, generic, BATCH, batches)
  q = dev.compute_queue()
  for i in range(K): q.exec(prg, Variable(f"ka{i}"), (4, 1, 1), (64, 1, 1))
  q.signal(dev.timeline_signal, Variable("t")).bind(dev)
  blocks = [prg.kernargs([buf], (), (4, 1, 1), (64, 1, 1)) for _ in range(K)]
  addrs = [prg.place_kernargs(b, 0) for b in blocks]
  out["graph replay (per kernel)"] = host_us(dev, engines, lambda vals: q.submit(dev, vals), K, batches,
                                             lambda: {**{f"ka{i}": addrs[i] for i in range(K)}, "t": dev.next_timeline()})
  return out


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--batches", type=int, default=40, help="timed batches per row (default 40)")
  batches = ap.parse_args().batches
  if batches < 1: ap.error(f"--batches {batches}: need at least 1")
  load = os.getloadavg()
  rows = {name: row(name, batches) for name in ("MOCKNV+NV", "MOCKKFD+AMD")}
  targets = {"fresh launch": 15.0, "fresh launch, generic": None, "graph replay (per kernel)": 3.0}
  print(f"launch overhead, host us per kernel: thread CPU best / median / worst of {batches} batches, median wall; engines paused; "
        f"{os.cpu_count()} CPUs, load {load[0]:.1f} before and {os.getloadavg()[0]:.1f} after, python {sys.version.split()[0]}")
  print(f"  {'':<26} {'MOCKNV+NV CPU | wall':>30} {'MOCKKFD+AMD CPU | wall':>30} {'target':>7}")
  fmt = lambda r: f"{r[0]:5.1f} /{r[1]:5.1f} /{r[2]:6.1f} | {r[3]:6.1f}" if r else "-"
  for what, target in targets.items():
    nv, amd = rows["MOCKNV+NV"][what], rows["MOCKKFD+AMD"].get(what)
    verdict = "" if target is None else f"{target:7.1f}  {'PASS' if nv[1] <= target else 'FAIL'} (median)"
    print(f"  {what:<26} {fmt(nv):>30} {fmt(amd):>30} {verdict}")


if __name__ == "__main__":
  main()
