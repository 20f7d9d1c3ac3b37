"""`python -m hcq.asm run`: assemble a kernel, load it on an AMD device (the emulated board of --arch when there is no GPU),
fill its buffers, launch it, and print the results and the GPU time."""
from __future__ import annotations
import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from hcq.asm.cli import guarded, read_text
from hcq.asm.isa import ARCHS
from hcq.asm.kernel import ARG_SIZES, Kernel

INITS = ("zeros", "ones", "arange", "rand")
INIT_HELP = "INIT: zeros (the default), ones, arange (0, 1, 2, ...) or rand (uniform in [0, 100), each buffer from its own seed)"
MAX_BUFFER_BYTES = 1 << 30  # a command line's buffer; a bigger one is a typo far more often than a wish
EMULATED_ARCH = "gfx1100"   # the default --arch: the first board MOCKKFD+AMD emulates
PROG = "python -m hcq.asm run"
DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16,
          "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64}


class RunError(Exception):
  """A bad command line or input file, said in one line."""


def parse_arg(spec: str, seed: int | tuple[int, ...]) -> tuple[str, str, Any]:
  """NAME=buffer:DTYPE:COUNT[:INIT] | NAME=buffer:FILE.npy | NAME=DTYPE:VALUE -> (name, kind, array or value).
  `seed` seeds a rand buffer: give each buffer its own (e.g. (seed, index)) so that two are not the same data."""
  name, eq, rest = spec.partition("=")
  if not eq or not name.isidentifier(): raise RunError(f"--arg {spec!r}: expected NAME=..., e.g. a=buffer:f32:1024:rand or n=u32:1024")
  parts = rest.split(":")
  if parts[0] == "buffer":
    if len(parts) == 2 and parts[1].endswith(".npy"):
      try:
        arr = np.load(parts[1], allow_pickle=False)
      except OSError as e:
        raise RunError(f"--arg {spec!r}: cannot read {parts[1]}: {e.strerror or e}") from None
      except (ValueError, EOFError) as e:  # not an .npy file, a truncated one, or one of Python objects
        raise RunError(f"--arg {spec!r}: {parts[1]} is not a numeric .npy array: {str(e).splitlines()[0] if str(e) else 'truncated'}") from None
      if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf" or arr.dtype.fields is not None:
        raise RunError(f"--arg {spec!r}: {parts[1]} holds {getattr(arr, 'dtype', type(arr).__name__)}; a buffer needs numbers (bool, int, uint, float)")
      return name, "buffer", np.ascontiguousarray(arr)
    if len(parts) not in (3, 4) or parts[1] not in DTYPES or not parts[2].isdigit():
      raise RunError(f"--arg {spec!r}: a buffer is buffer:DTYPE:COUNT[:INIT] (DTYPE one of {', '.join(DTYPES)}; INIT one of {', '.join(INITS)}) "
                     "or buffer:FILE.npy")
    dtype, count, init = DTYPES[parts[1]], int(parts[2]), parts[3] if len(parts) == 4 else "zeros"
    if init not in INITS: raise RunError(f"--arg {spec!r}: unknown INIT {init!r}; valid: {', '.join(INITS)}")
    if count * np.dtype(dtype).itemsize > MAX_BUFFER_BYTES:
      raise RunError(f"--arg {spec!r}: {count} x {parts[1]} is {count * np.dtype(dtype).itemsize} bytes; a buffer from the command line "
                     f"is at most {MAX_BUFFER_BYTES >> 30} GiB")
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


def parse_workgroup_ids(text: str) -> tuple[bool, bool, bool]:
  """'x', 'xy', 'xyz', ... (or 'none') -> which workgroup ids the kernel receives in SGPRs."""
  letters = "" if text.lower() == "none" else text.lower()
  if (not letters and text.lower() != "none") or set(letters) - set("xyz") or len(set(letters)) != len(letters):
    raise RunError(f"--workgroup-ids {text!r}: expected a combination of x, y and z (each at most once, e.g. x, xy or xyz), or none")
  return tuple(axis in letters for axis in "xyz")


def build_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog=PROG, description=(
    "Assemble KERNEL.s (LLVM AMDGPU syntax), load it on an AMD device, fill its buffers, launch it and print the results "
    f"and the GPU time. With no AMD GPU it runs on the emulated board of --arch (MOCKKFD+AMD::{EMULATED_ARCH}, ::gfx1201, ::gfx942) and "
    "says so; its GPU time is the emulator's wall time, not a performance figure."),
    epilog="Arguments are laid out in the order given, at natural alignment, and their address is in s[0:1] (the kernarg pointer); "
           "a value must keep its value in its DTYPE (i32:4.0 is 4; i32:2.5, u32:-1 and f32:1e39 are refused); "
           "the workgroup ids follow in the next SGPRs. Example: python -m hcq.asm run add.s --arg a=buffer:f32:1024:rand "
           "--arg b=buffer:f32:1024:rand --arg n=u32:1024 --grid 4 --block 256")
  ap.add_argument("kernel", type=Path, help="assembly file")
  ap.add_argument("--arch", default=EMULATED_ARCH, help=f"target, one of {', '.join(ARCHS)} (default {EMULATED_ARCH}); "
                  "each has an emulated board (gfx942: the MI300X, wave64 only)")
  ap.add_argument("--name", default=None, help="kernel name (default: the file's stem)")
  ap.add_argument("--arg", action="append", default=[], metavar="SPEC", help="NAME=buffer:DTYPE:COUNT[:INIT], NAME=buffer:FILE.npy or "
                  f"NAME=DTYPE:VALUE; DTYPE one of {', '.join(DTYPES)}; {INIT_HELP}")
  ap.add_argument("--grid", default="1", help="workgroups, X[,Y[,Z]] (default 1)")
  ap.add_argument("--block", default="64", help="threads per workgroup, X[,Y[,Z]] (default 64)")
  ap.add_argument("--lds", type=int, default=0, help="bytes of LDS per workgroup")
  ap.add_argument("--workgroup-ids", default="x", help="which workgroup ids the kernel receives in SGPRs: x, xy, xyz, ... or none (default x)")
  ap.add_argument("--dev", default=None, help="an AMD DEV string, [IFACE+]AMD[:INDEX][:RENDERER[:ARCH[:PARTITION]]] (default "
                  "AMD: the real GPU, else the emulated one; MOCKKFD+AMD: always the emulated one; AMD:1: the second GPU "
                  "node; MOCKKFD+AMD:3::gfx942:cpx: partition 3 of the emulated MI300X in CPX mode, PARTITION one of SPX, DPX, "
                  "QPX, CPX, optionally /NPS4)")
  ap.add_argument("--seed", type=int, default=0, help="seed for rand buffers (each buffer draws from (SEED, its position))")
  ap.add_argument("--show", type=int, default=8, help="elements of each buffer to print (default 8)")
  ap.add_argument("--save", type=Path, default=None, help="write every buffer after the run to DIR/NAME.npy")
  dbg = ap.add_argument_group("debugging (the emulated GPU only: no hardware gives these)")
  dbg.add_argument("--trace", type=int, default=None, metavar="WAVE", help="print every instruction wave WAVE runs: PC, text, registers written")
  dbg.add_argument("--max-instructions", type=int, default=None, metavar="N", help="stop the kernel after N wave-instructions "
                   "(a runaway loop) and show where it was; on the emulated GPU a fault shows the faulting wave's registers")
  return ap


def run(argv: list[str] | None = None) -> int:
  args = build_parser().parse_args(argv)
  return guarded(PROG, lambda: _run_reporting(args))


def _run_reporting(args) -> int:
  from hcq.errors import HCQError
  faults: list[BaseException] = []  # the emulated shader core's exceptions: their wave state is printed with the fault
  try:
    return _run(args, faults)
  except RunError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except HCQError as e:  # a fault, a hang or a load error: the device says what happened
    print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
    state = getattr(faults[-1], "state", "") if faults else ""
    if state and state not in str(e): print(f"the faulting wave ({getattr(faults[-1], 'wave', '?')}):\n{state}", file=sys.stderr)
    return 1


def _device(args):
  """The AMD device of --dev, checked to take an AMD code object for --arch."""
  import hcq
  from hcq.devstring import parse_dev
  from hcq.errors import HCQError
  spec = parse_dev(args.dev or f"AMD::{args.arch}")   # no --dev: the GPU (real, else emulated) of --arch
  if spec.device != "AMD":
    takes = "LLVM IR (hcq.Device('CPU').program takes IR text)" if spec.device == "CPU" else "its own kind of program"
    raise RunError(f"--dev {args.dev}: this command runs an AMD code object; the {spec.device} device takes {takes}, not AMD "
                   "machine code. Use --dev AMD (the real GPU, else the emulated one) or MOCKKFD+AMD")
  try:
    dev = hcq.Device(spec)
  except HCQError as e:
    raise RunError(f"--arch {args.arch}: {e}") from None
  if dev.arch != args.arch:
    if _emulated_gpu(dev):
      raise RunError(f"--arch {args.arch}: the emulated GPU of --dev {args.dev} is {dev.arch}; assemble for --arch {dev.arch}, "
                     f"or use --dev MOCKKFD+AMD::{args.arch}")
    raise RunError(f"--arch {args.arch}: the device {dev} is {dev.arch}")
  return dev


def _run(args, faults: list[BaseException]) -> int:
  from hcq.asm import AsmError
  if args.arch not in ARCHS: raise RunError(f"--arch {args.arch!r}: unknown; valid: {', '.join(ARCHS)} (the emulated GPU is {EMULATED_ARCH})")
  try:
    text = read_text(args.kernel, "assembly file")
  except (OSError, ValueError) as e:
    raise RunError(str(e)) from None
  specs = [parse_arg(s, (args.seed, i)) for i, s in enumerate(args.arg)]
  grid, block = dims(args.grid, "grid"), dims(args.block, "block")
  wg = parse_workgroup_ids(args.workgroup_ids)
  if args.save:
    try:
      args.save.mkdir(parents=True, exist_ok=True)
    except OSError as e:
      raise RunError(f"--save {args.save}: cannot make the folder: {e.strerror}") from None
  name = args.name or args.kernel.stem
  kernel = Kernel(name, args.arch, args=[(n, k) for n, k, _ in specs], lds_size=args.lds, workgroup_ids=wg,
                  workitem_id_dims=3 if block[2] > 1 else 2 if block[1] > 1 else 1)
  try:
    kernel.add(text)
    co = kernel.to_elf()
  except AsmError as e:
    raise RunError(f"{args.kernel}:{e}") from None
  dev = _device(args)
  emulated = _emulated_gpu(dev) is not None
  if emulated: _watch_core(dev, args, faults)
  elif args.trace is not None or args.max_instructions is not None:
    raise RunError(f"--trace and --max-instructions need the emulated GPU (--dev MOCKKFD+AMD); {dev} is real hardware")
  prg = dev.program(co, name)
  bufs, vals = [], []
  for n, kind, v in specs:
    if kind == "buffer": bufs.append((n, dev.alloc(max(v.nbytes, 4)).copyin(v), v))
    else: vals.append(v)
  print(f"{name}: {len(co)}-byte code object for {args.arch} on {dev}{' (emulated)' if emulated else ''}, grid {grid} x block {block}")
  if emulated: _warm_up(dev, prg)
  secs = prg(*[b for _, b, _ in bufs], global_size=grid, local_size=block, vals=tuple(vals), wait=True)
  for n, buf, host in bufs:
    out = buf.copyout(np.empty_like(host))
    print(f"  {n}: {out[:args.show].tolist()}{' ...' if out.size > args.show else ''}")
    if args.save:
      try:
        np.save(args.save / f"{n}.npy", out)
      except OSError as e:
        raise RunError(f"--save {args.save}: cannot write {n}.npy: {e.strerror}") from None
  if emulated: print(f"  GPU time: {secs * 1e6:.1f} us (emulated: the emulator's wall time for this launch, not a performance figure)")
  else: print(f"  GPU time: {secs * 1e6:.1f} us")
  return 0


def _emulated_gpu(dev):
  """The emulated GPU behind `dev` (its mock kernel driver's model), or None for real hardware."""
  if not getattr(getattr(dev, "os", None), "emulated", False): return None
  return dev.os.kfd.nodes[dev.kfd.gpu_id].gpu


def _warm_up(dev, prg) -> None:
  """Keep the emulator's one-time costs out of the launch it times: an empty dispatch (queue, packet decoding) and
  every instruction of the kernel compiled into the emulator's shared cache."""
  from hcq.asm.emu.engine import Program
  empty = Kernel("hcq_warm_up", dev.arch).add("s_endpgm").to_elf()
  dev.program(empty)(global_size=1, local_size=1, wait=True)
  code = Program(_emulated_gpu(dev).mem, dev.arch)
  pc, end = prg.code_addr, prg.code_addr + prg.kernel.code_size
  while pc < end: pc += code.at(pc).size


def _watch_core(dev, args, faults: list[BaseException]) -> None:
  """The emulated GPU's shader core, wrapped: a fault's wave state is kept for the report, and --trace and
  --max-instructions trace and bound the dispatch."""
  from hcq.drivers.mock.amdgpu.gpu import default_shader_core
  gpu = _emulated_gpu(dev)
  inner = gpu.shader_core

  def trace(wave: int, pc: int, text: str, writes: list[str]) -> None:
    print(f"  wave {wave} pc {pc:#06x}: {text:<48s} {' '.join(writes)}")

  if args.trace is not None or args.max_instructions is not None:   # the same core, bounded and traced
    inner = default_shader_core(max_instructions=args.max_instructions, trace=trace if args.trace is not None else None, trace_wave=args.trace)

  def core(gpu, state, cancel=None):
    try:
      return inner(gpu, state, cancel=cancel)
    except Exception as e:
      faults.append(e)
      raise
  gpu.shader_core = core


if __name__ == "__main__":
  sys.exit(run())
