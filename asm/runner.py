"""`python -m hcq.asm run`: assemble a kernel, load it on an AMD device (the emulated gfx1100 when there is no GPU),
fill its buffers, launch it, and print the results and the GPU time."""
from __future__ import annotations
import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from hcq.asm.kernel import ARG_SIZES, Kernel

INITS = ("zeros", "ones", "arange", "rand")
DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16,
          "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64}


class RunError(Exception):
  """A bad command line or input file, said in one line."""


def parse_arg(spec: str, seed: int) -> tuple[str, str, Any]:
  """NAME=buffer:DTYPE:COUNT[:INIT] | NAME=buffer:FILE.npy | NAME=DTYPE:VALUE -> (name, kind, array or value)."""
  name, eq, rest = spec.partition("=")
  if not eq or not name.isidentifier(): raise RunError(f"--arg {spec!r}: expected NAME=..., e.g. a=buffer:f32:1024:rand or n=u32:1024")
  parts = rest.split(":")
  if parts[0] == "buffer":
    if len(parts) == 2 and parts[1].endswith(".npy"):
      try:
        return name, "buffer", np.ascontiguousarray(np.load(parts[1]))
      except OSError as e:
        raise RunError(f"--arg {spec!r}: cannot read {parts[1]}: {e.strerror or e}") from None
    if len(parts) not in (3, 4) or parts[1] not in DTYPES or not parts[2].isdigit():
      raise RunError(f"--arg {spec!r}: a buffer is buffer:DTYPE:COUNT[:INIT] (DTYPE one of {', '.join(DTYPES)}; INIT one of {', '.join(INITS)}) "
                     "or buffer:FILE.npy")
    dtype, count, init = DTYPES[parts[1]], int(parts[2]), parts[3] if len(parts) == 4 else "zeros"
    if init not in INITS: raise RunError(f"--arg {spec!r}: unknown INIT {init!r}; valid: {', '.join(INITS)}")
    rng = np.random.default_rng(seed)
    arr = {"zeros": lambda: np.zeros(count, dtype), "ones": lambda: np.ones(count, dtype), "arange": lambda: np.arange(count).astype(dtype),
           "rand": lambda: (rng.random(count) * 100).astype(dtype)}[init]()
    return name, "buffer", arr
  if len(parts) != 2 or parts[0] not in ARG_SIZES or parts[0] == "buffer":
    raise RunError(f"--arg {spec!r}: a value is DTYPE:VALUE with DTYPE one of {', '.join(k for k in ARG_SIZES if k != 'buffer')}")
  from hcq.errors import ProgramArgumentError
  from hcq.program import KernelArg, pack_value
  try:
    try:
      value: Any = int(parts[1], 0)
    except ValueError:
      value = float(parts[1])  # 1.5, 1e3, nan, inf; an int kind takes only integral ones
    pack_value(f"--arg {spec!r}", KernelArg(name, 0, parts[0]), value, bytearray(8))  # the launch's own check, before the device opens
  except ValueError:
    raise RunError(f"--arg {spec!r}: {parts[1]!r} is not a {parts[0]} value") from None
  except ProgramArgumentError as e:
    raise RunError(str(e)) from None
  return name, parts[0], value


def dims(text: str, what: str) -> tuple[int, int, int]:
  from hcq.errors import ProgramArgumentError
  from hcq.program import DIM_LIMIT, launch_dims
  try:
    return launch_dims(tuple(int(x) for x in text.split(",")), f"--{what}")
  except (ValueError, ProgramArgumentError):
    raise RunError(f"--{what} {text!r}: expected 1 to 3 integers from 1 to {DIM_LIMIT} (2**32-1), e.g. 4 or 4,2") from None


def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog="python -m hcq.asm run", description=(
    "Assemble KERNEL.s (LLVM AMDGPU syntax), load it on an AMD device, fill its buffers, launch it and print the results "
    "and the GPU time. With no AMD GPU it runs on the emulated gfx1100 (MOCKKFD+AMD) and says so."),
    epilog="Arguments are laid out in the order given, at natural alignment, and their address is in s[0:1] (the kernarg pointer); "
           "a value must keep its value in its DTYPE (i32:4.0 is 4; i32:2.5, u32:-1 and f32:1e39 are refused); "
           "the workgroup ids follow in the next SGPRs. Example: python -m hcq.asm run add.s --arg a=buffer:f32:1024:rand "
           "--arg b=buffer:f32:1024:rand --arg n=u32:1024 --grid 4 --block 256")
  ap.add_argument("kernel", type=Path, help="assembly file")
  ap.add_argument("--arch", default="gfx1100", help="target (default gfx1100)")
  ap.add_argument("--name", default=None, help="kernel name (default: the file's stem)")
  ap.add_argument("--arg", action="append", default=[], metavar="SPEC", help="NAME=buffer:DTYPE:COUNT[:INIT], NAME=buffer:FILE.npy or NAME=DTYPE:VALUE")
  ap.add_argument("--grid", default="1", help="workgroups, X[,Y[,Z]] (default 1)")
  ap.add_argument("--block", default="64", help="threads per workgroup, X[,Y[,Z]] (default 64)")
  ap.add_argument("--lds", type=int, default=0, help="bytes of LDS per workgroup")
  ap.add_argument("--workgroup-ids", default="x", help="which workgroup ids the kernel receives in SGPRs (default x)")
  ap.add_argument("--dev", default=None, help="DEV string (default AMD: the real GPU, else the emulated one)")
  ap.add_argument("--seed", type=int, default=0, help="seed for rand buffers")
  ap.add_argument("--show", type=int, default=8, help="elements of each buffer to print (default 8)")
  ap.add_argument("--save", type=Path, default=None, help="write every buffer after the run to DIR/NAME.npy")
  dbg = ap.add_argument_group("debugging (the emulated GPU only: no hardware gives these)")
  dbg.add_argument("--trace", type=int, default=None, metavar="WAVE", help="print every instruction wave WAVE runs: PC, text, registers written")
  dbg.add_argument("--max-instructions", type=int, default=None, metavar="N", help="stop the kernel after N wave-instructions "
                   "(a runaway loop) and show where it was; a fault always shows the faulting wave's registers")
  return ap


def run(argv: list[str] | None = None) -> int:
  from hcq.errors import HCQError
  args = build_parser().parse_args(argv)
  try:
    return _run(args)
  except RunError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except HCQError as e:  # a fault, a hang or a load error: the device says what happened
    print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
    return 1


def _run(args) -> int:
  import hcq
  from hcq.asm import AsmError
  try:
    text = args.kernel.read_text()
  except OSError as e:
    raise RunError(f"cannot read {args.kernel}: {e.strerror or e}") from None
  specs = [parse_arg(s, args.seed) for s in args.arg]
  grid, block = dims(args.grid, "grid"), dims(args.block, "block")
  wg = tuple(axis in args.workgroup_ids.lower() for axis in "xyz")
  name = args.name or args.kernel.stem
  kernel = Kernel(name, args.arch, args=[(n, k) for n, k, _ in specs], lds_size=args.lds, workgroup_ids=wg,
                  workitem_id_dims=3 if block[2] > 1 else 2 if block[1] > 1 else 1)
  try:
    kernel.add(text)
    co = kernel.to_elf()
  except AsmError as e:
    raise RunError(f"{args.kernel}:{e}") from None
  dev = hcq.Device(args.dev or "AMD")
  if args.trace is not None or args.max_instructions is not None: _debug_core(dev, args)
  prg = dev.program(co, name)
  bufs, vals = [], []
  for n, kind, v in specs:
    if kind == "buffer": bufs.append((n, dev.alloc(max(v.nbytes, 4)).copyin(v), v))
    else: vals.append(v)
  emulated = getattr(getattr(dev, "os", None), "emulated", False)
  print(f"{name}: {len(co)}-byte code object for {args.arch} on {dev}{' (emulated)' if emulated else ''}, grid {grid} x block {block}")
  secs = prg(*[b for _, b, _ in bufs], global_size=grid, local_size=block, vals=tuple(vals), wait=True)
  for n, buf, host in bufs:
    out = buf.copyout(np.empty_like(host))
    print(f"  {n}: {out[:args.show].tolist()}{' ...' if out.size > args.show else ''}")
    if args.save:
      args.save.mkdir(parents=True, exist_ok=True)
      np.save(args.save / f"{n}.npy", out)
  print(f"  GPU time: {secs * 1e6:.1f} us")
  return 0


def _debug_core(dev, args) -> None:
  """Run this device's dispatches with tracing and an instruction limit (its emulated GPU's shader core, replaced)."""
  from hcq.asm.emu.dispatch import from_state, launch
  if not getattr(getattr(dev, "os", None), "emulated", False):
    raise RunError(f"--trace and --max-instructions need the emulated GPU (--dev MOCKKFD+AMD); {dev} is real hardware")

  def trace(wave: int, pc: int, text: str, writes: list[str]) -> None:
    print(f"  wave {wave} pc {pc:#06x}: {text:<48s} {' '.join(writes)}")

  def core(gpu, state, cancel=None):
    return launch(gpu.mem, from_state(state), args.max_instructions, trace=trace if args.trace is not None else None,
                  trace_wave=args.trace, cancel=cancel)
  dev.os.kfd.nodes[dev.kfd.gpu_id].gpu.shader_core = core


if __name__ == "__main__":
  sys.exit(run())
