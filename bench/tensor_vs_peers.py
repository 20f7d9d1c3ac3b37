"""hcq.tensor on the CPU against numpy and tinygrad 0.14 (CPU device), side by side in one run.

Workloads (issues 7 and 19): fused relu(a*b+c).sum() over 2^24 float32; float32 matmuls 1024^2, 2048^2, 1000^2 and
1024x4096 @ 4096x512; softmax over 4096x4096 float32 rows. Each figure is the best of REPEAT runs, in alternating
blocks of two runs per library (single runs on one core) so that machine noise hits them alike; "first" is the first
run in this process (compile included), "compile CPU" the compiling thread's CPU time per kernel compiled (what the
compile costs on an idle core, whatever the load). Ratios > 1 mean hcq is faster. Matmuls also show GFLOP/s and the
share of the machine's peak: computed (cores x 2 FMA units x f32 lanes x 2 flops x the clock /proc/cpuinfo reports)
and measured (an FMA loop's thread CPU time on one core, times the cores: the clock the core really runs at). The
load average is printed: on a shared machine the wall-clock figures are only as good as it.

`--one-core` pins the process to one CPU with OpenBLAS and hcq on one thread each and times the process's CPU time
(what other processes' load does not inflate: the comparison that holds on a shared machine), alternating single runs
of each library; without it both run on every core of the affinity mask, timed by the wall clock. `--both` runs the
script on every core, then again with `--one-core` in a fresh process (one command, both comparisons). `--only matmul`
runs the matmuls alone. Matmul lines give the best and the median run's GFLOP/s (the spread a shared machine adds),
and the median (and range) of numpy's time over hcq's for the runs made side by side.

To benchmark numpy's OpenBLAS at its best, unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE in the bench command alone
(`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/tensor_vs_peers.py`); with threadpoolctl installed the
script prints the OpenBLAS kernel and thread count it runs. hcq's kernels run the one runtime path: loaded as programs of hcq.Device("CPU") and launched on its compute
queue, waited for on its timeline signal. tinygrad is optional and never imported by hcq itself:

  pip install --target /tmp/tinygrad-bench tinygrad==0.14.0      # or into a bench-only virtualenv
  TINYGRAD_PATH=/tmp/tinygrad-bench python bench/tensor_vs_peers.py [--repeat N]

tinygrad's CPU device compiles with `clang`; this script points it at clang-19 through a symlink in a temporary
directory put first on PATH (nothing system-wide changes)."""
from __future__ import annotations
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ONE_CORE = "--one-core" in sys.argv
if ONE_CORE:  # before numpy (OpenBLAS reads its thread count when loaded) and hcq (its thread count is the affinity's)
  os.environ["OPENBLAS_NUM_THREADS"] = "1"
  os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hcq.tensor import Tensor  # noqa: E402
from hcq.tensor import runtime  # noqa: E402
from hcq.tensor.device import get_device  # noqa: E402


def setup_tinygrad():
  """Import tinygrad on its CPU device with clang-19 as `clang`, or return None with the reason printed."""
  if os.environ.get("TINYGRAD_PATH"): sys.path.insert(0, os.environ["TINYGRAD_PATH"])
  clang = shutil.which("clang-19") or shutil.which("clang")
  if clang is None:
    print("tinygrad: skipped (no clang-19 on PATH)")
    return None
  bindir = tempfile.mkdtemp(prefix="hcq-bench-clang-")
  os.symlink(clang, os.path.join(bindir, "clang"))
  os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
  os.environ.setdefault("DEV", "CPU")
  os.environ.setdefault("CPU", "1")
  try:
    from tinygrad import Tensor as TinyTensor, Device
    assert Device.DEFAULT == "CPU", Device.DEFAULT
    return TinyTensor
  except ImportError:
    print("tinygrad: skipped (not installed: pip install tinygrad==0.14.0, then set TINYGRAD_PATH)")
    return None


CLOCK = time.process_time if ONE_CORE else time.perf_counter  # one core: the process's CPU time, which other load does not inflate


WORKERS_PARK_SECONDS = 0.3  # OpenBLAS's idle workers spin ~2^28 cycles (its THREAD_TIMEOUT) before sleeping


def timed(fn) -> float:
  t0 = CLOCK()
  fn()
  return CLOCK() - t0


MATMULS = [(1024, 1024, 1024), (2048, 2048, 2048), (1000, 1000, 1000), (1024, 4096, 512)]  # m, k, n


def workloads(tiny):
  """(name, numpy fn, hcq fn, tinygrad fn or None, flops or None), the references, and hcq builders for the checks."""
  rng = np.random.default_rng(0)
  n = 1 << 24
  a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
  mats = [(rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, nn)).astype(np.float32)) for m, k, nn in MATMULS]
  s = rng.standard_normal((4096, 4096)).astype(np.float32)

  def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)

  ha, hb, hc, hs = (Tensor(x, device="CPU") for x in (a, b, c, s))  # DEV may name tinygrad's device
  hmats = [(Tensor(x, device="CPU"), Tensor(y, device="CPU")) for x, y in mats]
  tin = (lambda x: tiny(x).realize()) if tiny is not None else None
  out = [("fused relu(a*b+c).sum(), 2^24 f32", lambda: np.maximum(a * b + c, 0).sum(), lambda: (ha * hb + hc).relu().sum().realize(),
          None if tiny is None else (lambda ta, tb, tc: lambda: (ta * tb + tc).relu().sum().realize())(tin(a), tin(b), tin(c)), None)]
  refs, builders = [np.maximum(a * b + c, 0).sum()], [lambda: (ha * hb + hc).relu().sum()]
  for (m, k, nn), (x, y), (hx, hy) in zip(MATMULS, mats, hmats):
    name = f"{m}^2 f32 matmul" if m == k == nn else f"{m}x{k} @ {k}x{nn} f32 matmul"
    tfn = None if tiny is None else (lambda tx, ty: lambda: (tx @ ty).realize())(tin(x), tin(y))
    out.append((name, (lambda x, y: lambda: x @ y)(x, y), (lambda hx, hy: lambda: (hx @ hy).realize())(hx, hy), tfn, 2.0 * m * k * nn))
    refs.append(x @ y)
    builders.append((lambda hx, hy: lambda: hx @ hy)(hx, hy))
  out.append(("softmax over 4096^2 f32", lambda: np_softmax(s), lambda: hs.softmax(-1).realize(),
              None if tiny is None else (lambda ts: lambda: ts.softmax(-1).realize())(tin(s)), None))
  refs.append(np_softmax(s))
  builders.append(lambda: hs.softmax(-1))
  return out, refs, builders


def cpuinfo() -> tuple[int, float]:
  """(f32 lanes of the widest FMA: 16 with AVX-512, 8 with AVX2+FMA, else 4; the clock in MHz) from /proc/cpuinfo."""
  flags, mhz = [], 0.0
  with open("/proc/cpuinfo") as f:
    for line in f:
      if line.startswith("flags") and not flags: flags = line.split()
      if line.startswith("cpu MHz") and not mhz: mhz = float(line.split(":")[1])
  return (16 if "avx512f" in flags else 8 if "fma" in flags else 4), mhz


def computed_peak(cores: int) -> tuple[float, str]:
  """f32 FLOP/s from the core's FMA width and the clock /proc/cpuinfo reports (2 FMA units per core assumed: Zen 2-4
  and Intel server cores with AVX2/AVX-512), and how it was computed."""
  lanes, mhz = cpuinfo()
  return cores * 2 * lanes * 2 * mhz * 1e6, f"{cores} cores x 2 FMA units x {lanes} f32 lanes x 2 x {mhz:.0f} MHz"


def measured_peak(cores: int) -> float:
  """f32 FLOP/s of 12 independent chains of vector FMAs at the host's width on one core (thread CPU time, so other
  processes' load does not count), times the cores."""
  from hcq.drivers.cpu.jit import jit_module
  import ctypes
  lanes = cpuinfo()[0]
  v, chains = f"<{lanes} x float>", 12
  phis = "\n".join(f"  %a{i} = phi {v} [ %init, %entry ], [ %b{i}, %loop ]" for i in range(chains))
  body = "\n".join(f"  %b{i} = call {v} @llvm.fma.v{lanes}f32({v} %a{i}, {v} %x, {v} %y)" for i in range(chains))
  total = "\n".join(f"  %s{i} = fadd {v} %s{i - 1}, %b{i}" for i in range(1, chains))
  ir = f"""declare {v} @llvm.fma.v{lanes}f32({v}, {v}, {v})
declare float @llvm.vector.reduce.fadd.v{lanes}f32(float, {v})
define float @hcq_bench_fma_peak(i64 %n, float %s) {{
entry:
  %init = insertelement {v} zeroinitializer, float %s, i32 0
  %x = shufflevector {v} %init, {v} poison, <{lanes} x i32> zeroinitializer
  %y = fadd {v} %x, %x
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %j, %loop ]
{phis}
{body}
  %j = add i64 %i, 1
  %more = icmp ult i64 %j, %n
  br i1 %more, label %loop, label %done
done:
  %s0 = fadd {v} %b0, zeroinitializer
{total}
  %r = call float @llvm.vector.reduce.fadd.v{lanes}f32(float 0.0, {v} %s{chains - 1})
  ret float %r
}}"""
  engine, mod = jit_module(ir, "the FMA peak loop")
  fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float)(engine.get_function_address("hcq_bench_fma_peak"))
  iters, best = 20_000_000, float("inf")
  for _ in range(5):
    t0 = time.thread_time()
    fn(iters, 1e-9)
    best = min(best, time.thread_time() - t0)
  return cores * iters * chains * lanes * 2 / best


def openblas_info() -> str:
  try:
    from threadpoolctl import threadpool_info
  except ImportError:
    return "threadpoolctl not installed: OpenBLAS kernel unknown"
  blas = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
  return "; ".join(f"OpenBLAS {i.get('version')} kernel {i.get('architecture')}, {i.get('num_threads')} threads" for i in blas) or "no OpenBLAS found"


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeat", type=int, default=10)
  parser.add_argument("--one-core", action="store_true", help="pin the process to one CPU, OpenBLAS and hcq on one thread "
                      "each, and time with the process's CPU time (the comparison a loaded machine does not skew)")
  parser.add_argument("--both", action="store_true", help="run on every core, then again with --one-core in a fresh process")
  parser.add_argument("--only", default="", help="run only the workloads whose name contains this text (e.g. matmul)")
  args = parser.parse_args()
  tiny = setup_tinygrad()
  opened = timed(lambda: get_device("CPU"))   # opening the tensor CPU device sets LLVM up (once per process)
  cores = get_device("CPU").threads
  print(f"hcq's CPU device opened in {opened * 1e3:.0f} ms (LLVM's set-up included, once per process): {get_device('CPU')!r}, "
        f"{cores} workgroups per kernel")
  peak_c, how = computed_peak(cores)
  peak_m = measured_peak(cores)
  print(f"f32 peak: computed {peak_c / 1e9:.0f} GFLOP/s ({how}); measured {peak_m / 1e9:.0f} GFLOP/s (FMA loop on one core x {cores})")
  print(f"numpy {np.__version__}: {openblas_info()}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')} "
        f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')}")
  print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; timing "
        f"{'CPU time on one core' if ONE_CORE else f'wall clock, {cores} threads each'}")
  cases, refs, builders = workloads(tiny)
  keep = [i for i, case in enumerate(cases) if args.only in case[0]]
  cases, refs, builders = [cases[i] for i in keep], [refs[i] for i in keep], [builders[i] for i in keep]
  print(f"{'workload':38} {'numpy':>9} {'hcq':>9} {'tinygrad':>9} {'hcq/np':>7} {'hcq/tiny':>8}  first run: hcq (compile wall; CPU per kernel) | tinygrad")
  flops_lines = []
  for (name, np_fn, hcq_fn, tiny_fn, flops), ref, build in zip(cases, refs, builders):
    compiled_before, kernels_before, cpu_before = runtime.stats["compile_seconds"], runtime.stats["kernels_compiled"], time.thread_time()
    first_hcq = timed(hcq_fn)
    compile_cpu = (time.thread_time() - cpu_before) / max(1, runtime.stats["kernels_compiled"] - kernels_before)
    compile_s = runtime.stats["compile_seconds"] - compiled_before
    got = build().numpy()
    err = float(np.max(np.abs(got - ref)) / max(1.0, float(np.max(np.abs(ref)))))
    first_tiny = timed(tiny_fn) if tiny_fn else None
    best = {"numpy": [], "hcq": [], "tinygrad": []}
    # blocks of runs per library, alternated: interleaving single runs lets OpenBLAS's and tinygrad's worker
    # threads (which spin for a while after a call) steal the second core from whoever runs next, so each block
    # starts after a pause that lets them sleep (a 1024^2 hcq call right after a numpy call: 33 ms median; 0.2 s
    # later: 18-23 ms); blocks of two runs, so that a burst of another tenant's load on a shared machine (medians
    # half the best for seconds) hits both libraries alike rather than one library's whole block; on one core (no
    # worker threads) single runs alternate
    blocks, per_block = (max(1, args.repeat), 1) if ONE_CORE else (max(2, args.repeat // 2), 2 if args.repeat >= 2 else 1)
    for block in range(blocks):
      for lib, fn in (("numpy", np_fn), ("hcq", hcq_fn), ("tinygrad", tiny_fn)):
        if fn is None: continue
        if not ONE_CORE: time.sleep(WORKERS_PARK_SECONDS)
        if block < 2: fn()  # a warm-up run per library (the first blocks)
        best[lib].extend(timed(fn) for _ in range(per_block))
    t_np, t_hcq = min(best["numpy"]), min(best["hcq"])
    t_tiny = min(best["tinygrad"]) if best["tinygrad"] else None
    fmt = lambda t: f"{t * 1e3:7.1f}ms" if t is not None else "    n/a  "
    ratio_tiny = f"{t_tiny / t_hcq:7.2f}x" if t_tiny else "    n/a "
    print(f"{name:38} {fmt(t_np):>9} {fmt(t_hcq):>9} {fmt(t_tiny):>9} {t_np / t_hcq:6.2f}x {ratio_tiny}  "
          f"{first_hcq * 1e3:.0f} ms ({compile_s * 1e3:.0f} ms; {compile_cpu * 1e3:.0f} ms) | {fmt(first_tiny).strip()}   [max rel err {err:.1e}]", flush=True)
    if flops:
      median = lambda ts: sorted(ts)[len(ts) // 2]
      share = lambda ts: (f"{flops / min(ts) / 1e9:5.0f} GFLOP/s = {flops / min(ts) / peak_c:4.0%} / {flops / min(ts) / peak_m:4.0%} "
                          f"(median {flops / median(ts) / 1e9:3.0f})")
      # numpy's time over hcq's for the runs made side by side (a single run each when alternated on one core, the
      # runs at the same place of their blocks otherwise): the machine's drift between pairs cancels out of their median
      pairs = sorted(n / h for n, h in zip(best["numpy"], best["hcq"]))
      flops_lines.append(f"{name:38} numpy {share(best['numpy'])}   hcq {share(best['hcq'])}   "
                         f"paired hcq/np {median(pairs):.2f} ({pairs[0]:.2f}-{pairs[-1]:.2f})")
  print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
  print("matmul throughput, as a share of the computed / measured peak:")
  print("\n".join(flops_lines))
  print("ratios: numpy time / hcq time and tinygrad time / hcq time (higher is better for hcq)")
  print("targets: fused >= 1.5x numpy; matmul >= 5x tinygrad and >= 1x numpy (issue 19); softmax >= 1x numpy; compile <= 50 ms per kernel")
  if args.both and not ONE_CORE:  # the one-core comparison needs a fresh process: OpenBLAS and hcq fix their threads at load
    print("\n--- the same on one core ---", flush=True)
    sys.exit(subprocess.call([sys.executable, os.path.abspath(__file__), "--one-core", *[a for a in sys.argv[1:] if a != "--both"]]))


if __name__ == "__main__":
  main()
