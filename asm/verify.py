"""Differential checks against llvm-mc 19, used by the tests and by `python -m hcq.asm.verify`:
every opcode (our encoding -> llvm-mc text == ours; llvm-mc's encoding of our text == ours) and random words
(for each word llvm-mc decodes, our text == its text and our encoding of that text == its encoding; a word it
rejects, we reject)."""
from __future__ import annotations
import random
from dataclasses import dataclass, field

from hcq.asm import llvm
from hcq.asm.build import build
from hcq.asm.fast_asm import assembler
from hcq.asm.fast_disasm import disassembler
from hcq.asm.instruction import DecodeError, Instruction, decode
from hcq.asm.isa import ISA, Opcode, load
from hcq.asm.operands import OperandError
from hcq.asm.parser import AsmError, parse_line
from hcq.asm.registers import Reg


@dataclass
class Report:
  """Counts and the first few disagreements of one differential run."""
  checked: int = 0
  agreed: int = 0
  problems: list[str] = field(default_factory=list)
  llvm_asymmetric: list[str] = field(default_factory=list)  # texts llvm-mc prints but its assembler refuses
  llvm_only_asymmetric: list[str] = field(default_factory=list)  # opcodes all of whose samples are such texts

  def fail(self, what: str) -> None:
    if len(self.problems) < 200: self.problems.append(what)

  @property
  def rate(self) -> float: return self.agreed / self.checked if self.checked else 1.0


def _operand_for(opc: Opcode, spec: tuple, variant: int) -> object:
  """A representative operand for one spec; variant 1 puts a constant or literal in the first source. gfx90a+
  assemblers take VGPR/AGPR tuples at even registers only: the samples keep to those."""
  x = _operand_any(opc, spec, variant)
  if opc.fmt.name == "VOP3P_MAI" and spec[0] == "src2" and isinstance(x, Reg) and x.file == "v":
    return Reg("v", 20, x.count)  # MFMA's C is D's registers or apart from them, never partly both
  if opc.isa.arch.startswith("gfx9") and isinstance(x, Reg) and x.file in "va" and isinstance(x.count, int) and x.count > 1 and x.value & 1:
    return Reg(x.file, x.value + 1, x.count)
  return x


def _operand_any(opc: Opcode, spec: tuple, variant: int) -> object:
  name, file, count = spec[0], spec[1], spec[2]
  kind = opc.fmt.fields[name].kind if name in opc.fmt.fields else "literal"
  fmt = opc.fmt.name
  if name == "literal": return 0x11
  if file == "a": return Reg("a", 5 if name.startswith("src") else 20, count)  # AGPR-only operands (v_accvgpr_read)
  if fmt in ("GLOBAL", "SCRATCH") and name == "saddr": return Reg("s", 2, 2 if fmt == "GLOBAL" else 1)
  if fmt == "GLOBAL" and name == "addr": return Reg("v", 3)
  if fmt == "SMEM" and name == "soffset" and "offset" not in opc.operand_fields: return 0x40 if variant else Reg("s", 9)
  if fmt == "SMEM" and name == "offset": return 0x40 if variant else Reg("s", 9)
  if fmt in ("MUBUF", "MTBUF") and name == "vaddr": return "off"
  if fmt == "VOPD" and name in ("vdstx", "src0x", "vsrc1x", "src0y", "vsrc1y") and not (variant and name == "src0x"):
    return Reg("v", {"vdstx": 20, "src0x": 5, "vsrc1x": 10, "src0y": 6, "vsrc1y": 11}[name])  # X and Y in different VGPR banks
  if fmt == "EXP" and name.startswith("vsrc"): return "off" if name == "vsrc2" else Reg("v", 1 + int(name[-1]))
  if file == "i":
    if spec[3] == "named:attr": return "attr1.y"
    return 0 if "named:" in spec[3] else 3
  if kind in ("src", "ssrc"):
    if variant == 1 and name in ("src0", "ssrc0"): return 3 if spec[3] == "H" else 0.5  # llvm-mc reads '0x3800' back as a literal
    if variant == 2 and name in ("src0", "ssrc0") and not opc.has_literal_operand: return 0x1234
    if variant == 3 and name in ("src0", "ssrc0") and spec[4] is not None and spec[4] >> 125 & 1 and count == 1: return Reg("s", 125)  # m0
    if kind == "ssrc" or file == "s": return Reg("s", 4 if count != "l" else 4, 1 if count == "l" else count)
    base = {"src0": 5, "src1": 9, "src2": 13}.get(name, 5)
    return Reg("v", base, 1, "l") if count == "l" else Reg("v", base, count)
  if kind == "sbase": return Reg("s", 8, count)
  if kind == "vdsty": return Reg("v", 21)  # vdstx is v20: the pair's low bits differ
  if file[0] == "v":
    base = {"vdst": 20, "addr": 30, "data": 40, "data0": 40, "data1": 50, "vsrc1": 60}.get(name, 70)
    return Reg("v", base, 1, "h" if variant == 1 else "l") if count == "l" else Reg("v", base, count)
  if fmt == "SOPK" and not opc.isa.arch.startswith("gfx9") and spec[4] is not None and spec[4] >> 124 & 1:
    return Reg("s", 124)  # gfx10+: s_waitcnt_vscnt & co. want null (124; on gfx9 124 is m0 and SOPK takes plain SGPRs)
  return Reg("s", 12 if count != 1 else 13, 1 if count == "l" else count) if count not in (1, "l") else Reg("s", 13)


def _image_samples(isa: ISA, opc: Opcode) -> list[Instruction]:
  """MIMG: every dim with two dmask values, then each flag, with vdata/vaddr as wide as the opcode's tables say."""
  from hcq.asm.printer import NSA_ADDRESSES, image_address_list
  dims = [t.partition(":")[2] for t in opc.mods["dim"][5:].split("|")] if "dim" in opc.mods else [""]
  flags = [syn[5:] for syn in opc.mods.values() if syn.startswith("flag:")]
  combos = [(d, dm, "") for d in range(len(dims)) for dm in (1, 0xf)] + [(0, 1, f) for f in flags] + [(min(1, len(dims) - 1), 1, f) for f in flags]
  out = []
  for d, dmask, flag in combos:
    if "dmask" not in opc.mods: dmask = opc.fixed.get("dmask", opc.defaults.get("dmask", 0))  # image_bvh_*: fixed
    mods = {**({"dmask": dmask} if "dmask" in opc.mods else {}), **({"dim": dims[d]} if dims[d] else {}), **({flag: True} if flag else {})}
    values = {**opc.defaults, **opc.fixed, "dmask": dmask, "dim": d, flag: 1}
    args = []
    for spec in opc.operands:
      if isinstance(spec, str): args.append(spec); continue
      widths = opc.image_widths(spec[0], values) if spec[0] in ("vdata", "vaddr") else None
      if spec[0] == "vdata": args.append(Reg("v", 20, widths[0]) if widths else None)
      elif spec[0] == "vaddr" and widths and image_address_list(opc.fmt.name, widths):
        args.append([Reg("v", 40 + 4 * i, w) for i, w in zip(range(len(NSA_ADDRESSES)), widths)])
      elif spec[0] == "vaddr": args.append(Reg("v", 40, widths[0]) if widths else None)
      else: args.append(_operand_for(opc, spec, 0))
    if None in args: continue
    try: out.append(build(isa, opc, args, mods))
    except OperandError: pass
  return out


def _lane_control(isa: ISA, opc: Opcode) -> dict:
  """A DPP lane control the opcode takes where the default (quad_perm:[0,0,0,0]) is refused (gfx9's 64-bit DPP:
  row_newbcast only)."""
  kind, mask = opc.refused.get("dpp_ctrl", ("", 0))
  names = isa.names.get("dpp_ctrl", {})
  if kind != "value" or not mask & 1 or not names: return {}
  return next(({"dpp_ctrl": n} for v, n in sorted(names.items()) if not mask >> v & 1), {})


def sample_instructions(isa: ISA, opc: Opcode) -> list[Instruction]:
  """Instructions that exercise one opcode: plain registers, a constant, a literal, and its modifiers."""
  if opc.fmt.name.startswith("MIMG"): return _image_samples(isa, opc)
  out: list[Instruction] = []
  lane = _lane_control(isa, opc)
  for variant in (0, 1, 2, 3):
    try: out.append(build(isa, opc, [s if isinstance(s, str) else _operand_for(opc, s, variant) for s in opc.operands], dict(lane)))
    except OperandError: pass
  base = out[0] if out else None
  if base is not None:
    args = [s if isinstance(s, str) else _operand_for(opc, s, 0) for s in opc.operands]
    for field_name, syn in opc.mods.items():
      mods: dict = {}
      if syn.startswith("flag:"):
        if ",ret:" in syn: continue
        mods[syn[5:].split(",")[0]] = True
      elif syn == "omod": mods["omod"] = 2
      elif syn.startswith(("op_sel", "neg_lo", "neg_hi", "neg:")):
        n = int(syn.split(",")[0].split(":")[1])
        mods[syn.split(":")[0]] = [0] * (n - 1) + [1] if ",bits:" in syn and bin(int(syn.split(",bits:")[1])).count("1") != n \
          else [1] + [0] * (n - 1)
      elif "{ds16}" in syn: mods["offset"] = 0x1234
      elif syn == "named:swizzle": mods["offset"] = 'swizzle(BITMASK_PERM,"01pi0")' 
      elif syn.startswith("offset0") or syn.startswith("offset1"): mods[syn.split(":")[0]] = 7
      elif syn.startswith("offset:"): mods["offset"] = -8 if "{s" in syn else 8
      elif syn.startswith("enum:"): mods[field_name] = syn[5:].split("|")[1].partition(":")[2]
      elif syn.startswith("sel:"): mods[field_name] = syn[4:].split("|")[1].partition(":")[2]  # SDWA BYTE_1
      elif syn.startswith("acc:"):  # gfx90a+: the operands the bit covers as AGPRs
        covered = syn[4:].split("+")
        args = [Reg("a", a.value, a.count) if isinstance(a, Reg) and a.file == "v" and not isinstance(s, str) and s[0] in covered else a
                for a, s in zip(args, opc.operands)]
      elif syn.startswith("thscope:"):  # the first th name that needs no returned value
        names = isa.names[syn[8:].split(",")[0]]
        mods["th"] = next(names[k].partition(":")[2] for k in sorted(names) if names[k] and not (",ret:" in syn and k >> 2 & 1))
      else: continue
      if "offen" in mods or "idxen" in mods: args = [Reg("v", 30) if a == "off" else a for a in args]  # buffer vaddr
      if "lds" in mods and opc.fmt.name == "MUBUF":  # gfx9 buffer loads into LDS name no vdata
        args = [a for a, sp in zip(args, opc.operands) if isinstance(sp, str) or sp[0] != "vdata"]
      try: out.append(build(isa, opc, args, {**lane, **mods}))
      except OperandError: pass
      args = [s if isinstance(s, str) else _operand_for(opc, s, 0) for s in opc.operands]
  ok = []
  for i in out:
    try: str(i); ok.append(i)
    except DecodeError: pass  # a syntax we cannot print yet (swizzle, depctr): counted as missing by the caller
  return ok


def check_opcodes(arch: str, formats: set[str] | None = None) -> Report:
  """Every opcode of every format (or of `formats`): llvm-mc decodes our bytes to our text, and encodes our text
  to our bytes."""
  isa = load(arch)
  rep = Report()
  insts = []
  opcodes_checked = []
  for fmt, ops in isa.by_op.items():
    if formats is not None and fmt not in formats: continue
    for opc in ops.values():
      samples = sample_instructions(isa, opc)
      if not samples: rep.checked += 1; rep.fail(f"{opc.mnemonic}: no instruction could be built and printed")
      else: opcodes_checked.append(opc)
      insts += samples
  agreed_names, asymmetric_names = set(), set()
  texts = [str(i) for i in insts]
  datas = [i.encode() for i in insts]
  decoded = llvm.disassemble_each(datas, arch)
  encoded = llvm.assemble_each(texts, arch)
  for inst, text, data, d, e in zip(insts, texts, datas, decoded, encoded):
    rep.checked += 1
    ok = True
    if d is None or d.text != text:
      ok = False; rep.fail(f"{data.hex()}: ours {text!r}, llvm-mc {d.text if d else 'rejects it'!r}")
    if disassembler(isa).lines(data) != [text]:  # the CLI's text-from-words path
      ok = False; rep.fail(f"{data.hex()}: disassembled straight from the word as {disassembler(isa).lines(data)}, not {text!r}")
    straight = assembler(isa).encode(text)  # the text assembler's line-to-bytes path, where it answers
    if straight is not None and isinstance(e, bytes) and straight != e:
      ok = False; rep.fail(f"{text!r}: straight to bytes {straight.hex()}, llvm-mc {e.hex()}")
    # a mnemonic two encodings print alike (v_nop as VOP1 and as VOP3) assembles to the first: only decoding is checked
    shadowed = inst.opcode.name != inst.mnemonic
    if ok and isinstance(e, str):
      # llvm-mc's disassembler prints this text for our bytes but its assembler refuses it (s_barrier_signal s4):
      # nothing to compare the encoding with; reported apart, not counted against us
      rep.llvm_asymmetric.append(f"{text!r}: {e}")
      asymmetric_names.add(inst.opcode.name)
      continue
    if e != data and not shadowed:
      ok = False; rep.fail(f"{text!r}: ours {data.hex()}, llvm-mc {e.hex() if isinstance(e, bytes) else e!r}")
    rep.agreed += ok
    if ok: agreed_names.add(inst.opcode.name)
  for opc in opcodes_checked:
    if opc.name in agreed_names: continue
    # image_get_resinfo's NSA form: llvm-mc decodes it (a fallback 4-address list) but assembles no NSA text for it
    if opc.name in asymmetric_names: rep.llvm_only_asymmetric.append(opc.name)
    else: rep.fail(f"{opc.name}: no sample agrees with llvm-mc in both directions")
  return rep


@dataclass
class RandomReport:
  """Random-word agreement: decoded (llvm-mc accepts) and rejected (llvm-mc rejects) words."""
  words: int = 0
  accepted: Report = field(default_factory=Report)   # texts equal and re-encodings equal
  rejected: Report = field(default_factory=Report)   # we reject too
  unsupported: dict = field(default_factory=dict)    # first mnemonic word llvm-mc printed -> count, for words we reject
  llvm_unassemblable: int = 0                        # words whose llvm-mc text llvm-mc itself cannot assemble
  llvm_lossy: int = 0  # words whose llvm-mc text means other bytes (a gfx1201 image with all-v0 registers) and ours the word itself


def random_words(arch: str, count: int, seed: int = 0, formats: set[str] | None = None) -> RandomReport:
  """`count` random 12-byte words (8 random bytes and a random literal), optionally forced into `formats`'
  fixed bits: compare our decoder, printer and encoder with llvm-mc on each."""
  isa = load(arch)
  rng = random.Random(seed)
  fmts = [isa.formats[f] for f in sorted(formats)] if formats else None
  cases = []
  for i in range(count):
    w = rng.getrandbits(64)
    if fmts:
      f = fmts[i % len(fmts)]
      w = w & ~f.fixed_mask | f.fixed_value
    cases.append(w.to_bytes(8, "little") + rng.getrandbits(32).to_bytes(4, "little"))
  theirs = llvm.disassemble_each(cases, arch)
  rep = RandomReport(words=count)
  ours: list[Instruction | None] = []
  for c in cases:
    try: ours.append(decode(isa, c))
    except DecodeError: ours.append(None)
  to_encode: list[tuple[bytes, str, bytes]] = []  # (word, text, our encoding of the text) to compare with llvm-mc's
  differ: list[tuple] = []  # (word, ours, our text, llvm-mc's text) where the texts differ: judged below
  for c, t, o in zip(cases, theirs, ours):
    if t is not None and "/*" in t.text: t = None  # llvm-mc marks operands it finds invalid: a rejection
    if t is None:
      rep.rejected.checked += 1
      if o is None: rep.rejected.agreed += 1
      else: rep.rejected.fail(f"{c.hex()}: llvm-mc rejects, we print {str(o)!r}")
      continue
    rep.accepted.checked += 1
    if o is None:
      key = t.text.split()[0]
      rep.unsupported[key] = rep.unsupported.get(key, 0) + 1
      rep.accepted.fail(f"{c.hex()}: we reject, llvm-mc prints {t.text!r}")
      continue
    text = str(o)
    if text != t.text: differ.append((c, o, text, t.text)); continue
    if disassembler(isa).lines(c[:o.size]) != [text]:  # the CLI's text-from-words path
      rep.accepted.fail(f"{c.hex()}: disassembled straight from the word as {disassembler(isa).lines(c[:o.size])}, not {text!r}"); continue
    try: mine = parse_line(isa, text).encode()
    except (AsmError, OperandError) as e: mine = e  # fine only where llvm-mc's assembler refuses the text too (below)
    straight = assembler(isa).encode(text)  # the text assembler's line-to-bytes path, where it answers
    if straight is not None and straight != mine: rep.accepted.fail(f"{text!r}: straight to bytes {straight.hex()}, parsed {mine}"); continue
    to_encode.append((c, text, mine))
  # where the texts differ, llvm-mc's printer may have lost what the word says (it prints a gfx1201 image whose
  # registers are all v0 as 'image_load v0, v0, ...'): ours keeps the meaning when our text assembles back to the
  # word and llvm-mc's text does not
  for (c, o, text, their_text), back in zip(differ, llvm.assemble_each([d[3] for d in differ], arch)):
    try: exact = parse_line(isa, text).encode() == c[:o.size]
    except (AsmError, OperandError): exact = False
    if exact and isinstance(back, bytes) and back != c[:o.size]: rep.llvm_lossy += 1; rep.accepted.agreed += 1
    else: rep.accepted.fail(f"{c.hex()}: ours {text!r}, llvm-mc {their_text!r}")
  # llvm-mc's encoding of the text itself: its decoder's re-encoding keeps bits the text does not show
  for (c, text, mine), theirs_enc in zip(to_encode, llvm.assemble_each([t for _, t, _ in to_encode], arch)):
    if isinstance(theirs_enc, str):
      # llvm-mc's assembler refuses text its own disassembler printed (constant bus, 'src0 must be null', a FLAT
      # offset past 12 bits): no bytes to compare with, so the word counts apart, neither agreed nor failed
      rep.llvm_unassemblable += 1
      rep.accepted.checked -= 1
      continue
    if isinstance(mine, Exception): rep.accepted.fail(f"{text!r}: our assembler rejects its own text: {mine}"); continue
    if mine != theirs_enc:
      rep.accepted.fail(f"{text!r}: we encode {mine.hex()}, llvm-mc {theirs_enc.hex() if isinstance(theirs_enc, bytes) else theirs_enc}")
      continue
    rep.accepted.agreed += 1
  return rep


def main(argv: list[str] | None = None) -> int:
  """python -m hcq.asm.verify [ARCH ...]: every opcode and 20,000 random words of each arch against llvm-mc 19."""
  import argparse
  import time
  from hcq.asm.isa import ARCHS
  ap = argparse.ArgumentParser(prog="python -m hcq.asm.verify", description="Check hcq.asm's encoder, decoder and printer against "
                               f"{llvm.LLVM_MC}: every opcode, then 20,000 random instruction words, per arch.")
  ap.add_argument("arch", nargs="*", default=["gfx1100"], help=f"archs to check, of {', '.join(ARCHS)} (default gfx1100)")
  args = ap.parse_args(argv)
  unknown = [a for a in args.arch if a not in ARCHS]
  if unknown: ap.error(f"unknown arch {', '.join(map(repr, unknown))}; valid: {', '.join(ARCHS)}")
  if not llvm.available(): ap.exit(1, f"{ap.prog}: {llvm.LLVM_MC} not found: apt-get install -y llvm-19\n")
  for arch in args.arch:
    t0 = time.perf_counter()
    r = check_opcodes(arch)
    print(f"{arch}: every opcode: {r.agreed}/{r.checked} agree ({time.perf_counter() - t0:.1f}s); {len(r.llvm_asymmetric)} samples print as "
          f"text llvm-mc cannot assemble back; opcodes with no other sample: {r.llvm_only_asymmetric}")
    for p in r.problems[:20]: print("  ", p)
    t0 = time.perf_counter()
    rr = random_words(arch, 20000, seed=1)
    print(f"{arch}: random words: {rr.words}; llvm-mc accepts {rr.accepted.checked}, we agree on {rr.accepted.agreed} "
          f"({rr.accepted.rate:.1%}); llvm-mc rejects {rr.rejected.checked}, we reject {rr.rejected.agreed} ({rr.rejected.rate:.1%}) "
          f"({time.perf_counter() - t0:.1f}s); {rr.llvm_unassemblable} more print as text llvm-mc cannot assemble")
    print("   words we reject that llvm-mc decodes, by mnemonic:", dict(sorted(rr.unsupported.items(), key=lambda kv: -kv[1])[:15]))
    for p in [p for p in rr.accepted.problems if "we reject" not in p][:20]: print("  ", p)
    for p in rr.rejected.problems[:10]: print("  ", p)
  return 0


if __name__ == "__main__":
  import sys
  from hcq.asm.cli import guarded
  sys.exit(guarded("python -m hcq.asm.verify", main))
