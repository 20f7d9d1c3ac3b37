"""The CPU device's workers: the threads that run a grid's workgroups beside the engine thread that launched it.

`SpinningWorkers` (when llvmlite can compile for this machine) hand out workgroups in native code: the launching
thread posts the grid in shared memory and takes workgroups itself while the workers, which spin for a while after
each grid before they park, take the rest, one compare-and-swap each. A grid launched while the workers spin starts on
every core at once, and its end is seen without a thread being woken; a thread woken from sleep costs 50-100 us on a
virtual machine, twice a launch (docs/tensor.md round 10). `ThreadWorkers` is the fallback: a thread pool, one share
of the grid per core.
"""
from __future__ import annotations
import ctypes
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hcq.errors import HCQError

KernelFn = Any  # a ctypes function with the CPU kernel signature (hcq.drivers.cpu.program.KERNEL_TYPE)
CLOCK = time.CLOCK_MONOTONIC   # the clock of every deadline a native spin is given (read in the IR by clock_gettime)


def now_ns() -> int:
  """CLOCK's time in ns: what a deadline for wait_for and the workers' spin is counted from."""
  return time.clock_gettime_ns(CLOCK)


def spin_seconds(text: str | None) -> float:
  """HCQ_CPU_SPIN_US as seconds (2000 µs when unset); HCQError for anything but a number of microseconds >= 0."""
  try:
    us = float("2000" if text is None else text)
  except ValueError:
    us = -1.0
  if not 0 <= us < float("inf"): raise HCQError(f"HCQ_CPU_SPIN_US={text!r}: give the workers' spin in microseconds, a number >= 0")
  return us * 1e-6


# how long a worker spins for the next grid after one before it parks: back-to-back launches (a Python caller between
# them: 0.2-0.5 ms) find it awake, and an idle device stops costing a core after this. HCQ_CPU_SPIN_US=0: park at once.
# None: HCQ_CPU_SPIN_US, read when a device starts its workers (a bad value fails there, not at import)
SPIN_SECONDS: float | None = None
# the native hand-out counts workgroups in 32 bits: a larger grid is launched as successive parts
MAX_PART = 1 << 31

# ctx words (i64): TICKET = generation << 32 | next workgroup, DONE = workgroups finished in this generation, then the
# grid, each group on a cache line of its own
TICKET, DONE, FN, KERNARGS, GX, GY, TOTAL, BASE, LX, LY, LZ = 0, 8, 16, 17, 18, 19, 20, 21, 22, 23, 24
CTX_WORDS = 32


def _ir() -> str:
  """The hand-out in LLVM IR: work (take the posted grid's workgroups, one compare-and-swap of TICKET each, until none
  is left; a workgroup's fields are read after its swap, so a thread late to one grid takes the next one's whole),
  worker (spin for the next generation, work, repeat; return the last generation seen after `spin` ns without one),
  post (publish a grid as the next generation) and wait (spin until a u64 in memory reaches a value: a grid's DONE, a
  signal; give up at a deadline in ns on CLOCK). Each spin gives the core to any other thread that wants it
  (sched_yield: a spinning worker beside another process's threads, as under pytest -n, costs them little), and sees
  a new grid within about a microsecond; the deadline is the clock's, not a count of spins, because a yield lasts a
  time slice when the cores are busy."""
  # a spin loop's idle block: yield the core, look at the clock, look again (at `again`) or give up (to `out`) at %deadline
  idle = lambda again, out: (f"idle:\n  %yielded = call i32 @sched_yield()\n  %now = call i64 @hcq_now()\n"
                             f"  %more = icmp slt i64 %now, %deadline\n  br i1 %more, label %{again}, label %{out}")
  word = lambda name, i: f"%{name}.p = getelementptr i64, ptr %ctx, i64 {i}"
  grid = [("fn", FN, "ptr"), ("ka", KERNARGS, "ptr"), ("gx", GX, "i64"), ("gy", GY, "i64"), ("total", TOTAL, "i64"),
          ("base", BASE, "i64"), ("lx", LX, "i64"), ("ly", LY, "i64"), ("lz", LZ, "i64")]
  load = "\n".join(f"  {word(n, i)}\n  %{n} = load {t}, ptr %{n}.p" for n, i, t in grid if n != "total")
  store = "\n".join(f"  {word(n, i)}\n  store {t} %{n}, ptr %{n}.p" for n, i, t in grid)
  return f"""
declare i32 @sched_yield()
declare i32 @clock_gettime(i32, ptr)

define internal i64 @hcq_now() {{
  %ts = alloca [2 x i64], align 8
  %r = call i32 @clock_gettime(i32 {CLOCK}, ptr %ts)
  %s = load i64, ptr %ts
  %nsp = getelementptr i64, ptr %ts, i64 1
  %ns = load i64, ptr %nsp
  %sn = mul i64 %s, 1000000000
  %t = add i64 %sn, %ns
  ret i64 %t
}}

define internal void @hcq_pool_run(ptr %ctx, i64 %i) {{
{load}
  %g = add i64 %base, %i
  %x = urem i64 %g, %gx
  %yz = udiv i64 %g, %gx
  %y = urem i64 %yz, %gy
  %z = udiv i64 %yz, %gy
  %x32 = trunc i64 %x to i32
  %y32 = trunc i64 %y to i32
  %z32 = trunc i64 %z to i32
  %lx32 = trunc i64 %lx to i32
  %ly32 = trunc i64 %ly to i32
  %lz32 = trunc i64 %lz to i32
  call void %fn(ptr %ka, i32 %x32, i32 %y32, i32 %z32, i32 %lx32, i32 %ly32, i32 %lz32)
  ret void
}}

define void @hcq_pool_work(ptr %ctx) {{
entry:
  {word("total", TOTAL)}
  {word("done", DONE)}
  br label %look
look:
  %t = load atomic i64, ptr %ctx acquire, align 8
  %ti = and i64 %t, 4294967295
  %total = load i64, ptr %total.p
  %left = icmp ult i64 %ti, %total
  br i1 %left, label %claim, label %out
claim:
  %t1 = add i64 %t, 1
  %r = cmpxchg ptr %ctx, i64 %t, i64 %t1 acq_rel acquire
  %won = extractvalue {{ i64, i1 }} %r, 1
  br i1 %won, label %run, label %look
run:
  call void @hcq_pool_run(ptr %ctx, i64 %ti)
  %old = atomicrmw add ptr %done.p, i64 1 release
  br label %look
out:
  ret void
}}

define i64 @hcq_pool_worker(ptr %ctx, i64 %seen0, i64 %spin) {{
entry:
  %start = call i64 @hcq_now()
  %deadline0 = add i64 %start, %spin
  br label %look
look:
  %seen = phi i64 [ %seen0, %entry ], [ %seen, %idle ], [ %g, %got ]
  %deadline = phi i64 [ %deadline0, %entry ], [ %deadline, %idle ], [ %deadline1, %got ]
  %t = load atomic i64, ptr %ctx acquire, align 8
  %g = lshr i64 %t, 32
  %new = icmp ne i64 %g, %seen
  br i1 %new, label %got, label %idle
{idle("look", "park")}
got:
  call void @hcq_pool_work(ptr %ctx)
  %end = call i64 @hcq_now()
  %deadline1 = add i64 %end, %spin
  br label %look
park:
  ret i64 %seen
}}

define void @hcq_pool_post(ptr %ctx, ptr %fn, ptr %ka, i64 %gx, i64 %gy, i64 %total, i64 %base, i64 %lx, i64 %ly, i64 %lz) {{
{store}
  {word("done", DONE)}
  store i64 0, ptr %done.p
  %t = load i64, ptr %ctx
  %g0 = lshr i64 %t, 32
  %g1 = add i64 %g0, 1
  %g = and i64 %g1, 4294967295
  %t1 = shl i64 %g, 32
  store atomic i64 %t1, ptr %ctx release, align 8
  ret void
}}

define i64 @hcq_pool_wait(ptr %word, i64 %value, i64 %deadline) {{
entry:
  br label %look
look:
  %d = load atomic i64, ptr %word acquire, align 8
  %reached = icmp uge i64 %d, %value
  br i1 %reached, label %yes, label %idle
{idle("look", "no")}
yes:
  ret i64 1
no:
  ret i64 0
}}
"""


_functions: tuple | None = None


def _native() -> tuple:
  """The hand-out's functions (worker, post, work, wait), compiled once per process."""
  global _functions
  from hcq.drivers.codegen import LOCK
  with LOCK:   # two devices starting their workers at once compile it once
    if _functions is None:
      from hcq.drivers.cpu.jit import jit_module
      engine, module = jit_module(_ir(), "the CPU device's workers")
      i64, p = ctypes.c_int64, ctypes.c_void_p
      fn = lambda sym, *types: ctypes.CFUNCTYPE(*types)(engine.get_function_address(sym))
      _functions = (fn("hcq_pool_worker", i64, p, i64, i64), fn("hcq_pool_post", None, p, p, p, *[i64] * 7),
                    fn("hcq_pool_work", None, p), fn("hcq_pool_wait", i64, p, i64, i64), (engine, module))
  return _functions[:4]


class ThreadWorkers:
  """One share of a grid per core: the launching thread runs the first, a thread pool the others."""

  def __init__(self, cores: int, name: str):
    self.cores = cores
    self.pool = ThreadPoolExecutor(cores, thread_name_prefix=name)
    # the pool starts a worker per task while none is idle: one task per core that waits for all the others starts
    # every worker now
    started = threading.Barrier(cores)
    for f in [self.pool.submit(started.wait) for _ in range(cores)]: f.result()

  def run(self, fn: KernelFn, kernargs: int, global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> None:
    gx, gy, gz = global_size
    total = gx * gy * gz

    def span(lo: int, hi: int) -> None:
      for i in range(lo, hi): fn(kernargs, i % gx, i // gx % gy, i // (gx * gy), *local_size)

    workers = max(1, min(self.cores, total))   # a raw queue's empty grid runs nothing, as a GPU's would
    bounds = [total * k // workers for k in range(workers + 1)]
    shares = [self.pool.submit(span, bounds[k], bounds[k + 1]) for k in range(1, workers)]
    try:
      span(bounds[0], bounds[1])
    finally:
      for f in shares: f.result()


class SpinningWorkers:
  """`cores - 1` threads that take workgroups with the launching thread in native code (see the module docstring)."""

  def __init__(self, cores: int, name: str):
    self._worker, self._post, self._work, self._wait = _native()
    self._ctx = (ctypes.c_int64 * (CTX_WORDS + 8))()
    self.ctx = -(-ctypes.addressof(self._ctx) // 64) * 64   # TICKET and DONE on cache lines of their own
    self.ticket = ctypes.c_uint64.from_address(self.ctx + 8 * TICKET)
    spin = SPIN_SECONDS if SPIN_SECONDS is not None else spin_seconds(os.environ.get("HCQ_CPU_SPIN_US"))
    self.spin_ns = int(spin * 1e9)
    self.parked, self.cond = 0, threading.Condition()
    self._posting = threading.Lock()   # one grid at a time: the engine's, or a caller's own CPUProgram.run
    self.threads = [threading.Thread(target=self._serve, name=f"{name}_{i}", daemon=True) for i in range(cores - 1)]
    for t in self.threads: t.start()

  def _generation(self) -> int:
    return self.ticket.value >> 32

  def _serve(self) -> None:
    seen = self._generation()
    while True:
      seen = self._worker(self.ctx, seen, self.spin_ns)   # returns after SPIN_SECONDS without a new grid
      with self.cond:
        self.parked += 1
        while self._generation() == seen: self.cond.wait()
        self.parked -= 1

  def run(self, fn: KernelFn, kernargs: int, global_size: tuple[int, int, int], local_size: tuple[int, int, int]) -> None:
    gx, gy, gz = global_size
    total, address = gx * gy * gz, ctypes.cast(fn, ctypes.c_void_p).value
    with self._posting:
      for base in range(0, total, MAX_PART): self._run_part(address, kernargs, gx, gy, min(MAX_PART, total - base), base, local_size)

  def wait_for(self, address: int, value: int, deadline: int) -> bool:
    """Spin, yielding the core and without the GIL, until the u64 at `address` is at least `value` (True) or
    CLOCK passes `deadline` ns (False, now_ns's count)."""
    return bool(self._wait(address, value, deadline))

  def _run_part(self, address: int, kernargs: int, gx: int, gy: int, part: int, base: int, local_size: tuple[int, int, int]) -> None:
    self._post(self.ctx, address, kernargs, gx, gy, part, base, *local_size)
    with self.cond:   # a worker parks under this lock after looking at the generation: it sees this one, or is woken
      if self.parked: self.cond.notify_all()
    self._work(self.ctx)
    done = self.ctx + 8 * DONE
    if not self._wait(done, part, now_ns() + self.spin_ns):
      while not self._wait(done, part, 0): time.sleep(5e-5)   # a worker still runs a long workgroup it took


def workers(cores: int, name: str) -> "SpinningWorkers | ThreadWorkers":
  """Spinning workers where llvmlite is installed, else a thread pool."""
  try:
    import llvmlite  # noqa: F401
  except ImportError:
    return ThreadWorkers(cores, name)
  return SpinningWorkers(cores, name)
