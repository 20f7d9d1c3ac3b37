"""python -m hcq.check: a short hardware check of one device, printed as one table.

  python -m hcq.check [--dev NV] [--bytes 1073741824] [--timeout 60]

It opens the device, allocates every memory kind, copies --bytes (1 GiB) host->device->host through the copy engine
and compares the bytes, orders a signal/wait across the copy and compute queues, checks timestamps, and replays a
bound queue with patched values. Every step runs even when an earlier one failed (after the open); a step that fails
shows why, and an RM call the kernel (or gVisor's nvproxy) refuses is named with its NV_STATUS. It never ends in a
traceback: the exit status is 0 when every step passed, 1 otherwise, 2 for bad arguments.

Needs only Python and numpy besides hcq itself (the GPU machine has no package registry). Runs on the emulated boards
too (DEV=MOCKNV+NV, MOCKKFD+AMD) with small --bytes, which is how the tests run it.
"""
from __future__ import annotations
import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

KINDS = ("device", "host", "uncached", "cpu")


@dataclass
class Row:
  step: str
  ok: bool
  detail: str
  seconds: float


def describe(e: BaseException) -> str:
  """One line for a failure; an RM refusal names the call and its status (RMCallError's message does)."""
  status = getattr(e, "status_name", None)
  head = "RM refused" if status else type(e).__name__
  return f"{head}: {e}".replace("\n", " ")


class Check:
  """The steps on one open device; each returns a detail string or raises."""

  def __init__(self, dev, nbytes: int, timeout: float):
    self.dev, self.nbytes, self.timeout = dev, nbytes, timeout

  def memory_kinds(self) -> str:
    out = []
    for kind in KINDS:
      b = self.dev.alloc(1 << 20, kind)
      equal = "=" if b.host_addr == b.addr else "!=" if b.host_addr is not None else "gpu-only"
      out.append(f"{kind} {b.addr:#x} ({equal})")
      b.free()
    return ", ".join(out)

  def copy_both_ways(self) -> str:
    n, dev = self.nbytes, self.dev
    src, mid, dst = dev.alloc(n, "host"), dev.alloc(n, "device"), dev.alloc(n, "host")
    try:
      data = np.random.default_rng(17).integers(0, 256, n, dtype=np.uint8)
      src.view()[:] = data
      dst.view()[:] = 0
      t = []
      for d, s in ((mid, src), (dst, mid)):
        q = dev.copy_queue().copy(d.addr, s.addr, n).signal(dev.timeline_signal, dev.timeline_value)
        t0 = time.perf_counter()
        dev.wait_timeline(dev.timeline_submit(q), self.timeout)
        t.append(time.perf_counter() - t0)
      bad = np.flatnonzero(dst.view() != data)
      if bad.size: raise AssertionError(f"{bad.size} of {n} bytes differ, the first at offset {bad[0]}")
      return f"{n / 2**20:.0f} MiB: host->device {n / t[0] / 1e9:.2f} GB/s, device->host {n / t[1] / 1e9:.2f} GB/s, bytes equal"
    finally:
      for b in (src, mid, dst): b.free()

  def signal_wait(self) -> str:
    """The compute queue waits for the copy queue's signal, which waits for a gate the host opens."""
    dev, n = self.dev, 1 << 16
    src, dst = dev.alloc(n, "host"), dev.alloc(n, "host")
    gate, copied, after = dev.new_signal(), dev.new_signal(), dev.new_signal()
    try:
      src.view()[:] = np.arange(n, dtype=np.uint8)
      dev.compute_queue().wait(copied, 1).signal(after, 1).submit(dev)
      dev.copy_queue().wait(gate, 1).copy(dst.addr, src.addr, n).signal(copied, 1).submit(dev)
      time.sleep(0.01)
      if after.value or copied.value: raise AssertionError("a queue ran past a wait whose signal was not reached")
      gate.value = 1
      after.wait(1, self.timeout)
      if not (dst.view() == src.view()).all(): raise AssertionError("the copy had not landed when the waiting queue signalled")
      if after.timestamp < copied.timestamp: raise AssertionError(f"timestamps out of order: {after.timestamp} < {copied.timestamp}")
      return "compute waited for copy, copy waited for the host; payloads and order right"
    finally:
      for s in (gate, copied, after): dev.release_signal(s)
      src.free(), dst.free()

  def timestamps(self) -> str:
    dev = self.dev
    a, b, done = dev.new_signal(), dev.new_signal(), dev.new_signal()
    try:
      dev.compute_queue().timestamp(a).memory_barrier().timestamp(b).signal(done, 1).submit(dev)
      done.wait(1, self.timeout)  # pooled signals may carry an old timestamp: the signal after both says they are written
      if not 0 < a.timestamp <= b.timestamp: raise AssertionError(f"timestamps {a.timestamp}, {b.timestamp}: expected 0 < first <= second")
      return f"two timestamps {b.timestamp_ns - a.timestamp_ns:.0f} ns apart"
    finally:
      for s in (a, b, done): dev.release_signal(s)

  def replay(self) -> str:
    from hcq.sym import Variable
    dev, n = self.dev, 4096
    bufs = [dev.alloc(n, "host") for _ in range(4)]
    sig = dev.new_signal()
    try:
      for i, b in enumerate(bufs): b.view()[:] = i + 1
      q = dev.copy_queue().copy(Variable("dst"), Variable("src"), n).signal(sig, Variable("v")).bind(dev)
      for k, (s, d) in enumerate([(0, 1), (2, 3), (3, 0), (1, 2)], start=1):
        q.submit(dev, {"src": bufs[s].addr, "dst": bufs[d].addr, "v": k})
        sig.wait(k, self.timeout)
        if not (bufs[d].view() == bufs[s].view()).all(): raise AssertionError(f"replay {k}: buffer {d} is not a copy of buffer {s}")
      return "4 replays of one bound queue with new addresses and signal values"
    finally:
      dev.release_signal(sig)
      for b in bufs: b.free()


  def nv_launch(self) -> str:
    """The kernel of hcq.drivers.nv.check_kernel (ptxas's cubin for the device's arch) over 1000 floats, against numpy."""
    from hcq.drivers.nv.check_kernel import cubin_for, ptx_for
    from hcq.drivers.nv.compile import record
    from hcq.drivers.nv.cubin import read_cubin
    dev, n, arch = self.dev, 1000, self.dev.arch.sm
    cubin = cubin_for(arch)
    record(read_cubin(cubin), ptx_for(arch))  # what ptxas made it from: the emulated SM runs that PTX
    prg = dev.program(cubin)
    x, out = dev.alloc(4 * n, "host"), dev.alloc(4 * n, "host")
    try:
      data = np.random.default_rng(5).standard_normal(n).astype(np.float32)
      x.view(np.float32)[:] = data
      out.view(np.float32)[:] = np.nan
      # a cubin alone gives its parameters' sizes, not their types: addresses as ints, the float as a float
      secs = prg(vals=(out.addr, x.addr, np.float32(1.5), n), global_size=(n + 127) // 128, local_size=128, wait=True)
      want = (data.astype(np.float64) * 1.5 + np.arange(n)).astype(np.float32)  # fma.rn: one rounding of the exact a*x+i
      bad = np.flatnonzero(out.view(np.float32) != want)
      if bad.size: raise AssertionError(f"{bad.size} of {n} results differ, the first at {bad[0]}: {out.view(np.float32)[bad[0]]} != {want[bad[0]]}")
      return f"{prg.name} ({arch} cubin, QMD v{dev.arch.qmd}) over {n} floats: results equal, {secs * 1e6:.0f} us"
    finally:
      x.free(), out.free()


def run(dev_string: str, nbytes: int, timeout: float, opener: Callable[[str], object] | None = None) -> list[Row]:
  """Every step's row; the open first (nothing else runs when it fails). `opener` makes the device (default hcq.Device)."""
  rows: list[Row] = []

  def step(name: str, fn: Callable[[], str]) -> bool:
    t0 = time.perf_counter()
    try:
      detail, ok = fn(), True
    except KeyboardInterrupt:
      raise
    except BaseException as e:  # noqa: BLE001 -- the check reports every failure as a row, never a traceback
      detail, ok = describe(e), False
    rows.append(Row(name, ok, detail, time.perf_counter() - t0))
    return ok

  holder = {}

  def open_device() -> str:
    import hcq
    holder["dev"] = dev = (opener or hcq.Device)(dev_string)
    arch = getattr(getattr(dev, "arch", None), "name", None) or getattr(dev, "arch", "") or ""
    facts = [f for f in (arch, getattr(dev, "uuid", None), getattr(getattr(dev, "rm", None), "driver_version", None)) if f]
    return f"{dev} ({', '.join(facts)})" if facts else str(dev)

  if not step("open", open_device): return rows
  c = Check(holder["dev"], nbytes, timeout)
  for name, fn in (("memory kinds", c.memory_kinds), ("copy both ways", c.copy_both_ways), ("signal/wait", c.signal_wait),
                   ("timestamps", c.timestamps), ("replay", c.replay)):
    step(name, fn)
  if hasattr(getattr(holder["dev"], "arch", None), "sm"): step("launch", c.nv_launch)  # NV: a kernel through a QMD
  return rows


def table(rows: list[Row]) -> str:
  width = max(len(r.step) for r in rows)
  lines = [f"{'step':<{width}}  result  {'seconds':>7}  detail"]
  lines += [f"{r.step:<{width}}  {'ok' if r.ok else 'FAIL':<6}  {r.seconds:7.2f}  {r.detail}" for r in rows]
  return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m hcq.check", description=__doc__.splitlines()[0])
  ap.add_argument("--dev", default=os.environ.get("DEV", "NV"), help="the device (a DEV string; default $DEV, else NV)")
  ap.add_argument("--bytes", type=int, default=1 << 30, help="bytes copied each way (default 1 GiB)")
  ap.add_argument("--timeout", type=float, default=60.0, help="seconds any one wait may take")
  args = ap.parse_args(argv)
  if args.bytes <= 0 or args.timeout <= 0:
    print("python -m hcq.check: --bytes and --timeout must be positive", file=sys.stderr)
    return 2
  rows = run(args.dev, args.bytes, args.timeout)
  print(f"hcq.check {args.dev}  python {sys.version.split()[0]}  numpy {np.__version__}  {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
  print(table(rows))
  return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
