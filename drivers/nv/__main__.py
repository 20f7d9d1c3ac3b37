"""python -m hcq.drivers.nv run KERNEL [--arg ...]: run a PTX, cubin, CUDA C++ or LLVM IR kernel on an NV device (see hcq.drivers.nv.run)."""
import sys

from hcq.drivers.nv.run import run


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  if not argv or argv[0] != "run":
    print("usage: python -m hcq.drivers.nv run KERNEL [options]  (python -m hcq.drivers.nv run --help)", file=sys.stderr)
    return 2
  return run(argv[1:])


if __name__ == "__main__":
  sys.exit(main())
