"""Which emulated opcodes run against the independent ISA reference, per arch and encoding format.

implemented(arch): what hcq.asm.emu.engine.coverage() says the emulator builds; reference_tested(arch): the opcodes
test_emu_reference.py runs (each case also checks the emulator really executed its opcode); EXCEPTIONS_FILE: every
implemented opcode without a reference test, one line each, `arch format opcode  reason`. test_emu_coverage.py holds
the three together so that coverage cannot drop (or grow) without the list saying so; bench/emu_coverage.py prints it.
"""
from __future__ import annotations
import functools
import re
from pathlib import Path

ARCHS = ("gfx1100", "gfx1201", "gfx942")
EXCEPTIONS_FILE = Path(__file__).with_name("emu_coverage_exceptions.txt")

# the implemented opcodes that test_emu_reference.py does not run, by family, and why; the first rule that matches names
# the reason (tests/emu_coverage_exceptions.txt holds one line per opcode)
REASONS: list[tuple[str, str]] = [
  (r"^v_mfma_", "checked against numpy matmul of clang-19's __builtin_amdgcn_mfma_* (all 20 shapes, tests/test_emu_gfx942.py::"
               "test_mfma_against_numpy) with the layout of AMD's matrix calculator; no per-element reference here"),
  (r"^v_wmma_", "f16/iu8 (tests/test_emu_corpus.py) and fp8/bf8 (tests/test_emu_gfx12.py) checked against numpy through clang-19's "
               "builtins; the bf16, 16-bit-result and iu4 forms share that layout code without an outside reference"),
  (r"^v_(dual_dot2acc|dot2|dot2c|dot2acc)_f|^v_dual_\w+__v_dual_dot2acc|^v_dot2_bf16|^v_dot4_f32_",
   "float dot product: the RDNA3 ISA pseudocode rounds in f32 after each tmp += (read literally), LLVM contracts an fma "
   "chain into it (a fused reading), no source settles which the hardware does; the f16 dots (v_dot2_f32_f16, "
   "v_dot2acc/v_dot2c_f32_f16 with DPP and VOPD, v_dot2_f16_f16) run on operands where the readings agree "
   "(emu_reference.dot2_operands); the bf16 and fp8 forms have no such operand domain yet"),
  (r"^v_div_(scale|fmas|fixup)", "division helper: the guide leaves its UNDERFLOW/OVERFLOW constants and the fmas scale "
   "undefined; LLVM's f32/f64 division sequences are checked IEEE-exact against the host (tests/test_emu_llvm.py, test_emu_corpus.py)"),
  (r"^v_cvt_pk_u8_f32", "the RDNA3 pseudocode packs 32'U(f32_to_u8(S0.f32)) & 255 into the S1[1:0] byte of S2, and the guide "
   "never defines f32_to_u8 (rounding, saturation, NaN); no other source found, so a reference would restate the emulator's choice"),
  (r"^v_trig_preop_f64", "the RDNA3 pseudocode's extraction (1201 bits of 2/pi << shift, & 2^53-1) read literally takes "
   "the table's low bits, which its scale 2^(-53-shift) contradicts; a third-party hardware capture reports a shorter "
   "table on gfx1201; no source settles the bits for large shifts, so a reference would restate the emulator's reading"),
  (r"^s_sendmsg", "a message to the SPI / host: no register or memory result in a compute wave to check (the _rtn forms "
   "return hardware state: doorbell, realtime clock)"),
  (r"^s_mem(real)?time$", "a clock: no reference value (tests/test_emu_gfx942.py checks it counts at 100 MHz)"),
  (r"^ds_(append|consume|read_addtid_b32|write_addtid_b32)$", "gfx9's M0 is both the LDS limit and this op's base; which bits "
   "form the base is not modelled from a source"),
]


def reason_for(fmt: str, name: str) -> str:
  for pattern, reason in REASONS:
    if re.match(pattern, name): return reason
  return "no reference written yet"


@functools.lru_cache(maxsize=None)
def implemented(arch: str) -> frozenset[tuple[str, str]]:
  """(format, opcode) pairs the emulator builds on `arch` (engine.coverage)."""
  from hcq.asm.emu.engine import coverage
  from hcq.asm.isa import load
  isa = load(arch)
  out = set()
  for fmt, (_, _, missing) in coverage(arch).items():
    miss = set(missing)
    out |= {(fmt, o.name) for o in isa.by_op[fmt].values() if o.name not in miss}
  return frozenset(out)


def reference_tested(arch: str) -> frozenset[tuple[str, str]]:
  """(format, opcode) pairs test_emu_reference.py runs on `arch`: its case lists, (arch, format, opcode, ...) or, where
  the format is fixed, (arch, opcode)."""
  from tests import test_emu_reference as T
  out = set()
  for cases in (T.valu_cases, T.salu_cases, T.sdwa_cases, T.vop3p_cases, T.lane_cases, T.vmem_cases, T.vmem_atomic_cases, T.buffer_cases, T.flow_cases, T.special_cases,
                T.dp_alu_cases, T.pk_f32_cases):
    out |= {(p.values[1], p.values[2]) for p in cases() if p.values[0] == arch}
  for fmt, cases in (("VOPD", T.vopd_cases), ("DS", T.ds_cases), ("SOP1", T.sop1_state_cases), ("SMEM", T.smem_cases), ("SCRATCH", T.scratch_cases), ("DS", T.ds_lane_cases)):
    out |= {(fmt, p.values[1]) for p in cases() if p.values[0] == arch}
  return frozenset(out)


def exceptions() -> dict[tuple[str, str, str], str]:
  """The committed list: (arch, format, opcode) -> reason."""
  out = {}
  for line in EXCEPTIONS_FILE.read_text().splitlines():
    if not line.strip() or line.startswith("#"): continue
    arch, fmt, name, reason = line.split(None, 3)
    out[(arch, fmt, name)] = reason
  return out


def untested(arch: str) -> set[tuple[str, str]]:
  return set(implemented(arch) - reference_tested(arch))


def write_exceptions() -> None:
  """Regenerate the exception list from today's gaps, a reason for each from the family rules above."""
  lines = ["# Implemented emulator opcodes without a test against the independent ISA reference (tests/emu_reference.py),",
           "# one per line: arch format opcode reason. Regenerate with: python bench/emu_coverage.py --write-exceptions"]
  for arch in ARCHS:
    for fmt, name in sorted(untested(arch)):
      lines.append(f"{arch} {fmt} {name} {reason_for(fmt, name)}")
  EXCEPTIONS_FILE.write_text("\n".join(lines) + "\n")
