"""`python -m hcq.drivers.nv run`: load a PTX, cubin, CUDA C++ or LLVM IR kernel on an NV device (the emulated H200 when there is
no NVIDIA GPU), fill its buffers, launch it, and print the results and the GPU time.

The NVIDIA counterpart of `python -m hcq.asm run` (AMD assembly): a separate command, because the two take different
code (AMD assembly there, NVIDIA's PTX, cubins and CUDA C++ here) and different launch options (LDS and workgroup-id SGPRs there,
shared memory here). Arguments are written the same way in both (hcq.asm.runner.parse_arg).
"""
from __future__ import annotations
import argparse
import sys
from pathlib import Path

import numpy as np

from hcq.asm.cli import guarded
from hcq.asm.runner import RunError, dims, parse_arg

PROG = "python -m hcq.drivers.nv run"
SUFFIXES = {".ptx": "PTX", ".cubin": "cubin", ".ll": "LLVM IR", ".cu": "CUDA C++"}


def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0].replace("\n", " ") + " " + __doc__.split("\n\n")[1].replace("\n", " "))
  ap.add_argument("kernel", type=Path, help="a .ptx, .cubin, .cu (CUDA C++, through NVRTC) or .ll (LLVM IR) file")
  ap.add_argument("--name", default=None, help="kernel entry (default: the only one)")
  ap.add_argument("--arg", action="append", default=[], metavar="SPEC", help="the kernel's parameters in order (by position; NAME is for the printout): NAME=buffer:DTYPE:COUNT[:INIT], "
                  "NAME=buffer:FILE.npy or NAME=DTYPE:VALUE (INIT: zeros, ones, arange or rand)")
  ap.add_argument("--grid", default="1", help="blocks, X[,Y[,Z]] (default 1)")
  ap.add_argument("--block", default="64", help="threads per block, X[,Y[,Z]] (default 64)")
  ap.add_argument("--shared", type=int, default=None, help="bytes of shared memory per block (default: the kernel's static shared memory)")
  ap.add_argument("--dev", default="NV", help="an NV DEV string (default NV: the real GPU, else the emulated one; MOCKNV+NV: the emulated one)")
  ap.add_argument("--seed", type=int, default=0, help="seed for rand buffers")
  ap.add_argument("--show", type=int, default=8, help="elements of each buffer to print (default 8)")
  ap.add_argument("--save", type=Path, default=None, help="write every buffer after the run to DIR/NAME.npy")
  ap.add_argument("--trace", action="store_true", help="print every PTX instruction the emulated SM runs (the emulated GPU only)")
  return ap


def run(argv: list[str] | None = None) -> int:
  args = build_parser().parse_args(argv)
  return guarded(PROG, lambda: _run_reporting(args))


def _run_reporting(args) -> int:
  from hcq.errors import HCQError
  try:
    return _run(args)
  except RunError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except HCQError as e:
    print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
    return 1


def _code(path: Path):
  kind = SUFFIXES.get(path.suffix)
  if kind is None: raise RunError(f"{path}: unknown kind of kernel file; valid: {', '.join(f'{s} ({k})' for s, k in SUFFIXES.items())}")
  try:
    data = path.read_bytes()
  except OSError as e:
    raise RunError(f"cannot read {path}: {e.strerror}") from None
  if kind == "cubin": return data
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise RunError(f"{path}: the {kind} is not UTF-8 text (byte {e.start})") from None


def _run(args) -> int:
  import hcq
  from hcq.devstring import parse_dev
  code = _code(args.kernel)
  specs = [parse_arg(s, (args.seed, i)) for i, s in enumerate(args.arg)]
  grid, block = dims(args.grid, "grid"), dims(args.block, "block")
  if args.save:
    try:
      args.save.mkdir(parents=True, exist_ok=True)
    except OSError as e:
      raise RunError(f"--save {args.save}: cannot make the folder: {e.strerror}") from None
  spec = parse_dev(args.dev)
  if spec.device != "NV": raise RunError(f"--dev {args.dev}: this command runs NVIDIA kernels; use NV or MOCKNV+NV (AMD assembly: python -m hcq.asm run)")
  dev = hcq.Device(spec)
  gpu = getattr(getattr(dev.os, "rm", None), "gpu", None)  # the emulated GPU, or None on real hardware
  if args.trace:
    if gpu is None: raise RunError(f"--trace needs the emulated GPU (--dev MOCKNV+NV); {dev} is real hardware")
    gpu.compute.trace = lambda line: print(f"  {line}")
  prg = dev.program(code, args.name)
  kinds = ["buffer" if a.kind == "buffer" else "value" for a in prg.layout]
  if [("buffer" if k == "buffer" else "value") for _, k, _ in specs] != kinds:  # by position: NVRTC and LLVM name parameters NAME_param_N
    raise RunError(f"{prg.name} takes {', '.join(f'{a.name} ({a.kind})' for a in prg.layout) or 'no parameters'} in that order; "
                   f"--arg gave {', '.join(f'{n} ({k})' for n, k, _ in specs) or 'none'}")
  bufs, vals = [], []
  for n, kind, v in specs:
    if kind == "buffer": bufs.append((n, dev.alloc(max(v.nbytes, 4)).copyin(v), v))
    else: vals.append(v)
  print(f"{prg.name}: {dev.arch.name} {dev.arch.sm} on {dev}{' (emulated)' if gpu is not None else ''}, grid {grid} x block {block}")
  try:
    secs = prg(*[b for _, b, _ in bufs], global_size=grid, local_size=block, vals=tuple(vals), wait=True, shared=args.shared)
  finally:
    if gpu is not None: gpu.compute.trace = None
  for n, buf, host in bufs:
    out = buf.copyout(np.empty_like(host))
    print(f"  {n}: {out[:args.show].tolist()}{' ...' if out.size > args.show else ''}")
    if args.save: np.save(args.save / f"{n}.npy", out)
  print(f"  GPU time: {secs * 1e6:.1f} us" + (" (emulated: the emulator's wall time, not a performance figure)" if gpu is not None else ""))
  return 0
