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
  (r"^v_\w+_(f64|b64|fp8|bf8)_dpp$|^v_cvt_(f64|i32|u32|f32)_(f64|i32|u32|f32)_dpp$",
   "gfx942 DP-ALU DPP: llvm-mc takes only row_newbcast on these 64-bit ops, and the emulator does not run row_newbcast "
   "yet (dpp_ctrl 0x150-0x15f is reserved in its gfx9 DPP table)"),
  (r"^v_mfma_", "checked against numpy matmul of clang-19's __builtin_amdgcn_mfma_* (all 20 shapes, tests/test_emu_gfx942.py::"
               "test_mfma_against_numpy) with the layout of AMD's matrix calculator; no per-element reference here"),
  (r"^v_wmma_", "f16/iu8 (tests/test_emu_corpus.py) and fp8/bf8 (tests/test_emu_gfx12.py) checked against numpy through clang-19's "
               "builtins; the bf16, 16-bit-result and iu4 forms share that layout code without an outside reference"),
  (r"^v_(dual_dot2acc|dot2|dot2c|dot2acc)_f|^v_dual_\w+__v_dual_dot2acc|^v_dot2_bf16|^v_dot4_f32_",
   "float dot product: no source at hand states the hardware's intermediate rounding (the emulator rounds once), so a "
   "reference would restate the emulator's choice"),
  (r"^v_div_(scale|fmas|fixup)", "division helper: the guide leaves its UNDERFLOW/OVERFLOW constants and the fmas scale "
   "undefined; LLVM's f32/f64 division sequences are checked IEEE-exact against the host (tests/test_emu_llvm.py, test_emu_corpus.py)"),
  (r"^v_cvt_pk_u8_f32", "the ISA's f32_to_u8 does not state its rounding or saturation; no source to test the emulator's choice against"),
  (r"^v_trig_preop_f64", "needs the ISA's 1201-bit table of 2/pi; not written yet"),
  (r"^v_mqsad_u32_u8", "128-bit source and result: the reference harness holds operands of at most 64 bits"),
  (r"^s_sendmsg", "a message to the SPI / host: no register or memory result in a compute wave to check (the _rtn forms "
   "return hardware state: doorbell, realtime clock)"),
  (r"^s_mem(real)?time$", "a clock: no reference value (tests/test_emu_gfx942.py checks it counts at 100 MHz)"),
  (r"^ds_(append|consume|read_addtid_b32|write_addtid_b32)$", "gfx9's M0 is both the LDS limit and this op's base; which bits "
   "form the base is not modelled from a source"),
  (r"^v_(add|sub|subrev|addc|subb|subbrev)_co_u32_sdwa$|^v_cndmask_b32_sdwa$", "SDWA form of a carry op: the SDWA reference "
   "test covers ops with one result, not the carry through VCC"),
  (r"^v_cvt_pk_f32_(fp8|bf8)_sdwa$|^v_nop_sdwa$", "SDWA form with a VGPR-pair or no result: outside the SDWA reference test"),
  (r"^v_pk_(add|mul|fma|mov)_(f32|b32)$", "gfx9 packed f32 on register pairs: not written yet (tests/test_emu_gfx942.py checks "
   "v_pk_mov_b32's selects)"),
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
  for cases in (T.valu_cases, T.salu_cases, T.sdwa_cases, T.vop3p_cases, T.lane_cases, T.vmem_cases, T.vmem_atomic_cases, T.buffer_cases, T.flow_cases, T.special_cases):
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
