"""python -m hcq.asm asm FILE.s [--arch gfx1100] [-o OUT] | disasm FILE [--arch gfx1100]

asm writes the raw machine code (code-object packing arrives with the Kernel/ELF work of issue 3);
disasm reads raw machine code and prints one instruction per line."""
from __future__ import annotations
import argparse
import sys
from pathlib import Path

from hcq.asm import AsmError, DecodeError, assemble, disassemble
from hcq.asm.isa import ARCHS


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m hcq.asm", description="AMD GPU assembler and disassembler")
  sub = ap.add_subparsers(dest="cmd", required=True)
  a = sub.add_parser("asm", help="assemble LLVM AMDGPU syntax to raw machine code")
  a.add_argument("file", type=Path)
  a.add_argument("--arch", default="gfx1100", choices=ARCHS)
  a.add_argument("-o", "--output", type=Path, help="output file (default: FILE with .bin)")
  d = sub.add_parser("disasm", help="disassemble raw machine code")
  d.add_argument("file", type=Path)
  d.add_argument("--arch", default="gfx1100", choices=ARCHS)
  args = ap.parse_args(argv)
  if args.cmd == "asm":
    try: code = assemble(args.file.read_text(), args.arch)
    except AsmError as e:
      print(f"{args.file}:{e}", file=sys.stderr); return 1
    out = args.output or args.file.with_suffix(".bin")
    out.write_bytes(code)
    print(f"{out}: {len(code)} bytes")
    return 0
  try: lines = disassemble(args.file.read_bytes(), args.arch)
  except DecodeError as e:
    print(f"{args.file}: {e}", file=sys.stderr); return 1
  print("\n".join(lines))
  return 0


if __name__ == "__main__":
  sys.exit(main())
