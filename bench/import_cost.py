"""Import cost of generated modules: wall time of a fresh `python -c ...` against bare `python -c pass`.

Each figure is the median of RUNS fresh interpreters after one warm-up run (so .pyc files exist); the
added milliseconds are what a user pays for the import. Targets: hcq.autogen.kfd <= 50 ms,
hcq.autogen.am.gc_11_0_0 <= 150 ms, hcq.autogen.nv.nv_ioctl and
nv.clc56f with its first method <= 50 ms (the other NV modules are reported). A module that does not exist (yet) is reported as missing.

  python bench/import_cost.py [--runs N]
"""
from __future__ import annotations
import argparse
import importlib.util
import os
import sys

# (label, code run with python -c, module that must exist or None, target added ms or None)
CASES: list[tuple[str, str, str | None, float | None]] = [
  ("python -c pass", "pass", None, None),
  ("import hcq.autogen.kfd", "import hcq.autogen.kfd", "hcq.autogen.kfd", 50.0),
  ("import hcq.autogen.am.gc_11_0_0", "import hcq.autogen.am.gc_11_0_0", "hcq.autogen.am.gc_11_0_0", 150.0),
  ("  + first register (regCOMPUTE_PGM_RSRC1)", "import hcq.autogen.am.gc_11_0_0 as m; m.regCOMPUTE_PGM_RSRC1",
   "hcq.autogen.am.gc_11_0_0", None),
  ("import hcq.autogen.nv.nv_ioctl", "import hcq.autogen.nv.nv_ioctl", "hcq.autogen.nv.nv_ioctl", 50.0),
  ("import hcq.autogen.nv.nvos", "import hcq.autogen.nv.nvos", "hcq.autogen.nv.nvos", None),
  ("import hcq.autogen.nv.clc56f + first method", "import hcq.autogen.nv.clc56f as m; m.register('NVC56F_SEM_EXECUTE')",
   "hcq.autogen.nv.clc56f", 50.0),
  ("import hcq.autogen.nv.clcbc0qmd + QMD V04", "import hcq.autogen.nv.clcbc0qmd as m; m.register('NVCBC0_QMDV04_00')",
   "hcq.autogen.nv.clcbc0qmd", None),
  ("import hcq.autogen.nv.ctrl2080", "import hcq.autogen.nv.ctrl2080", "hcq.autogen.nv.ctrl2080", None),
]


from timing import median_interpreter_ms  # noqa: E402  (bench/ is the script's folder)


def exists(module: str) -> bool:
  """Whether `module` can be imported, without importing it (its parent packages are imported; they are small)."""
  try:
    return importlib.util.find_spec(module) is not None
  except ModuleNotFoundError:
    return False


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--runs", type=int, default=15, help="fresh interpreters per case (median taken; at least 10 recommended)")
  args = ap.parse_args()
  print(f"import cost: median of {args.runs} fresh interpreters, warm .pyc; python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
  print(f"  {'case':<44} {'ms':>8} {'added':>8} {'target':>8}  verdict")
  base = None
  failed = False
  for label, code, module, target in CASES:
    if module is not None and not exists(module):
      print(f"  {label:<44} {'missing':>8}")
      continue
    ms = median_interpreter_ms(["-c", code], args.runs)
    if base is None:
      base = ms
      print(f"  {label:<44} {ms:8.1f} {'-':>8} {'-':>8}")
      continue
    added = ms - base
    verdict, tgt = "", "-"
    if target is not None:
      tgt = f"<={target:.0f}"
      verdict = "PASS" if added <= target else "FAIL"
      failed |= verdict == "FAIL"
    print(f"  {label:<44} {ms:8.1f} {added:8.1f} {tgt:>8}  {verdict}")
  sys.exit(1 if failed else 0)


if __name__ == "__main__":
  main()
