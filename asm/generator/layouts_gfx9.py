"""gfx942 (CDNA3) encoding formats: the GCN/Vega encodings with gfx90a's accumulation-register bits and gfx940's
cache bits (sc0/sc1/nt), from the CDNA3 ISA guide and LLVM's gfx9 format definitions. Opcodes and operand shapes
are not here: the prober derives them.

Extra field kinds: avsrc (a 9-bit source that takes VGPRs/AGPRs only: MFMA's A and B), acc (a bit that turns register operands into accumulation registers: which ones is probed),
sel (SDWA operand selects, printed by name), sdwa_src/sdwa_vsrc1 (an SDWA source whose file a separate s0/s1 bit picks)."""
from __future__ import annotations

from hcq.asm.generator.layouts import GFX11, Layout, layout

_VGPR_SRC = {"src0": 256, "src1": 256, "src2": 256}
_VOP3_BASES = (_VGPR_SRC, {"src0": 256, "src1": 256}, {"src0": 256}, {})
_VOP3_TAIL = {"src0": (40, 32, "src"), "src1": (49, 41, "src"), "src2": (58, 50, "src"), "omod": (60, 59, "mod"), "neg": (63, 61, "mod")}
# gfx940 FLAT: sc1 25, nt 17, sc0 16 (glc/slc's places), segment 15:14, lds 13 (sve on scratch), acc 55
_FLAT = {"sc1": (25, 25, "bit"), "op": (24, 18, "op"), "nt": (17, 17, "bit"), "sc0": (16, 16, "bit"), "offset": (12, 0, "imm"),
         "addr": (39, 32, "vgpr"), "data": (47, 40, "vgpr"), "saddr": (54, 48, "sdst"), "acc": (55, 55, "acc"), "vdst": (63, 56, "vgpr")}
_OFF = 0x7f  # gfx9's "off" for a global/scratch saddr
_BUF = {"vaddr": (39, 32, "vgpr"), "vdata": (47, 40, "vgpr"), "srsrc": (52, 48, "srsrc"), "acc": (55, 55, "acc"), "soffset": (63, 56, "ssrc")}

GFX9: dict[str, Layout] = {name: GFX11[name] for name in ("SOP1", "SOPC", "SOPP", "SOPK", "SOP2", "VOP1", "VOPC", "VOP2")}
GFX9.update({
  # SMEM: imm (bit 17) says the offset field is a number (else it holds the soffset SGPR); soe (14) adds soffset (63:57)
  "SMEM": layout(8, {(31, 26): 0b110000}, {"op": (25, 18, "op"), "imm": (17, 17, "smem"), "glc": (16, 16, "bit"), "soe": (14, 14, "smem"),
                                           "sdata": (12, 6, "sdst"), "sbase": (5, 0, "sbase"), "offset": (52, 32, "imm"),
                                           "soffset": (63, 57, "smem")}, {"imm": 1}, {}),
  "VOP3": layout(8, {(31, 26): 0b110100}, {"op": (25, 16, "op"), "clamp": (15, 15, "mod"), "opsel": (14, 11, "mod"), "abs": (10, 8, "mod"),
                                           "vdst": (7, 0, "vgpr"), **_VOP3_TAIL}, *_VOP3_BASES),
  "VOP3SD": layout(8, {(31, 26): 0b110100}, {"op": (25, 16, "op"), "clamp": (15, 15, "mod"), "sdst": (14, 8, "sdst"), "vdst": (7, 0, "vgpr"),
                                             **_VOP3_TAIL}, *_VOP3_BASES),
  "VOP3P": layout(8, {(31, 23): 0b110100111}, {"op": (22, 16, "op"), "clamp": (15, 15, "mod"), "opsel_hi2": (14, 14, "mod"), "opsel": (13, 11, "mod"),
                                               "neg_hi": (10, 8, "mod"), "vdst": (7, 0, "vgpr"), "src0": (40, 32, "src"), "src1": (49, 41, "src"),
                                               "src2": (58, 50, "src"), "opsel_hi": (60, 59, "mod"), "neg": (63, 61, "mod")},
                  *({**b, "opsel_hi": 3, "opsel_hi2": 1} for b in _VOP3_BASES)),
  # MFMA (VOP3P-MAI): acc_cd makes vdst and src2 AGPRs, acc0/acc1 src0/src1; cbsz/abid/blgp broadcast controls
  "VOP3P_MAI": layout(8, {(31, 23): 0b110100111}, {"op": (22, 16, "op"), "acc_cd": (15, 15, "acc"), "abid": (14, 11, "imm"), "cbsz": (10, 8, "imm"),
                                                   "vdst": (7, 0, "vgpr"), "src0": (40, 32, "avsrc"), "src1": (49, 41, "avsrc"), "src2": (58, 50, "src"),
                                                   "acc0": (59, 59, "acc"), "acc1": (60, 60, "acc"), "blgp": (63, 61, "imm")}, *_VOP3_BASES),
  "DS": layout(8, {(31, 26): 0b110110}, {"acc": (25, 25, "acc"), "op": (24, 17, "op"), "gds": (16, 16, "bit"), "offset1": (15, 8, "imm"),
                                         "offset0": (7, 0, "imm"), "addr": (39, 32, "vgpr"), "data0": (47, 40, "vgpr"), "data1": (55, 48, "vgpr"),
                                         "vdst": (63, 56, "vgpr")}),
  "FLAT": layout(8, {(31, 26): 0b110111, (15, 14): 0}, {**_FLAT, "lds": (13, 13, "bit")}),
  "SCRATCH": layout(8, {(31, 26): 0b110111, (15, 14): 1}, {**_FLAT, "sve": (13, 13, "bit")}, {"saddr": _OFF}, {"saddr": _OFF, "sve": 1}),
  "GLOBAL": layout(8, {(31, 26): 0b110111, (15, 14): 2}, {**_FLAT, "lds": (13, 13, "bit")}, {"saddr": _OFF}),
  "MUBUF": layout(8, {(31, 26): 0b111000}, {"op": (24, 18, "op"), "nt": (17, 17, "bit"), "lds": (16, 16, "bit"), "sc1": (15, 15, "bit"),
                                            "sc0": (14, 14, "bit"), "idxen": (13, 13, "bit"), "offen": (12, 12, "bit"), "offset": (11, 0, "imm"), **_BUF},
                   {"offen": 1}, {}),
  "MTBUF": layout(8, {(31, 26): 0b111010}, {"format": (25, 19, "imm"), "op": (18, 15, "op"), "sc0": (14, 14, "bit"), "idxen": (13, 13, "bit"),
                                            "offen": (12, 12, "bit"), "offset": (11, 0, "imm"), **_BUF, "sc1": (53, 53, "bit"), "nt": (54, 54, "bit")},
                   {"offen": 1, "format": 1}),
})


def _dpp(name: str, base: Layout) -> Layout:
  """gfx9 DPP of a 32-bit VOP encoding: src0 = 250, a second dword with the real src0 and the lane controls
  (no fi, no DPP8)."""
  size, fixed, fields, _ = base
  word0 = {f: (hi, lo, k) for f, hi, lo, k in fields if f != "src0" and k != "unused"}
  return layout(8, {**{(hi, lo): v for hi, lo, v in fixed}, (8, 0): 250},
                {**word0, "src0": (39, 32, "vgpr"), "dpp_ctrl": (48, 40, "imm"), "bound_ctrl": (51, 51, "bit"), "neg0": (52, 52, "mod"),
                 "abs0": (53, 53, "mod"), "neg1": (54, 54, "mod"), "abs1": (55, 55, "mod"), "bank_mask": (59, 56, "imm"),
                 "row_mask": (63, 60, "imm")}, {"row_mask": 15, "bank_mask": 15}, {"row_mask": 15, "bank_mask": 15, "dpp_ctrl": 0x151})  # v_mov_b64: row_newbcast only


def _sdwa(name: str, base: Layout) -> Layout:
  """SDWA of a 32-bit VOP encoding: src0 = 249, a second dword with the real src0 (its file chosen by s0), the
  byte/word selects, sign extension and neg/abs; VOPC's puts an optional SGPR destination where dst_sel is."""
  size, fixed, fields, _ = base
  word0 = {f: (hi, lo, k) for f, hi, lo, k in fields if f != "src0" and k != "unused"}
  if "vsrc1" in word0: word0["vsrc1"] = (16, 9, "sdwa_vsrc1")
  dst = {"sdst": (46, 40, "sdst"), "sd": (47, 47, "bit")} if name == "VOPC" else \
        {"dst_sel": (42, 40, "sel"), "dst_unused": (44, 43, "sel"), "clamp": (45, 45, "mod"), "omod": (47, 46, "mod")}
  tail = {"src0": (39, 32, "sdwa_src"), **dst, "src0_sel": (50, 48, "sel"), "sext0": (51, 51, "mod"), "neg0": (52, 52, "mod"),
          "abs0": (53, 53, "mod"), "s0": (55, 55, "sdwa_s")}
  if "vsrc1" in word0:
    tail.update({"src1_sel": (58, 56, "sel"), "sext1": (59, 59, "mod"), "neg1": (60, 60, "mod"), "abs1": (61, 61, "mod"), "s1": (63, 63, "sdwa_s")})
  return layout(8, {**{(hi, lo): v for hi, lo, v in fixed}, (8, 0): 249}, {**word0, **tail},
                {"src0_sel": 6, "src1_sel": 6, "dst_sel": 6, "dst_unused": 2}, {"src0_sel": 6, "dst_sel": 6, "dst_unused": 2}, {"dst_sel": 6})


for _name in ("VOP1", "VOP2"): GFX9[f"{_name}_DPP16"] = _dpp(_name, GFX9[_name])
for _name in ("VOP1", "VOP2", "VOPC"): GFX9[f"{_name}_SDWA"] = _sdwa(_name, GFX9[_name])

# Formats of other archs that gfx942 lacks; the generator probes each and records what llvm-mc decodes there
# (nothing: see ABSENT in the generated table). VOPC DPP exists on RDNA only; DPP8 is src0 = 233/234.
ABSENT: dict[str, Layout] = {
  "VOPD": GFX11["VOPD"], "LDSDIR": GFX11["LDSDIR"], "VINTERP": GFX11["VINTERP"],
  "VINTRP": layout(4, {(31, 26): 0b110101}, {"vdst": (25, 18, "vgpr"), "op": (17, 16, "op"), "attr": (15, 10, "imm"),
                                             "attrchan": (9, 8, "imm"), "vsrc": (7, 0, "vgpr")}),
  "EXP": layout(8, {(31, 26): 0b110001}, {"en": (3, 0, "mod"), "target": (9, 4, "imm"), "vsrc0": (39, 32, "vgpr")}, {"en": 15}),
  "MIMG": layout(8, {(31, 26): 0b111100}, {"op": (24, 18, "op"), "dmask": (11, 8, "imm"), "vaddr": (39, 32, "vgpr"), "vdata": (47, 40, "vgpr"),
                                           "srsrc": (52, 48, "srsrc")}, {"dmask": 1}),
  "VOP1_DPP8": layout(8, {(31, 25): 0b0111111, (8, 0): 233}, {"vdst": (24, 17, "vgpr"), "op": (16, 9, "op"), "src0": (39, 32, "vgpr"), "dpp8": (63, 40, "imm")}),
  "VOPC_DPP": layout(8, {(31, 25): 0b0111110, (8, 0): 250}, {"op": (24, 17, "op"), "vsrc1": (16, 9, "vgpr"), "src0": (39, 32, "vgpr"),
                                                             "dpp_ctrl": (48, 40, "imm"), "bank_mask": (59, 56, "imm"), "row_mask": (63, 60, "imm")},
                      {"row_mask": 15, "bank_mask": 15}),
}
