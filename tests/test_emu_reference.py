"""Every VALU/SALU opcode the reference knows, in every encoding the arch has (e32, e64, DPP16, DPP8 with and without
fetch-inactive, VOPC/VOP3 compares and v_cmpx), run in the emulator on edge values across lanes and compared bit for bit
with tests/emu_reference.py, which is written from the ISA definitions and shares no code with the emulator.

Beyond the VALU/SALU tables: memory (DS, GLOBAL/FLAT, SCRATCH, MUBUF/MTBUF) against byte models of the address
computation, program flow and waits, M0-indexed moves, lane permutes and the other special forms, each against the ISA's
definition. Cases are generated from the arch's opcode tables: an opcode the reference knows is tested in each format
it appears in; tests/emu_coverage_exceptions.txt lists what is not, with the reason.
Odd chunks of the VOP3 forms carry neg/abs on the sources and clamp and an output modifier (mul:2 / div:2) on float
results; every fourth chunk of a gfx11/12 VOP3 16-bit op reads its sources from the high halves (op_sel). The
normal run samples 128 operand tuples per opcode (one wave's worth for the DPP forms); HCQ_EMU_REF_FULL=1 runs 1024.
"""
from __future__ import annotations
import os
import re

import numpy as np
import pytest

from tests import emu_reference as R
from tests.emu_coverage import implemented

np.seterr(all="ignore")   # the reference computes with infinities and NaNs on purpose

ARCHS = {"gfx1100": 32, "gfx1201": 32, "gfx942": 64}
FULL = bool(os.environ.get("HCQ_EMU_REF_FULL"))   # the full sweep: 1024 operand tuples per opcode and form
TUPLES = 1024 if FULL else 128
CARRY_IN = 0x3c5a96f0c3a5690f   # the lane mask carry-in / v_cndmask read, mixed across lanes
DPP8_SEL = [7, 0, 3, 3, 5, 1, 6, 2]   # lane i of each group of 8 reads lane DPP8_SEL[i]
PARTIAL_EXEC = 0x6db6db6d6db6db6d   # for DPP: some source lanes inactive
FILL = 0xcdcdcdcdcdcdcdcd   # a destination's value before the instruction


def run_checked(arch: str, fmt: str, name: str, code: str, **kw):
  """run_snippet, and check that the emulator executed opcode `name` in format `fmt` (the assembler chose that encoding)."""
  from hcq.asm.emu import engine
  from hcq.asm.emu.snippet import run_snippet
  saved = engine.EXECUTED
  engine.EXECUTED = set()
  try:
    st = run_snippet(code, arch=arch, **kw)
  finally:
    ran = engine.EXECUTED
    engine.EXECUTED = saved if saved is None else saved | ran
  assert (arch, fmt, name) in ran, f"{code!r} did not run {fmt} {name} on {arch}; it ran {sorted(ran)}"
  return st


def _isa(arch):
  from hcq.asm.isa import load
  return load(arch)


def _base(name: str) -> str:
  for suf in ("_e32", "_e64", "_dpp8_fi", "_dpp8", "_dpp16", "_dpp", "_e64_dpp", "_sdwa"):
    if name.endswith(suf): name = name[: -len(suf)]
  return name.removesuffix("_e64").removesuffix("_e32")


VALU_FORMATS = ("VOP1", "VOP2", "VOP3", "VOP3SD", "VOPC")
DPP_KINDS = {"DPP16": "dpp16", "DPP8": "dpp8", "DPP8FI": "dpp8fi"}


def _kind(base: str):
  if base in R.VALU_OPS: return "valu"
  if base in R.CARRY_OPS: return "carry"
  if R.compare(base): return "cmp"
  return None


def valu_cases():
  out = []
  for arch in ARCHS:
    for fmt, ops in _isa(arch).by_op.items():
      root, _, dpp = fmt.partition("_")
      if root not in VALU_FORMATS or (dpp and dpp not in DPP_KINDS): continue
      for opc in ops.values():
        kind = _kind(_base(opc.name))
        vop1_shape = root != "VOP1" or (kind == "valu" and len(R.VALU_OPS[_base(opc.name)][1]) == 1)
        if dp_alu_dpp(arch, fmt, opc): continue
        if kind and vop1_shape and (fmt, opc.name) in implemented(arch): out.append(pytest.param(arch, fmt, opc.name, kind, id=f"{arch}-{fmt}-{opc.name}"))
  return out


def dp_alu_dpp(arch: str, fmt: str, opc) -> bool:
  """A gfx942 DPP16 form of a 64-bit "DP ALU" op: llvm-mc 19 takes only row_newbcast there ("DP ALU dpp only supports
  row_newbcast"; the table records the refused controls), so test_dp_alu_dpp_opcode runs it, not quad_perm."""
  return arch == "gfx942" and fmt.endswith("DPP16") and "dpp_ctrl" in opc.refused


def _takes(arch: str, fmt: str, name: str, modifier: str) -> bool:
  """Whether the assembler's table gives this opcode the modifier (the e64 forms of VOP1/VOP2 16-bit ops spell their
  halves as v0.h instead of op_sel)."""
  return any(o.name == name and modifier in o.mods for o in _isa(arch).by_op[fmt].values())


def _regs(first: int, t: str) -> str:
  return f"v[{first}:{first + 1}]" if R.WIDTH[t] == 64 else f"v{first}"


def _mnemonic(fmt: str, name: str) -> str:
  """The spelling the assembler takes: the table's name, with DPP forms as `_dpp` plus their control operands."""
  if fmt.startswith("VOPC_"): return _base(name)   # VOPC with DPP: the plain mnemonic and the DPP operands, as llvm-mc prints it
  for suf in ("_dpp8_fi", "_dpp8", "_dpp16"):
    if name.endswith(suf): return name[: -len(suf)] + "_dpp"
  return name


def _dpp_controls(fmt: str) -> str:
  if fmt.endswith("DPP16"): return " quad_perm:[3,0,1,1] row_mask:0xf bank_mask:0xf"
  if fmt.endswith("DPP8FI"): return f" dpp8:[{','.join(map(str, DPP8_SEL))}] fi:1"
  if fmt.endswith("DPP8"): return f" dpp8:[{','.join(map(str, DPP8_SEL))}]"
  return ""


def _source_lane(fmt: str, lane: int) -> int:
  if fmt.endswith("DPP16"): return (lane & ~3) | [3, 0, 1, 1][lane & 3]
  if "DPP8" in fmt: return (lane & ~7) | DPP8_SEL[lane & 7]
  return lane


def _lanes_in(arr_by_lane, fmt, exec_mask, lanes, fi):
  """src0 as a DPP lane reads it: lane i takes its source lane's value; an inactive source lane reads 0 for DPP8
  without FI (RDNA3 ISA, DPP8: 'FI=0: inactive lanes return 0'), its own value with FI."""
  out = []
  for i in range(lanes):
    j = _source_lane(fmt, i)
    active = (exec_mask >> j) & 1
    out.append(arr_by_lane[j] if active or fi or fmt.endswith("DPP16") else 0)
  return out


def _put(v: dict, reg: int, t: str, values: list[int], lanes: int, fill_hi: bool = True):
  """Lane values of type t into v[reg] (and v[reg+1] for 64-bit); 16-bit values get a stray high half the op must ignore."""
  vals = np.array(values, dtype=object)
  if R.WIDTH[t] == 64:
    v[reg] = np.array([x & R.M32 for x in vals], np.uint64).astype(np.uint32)
    v[reg + 1] = np.array([x >> 32 for x in vals], np.uint64).astype(np.uint32)
  elif R.WIDTH[t] == 16:
    v[reg] = np.array([(x & R.M16) | (0x5a5a0000 if fill_hi else 0) for x in vals], np.uint64).astype(np.uint32)
  else:
    v[reg] = np.array(list(vals), np.uint64).astype(np.uint32)


def _get(st, reg: int, t: str, lanes: int) -> list[int]:
  lo = [int(x) for x in st.v[reg, 0, :lanes]]
  if R.WIDTH[t] == 64: return [l | (int(h) << 32) for l, h in zip(lo, st.v[reg + 1, 0, :lanes])]
  return [x & ((1 << R.WIDTH[t]) - 1) for x in lo]


def _mask(st, sreg: int, wave64: bool) -> int:
  return int(st.s[sreg, 0]) | ((int(st.s[sreg + 1, 0]) << 32) if wave64 else 0)


def _same_bits(got: int, want: int, t: str) -> bool:
  """Equal bits, or (a float type) NaN in both, field by field: a 32-bit word holding f16 results is two fields."""
  if got == want: return True
  if t == "f32x2": return all(_same_bits((got >> k) & R.M32, (want >> k) & R.M32, "f32") for k in (0, 32))
  if t not in R.FLOAT: return False
  if R.WIDTH[t] == 16: return all(_same_bits((got >> k) & R.M16, (want >> k) & R.M16, "b16") or
                                  (R.is_nan_bits((got >> k) & R.M16, t) and R.is_nan_bits((want >> k) & R.M16, t)) for k in (0, 16))
  return R.is_nan_bits(got, t) and R.is_nan_bits(want, t)


def _check_value(got: int, want: int, t: str, what: str, ulps: int = 0, signed_zero: bool = True):
  """Equal bits (NaN matches NaN); with `ulps`, a finite nonzero reference may be that many values away; without
  `signed_zero`, a zero reference matches a zero of either sign."""
  if _same_bits(got, want, t): return None
  if t in R.FLOAT and ulps:
    w = R.to_value(want, t)
    if not signed_zero and w == 0 and R.to_value(got, t) == 0: return None
    if np.isfinite(w) and w != 0 and not R.is_nan_bits(got, t) and R.ulp_distance(got, want, t) <= ulps: return None
  return f"{what}: got {got:#x}, reference {want:#x}" + (f" (beyond {ulps} ulp)" if ulps else "")


def _apply_src_mods(x, t, neg, ab):
  if t not in R.FLOAT: return x
  if ab: x = abs(x)
  return -x if neg else x


def _clamp(x, t, dx10: bool = False):
  """The clamp modifier: a float result limited to [0, 1]; a NaN passes, or becomes 0 under MODE.DX10_CLAMP."""
  if t in R.FLOAT:
    f = R.FLOAT[t][0]
    return (f(0) if dx10 else x) if np.isnan(x) else min(max(x, f(0)), f(1))
  return x


@pytest.mark.parametrize("arch,fmt,name,kind", valu_cases())
def test_valu_opcode(arch, fmt, name, kind):
  """One VALU opcode in one encoding on TUPLES operand tuples, as 32-lane (or 64-lane) chunks in one snippet."""
  lanes = ARCHS[arch]
  base = _base(name)
  mnem = _mnemonic(fmt, name)
  exec_mask = (PARTIAL_EXEC & ((1 << lanes) - 1)) if "DPP8" in fmt else (1 << lanes) - 1
  if kind == "valu": dt, types, fn = R.valu_op(arch, base)
  elif kind == "cmp": types, fn = R.compare(base); dt = "u32"
  else: (_, fn), types, dt = R.CARRY_OPS[base], ("u32", "u32"), "u32"
  tuples = R.operands_for(base, tuple(types), TUPLES if FULL or "DPP" not in fmt else lanes)   # DPP forms: one wave's worth
  if base in R.DOMAIN: tuples = tuple(tuple(_fold(x, t, R.DOMAIN[base]) for x, t in zip(tp, types)) for tp in tuples)
  chunks = [tuples[i:i + lanes] for i in range(0, len(tuples), lanes)]
  fmac = base.startswith(("v_fmac_", "v_mac_")) or base in ACCUMULATING
  errors = []
  for g in range(0, len(chunks), GROUP):
    errors += _run_group(arch, fmt, name, kind, chunks[g:g + GROUP], base, mnem, types, dt, fn, fmac, exec_mask)
  assert not errors, "\n".join(errors[:14])


def _fold(bits: int, t: str, limit: float) -> int:
  """A finite operand beyond ±limit brought inside it (fmod is exact), so that it is in the op's input domain."""
  x = R.to_value(bits, t)
  return R.to_bits(np.fmod(x, R.FLOAT[t][0](limit)), t) if np.isfinite(x) and abs(x) > limit else bits


# like v_fmac: the last source is the destination
ACCUMULATING = ("v_dot2c_i32_i16", "v_dot4c_i32_i8", "v_dot8c_i32_i4", "v_dot2acc_f32_f16", "v_dot2c_f32_f16")
GROUP = 4   # chunks per snippet: sources in v0-v31, results in v64-v71 (true16 encodings reach v127), masks in s40-s67


def _run_group(arch, fmt, name, kind, chunks, base, mnem, types, dt, fn, fmac, exec_mask):
  lanes = ARCHS[arch]
  wave64 = lanes == 64
  dpp = "DPP" in fmt
  fi = fmt.endswith("DPP8FI")
  vcc = "vcc" if wave64 else "vcc_lo"
  exec_name = "exec" if wave64 else "exec_lo"
  smov = "s_mov_b64" if wave64 else "s_mov_b32"
  sreg = lambda r: f"s[{r}:{r + 1}]" if wave64 else f"s{r}"
  mods = fmt.startswith("VOP3") and kind in ("valu", "cmp") and not dpp
  float_types = any(t in R.FLOAT for t in types)
  cin = kind == "carry" and R.CARRY_OPS[base][0]
  code, v, expect = [], {}, []
  for j, chunk in enumerate(chunks):
    src_base, dst = 8 * j, 64 + 2 * j
    variant = j % 2 == 1 and mods and float_types   # odd chunks: neg/abs on the sources, clamp on the result
    negs = [variant and i != 1 and not (fmac and i == 2) for i in range(3)]   # fmac's addend is vdst: no modifier
    abss = [variant and i != 0 and not (fmac and i == 2) for i in range(3)]
    clamp = variant and kind == "valu"
    # the output modifier (VOP3 OMOD: the result times 2, 4 or 0.5, before clamp) on float results of odd chunks
    omod = {1: ("mul:2", 2.0), 3: ("div:2", 0.5)}.get(j % 4) if variant and kind == "valu" and dt in R.FLOAT else None
    # gfx11/12 VOP3 16-bit ops, every fourth chunk: op_sel reads each source from its register's high half
    opsel = mods and kind == "valu" and arch != "gfx942" and j % 4 == 2 and not fmac and R.WIDTH[dt] == 16 \
      and all(R.WIDTH[t] == 16 for t in types) and _takes(arch, fmt, name, "opsel")
    srcs = []
    for i, t in enumerate(types):
      if fmac and i == 2:
        _put(v, dst, t, [tp[i] for tp in chunk], lanes); continue
      _put(v, src_base + 2 * i, t, [tp[i] for tp in chunk], lanes)
      if opsel: v[src_base + 2 * i] = ((v[src_base + 2 * i].astype(np.uint64) << np.uint64(16)) | np.uint64(0xa5a5)).astype(np.uint32)
      r = _regs(src_base + 2 * i, t)
      if variant and t in R.FLOAT: r = ("-" if negs[i] else "") + (f"|{r}|" if abss[i] else r)
      srcs.append(r)
    # the reference: sources as lanes (src0 through DPP), modifiers, the op
    cols = [[tp[i] for tp in chunk] for i in range(len(types))]
    if dpp: cols[0] = _lanes_in(cols[0], fmt, exec_mask, lanes, fi)
    chunk = list(zip(*cols))   # the sources each lane computes with (DPP's src0 from its source lane), for messages
    vals = [[_apply_src_mods(R.to_value(x, t), t, negs[i], abss[i]) if variant else R.to_value(x, t) for x in col]
            for i, (t, col) in enumerate(zip(types, cols))]
    active = [(exec_mask >> l) & 1 for l in range(lanes)]
    if kind == "valu":
      if not fmac: _put(v, dst, dt, [FILL & ((1 << R.WIDTH[dt]) - 1)] * lanes, lanes, False)   # what unwritten lanes keep
      want = []
      for l in range(lanes):
        r = fn(*[col[l] for col in vals])
        if omod: r = R.FLOAT[dt][0](r * R.FLOAT[dt][0](omod[1]))
        if clamp: r = _clamp(r, dt)
        want.append(R.to_bits(r, dt) if active[l] else (cols[2][l] if fmac else FILL) & ((1 << R.WIDTH[dt]) - 1))
      text = f"{_regs(dst, dt)}, {', '.join(srcs)}"
      if base == "v_mov_b16": text = re.sub(r"(v\d+)", r"\1.l", text)   # its only spelling names the 16-bit halves
      sel = f" op_sel:[{'1,' * len(types)}0]" if opsel else ""
      code.append(f"{mnem} {text}{sel}{' clamp' if clamp else ''}{' ' + omod[0] if omod else ''}{_dpp_controls(fmt)}")
      expect.append(("v", dst, dt, want, chunk))
    elif kind == "cmp":
      want = sum(int(bool(fn(*[col[l] for col in vals]))) << l for l in range(lanes) if active[l])
      out = 40 + 2 * j
      cmpx = base.startswith("v_cmpx")
      if fmt.startswith("VOPC") and not cmpx:
        code += [f"{mnem} {', '.join(srcs)}{_dpp_controls(fmt)}",
                 f"{smov} {sreg(out)}, {vcc}"]
      elif cmpx and arch != "gfx942":
        code += [f"{mnem} {', '.join(srcs)}{_dpp_controls(fmt)}", f"{smov} {sreg(out)}, {exec_name}", f"{smov} {exec_name}, {sreg(14)}"]
      elif cmpx:   # gfx9's v_cmpx also writes VCC (e32) or its sdst (e64)
        sd = vcc if fmt.startswith("VOPC") else sreg(70)
        code += [f"{mnem} {sd + ', ' if fmt.startswith('VOP3') else ''}{', '.join(srcs)}{_dpp_controls(fmt)}",
                 f"{smov} {sreg(out)}, {exec_name}", f"{smov} {exec_name}, {sreg(14)}"]
        if fmt.startswith("VOPC"): code.append(f"{smov} {sreg(out + 20)}, {vcc}")
        else: code.append(f"{smov} {sreg(out + 20)}, {sreg(70)}")
        expect.append(("s", out + 20, None, want, chunk))
      else:
        code.append(f"{mnem} {sreg(out)}, {', '.join(srcs)}{_dpp_controls(fmt)}")
      expect.append(("s", out, None, want, chunk))
    else:   # carry in/out
      out = 40 + 2 * j
      cins = [(CARRY_IN >> l) & 1 for l in range(lanes)]
      res = [fn(vals[0][l], vals[1][l], cins[l]) for l in range(lanes)]
      _put(v, dst, "u32", [0xcdcdcdcd] * lanes, lanes)
      want = [r[0] & R.M32 if active[l] else 0xcdcdcdcd for l, r in enumerate(res)]
      carry = sum((r[1] or 0) << l for l, r in enumerate(res) if active[l])
      e32 = not fmt.startswith("VOP3")
      if base == "v_cndmask_b32":
        code += [f"{smov} {vcc}, {sreg(12)}"] if e32 else []
        code.append(f"{mnem} v{dst}, {srcs[0]}, {srcs[1]}, {vcc if e32 else sreg(12)}{_dpp_controls(fmt)}")
      elif e32:
        code += [f"{smov} {vcc}, {sreg(12)}", f"{mnem} v{dst}, {vcc}, {srcs[0]}, {srcs[1]}{', ' + vcc if cin else ''}{_dpp_controls(fmt)}",
                 f"{smov} {sreg(out)}, {vcc}"]
      else:
        code.append(f"{mnem} v{dst}, {sreg(out)}, {srcs[0]}, {srcs[1]}{', ' + sreg(12) if cin else ''}{_dpp_controls(fmt)}")
      expect.append(("v", dst, "u32", want, chunk))
      if base != "v_cndmask_b32": expect.append(("s", out, None, carry, chunk))
  s = {12: CARRY_IN & R.M32, 13: CARRY_IN >> 32, 14: exec_mask & R.M32, 15: exec_mask >> 32}   # s[14:15]: EXEC to restore after v_cmpx
  st = run_checked(arch, fmt, name, "\n".join(code), s=s, v=v, lanes=lanes, exec_mask=exec_mask, vgprs=80)
  errors = []
  ulps, signed_zero = R.ULP_BOUND.get(base, 0), base not in R.DOMAIN   # sin/cos: an exact zero result at k/2 revolutions may be -0
  for where, reg, t, want, chunk in expect:
    if where == "v":
      got = _get(st, reg, t, lanes)
      for l in range(lanes):
        e = _check_value(got[l], want[l], t, f"v{reg} lane {l} sources {[hex(x) for x in chunk[l]]}", ulps, signed_zero)
        if e: errors.append(e)
    else:
      got = _mask(st, reg, wave64)
      if got != want:
        bad = [l for l in range(lanes) if ((got ^ want) >> l) & 1]
        errors.append(f"s{reg} mask {got:#x}, reference {want:#x}: lanes {bad[:6]} sources {[[hex(x) for x in chunk[l]] for l in bad[:6]]}")
  return [f"{code[0]}: {e}" for e in errors]


# ---- gfx942 DP-ALU DPP: row_newbcast:k for every k, under a partial EXEC, row/bank masks and bound_ctrl --------------
# chunk k's (row_mask, bank_mask, bound_ctrl); the odd chunks (no bound_ctrl: a zero's sign after neg is not sourced)
# carry neg/abs on the float sources
DP_ALU_MASKS = ((0xf, 0xf, True), (0xf, 0xf, False), (0xd, 0xf, True), (0xf, 0xb, False))


def dp_alu_cases():
  out = []
  for fmt in ("VOP1_DPP16", "VOP2_DPP16"):
    for opc in _isa("gfx942").by_op.get(fmt, {}).values():
      if dp_alu_dpp("gfx942", fmt, opc) and _kind(_base(opc.name)) == "valu" and (fmt, opc.name) in implemented("gfx942"):
        out.append(pytest.param("gfx942", fmt, opc.name, id=f"gfx942-{fmt}-{opc.name}"))
  return out


@pytest.mark.parametrize("arch,fmt,name", dp_alu_cases())
def test_dp_alu_dpp_opcode(arch, fmt, name):
  """gfx942's DPP16 form of a 64-bit ("DP ALU") op, once per row_newbcast:k (k = 0..15): every lane's src0 (both
  dwords of a 64-bit one) is lane k of its row (LLVM AMDGPUModifierSyntax.rst, dpp64_ctrl: "broadcast a thread within
  a row to the whole row"). A lane whose EXEC, row_mask or bank_mask bit is clear keeps its value; a source lane whose
  EXEC bit is clear is an invalid lane: it reads 0 under bound_ctrl:1 and leaves the lane unwritten without it
  (bound_ctrl and fi in the same document). Over the 16 chunks every lane's src0 tuple is read by its whole row."""
  lanes = ARCHS[arch]
  base = _base(name)
  dt, types, fn = R.valu_op(arch, base)
  fmac = base.startswith("v_fmac_")
  tuples = R.operand_tuples(tuple(types), lanes)
  if base in R.DOMAIN: tuples = tuple(tuple(_fold(x, t, R.DOMAIN[base]) for x, t in zip(tp, types)) for tp in tuples)
  cols = [[tp[i] for tp in tuples] for i in range(len(types))]
  ex = PARTIAL_EXEC
  v, code, expect = {}, [], []
  for i, t in enumerate(types[:2 if fmac else len(types)]): _put(v, 2 * i, t, cols[i], lanes)
  fill = FILL & ((1 << R.WIDTH[dt]) - 1)
  for k in range(16):
    dst = 8 + 2 * k
    rm, bm, bound = DP_ALU_MASKS[k % 4]
    mods = k % 2 == 1
    negs = [mods and _takes(arch, fmt, name, f"neg{i}") and t in R.FLOAT for i, t in enumerate(types[:2])]
    abss = [mods and k % 4 == 1 and _takes(arch, fmt, name, f"abs{i}") and t in R.FLOAT for i, t in enumerate(types[:2])]
    _put(v, dst, dt, cols[2] if fmac else [fill] * lanes, lanes)
    srcs = [("-" if negs[i] else "") + (f"|{_regs(2 * i, t)}|" if abss[i] else _regs(2 * i, t)) for i, t in enumerate(types[:2 if fmac else len(types)])]
    code.append(f"{_mnemonic(fmt, name)} {_regs(dst, dt)}, {', '.join(srcs)} row_newbcast:{k} row_mask:{rm:#x} bank_mask:{bm:#x}"
                + (" bound_ctrl:1" if bound else ""))
    want, seen = [], []
    for l in range(lanes):
      src = (l & ~15) | k
      keep = cols[2][l] if fmac else fill
      enabled = (ex >> l) & 1 and (rm >> (l // 16)) & 1 and (bm >> ((l & 15) // 4)) & 1
      source_ok = (ex >> src) & 1
      if not enabled or not (source_ok or bound):
        want.append(keep); seen.append((None,)); continue
      ops = [cols[0][src] if source_ok else 0] + [col[l] for col in cols[1:]]
      seen.append(tuple(ops))
      vals = [R.to_value(x, t) for x, t in zip(ops, types)]
      vals[:2] = [_apply_src_mods(x, t, negs[i], abss[i]) for i, (x, t) in enumerate(zip(vals[:2], types))]
      want.append(R.to_bits(fn(*vals), dt))
    expect.append((dst, want, seen, code[-1]))
  st = run_checked(arch, fmt, name, "\n".join(code), v=v, lanes=lanes, exec_mask=ex, vgprs=48)
  ulps, signed_zero = R.ULP_BOUND.get(base, 0), base not in R.DOMAIN
  errors = []
  for dst, want, seen, text in expect:
    got = _get(st, dst, dt, lanes)
    for l in range(lanes):
      e = _check_value(got[l], want[l], dt, f"{text}: v{dst} lane {l} sources {[hex(x) for x in seen[l] if x is not None]}", ulps, signed_zero)
      if e: errors.append(e)
  assert not errors, "\n".join(errors[:14])


# ---- SALU: one wave per operand tuple, the op alone (SCC set before it from s5) ----------------------------------------
SALU_WAVES = 1024 if FULL else 96


def salu_cases():
  out = []
  for arch in ARCHS:
    for fmt in ("SOP1", "SOP2", "SOPC", "SOPK"):
      for opc in _isa(arch).by_op.get(fmt, {}).values():
        n = opc.name
        if (fmt, n) in implemented(arch) and (n in R.SOP1_OPS or n in R.SOP2_OPS or n in R.SOP2_SCC_OPS or n in R.SOPC_OPS or n in R.SOPK_OPS):
          out.append(pytest.param(arch, fmt, n, id=f"{arch}-{fmt}-{n}"))
  return out


def _sregs(first: int, t: str) -> str:
  return f"s[{first}:{first + 1}]" if R.WIDTH[t] == 64 else f"s{first}"


SOPK_IMMEDIATES = (0, 1, 0x7fff, 0x8000, 0xffff, 0x1234)


@pytest.mark.parametrize("arch,fmt,name", salu_cases())
def test_salu_opcode(arch, fmt, name):
  """A scalar op on SALU_WAVES waves, each with its own operands and incoming SCC, against the ISA reference."""
  from hcq.asm.emu.snippet import run_snippet
  scc_in = [(0x9d2c5680a3b1e7f4 >> (i % 64)) & 1 for i in range(SALU_WAVES)]
  if fmt == "SOPK":
    for k in SOPK_IMMEDIATES:
      tuples = R.operand_tuples(("u32", "u32"), SALU_WAVES)
      s_in, d_in = [t[0] for t in tuples], [t[1] for t in tuples]
      cmp = name.startswith("s_cmpk")
      code = f"s_cmp_eq_u32 s5, 1\n{name} {'s0' if cmp else 's10'}, {k:#x}"
      st = run_checked(arch, fmt, name, code, s={0: s_in, 10: d_in, 5: scc_in}, waves=SALU_WAVES, lanes=32, vgprs=1)
      errors = []
      for w in range(SALU_WAVES):
        if name == "s_cmovk_i32": want = (R.sx(k, 16) & R.M32 if scc_in[w] else d_in[w], None)
        else: want = R.SOPK_OPS[name](s_in[w] if cmp else d_in[w], k)
        got_d, got_scc = int(st.s[10, w]), int(st.scc[w])
        want_d = d_in[w] if want[0] is None else want[0]
        want_scc = scc_in[w] if want[1] is None else want[1]
        if (got_d, got_scc) != (want_d, want_scc):
          errors.append(f"{name} imm {k:#x} s={s_in[w] if cmp else d_in[w]:#x} scc_in={scc_in[w]}: got ({got_d:#x}, scc {got_scc}), reference ({want_d:#x}, scc {want_scc})")
      assert not errors, "\n".join(errors[:12])
    return
  if name in R.SOPC_OPS: types, fn = R.SOPC_OPS[name]; dt, kind = None, "sopc"
  elif name in R.SOP2_SCC_OPS: (dt, types, fn), kind = R.SOP2_SCC_OPS[name], "scc_in"
  elif name in R.SOP2_OPS: (dt, types, fn), kind = R.SOP2_OPS[name], "sop"
  else: (dt, types, fn), kind = R.SOP1_OPS[name], "sop"
  tuples = R.operand_tuples(tuple(types), SALU_WAVES)
  s = {5: scc_in, 10: [0xcdcdcdcd] * SALU_WAVES, 11: [0xcdcdcdcd] * SALU_WAVES}
  srcs = []
  for i, t in enumerate(types):
    vals = [tp[i] for tp in tuples]
    s[2 * i] = [x & R.M32 for x in vals]
    if R.WIDTH[t] == 64: s[2 * i + 1] = [x >> 32 for x in vals]
    else: s[2 * i] = [x & ((1 << R.WIDTH[t]) - 1) for x in vals]   # f16 compares read the low half
    srcs.append(_sregs(2 * i, t))
  dst = "" if kind == "sopc" else _sregs(10, dt) + ", "
  st = run_checked(arch, fmt, name, f"s_cmp_eq_u32 s5, 1\n{name} {dst}{', '.join(srcs)}", s=s, waves=SALU_WAVES, lanes=32, vgprs=1)
  errors = []
  for w, tp in enumerate(tuples):
    vals = [R.to_value(x, t) for x, t in zip(tp, types)]
    if kind == "sopc": want_d, want_scc = None, int(bool(fn(*vals)))
    else:
      r, sc = fn(*vals, scc_in[w]) if kind == "scc_in" else fn(*vals)
      want_d, want_scc = R.to_bits(r, dt), sc
    want_scc = scc_in[w] if want_scc is None else want_scc
    got_scc = int(st.scc[w])
    got_d = None if want_d is None else int(st.s[10, w]) & ((1 << R.WIDTH[dt]) - 1) | ((int(st.s[11, w]) << 32) if R.WIDTH[dt] == 64 else 0)
    if got_scc != want_scc or not (got_d == want_d or _same_bits(got_d, want_d, dt)):
      errors.append(f"{name} {[hex(x) for x in tp]} scc_in={scc_in[w]}: got ({got_d if got_d is None else hex(got_d)}, scc {got_scc}), "
                    f"reference ({want_d if want_d is None else hex(want_d)}, scc {want_scc})")
  assert not errors, "\n".join(errors[:12])


# ---- VOPD: both halves from the reference, sources read before either half writes -------------------------------------
VOPD_K = 0x40490fdb   # the literal of fmaak/fmamk (pi)


def vopd_cases():
  out = []
  for arch in ARCHS:
    for opc in _isa(arch).by_op.get("VOPD", {}).values():
      x, y = opc.name.split("__")
      if R.vopd_part(x) and R.vopd_part(y) and ("VOPD", opc.name) in implemented(arch):
        out.append(pytest.param(arch, opc.name, id=f"{arch}-VOPD-{opc.name}"))
  return out


def _vopd_text(name: str, dst: int, s0: int, s1: int) -> str:
  if name.endswith("fmaak_f32"): return f"{name} v{dst}, v{s0}, v{s1}, {VOPD_K:#x}"
  if name.endswith("fmamk_f32"): return f"{name} v{dst}, v{s0}, {VOPD_K:#x}, v{s1}"
  if name.endswith("mov_b32"): return f"{name} v{dst}, v{s0}"
  return f"{name} v{dst}, v{s0}, v{s1}"


@pytest.mark.parametrize("arch,name", vopd_cases())
def test_vopd_opcode(arch, name):
  """A VOPD pair (X in banks 0/0, Y in banks 1/1, even and odd destinations) on 4 waves' worth of operands."""
  lanes = ARCHS[arch]
  halves = name.split("__")
  parts = [R.vopd_part(h) for h in halves]
  k = R.to_value(VOPD_K, "f32")
  code, v, expect = [], {}, []
  for j in range(4):
    base = 16 * j
    texts = []
    for h, (half, (types, acc, fn)) in enumerate(zip(halves, parts)):
      s0, s1, dst = base + h, base + 4 + h, base + 10 + h
      op = "v_" + half.removeprefix("v_dual_")
      tuples = R.operands_for(op, tuple(types) + (("f32",) if acc else ()), 4 * lanes)[j * lanes:(j + 1) * lanes]
      if h: tuples = tuples[::-1]   # Y gets other operands than X
      for i, t in enumerate(types): _put(v, (s0, s1)[i], t, [tp[i] for tp in tuples], lanes)
      _put(v, dst, "u32", [tp[2] for tp in tuples] if acc else [FILL & R.M32] * lanes, lanes)
      want = []
      for l, tp in enumerate(tuples):
        srcs = [R.to_value(x, t) for x, t in zip(tp, types)]
        r = fn(srcs, R.to_value(tp[2], "f32") if acc else None, (CARRY_IN >> l) & 1, k)
        want.append(R.to_bits(r, "f32") if isinstance(r, np.floating) else int(r) & R.M32)
      expect.append((dst, "f32" if "f32" in half else "u32", want, tuples))
      texts.append(_vopd_text(half, dst, s0, s1))
    code.append(" :: ".join(texts))
  st = run_checked(arch, "VOPD", name, "\n".join(code), s={106: CARRY_IN & R.M32}, v=v, lanes=lanes, vgprs=80)
  errors = []
  for dst, t, want, tuples in expect:
    got = _get(st, dst, "u32", lanes)
    for l in range(lanes):
      e = _check_value(got[l], want[l], t, f"v{dst} lane {l} sources {[hex(x) for x in tuples[l]]}")
      if e: errors.append(e)
  assert not errors, code[0] + "\n" + "\n".join(errors[:12])


# ---- SDWA (gfx9): sub-dword source selects (with sext), destination select and the unused bits --------------------------
SEL = {"BYTE_0": (0, 8), "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8), "WORD_0": (0, 16), "WORD_1": (16, 16), "DWORD": (0, 32)}
# per chunk: src0_sel, src1_sel, dst_sel, dst_unused (16-bit results take the WORD in place of a BYTE destination)
SDWA_VARIANTS = [("DWORD", "DWORD", "DWORD", "UNUSED_PRESERVE"), ("WORD_1", "BYTE_0", "WORD_1", "UNUSED_PRESERVE"),
                 ("BYTE_2", "WORD_1", "BYTE_1", "UNUSED_SEXT"), ("BYTE_3", "WORD_0", "WORD_0", "UNUSED_PAD")]


def sdwa_cases():
  out = []
  for arch in ARCHS:
    for fmt in ("VOP1_SDWA", "VOP2_SDWA", "VOPC_SDWA"):
      for opc in _isa(arch).by_op.get(fmt, {}).values():
        base = _base(opc.name)
        kind = _kind(base)
        if kind == "valu": types, dt = R.VALU_OPS[base][1], R.VALU_OPS[base][0]
        elif kind == "cmp": types, dt = R.compare(base)[0], "u32"
        elif kind == "carry": types, dt = ("u32", "u32"), "u32"
        else: continue
        if (fmt, opc.name) in implemented(arch) and all(R.WIDTH[t] < 64 for t in types) and (R.WIDTH[dt] < 64 or dt == "f32x2") \
           and (fmt != "VOP1_SDWA" or len(types) == 1) \
           and len(types) <= 2 and not base.startswith(("v_fmac", "v_mac")):
          out.append(pytest.param(arch, fmt, opc.name, kind, id=f"{arch}-{fmt}-{opc.name}"))
  return out


def _select(bits: int, sel: str, sext: bool) -> int:
  shift, w = SEL[sel]
  x = (bits >> shift) & ((1 << w) - 1)
  return R.sx(x, w) & R.M32 if sext else x


def _place(result: int, old: int, sel: str, unused: str) -> int:
  shift, w = SEL[sel]
  if w == 32: return result & R.M32
  field = (result & ((1 << w) - 1)) << shift
  if unused == "UNUSED_PRESERVE": return (old & ~(((1 << w) - 1) << shift) & R.M32) | field
  if unused == "UNUSED_SEXT" and (result >> (w - 1)) & 1: return field | (R.M32 & ~((1 << (shift + w)) - 1))
  return field


@pytest.mark.parametrize("arch,fmt,name,kind", sdwa_cases())
def test_sdwa_opcode(arch, fmt, name, kind):
  lanes = ARCHS[arch]
  base = _base(name)
  if kind == "valu": dt, types, fn = R.valu_op(arch, base)
  elif kind == "carry": (cin, carry_fn), types, dt = R.CARRY_OPS[base], ("u32", "u32"), "u32"
  else: (types, fn), dt = R.compare(base), "u32"
  pair = R.WIDTH[dt] == 64   # v_cvt_pk_f32_fp8/bf8: a VGPR-pair result, no dst_sel
  tuples = R.operand_tuples(tuple("u32" for _ in types), lanes * len(SDWA_VARIANTS))   # whole registers: the selects pick the bits
  code, v, expect = [], {}, []
  for j, (s0, s1, ds, du) in enumerate(SDWA_VARIANTS):
    chunk = tuples[j * lanes:(j + 1) * lanes]
    if R.WIDTH[dt] == 16 and ds.startswith("BYTE"): ds = "WORD_1"
    sels = (s0, s1)
    sext = [types[i][0] == "i" and SEL[sels[i]][1] < 32 for i in range(len(types))]
    srcs = []
    for i in range(len(types)):
      _put(v, 8 * j + 2 * i, "u32", [tp[i] for tp in chunk], lanes)
      srcs.append(f"sext(v{8 * j + 2 * i})" if sext[i] else f"v{8 * j + 2 * i}")
    sel_text = " ".join(f"src{i}_sel:{sels[i]}" for i in range(len(types)))
    vals = [[R.to_value(_select(tp[i], sels[i], sext[i]) & ((1 << R.WIDTH[t]) - 1), t) for i, t in enumerate(types)] for tp in chunk]
    if kind == "carry":
      # the carry ops read the selected (zero-extended) sources as 32-bit values: the carry-out (VCC) is the 32-bit op's,
      # the result goes to the dst_sel field; v_cndmask and the carry-in forms read VCC (GCN3/CDNA3 ISA, SDWA)
      out, dst = 40 + 2 * j, 64 + 2 * j
      _put(v, dst, "u32", [FILL & R.M32] * lanes, lanes)
      cins = [(CARRY_IN >> l) & 1 for l in range(lanes)]
      res = [carry_fn(*vs, c) for vs, c in zip(vals, cins)]
      text = f"v{dst}, {', '.join(srcs)}, vcc" if base == "v_cndmask_b32" else f"v{dst}, vcc, {', '.join(srcs)}{', vcc' if cin else ''}"
      code += ["s_mov_b64 vcc, s[12:13]", f"{name} {text} dst_sel:{ds} dst_unused:{du} {sel_text}", f"s_mov_b64 s[{out}:{out + 1}], vcc"]
      expect.append(("v", dst, [_place(r[0] & R.M32, FILL & R.M32, ds, du) for r in res], chunk))
      expect.append(("s", out, CARRY_IN if base == "v_cndmask_b32" else sum((r[1] or 0) << l for l, r in enumerate(res)), chunk))
    elif kind == "cmp":
      out = 40 + 2 * j
      code.append(f"{name} s[{out}:{out + 1}], {', '.join(srcs)} {sel_text}")
      if base.startswith("v_cmpx"): code.append(f"s_mov_b64 exec, -1")
      expect.append(("s", out, sum(int(bool(fn(*vs))) << l for l, vs in enumerate(vals)), chunk))
    else:
      dst = 64 + 2 * j
      _put(v, dst, "u64" if pair else "u32", [FILL & (R.M64 if pair else R.M32)] * lanes, lanes)
      if name.startswith(("v_cvt_f32_fp8", "v_cvt_f32_bf8")) or pair: ds, du = "DWORD", "UNUSED_PAD"   # these SDWA forms have no dst_sel
      code.append(f"{name} {_regs(dst, dt)}, {', '.join(srcs)}{f' dst_sel:{ds} dst_unused:{du}' if ds != 'DWORD' else ''} {sel_text}")
      want = [R.to_bits(fn(*vs), dt) if pair else _place(R.to_bits(fn(*vs), dt), FILL & R.M32, ds, du) for vs in vals]
      expect.append(("v", dst, want, chunk))
  st = run_checked(arch, fmt, name, "\n".join(code), v=v, lanes=lanes, vgprs=80, s={12: CARRY_IN & R.M32, 13: CARRY_IN >> 32})
  errors = []
  for where, reg, want, chunk in expect:
    if where == "s":
      got = _mask(st, reg, True)
      if got != want: errors.append(f"s{reg}: mask {got:#x}, reference {want:#x}")
      continue
    got = _get(st, reg, "u64" if pair else "u32", lanes)
    for l in range(lanes):
      g, w = (got[l] & R.M16, want[l] & R.M16) if R.WIDTH[dt] == 16 and got[l] >> 16 == want[l] >> 16 else (got[l], want[l])
      e = _check_value(g, w, dt, f"v{reg} lane {l} sources {[hex(x) for x in chunk[l]]}", R.ULP_BOUND.get(base, 0), base not in R.DOMAIN)
      if e: errors.append(e)
  assert not errors, "\n".join(code) + "\n" + "\n".join(errors[:12])


# ---- VOP3P: packed 16-bit math with op_sel / op_sel_hi / neg_lo / neg_hi, and the integer dot products ----------------
def vop3p_cases():
  out = []
  for arch in ARCHS:
    for fmt in ("VOP3P", "VOP3P_DPP16", "VOP3P_DPP8", "VOP3P_DPP8FI"):
      for opc in _isa(arch).by_op.get(fmt, {}).values():
        base = _base(opc.name)
        if (base in R.PK_OPS or base in R.DOT_OPS or base in R.FLOAT_DOT_OPS) and (fmt, opc.name) in implemented(arch):
          out.append(pytest.param(arch, fmt, opc.name, id=f"{arch}-{fmt}-{opc.name}"))
  return out


@pytest.mark.parametrize("arch,fmt,name", vop3p_cases())
def test_vop3p_opcode(arch, fmt, name):
  """Chunk 0: default selects; chunk 1: op_sel/op_sel_hi swapped per source and (floats) neg_lo/neg_hi."""
  lanes = ARCHS[arch]
  base = _base(name)
  dpp = "DPP" in fmt
  exec_mask = (PARTIAL_EXEC & ((1 << lanes) - 1)) if "DPP8" in fmt else (1 << lanes) - 1
  mnem = _mnemonic(fmt, name)
  code, v, expect = [], {}, []
  if base in R.DOT_OPS or base in R.FLOAT_DOT_OPS:
    n, ht = 3, "u32"
  else:
    ht, fn = R.PK_OPS[base]
    n = 3 if "_mad_" in base or "_fma_" in base else 2
  halves = R.operand_tuples((ht if base in R.PK_OPS else "u16",) * (2 * n), 2 * lanes)
  for j in range(1 if dpp else 2):
    chunk = halves[j * lanes:(j + 1) * lanes]
    regs = [[(tp[2 * i] & R.M16) | ((tp[2 * i + 1] & R.M16) << 16) for tp in chunk] for i in range(n)]
    if base in R.DOT_OPS: regs = [[x ^ (y * 0x9e3779b1 & R.M32) for x, y in zip(r, range(lanes))] for r in regs]   # whole-register bits
    if base in R.FLOAT_DOT_OPS: regs = [list(col) for col in zip(*R.dot2_operands(2 * lanes)[j * lanes:(j + 1) * lanes])]
    for i in range(n): _put(v, 8 * j + 2 * i, "u32", regs[i], lanes)
    if dpp: regs[0] = _lanes_in(regs[0], fmt, exec_mask, lanes, fmt.endswith("DPP8FI"))
    dst = 64 + 2 * j
    _put(v, dst, "u32", [FILL & R.M32] * lanes, lanes)
    srcs = ", ".join(f"v{8 * j + 2 * i}" for i in range(n))
    sel, sel_hi = [0] * n, [1] * n
    neg_lo, neg_hi = [0] * n, [0] * n
    mods = ""
    if j == 1 and base in R.PK_OPS:
      sel, sel_hi = [1, 0, 1][:n], [0, 1, 0][:n]
      mods = f" op_sel:[{','.join(map(str, sel))}] op_sel_hi:[{','.join(map(str, sel_hi))}]"
      if ht == "f16":
        neg_lo, neg_hi = [1, 0, 1][:n], [0, 1, 1][:n]
        mods += f" neg_lo:[{','.join(map(str, neg_lo))}] neg_hi:[{','.join(map(str, neg_hi))}]"
    code.append(f"{mnem} v{dst}, {srcs}{mods}{_dpp_controls(fmt)}")
    want = []
    for l in range(lanes):
      if not (exec_mask >> l) & 1: want.append(FILL & R.M32); continue
      if base in R.DOT_OPS:
        want.append(R.DOT_OPS[base](*[r[l] for r in regs]) & R.M32); continue
      if base in R.FLOAT_DOT_OPS:
        want.append(R.to_bits(R.FLOAT_DOT_OPS[base](regs[0][l], regs[1][l], R.to_value(regs[2][l], "f32")), "f32")); continue
      out = 0
      for half, (selv, negv) in enumerate(((sel, neg_lo), (sel_hi, neg_hi))):
        args = []
        for i in range(n):
          x = R.to_value((regs[i][l] >> (16 * selv[i])) & R.M16, ht)
          args.append(-x if negv[i] else x)
        out |= R.to_bits(fn(*args), ht) << (16 * half)
      want.append(out)
    expect.append((dst, want, [[hex(r[l]) for r in regs] for l in range(lanes)]))
  st = run_checked(arch, fmt, name, "\n".join(code), v=v, lanes=lanes, exec_mask=exec_mask, vgprs=80)
  errors = []
  for dst, want, srcs in expect:
    got = _get(st, dst, "u32", lanes)
    for l in range(lanes):
      if not _same_bits(got[l], want[l], "f16" if base in R.PK_OPS and ht == "f16" else "f32" if base in R.FLOAT_DOT_OPS else "u32"):
        errors.append(f"v{dst} lane {l} sources {srcs[l]}: got {got[l]:#x}, reference {want[l]:#x}")
  assert not errors, "\n".join(code) + "\n" + "\n".join(errors[:12])


def pk_f32_cases():
  return [pytest.param(a, "VOP3P", n, id=f"{a}-VOP3P-{n}") for a in ARCHS for n in R.PK_F32_OPS if ("VOP3P", n) in implemented(a)]


@pytest.mark.parametrize("arch,fmt,name", pk_f32_cases())
def test_pk_f32_opcode(arch, fmt, name):
  """gfx942's packed f32 ops on VGPR pairs, one chunk per select/modifier setting: default selects, swapped dwords with
  neg_lo/neg_hi, mixed selects with clamp (v_pk_mov_b32: its two op_sel bits)."""
  lanes = ARCHS[arch]
  n, fn = R.PK_F32_OPS[name]
  mov = fn is None
  settings = [([0, 0], [1, 1], [0, 0], [0, 0], False), ([1, 0], [0, 1], [0, 0], [0, 0], False), ([0, 1], [1, 1], [0, 0], [0, 0], False)] if mov \
    else [([0] * n, [1] * n, [0] * n, [0] * n, False), ([1, 0, 1][:n], [0, 1, 0][:n], [1, 0, 0][:n], [0, 0, 1][:n], False),
          ([1, 1, 0][:n], [1, 0, 0][:n], [0, 1, 1][:n], [1, 1, 1][:n], True)]   # neg_lo / neg_hi flip the sign differently
  tuples = R.operand_tuples(("f32",) * (2 * n), lanes * len(settings))
  code, v, expect = [], {}, []
  for j, (sel, sel_hi, neg_lo, neg_hi, clamp) in enumerate(settings):
    chunk = tuples[j * lanes:(j + 1) * lanes]
    base, dst = 8 * j, 40 + 2 * j
    for i in range(2 * n): _put(v, base + i, "f32", [tp[i] for tp in chunk], lanes)
    _put(v, dst, "u64", [FILL] * lanes, lanes)
    lst = lambda xs: f"[{','.join(map(str, xs))}]"
    mods = f" op_sel:{lst(sel)}" + ("" if mov else f" op_sel_hi:{lst(sel_hi)} neg_lo:{lst(neg_lo)} neg_hi:{lst(neg_hi)}") + (" clamp" if clamp else "")
    code.append(f"{name} v[{dst}:{dst + 1}], {', '.join(f'v[{base + 2 * i}:{base + 2 * i + 1}]' for i in range(n))}{mods}")
    want = []
    for tp in chunk:
      if mov: want.append(tp[sel[0]] | (tp[2 + sel[1]] << 32)); continue
      out = 0
      for half, (sl, ng) in enumerate(((sel, neg_lo), (sel_hi, neg_hi))):
        args = [R.to_value(tp[2 * i + sl[i]], "f32") for i in range(n)]
        r = fn(*[-a if ng[i] else a for i, a in enumerate(args)])
        out |= R.to_bits(_clamp(r, "f32") if clamp else r, "f32") << (32 * half)
      want.append(out)
    expect.append((dst, want, chunk))
  st = run_checked(arch, fmt, name, "\n".join(code), v=v, lanes=lanes, vgprs=48)
  errors = []
  for dst, want, chunk in expect:
    got = _get(st, dst, "u64", lanes)
    for l in range(lanes):
      e = _check_value(got[l], want[l], "u64" if mov else "f32x2", f"v[{dst}:{dst + 1}] lane {l} sources {[hex(x) for x in chunk[l]]}")
      if e: errors.append(e)
  assert not errors, "\n".join(code) + "\n" + "\n".join(errors[:12])


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dx10", [0, 1])
def test_clamp_of_nan_follows_mode_dx10_clamp(arch, dx10):
  """The clamp modifier limits to [0, 1]; a NaN passes through, or becomes +0 when MODE.DX10_CLAMP (bit 8) is set
  (LLVM AMDGPUUsage, COMPUTE_PGM_RSRC1.DX10_CLAMP)."""
  from hcq.asm.emu.snippet import run_snippet
  lanes = ARCHS[arch]
  vals = [0x7fc00000, 0xffc00000, 0x7f800001, 0x3fc00000, 0xbf800000, 0x3f000000, 0x7f800000, 0xff800000] * (lanes // 8)
  st = run_snippet(f"s_setreg_imm32_b32 hwreg(HW_REG_MODE, 8, 1), {dx10}\nv_add_f32_e64 v2, v0, v1 clamp", v={0: vals, 1: [0] * lanes},
                   lanes=lanes, arch=arch)
  for x, got in zip(vals, st.v[2, 0]):
    want = R.to_bits(_clamp(R.to_value(x, "f32") + np.float32(0), "f32", bool(dx10)), "f32")
    assert int(got) == want or (R.is_nan_bits(int(got), "f32") and R.is_nan_bits(want, "f32")), (hex(x), hex(int(got)), hex(want))


# ---- DS: each lane its own 16-byte slot of LDS (no two lanes meet), offset field in use ---------------------------------
DS_OFFSET = 8


def ds_cases():
  out = []
  for arch in ARCHS:
    for opc in _isa(arch).by_op.get("DS", {}).values():
      if (R.ds_atomic(opc.name) or R.ds_atomic2(opc.name) or R.ds_access(opc.name)) and ("DS", opc.name) in implemented(arch):
        out.append(pytest.param(arch, opc.name, id=f"{arch}-DS-{opc.name}"))
  return out


def _stored(data: list, lane: int, bits: int, half) -> int:
  """The bits a store of `bits` writes from data registers data[0..3] of one lane (d16_hi stores take bits 31:16)."""
  return (sum(data[k][lane] << (32 * k) for k in range(4)) >> (16 if half else 0)) & ((1 << bits) - 1)


def _vrange(first: int, bits: int) -> str:
  n = max(1, bits // 32)
  return f"v{first}" if n == 1 else f"v[{first}:{first + n - 1}]"


@pytest.mark.parametrize("arch,name", ds_cases())
def test_ds_opcode(arch, name):
  lanes = ARCHS[arch]
  rng = np.random.default_rng(7)
  size = 32 * lanes
  lds = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
  atomic, atomic2, access = R.ds_atomic(name), R.ds_atomic2(name), R.ds_access(name)
  bits = (atomic or atomic2 or access)[0] if not access else access[1]
  # edge values into each slot where the atomics land, so that they meet their boundaries
  e = _atomic_edges(name, bits if bits in (32, 64) else 32)
  nb = (bits if bits in (32, 64) else 32) // 8
  for l in range(lanes): lds[32 * l + DS_OFFSET:32 * l + DS_OFFSET + nb] = e[l % len(e)].to_bytes(nb, "little")
  addr = [32 * l for l in range(lanes)]
  olds = [int.from_bytes(lds[32 * l + DS_OFFSET:32 * l + DS_OFFSET + nb], "little") for l in range(lanes)]
  two = atomic2 is not None
  packed = _atomic_data(rng, e, bits if bits in (32, 64) else 32, 2 if two else 1, olds)
  if name.startswith("ds_cmpst_"):   # GCN's ds_cmpst reads the compare value first
    w = bits
    packed = [(p >> w) | ((p & ((1 << w) - 1)) << w) for p in packed]
  data = [[(p >> (32 * k)) & R.M32 for p in packed] for k in range(4)]
  for k in range(4):   # random bits above what the atomic data uses (loads and stores take up to 4 dwords)
    if packed and max(packed).bit_length() <= 32 * k: data[k] = [int(x) for x in rng.integers(0, 1 << 32, lanes, dtype=np.uint64)]
  if two:   # data0 in v2(:v3), data1 in v4(:v5)
    n = bits // 32
    d0 = [sum(data[k][l] << (32 * k) for k in range(n)) for l in range(lanes)]
    d1 = [sum(data[n + k][l] << (32 * k) for k in range(n)) for l in range(lanes)]
    data = [[x & R.M32 for x in d0], [x >> 32 for x in d0], [x & R.M32 for x in d1], [x >> 32 for x in d1]]
  v = {0: addr}
  for k in range(4): v[2 + k] = data[k]
  v[8], v[9], v[10], v[11] = ([FILL & R.M32] * lanes for _ in range(4))
  ref = bytearray(lds)
  want_regs = None
  if atomic or atomic2:
    bits, rtn, fn = atomic or atomic2
    nbytes = bits // 8
    dreg = f"{_vrange(2, bits)}, {_vrange(4, bits)}" if two else _vrange(2, bits)
    text = f"{name} {'v8, ' if rtn and bits == 32 else 'v[8:9], ' if rtn else ''}v0, {dreg} offset:{DS_OFFSET}"
    want_regs = []
    for l in range(lanes):
      a = addr[l] + DS_OFFSET
      old = int.from_bytes(ref[a:a + nbytes], "little")
      if two: new = fn(old, data[0][l] | (data[1][l] << 32 if bits == 64 else 0), data[2][l] | (data[3][l] << 32 if bits == 64 else 0))
      else: new = fn(old, data[0][l] | (data[1][l] << 32 if bits == 64 else 0))
      ref[a:a + nbytes] = (new & ((1 << bits) - 1)).to_bytes(nbytes, "little")
      want_regs.append(old)
    if not rtn: want_regs = None
  elif access[0] == "load":
    _, bits, signed, half = access
    text = f"{name} {_vrange(8, bits)}, v0 offset:{DS_OFFSET}"
    want_regs = [R.vmem_loaded(FILL & R.M32, int.from_bytes(ref[addr[l] + DS_OFFSET:addr[l] + DS_OFFSET + max(bits, 8) // 8], "little"),
                               bits, signed, half) for l in range(lanes)]
  else:
    _, bits, _, half = access
    text = f"{name} v0, {_vrange(2, bits)} offset:{DS_OFFSET}"
    for l in range(lanes):
      a = addr[l] + DS_OFFSET
      x = _stored(data, l, bits, half)
      ref[a:a + bits // 8] = x.to_bytes(bits // 8, "little")
  st = run_checked(arch, "DS", name, text, s={125: R.M32}, v=v, lanes=lanes, vgprs=16, lds_bytes=size, lds=bytes(lds))
  errors = _memory_errors(st.lds[:size].tobytes(), bytes(ref), name)
  if want_regs is not None:
    n = max(1, bits // 32)
    for l in range(lanes):
      got = sum(int(st.v[8 + k, 0, l]) << (32 * k) for k in range(n))
      want = want_regs[l] & ((1 << (32 * n)) - 1)
      if got != want: errors.append(f"lane {l} returned {got:#x}, reference {want:#x} (data {data[0][l]:#x})")
  assert not errors, text + "\n" + "\n".join(errors[:12])


# ---- cross-lane VALU: readfirstlane, readlane, writelane, mbcnt, swap, permlane16/x16 (the ISA's lane arithmetic) -------
LANE_OPS = ("v_readfirstlane_b32", "v_readlane_b32", "v_writelane_b32", "v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32", "v_swap_b32",
            "v_permlane16_b32", "v_permlanex16_b32")


def lane_cases():
  out = []
  for arch in ARCHS:
    for fmt in ("VOP1", "VOP3"):
      for opc in _isa(arch).by_op.get(fmt, {}).values():
        if _base(opc.name) in LANE_OPS and (fmt, opc.name) in implemented(arch):
          out.append(pytest.param(arch, fmt, opc.name, id=f"{arch}-{fmt}-{opc.name}"))
  return out


@pytest.mark.parametrize("arch,fmt,name", lane_cases())
def test_lane_opcode(arch, fmt, name):
  lanes = ARCHS[arch]
  base = _base(name)
  rng = np.random.default_rng(11)
  a = [int(x) for x in rng.integers(0, 1 << 32, lanes, dtype=np.uint64)]
  b = [int(x) for x in rng.integers(0, 1 << 32, lanes, dtype=np.uint64)]
  exec_mask = (1 << lanes) - 1
  v = {0: a, 1: b, 8: [FILL & R.M32] * lanes}
  s = {}
  code, want_v, want_s = [], {}, {}
  if base == "v_readfirstlane_b32":
    exec_mask = 0xfff0c000 & ((1 << lanes) - 1)
    code, want_s = [f"{name} s10, v0"], {10: a[(exec_mask & -exec_mask).bit_length() - 1]}
  elif base == "v_readlane_b32":
    picks = [0, 5, lanes - 1, 37, 64 + 3]   # the lane number wraps at the wave size (S1[4:0] / S1[5:0])
    for k, p in enumerate(picks):
      s[20 + k] = p
      code.append(f"{name} s{30 + k}, v0, s{20 + k}")
      want_s[30 + k] = a[p % lanes]
  elif base == "v_writelane_b32":
    # the lane select in M0 and as a constant: two SGPRs (s20, s21) are over gfx942's constant bus, which llvm-mc refuses
    s.update({20: 0x12345678, 22: 0xcafef00d})
    code = ["s_mov_b32 m0, 39", f"{name} v8, s20, m0", f"{name} v8, s22, 3"]
    w = [FILL & R.M32] * lanes
    w[(7 + 32) % lanes], w[3] = 0x12345678, 0xcafef00d
    want_v[8] = w
  elif base.startswith("v_mbcnt"):
    masks = [0xffffffff, 0x80000001, 0xdeadbeef, 0]
    for k, m in enumerate(masks):
      s[20 + k] = m
      code.append(f"{name} v{8 + k}, s{20 + k}, v1")
      if base == "v_mbcnt_lo_u32_b32": want_v[8 + k] = [(bin(m & ((1 << l) - 1) & R.M32).count("1") + b[l]) & R.M32 for l in range(lanes)]
      else: want_v[8 + k] = [(bin(m & (((1 << l) - 1) >> 32)).count("1") + b[l]) & R.M32 for l in range(lanes)]
      v[8 + k] = [FILL & R.M32] * lanes
  elif base == "v_swap_b32":
    v[8] = list(b)
    code, want_v = [f"{name} v8, v0"], {8: a, 0: b}
  else:   # permlane16 / permlanex16: lane i of each row of 16 reads lane sel[i] of its row (x16: of the other row)
    sel = 0xfedcba9876543210 ^ 0x3a5c9e17b2d46081
    s.update({20: sel & R.M32, 21: sel >> 32})
    code = [f"{name} v8, v0, s20, s21"]
    want = []
    for l in range(lanes):
      row = l & ~15
      if base == "v_permlanex16_b32": row ^= 16
      want.append(a[row + ((sel >> (4 * (l & 15))) & 15)])
    want_v[8] = want
  st = run_checked(arch, fmt, name, "\n".join(code), s=s, v=v, lanes=lanes, exec_mask=exec_mask, vgprs=16)
  errors = [f"s{r}: got {int(st.s[r, 0]):#x}, reference {w:#x}" for r, w in want_s.items() if int(st.s[r, 0]) != w]
  for r, w in want_v.items():
    got = _get(st, r, "u32", lanes)
    errors += [f"v{r} lane {l}: got {got[l]:#x}, reference {w[l]:#x}" for l in range(lanes) if got[l] != w[l]]
  assert not errors, "\n".join(code) + "\n" + "\n".join(errors[:12])


# ---- SOP1 on EXEC (saveexec / wrexec), s_cmov, s_bitset0/1, s_bitreplicate: one wave per operand tuple -----------------
def sop1_state_cases():
  out = []
  for arch in ARCHS:
    for opc in _isa(arch).by_op.get("SOP1", {}).values():
      n = opc.name
      if (R.exec_op(n) or n in ("s_cmov_b32", "s_cmov_b64", "s_bitset0_b32", "s_bitset1_b32", "s_bitset0_b64", "s_bitset1_b64",
                                "s_bitreplicate_b64_b32")) and ("SOP1", n) in implemented(arch):
        out.append(pytest.param(arch, n, id=f"{arch}-SOP1-{n}"))
  return out


@pytest.mark.parametrize("arch,name", sop1_state_cases())
def test_sop1_state_opcode(arch, name):
  waves = SALU_WAVES
  wave64 = ARCHS[arch] == 64 or bool(R.exec_op(name) and R.exec_op(name)[0] == 64)   # the 64-bit EXEC ops run in wave64 mode
  rng = np.random.default_rng(5)
  r64 = lambda: [int(x) for x in rng.integers(0, 1 << 63, waves, dtype=np.uint64) * 2 + rng.integers(0, 2, waves, dtype=np.uint64)]
  src, old_d, ex = r64(), r64(), r64()
  for w in range(0, waves, 4): src[w] = R.EDGES[64][(w // 4) % len(R.EDGES[64])]
  scc_in = [(0x9d2c5680a3b1e7f4 >> (w % 64)) & 1 for w in range(waves)]
  bits = 64 if name.endswith("64") or name.endswith("b64_b32") else 32
  m = (1 << bits) - 1
  emask = (1 << (64 if wave64 else 32)) - 1
  ex = [e & emask for e in ex]
  s = {0: [x & R.M32 for x in src], 1: [x >> 32 for x in src], 10: [x & R.M32 for x in old_d], 11: [x >> 32 for x in old_d],
       5: scc_in, 6: [e & R.M32 for e in ex], 7: [e >> 32 for e in ex]}
  reg = lambda r: f"s[{r}:{r + 1}]" if bits == 64 else f"s{r}"
  src_reg = "s0" if name == "s_bitreplicate_b64_b32" or name.startswith("s_bitset") else reg(0)
  set_exec = "s_mov_b64 exec, s[6:7]" if wave64 else "s_mov_b32 exec_lo, s6"
  st = run_checked(arch, "SOP1", name, f"{set_exec}\ns_cmp_eq_u32 s5, 1\n{name} {reg(10)}, {src_reg}", s=s, waves=waves, vgprs=1,
                   lanes=64 if wave64 else 32)
  errors = []
  for w in range(waves):
    e0, s0, d0 = ex[w], src[w] & m, old_d[w] & m
    new_exec, scc = e0, scc_in[w]
    eo = R.exec_op(name)
    if eo:
      _, fn, wr = eo
      new_exec = fn(s0, e0) & m & emask if bits == 64 or not wave64 else (fn(s0, e0 & R.M32) & R.M32) | (e0 & ~R.M32)
      d = new_exec & m if wr else e0 & m
      scc = int(new_exec & m != 0)
    elif name.startswith("s_cmov"): d = s0 if scc_in[w] else d0
    elif name.startswith("s_bitset"):
      k = src[w] & (bits - 1)
      d = (d0 | (1 << k)) if "bitset1" in name else (d0 & ~(1 << k))
    else: d = sum(((src[w] >> i) & 1) * 3 << (2 * i) for i in range(32))
    got_d = int(st.s[10, w]) | (int(st.s[11, w]) << 32 if bits == 64 else 0)
    got_exec = int(st.s[126, w]) | (int(st.s[127, w]) << 32 if wave64 else 0)
    if (got_d, got_exec, int(st.scc[w])) != (d, new_exec, scc):
      errors.append(f"s0={src[w]:#x} exec={e0:#x} scc_in={scc_in[w]}: got D={got_d:#x} EXEC={got_exec:#x} SCC={int(st.scc[w])}, "
                    f"reference D={d:#x} EXEC={new_exec:#x} SCC={scc}")
  assert not errors, name + "\n" + "\n".join(errors[:12])


# ---- GLOBAL / FLAT loads and stores: each lane its own 32-byte slot of a mapped buffer, an offset in the instruction ----
VMEM_BASE = 0x7d0000001000


def vmem_cases():
  out = []
  for arch in ARCHS:
    for fmt in ("GLOBAL", "FLAT", "VGLOBAL", "VFLAT"):
      for opc in _isa(arch).by_op.get(fmt, {}).values():
        if R.vmem_access(opc.name) and (fmt, opc.name) in implemented(arch):
          out.append(pytest.param(arch, fmt, opc.name, id=f"{arch}-{fmt}-{opc.name}"))
  return out


@pytest.mark.parametrize("arch,fmt,name", vmem_cases())
def test_vmem_opcode(arch, fmt, name):
  from hcq.asm.emu.memory import VirtualMemory
  lanes = ARCHS[arch]
  rng = np.random.default_rng(9)
  size = 32 * lanes
  buf = rng.integers(0, 256, size, dtype=np.uint8)
  init = buf.tobytes()
  mem = VirtualMemory()
  mem.map(VMEM_BASE, size, buf)
  kind, bits, signed, half = R.vmem_access(name)
  data = [[int(x) for x in rng.integers(0, 1 << 32, lanes, dtype=np.uint64)] for _ in range(4)]
  off = [32 * l for l in range(lanes)]
  addr = [VMEM_BASE + o for o in off]
  v = {0: off, 2: [a & R.M32 for a in addr], 3: [a >> 32 for a in addr]}
  for k in range(4): v[4 + k] = data[k]
  for k in range(4): v[8 + k] = [FILL & R.M32] * lanes
  s = {0: VMEM_BASE & R.M32, 1: VMEM_BASE >> 32}
  where = "v0, s[0:1]" if "GLOBAL" in fmt else "v[2:3]"
  ref = bytearray(init)
  want = None
  if kind == "load":
    text = f"{name} {_vrange(8, bits)}, {where} offset:8"
    want = []
    for l in range(lanes):
      x = int.from_bytes(ref[off[l] + 8:off[l] + 8 + max(bits, 8) // 8], "little")
      want.append(R.vmem_loaded(FILL & R.M32, x, bits, signed, half))
  else:
    text = f"{name} {where.split(',')[0] if 'FLAT' in fmt else 'v0'}, {_vrange(4, bits)}{', s[0:1]' if 'GLOBAL' in fmt else ''} offset:8"
    for l in range(lanes):
      x = _stored(data, l, bits, half)
      ref[off[l] + 8:off[l] + 8 + bits // 8] = x.to_bytes(bits // 8, "little")
  st = run_checked(arch, fmt, name, text, s=s, v=v, lanes=lanes, vgprs=16, mem=mem)
  got = buf.tobytes()
  errors = _memory_errors(got, bytes(ref), name)
  if want is not None:
    n = max(1, bits // 32)
    for l in range(lanes):
      g = sum(int(st.v[8 + k, 0, l]) << (32 * k) for k in range(n))
      if g != want[l]: errors.append(f"lane {l} loaded {g:#x}, reference {want[l]:#x}")
  assert not errors, text + "\n" + "\n".join(errors[:12])


def _memory_errors(got: bytes, ref: bytes, name: str) -> list[str]:
  """Byte-exact, except that a float atomic's NaN result matches any NaN of its type (per element: 2, 4 or 8 bytes)."""
  t = next((t for t in ("bf16", "f16", "f32", "f64") if name.endswith("_" + t)), None)
  if t is None or "cmp" in name: return [f"byte {i}: got {got[i]:#x}, reference {ref[i]:#x}" for i in range(len(ref)) if got[i] != ref[i]]
  size = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8}[t]
  nan = (lambda x: (x & 0x7f80) == 0x7f80 and x & 0x7f) if t == "bf16" else (lambda x: R.is_nan_bits(x, t))
  out = []
  for i in range(0, len(ref) - len(ref) % size, size):
    g, r = int.from_bytes(got[i:i + size], "little"), int.from_bytes(ref[i:i + size], "little")
    if g != r and not (nan(g) and nan(r)): out.append(f"bytes {i}..{i + size - 1}: got {g:#x}, reference {r:#x}")
  return out


def _atomic_edges(name: str, bits: int) -> list[int]:
  """Memory values where atomics meet their boundaries: integer edges, or (float and packed ops) float edges."""
  if name.endswith(("_f16", "_bf16")): return [a | (b << 16) for a, b in zip(R.FLOAT_EDGES["f16"], R.FLOAT_EDGES["f16"][::-1])]
  if name.endswith(("_f32", "_f64")): return R.FLOAT_EDGES["f32" if bits == 32 else "f64"]
  return R.EDGES[bits]


def _atomic_data(rng, e: list[int], bits: int, mult: int, old: list[int]) -> list[int]:
  """Per lane data: edges and random bits; with two operands (compare-and-swap) the second is the current memory
  value in every other lane, so that both outcomes of the compare happen."""
  lanes = len(old)
  rand = lambda: [int(x) & ((1 << bits) - 1) for x in rng.integers(0, 1 << 63, lanes, dtype=np.uint64) * 2 + rng.integers(0, 2, lanes, dtype=np.uint64)]
  d0 = rand()
  for l in range(0, lanes, 3): d0[l] = e[(l * 5) % len(e)]
  if mult == 1: return d0
  d1 = rand()
  for l in range(0, lanes, 2): d1[l] = old[l]
  return [a | (b << bits) for a, b in zip(d0, d1)]


RETURN_BIT = {"gfx1100": " glc", "gfx1201": " th:TH_ATOMIC_RETURN", "gfx942": " sc0"}   # an atomic returning the old value


def vmem_atomic_cases():
  out = []
  for arch in ARCHS:
    for fmt in ("GLOBAL", "FLAT"):
      for opc in _isa(arch).by_op.get(fmt, {}).values():
        if R.vmem_atomic(opc.name) and (fmt, opc.name) in implemented(arch):
          out.append(pytest.param(arch, fmt, opc.name, id=f"{arch}-{fmt}-{opc.name}"))
  return out


@pytest.mark.parametrize("rtn", [False, True])
@pytest.mark.parametrize("arch,fmt,name", vmem_atomic_cases())
def test_vmem_atomic_opcode(arch, fmt, name, rtn):
  from hcq.asm.emu.memory import VirtualMemory
  lanes = ARCHS[arch]
  bits, fn, mult = R.vmem_atomic(name)
  nbytes = bits // 8
  rng = np.random.default_rng(13)
  size = 32 * lanes
  buf = rng.integers(0, 256, size, dtype=np.uint8)
  e = _atomic_edges(name, bits)
  for l in range(lanes): buf[32 * l + 8:32 * l + 8 + nbytes] = np.frombuffer(e[l % len(e)].to_bytes(nbytes, "little"), np.uint8)
  ref = bytearray(buf.tobytes())
  mem = VirtualMemory()
  mem.map(VMEM_BASE, size, buf)
  data = _atomic_data(rng, e, bits, mult, [e[l % len(e)] for l in range(lanes)])
  off = [32 * l for l in range(lanes)]
  addr = [VMEM_BASE + o for o in off]
  v = {0: off, 2: [a & R.M32 for a in addr], 3: [a >> 32 for a in addr], **{4 + k: [(d >> (32 * k)) & R.M32 for d in data] for k in range(4)},
       8: [FILL & R.M32] * lanes, 9: [FILL & R.M32] * lanes}
  where = ("v0", ", s[0:1]") if fmt == "GLOBAL" else ("v[2:3]", "")
  text = f"{name} {_vrange(8, bits) + ', ' if rtn else ''}{where[0]}, {_vrange(4, bits * mult)}{where[1]} offset:8{RETURN_BIT[arch] if rtn else ''}"
  old = []
  for l in range(lanes):
    a = off[l] + 8
    o = int.from_bytes(ref[a:a + nbytes], "little")
    ref[a:a + nbytes] = (fn(o, data[l]) & ((1 << bits) - 1)).to_bytes(nbytes, "little")
    old.append(o)
  st = run_checked(arch, fmt, name, text, s={0: VMEM_BASE & R.M32, 1: VMEM_BASE >> 32}, v=v, lanes=lanes, vgprs=16, mem=mem)
  got = buf.tobytes()
  errors = _memory_errors(got, bytes(ref), name)
  if rtn:
    for l in range(lanes):
      g = sum(int(st.v[8 + k, 0, l]) << (32 * k) for k in range(bits // 32))
      if g != old[l]: errors.append(f"lane {l} returned {g:#x}, reference {old[l]:#x}")
  assert not errors, text + "\n" + "\n".join(errors[:12])


# ---- SMEM: scalar loads from a mapped buffer (s_load_*, and s_buffer_load_* through a V# over the same bytes) ----------
SMEM_WIDTHS = {"b32": (32, False), "b64": (64, False), "b96": (96, False), "b128": (128, False), "b256": (256, False), "b512": (512, False),
               "dword": (32, False), "dwordx2": (64, False), "dwordx4": (128, False), "dwordx8": (256, False), "dwordx16": (512, False),
               "u8": (8, False), "i8": (8, True), "u16": (16, False), "i16": (16, True)}


def _smem_shape(name: str):
  base = name.removesuffix("_e64")
  for pre in ("s_load_", "s_buffer_load_"):
    if base.startswith(pre) and base[len(pre):] in SMEM_WIDTHS: return (pre == "s_buffer_load_", *SMEM_WIDTHS[base[len(pre):]])
  return None


def smem_cases():
  out = []
  for arch in ARCHS:
    for opc in _isa(arch).by_op.get("SMEM", {}).values():
      if _smem_shape(opc.name) and ("SMEM", opc.name) in implemented(arch):
        out.append(pytest.param(arch, opc.name, id=f"{arch}-SMEM-{opc.name}"))
  return out


@pytest.mark.parametrize("arch,name", smem_cases())
def test_smem_opcode(arch, name):
  from hcq.asm.emu.memory import VirtualMemory
  buffer, bits, signed = _smem_shape(name)
  rng = np.random.default_rng(17)
  buf = rng.integers(0, 256, 256, dtype=np.uint8)
  buf[0x10:0x12] = (0x9c, 0xf3)   # negative as i8 and as i16: the sign extension shows
  mem = VirtualMemory()
  mem.map(VMEM_BASE, 256, buf)
  n = max(1, bits // 32)
  dst = f"s[40:{40 + n - 1}]" if n > 1 else "s40"
  base = "s[4:7]" if buffer else "s[0:1]"
  s = {0: VMEM_BASE & R.M32, 1: VMEM_BASE >> 32, 4: VMEM_BASE & R.M32, 5: (VMEM_BASE >> 32) & R.M16, 6: 256, 7: 0}
  st = run_checked(arch, "SMEM", name, f"{name} {dst}, {base}, 0x10\ns_waitcnt lgkmcnt(0)" if arch == "gfx942" else
                   f"{name} {dst}, {base}, 0x10", s=s, vgprs=1, mem=mem)
  x = int.from_bytes(buf.tobytes()[0x10:0x10 + max(bits, 8) // 8], "little")
  if bits < 32: x = R.sx(x, bits) & R.M32 if signed else x
  got = sum(int(st.s[40 + k, 0]) << (32 * k) for k in range(n))
  assert got == x, f"{name}: got {got:#x}, reference {x:#x}"


# ---- MUBUF / MTBUF: a structured buffer through a V#, every address term in use, against a byte model -----------------
# The address (RDNA3/RDNA4 ISA "Buffer addressing"; CDNA3 the same): V#.base + SGPR offset + instruction offset + VGPR
# offset (offen) + VGPR index (idxen) * V#.stride. Range check of a structured buffer (idxen, stride != 0): an index >=
# num_records is out of range on every arch (gfx10+ OOB_SELECT 0 also checks offset + size <= stride, which these keep):
# such a lane loads 0 and stores nothing.
BUF_STRIDE, BUF_SOFFSET, BUF_IOFFSET = 48, 0x40, 8
OUT_OF_RANGE_LANES = (5, 22)   # their index is num_records
# formatted access: identity conversions, so the test sees the component routing (x, y, z, w; d16 halves), not a format
BUF_FORMATS = {"gfx1100": {32: ("BUF_FMT_32_32_32_32_UINT", 61 << 12), 16: ("BUF_FMT_16_16_16_16_UINT", 55 << 12)},
               "gfx942": {32: ("BUF_DATA_FORMAT_32_32_32_32,BUF_NUM_FORMAT_UINT", (14 << 15) | (4 << 12)),
                          16: ("BUF_DATA_FORMAT_16_16_16_16,BUF_NUM_FORMAT_UINT", (12 << 15) | (4 << 12))}}
BUF_FORMATS["gfx1201"] = BUF_FORMATS["gfx1100"]


def _format_shape(name: str):
  """(load?, d16?, hi?, components) of buffer_*_format_* / tbuffer_*, either spelling (d16_format / format_d16), or None."""
  m = re.match(r"t?buffer_(load|store)_(?:(d16_)?(hi_)?format_(?:(d16_)(hi_)?)?(x|xy|xyz|xyzw))$", name)
  if not m: return None
  return m.group(1) == "load", bool(m.group(2) or m.group(4)), bool(m.group(3) or m.group(5)), len(m.group(6))


def buffer_cases():
  out = []
  for arch in ARCHS:
    for fmt in ("MUBUF", "MTBUF"):
      for opc in _isa(arch).by_op.get(fmt, {}).values():
        if (R.vmem_access(opc.name) or R.vmem_atomic(opc.name) or _format_shape(opc.name)) and (fmt, opc.name) in implemented(arch):
          out.append(pytest.param(arch, fmt, opc.name, id=f"{arch}-{fmt}-{opc.name}"))
  return out


@pytest.mark.parametrize("arch,fmt,name", buffer_cases())
def test_buffer_opcode(arch, fmt, name):
  from hcq.asm.emu.memory import VirtualMemory
  lanes = ARCHS[arch]
  rng = np.random.default_rng(19)
  size = BUF_SOFFSET + BUF_STRIDE * (lanes + 1) + 64
  buf = rng.integers(0, 256, size, dtype=np.uint8)
  access, atomic, shape = R.vmem_access(name), R.vmem_atomic(name), _format_shape(name)
  if atomic:   # edge values where the atomics land
    e = _atomic_edges(name, atomic[0])
    for l in range(lanes):
      a = BUF_SOFFSET + l * BUF_STRIDE + BUF_IOFFSET + 4 * (l % 3)
      buf[a:a + atomic[0] // 8] = np.frombuffer(e[l % len(e)].to_bytes(atomic[0] // 8, "little"), np.uint8)
  ref = bytearray(buf.tobytes())
  mem = VirtualMemory()
  mem.map(VMEM_BASE, size, buf)
  num_records = lanes
  index = [num_records if l in OUT_OF_RANGE_LANES and not atomic else l for l in range(lanes)]
  voff = [4 * (l % 3) for l in range(lanes)]
  data = [[int(x) for x in rng.integers(0, 1 << 32, lanes, dtype=np.uint64)] for _ in range(4)]
  if atomic:
    olds = [int.from_bytes(ref[BUF_SOFFSET + l * BUF_STRIDE + BUF_IOFFSET + 4 * (l % 3):][:atomic[0] // 8], "little") for l in range(lanes)]
    packed = _atomic_data(rng, e, atomic[0], atomic[2], olds)
    data = [[(d >> (32 * k)) & R.M32 for d in packed] for k in range(4)]
  v = {0: index, 1: voff, **{4 + k: data[k] for k in range(4)}, **{8 + k: [FILL & R.M32] * lanes for k in range(4)}}
  fmt_bits = 16 if shape and shape[1] else 32
  fmt_name, fmt_field = BUF_FORMATS[arch][fmt_bits]
  typed = name.startswith("tbuffer")   # MTBUF (gfx12: in the one VBUFFER encoding): the instruction's format, not the V#'s
  dword3 = BUF_FORMATS[arch][32][1] if typed else fmt_field
  s = {4: VMEM_BASE & R.M32, 5: (VMEM_BASE >> 32) | (BUF_STRIDE << 16), 6: num_records, 7: dword3, 9: BUF_SOFFSET}
  addr = lambda l: BUF_SOFFSET + BUF_IOFFSET + voff[l] + index[l] * BUF_STRIDE   # byte offset from V#.base
  inside = lambda l: index[l] < num_records
  tail = "s[4:7], s9" + (f" format:[{fmt_name}]" if typed else "") + f" idxen offen offset:{BUF_IOFFSET}"
  want_regs, nregs = None, 0
  if atomic:
    bits, fn, mult = atomic
    nbytes, nregs = bits // 8, bits // 32
    for k in range(4): v[8 + k] = data[k]   # MUBUF atomics take their data from the registers they return into
    text = f"{name} {_vrange(8, bits * mult)}, v[0:1], {tail}{RETURN_BIT[arch]}"
    want_regs = []
    for l in range(lanes):
      a = addr(l)
      old = int.from_bytes(ref[a:a + nbytes], "little")
      ref[a:a + nbytes] = (fn(old, sum(data[k][l] << (32 * k) for k in range(4)) & ((1 << (bits * mult)) - 1)) & ((1 << bits) - 1)).to_bytes(nbytes, "little")
      want_regs.append(old)
  elif access:
    kind, bits, signed, half = access
    nregs = max(1, bits // 32)
    if kind == "load":
      text = f"{name} {_vrange(8, bits)}, v[0:1], {tail}"
      want_regs = [R.vmem_loaded(FILL & R.M32, int.from_bytes(ref[addr(l):addr(l) + max(bits, 8) // 8], "little") if inside(l) else 0,
                                 bits, signed, half) for l in range(lanes)]
    else:
      text = f"{name} {_vrange(4, bits)}, v[0:1], {tail}"
      for l in range(lanes):
        if inside(l):
          x = _stored(data, l, bits, half)
          ref[addr(l):addr(l) + max(bits, 8) // 8] = x.to_bytes(max(bits, 8) // 8, "little")
  else:
    load, d16, hi, n = shape
    cb = fmt_bits // 8   # bytes per component of the format (4 components)
    nregs = (n + 1) // 2 if d16 and not hi else 1 if d16 else n
    vdata = 8 if load else 4
    text = f"{name} {_vrange(vdata, 32 * nregs)}, v[0:1], {tail}"
    def slot(c):   # (VGPR, shift, width) that component c uses
      if not d16: return c, 0, 32
      return (0, 16, 16) if hi else (c // 2, 16 * (c & 1), 16)
    if load:
      want_regs = []
      for l in range(lanes):
        regs = [FILL & R.M32] * nregs
        for c in range(n):
          x = int.from_bytes(ref[addr(l) + cb * c:addr(l) + cb * (c + 1)], "little") if inside(l) else 0
          r, sh, w = slot(c)
          regs[r] = (regs[r] & ~(((1 << w) - 1) << sh) & R.M32) | ((x & ((1 << w) - 1)) << sh)
        want_regs.append(sum(x << (32 * k) for k, x in enumerate(regs)))
    else:
      for l in range(lanes):
        if not inside(l): continue
        for c in range(4):   # components the instruction does not name are written as 0 (the format has 4)
          r, sh, w = slot(c)
          x = (data[r][l] >> sh) & ((1 << w) - 1) if c < n else 0
          ref[addr(l) + cb * c:addr(l) + cb * (c + 1)] = x.to_bytes(cb, "little")
  st = run_checked(arch, fmt, name, text, s=s, v=v, lanes=lanes, vgprs=16, mem=mem)
  got = buf.tobytes()
  errors = _memory_errors(got, bytes(ref), name)
  if want_regs is not None:
    for l in range(lanes):
      g = sum(int(st.v[8 + k, 0, l]) << (32 * k) for k in range(nregs))
      if g != want_regs[l]: errors.append(f"lane {l} (index {index[l]}) got {g:#x}, reference {want_regs[l]:#x}")
  assert not errors, text + "\n" + "\n".join(errors[:12])


# ---- SCRATCH: each lane's private memory as its own byte array (offset = VGPR address + instruction offset) -------------
PRIVATE = 64
SCRATCH_WIDE = {"gfx942": ("scratch_store_dwordx4", "scratch_load_dwordx4")}


def scratch_cases():
  out = []
  for arch in ARCHS:
    for opc in _isa(arch).by_op.get("SCRATCH", {}).values():
      if R.vmem_access(opc.name) and ("SCRATCH", opc.name) in implemented(arch):
        out.append(pytest.param(arch, opc.name, id=f"{arch}-SCRATCH-{opc.name}"))
  return out


@pytest.mark.parametrize("arch,name", scratch_cases())
def test_scratch_opcode(arch, name):
  """Private memory filled with 16-byte stores, the op at a per-lane address, everything read back with 16-byte loads."""
  lanes = ARCHS[arch]
  st_wide, ld_wide = SCRATCH_WIDE.get(arch, ("scratch_store_b128", "scratch_load_b128"))
  rng = np.random.default_rng(23)
  init = [[int(x) for x in rng.integers(0, 1 << 32, lanes, dtype=np.uint64)] for _ in range(PRIVATE // 4)]
  data = [[int(x) for x in rng.integers(0, 1 << 32, lanes, dtype=np.uint64)] for _ in range(4)]
  kind, bits, signed, half = R.vmem_access(name)
  voff = [4 * (l % 5) + (l % (32 // bits) * bits // 8 if bits < 32 else 0) for l in range(lanes)]   # sub-dword: every byte/half
  v = {0: voff, **{4 + k: data[k] for k in range(4)}, **{8 + k: [FILL & R.M32] * lanes for k in range(4)},
       **{20 + k: init[k] for k in range(PRIVATE // 4)}}
  code = [f"{st_wide} off, v[{20 + 4 * q}:{23 + 4 * q}], off offset:{16 * q}" for q in range(PRIVATE // 16)]
  nbytes = max(bits, 8) // 8
  model = [bytearray(b"".join(init[k][l].to_bytes(4, "little") for k in range(PRIVATE // 4))) for l in range(lanes)]
  want = None
  if kind == "load":
    code.append(f"{name} {_vrange(8, bits)}, v0, off offset:8")
    want = [R.vmem_loaded(FILL & R.M32, int.from_bytes(model[l][voff[l] + 8:voff[l] + 8 + nbytes], "little"), bits, signed, half)
            for l in range(lanes)]
  else:
    code.append(f"{name} v0, {_vrange(4, bits)}, off offset:8")
    for l in range(lanes):
      x = _stored(data, l, 8 * nbytes, half)
      model[l][voff[l] + 8:voff[l] + 8 + nbytes] = x.to_bytes(nbytes, "little")
  code += [f"{ld_wide} v[{40 + 4 * q}:{43 + 4 * q}], off, off offset:{16 * q}" for q in range(PRIVATE // 16)]
  st = run_checked(arch, "SCRATCH", name, "\n".join(code), v=v, lanes=lanes, vgprs=64, private_bytes=PRIVATE)
  errors = []
  for l in range(lanes):
    got = b"".join(int(st.v[40 + k, 0, l]).to_bytes(4, "little") for k in range(PRIVATE // 4))
    if got != bytes(model[l]): errors.append(f"lane {l} private memory {got.hex()}, reference {bytes(model[l]).hex()}")
    if want is not None:
      g = sum(int(st.v[8 + k, 0, l]) << (32 * k) for k in range(max(1, bits // 32)))
      if g != want[l]: errors.append(f"lane {l} loaded {g:#x}, reference {want[l]:#x}")
  assert not errors, code[-PRIVATE // 16 - 1] + "\n" + "\n".join(errors[:12])


# ---- program flow, waits, hints, caches: SOPP/SOPK/SOP1/SMEM and the VMEM/DS/VALU ops without a data result -------------
# No effect on a wave's registers or memory (RDNA3/RDNA4/CDNA3 ISA: waits, hints, priority, perf counters, trace data,
# cache invalidates and write-backs with nothing cached, prefetches, address-translation probes, a barrier that only
# this wave of its workgroup reaches, s_sethalt 0 / s_setkill 0): every register is as before and the next instruction runs.
NO_EFFECT = re.compile(r"^(s_nop|s_waitcnt\w*|s_wait_\w+|s_delay_alu|s_clause|s_sleep|s_setprio|s_set_inst_prefetch_distance|s_icache_inv|"
                       r"s_dcache_\w+|s_gl1_inv|s_ttracedata\w*|s_incperflevel|s_decperflevel|s_wakeup|s_version|s_singleuse_vdst|"
                       r"s_prefetch_\w+|s_buffer_prefetch_\w+|s_atc_probe\w*|s_barrier|s_barrier_signal|s_barrier_wait|s_sethalt|s_setkill|"
                       r"v_nop|v_pipeflush|ds_nop|buffer_gl[01]_inv|buffer_wbl2|buffer_inv|buffer_wbinvl1\w*|global_inv|global_wb|global_wbinv)"
                       r"(_e64|_dpp16|_dpp8|_dpp8_fi|_sdwa)?$")
# (condition on (scc, vcc, exec) the branch is taken under); the debug ones test the debugger's status bits, clear
# without a debugger attached
BRANCHES = {"s_branch": lambda scc, vcc, ex: True, "s_cbranch_scc0": lambda scc, vcc, ex: scc == 0, "s_cbranch_scc1": lambda scc, vcc, ex: scc == 1,
            "s_cbranch_vccz": lambda scc, vcc, ex: vcc == 0, "s_cbranch_vccnz": lambda scc, vcc, ex: vcc != 0,
            "s_cbranch_execz": lambda scc, vcc, ex: ex == 0, "s_cbranch_execnz": lambda scc, vcc, ex: ex != 0,
            **{f"s_cbranch_{k}": lambda scc, vcc, ex: False for k in ("cdbgsys", "cdbguser", "cdbgsys_and_user", "cdbgsys_or_user")}}
FLOW = ("s_endpgm", "s_endpgm_saved", "s_trap", "s_sendmsghalt", "s_code_end", "s_getpc_b64", "s_setpc_b64", "s_swappc_b64", "s_call_b64",
        "s_getreg_b32", "s_setreg_b32", "s_setreg_imm32_b32", "s_round_mode", "s_denorm_mode", "s_barrier_signal_isfirst")
_OPERAND_GUESSES = ("", " 0", " 0x1", " null, 0", " -1", " s[0:1], 0", " 0, s[0:1], 0", " 0, s[4:7], 0", " s[0:1], 0, null, 0", " s[4:7], 0, null, 0",
                    " s[0:1], 0x0, 0", " 0x0, s[4:7], 0x0", " instid0(VALU_DEP_1)", " s[0:1], 0, 0", " off, off", " 0, 0", " 0, null, 0")


def flow_cases():
  out = []
  for arch in ARCHS:
    for fmt, ops in _isa(arch).by_op.items():
      for opc in ops.values():
        n = opc.name
        if (NO_EFFECT.match(n) or n in BRANCHES or n in FLOW) and (fmt, n) in implemented(arch):
          out.append(pytest.param(arch, fmt, n, id=f"{arch}-{fmt}-{n}"))
  return out


def _spelling(arch: str, name: str) -> str:
  """The op with operands the assembler takes (a zero immediate, null or s[0:1] where an address goes)."""
  from hcq.asm.text import assemble
  for base in (name, name.removesuffix("_e64")):
    for tail in (" -1",) * name.startswith("s_barrier") + _OPERAND_GUESSES:   # barriers: -1 is the workgroup's
      try:
        assemble(base + tail, arch)
        return base + tail
      except Exception:
        continue
  raise AssertionError(f"no spelling of {name} found")


def _raw_dpp(arch: str, e32: str, fmt: str) -> bytes:
  """An operand-less VOP1 (v_nop, v_pipeflush) in its DPP16 / DPP8 (fi) encoding, which neither our assembler nor
  llvm-mc-19 spells: the e32 word with src0 = 0xfa (DPP16) / 0xe9 (DPP8) / 0xea (DPP8, FI=1), then the DPP word."""
  from hcq.asm.text import assemble
  word = int.from_bytes(assemble(e32, arch)[:4], "little") & ~0x1ff
  if fmt.endswith("DPP16"): return (word | 0xfa).to_bytes(4, "little") + (0xff << 24 | 0x1b << 8).to_bytes(4, "little")   # quad_perm
  sel = sum(x << (3 * i) for i, x in enumerate(DPP8_SEL))
  return (word | (0xea if fmt.endswith("FI") else 0xe9)).to_bytes(4, "little") + (sel << 8).to_bytes(4, "little")


@pytest.mark.parametrize("arch,fmt,name", flow_cases())
def test_flow_opcode(arch, fmt, name):
  from hcq.asm.emu import engine
  from hcq.asm.emu.errors import IllegalInstruction, TrapError
  from hcq.asm.emu.snippet import SNIPPET_BASE
  lanes = ARCHS[arch]
  wave64 = lanes == 64
  rng = np.random.default_rng(29)
  waves = 8
  s_init = {r: [int(x) for x in rng.integers(0, 1 << 32, waves, dtype=np.uint64)] for r in range(8, 40)}
  v_init = {r: [int(x) for x in rng.integers(0, 1 << 32, lanes, dtype=np.uint64)] for r in range(8)}
  s_init[0], s_init[1] = [VMEM_BASE & R.M32] * waves, [VMEM_BASE >> 32] * waves
  for r in range(4, 8): s_init[r] = [0] * waves
  smov = "s_mov_b64" if wave64 else "s_mov_b32"
  pair = lambda r: f"s[{r}:{r + 1}]" if wave64 else f"s{r}"
  if name in BRANCHES:
    scc = [w & 1 for w in range(waves)]
    vcc = [0 if w & 2 else 0x5 for w in range(waves)]
    ex = [0 if w & 4 else (1 << lanes) - 1 for w in range(waves)]
    s = {10: scc, 12: vcc, 13: [0] * waves, 14: [e & R.M32 for e in ex], 15: [e >> 32 for e in ex]}
    code = ["s_cmp_eq_u32 s10, 1", f"{smov} {'vcc' if wave64 else 'vcc_lo'}, {pair(12)}", f"{smov} {'exec' if wave64 else 'exec_lo'}, {pair(14)}",
            f"{name} target", "s_mov_b32 s20, 1", "target:", "s_mov_b32 s21, 1"]
    st = run_checked(arch, fmt, name, "\n".join(code), s={**s, 20: 0, 21: 0}, waves=waves, lanes=lanes, vgprs=8)
    for w in range(waves):
      taken = BRANCHES[name](scc[w], vcc[w], ex[w])
      assert (int(st.s[20, w]), int(st.s[21, w])) == (0 if taken else 1, 1), f"{name} wave {w} (scc {scc[w]}, vcc {vcc[w]:#x}, exec {ex[w]:#x}): taken {taken}"
    return
  if name in ("s_trap", "s_sendmsghalt", "s_code_end"):   # a trap with no handler / a halt; s_code_end is padding, illegal to run
    saved = engine.EXECUTED
    engine.EXECUTED = set()
    try:
      with pytest.raises(IllegalInstruction if name == "s_code_end" else TrapError):
        from hcq.asm.emu.snippet import run_snippet
        run_snippet(_spelling(arch, name) + "\ns_mov_b32 s20, 1", arch=arch, lanes=lanes, vgprs=8)
    finally:
      ran, engine.EXECUTED = engine.EXECUTED, saved if saved is None else saved | engine.EXECUTED
    if name != "s_code_end": assert (arch, fmt, name) in ran
    return
  want_s = {r: list(x) for r, x in s_init.items()}
  want_scc = [1] * waves
  mode_read = None
  if "DPP" in fmt: code = [_raw_dpp(arch, _base(name), fmt)]
  elif NO_EFFECT.match(name) or name == "s_barrier_signal_isfirst":
    code = [_spelling(arch, name)]

  elif name in ("s_endpgm", "s_endpgm_saved"):
    code = [name]
  elif name == "s_getpc_b64":   # the address of the next instruction
    code = ["s_getpc_b64 s[20:21]"]
    want_s[20], want_s[21] = [(SNIPPET_BASE + 8) & R.M32] * waves, [(SNIPPET_BASE + 8) >> 32] * waves
  elif name in ("s_setpc_b64", "s_swappc_b64", "s_call_b64"):
    # s_getpc at +4 gives +8; the jump goes to +24, over the s_mov_b32 s22 at +20; swappc/call write the return address
    add, addc = ("s_add_co_u32", "s_add_co_ci_u32") if arch == "gfx1201" else ("s_add_u32", "s_addc_u32")
    code = ["s_getpc_b64 s[20:21]", f"{add} s20, s20, 16", f"{addc} s21, s21, 0",
            {"s_setpc_b64": "s_setpc_b64 s[20:21]", "s_swappc_b64": "s_swappc_b64 s[30:31], s[20:21]", "s_call_b64": "s_call_b64 s[30:31], target"}[name],
            "s_mov_b32 s22, 1", "target:"]
    want_s[20], want_s[21] = [(SNIPPET_BASE + 24) & R.M32] * waves, [(SNIPPET_BASE + 24) >> 32] * waves
    if name != "s_setpc_b64": want_s[30], want_s[31] = [(SNIPPET_BASE + 20) & R.M32] * waves, [(SNIPPET_BASE + 20) >> 32] * waves
    want_scc = [0] * waves   # s_addc_u32's carry out
  else:   # MODE: written by s_setreg*/s_round_mode/s_denorm_mode, read back by s_getreg_b32 (snippets start at MODE 0xf0)
    setter = {"s_getreg_b32": [], "s_setreg_b32": ["s_setreg_b32 hwreg(HW_REG_MODE, 0, 4), s9"],
              "s_setreg_imm32_b32": ["s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 0x3"], "s_round_mode": ["s_round_mode 0x6"],
              "s_denorm_mode": ["s_denorm_mode 0x9"]}[name]
    code = setter + ["s_getreg_b32 s20, hwreg(HW_REG_MODE, 0, 8)"]
    mode_read = [{"s_getreg_b32": 0xf0, "s_setreg_b32": 0xf0 | (s_init[9][w] & 0xf), "s_setreg_imm32_b32": 0x30, "s_round_mode": 0xf6,
                  "s_denorm_mode": 0x90}[name] for w in range(waves)]
    want_s[20] = mode_read
  code = ["s_cmp_eq_u32 0, 0"] + code + ["s_mov_b32 s40, 0x1234"]
  if isinstance(code[1], bytes):   # machine code around a form no assembler spells
    from hcq.asm.text import assemble
    program = assemble(code[0], arch) + code[1] + assemble(code[2], arch)
    code[1] = f"{name} ({code[1].hex()})"
  else: program = "\n".join(code)
  st = run_checked(arch, fmt, name, program, s={**s_init, 40: 0}, v=v_init, waves=waves, lanes=lanes, vgprs=8, lds_bytes=64)
  ended = name in ("s_endpgm", "s_endpgm_saved")
  errors = []
  for w in range(waves):
    for r, want in want_s.items():
      if int(st.s[r, w]) != want[w]: errors.append(f"wave {w} s{r}: got {int(st.s[r, w]):#x}, reference {want[w]:#x}")
    if int(st.s[40, w]) != (0 if ended else 0x1234): errors.append(f"wave {w}: the next instruction {'ran' if ended else 'did not run'}")
    if int(st.scc[w]) != want_scc[w] and name != "s_barrier_signal_isfirst": errors.append(f"wave {w}: scc {int(st.scc[w])}, reference {want_scc[w]}")
    if _mask(st, 126, wave64) != (1 << lanes) - 1: errors.append(f"wave {w}: EXEC changed")
  if name == "s_barrier_signal_isfirst" and int(st.scc.sum()) != 1:   # the waves are one workgroup: one of them signals first
    errors.append(f"SCC set in {int(st.scc.sum())} waves, reference 1 (the first to signal)")
  for r, want in v_init.items():
    if [int(x) for x in st.v[r, 0, :lanes]] != want: errors.append(f"v{r} changed")
  assert not errors, "\n".join(code) + "\n" + "\n".join(errors[:12])


# ---- DS with two addresses, lane-id addresses, lane permutes, swizzles, append/consume -----------------------------------
# RDNA3 ISA, "LDS indexed load/store": the 2ADDR forms take two 8-bit offsets in units of the data size (x64 for STRIDE64);
# the ADDTID forms address M0[15:0] + offset + lane id * 4; permute/bpermute move data between lanes through the address
# (lane (addr + offset) / 4 of the wave); swizzle's offset selects a quad permute (bit 15) or and/or/xor lane masks.
DS_LANE_OPS = re.compile(r"^ds_(load_2addr|store_2addr|read2|write2|storexchg_2addr|wrxchg2)\w*_b(32|64)$|"
                         r"^ds_(load|store|read|write)_addtid_b32$|^ds_b?permute_b32$|^ds_swizzle_b32$|^ds_append$|^ds_consume$|^ds_condxchg32_rtn_b64$")


def ds_lane_cases():
  out = []
  for arch in ARCHS:
    for opc in _isa(arch).by_op.get("DS", {}).values():
      n = opc.name
      if DS_LANE_OPS.match(n) and ("DS", n) in implemented(arch) and not (arch == "gfx942" and ("addtid" in n or n in ("ds_append", "ds_consume"))):
        out.append(pytest.param(arch, n, id=f"{arch}-DS-{n}"))
  return out


@pytest.mark.parametrize("arch,name", ds_lane_cases())
def test_ds_lane_opcode(arch, name):
  lanes = ARCHS[arch]
  rng = np.random.default_rng(31)
  size = 32 * lanes + 1024
  lds = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
  ref = bytearray(lds)
  rand = lambda: [int(x) for x in rng.integers(0, 1 << 32, lanes, dtype=np.uint64)]
  data = [rand() for _ in range(4)]
  v = {2 + k: data[k] for k in range(4)}
  for k in range(4): v[8 + k] = [FILL & R.M32] * lanes
  m0 = R.M32
  want = None
  rd = lambda a, n: int.from_bytes(ref[a:a + n], "little")
  def wr(a, n, x): ref[a:a + n] = (x & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
  m = re.match(r"ds_(load_2addr|store_2addr|read2|write2|storexchg_2addr|wrxchg2)(_stride64|st64)?(_rtn)?_b(32|64)$", name)
  if m:
    n = int(m.group(4)) // 8
    scale = n * (64 if m.group(2) else 1)
    o0, o1 = (0, 1) if m.group(2) else (1, 3)
    addr = [n * l for l in range(lanes)] if m.group(2) else [32 * l for l in range(lanes)]
    v[0] = addr
    d0 = [data[0][l] | (data[1][l] << 32) for l in range(lanes)] if n == 8 else data[0]
    d1 = [data[2][l] | (data[3][l] << 32) for l in range(lanes)] if n == 8 else data[2]
    if n == 4: v[3] = data[2]   # data1 right after data0 for b32: v2, v3
    kind = m.group(1)
    dregs = (f"v2, v3" if n == 4 else "v[2:3], v[4:5]")
    if kind in ("load_2addr", "read2"):
      text = f"{name} {_vrange(8, 16 * n)}, v0 offset0:{o0} offset1:{o1}"
      want = [rd(addr[l] + o0 * scale, n) | (rd(addr[l] + o1 * scale, n) << (8 * n)) for l in range(lanes)]
    elif kind in ("store_2addr", "write2"):
      text = f"{name} v0, {dregs} offset0:{o0} offset1:{o1}"
      if n == 4: d1 = data[2]
      for l in range(lanes): wr(addr[l] + o0 * scale, n, d0[l]); wr(addr[l] + o1 * scale, n, d1[l])
    else:
      text = f"{name} {_vrange(8, 16 * n)}, v0, {dregs} offset0:{o0} offset1:{o1}"
      want = []
      for l in range(lanes):
        want.append(rd(addr[l] + o0 * scale, n) | (rd(addr[l] + o1 * scale, n) << (8 * n)))
        wr(addr[l] + o0 * scale, n, d0[l]); wr(addr[l] + o1 * scale, n, d1[l])
  elif "addtid" in name:
    m0 = 0x40
    if "load" in name or "read" in name:
      text = f"{name} v8 offset:16"
      want = [rd(0x40 + 16 + 4 * l, 4) for l in range(lanes)]
    else:
      text = f"{name} v2 offset:16"
      for l in range(lanes): wr(0x40 + 16 + 4 * l, 4, data[0][l])
  elif "permute" in name:
    perm = [int(x) for x in rng.permutation(lanes)]
    v[0] = [4 * p + (4 * lanes if l % 5 == 0 else 0) - 4 for l, p in enumerate(perm)]   # (addr + offset) / 4 wraps at the wave size
    text = f"{name} v8, v0, v2 offset:4"
    if name == "ds_bpermute_b32": want = [data[0][perm[l]] for l in range(lanes)]   # pull: lane l reads lane perm[l]
    else:
      want = [0] * lanes
      for l in range(lanes): want[perm[l]] = data[0][l]   # push: lane l's data goes to lane perm[l]
  elif name == "ds_swizzle_b32":
    code, want2 = [], {}
    for r, (off, fn) in enumerate([(0x8000 | 0b00011011, lambda l: (l & ~3) | (3 - (l & 3))),                       # quad perm [3,2,1,0]
                                   ((0x1 << 10) | (0x0 << 5) | 0x1f, lambda l: l ^ 1),                               # xor 1
                                   ((0x0 << 10) | (0x4 << 5) | 0x18, lambda l: (l & ~31) | ((l & 0x18) | 0x4))]):   # and 0x18, or 4
      code.append(f"ds_swizzle_b32 v{8 + r}, v2 offset:{off}")
      want2[8 + r] = [data[0][fn(l)] for l in range(lanes)]
    text = "\n".join(code)
  elif name in ("ds_append", "ds_consume"):
    m0 = 0
    text = f"{name} v8 offset:16"
    old = rd(16, 4)
    wr(16, 4, old + lanes if name == "ds_append" else old - lanes)   # by the number of active lanes (all)
    want = [old] * lanes
  else:   # ds_condxchg32_rtn_b64: each dword of data with bit 31 set stores its low 31 bits at (addr + offset) & 0xfff8 (+4)
    v[0] = [32 * l + 4 * (l & 1) for l in range(lanes)]
    text = f"{name} v[8:9], v0, v[2:3] offset:8"
    want = []
    for l in range(lanes):
      a = (v[0][l] + 8) & 0xfff8
      want.append(rd(a, 4) | (rd(a + 4, 4) << 32))
      for k in range(2):
        if data[k][l] >> 31: wr(a + 4 * k, 4, data[k][l] & 0x7fffffff)
  st = run_checked(arch, "DS", name, text, s={125: m0}, v=v, lanes=lanes, vgprs=16, lds_bytes=size, lds=bytes(lds))
  errors = _memory_errors(st.lds[:size].tobytes(), bytes(ref), name)
  wants = want2 if name == "ds_swizzle_b32" else {8: want} if want is not None else {}
  for reg, w in wants.items():
    for l in range(lanes):
      g = sum(int(st.v[reg + k, 0, l]) << (32 * k) for k in range(_nregs(name)))
      if g != w[l]: errors.append(f"v{reg} lane {l}: got {g:#x}, reference {w[l]:#x}")
  assert not errors, text + "\n" + "\n".join(errors[:12])


def _nregs(name: str) -> int:
  """VGPRs a DS lane op returns: two elements for the 2ADDR forms, a dword pair for condxchg, else one."""
  m = re.search(r"(2addr|read2|wrxchg2)\w*_b(32|64)$", name)
  if m: return 2 * int(m.group(2)) // 32
  return 2 if "condxchg" in name else 1


# ---- register-indexed moves (M0), AGPR moves, lane permutes by VGPR, literal-operand fmas, scalar transcendentals ------
# RDNA3 ISA 7.8 "indexed VALU": V_MOVRELS: VGPR[dst] = VGPR[src + M0]; V_MOVRELD: VGPR[dst + M0] = src; V_MOVRELSD: both
# indexed; V_MOVRELSD_2: VGPR[dst + M0[25:16]] = VGPR[src + M0[9:0]]; V_SWAPREL swaps those two. The SALU forms index
# SGPRs the same way. gfx942's v_accvgpr_* move between the VGPR and AGPR halves of the register file.
SPECIAL_NAMES = re.compile(r"^(s_movrel\w+|v_movrel\w+|v_swaprel_b32\w*|v_accvgpr_\w+|v_permlane64_b32\w*|v_permlanex?16_var_b32\w*|"
                           r"v_fmaak_f(16|32)\w*|v_fmamk_f(16|32)\w*|s_fmaak_f32|s_fmamk_f32|s_fmac_f(16|32)|v_s_\w+|global_(load|store)_addtid_b32|"
                           r"v_fma_mix\w*|v_cndmask_b16\w*|v_mbcnt_(lo|hi)_u32_b32_e64_dpp\w*|v_mad(_co)?_[iu]64_[iu]32|v_pk_fmac_f16\w*|"
                           r"v_mqsad_u32_u8|v_dot2_f16_f16\w*)$")
FMA_K = {"f32": 0x40490fdb, "f16": 0x4248}   # pi


def special_cases():
  out = []
  for arch in ARCHS:
    for fmt, ops in _isa(arch).by_op.items():
      for opc in ops.values():
        if SPECIAL_NAMES.match(opc.name) and (fmt, opc.name) in implemented(arch):
          out.append(pytest.param(arch, fmt, opc.name, id=f"{arch}-{fmt}-{opc.name}"))
  return out


def _relative(base: str, regs: dict, m0: int, reg: int, src: int, lane_src=lambda l: l):
  """regs (register -> per-lane or per-wave values) after an M0-indexed move from `src` to `reg` (the ISA's formulas)."""
  out = {r: list(x) for r, x in regs.items()}
  lo, hi = m0 & 0x3ff, (m0 >> 16) & 0x3ff
  if base.endswith("movrels_b32"): out[reg] = list(regs[src + m0])
  elif base.endswith("movrels_b64"): out[reg], out[reg + 1] = list(regs[src + m0]), list(regs[src + m0 + 1])
  elif base.endswith("movreld_b32"): out[reg + m0] = [regs[src][lane_src(l)] for l in range(len(regs[src]))]
  elif base.endswith("movreld_b64"): out[reg + m0], out[reg + m0 + 1] = list(regs[src]), list(regs[src + 1])
  elif base.endswith("movrelsd_b32"): out[reg + m0] = list(regs[src + m0])
  elif base.endswith("movrelsd_2_b32"): out[reg + hi] = list(regs[src + lo])
  else: out[reg + hi], out[src + lo] = list(regs[src + lo]), list(regs[reg + hi])   # swaprel
  return out


@pytest.mark.parametrize("arch,fmt,name", special_cases())
def test_special_opcode(arch, fmt, name):
  lanes = ARCHS[arch]
  rng = np.random.default_rng(37)
  base = _base(name)
  rand = lambda n: [int(x) for x in rng.integers(0, 1 << 32, n, dtype=np.uint64)]
  errors, code = [], ""
  if base.startswith(("s_movrel", "v_movrel", "v_swaprel")):
    m0 = 2 | (5 << 16) if base.endswith(("_2_b32", "swaprel_b32")) else 2
    scalar = base.startswith("s_")
    regs = {r: rand(8 if scalar else lanes) for r in range(40)}
    w64 = base.endswith("_b64")
    dst, src = (f"s[20:21]", "s[4:5]") if w64 else ("s20", "s4") if scalar else ("v20", "v4")
    code = f"{_mnemonic(fmt, name)} {dst}, {src}{_dpp_controls(fmt)}"
    want = _relative(base, regs, m0, 20, 4, lambda l: _source_lane(fmt, l))
    if scalar:
      st = run_checked(arch, fmt, name, code, s={**regs, 125: m0}, waves=8, lanes=lanes, vgprs=8)
      got = {r: [int(x) for x in st.s[r, :8]] for r in regs}
    else:
      st = run_checked(arch, fmt, name, code, s={125: m0}, v=regs, lanes=lanes, vgprs=48)
      got = {r: [int(x) for x in st.v[r, 0, :lanes]] for r in regs}
    errors = [f"{'s' if scalar else 'v'}{r}: got {[hex(x) for x in got[r][:4]]}..., reference {[hex(x) for x in want[r][:4]]}..."
              for r in regs if got[r] != want[r]]
  elif base.startswith("v_accvgpr_"):   # a[i] is v[16 + i] with 32 registers (snippets put the AGPRs in the upper half)
    regs = {r: rand(lanes) for r in range(32)}
    code = {"v_accvgpr_write_b32": "v_accvgpr_write_b32 a1, v3", "v_accvgpr_read_b32": "v_accvgpr_read_b32 v8, a5",
            "v_accvgpr_mov_b32": "v_accvgpr_mov_b32 a2, a7"}[base]
    want = dict(regs)
    want.update({"v_accvgpr_write_b32": {17: regs[3]}, "v_accvgpr_read_b32": {8: regs[21]}, "v_accvgpr_mov_b32": {18: regs[23]}}[base])
    st = run_checked(arch, fmt, name, code, v=regs, lanes=lanes, vgprs=32)
    errors = [f"v{r} differs" for r in regs if [int(x) for x in st.v[r, 0, :lanes]] != want[r]]
  elif base.startswith("v_permlane"):
    lanes = 64 if base == "v_permlane64_b32" else lanes   # v_permlane64 swaps the wave64 halves (wave32: nothing to swap)
    a, sel = rand(lanes), rand(lanes)
    code = f"{name} v8, v0{', v1' if 'var' in base else ''}"
    if base == "v_permlane64_b32": want = [a[l ^ 32] for l in range(lanes)]
    else: want = [a[((l & ~15) ^ (16 if "x16" in base else 0)) + (sel[l] & 15)] for l in range(lanes)]   # S1[3:0] picks the lane
    st = run_checked(arch, fmt, name, code, v={0: a, 1: sel, 8: [0] * lanes}, lanes=lanes, vgprs=16)
    got = [int(x) for x in st.v[8, 0, :lanes]]
    errors = [f"lane {l}: got {got[l]:#x}, reference {want[l]:#x}" for l in range(lanes) if got[l] != want[l]]
  elif base.startswith(("v_fmaak", "v_fmamk")):
    t = base[-3:]
    tuples = R.operand_tuples((t, t), lanes)
    k = FMA_K[t]
    code = f"{name} v8, v0, v2, {k:#x}" if "fmaak" in base else f"{name} v8, v0, {k:#x}, v2"
    v = {0: [x[0] for x in tuples], 2: [x[1] for x in tuples], 8: [0] * lanes}
    st = run_checked(arch, fmt, name, code, v=v, lanes=lanes, vgprs=16)
    K = R.to_value(k, t)
    for l, (x, y) in enumerate(tuples):
      a, b = R.to_value(x, t), R.to_value(y, t)
      want = R.to_bits(R.fma_exact(a, b, K, t) if "fmaak" in base else R.fma_exact(a, K, b, t), t)
      e = _check_value(int(st.v[8, 0, l]) & ((1 << R.WIDTH[t]) - 1), want, t, f"lane {l} sources {x:#x} {y:#x}")
      if e: errors.append(e)
  elif base.startswith("s_fma"):
    t = "f16" if base.endswith("f16") else "f32"
    tuples = R.operand_tuples((t, t, t), 64)
    waves = len(tuples)
    k = FMA_K["f32"]
    code = {"s_fmaak_f32": f"s_fmaak_f32 s8, s0, s1, {k:#x}", "s_fmamk_f32": f"s_fmamk_f32 s8, s0, {k:#x}, s1"}.get(base, f"{base} s8, s0, s1")
    st = run_checked(arch, fmt, name, code, s={0: [x[0] for x in tuples], 1: [x[1] for x in tuples], 8: [x[2] for x in tuples]},
                     waves=waves, lanes=32, vgprs=1)
    K = R.to_value(k, "f32")
    for w, (x, y, z) in enumerate(tuples):
      a, b, c = (R.to_value(q, t) for q in (x, y, z))
      r = R.fma_exact(a, b, K, t) if "fmaak" in base else R.fma_exact(a, K, b, t) if "fmamk" in base else R.fma_exact(a, b, c, t)
      e = _check_value(int(st.s[8, w]) & ((1 << R.WIDTH[t]) - 1), R.to_bits(r, t), t, f"wave {w} sources {x:#x} {y:#x} {z:#x}")
      if e: errors.append(e)
  elif base.startswith("v_s_"):   # gfx12's scalar transcendentals: the VALU op on one SGPR value, into an SGPR
    op = "v_" + base[4:]
    dt, _, fn = R.VALU_OPS[op]
    vals = R.edges(dt)
    st = run_checked(arch, fmt, name, f"{name} s8, s0", s={0: vals, 8: [0] * len(vals)}, waves=len(vals), lanes=32, vgprs=1)
    for w, x in enumerate(vals):
      e = _check_value(int(st.s[8, w]) & ((1 << R.WIDTH[dt]) - 1), R.to_bits(fn(R.to_value(x, dt)), dt), dt, f"wave {w} source {x:#x}",
                       R.ULP_BOUND[op], op not in R.DOMAIN)
      if e: errors.append(e)
  elif base.startswith("v_fma_mix"):
    # V_FMA_MIX*: each source is f32, or (op_sel_hi[i] = 1) the f16 in the half op_sel[i] picks; one fused multiply-add,
    # rounded once to f32 (mix_f32) or to f16 into the low (mixlo) / high (mixhi) half, the other half kept
    halves = R.operand_tuples(("f16",) * 6, lanes)
    f32s = R.operand_tuples(("f32",) * 3, lanes, 3)
    sel, sel_hi = ([1, 0, 1], [1, 1, 0]) if fmt == "VOP3P" else ([0, 1, 0], [1, 0, 1])
    regs = [[(h[2 * i] | (h[2 * i + 1] << 16)) if sel_hi[i] else f[i] for h, f in zip(halves, f32s)] for i in range(3)]
    old = [FILL & R.M32] * lanes
    code = f"{_mnemonic(fmt, name)} v8, v0, v1, v2 op_sel:[{','.join(map(str, sel))}] op_sel_hi:[{','.join(map(str, sel_hi))}]{_dpp_controls(fmt)}"
    ex = (1 << lanes) - 1
    src0 = _lanes_in(regs[0], fmt, ex, lanes, True) if "DPP" in fmt else regs[0]
    st = run_checked(arch, fmt, name, code, v={0: regs[0], 1: regs[1], 2: regs[2], 8: old}, lanes=lanes, vgprs=16)
    out_t = "f32" if base.endswith("f32") else "f16"
    for l in range(lanes):
      vals = [R.to_value((r >> (16 * sel[i])) & R.M16, "f16").astype(np.float32) if sel_hi[i] else R.to_value(r, "f32")
              for i, r in enumerate((src0[l], regs[1][l], regs[2][l]))]
      r = R.fma_exact(*[np.float64(x) for x in vals], out_t)
      want = R.to_bits(r, "f32") if out_t == "f32" else (old[l] & 0xffff0000) | R.to_bits(r, "f16") if base.endswith("mixlo_f16") \
        else (old[l] & R.M16) | (R.to_bits(r, "f16") << 16)
      e = _check_value(int(st.v[8, 0, l]), want, "f32" if out_t == "f32" else "f16", f"lane {l} sources {[hex(x) for x in (src0[l], regs[1][l], regs[2][l])]}")
      if e: errors.append(e)
  elif base.startswith(("v_cndmask_b16", "v_mbcnt")):
    a, b = rand(lanes), rand(lanes)
    mask = 0x3c5a96f0c3a5690f & ((1 << lanes) - 1)
    old = [FILL & R.M32] * lanes
    src0 = [a[_source_lane(fmt, l)] for l in range(lanes)]
    if base.startswith("v_cndmask"):   # D.u16 = VCC-like mask bit ? S1.u16 : S0.u16 (the high half kept)
      code = f"{_mnemonic(fmt, name)} v8, v0, v1, {'s[12:13]' if lanes == 64 else 's12'}{_dpp_controls(fmt)}"
      want = [(old[l] & 0xffff0000) | ((b[l] if (mask >> l) & 1 else src0[l]) & R.M16) for l in range(lanes)]
    else:   # MBCNT: the set bits of S0 below this lane (lo: lanes 0-31, hi: lanes 32-63), plus S1
      code = f"{_mnemonic(fmt, name)} v8, v0, v1{_dpp_controls(fmt)}"
      below = lambda l: ((1 << l) - 1) & R.M32 if "lo" in base else (((1 << l) - 1) >> 32) & R.M32
      want = [(bin(src0[l] & below(l)).count("1") + b[l]) & R.M32 for l in range(lanes)]
    st = run_checked(arch, fmt, name, code, s={12: mask & R.M32, 13: mask >> 32}, v={0: a, 1: b, 8: old}, lanes=lanes, vgprs=16)
    errors = [f"lane {l}: got {int(st.v[8, 0, l]):#x}, reference {want[l]:#x}" for l in range(lanes) if int(st.v[8, 0, l]) != want[l]]
  elif base.startswith("v_mad"):
    # V_MAD_U64_U32 / V_MAD_I64_I32: {carry, D.u64} = 65-bit S0 * S1 + S2 (zero- or sign-extended); the carry is bit 64
    signed = "_i64_" in base
    tuples = R.operand_tuples(("u32", "u32", "u64"), lanes)
    sd = "s[12:13]" if lanes == 64 else "s12"
    code = f"{name} v[8:9], {sd}, v0, v1, v[2:3]"
    v = {0: [t[0] for t in tuples], 1: [t[1] for t in tuples], 2: [t[2] & R.M32 for t in tuples], 3: [t[2] >> 32 for t in tuples]}
    st = run_checked(arch, fmt, name, code, v=v, lanes=lanes, vgprs=16)
    carry = 0
    for l, (x, y, z) in enumerate(tuples):
      r = (R.sx(x, 32) * R.sx(y, 32) + R.sx(z, 64)) if signed else x * y + z
      r &= (1 << 65) - 1
      carry |= (r >> 64) << l
      got = int(st.v[8, 0, l]) | (int(st.v[9, 0, l]) << 32)
      if got != r & R.M64: errors.append(f"lane {l} sources {x:#x} {y:#x} {z:#x}: got {got:#x}, reference {r & R.M64:#x}")
    if _mask(st, 12, lanes == 64) != carry: errors.append(f"carry mask {_mask(st, 12, lanes == 64):#x}, reference {carry:#x}")
  elif base == "v_dot2_f16_f16":
    # RDNA3 V_DOT2_F16_F16 (emu_reference.dot2_f16_f16) on operands where every rounding reading agrees; OPSEL[2] picks
    # S2's half, OPSEL[3] the half of D written (the other kept): chunk 0 the low halves, chunk 1 the high ones
    tuples = R.dot2_operands(2 * lanes, acc="f16")
    code, v, expect = [], {}, []
    for j in range(2):
      chunk = tuples[j * lanes:(j + 1) * lanes]
      v[3 * j], v[3 * j + 1] = [t[0] for t in chunk], [t[1] for t in chunk]
      v[3 * j + 2] = [(t[2] << 16 | 0x5a5a) if j else (0xa5a50000 | t[2]) for t in chunk]   # a stray other half
      v[8 + j] = [FILL & R.M32] * lanes
      code.append(f"{_mnemonic(fmt, name)} v{8 + j}, v{3 * j}, v{3 * j + 1}, v{3 * j + 2}{' op_sel:[0,0,1,1]' if j else ''}{_dpp_controls(fmt)}")
      want = []
      for l, (a, b, c) in enumerate(chunk):
        r = R.to_bits(R.dot2_f16_f16(chunk[_source_lane(fmt, l)][0], b, R.to_value(c, "f16")), "f16")
        want.append((FILL & 0xffff) | (r << 16) if j else (FILL & 0xffff0000) | r)
      expect.append((8 + j, want, chunk))
    st = run_checked(arch, fmt, name, "\n".join(code), v=v, lanes=lanes, vgprs=16)
    for reg, want, chunk in expect:
      for l in range(lanes):
        e = _check_value(int(st.v[reg, 0, l]), want[l], "f16", f"{code[reg - 8]}: lane {l} sources {[hex(x) for x in chunk[l]]}")
        if e: errors.append(e)
  elif base == "v_mqsad_u32_u8":
    # RDNA3 ISA V_MQSAD_U32_U8: D[32k+31:32k] = 32'B(v_msad_u8(S0[8k+31:8k], S1, S2[32k+31:32k])), k = 0..3 (128-bit D, S2)
    tuples = R.operand_tuples(("u64", "u32", "u64", "u64"), lanes)
    words = lambda i, n: [[(t[i] >> (32 * k)) & R.M32 for t in tuples] for k in range(n)]
    v = dict(zip((0, 1), words(0, 2))) | {2: [t[1] for t in tuples]} | dict(zip((4, 5, 6, 7), words(2, 2) + words(3, 2)))
    st = run_checked(arch, fmt, name, f"{name} v[8:11], v[0:1], v2, v[4:7]", v=v, lanes=lanes, vgprs=16)
    for l, (s0, s1, s2lo, s2hi) in enumerate(tuples):
      acc = s2lo | (s2hi << 64)
      want = [R._sad_u8(s0 >> (8 * k), s1, (acc >> (32 * k)) & R.M32, True) & R.M32 for k in range(4)]
      got = [int(st.v[8 + k, 0, l]) for k in range(4)]
      if got != want: errors.append(f"lane {l} sources {s0:#x} {s1:#x} {acc:#x}: got {[hex(x) for x in got]}, reference {[hex(x) for x in want]}")
  elif base.startswith("v_pk_fmac_f16"):   # each f16 half: D = fma(S0, S1, D), rounded once
    halves = R.operand_tuples(("f16",) * 6, lanes)
    regs = [[h[2 * i] | (h[2 * i + 1] << 16) for h in halves] for i in range(3)]
    code = f"{_mnemonic(fmt, name)} v8, v0, v1{_dpp_controls(fmt)}"
    src0 = [regs[0][_source_lane(fmt, l)] for l in range(lanes)]
    st = run_checked(arch, fmt, name, code, v={0: regs[0], 1: regs[1], 8: regs[2]}, lanes=lanes, vgprs=16)
    for l in range(lanes):
      want = sum(R.to_bits(R.fma_exact(*[R.to_value((r >> k) & R.M16, "f16") for r in (src0[l], regs[1][l], regs[2][l])], "f16"), "f16") << k
                 for k in (0, 16))
      e = _check_value(int(st.v[8, 0, l]), want, "f16", f"lane {l}")
      if e: errors.append(e)
  else:   # global_load/store_addtid_b32: SGPR base + offset + lane id * 4, no VGPR address
    from hcq.asm.emu.memory import VirtualMemory
    size = 4 * lanes + 64
    buf = rng.integers(0, 256, size, dtype=np.uint8)
    ref = bytearray(buf.tobytes())
    mem = VirtualMemory()
    mem.map(VMEM_BASE, size, buf)
    data = rand(lanes)
    load = "load" in base
    code = f"{name} v8, s[0:1] offset:16" if load else f"{name} v2, s[0:1] offset:16"
    if not load:
      for l in range(lanes): ref[16 + 4 * l:20 + 4 * l] = data[l].to_bytes(4, "little")
    st = run_checked(arch, fmt, name, code, s={0: VMEM_BASE & R.M32, 1: VMEM_BASE >> 32}, v={2: data, 8: [0] * lanes}, lanes=lanes, vgprs=16, mem=mem)
    errors = _memory_errors(buf.tobytes(), bytes(ref), name)
    if load: errors += [f"lane {l}" for l in range(lanes) if int(st.v[8, 0, l]) != int.from_bytes(ref[16 + 4 * l:20 + 4 * l], "little")]
  assert not errors, f"{code}\n" + "\n".join(errors[:12])
