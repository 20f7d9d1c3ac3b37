"""hcq.tensor's GPU kernels against the GPU's own copy engine and torch, side by side in one run (issue 19's targets):

  python bench/tensor_gpu.py [--dev NV] [--scale 1.0] [--repeat 10]
  HCQ_SCRIPT=bench/tensor_gpu.py bash tools/hardware_check.sh --dev NV     (on the GPU machine, hcq not installed)

  fused elementwise   relu(a * b + c) over 2^26 float32 (4 x 256 MiB moved) vs a device-to-device copy of 1 GiB on the
                      device's copy queue (bytes read + written per second); target: at least 80% of the copy's rate
  softmax             over the rows of a 4096 x 4096 float32 vs torch.softmax; target: at least as fast as torch
  matmul              4096 x 4096 @ 4096 x 4096 float32 vs torch.matmul with TF32 off; target: at least 50% of torch

Times are the best of --repeat runs, wall clock around the launch and a wait for the device (first runs, which
compile, are not counted). torch (CUDA for NV, ROCm for AMD) is optional: without it its columns say so. --scale
shrinks the sizes (0.02 runs on the emulated GPUs in seconds: a check that the script works, not a measurement)."""
from __future__ import annotations
import argparse
import sys
import time


def best_seconds(fn, repeat: int, sync) -> float:
  fn()
  sync()
  times = []
  for _ in range(repeat):
    t0 = time.perf_counter()
    fn()
    sync()
    times.append(time.perf_counter() - t0)
  return min(times)


def torch_device(kind: str):
  """(torch, its device) for this GPU kind, or (None, why not)."""
  try:
    import torch
  except ImportError:
    return None, "torch not importable"
  if not torch.cuda.is_available(): return None, "torch sees no GPU"
  torch.backends.cuda.matmul.allow_tf32 = False   # f32 matmul as f32 (issue 19: no TF32)
  torch.backends.cudnn.allow_tf32 = False
  return torch, torch.device("cuda")


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--dev", default="NV", help="tensor device (NV, AMD, MOCKNV+NV, ...)")
  ap.add_argument("--scale", type=float, default=1.0, help="size factor (0 < scale <= 1)")
  ap.add_argument("--repeat", type=int, default=10)
  args = ap.parse_args(argv)
  if not 0 < args.scale <= 1: ap.error(f"--scale must be in (0, 1], not {args.scale}")
  try:
    import llvmlite  # noqa: F401 -- the GPU renderers compile through it
  except ImportError:
    print("tensor GPU speed: skipped (llvmlite is not importable; pip install llvmlite)")
    return 0
  from hcq.sym import Variable
  from hcq.tensor import Tensor
  from hcq.tensor.device import get_device
  dev = get_device(args.dev)
  if "MOCK" in str(dev.core.spec) and args.scale > 0.1:
    print(f"tensor GPU speed: skipped ({dev.core.spec} is emulated: its times say nothing of a GPU; --scale 0.02 checks the script)")
    return 0
  core, sync = dev.core, dev.synchronize
  torch, tdev = torch_device(dev.kind)
  tsync = (lambda: torch.cuda.synchronize()) if torch else None
  n_ew = max(1 << 12, int((1 << 26) * args.scale) // 4 * 4)
  side = max(64, int(4096 * args.scale) // 64 * 64)
  rows = []

  # device-to-device copy on the copy queue: 4 x n_ew float32, the bytes the fused kernel moves
  nbytes = 4 * n_ew * 4
  src, dst = core.alloc(nbytes), core.alloc(nbytes)
  copy_q = core.copy_queue().wait(core.timeline_signal, Variable("wait")).copy(dst.addr, src.addr, nbytes) \
                .signal(core.timeline_signal, Variable("signal")).bind(core)
  copy = lambda: core.timeline_submit(copy_q)
  t_copy = best_seconds(copy, args.repeat, core.synchronize)
  copy_rate = 2 * nbytes / t_copy
  a, b, c = (Tensor.rand(n_ew, seed=s, device=args.dev).realize() for s in range(3))
  t_ew = best_seconds(lambda: (a * b + c).relu().realize(), args.repeat, sync)
  ew_rate = 4 * n_ew * 4 / t_ew
  rows.append((f"fused relu(a*b+c), {n_ew} f32", f"{t_ew * 1e3:.3f} ms, {ew_rate / 1e9:.0f} GB/s",
               f"copy {nbytes >> 20} MiB: {t_copy * 1e3:.3f} ms, {copy_rate / 1e9:.0f} GB/s", ew_rate / copy_rate, 0.8))

  x = Tensor.randn(side, side, seed=4, device=args.dev).realize()
  t_sm = best_seconds(lambda: x.softmax(1).realize(), args.repeat, sync)
  if torch:
    xt = torch.randn(side, side, device=tdev)
    t_tsm = best_seconds(lambda: torch.softmax(xt, 1), args.repeat, tsync)
    rows.append((f"softmax {side}x{side} f32", f"{t_sm * 1e3:.3f} ms", f"torch {t_tsm * 1e3:.3f} ms", t_tsm / t_sm, 1.0))
  else:
    rows.append((f"softmax {side}x{side} f32", f"{t_sm * 1e3:.3f} ms", tdev, None, 1.0))

  p, q = (Tensor.randn(side, side, seed=s, device=args.dev).realize() for s in (5, 6))
  t_mm = best_seconds(lambda: (p @ q).realize(), args.repeat, sync)
  flops = 2 * side ** 3 / t_mm
  if torch:
    pt, qt = torch.randn(side, side, device=tdev), torch.randn(side, side, device=tdev)
    t_tmm = best_seconds(lambda: pt @ qt, args.repeat, tsync)
    rows.append((f"matmul {side}^2 f32", f"{t_mm * 1e3:.3f} ms, {flops / 1e12:.1f} TFLOP/s",
                 f"torch (no TF32) {t_tmm * 1e3:.3f} ms, {2 * side ** 3 / t_tmm / 1e12:.1f} TFLOP/s", t_tmm / t_mm, 0.5))
  else:
    rows.append((f"matmul {side}^2 f32", f"{t_mm * 1e3:.3f} ms, {flops / 1e12:.1f} TFLOP/s", tdev, None, 0.5))

  print(f"tensor GPU speed on {dev.name} ({core}), best of {args.repeat}")
  print(f"| workload | hcq | reference | hcq / reference | target |")
  print(f"|---|---|---|---|---|")
  for name, ours, ref, ratio, target in rows:
    verdict = "-" if ratio is None else f"{ratio:.2f} ({'met' if ratio >= target else 'NOT met'})"
    print(f"| {name} | {ours} | {ref} | {verdict} | >= {target:.2f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
