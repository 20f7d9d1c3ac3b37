"""What people write, not what llvm-mc prints: spellings of each opcode's sample lines, judged against llvm-mc 19.

Per opcode, from the lines `verify.sample_instructions` prints: each modifier left out and written at its default;
every alias and old name llvm-mc takes for it (the table's ALIASES); the mnemonic without its encoding suffix; and
free-form syntax (tabs, extra spaces, no space after commas, an upper-case mnemonic, numbers in hex/decimal/
negative/float form, one-register ranges and register lists). Each line is assembled by hcq.asm and by llvm-mc:
both must give the same bytes, or both refuse it; anything else where we give bytes is a silent difference.
`python -m hcq.asm.spelling [ARCH ...] [--every N]` prints the report."""
from __future__ import annotations
import random
import re
import struct
import sys
from dataclasses import dataclass, field

from hcq.asm import llvm
from hcq.asm.generator.spellings import stem
from hcq.asm.isa import ISA, Opcode, load
from hcq.asm.numbers import split_syntax
from hcq.asm.tokens import split_operands

_VOP_SUFFIXES = ("_e32", "_e64")  # the encodings a suffix-less mnemonic chooses between
CLASSES = ("omitted", "default", "alias", "suffixless", "whitespace", "case", "number", "register")
_REG = re.compile(r"^([-|]*)([vsa])(?:(\d+)|\[(\d+):(\d+)\])(\|?)$")


def _line(mnemonic: str, toks: list[tuple[str, str]]) -> str:
  out = mnemonic
  for i, (sep, t) in enumerate(toks):
    out += (" " if i == 0 else ", " if sep == "," else " ") + t
  return out


def _defaults(opc: Opcode) -> list[str]:
  """Each modifier of an opcode written at the value text without it means (offset:0, row_mask:0xf, noglc, mul:1,
  op_sel:[0,0,0], scope:SCOPE_CU)."""
  out = []
  for f, syn in opc.mods.items():
    d = opc.defaults.get(f, 0)
    if syn.startswith("flag:") and ",ret:" not in syn:  # glc -> noglc; fi:1 -> fi:0
      word = syn[5:].split(",")[0]
      out.append(word.split(":")[0] + ":0" if ":" in word else "no" + word)
    elif syn == "omod": out.append("mul:1")
    elif syn.startswith(("op_sel:", "neg_lo:", "neg_hi:")) and not syn.startswith("op_sel_hi"):
      out.append(f"{syn.split(':')[0]}:[{','.join('0' * int(syn.split(':')[1].split(',')[0]))}]")
    elif syn.startswith("enum:") and f in opc.isa.unprinted and d == 0: out += [f"{f}:{n}" for n in opc.isa.unprinted_names(f)]
    elif syn.startswith("thscope:") and syn[8:].split(",")[0] in opc.isa.unprinted:
      out += [f"th:{n}" for n in opc.isa.unprinted_names(syn[8:].split(",")[0])]
    elif syn == "named:format" and "format" in opc.isa.unprinted: out += [f"format:[{n}]" for n in opc.isa.unprinted_names("format")]
    elif not syn.startswith(("flag:", "neg", "abs", "omod", "op_sel", "named:", "text:", "enum:", "thscope:", "sel:", "acc:", "{")):
      prefix, fmt, _ = split_syntax(syn)
      if prefix and fmt: out.append(f"{prefix}{d if fmt in ('dec', 'sdec') else hex(d)}")
  return out


def _numbers(tok: str) -> list[str]:
  """Other spellings of a number token: hex <-> decimal, a float's bits, a small integer negated."""
  body = tok.split(":", 1)[1] if ":" in tok and not tok.startswith(("0x", "-")) else tok
  head = tok[:len(tok) - len(body)]
  out = []
  try:
    if re.fullmatch(r"-?0x[0-9a-f]+", body): v = int(body, 16); out += [head + str(v)]
    elif re.fullmatch(r"-?\d+", body): v = int(body); out += [head + hex(v) if v >= 0 else head + f"-{hex(-v)}"]
    elif re.fullmatch(r"-?\d+\.\d+", body): out += [head + hex(struct.unpack("<I", struct.pack("<f", float(body)))[0])]
  except (ValueError, OverflowError): pass
  return out


def _registers(tok: str) -> list[str]:
  """v5 -> v[5] and v[5:5]; s[4:5] -> [s4,s5]; modifiers kept."""
  m = _REG.match(tok)
  if not m: return []
  pre, f, one, lo, hi, post = m.groups()
  if one is not None: return [f"{pre}{f}[{one}]{post}", f"{pre}{f}[{one}:{one}]{post}"]
  lo, hi = int(lo), int(hi)
  return [f"{pre}[{', '.join(f'{f}{r}' for r in range(lo, hi + 1))}]{post}"] if hi - lo < 8 else []


def spellings(isa: ISA, opc: Opcode, texts: list[str]) -> list[tuple[str, str]]:
  """(class, line) spellings of an opcode's printed sample lines (see the module docstring)."""
  out: list[tuple[str, str]] = []
  aliases = [a for a, m in isa.aliases.items() if m in (opc.mnemonic.strip(), stem(opc.mnemonic, _VOP_SUFFIXES))]
  for text in texts:
    if " :: " in text: continue  # VOPD pairs: whole-line spellings only
    mnemonic, _, rest = text.partition(" ")
    rest = rest.strip()
    toks = split_operands(rest) if opc.fmt.name != "SOPP" else ([("", rest)] if rest else [])
    first = next((i for i, (sep, _) in enumerate(toks) if sep == " " and i > 0), len(toks))
    for i in range(first, len(toks)): out.append(("omitted", _line(mnemonic, toks[:i] + toks[i + 1:])))
    printed = {t.split(":")[0] for _, t in toks[first:]}
    for d in _defaults(opc):
      if d.split(":")[0] not in printed and d.removeprefix("no") not in printed: out.append(("default", _line(mnemonic, toks + [(" ", d)])))
    for a in aliases: out.append(("alias", _line(a, toks)))
    if stem(mnemonic, _VOP_SUFFIXES) != mnemonic and mnemonic.endswith(("_e32", "_e64")): out.append(("suffixless", _line(stem(mnemonic, _VOP_SUFFIXES), toks)))
    if rest:
      out.append(("whitespace", f"{mnemonic}\t{rest}"))
      out.append(("whitespace", f"  {mnemonic}   {rest.replace(', ', ' ,  ')}  "))
      out.append(("whitespace", f"{mnemonic} {rest.replace(', ', ',')}"))
    out.append(("case", f"{mnemonic.upper()} {rest}".rstrip()))
    for i, (sep, t) in enumerate(toks):
      for alt in _numbers(t): out.append(("number", _line(mnemonic, toks[:i] + [(sep, alt)] + toks[i + 1:])))
      for alt in _registers(t): out.append(("register", _line(mnemonic, toks[:i] + [(sep, alt)] + toks[i + 1:])))
  seen, unique = set(), []
  for c, line in out:
    if line not in seen: seen.add(line); unique.append((c, line))
  return unique


@dataclass
class ClassCount:
  tried: int = 0
  llvm_accepts: int = 0
  agree: int = 0          # llvm-mc accepts, we give its bytes
  llvm_rejects: int = 0
  both_reject: int = 0
  silent: int = 0         # we give bytes llvm-mc does not (other bytes, or where it refuses the line)
  refused: int = 0        # llvm-mc accepts, we refuse (loud, not silent)
  examples: list = field(default_factory=list)


def sweep(arch: str, every: int = 1, seed: int = 0) -> dict[str, ClassCount]:
  """Spellings of every `every`-th opcode of each format (a seeded choice), judged against llvm-mc; counts per class."""
  from hcq.asm.parser import AsmError
  from hcq.asm.text import assemble
  from hcq.asm.verify import sample_instructions
  isa = load(arch)
  rng = random.Random(seed)
  samples: list[tuple[Opcode, str]] = []
  for fmt in sorted(isa.by_op):
    opcodes = list(isa.by_op[fmt].values())
    chosen = opcodes if every <= 1 else rng.sample(opcodes, max(1, len(opcodes) // every))
    for opc in chosen:
      for inst in sample_instructions(isa, opc)[:3]:
        try: samples.append((opc, str(inst)))
        except Exception: pass  # noqa: BLE001 - a sample we cannot print is verify's business
  # spellings of the samples llvm-mc assembles (not the fallback image texts its printer shows but its assembler refuses)
  lines: list[tuple[str, str]] = []
  for (opc, text), ok in zip(samples, llvm.assemble_each([t for _, t in samples], arch)):
    if isinstance(ok, bytes): lines += spellings(isa, opc, [text])
  theirs = llvm.assemble_each([l for _, l in lines], arch)
  counts = {c: ClassCount() for c in CLASSES}
  for (c, line), t in zip(lines, theirs):
    k = counts[c]
    k.tried += 1
    try: ours: bytes | Exception = assemble(line, arch)
    except (AsmError, ValueError) as e: ours = e
    if isinstance(t, bytes):
      k.llvm_accepts += 1
      if ours == t: k.agree += 1
      elif isinstance(ours, bytes): k.silent += 1; k.examples.append(f"SILENT {line!r}: ours {ours.hex()}, llvm-mc {t.hex()}")
      else: k.refused += 1; k.examples.append(f"refused {line!r}: {ours}; llvm-mc {t.hex()}")
    else:
      k.llvm_rejects += 1
      if isinstance(ours, bytes): k.silent += 1; k.examples.append(f"SILENT {line!r}: ours {ours.hex()}, llvm-mc refuses: {t}")
      else: k.both_reject += 1
  return counts


def report(arch: str, counts: dict[str, ClassCount]) -> str:
  tried = sum(k.tried for k in counts.values())
  acc, agree = sum(k.llvm_accepts for k in counts.values()), sum(k.agree for k in counts.values())
  rej, both = sum(k.llvm_rejects for k in counts.values()), sum(k.both_reject for k in counts.values())
  silent = sum(k.silent for k in counts.values())
  head = (f"{arch}: {tried} lines; llvm-mc accepts {acc}, we agree on {agree} ({agree / max(acc, 1):.2%}); llvm-mc rejects {rej}, "
          f"we reject {both} ({both / max(rej, 1):.2%}); silent differences {silent}")
  rows = [f"  {c:10} tried {k.tried:6} agree {k.agree:6}/{k.llvm_accepts:<6} reject {k.both_reject:5}/{k.llvm_rejects:<5} silent {k.silent}"
          for c, k in counts.items() if k.tried]
  return "\n".join([head, *rows])


def main(argv: list[str] | None = None) -> int:
  import argparse
  ap = argparse.ArgumentParser(prog="python -m hcq.asm.spelling", description=__doc__)
  ap.add_argument("arch", nargs="*", default=["gfx1100", "gfx1201", "gfx942"])
  ap.add_argument("--every", type=int, default=1, help="one opcode in N per format (default: all)")
  ap.add_argument("--show", type=int, default=20, help="differences to print per class")
  args = ap.parse_args(argv)
  for arch in args.arch:
    counts = sweep(arch, args.every)
    print(report(arch, counts))
    for c, k in counts.items():
      for e in k.examples[:args.show]: print(f"    [{c}] {e}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
