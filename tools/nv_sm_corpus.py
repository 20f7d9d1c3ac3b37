"""The emulated SM's CUDA corpus (tests/nv_sm_corpus/kernels.cu) on an NV device, compared with the emulated results.

  python tools/nv_sm_corpus.py build [--arch sm_90] [--out build/nv_sm_corpus.npz]
  HCQ_SCRIPT=tools/nv_sm_corpus.py bash tools/hardware_check.sh run [--bundle build/nv_sm_corpus.npz] [--dev NV]

`build` (here: clang-19 and ptxas) compiles the corpus to one cubin for the arch, runs every case on the emulated GPU
(MOCKNV+NV: the driver's QMD launch and the emulated SM) and writes the cubin and the emulated results to a bundle.
`run` (on the GPU machine, which has Python and numpy but no compiler; a dry run: --dev MOCKNV+NV) loads that cubin on --dev, runs the same cases
with the same inputs (the cases' fixed seeds), and prints one row per kernel: whether the results pass the case's own
check (numpy or an exact model) and whether they equal the emulated ones bit for bit. Kernels whose results depend on
the order of atomics or on the tensor core's accumulation (cuda_cases.ORDER_DEPENDENT, mma_*) must pass their check;
a difference from the emulated bits is shown, not counted. Exit status 0 when every row passes, 1 otherwise, 2 for bad
arguments; no traceback for a failing kernel (the row names the error).
"""
from __future__ import annotations
import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(ROOT, "tests", "nv_sm_corpus"))   # appended: `hcq` stays the hardware check's tree
import cuda_cases as CC  # noqa: E402

DEFAULT_BUNDLE = os.path.join(ROOT, "build", "nv_sm_corpus.npz")


def compile_corpus(arch: str) -> tuple[str, bytes]:
  """(PTX, cubin) of kernels.cu for arch: clang-19 --cuda-device-only to PTX as the tests compile it, then ptxas (the
  cubin is recorded for the emulated GPU, as every cubin hcq's ptxas step makes)."""
  from hcq.drivers.nv.compile import compile_ptx
  sys.path.append(ROOT)   # appended: tests.nv_sm_tools, without shadowing the installed hcq
  from tests.nv_sm_tools import cuda_to_ptx
  with open(CC.KERNELS_CU) as f: text = cuda_to_ptx(f.read(), arch)
  return text, compile_ptx(text, arch)


def run_case(dev, cubin: bytes, name: str, make, grid, block) -> list[np.ndarray]:
  """Run one case on dev; the arguments after the launch (array arguments hold the results)."""
  args = make()
  prg = dev.program(cubin, name)
  bufs = {}
  vals = []
  for i, a in enumerate(args):
    if isinstance(a, np.ndarray):
      bufs[i] = dev.alloc(max(a.nbytes, 1), "device").copyin(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
      vals.append(bufs[i].addr.to_bytes(8, "little"))
    else: vals.append(np.asarray(a).tobytes())
  grid, block = tuple(grid) + (1,) * (3 - len(grid)), tuple(block) + (1,) * (3 - len(block))
  shared = CC.SHARED.get(name)
  prg(vals=vals, global_size=grid, local_size=block, wait=True, **({"shared": prg.shared_size + shared} if shared else {}))
  for i, b in bufs.items():
    b.copyout(args[i].reshape(-1).view(np.uint8))
    b.free()
  return args


def build(arch: str, out: str, only: list[str] | None = None) -> dict:
  """Compile, run every case on the emulated GPU, write the bundle; returns it."""
  import hcq
  ptx, cubin = compile_corpus(arch)
  dev = hcq.Device("MOCKNV+NV")
  if dev.arch.sm != arch: raise SystemExit(f"the emulated board is {dev.arch.sm}; build for it (--arch {dev.arch.sm})")
  bundle = {"arch": np.array(arch), "cubin": np.frombuffer(cubin, np.uint8), "ptx": np.array(ptx)}
  for name, make, grid, block, check in CC.cuda_cases():
    if only and name not in only: continue
    res = run_case(dev, cubin, name, make, grid, block)
    if not check(res): raise SystemExit(f"{name}: the emulated GPU's results fail the case's own check")
    for i, a in enumerate(res):
      if isinstance(a, np.ndarray): bundle[f"{name}/{i}"] = a
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  np.savez_compressed(out, **bundle)
  return bundle


def compare(dev, bundle) -> list[tuple[str, bool, str]]:
  """(kernel, passed, detail) per case in the bundle, run on dev."""
  cubin = bytes(bundle["cubin"])
  rows = []
  for name, make, grid, block, check in CC.cuda_cases():
    keys = [k for k in bundle if k.startswith(name + "/")]
    if not keys: continue
    t0 = time.perf_counter()
    try: res = run_case(dev, cubin, name, make, grid, block)
    except Exception as e:   # a fault or a refusal is this row's result, not the end of the run
      rows.append((name, False, f"{type(e).__name__}: {e}".replace("\n", " ")[:200]))
      continue
    ok = bool(check(res))
    diff = []
    for k in keys:
      got, emu = res[int(k.split("/")[1])], bundle[k]
      same = got.view(np.uint8) == emu.view(np.uint8) if got.dtype == emu.dtype and got.shape == emu.shape else np.zeros(1, bool)
      if not same.all(): diff.append(f"argument {k.split('/')[1]}: {int((~same).sum())} bytes differ")
    loose = name in CC.ORDER_DEPENDENT or name.startswith("mma_")
    detail = ("check passed" if ok else "check FAILED") + "; " + ("same bits as emulated" if not diff else
              ", ".join(diff) + (" (allowed: order or accumulation dependent)" if loose else ""))
    rows.append((name, ok and (loose or not diff), f"{detail} ({time.perf_counter() - t0:.2f} s)"))
  return rows


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  sub = ap.add_subparsers(dest="cmd", required=True)
  b = sub.add_parser("build", help="compile the corpus and record the emulated results (needs clang-19 and ptxas)")
  b.add_argument("--arch", default="sm_90")
  b.add_argument("--out", default=DEFAULT_BUNDLE)
  r = sub.add_parser("run", help="run the bundle's corpus on --dev and compare with the emulated results")
  r.add_argument("--bundle", default=DEFAULT_BUNDLE)
  r.add_argument("--dev", default=os.environ.get("DEV", "NV"))
  args = ap.parse_args(argv)
  if args.cmd == "build":
    bundle = build(args.arch, args.out)
    print(f"{args.out}: {sum(1 for k in bundle if k.endswith('/0'))} kernels for {args.arch}, cubin {bundle['cubin'].size} bytes")
    return 0
  if not os.path.exists(args.bundle):
    print(f"no bundle at {args.bundle}: make one with `python tools/nv_sm_corpus.py build` where clang-19 and ptxas are", file=sys.stderr)
    return 2
  import hcq
  try: dev = hcq.Device(args.dev)
  except Exception as e:
    print(f"open {args.dev}: {type(e).__name__}: {e}")
    return 1
  with np.load(args.bundle) as z: bundle = {k: z[k] for k in z.files}
  if args.dev.startswith("MOCK"):   # a dry run on the emulated GPU: tell it which PTX this cubin's code is, as ptxas would have
    from hcq.drivers.nv.compile import record
    from hcq.drivers.nv.cubin import read_cubin
    record(read_cubin(bytes(bundle["cubin"])), str(bundle["ptx"]))
  if str(bundle["arch"]) != dev.arch.sm:
    print(f"the bundle is for {bundle['arch']}, the device is {dev.arch.sm}: build it with --arch {dev.arch.sm}")
    return 1
  rows = compare(dev, bundle)
  w = max(len(n) for n, _, _ in rows)
  print(f"{'kernel':{w}s}  result  detail")
  for name, ok, detail in rows: print(f"{name:{w}s}  {'PASS' if ok else 'FAIL':6s}  {detail}")
  print(f"{sum(ok for _, ok, _ in rows)} of {len(rows)} kernels passed on {args.dev}")
  return 0 if all(ok for _, ok, _ in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
