"""Wall time of `python -m hcq.smi --json`, process start included, beside bare `python -c pass`.

Each figure is the median of RUNS fresh interpreters after one warm-up run (so .pyc files exist). The
target is the issue's: `python -m hcq.smi --json` <= 200 ms on this machine. The recorded trees under
tests/fixtures/sysfs show the cost of reading real boards (this machine may have no GPU); the emulated
GPU's row is informative only (it starts the mock GPU, numpy included).

  python bench/smi_speed.py [--runs N]
"""
from __future__ import annotations
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "sysfs")
TARGET_MS = 200.0

from timing import median_interpreter_ms  # noqa: E402  (bench/ is the script's folder)

# (label, argv after the interpreter, extra environment, target ms or None)
CASES: list[tuple[str, list[str], dict[str, str], float | None]] = [
  ("python -c pass", ["-c", "pass"], {}, None),
  ("python -m hcq.smi --json (this machine)", ["-m", "hcq.smi", "--json"], {}, TARGET_MS),
  ("python -m hcq.smi (table, this machine)", ["-m", "hcq.smi"], {}, None),
  ("  --json, recorded 7900 XTX", ["-m", "hcq.smi", "--json"], {"HCQ_SYSROOT": os.path.join(FIXTURES, "rx7900xtx")}, TARGET_MS),
  ("  --json, recorded 2x MI300X", ["-m", "hcq.smi", "--json"], {"HCQ_SYSROOT": os.path.join(FIXTURES, "mi300x")}, TARGET_MS),
  ("  --json --pids, recorded 2x MI300X", ["-m", "hcq.smi", "--json", "--pids"], {"HCQ_SYSROOT": os.path.join(FIXTURES, "mi300x")}, None),
  ("  --json --pids (this machine's /proc)", ["-m", "hcq.smi", "--json", "--pids"], {}, None),
  ("  DEV=MOCKKFD+AMD --json (emulated GPU)", ["-m", "hcq.smi", "--json"], {"DEV": "MOCKKFD+AMD"}, None),
]


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--runs", type=int, default=15, help="fresh interpreters per case (median taken; at least 10)")
  args = ap.parse_args()
  print(f"hcq.smi speed: median of {args.runs} fresh interpreters, warm .pyc; python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
  print(f"  {'case':<42} {'ms':>8} {'added':>8} {'target':>8}  verdict")
  base, failed = None, False
  for label, argv, env, target in CASES:
    ms = median_interpreter_ms(argv, args.runs, env, check=False)  # smi exits 3 on a machine without a GPU, by design
    if base is None: base = ms
    added = "-" if ms is base else f"{ms - base:8.1f}"
    verdict, tgt = "", "-"
    if target is not None:
      tgt, verdict = f"<={target:.0f}", "PASS" if ms <= target else "FAIL"
      failed |= verdict == "FAIL"
    print(f"  {label:<42} {ms:8.1f} {added:>8} {tgt:>8}  {verdict}")
  sys.exit(1 if failed else 0)


if __name__ == "__main__":
  main()
