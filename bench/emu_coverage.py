"""Emulator opcode coverage per arch and encoding format: implemented, tested against the independent ISA reference
(tests/test_emu_reference.py), executed by some test (optional), and the listed exceptions by reason. Not run in CI.

  python bench/emu_coverage.py                       # implemented vs reference-tested, per arch and format
  HCQ_EMU_COVERAGE=/tmp/ran.txt python -m pytest -q tests/test_emu*.py
  python bench/emu_coverage.py --executed /tmp/ran.txt   # adds what any test executed
  python bench/emu_coverage.py --write-exceptions    # regenerate tests/emu_coverage_exceptions.txt (review the diff)
"""
from __future__ import annotations
import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests import emu_coverage as C  # noqa: E402


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--executed", type=Path, help="a file HCQ_EMU_COVERAGE wrote (lines: arch format opcode)")
  ap.add_argument("--write-exceptions", action="store_true", help="rewrite tests/emu_coverage_exceptions.txt from today's gaps")
  ap.add_argument("--reasons", action="store_true", help="also count the untested opcodes by reason")
  a = ap.parse_args()
  if a.write_exceptions:
    C.write_exceptions()
    print(f"wrote {C.EXCEPTIONS_FILE}")
    return
  ran: set[tuple[str, str, str]] = set()
  if a.executed:
    if not a.executed.exists(): sys.exit(f"--executed {a.executed}: no such file (run pytest with HCQ_EMU_COVERAGE={a.executed} first)")
    ran = {tuple(l.split()) for l in a.executed.read_text().splitlines() if l.strip()}
  for arch in C.ARCHS:
    impl, tested = C.implemented(arch), C.reference_tested(arch)
    by_fmt = collections.defaultdict(lambda: [0, 0, 0])
    for fmt, name in impl:
      row = by_fmt[fmt]
      row[0] += 1
      row[1] += (fmt, name) in tested
      row[2] += (arch, fmt, name) in ran
    ti, tt, tr = (sum(r[i] for r in by_fmt.values()) for i in range(3))
    print(f"{arch}: {ti} implemented, {tt} tested against the reference ({100 * tt / ti:.0f}%)"
          + (f", {tr} executed by some test ({100 * tr / ti:.0f}%)" if ran else ""))
    print(f"  {'format':<14}{'impl':>6}{'ref':>6}{'%':>5}" + (f"{'ran':>6}{'%':>5}" if ran else ""))
    for fmt in sorted(by_fmt):
      i, t, r = by_fmt[fmt]
      print(f"  {fmt:<14}{i:>6}{t:>6}{100 * t // i:>5}" + (f"{r:>6}{100 * r // i:>5}" if ran else ""))
    if a.reasons:
      reasons = collections.Counter(C.reason_for(f, n) for f, n in impl - tested)
      for reason, n in reasons.most_common(): print(f"  untested {n:5d}  {reason}")


if __name__ == "__main__":
  main()
