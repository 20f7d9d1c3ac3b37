"""python -m hcq.asm: assemble, disassemble and run AMD GPU assembly.

  asm FILE.s [--arch gfx1100] [-o FILE.co] [--raw]   a loadable code object (or, with --raw, the bare machine code)
  disasm FILE [--arch gfx1100]                        a code object's kernels, or raw machine code, one instruction a line
  run FILE.s [...]                                    assemble, load on an AMD device (emulated without one), run, print
"""
from __future__ import annotations
import argparse
import sys
from pathlib import Path

from hcq.asm import AsmError, DecodeError, assemble, disassemble
from hcq.asm.cli import guarded, read_text, user_error
from hcq.asm.isa import ARCHS

PROG = "python -m hcq.asm"


def _asm(args) -> int:
  text = read_text(args.file, "assembly file")
  try:
    if args.raw:
      data = assemble(text, args.arch)
    else:
      from hcq.asm.kernel import Kernel
      data = Kernel(args.name or args.file.stem, args.arch).add(text).to_elf()
  except AsmError as e:
    return user_error(PROG, f"{args.file}:{e}")
  out = args.output or args.file.with_suffix(".bin" if args.raw else ".co")
  try:
    out.write_bytes(data)
  except OSError as e:
    return user_error(PROG, f"cannot write {out}: {e.strerror}")
  print(f"{out}: {len(data)} bytes ({'machine code' if args.raw else 'code object'} for {args.arch})")
  return 0


def _disasm(args) -> int:
  try:
    data = args.file.read_bytes()
  except OSError as e:
    return user_error(PROG, f"cannot read {args.file}: {e.strerror}")
  try:
    if data[:4] == b"\x7fELF":
      from hcq.asm.codeobject import CodeObjectError, read_code_object
      try:
        co = read_code_object(data)
      except CodeObjectError as e:
        return user_error(PROG, f"{args.file}: {e}")
      for name, k in co.kernels.items():
        if not k.code_size: return user_error(PROG, f"{args.file}: kernel {name} has no sized function symbol: its code's end is unknown")
        code = bytes(co.image[k.code_offset:k.code_offset + k.code_size])
        print(f"{name}:  ; {co.arch}, {k.kernarg_size} bytes of kernel arguments")
        print("\n".join("  " + line for line in disassemble(code, co.arch)))
      return 0
    print("\n".join(disassemble(data, args.arch)))
  except DecodeError as e:
    return user_error(PROG, f"{args.file}: {e}")
  return 0


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  if argv and argv[0] == "run":
    from hcq.asm.runner import run
    return run(argv[1:])
  return guarded(PROG, lambda: _main(argv))


def _main(argv: list[str]) -> int:
  ap = argparse.ArgumentParser(prog=PROG, description="AMD GPU assembler, disassembler and runner",
                               epilog="python -m hcq.asm run --help describes running a kernel")
  sub = ap.add_subparsers(dest="cmd", required=True)
  a = sub.add_parser("asm", help="assemble LLVM AMDGPU syntax into a loadable code object")
  a.add_argument("file", type=Path)
  a.add_argument("--arch", default="gfx1100", choices=ARCHS)
  a.add_argument("-o", "--output", type=Path, help="output file (default: FILE.co, or FILE.bin with --raw)")
  a.add_argument("--name", help="kernel name (default: the file's stem)")
  a.add_argument("--raw", action="store_true", help="write the bare machine code instead of a code object")
  d = sub.add_parser("disasm", help="disassemble a code object or raw machine code")
  d.add_argument("file", type=Path)
  d.add_argument("--arch", default="gfx1100", choices=ARCHS, help="for raw machine code (a code object names its own)")
  sub.add_parser("run", help="assemble, load, run and print (see: python -m hcq.asm run --help)")
  args = ap.parse_args(argv)
  return _asm(args) if args.cmd == "asm" else _disasm(args)


if __name__ == "__main__":
  sys.exit(main())
