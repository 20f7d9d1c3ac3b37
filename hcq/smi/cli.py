"""The `python -m hcq.smi` command line: options, the watch loop, and the top-level error handling that
turns every failure into one line and a documented exit code (never a traceback)."""
from __future__ import annotations
import argparse
import math
import os
import sys

from hcq.smi import errors
from hcq.smi.errors import SmiError

EPILOG = """\
device selection:
  --dev takes indices, bus ids (0000:03:00.0 or 03:00.0), vendors (amd, nvidia), gfx targets (gfx942)
  or parts of names, comma-separated: --dev 0,2   --dev gfx942   --dev "7900 XTX".
  Indices are those of the unfiltered list, so they stay the same whatever is selected.

environment:
  DEV=AMD | KFD+AMD | NV        show only that vendor's GPUs (hcq DEV strings; an ARCH part, as in
                                KFD+AMD::gfx942, keeps that gfx target only)
  DEV=MOCKKFD+AMD               show the emulated gfx1100 (this process's instance, marked emulated)
  DEV=MOCKKFD+AMD::gfx942:cpx   the emulated MI300X in a partition mode (SPX, DPX, QPX, CPX, optionally
                                /NPS4): a row per partition (KFD node); an INDEX part (AMD:1) is not a filter
  HCQ_SYSROOT=DIR               testing/diagnostics: read a recorded machine from DIR instead of /
                                (e.g. tests/fixtures/sysfs/rx7900xtx)
  HCQ_SYSROOT_DENIED=P1:P2      with HCQ_SYSROOT: those machine paths fail with EACCES
  HCQ_DEBUG=1                   print the traceback of an internal error

exit codes:
  0 ok   1 internal error   2 usage error   3 no GPU found   4 permission denied (output shows what
  was visible)   5 no GPU matches --dev/DEV   130 interrupted (in --watch, Ctrl-C exits 0)

The JSON schema is documented in docs/smi.md."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
  """The options; argparse reports usage errors itself (exit 2, one message, no traceback)."""
  ap = argparse.ArgumentParser(
    prog="python -m hcq.smi", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
    description="GPU monitor for AMD (KFD topology, amdgpu sysfs/hwmon) and NVIDIA (/proc/driver/nvidia) GPUs,\n"
                "without vendor runtimes. Prints a one-shot table by default.")
  ap.add_argument("--json", action="store_true", help="print a JSON document (schema_version 1) instead of the table; "
                  "with --watch, one JSON document per line per refresh")
  ap.add_argument("--watch", nargs="?", type=float, const=1.0, default=None, metavar="SECONDS",
                  help="refresh in place every SECONDS (default 1) until Ctrl-C")
  ap.add_argument("--count", type=int, metavar="N", help="stop after N refreshes (implies --watch)")
  ap.add_argument("--pids", action="store_true", help="also list processes holding GPU device files: PID, name, GPU, "
                  "and memory where the driver exposes it (amdgpu fdinfo)")
  ap.add_argument("--dev", metavar="SEL", help="show only the GPUs named by SEL (see device selection below)")
  args = ap.parse_args(argv)
  if args.watch is not None and not math.isfinite(args.watch): ap.error(f"--watch {args.watch}: the interval must be a finite number of seconds")
  if args.watch is not None and args.watch < 0: ap.error("--watch interval must not be negative")
  if args.dev is not None and not [item for item in args.dev.split(",") if item.strip()]:
    ap.error(f"--dev {args.dev!r} names no GPU: give an index, a name or a PCI address (see device selection below)")
  if args.watch == 0 and args.count is None: ap.error("--watch 0 needs --count N to bound it")
  if args.count is not None:
    if args.count < 1: ap.error("--count must be at least 1")
    if args.watch is None: args.watch = 1.0
  return args


def run(argv: list[str] | None) -> int:
  """Parse, read, print; return the exit code. Errors propagate to `main`."""
  args = parse_args(argv)
  from hcq.smi import snapshot, source
  src = source.choose(os.environ)

  def view(frame: int, in_place: bool) -> tuple[list[str] | str, int]:
    snap = snapshot.take(src.os, with_processes=args.pids, vendors=src.vendors)
    snap = snapshot.select(snapshot.select(snap, src.arch), args.dev)
    code = snapshot.exit_code(snap)
    if args.json:
      from hcq.smi import jsonout
      return jsonout.render(snap, code, compact=args.watch is not None), code
    from hcq.smi import table
    if not in_place: return table.render(snap), code
    status = f"every {args.watch:g} s, frame {frame + 1}" + (f" of {args.count}" if args.count else ", Ctrl-C stops")
    return table.render(snap, status), code

  if args.watch is None:
    content, code = view(0, False)
    sys.stdout.write((content if isinstance(content, str) else "\n".join(content)) + "\n")
    return code
  from hcq.smi.watch import watch
  try:
    return watch(lambda n: view(n, not args.json), args.watch, args.count, in_place=not args.json)
  except KeyboardInterrupt:
    return errors.OK  # Ctrl-C is how a watch ends


def main(argv: list[str] | None = None) -> int:
  """Run the command; return its exit code. Every failure becomes one line on stderr."""
  try:
    return run(argv)
  except SmiError as e:
    print(f"hcq.smi: {e}", file=sys.stderr)
    return e.code
  except KeyboardInterrupt:
    return errors.INTERRUPTED
  except BrokenPipeError:
    # The reader went away (| head): stop quietly; point stdout at devnull so the exit flush does not complain.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return errors.OK
  except Exception as e:  # the promise is no traceback: one line, and HCQ_DEBUG=1 for the details
    if os.environ.get("HCQ_DEBUG"):
      import traceback
      traceback.print_exc()
    print(f"hcq.smi: internal error: {type(e).__name__}: {e} (HCQ_DEBUG=1 shows the traceback; please report it)", file=sys.stderr)
    return errors.INTERNAL
