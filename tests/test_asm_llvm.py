"""hcq.asm against llvm-mc 19: every opcode of every format, 20,000 random words, and llvm-mc's own text."""
from __future__ import annotations
import importlib
import os
import time
import types

import pytest

from hcq.asm import llvm
from hcq.asm.isa import load
from hcq.asm.verify import check_opcodes, random_words
from tests.tools import require

ARCHS = ("gfx1100", "gfx1201", "gfx942")
FORMATS = [(arch, fmt) for arch in ARCHS for fmt in sorted(load(arch).by_op)]
# syntaxes we cannot print yet: llvm-mc decodes these opcodes, we reject them (see docs/asm.md)
UNPRINTABLE: set[str] = set()


# The measured disagreements, per arch, of the seeded runs below (llvm-mc 19; docs/asm.md): the tests hold us to
# exactly these, so a new one fails. Random words: none. Words forced into our formats, each a case where llvm-mc is
# the one that is wrong: words llvm-mc decodes and we reject (gfx1100: 2 images whose vdata with tfe runs past v255,
# which llvm-mc prints as the one register v255; gfx1201: 1 VOPD pair reading src_lds_direct, which its assembler refuses
# on gfx12; gfx942: 5, MFMA and s_buffer_load_dwordx16 texts its own assembler refuses), words it rejects and we accept
# (gfx1100: 1, an image_gather4 d16 whose v[253:254] llvm-mc's assembler writes and its disassembler then rejects), and
# texts that differ (gfx1201: llvm-mc prints v_cndmask_b32_dpp's |src1| around the vcc_lo after it, twice).
FORCED_UNDECODED = {"gfx1100": 2, "gfx1201": 1, "gfx942": 5}
FORCED_OVERACCEPTED = {"gfx1100": 1, "gfx1201": 0, "gfx942": 0}
FORCED_MISMATCHES = {"gfx1100": 0, "gfx1201": 2, "gfx942": 0}


@pytest.fixture(scope="module", autouse=True)
def needs_llvm_mc():
  require(llvm.available(), "llvm-mc-19")


@pytest.mark.parametrize("arch,fmt", FORMATS, ids=[f"{a}-{f}" for a, f in FORMATS])
def test_every_opcode_matches_llvm_mc(arch: str, fmt: str):
  """Our encoding of each opcode disassembles in llvm-mc to our text, and llvm-mc encodes our text to our bytes
  (texts llvm-mc prints but will not assemble are reported apart; every opcode needs one sample agreeing both ways)."""
  rep = check_opcodes(arch, {fmt})
  problems = [p for p in rep.problems if p.split(":")[0] not in UNPRINTABLE]
  assert not problems, "\n".join(problems[:30])
  # opcodes all of whose texts llvm-mc prints but cannot assemble: only image_get_resinfo's NSA form (one address)
  assert set(rep.llvm_only_asymmetric) <= {"image_get_resinfo_nsa"}, rep.llvm_only_asymmetric


@pytest.mark.parametrize("arch", ARCHS)
def test_random_words_match_llvm_mc(arch: str, capsys):
  """20,000 seeded random words: where llvm-mc decodes, our text and re-encoding equal its own; where it rejects,
  (or crashes), we reject. Words in formats we do not cover yet are counted and reported, not hidden."""
  t0 = time.perf_counter()
  rep = random_words(arch, 20000, seed=20240)
  mismatched = [p for p in rep.accepted.problems if "we reject" not in p]
  with capsys.disabled():
    print(f"\n{arch}: {rep.words} random words in {time.perf_counter() - t0:.1f}s; llvm-mc decodes {rep.accepted.checked}, "
          f"we agree on {rep.accepted.agreed} ({rep.accepted.rate:.2%}); llvm-mc rejects {rep.rejected.checked}, "
          f"we reject {rep.rejected.agreed} ({rep.rejected.rate:.2%}); we reject {sum(rep.unsupported.values())} llvm-mc decodes; "
          f"{rep.llvm_unassemblable} print as text llvm-mc cannot assemble back; {rep.llvm_lossy} print in llvm-mc as text that means other bytes, "
          f"ours the word itself")
  assert rep.accepted.agreed == rep.accepted.checked and not mismatched, "\n".join(rep.accepted.problems[:30])
  assert rep.rejected.agreed == rep.rejected.checked, "\n".join(rep.rejected.problems[:30])


@pytest.mark.parametrize("arch", ARCHS)
def test_random_words_in_covered_formats(arch: str, capsys):
  """Random words forced into each covered format's fixed bits: every word llvm-mc decodes, we decode the same."""
  # VOP3SD (and its DPP forms) and gfx942's MFMA share VOP3's and VOP3P's fixed bits
  fmts = {f for f in load(arch).by_op if not f.startswith("VOP3SD") and f != "VOP3P_MAI"}
  rep = random_words(arch, 20000, seed=7, formats=fmts)
  with capsys.disabled():
    print(f"\n{arch} covered formats: llvm-mc decodes {rep.accepted.checked}, we agree on {rep.accepted.agreed} "
          f"({rep.accepted.rate:.2%}); rejects {rep.rejected.checked}, we reject {rep.rejected.agreed} ({rep.rejected.rate:.2%})")
  missing = {m: n for m, n in rep.unsupported.items() if m not in UNPRINTABLE}
  mismatched = [p for p in rep.accepted.problems if "we reject" not in p]
  assert len(mismatched) == FORCED_MISMATCHES[arch], "\n".join(mismatched[:30])
  assert rep.rejected.checked - rep.rejected.agreed == FORCED_OVERACCEPTED[arch], "\n".join(rep.rejected.problems[:30])
  assert rep.accepted.checked - rep.accepted.agreed - len(mismatched) == FORCED_UNDECODED[arch], (missing, rep.accepted.problems[:30])


MEMORY_LINES = {  # a memory instruction per offset syntax, {} the offset (buffer offsets are left out: llvm-mc 19
  # drops a MUBUF offset past 12 bits without a word, where we refuse it)
  "gfx1100": ["global_load_b32 v1, v[2:3], off offset:{}", "flat_load_b32 v1, v[2:3] offset:{}", "scratch_load_b32 v1, off, off offset:{}",
              "ds_load_b32 v1, v2 offset:{}", "ds_load_2addr_b32 v[1:2], v2 offset0:{} offset1:1", "s_load_b32 s0, s[0:1], {}",
              "s_load_b32 s0, s[0:1], s2 offset:{}"],
  "gfx1201": ["global_load_b32 v1, v[2:3], off offset:{}", "flat_load_b32 v1, v[2:3] offset:{}", "scratch_load_b32 v1, off, off offset:{}",
              "ds_load_b32 v1, v2 offset:{}", "ds_load_2addr_b32 v[1:2], v2 offset0:{} offset1:1", "s_load_b32 s0, s[0:1], {}",
              "s_load_b32 s0, s[0:1], s2 offset:{}"],
  "gfx942": ["global_load_dword v1, v[2:3], off offset:{}", "flat_load_dword v1, v[2:3] offset:{}", "scratch_load_dword v1, off, off offset:{}",
             "ds_read_b32 v1, v2 offset:{}", "ds_read2_b32 v[2:3], v2 offset0:{} offset1:1", "s_load_dword s0, s[0:1], {}"],
}
OFFSETS = [-(1 << 23) - 1, -(1 << 23), -(1 << 20) - 1, -(1 << 20), -4097, -4096, -2048, -1, 0, 255, 256, 2047, 2048, 4095, 4096, 8191, 8192,
           65535, 65536, (1 << 20) - 1, 1 << 20, (1 << 21) - 1, 1 << 21, (1 << 23) - 1, 1 << 23, (1 << 24) - 1]


@pytest.mark.parametrize("arch", ARCHS)
def test_memory_offset_ranges_match_llvm_mc(arch: str):
  """Every memory offset syntax at the edges of its range (signed and unsigned, each field width): we take what
  llvm-mc takes, with its bytes, and refuse what it refuses (no offset wraps into its field)."""
  from hcq.asm import AsmError, assemble
  lines = [t.format(o) for t in MEMORY_LINES[arch] for o in OFFSETS]
  lines += [t.format(hex(o)) for t in MEMORY_LINES[arch] if t.startswith("s_load") for o in OFFSETS]  # SMEM prints hex
  bad, llvm_mc = [], llvm.assemble_each(lines, arch)
  for line, theirs in zip(lines, llvm_mc):
    try: ours = assemble(line, arch)
    except AsmError as e: ours = e
    if isinstance(theirs, bytes) != isinstance(ours, bytes) or isinstance(ours, bytes) and ours != theirs:
      bad.append(f"{line!r}: ours {ours.hex() if isinstance(ours, bytes) else ours}, llvm-mc {theirs.hex() if isinstance(theirs, bytes) else theirs}")
  assert not bad, "\n".join(bad[:30])
  assert len(lines) // 4 < sum(isinstance(t, bytes) for t in llvm_mc) < len(lines) * 3 // 4  # both kinds are covered


@pytest.mark.parametrize("arch", ARCHS)
def test_tables_record_todays_generator(arch: str):
  """Each committed table records the fingerprint of the generator that wrote it (its sources, llvm-mc's version):
  a generator change without a regeneration fails here at once."""
  from hcq.asm.generator.freshness import fingerprint_difference
  assert fingerprint_difference(importlib.import_module(f"hcq.asm.tables.{arch}")) is None


@pytest.mark.parametrize("arch", ARCHS)
def test_tables_sample_is_fresh(arch: str):
  """A seeded sample of each table (2 opcodes in each of 8 formats, NAMES, SCALARS) probed again equals the committed
  entries; the whole table regenerated is the HCQ_ASM_FULL_FRESHNESS=1 test below."""
  from hcq.asm.generator.freshness import sample_differences
  diffs = sample_differences(arch, importlib.import_module(f"hcq.asm.tables.{arch}"))
  assert not diffs, "\n".join(diffs[:10])


def test_sampled_freshness_catches_a_hand_edit():
  """The sampled check fails on an entry edited by hand (v_mov_b32_dpp's row_mask default set to 0, the issue's
  silent all-lanes-off case), and on a table whose fingerprint is not today's."""
  from hcq.asm.generator.freshness import fingerprint_difference, sample_differences
  table = importlib.import_module("hcq.asm.tables.gfx1100")
  rec = next(r for r in table.OPCODES["VOP1_DPP16"] if dict(r[5]).get("row_mask") == 0xf)  # v_mov_b32_dpp's row_mask:0xf default
  edited = (rec[:5] + (tuple((f, 0) if f == "row_mask" else (f, v) for f, v in rec[5]),) + rec[6:],)
  fake = types.SimpleNamespace(**{**vars(table), "OPCODES": {**table.OPCODES, "VOP1_DPP16": edited}, "GENERATOR": "0" * 16})
  diffs = sample_differences("gfx1100", fake, formats={"VOP1_DPP16"}, per_format=1)
  assert len(diffs) == 1 and "op" in diffs[0] and "('row_mask', 0)" in diffs[0], diffs
  assert "run python -m hcq.asm.generator gfx1100" in fingerprint_difference(fake)


@pytest.mark.skipif(os.environ.get("HCQ_ASM_FULL_FRESHNESS") != "1", reason="the full regeneration (minutes per arch): HCQ_ASM_FULL_FRESHNESS=1")
@pytest.mark.parametrize("arch", ARCHS)
def test_tables_are_fresh(arch: str):
  """The committed table is what `python -m hcq.asm.generator ARCH` writes today (10-40 minutes per arch)."""
  from hcq.asm.generator.__main__ import TABLES, generate
  assert generate(arch) == (TABLES / f"{arch}.py").read_text(), f"asm/tables/{arch}.py is stale: run python -m hcq.asm.generator {arch}"
