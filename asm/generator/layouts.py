"""Encoding formats: names, sizes, fixed bits, field positions and field kinds (public facts from the RDNA3 ISA
guide and LLVM's instruction-format definitions). Opcodes and operand shapes are not here: the prober derives them."""
from __future__ import annotations

# Field kinds: op (opcode), vgpr (8-bit VGPR), src (9-bit VGPR/SGPR/constant), ssrc (8-bit SGPR/constant),
# sdst (7-bit SGPR), sbase (SGPR pair index), srsrc (SGPR quad index), simm16, imm (plain number), bit (1-bit flag), mod (VOP modifier bits),
# vdsty (VOPD's second destination), unused (bits no field names).
Layout = tuple[int, tuple[tuple[int, int, int], ...], tuple[tuple[str, int, int, str], ...], tuple[dict[str, int], ...]]


def layout(size: int, fixed: dict[tuple[int, int], int], fields: dict[str, tuple[int, int, str]], *bases: dict[str, int]) -> Layout:
  """(size in bytes, ((hi, lo, value) fixed), ((field, hi, lo, kind)), probe base words as field values).

  The opcode sweep tries the base words in order: an opcode is probed from the first one llvm-mc decodes.
  Bits no field names become 'unused' fields, so that probing finds whether llvm-mc requires them to be zero."""
  taken = set()
  for (hi, lo) in fixed: taken.update(range(lo, hi + 1))
  for hi, lo, _ in fields.values(): taken.update(range(lo, hi + 1))
  runs, bit = {}, 0
  while bit < size * 8:
    if bit in taken: bit += 1; continue
    lo = bit
    while bit < size * 8 and bit not in taken: bit += 1
    runs[f"unused{bit - 1}_{lo}"] = (bit - 1, lo, "unused")
  fields = {**fields, **runs}
  return (size, tuple((hi, lo, v) for (hi, lo), v in fixed.items()), tuple((f, hi, lo, k) for f, (hi, lo, k) in fields.items()), bases or ({},))


_VOP3_TAIL = {"src0": (40, 32, "src"), "src1": (49, 41, "src"), "src2": (58, 50, "src"), "omod": (60, 59, "mod"), "neg": (63, 61, "mod")}
_FLAT = {"op": (24, 18, "op"), "slc": (15, 15, "bit"), "glc": (14, 14, "bit"), "dlc": (13, 13, "bit"), "offset": (12, 0, "imm"),
         "addr": (39, 32, "vgpr"), "data": (47, 40, "vgpr"), "saddr": (54, 48, "sdst"), "sve": (55, 55, "bit"), "vdst": (63, 56, "vgpr")}

# the all-zero word is v_illegal, so VOP probes read v0 (256) in their 9-bit sources
_VGPR_SRC = {"src0": 256, "src1": 256, "src2": 256}
_VOP3_BASES = (_VGPR_SRC, {"src0": 256, "src1": 256}, {"src0": 256}, {})  # fewer sources: unused ones must read 0

# MUBUF/MTBUF second dword: srsrc is an SGPR quad index, soffset an 8-bit scalar source
_BUF = {"vaddr": (39, 32, "vgpr"), "vdata": (47, 40, "vgpr"), "srsrc": (52, 48, "srsrc"), "tfe": (53, 53, "bit"), "offen": (54, 54, "bit"),
        "idxen": (55, 55, "bit"), "soffset": (63, 56, "ssrc")}

# Bit numbers count over the whole instruction (bit 32 is bit 0 of the second dword).
GFX11: dict[str, Layout] = {
  "SOP1": layout(4, {(31, 23): 0b101111101}, {"sdst": (22, 16, "sdst"), "op": (15, 8, "op"), "ssrc0": (7, 0, "ssrc")}),
  "SOPC": layout(4, {(31, 23): 0b101111110}, {"op": (22, 16, "op"), "ssrc1": (15, 8, "ssrc"), "ssrc0": (7, 0, "ssrc")}),
  "SOPP": layout(4, {(31, 23): 0b101111111}, {"op": (22, 16, "op"), "simm16": (15, 0, "simm16")}),
  "SOPK": layout(4, {(31, 28): 0b1011}, {"op": (27, 23, "op"), "sdst": (22, 16, "sdst"), "simm16": (15, 0, "simm16")}),
  "SOP2": layout(4, {(31, 30): 0b10}, {"op": (29, 23, "op"), "sdst": (22, 16, "sdst"), "ssrc1": (15, 8, "ssrc"), "ssrc0": (7, 0, "ssrc")}),
  "SMEM": layout(8, {(31, 26): 0b111101}, {"op": (25, 18, "op"), "glc": (14, 14, "bit"), "dlc": (13, 13, "bit"), "sdata": (12, 6, "sdst"),
                                           "sbase": (5, 0, "sbase"), "soffset": (63, 57, "sdst"), "offset": (52, 32, "imm")}, {"soffset": 124}),
  "VOP1": layout(4, {(31, 25): 0b0111111}, {"vdst": (24, 17, "vgpr"), "op": (16, 9, "op"), "src0": (8, 0, "src")}, _VGPR_SRC),
  "VOPC": layout(4, {(31, 25): 0b0111110}, {"op": (24, 17, "op"), "vsrc1": (16, 9, "vgpr"), "src0": (8, 0, "src")}, _VGPR_SRC),
  "VOP2": layout(4, {(31, 31): 0}, {"op": (30, 25, "op"), "vdst": (24, 17, "vgpr"), "vsrc1": (16, 9, "vgpr"), "src0": (8, 0, "src")}, _VGPR_SRC),
  "VOP3": layout(8, {(31, 26): 0b110101}, {"op": (25, 16, "op"), "clamp": (15, 15, "mod"), "opsel": (14, 11, "mod"), "abs": (10, 8, "mod"),
                                           "vdst": (7, 0, "vgpr"), **_VOP3_TAIL}, *_VOP3_BASES),
  "VOP3SD": layout(8, {(31, 26): 0b110101}, {"op": (25, 16, "op"), "clamp": (15, 15, "mod"), "sdst": (14, 8, "sdst"), "vdst": (7, 0, "vgpr"),
                                             **_VOP3_TAIL}, *_VOP3_BASES),
  "VOP3P": layout(8, {(31, 24): 0b11001100}, {"op": (22, 16, "op"), "clamp": (15, 15, "mod"), "opsel_hi2": (14, 14, "mod"), "opsel": (13, 11, "mod"),
                                              "neg_hi": (10, 8, "mod"), "vdst": (7, 0, "vgpr"), "src0": (40, 32, "src"), "src1": (49, 41, "src"),
                                              "src2": (58, 50, "src"), "opsel_hi": (60, 59, "mod"), "neg": (63, 61, "mod")}, *({**b, "opsel_hi": 3, "opsel_hi2": 1} for b in _VOP3_BASES)),
  "DS": layout(8, {(31, 26): 0b110110}, {"op": (25, 18, "op"), "gds": (17, 17, "bit"), "offset1": (15, 8, "imm"), "offset0": (7, 0, "imm"),
                                         "addr": (39, 32, "vgpr"), "data0": (47, 40, "vgpr"), "data1": (55, 48, "vgpr"), "vdst": (63, 56, "vgpr")},
               {}, {"gds": 1}),  # ds_add_gs_reg_rtn/ds_sub_gs_reg_rtn decode only with gds
  "FLAT": layout(8, {(31, 26): 0b110111, (17, 16): 0}, _FLAT, {"saddr": 124}),
  "SCRATCH": layout(8, {(31, 26): 0b110111, (17, 16): 1}, _FLAT, {"saddr": 124}),
  "GLOBAL": layout(8, {(31, 26): 0b110111, (17, 16): 2}, _FLAT, {"saddr": 124}),
  # VOPD: two opcodes (opx 25:22, opy 21:17) read as one 9-bit op; vdsty holds vdst_y >> 1 (its low bit is the
  # opposite of vdst_x's)
  "VOPD": layout(8, {(31, 26): 0b110010}, {"op": (25, 17, "op"), "vsrc1x": (16, 9, "vgpr"), "src0x": (8, 0, "src"),
                                          "vdstx": (63, 56, "vgpr"), "vdsty": (55, 49, "vdsty"), "vsrc1y": (48, 41, "vgpr"),
                                          "src0y": (40, 32, "src")}, {"src0x": 256, "src0y": 256}),
  "VINTERP": layout(8, {(31, 24): 0b11001101}, {"op": (22, 16, "op"), "clamp": (15, 15, "mod"), "opsel": (14, 11, "mod"),
                                               "waitexp": (10, 8, "imm"), "vdst": (7, 0, "vgpr"), "src0": (40, 32, "src"),
                                               "src1": (49, 41, "src"), "src2": (58, 50, "src"), "neg": (63, 61, "mod")}, _VGPR_SRC),
  "LDSDIR": layout(4, {(31, 24): 0b11001110}, {"op": (21, 20, "op"), "waitvdst": (19, 16, "imm"), "attr": (15, 10, "imm"),
                                              "attrchan": (9, 8, "imm"), "vdst": (7, 0, "vgpr")}),
  "EXP": layout(8, {(31, 26): 0b111110}, {"en": (3, 0, "mod"), "target": (9, 4, "imm"), "done": (11, 11, "bit"), "row": (13, 13, "bit"),
                                          "vsrc0": (39, 32, "vgpr"), "vsrc1": (47, 40, "vgpr"), "vsrc2": (55, 48, "vgpr"),
                                          "vsrc3": (63, 56, "vgpr")}, {"en": 15}),
  "MUBUF": layout(8, {(31, 26): 0b111000}, {"op": (25, 18, "op"), "lds": (16, 16, "bit"), "glc": (14, 14, "bit"), "dlc": (13, 13, "bit"),
                                            "slc": (12, 12, "bit"), "offset": (11, 0, "imm"), **_BUF}, {"soffset": 124, "offen": 1}, {}),
  "MTBUF": layout(8, {(31, 26): 0b111010}, {"format": (25, 19, "imm"), "op": (18, 15, "op"), "glc": (14, 14, "bit"), "dlc": (13, 13, "bit"),
                                            "slc": (12, 12, "bit"), "offset": (11, 0, "imm"), **_BUF}, {"soffset": 124, "offen": 1, "format": 1}),
}

# MIMG: vdata's width follows dmask/d16/tfe/lwe and vaddr's follows dim/a16 per opcode (the prober tabulates both);
# bit 0 set is the NSA form, whose third dword holds four more address VGPRs
_MIMG = {"dim": (4, 2, "imm"), "unorm": (7, 7, "bit"), "dmask": (11, 8, "imm"), "slc": (12, 12, "bit"), "dlc": (13, 13, "bit"),
         "glc": (14, 14, "bit"), "r128": (15, 15, "bit"), "a16": (16, 16, "bit"), "d16": (17, 17, "bit"), "op": (25, 18, "op"),
         "vaddr": (39, 32, "vgpr"), "vdata": (47, 40, "vgpr"), "srsrc": (52, 48, "srsrc"), "tfe": (53, 53, "bit"), "lwe": (54, 54, "bit"),
         "ssamp": (62, 58, "srsrc")}
_MIMG_BASES = ({"dmask": 1}, {"dmask": 15, "unorm": 1}, {"dmask": 15})  # image_bvh_* want dmask 0xf and unorm
GFX11["MIMG"] = layout(8, {(31, 26): 0b111100, (0, 0): 0}, _MIMG, *_MIMG_BASES)
GFX11["MIMG_NSA"] = layout(12, {(31, 26): 0b111100, (0, 0): 1},
                           {**_MIMG, "vaddr1": (71, 64, "vgpr"), "vaddr2": (79, 72, "vgpr"), "vaddr3": (87, 80, "vgpr"), "vaddr4": (95, 88, "vgpr")},
                           *({**b, "dim": 1} for b in _MIMG_BASES))


def _dpp(name: str, base: Layout) -> dict[str, Layout]:
  """DPP forms of a 32-bit VOP encoding: src0 (bits 8:0) holds 250 (DPP16) or 233/234 (DPP8, DPP8 with fi:1) and a
  second dword carries the real src0 and the lane controls."""
  size, fixed, fields, _ = base
  word0 = {f: (hi, lo, k) for f, hi, lo, k in fields if f != "src0" and k != "unused"}
  fixed0 = {(hi, lo): v for hi, lo, v in fixed}
  dpp16 = {"src0": (39, 32, "vgpr"), "dpp_ctrl": (48, 40, "imm"), "fi": (50, 50, "bit"), "bound_ctrl": (51, 51, "bit"),
           "neg0": (52, 52, "mod"), "abs0": (53, 53, "mod"), "neg1": (54, 54, "mod"), "abs1": (55, 55, "mod"),
           "bank_mask": (59, 56, "imm"), "row_mask": (63, 60, "imm")}
  dpp8 = {"src0": (39, 32, "vgpr"), "dpp8": (63, 40, "imm")}
  return {f"{name}_DPP16": layout(8, {**fixed0, (8, 0): 250}, {**word0, **dpp16}, {"row_mask": 15, "bank_mask": 15}),
          f"{name}_DPP8": layout(8, {**fixed0, (8, 0): 233}, {**word0, **dpp8}),
          f"{name}_DPP8FI": layout(8, {**fixed0, (8, 0): 234}, {**word0, **dpp8})}


for _name in ("VOP1", "VOP2", "VOPC"): GFX11.update(_dpp(_name, GFX11[_name]))


def _dpp3(name: str, base: Layout) -> dict[str, Layout]:
  """DPP forms of a 64-bit VOP3/VOP3SD/VOP3P encoding (`_e64_dpp`): its src0 (bits 40:32) holds 250 (DPP16) or
  233/234 (DPP8, DPP8 with fi:1) and a third dword carries the real src0 (a VGPR) and the lane controls; neg/abs stay
  in the VOP3 fields."""
  size, fixed, fields, bases = base
  kept = {f: (hi, lo, k) for f, hi, lo, k in fields if f != "src0" and k != "unused"}
  fixed0 = {(hi, lo): v for hi, lo, v in fixed}
  dpp16 = {"src0": (71, 64, "vgpr"), "dpp_ctrl": (80, 72, "imm"), "fi": (82, 82, "bit"), "bound_ctrl": (83, 83, "bit"),
           "bank_mask": (91, 88, "imm"), "row_mask": (95, 92, "imm")}
  dpp8 = {"src0": (71, 64, "vgpr"), "dpp8": (95, 72, "imm")}
  rest = [{f: v for f, v in b.items() if f != "src0"} for b in bases]
  return {f"{name}_DPP16": layout(12, {**fixed0, (40, 32): 250}, {**kept, **dpp16}, *({**b, "row_mask": 15, "bank_mask": 15} for b in rest)),
          f"{name}_DPP8": layout(12, {**fixed0, (40, 32): 233}, {**kept, **dpp8}, *rest),
          f"{name}_DPP8FI": layout(12, {**fixed0, (40, 32): 234}, {**kept, **dpp8}, *rest)}


for _name in ("VOP3", "VOP3SD", "VOP3P"): GFX11.update(_dpp3(_name, GFX11[_name]))

# Formats that share their fixed bits: the prober assigns each opcode to the one its probes fit.
ALTERNATIVES = {"VOP3SD": "VOP3", **{f"VOP3SD_{d}": f"VOP3_{d}" for d in ("DPP16", "DPP8", "DPP8FI")}, "VOP3P_MAI": "VOP3P"}

# RDNA4 keeps RDNA3's SALU, VALU and DS encodings; SMEM moved its fields (cache policy th/scope, 24-bit offset)
GFX12: dict[str, Layout] = {name: GFX11[name] for name in GFX11 if name.startswith(("SOP", "VOP")) or name == "DS"}
GFX12["SMEM"] = layout(8, {(31, 26): 0b111101}, {"th": (24, 23, "imm"), "scope": (22, 21, "imm"), "op": (19, 13, "op"),
                                                 "sdata": (12, 6, "sdst"), "sbase": (5, 0, "sbase"), "soffset": (63, 57, "sdst"),
                                                 "offset": (55, 32, "imm")}, {"soffset": 124})
# VINTERP and export keep RDNA3's encodings (export is exp renamed); VDSDIR is LDSDIR with a wait_vm_vsrc bit
GFX12["EXP"] = GFX11["EXP"]
GFX12["VINTERP"] = layout(8, {(31, 24): 0b11001101}, {"op": (20, 16, "op"), **{f: v for f, *v in GFX11["VINTERP"][2] if f != "op" and v[2] != "unused"}},
                          _VGPR_SRC)
GFX12["LDSDIR"] = layout(4, {(31, 24): 0b11001110}, {"waitvmvsrc": (23, 23, "imm"), "op": (21, 20, "op"), "waitvdst": (19, 16, "imm"),
                                                    "attr": (15, 10, "imm"), "attrchan": (9, 8, "imm"), "vdst": (7, 0, "vgpr")})
# VFLAT/VGLOBAL/VSCRATCH: three dwords; the segment (bits 25:24) tells them apart. Field names follow RDNA3's FLAT
# (addr = vaddr, data = vsrc) so that the printer's and builder's address rules serve both. th is 3 bits, its names
# depend on the access kind (load/store/atomic) and scope; an atomic with th bit 0 set returns the old value.
_VFLAT = {"saddr": (6, 0, "sdst"), "op": (21, 14, "op"), "vdst": (39, 32, "vgpr"), "sve": (49, 49, "bit"), "scope": (51, 50, "imm"),
          "th": (54, 52, "imm"), "data": (62, 55, "vgpr"), "addr": (71, 64, "vgpr"), "offset": (95, 72, "imm")}
for _name, _seg in (("FLAT", 0), ("SCRATCH", 1), ("GLOBAL", 2)):
  GFX12[_name] = layout(12, {(31, 26): 0b111011, (25, 24): _seg}, _VFLAT, {"saddr": 124})
# VIMAGE/VSAMPLE: MIMG's successors, named MIMG_* so that the image rules (width tables) apply: every address has a
# field of its own (vaddr in bits 71:64, vaddr1..3 after it, vaddr4 in 63:56); rsrc/ssamp hold the first SGPR
_VIMG = {"dim": (2, 0, "imm"), "r128": (4, 4, "bit"), "d16": (5, 5, "bit"), "a16": (6, 6, "bit"), "op": (21, 14, "op"),
         "dmask": (25, 22, "imm"), "vdata": (39, 32, "vgpr"), "srsrc": (49, 41, "sdst"), "scope": (51, 50, "imm"), "th": (54, 52, "imm"),
         "vaddr": (71, 64, "vgpr"), "vaddr1": (79, 72, "vgpr"), "vaddr2": (87, 80, "vgpr"), "vaddr3": (95, 88, "vgpr")}
GFX12["MIMG_VIMAGE"] = layout(12, {(31, 26): 0b110100}, {**_VIMG, "tfe": (55, 55, "bit"), "vaddr4": (63, 56, "vgpr")},
                              {"dmask": 1}, {"dmask": 15}, {"dmask": 15, "r128": 1})
GFX12["MIMG_VSAMPLE"] = layout(12, {(31, 26): 0b111001}, {**_VIMG, "tfe": (3, 3, "bit"), "unorm": (13, 13, "bit"), "lwe": (40, 40, "bit"),
                                                          "ssamp": (63, 55, "sdst")}, {"dmask": 1}, {"dmask": 15})
# VBUFFER: buffer and tbuffer opcodes share one encoding (tbuffer's format in bits 61:55); srsrc holds the first SGPR
GFX12["MUBUF"] = layout(12, {(31, 26): 0b110001}, {"soffset": (6, 0, "sdst"), "op": (21, 14, "op"), "tfe": (22, 22, "bit"),
                                                   "vdata": (39, 32, "vgpr"), "srsrc": (47, 41, "sdst"), "scope": (51, 50, "imm"),
                                                   "th": (54, 52, "imm"), "format": (61, 55, "imm"), "offen": (62, 62, "bit"),
                                                   "idxen": (63, 63, "bit"), "vaddr": (71, 64, "vgpr"), "offset": (95, 72, "imm")},
                        {"soffset": 124, "offen": 1}, {})

from hcq.asm.generator.layouts_gfx9 import GFX9  # noqa: E402 - it builds on GFX11's layouts above

ARCHS: dict[str, dict[str, Layout]] = {"gfx1100": GFX11, "gfx1201": GFX12, "gfx942": GFX9}
