"""The constant bus: how many scalar values (SGPRs, VCC, M0, literals) one VALU instruction may read.

The rule is llvm-mc 19's (AMDGPUAsmParser::validateConstantBusLimitations and getConstantBusLimit in
llvm/lib/Target/AMDGPU/AsmParser/AMDGPUAsmParser.cpp): gfx9 reads 1 scalar value, gfx10+ 2 (the 64-bit shifts 1).
The same SGPR (or register range) written twice counts once; a literal counts once, or twice when it feeds operands
of different sizes; inline constants and null count nothing; an implicit read of VCC or M0 counts. gfx9's
v_writelane_b32 with M0 as the lane select is not checked. tests/test_asm_constant_bus.py checks this against
llvm-mc 19 both ways."""
from __future__ import annotations
from dataclasses import dataclass

from hcq.asm.isa import ISA, Opcode
from hcq.asm.operands import LITERAL, scalar_text

VALU_FAMILIES = {"VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "VOPD"}
SOURCE_KINDS = {"src", "sdwa_src", "sdwa_vsrc1"}
SHIFTS_64 = {"v_lshlrev_b64", "v_lshrrev_b64", "v_ashrrev_i64"}  # gfx10+: one scalar value (getConstantBusLimit)
_plans: dict = {}  # id(opcode) -> BusPlan | None: opcodes live as long as their ISA


@dataclass(frozen=True)
class BusPlan:
  """What one opcode puts on the constant bus: its sources (operand index, field, register count, literal size in
  bytes), the scalar registers it reads without an operand, whether it has a mandatory literal, and its limit."""
  sources: tuple[tuple[int, str, int, int], ...]
  implicit: tuple[str, ...]
  mandatory_literal: bool
  limit: int
  writelane_m0: bool  # gfx9 v_writelane_b32: M0 as the lane select is exempt


def _mnemonic_base(opc: Opcode) -> str:
  """v_add_f32_e64_dpp -> v_add_f32."""
  m = opc.mnemonic.split("::")[0]
  for suffix in ("_dpp", "_sdwa", "_e64", "_e32"):
    if m.endswith(suffix): m = m[:-len(suffix)]
  return m


def _implicit_reads(opc: Opcode) -> tuple[str, ...]:
  """Scalar registers read without a source operand (findImplicitSGPRReadInVOP): the VCC written after the sources
  (v_cndmask_b32_e32's mask, v_add_co_ci_u32_e32's carry-in), v_div_fmas's VCC, v_movrel*'s M0."""
  specs = opc.operands
  first_source = next((i for i, s in enumerate(specs) if not isinstance(s, str) and s[0].startswith("src")), len(specs))
  reads = [s for s in specs[first_source:] if isinstance(s, str) and s in ("vcc", "vcc_lo")]
  base = _mnemonic_base(opc)
  if base.startswith("v_div_fmas_") or "v_dual_cndmask_b32" in opc.mnemonic.split("::"): reads.append("vcc")  # VOPD: VCC, not vcc_lo
  if base.startswith(("v_movrels", "v_movreld")): reads.append("m0")
  return tuple(reads[:1])  # LLVM counts the first implicit SGPR use only


def plan(isa: ISA, opc: Opcode) -> BusPlan | None:
  """The opcode's constant-bus plan (made once per opcode), or None when it reads no scalar value through the bus."""
  p = _plans.get(id(opc), False)
  if p is False: p = _plans[id(opc)] = _make_plan(isa, opc)
  return p


def _make_plan(isa: ISA, opc: Opcode) -> BusPlan | None:
  if opc.fmt.family.removesuffix("_SDWA") not in VALU_FAMILIES: return None
  fields = opc.fmt.fields
  sources = []
  for i, spec in enumerate(opc.operands):
    if isinstance(spec, str) or spec[0] not in fields or fields[spec[0]].kind not in SOURCE_KINDS: continue
    count = 1 if spec[2] == "l" else spec[2]
    sources.append((i, spec[0], count, 8 if count == 2 or spec[3] == "d" else 4))
  mandatory = any(not isinstance(s, str) and s[0] == "literal" for s in opc.operands)
  if not sources: return None
  gfx9, base = isa.arch.startswith("gfx9"), _mnemonic_base(opc)
  return BusPlan(tuple(sources), _implicit_reads(opc), mandatory, 1 if gfx9 or base in SHIFTS_64 else 2, gfx9 and base == "v_writelane_b32")


def _is_scalar(isa: ISA, value: int) -> bool:
  """A 9-bit source value that takes the bus: an SGPR or special register (not null, inline constants, VGPRs)."""
  if value >= 256 or 128 <= value <= 208 or 240 <= value <= 248: return False
  return not (value == 124 and not isa.arch.startswith("gfx9"))  # null (gfx10+) reads nothing


def fields_read(isa: ISA, opc: Opcode) -> tuple[str, ...]:
  """The fields violation() reads: the sources, SDWA's scalar flags, gfx9 v_writelane's lane select."""
  p = plan(isa, opc)
  if p is None: return ()
  return tuple(dict.fromkeys([name for _, name, _, _ in p.sources] + [f for f in ("s0", "s1", "src1") if f in opc.fmt.fields]))


def violation(isa: ISA, opc: Opcode, values: dict[str, int], literal: int | None) -> tuple[int, str] | None:
  """(operand index, message) where the instruction reads more scalar values than the constant bus carries; None
  where it fits."""
  p = plan(isa, opc)
  if p is None: return None
  m0 = 124 if isa.arch.startswith("gfx9") else 125
  if p.writelane_m0 and values.get("src1") == m0: return None
  implicit = {"vcc": (106, 2), "vcc_lo": (106, 1), "m0": (m0, 1)}
  used: list[str] = list(p.implicit)
  seen: set = {implicit[r] for r in p.implicit}
  sizes: set[int] = {4} if p.mandatory_literal else set()
  last = None
  for i, name, count, size in p.sources:
    v = values.get(name, 0)
    if opc.fmt.name.endswith("_SDWA"):  # an 8-bit field: s0/s1 say whether it is a scalar
      if not values.get("s0" if name == "src0" else "s1", 1): continue
    if v == LITERAL:
      sizes.add(size); last = i
    elif _is_scalar(isa, v):
      key = (v, count)
      if key not in seen: seen.add(key); used.append(scalar_text(isa, v, count) or f"s{v}")
      last = i
  n = len(seen) + min(len(sizes), 2)
  if n <= p.limit: return None
  what = ", ".join(used + ["a literal"] * min(len(sizes), 2))
  return (last if last is not None else 0,
          f"{opc.mnemonic} reads {n} scalar values ({what}) through the constant bus; {isa.arch} allows "
          f"{p.limit} per instruction (the same SGPR twice counts once; inline constants count nothing)")

