"""Is a committed table what the generator writes today? The full answer regenerates it (minutes per arch:
tests/test_asm_llvm.py with HCQ_ASM_FULL_FRESHNESS=1); the cheap one, here, compares the generator fingerprint the table
records and a seeded sample of its entries probed again."""
from __future__ import annotations
import random

from hcq.asm.generator import probe, shapes
from hcq.asm.generator.__main__ import fingerprint, scalar_names, symbol_names
from hcq.asm.generator.layouts import ARCHS


def fingerprint_difference(table) -> str | None:
  """Why a committed table module was not written by today's generator, judged by its recorded GENERATOR
  fingerprint (the generator's sources and llvm-mc's version); None when they match."""
  now = fingerprint()
  if getattr(table, "GENERATOR", None) == now: return None
  return (f"asm/tables/{table.ARCH}.py records generator {getattr(table, 'GENERATOR', None)!r}, today's is {now!r}: "
          f"run python -m hcq.asm.generator {table.ARCH}")


def sample_differences(arch: str, table, formats: int | set[str] = 8, per_format: int = 2, seed: int = 13) -> list[str]:
  """A cheap freshness check of a committed table module: `per_format` opcodes of each of `formats` formats (a
  seeded choice of that many, or those named) probed again and compared with their committed entries (VALID
  indices and interned th/img tables resolved); NAMES (less th/img) and SCALARS probed again in full. Returns the
  differences, empty when the sample is fresh."""
  layouts, rng, out = ARCHS[arch], random.Random(seed), []
  names = sorted(table.OPCODES)
  for fmt in sorted(formats if isinstance(formats, set) else rng.sample(names, min(formats, len(names)))):
    recs = table.OPCODES[fmt]
    fields = {f: (hi, lo, k) for f, hi, lo, k in layouts[fmt][2]}
    chosen = {r[0]: r for r in rng.sample(recs, min(per_format, len(recs)))}
    fresh = {r.op: shapes.record(r, fields) for r in probe.probe_format(fmt, layouts, arch, only=set(chosen))}
    for op, committed in sorted(chosen.items()):
      want, got = _resolved(table, committed), fresh.get(op)
      if got is not None and "dpp_ctrl" in fields:  # refused lane controls are judged against the whole format's (probe._assembler_limits)
        want, got = (r[:6] + (tuple(x for x in r[6] if x[0] != "dpp_ctrl"),) for r in (want, got))
      if got != want: out.append(f"{arch} {fmt} op {op}: committed {want}, generated now {got}")
  opcodes = {fmt: list(recs) for fmt, recs in table.OPCODES.items()}
  symbols = {k: v for k, v in table.NAMES.items() if not (k[:2] == "th" and k[2:].isdigit() or k[:3] == "img" and k[3:].isdigit())}
  if symbol_names(layouts, opcodes, arch) != symbols: out.append(f"{arch}: NAMES differ from symbol_names()")
  if scalar_names(layouts, opcodes, arch) != table.SCALARS: out.append(f"{arch}: SCALARS differ from scalar_names()")
  return out


def _resolved(table, rec: tuple) -> tuple:
  """A committed OPCODES entry with its VALID indices and interned th/img table names replaced by what they stand for,
  as shapes.record gives it."""
  op, mnemonic, operands, fixed, mods, defaults, refused = rec
  def operand(o):
    if not isinstance(o, tuple): return o
    kind = "image:" + table.NAMES[o[3][6:]] if o[3].startswith("image:img") else o[3]
    return (*o[:3], kind, None if o[4] is None else table.VALID[o[4]])
  def mod(f, syn):
    if not syn.startswith("thscope:th"): return f, syn
    key, comma, ret = syn[8:].partition(",")
    return f, "thscope:" + "|".join(table.NAMES[key][i] for i in range(len(table.NAMES[key]))) + comma + ret
  return (op, mnemonic, tuple(operand(o) for o in operands), fixed, tuple(mod(*m) for m in mods), defaults,
          tuple((f, kind, table.VALID[m] if kind == "value" else m) for f, kind, m in refused))
