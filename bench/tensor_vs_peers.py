"""hcq.tensor on the CPU against numpy and tinygrad 0.14 (CPU device), side by side in one run.

Workloads (issue 7): fused relu(a*b+c).sum() over 2^24 float32; 1024x1024 float32 matmul; softmax over
4096x4096 float32 rows. Each figure is the best of REPEAT runs, in two alternating blocks per library so that
machine noise hits them alike; "first" is the first run in this process (compile included). Ratios > 1 mean hcq is
faster. hcq's kernels run the one runtime path: loaded as programs of hcq.Device("CPU") and launched on its compute
queue, waited for on its timeline signal. tinygrad is optional and never imported by hcq itself:

  pip install --target /tmp/tinygrad-bench tinygrad==0.14.0      # or into a bench-only virtualenv
  TINYGRAD_PATH=/tmp/tinygrad-bench python bench/tensor_vs_peers.py [--repeat N]

tinygrad's CPU device compiles with `clang`; this script points it at clang-19 through a symlink in a temporary
directory put first on PATH (nothing system-wide changes)."""
from __future__ import annotations
import argparse
import os
import shutil
import sys
import tempfile
import time
import numpy as np

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


def timed(fn) -> float:
  t0 = time.perf_counter()
  fn()
  return time.perf_counter() - t0


def workloads(tiny):
  rng = np.random.default_rng(0)
  n = 1 << 24
  a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
  m1, m2 = rng.standard_normal((1024, 1024)).astype(np.float32), rng.standard_normal((1024, 1024)).astype(np.float32)
  s = rng.standard_normal((4096, 4096)).astype(np.float32)

  def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)

  ha, hb, hc, hm1, hm2, hs = (Tensor(x, device="CPU") for x in (a, b, c, m1, m2, s))  # DEV may name tinygrad's device
  out = [
    ("fused relu(a*b+c).sum(), 2^24 f32", lambda: np.maximum(a * b + c, 0).sum(),
     lambda: (ha * hb + hc).relu().sum().realize(), None),
    ("1024^2 f32 matmul", lambda: m1 @ m2, lambda: (hm1 @ hm2).realize(), None),
    ("softmax over 4096^2 f32", lambda: np_softmax(s), lambda: hs.softmax(-1).realize(), None),
  ]
  refs = [np.maximum(a * b + c, 0).sum(), m1 @ m2, np_softmax(s)]
  if tiny is not None:
    ta, tb, tc, tm1, tm2, ts = (tiny(x).realize() for x in (a, b, c, m1, m2, s))
    out[0] = out[0][:3] + (lambda: (ta * tb + tc).relu().sum().realize(),)
    out[1] = out[1][:3] + (lambda: (tm1 @ tm2).realize(),)
    out[2] = out[2][:3] + (lambda: ts.softmax(-1).realize(),)
  return out, refs, [lambda: (ha * hb + hc).relu().sum(), lambda: hm1 @ hm2, lambda: hs.softmax(-1)]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeat", type=int, default=10)
  args = parser.parse_args()
  tiny = setup_tinygrad()
  from hcq.drivers.cpu.jit import host_jit
  print(f"llvmlite JIT set-up (once per process): {timed(host_jit) * 1e3:.0f} ms; device: {get_device('CPU')!r}, "
        f"{get_device('CPU').threads} workgroups per kernel")
  cases, refs, builders = workloads(tiny)
  print(f"{'workload':38} {'numpy':>9} {'hcq':>9} {'tinygrad':>9} {'hcq/np':>7} {'hcq/tiny':>8}  first run: hcq (compile) | tinygrad")
  for (name, np_fn, hcq_fn, tiny_fn), ref, build in zip(cases, refs, builders):
    compiled_before = runtime.stats["compile_seconds"]
    first_hcq = timed(hcq_fn)
    compile_s = runtime.stats["compile_seconds"] - compiled_before
    got = build().numpy()
    err = float(np.max(np.abs(got - ref)) / max(1.0, float(np.max(np.abs(ref)))))
    first_tiny = timed(tiny_fn) if tiny_fn else None
    best = {"numpy": [], "hcq": [], "tinygrad": []}
    # blocks of runs per library, alternated: interleaving single runs lets OpenBLAS's and tinygrad's worker
    # threads (which spin for a while after a call) steal the second core from whoever runs next
    for _ in range(2):
      for lib, fn in (("numpy", np_fn), ("hcq", hcq_fn), ("tinygrad", tiny_fn)):
        if fn is None: continue
        fn()
        best[lib].extend(timed(fn) for _ in range(max(1, args.repeat // 2)))
    t_np, t_hcq = min(best["numpy"]), min(best["hcq"])
    t_tiny = min(best["tinygrad"]) if best["tinygrad"] else None
    fmt = lambda t: f"{t * 1e3:7.1f}ms" if t is not None else "    n/a  "
    ratio_tiny = f"{t_tiny / t_hcq:7.2f}x" if t_tiny else "    n/a "
    print(f"{name:38} {fmt(t_np):>9} {fmt(t_hcq):>9} {fmt(t_tiny):>9} {t_np / t_hcq:6.2f}x {ratio_tiny}  "
          f"{first_hcq * 1e3:.0f} ms ({compile_s * 1e3:.0f} ms) | {fmt(first_tiny).strip()}   [max rel err {err:.1e}]")
  print("ratios: numpy time / hcq time and tinygrad time / hcq time (higher is better for hcq)")
  print("targets (issue 7): fused >= 1.5x numpy; matmul >= 5x tinygrad and >= 0.33x numpy; softmax >= 1x numpy")


if __name__ == "__main__":
  main()
