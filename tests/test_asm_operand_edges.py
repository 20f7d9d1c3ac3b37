"""Operand edges against llvm-mc 19, both ways: VGPR ranges that end at v255 or run past it, every inline integer
constant and its neighbours, and the small numbers SOPP immediates print as decimals (gfx1100)."""
from __future__ import annotations

import pytest

from hcq.asm import AsmError, DecodeError, assemble, decode_all, disassemble, llvm
from tests.tools import require

ARCH = "gfx1100"
# an operand of 2 or 4 VGPRs in each position: 9-bit sources (VOP3, VOP1), 8-bit destinations (VOP3, GLOBAL), memory data
RANGES = ["v_add_f64 v[0:1], {2}, v[2:3]", "v_add_f64 v[0:1], v[2:3], {2}", "v_add_f64 {2}, v[2:3], v[4:5]",
          "v_fma_f64 v[0:1], v[2:3], v[4:5], {2}", "v_cvt_f64_f32 {2}, v1", "v_cvt_f32_f64 v0, {2}", "v_lshlrev_b64 v[0:1], 1, {2}",
          "global_load_b64 {2}, v[2:3], off", "global_store_b64 v[2:3], {2}, off", "global_load_b128 {4}, v[2:3], off",
          "global_store_b128 v[2:3], {4}, off", "global_load_b32 v1, {2}, off"]
# Measured disagreements (llvm-mc 19), held exactly so that a fix or a new one shows: our decoder takes a GLOBAL address
# pair at v255 (its 'off' form's 64-bit address), which llvm-mc rejects.
KNOWN_DECODED = {"global_load_b32 v1, v[255:256], off"}
# Integers written for sources of every width (32-bit, f16, i16, packed pairs, f64, 64-bit integers, gfx9's VOP3 f16 and
# SDWA): llvm-mc 19 reads them as 64-bit two's complement, then in the operand's width (0xffffffff is -1 in a 32-bit
# operand and in a packed pair, 0xffff -1 in an f16 one but a literal in an i16 one; 0x3ff00000 is 1.0 in an f64 operand,
# a literal in a 64-bit integer one; a bf16 source reads bf16 patterns: 0x3f00 is 0.5 there, 0x3f000000 a literal).
LITERAL_TEMPLATES = {
  "gfx1100": ["v_mov_b32 v0, {}", "s_mov_b32 s0, {}", "v_add_nc_u32 v0, {}, v1", "v_add_f32 v0, {}, v1", "s_mov_b64 s[0:1], {}",
              "v_add_f64 v[0:1], {}, v[2:3]", "v_lshlrev_b64 v[0:1], 1, {}", "v_add_nc_u16 v0, {}, v1", "v_add_f16 v0, {}, v1",
              "v_pk_add_u16 v0, {}, v1", "v_pk_add_f16 v0, {}, v1", "v_add_f16_e64 v0, {}, v1", "v_fma_f16 v0, {}, v1, v2",
              "v_mad_u16 v0, {}, v1, v2", "s_add_u32 s0, s1, {}", "v_fmac_f16 v0, {}, v1", "v_dot2_f32_f16 v0, {}, v1, v2",
              "v_pk_fmac_f16 v20, {}, v60", "v_dot2_f16_f16 v20, {}, v9, v13", "v_dot2_f16_f16 v20, v9, v9, {}", "v_dot2acc_f32_f16 v20, {}, v60"],
  "gfx942": ["v_mov_b32 v0, {}", "v_add_f32 v0, {}, v1", "v_add_f16 v0, {}, v1", "v_add_u16 v0, {}, v1", "v_pk_add_u16 v0, {}, v1",
             "v_pk_add_f16 v0, {}, v1", "v_add_f64 v[0:1], {}, v[2:3]", "s_mov_b64 s[0:1], {}", "v_add_f16_e64 v0, {}, v1",
             "v_fma_f16 v0, {}, v1, v2", "v_mad_u16 v0, {}, v1, v2", "v_add_u32 v0, {}, v1", "v_lshlrev_b64 v[0:1], 1, {}",
             "v_cvt_f32_f16_sdwa v0, {}", "v_pk_fma_f32 v[0:1], {}, v[2:3], v[4:5]", "v_pk_fmac_f16 v20, {}, v60", "v_dot2c_f32_f16 v20, {}, v60"],
  "gfx1201": ["v_mov_b32 v0, {}", "v_add_f16 v0, {}, v1", "v_add_nc_u16 v0, {}, v1", "v_pk_add_u16 v0, {}, v1", "s_mov_b64 s[0:1], {}",
              "v_add_f64 v[0:1], {}, v[2:3]", "s_add_co_u32 s0, s1, {}", "v_add_f16_e64 v0, {}, v1", "v_lshlrev_b64 v[0:1], 1, {}",
              "v_dot2_bf16_bf16 v20, {}, v9, v13", "v_dot2_f32_bf16 v20, {}, v9, v13", "v_dot2_f32_bf16 v20, v9, v9, {}"]}
LITERAL_VALUES = ["0xffffffff", "0xfffffff0", "0xffffffef", "0xffff", "0xfff0", "0xffef", "0x3c00", "0x3800", "0xffff3c00", "0x3f800000",
                  "0xbf800000", "0xffffffc0", "0x10000", "0xfffffffffffffff0", "0xffffffff00000000", "0x3ff0000000000000", "0x3ff00000",
                  "0x100000000", "-1", "-16", "-17", "0x8000", "0x80000000", "-0x8000", "-0x80000001", "0x3e22f983", "0x3118", "1.0", "0.5",
                  "0x3f00", "0x3e22"]  # bf16's 0.5 and 1/(2*pi)
# refused by us, taken by llvm-mc: gfx942 v_mad_u16's inline floats (its disassembler prints none of them there, so the
# table the generator probed has no such value for the operand); a 64-bit value for gfx940's packed f32 pair, which
# llvm-mc truncates to its low dword (0: the inline 0) without a word, and we refuse as not fitting
KNOWN_LITERAL_REFUSALS = {"gfx942": {f"v_mad_u16 v0, {n}, v1, v2" for n in ("1.0", "0.5")} | {"v_pk_fma_f32 v[0:1], 0x3ff0000000000000, v[2:3], v[4:5]"}}
INLINE = ["v_mov_b32 v0, {}", "s_mov_b32 s0, {}", "v_add_nc_u32 v0, {}, v1", "s_add_u32 s0, s1, {}", "v_add_f32 v0, {}, v1",
          "s_mov_b64 s[0:1], {}", "v_add_f64 v[0:1], {}, v[2:3]"]


@pytest.fixture(scope="module", autouse=True)
def needs_llvm_mc():
  require(llvm.available(), "llvm-mc-19")


def ours_assemble(line: str) -> bytes | None:
  try:
    return assemble(line, ARCH)
  except AsmError:
    return None


def ours_disassemble(data: bytes) -> str | None:
  try:
    return disassemble(data, ARCH)[0]
  except DecodeError:
    return None


def assembled_both_ways(lines: list[str]) -> list[tuple[str, bytes | None, bytes | None]]:
  """(line, llvm-mc's bytes or None, ours or None) for each line."""
  theirs = [b if isinstance(b, bytes) else None for b in llvm.assemble_each(lines, ARCH)]
  return [(line, t, ours_assemble(line)) for line, t in zip(lines, theirs)]


def test_vgpr_ranges_at_v255_assemble_as_llvm_mc_does():
  """v[254:255] and v[252:255] are the last ranges: both assemblers take them with the same bytes, and both refuse
  v[255:256] and v[253:256]."""
  lines = [t.replace("{2}", r2).replace("{4}", r4) for t in RANGES for r2, r4 in (("v[254:255]", "v[252:255]"), ("v[255:256]", "v[253:256]"))]
  rows = assembled_both_ways(lines)
  assert [r for r in rows if r[1] != r[2]] == [], "llvm-mc and hcq.asm differ"
  assert sum(r[1] is None for r in rows) == len(RANGES)   # every range past v255 refused, none at v255


def test_words_with_a_vgpr_range_past_v255_decode_as_llvm_mc_does():
  """Each register field of the accepted v[254:255] / v[252:255] words, moved up by one so the range runs past v255:
  llvm-mc rejects those words, and so must we; where it decodes, our text is its text."""
  words = []
  for line in (t.replace("{2}", "v[254:255]").replace("{4}", "v[252:255]") for t in RANGES):
    inst = decode_all(assemble(line, ARCH), ARCH)[0]
    for field, value in inst.values.items():
      if value in (254, 252, 256 + 254, 256 + 252):   # the range's first register, in an 8-bit or 9-bit field
        moved = decode_all(inst.encode(), ARCH)[0]
        moved.values[field] = value + 1
        words.append(moved.encode())
  assert len(words) == len(RANGES)
  theirs = llvm.disassemble_each(words, ARCH)
  rows = [(w.hex(), t.text if t else None, ours_disassemble(w)) for w, t in zip(words, theirs)]
  assert {r[2] for r in rows if r[1] != r[2]} == KNOWN_DECODED, [r for r in rows if r[1] != r[2]]


def test_inline_integer_constants_assemble_as_llvm_mc_does():
  """-16..64 are inline constants (one dword, no literal), -17 and 65 literals, in 32- and 64-bit, VALU and SALU
  operands, in decimal and hex spellings: the bytes llvm-mc gives."""
  numbers = [*range(-17, 66), "0x40", "0x41", "0xffffffff", "0xfffffff0", "-0x10", "-0x11"]
  rows = assembled_both_ways([t.format(n) for t in INLINE for n in numbers])
  assert all(r[1] is not None for r in rows), [r[0] for r in rows if r[1] is None]
  assert [r for r in rows if r[1] != r[2]] == []


@pytest.mark.parametrize("arch", sorted(LITERAL_TEMPLATES))
def test_integer_literals_read_as_llvm_mc_reads_them(arch: str):
  """Each value in each operand width: the bytes llvm-mc 19 gives, or refused by both."""
  lines = [t.format(n) for t in LITERAL_TEMPLATES[arch] for n in LITERAL_VALUES]
  bad = []
  for line, theirs in zip(lines, llvm.assemble_each(lines, arch)):
    try: ours = assemble(line, arch)
    except AsmError: ours = None
    if ours != (theirs if isinstance(theirs, bytes) else None): bad.append((line, theirs, ours))
  assert {b[0] for b in bad} == KNOWN_LITERAL_REFUSALS.get(arch, set()), bad


def test_sopp_immediates_print_as_llvm_mc_does():
  """SOPP immediates print as decimals up to 64 and hex above (s_nop 64, s_nop 0x41): llvm-mc's texts of the words."""
  words = [bytes([v & 0xff, v >> 8, op, 0xbf]) for op in (0x80, 0x83, 0x90, 0xb5) for v in (0, 1, 15, 16, 63, 64, 65, 0x100, 0xffff)]
  theirs = llvm.disassemble_each(words, ARCH)
  rows = [(w.hex(), t.text if t else None, ours_disassemble(w)) for w, t in zip(words, theirs)]
  assert all(r[1] is not None for r in rows), rows
  assert [r for r in rows if r[1] != r[2]] == [], "llvm-mc and hcq.asm differ"


# registers at the end of each file, and one past it: s105/s101 (gfx942), ttmp15, v255, a255 (gfx942)
REGISTER_ENDS = {
  "gfx1100": ["s_mov_b32 s105, s1", "s_mov_b32 s106, s1", "s_mov_b32 s1, s106", "s_mov_b64 s[104:105], s[0:1]", "s_load_b64 s[106:107], s[0:1], 0",
              "s_load_b128 s[104:107], s[0:1], 0", "s_mov_b32 s1, ttmp15", "s_mov_b32 s1, ttmp16", "v_add_f32 v1, s106, v2",
              "v_add_f64 v[0:1], s[104:105], v[2:3]", "global_load_b32 v1, v[255:256], off", "v_mov_b32 v256, v1"],
  "gfx1201": ["s_mov_b32 s105, s1", "s_mov_b32 s106, s1", "s_mov_b64 s[106:107], s[0:1]", "s_mov_b32 s1, ttmp16", "global_load_b32 v1, v[255:256], off"],
  "gfx942": ["s_mov_b32 s101, s1", "s_mov_b32 s102, s1", "s_mov_b64 s[100:101], s[0:1]", "s_mov_b64 s[102:103], s[0:1]", "s_mov_b32 s106, s1",
             "s_load_dwordx4 s[100:103], s[0:1], 0", "v_accvgpr_write_b32 a255, v1", "v_accvgpr_write_b32 a256, v1",
             "global_load_dwordx2 a[255:256], v[2:3], off", "global_load_dwordx2 v[254:255], v[2:3], off"],
}


@pytest.mark.parametrize("arch", sorted(REGISTER_ENDS))
def test_registers_end_where_the_file_ends(arch: str):
  """The last register of each file assembles as llvm-mc assembles it; one past it (s106 would read as vcc_lo, ttmp16
  as null) is refused by both, at the register's column."""
  lines = REGISTER_ENDS[arch]
  bad = []
  for line, theirs in zip(lines, llvm.assemble_each(lines, arch)):
    try: ours = assemble(line, arch)
    except AsmError as e:
      ours = None
      assert line[e.column - 1:].startswith(("s", "v", "a", "t")), (line, e.column, str(e))  # the column of a register
    if ours != (theirs if isinstance(theirs, bytes) else None): bad.append((line, theirs, ours))
  assert not bad
