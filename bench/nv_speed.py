"""NVIDIA queue speed, side by side with AMD: host cost of copy submissions and signal round trips.

  python bench/nv_speed.py [--n 300]

Emulated boards (always; MOCKNV+NV next to MOCKKFD+AMD, one run, same machine):
  copy submit, fresh      build a copy queue (256 B host->host copy + timeline signal) and submit it: host us each
  copy submit, replay     the same queue bound once and submitted again with new values, back to back: host us each
                          (where the emulated GPU runs a submission slower than the host makes one, this is its pace)
  replay, GPU caught up   the same, each timed after the GPU has run the previous ones: the host's own cost
  signal round trip       a compute queue's signal submitted and waited for on the host: us each, end to end
                          (the emulated GPU's thread included)
Real NVIDIA GPU (only when /dev/nvidiactl is present and hcq.Device("NV") opens a real one): copy bandwidth
host->device and device->host for 1 MiB .. 1 GiB and the latency of a 4-byte copy, next to torch's (or cupy's) when
importable. The figures are medians; the machines are noisy, so read the ratios.
"""
from __future__ import annotations
import argparse
import os
import statistics
import time

import hcq
from hcq.sym import Variable


def _median_us(fn, n: int, per: int = 1, before=None) -> float:
  """Median wall time of `fn` in µs (divided by `per`), each call after `before()` (untimed) when given."""
  times = []
  for _ in range(n):
    if before: before()
    t0 = time.perf_counter()
    fn()
    times.append((time.perf_counter() - t0) * 1e6 / per)
  return statistics.median(times)


def emulated_row(dev_string: str, n: int) -> dict[str, float]:
  dev = hcq.Device(dev_string)
  src, dst = dev.alloc(256, "host"), dev.alloc(256, "host")

  def fresh():
    q = dev.copy_queue().wait(dev.timeline_signal, Variable("wait")).copy(dst.addr, src.addr, 256).signal(dev.timeline_signal, Variable("signal"))
    dev.timeline_submit(q)

  bound = dev.copy_queue().wait(dev.timeline_signal, Variable("wait")).copy(dst.addr, src.addr, 256) \
             .signal(dev.timeline_signal, Variable("signal")).bind(dev)
  sig = dev.new_signal()
  k = [0]

  def round_trip():
    k[0] += 1
    dev.compute_queue().signal(sig, k[0]).submit(dev)
    sig.wait(k[0], 10)

  row = {"copy submit, fresh": _median_us(fresh, n)}
  dev.synchronize()
  row["copy submit, replay"] = _median_us(lambda: dev.timeline_submit(bound), n)
  dev.synchronize()
  row["replay, GPU caught up"] = _median_us(lambda: dev.timeline_submit(bound), n, before=dev.synchronize)
  row["signal round trip"] = _median_us(round_trip, n)
  dev.release_signal(sig)
  src.free(), dst.free()
  return row


def real_nvidia() -> object | None:
  """The real NV device when this machine has one, else None (the emulated board never counts)."""
  if not os.path.exists("/dev/nvidiactl"): return None
  try:
    dev = hcq.Device("NV")
  except Exception as e:  # noqa: BLE001 -- the section is skipped with the reason
    print(f"real NVIDIA GPU: not opened ({e})")
    return None
  return None if "MOCK" in str(dev.spec) else dev


def hcq_copy_gbps(dev, n: int, to_device: bool, reps: int = 5) -> float:
  host, gpu = dev.alloc(n, "host"), dev.alloc(n, "device")
  dst, src = (gpu, host) if to_device else (host, gpu)
  q = dev.copy_queue().wait(dev.timeline_signal, Variable("wait")).copy(dst.addr, src.addr, n).signal(dev.timeline_signal, Variable("signal")).bind(dev)
  dev.wait_timeline(dev.timeline_submit(q))
  t = _median_us(lambda: dev.wait_timeline(dev.timeline_submit(q)), reps)
  host.free(), gpu.free()
  return n / t / 1e3


def peer_copy_gbps(n: int, to_device: bool, reps: int = 5) -> tuple[str, float] | None:
  try:
    import torch
    if not torch.cuda.is_available(): return None
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(n, dtype=torch.uint8, device="cuda")
    copy = (lambda: gpu.copy_(host, non_blocking=True)) if to_device else (lambda: host.copy_(gpu, non_blocking=True))

    def once():
      copy()
      torch.cuda.synchronize()
    once()
    return "torch", n / _median_us(once, reps) / 1e3
  except ImportError:
    pass
  try:
    import cupy
    import numpy as np
    host = cupy.cuda.alloc_pinned_memory(n)
    arr = np.frombuffer(host, np.uint8, n)
    gpu = cupy.empty(n, dtype=cupy.uint8)

    def once():
      gpu.set(arr) if to_device else gpu.get(out=arr)
      cupy.cuda.runtime.deviceSynchronize()
    once()
    return "cupy", n / _median_us(once, reps) / 1e3
  except ImportError:
    return None


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--n", type=int, default=300, help="submissions timed per figure (median taken)")
  args = ap.parse_args()
  rows = {name: emulated_row(name, args.n) for name in ("MOCKNV+NV", "MOCKKFD+AMD")}
  print(f"emulated boards, host us per operation (median of {args.n}; {os.cpu_count()} CPUs)")
  print(f"  {'':<22} {'MOCKNV+NV':>10} {'MOCKKFD+AMD':>12} {'NV/AMD':>7}")
  for what in rows["MOCKNV+NV"]:
    nv, amd = rows["MOCKNV+NV"][what], rows["MOCKKFD+AMD"][what]
    print(f"  {what:<22} {nv:10.1f} {amd:12.1f} {nv / amd:7.2f}")
  dev = real_nvidia()
  if dev is None:
    print("real NVIDIA GPU: none here (the H200 section runs only where one is present)")
    return
  print(f"real NVIDIA GPU {dev}: copy bandwidth GB/s (hcq copy engine vs CUDA through torch or cupy)")
  for n in (1 << 20, 16 << 20, 256 << 20, 1 << 30):
    for to_device in (True, False):
      ours, peer = hcq_copy_gbps(dev, n, to_device), peer_copy_gbps(n, to_device)
      way = "host->device" if to_device else "device->host"
      print(f"  {n >> 20:5d} MiB {way:<13} hcq {ours:7.2f}" + (f"   {peer[0]} {peer[1]:7.2f}" if peer else "   (no torch/cupy)"))
  lat = hcq_copy_gbps(dev, 4, True, reps=50)
  print(f"  4-byte copy latency: hcq {4 / lat / 1e3:.1f} us end to end")


if __name__ == "__main__":
  main()
