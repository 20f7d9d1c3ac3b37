"""gfx9 (GCN/CDNA) shapes the generic classifier does not know: accumulation-register bits, SMEM's imm/soe
offset operand, SDWA selects and SDWA's split sources (hcq.asm.printer's gfx9 rules read what this writes)."""
from __future__ import annotations

from hcq.asm.generator.probe import RawShape


def gcn_special(raw: RawShape, fields: dict[str, tuple[int, int, str]], operands: list, mods: list) -> tuple[list, list]:
  """Operands and modifiers of a gfx9 opcode, rewritten where the generic rules cannot read the probes."""
  # a bit that turns register operands into AGPRs (DS/FLAT/MUBUF acc, MFMA acc_cd/acc0/acc1): 'acc:<fields>'
  for f, idxs in raw.acc.items():
    names = [raw.operands[i][0] for i in idxs if isinstance(raw.operands[i], tuple)]
    if names: mods = [m for m in mods if m[0] != f] + [(f, "acc:" + "+".join(names))]
  if raw.fmt == "VOP3P_MAI":  # f64 MFMA: blgp's bits are neg:[a,b,c]
    negs = [o for o in operands if isinstance(o, tuple) and o[0] == "blgp" and o[3] == "named:neg"]
    operands = [o for o in operands if o not in negs]
    mods = mods + [("blgp", "neg:3")] if negs else mods
  if raw.fmt.endswith("_DPP16"):  # v_nop's lane controls print first, where the generic rule takes them for an operand
    operands = [(o[0], o[1], o[2], "named:dpp_ctrl", o[4]) if isinstance(o, tuple) and o[0] == "dpp_ctrl" else o for o in operands]
  if raw.fmt == "SMEM" and "soe" in raw.mods:
    # the offset operand is a number (imm), an SGPR (no imm) or 'sN offset:X' (soe): the printer's gfx9 SMEM rule
    mods = [m for m in mods if m[0] not in ("imm", "soe", "soffset")]
    operands = [(o[0], o[1], o[2], "smem9", o[4]) if isinstance(o, tuple) and o[0] == "offset" else o for o in operands]
  if raw.fmt.endswith("_SDWA"):
    mods = [m for m in mods if fields[m[0]][2] != "sdwa_s"]  # s0/s1 pick a source's file: part of the source operand
    sels = [o[0] for o in operands if isinstance(o, tuple) and fields.get(o[0], (0, 0, ""))[2] == "sel"]
    sels += [f for f, _ in mods if fields.get(f, (0, 0, ""))[2] == "sel" and f not in sels]
    operands = [o for o in operands if not (isinstance(o, tuple) and o[0] in sels)]
    mods = [m for m in mods if m[0] not in sels]
    # VOPC: 'vcc' or the SGPR pair in sdst when sd is set, probed as the sd bit changing that operand
    operands = [("sdst", "s", 2, "", o[4]) if isinstance(o, tuple) and o[0] == "sd" else o for o in operands]
    for f in sels:
      keyword = f  # the layout names each select field as llvm-mc's keyword (dst_sel:WORD_1)
      names = []
      for v in range(1 << (fields[f][0] - fields[f][1] + 1)):
        toks = raw.numbers[f].get(v)
        names.append(next((t for t in toks if t.startswith(keyword + ":")), "!") if toks else "!")
      mods.append((f, "sel:" + "|".join(names)))
  return operands, mods
