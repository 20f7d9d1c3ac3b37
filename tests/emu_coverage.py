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

MEMORY = ("DS", "GLOBAL", "FLAT", "SCRATCH", "MUBUF", "MTBUF", "SMEM", "VGLOBAL", "VFLAT", "VSCRATCH", "VBUFFER")
# families and why they have no reference test yet; the first rule that matches names the reason
REASONS: list[tuple[str, str]] = [
  (r"^s_\w+_(saveexec|wrexec)_b64$", "64-bit EXEC op: tested on wave64 (gfx942); on wave32 the ISA does not define what it does to EXEC_HI"),
  (r"^(v_clz|v_cls|v_ffbh|v_ffbl|s_clz|s_cls|s_flbit|s_ff1|s_ff0|s_ctz)", "count-leading/trailing bits: owned by the count-leading-bits work"),
  (r"^v_(sin|cos)_", "sin/cos: range reduction is owned by the sin/cos work"),
  (r"^v_(rcp|rsq|sqrt|exp|log|s_exp|s_log|s_rcp|s_rsq|s_sqrt)", "transcendental: needs a reference with the ISA's ULP bound, not written yet"),
  (r"^(v_div_|v_trig_preop|v_frexp|v_ldexp|v_cvt_pk_|v_cvt_norm|v_cvt_.*(fp8|bf8|bf16)|v_cvt_off|v_cvt_nearest|v_cvt_rpi|v_mul_legacy|v_mul_dx9|v_fma_dx9|v_fmac_dx9|v_cube|v_mullit|v_sat_pk|v_pack_|v_cvt_pkrtz|v_mad_legacy)",
   "special float op: no reference written yet"),
  (r"^v_(readlane|readfirstlane|writelane|permlane|movrel|swaprel|swap_|mbcnt|bcnt|nop|pipeflush|mov_b16|not_b16|cndmask_b16|and_b16|or_b16|xor_b16|dot|qsad|mqsad|mad_u64|mad_i64|mad_co|fmamk|fmaak|madmk|madak|accvgpr|mov_fed|cvt_f32_bf16|prng|perm_pk|bitop3|permlane64|lshl_or|max_num_f64|min_num_f64)",
   "lane, register-index or special-form VALU op: no reference written yet"),
  (r"^s_(sendmsg|getreg|setreg|getpc|setpc|swappc|rfe|call|sleep|nop|waitcnt|barrier|endpgm|branch|cbranch|trap|icache|version|code_end|delay_alu|clause|wait|inst_prefetch|dcache|sethalt|setprio|ttrace|incperflevel|decperflevel|round_mode|denorm_mode|set_gpr_idx|setkill|movrel|movk|cmovk|mov_fed|memtime|memrealtime|get_|set_|alloc|prefetch)",
   "program flow, wait, hardware register or message: no reference test yet"),
]
FORMAT_REASONS = {
  "VOP3P": "packed math (VOP3P): no reference written yet", "VOPD": "dual issue (VOPD): no reference test yet",
  "VOP3P_MAI": "matrix (MFMA) ops: no reference written yet", "SDWA": "gfx9 SDWA selects: no reference test yet",
  "SOPP": "program flow, wait, hardware register or message: no reference test yet",
}


def reason_for(fmt: str, name: str) -> str:
  if fmt.split("_")[0] in MEMORY: return "memory access: no reference test yet (the memory family is the next step)"
  for pattern, reason in REASONS:
    if re.match(pattern, name): return reason
  for key, reason in FORMAT_REASONS.items():
    if fmt == key or fmt.startswith(key + "_") or fmt.endswith("_" + key): return reason
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
