"""Runtime: schedule → loop IR → source → compiled program (cached by kernel AST and device) → launched on the device's
queue (hcq.tensor.device: one path through the HCQ core for the CPU and AMD)."""
from __future__ import annotations
from dataclasses import dataclass
import os
import time
from hcq.tensor.lazy import LazyNode
from hcq.tensor.loops import LoopKernel, plan
from hcq.tensor.schedule import KernelSpec, ScheduleItem, Scheduler


@dataclass
class CompiledKernel:
  """One cached kernel: its loop plan, source, program and compile time."""
  loop: LoopKernel
  source: str
  program: object
  compile_seconds: float


_cache: dict[tuple[str, str], CompiledKernel] = {}
DEBUG = int(os.environ.get("HCQ_TENSOR_DEBUG", "0"))
stats = {"kernels_compiled": 0, "compile_seconds": 0.0, "kernels_run": 0}


def get_kernel(spec: KernelSpec, device) -> CompiledKernel:
  """The compiled kernel for `spec` on `device`, compiling it once per AST."""
  key = (device.name, spec.key)
  if key not in _cache:
    name = f"k_{spec.key[:12]}"
    t0 = time.perf_counter()
    loop = device.renderer.adapt(plan(spec, name))
    src = device.renderer.render(loop)
    lib = device.compile(src)
    prog = device.program(name, lib, len(spec.buf_dtypes), device.renderer.workspace(loop))
    seconds = time.perf_counter() - t0
    stats["kernels_compiled"] += 1
    stats["compile_seconds"] += seconds
    if DEBUG >= 3: print(loop.describe())
    if DEBUG >= 2: print(src)
    _cache[key] = CompiledKernel(loop, src, prog, seconds)
  return _cache[key]


def run_item(item: ScheduleItem, device) -> None:
  spec = item.kernel
  if any(s == 0 for s in spec.out_shape): return
  ck = get_kernel(spec, device)
  lk = ck.loop
  global_size, local_size, vals = device.renderer.launch(lk)
  t = ck.program(*item.buffers, global_size=global_size, local_size=local_size, vals=vals, wait=DEBUG >= 1)
  stats["kernels_run"] += 1
  if DEBUG >= 1:
    print(f"{ck.loop.name} out={spec.out_shape} full={spec.full_shape} reduce={spec.reduce_axes} vec={lk.vec_axis}x{lk.vec_width} "
          f"unroll={lk.unroll} thread={lk.thread_axis} {t * 1e3:.3f} ms (compile {ck.compile_seconds * 1e3:.1f} ms)")


def realize(nodes: list[LazyNode], device) -> list[ScheduleItem]:
  """Compute every node (turning each into a BUFFER node); returns the schedule that was run."""
  sched = Scheduler(device)
  try:
    for n in nodes: sched.realize(n)
    for item in sched.items: run_item(item, device)
    device.synchronize()  # a fault on the device is raised here
  except BaseException:  # nothing may look computed that was not (a compile error, a fault): the graph stays lazy
    sched.undo()
    raise
  return sched.items
