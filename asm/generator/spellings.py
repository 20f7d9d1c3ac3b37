"""Spellings llvm-mc 19 takes that its printer never shows, found by probing: other names for an arch's opcodes
(LLVM's MnemonicAlias definitions: old names such as flat_atomic_add, ds_read_b32 on gfx12, v_mfma_f32_32x32x1f32),
and the names of values printed as nothing (scope:SCOPE_CU, th:TH_LOAD_RT, format:[BUF_FMT_8_UNORM]).

Candidates are the mnemonic-shaped strings in the LLVM library llvm-mc runs on (its matcher tables and alias code
hold every name it takes). A candidate the table lacks is assembled with the operands of the table's most
similar opcodes' samples; where llvm-mc takes it, our own decoder names the opcode it encoded. Nothing is typed by
hand: llvm-mc decides what is an alias and of what."""
from __future__ import annotations
import difflib
import functools
import glob
import os
import re
import shutil
import types

from hcq.asm import llvm
from hcq.asm.isa import Opcode

_NAME = re.compile(rb"(?<![a-z0-9_])(?:s|v|ds|flat|global|scratch|buffer|tbuffer|image)_[a-z0-9_]{2,60}(?![a-z0-9_])")
_SYMBOL = re.compile(rb"(?<![A-Za-z0-9_])[A-Z][A-Z0-9]*_[A-Z0-9_]{1,40}(?![A-Za-z0-9_])")
_SUFFIXES = ("_e32", "_e64", "_dpp", "_sdwa")
_TRIES = 12  # similar opcodes whose samples' operands a candidate is tried with


@functools.cache
def library_names(pattern: re.Pattern = _NAME) -> frozenset[str]:
  """Strings of a shape (mnemonics, or upper-case symbols) in the libLLVM that llvm-mc-19 links (empty if it
  cannot be found)."""
  exe = shutil.which(llvm.LLVM_MC)
  if exe is None: return frozenset()
  libs = sorted(glob.glob(os.path.join(os.path.dirname(os.path.realpath(exe)), "..", "lib", "libLLVM*.so*")))
  out: set[str] = set()
  for path in libs[:1]:
    with open(path, "rb") as f: out |= {m.decode() for m in pattern.findall(f.read())}
  return frozenset(out)


def _load(arch: str, table_source: str):
  """The ISA of a freshly generated table source."""
  from hcq.asm.isa import ISA
  ns = types.SimpleNamespace()
  exec(compile(table_source, f"<{arch} table>", "exec"), ns.__dict__)  # noqa: S102 - the generator's own output
  return ISA(arch, ns)


def probe_unprinted(arch: str, table_source: str) -> dict[str, str]:
  """{name table: the names ('|'-separated) of the value llvm-mc prints as nothing}: a gfx12 th table's TH_LOAD_RT, scope's
  SCOPE_CU, the buffer format's BUF_FMT_8_UNORM. Candidates are the library's symbols that share the printed names'
  prefix; the one whose line assembles to the bytes of the line without it is the name. Also {'flag:k:0': field
  value} for the flags printed as k:1 that llvm-mc takes as k:0."""
  from hcq.asm.verify import sample_instructions
  isa = _load(arch, table_source)
  slots: dict[str, tuple] = {}  # table -> (opcode, keyword, printed names)
  for opc in isa.by_mnemonic.values():
    for f, syn in opc.mods.items():
      if syn.startswith("thscope:"):
        key = syn[8:].split(",")[0]
        slots.setdefault(key, (opc, "th:{}", [t.partition(":")[2] for t in isa.names[key].values() if t]))
      elif syn.startswith("enum:") and syn[5:].startswith("|"):
        slots.setdefault(f, (opc, f + ":{}", [t.partition(":")[2] for t in syn[5:].split("|") if t]))
      elif syn == "named:format" and "" in isa.names["format"].values():
        slots.setdefault("format", (opc, "format:[{}]", [t.strip("[]") for t in isa.names["format"].values() if t]))
  symbols = library_names(_SYMBOL)
  lines, keys, bases = [], [], {}
  for key, (opc, keyword, printed) in sorted(slots.items()):
    base = next((str(i) for i in sample_instructions(isa, opc)[:1]), None)
    if base is None or not printed: continue
    prefix = os.path.commonprefix(printed)
    prefix = prefix[:prefix.rindex("_") + 1] if "_" in prefix else prefix
    # the printed names' own family first (BUF_FMT_8_UNORM before BUF_DATA_FORMAT_8, which llvm-mc also takes)
    heads = [p[:p.index("_", p.index("_") + 1) + 1] if p.count("_") > 1 else p for p in printed]
    family = max(heads, key=heads.count)
    bases[key] = len(lines)
    lines.append(base)
    keys.append((key, None))
    # names LLVM spells from parts (TH_LOAD_RT, whose parts show in the printed TH_LOAD_RT_NT) are not in the library whole
    parts = {family + x for p in printed if p.startswith(family) for x in p[len(family):].split("_") if x}
    cands = {n for n in symbols | parts if n.startswith(prefix) and n not in printed}
    for cand in sorted(cands, key=lambda n: (not n.startswith(family), n)):
      lines.append(f"{base} {keyword.format(cand)}"); keys.append((key, cand))
  # a flag printed as 'k:1' (fi:1, bound_ctrl:1) written 'k:0': the value llvm-mc puts in its field (gfx9's legacy
  # bound_ctrl:0 sets the bit), as 'flag:k:0' -> '0' or '1'; absent where llvm-mc refuses it
  flags: dict[str, tuple] = {}
  for opc in isa.by_mnemonic.values():
    for f, syn in opc.mods.items():
      if syn.startswith("flag:") and syn[5:].split(",")[0].endswith(":1"): flags.setdefault(syn[5:].split(",")[0][:-2], (opc, f))
  for word, (opc, f) in sorted(flags.items()):
    base = next((str(i) for i in sample_instructions(isa, opc)[:1]), None)
    if base is None: continue
    lines += [f"{base} {word}:0"]; keys.append((f"flag:{word}:0", (opc, f)))
  # a bare flag's 'no' form, per format (noglc, nosc0: 'no:glc:FLAT' -> '0'); llvm-mc refuses some (nodone, nooffen,
  # gfx12's notfe on a buffer load though tfe itself is taken)
  bare: dict[tuple[str, str], list[Opcode]] = {}
  for opc in isa.by_mnemonic.values():
    for f, syn in opc.mods.items():
      word = syn[5:].split(",")[0]
      if syn.startswith("flag:") and ":" not in word and ",ret:" not in syn: bare.setdefault((word, opc.fmt.name), []).append(opc)
  for (word, fmt), opcs in sorted(bare.items()):
    texts = [str(i) for opc in opcs[:4] for i in sample_instructions(isa, opc)[:1]]  # a few: some samples llvm-mc refuses
    for base in texts:
      lines += [base, f"{base} no{word}"]; keys += [(f"no:{word}:{fmt}:base", None), (f"no:{word}:{fmt}", "0")]
  got = llvm.assemble_each(lines, arch)
  out: dict[str, str] = {}
  no_refused: set[str] = set()  # a no-form llvm-mc refuses on any sample of the format (whose line without it assembles)
  for i, ((key, cand), data) in enumerate(zip(keys, got)):
    if key.startswith("no:") and cand is not None:
      if not isinstance(got[i - 1], bytes): continue
      if data == got[i - 1]: out.setdefault(key, cand)
      else: no_refused.add(key)
    elif isinstance(cand, tuple):
      if isinstance(data, bytes):
        opc, f = cand
        fld = opc.fmt.fields[f]
        out[key] = str(int.from_bytes(data[:opc.fmt.size], "little") >> fld.lo & fld.mask)
    elif cand is not None and isinstance(data, bytes) and data == got[bases[key]]:
      out[key] = f"{out[key]}|{cand}" if key in out else cand  # every name it takes, its own family's first
  return dict(sorted((k, v) for k, v in out.items() if k not in no_refused))


def stem(mnemonic: str, suffixes: tuple[str, ...] = _SUFFIXES) -> str:
  """'v_add_f32_e64' -> 'v_add_f32': the name an alias stands for, whatever encoding its operands choose (`suffixes`:
  the encoding suffixes stripped; hcq.asm.spelling strips only _e32/_e64, the forms a suffix-less name may pick)."""
  m = mnemonic.strip()
  for s in suffixes:
    if m.endswith(s): return m[:-len(s)]
  return m


def probe_aliases(arch: str, table_source: str) -> dict[str, str]:
  """{alias: the table's mnemonic stem it stands for} for one arch, from its freshly generated table source."""
  from hcq.asm.instruction import DecodeError, decode
  from hcq.asm.verify import sample_instructions
  isa = _load(arch, table_source)
  known = set(isa.variants) | {stem(m) for m in isa.variants}
  names = sorted(n for n in library_names() if n not in known and stem(n) not in known)
  # first pass: which candidates llvm-mc knows at all on this arch (an unknown mnemonic is 'invalid instruction')
  verdicts = llvm.assemble_each(names, arch)
  names = [n for n, v in zip(names, verdicts) if isinstance(v, bytes) or "invalid instruction" not in v and "not supported" not in v]
  by_family: dict[str, list[str]] = {}
  for m in sorted(isa.by_mnemonic): by_family.setdefault(m.split("_")[0], []).append(m)
  samples: dict[str, list[str]] = {}
  lines, keys = [], []
  for n in names:
    pool = sorted({stem(m) for m in by_family.get(n.split("_")[0], [])})
    for target in difflib.get_close_matches(stem(n), pool, n=_TRIES, cutoff=0.0):
      if target not in samples:
        opcs = [o for m in (target, target + "_e32", target + "_e64") for o in isa.variants.get(m, ()) if not o.fmt.name.endswith(("DPP16", "DPP8", "DPP8FI", "SDWA"))]
        samples[target] = [str(i) for o in opcs[:1] for i in sample_instructions(isa, o)[:1]]
      for text in samples[target]:
        lines.append(f"{n} {text.partition(' ')[2]}"); keys.append(n)
  out: dict[str, str] = {}
  for n, data in zip(keys, llvm.assemble_each(lines, arch)):
    if n in out or not isinstance(data, bytes): continue
    try: inst = decode(isa, data)
    except (DecodeError, ValueError): continue
    out[n] = inst.opcode.mnemonic.strip() if stem(n) != n else stem(inst.opcode.mnemonic)  # v_foo_e64 names that form
  return dict(sorted(out.items()))
