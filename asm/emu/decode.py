"""Decoding for the emulator: hcq.asm's decoder, plus the few encodings its table does not hold yet that LLVM
emits for gfx11 (VOPD dual issue, the MUBUF cache invalidates; gfx11 only). Each address is decoded once per program."""
from __future__ import annotations
from dataclasses import dataclass, field

from hcq.asm.instruction import DecodeError, Instruction, uses_literal
from hcq.asm.isa import load

_VOPD_OPS = ["v_dual_fmac_f32", "v_dual_fmaak_f32", "v_dual_fmamk_f32", "v_dual_mul_f32", "v_dual_add_f32", "v_dual_sub_f32",
             "v_dual_subrev_f32", "v_dual_mul_dx9_zero_f32", "v_dual_mov_b32", "v_dual_cndmask_b32", "v_dual_max_f32", "v_dual_min_f32",
             "v_dual_dot2acc_f32_f16", "v_dual_dot2acc_f32_bf16"]
_VOPD_Y_EXTRA = {16: "v_dual_add_nc_u32", 17: "v_dual_lshlrev_b32", 18: "v_dual_and_b32"}
_MUBUF_NOPS = {0x2b: "buffer_gl0_inv", 0x2c: "buffer_gl1_inv"}


@dataclass
class _Fmt:
  name: str


@dataclass
class _Opcode:
  mnemonic: str
  fmt: _Fmt
  operands: tuple = ()


@dataclass
class ExtraInstruction:
  """An instruction decoded here rather than by hcq.asm (same attributes the emulator reads)."""
  opcode: _Opcode
  values: dict
  literal: int | None
  size: int
  parts: list = field(default_factory=list)   # VOPD: (mnemonic, src0, vsrc1, vdst) for X then Y
  text: str = ""

  def __str__(self) -> str: return self.text


def _vopd(data: bytes) -> ExtraInstruction:
  w0, w1 = int.from_bytes(data[:4], "little"), int.from_bytes(data[4:8], "little")
  opx, opy = (w0 >> 22) & 0xf, (w0 >> 17) & 0x1f
  nx = _VOPD_OPS[opx] if opx < len(_VOPD_OPS) else None
  ny = _VOPD_OPS[opy] if opy < len(_VOPD_OPS) else _VOPD_Y_EXTRA.get(opy)
  if nx is None or ny is None: raise DecodeError(f"VOPD opcodes {opx}/{opy} are not defined")
  src0x, vsrc1x, src0y, vsrc1y = w0 & 0x1ff, (w0 >> 9) & 0xff, w1 & 0x1ff, (w1 >> 9) & 0xff
  vdstx = (w1 >> 24) & 0xff
  vdsty = (((w1 >> 17) & 0x7f) << 1) | ((vdstx & 1) ^ 1)
  need_lit = 255 in (src0x, src0y) or any(n in ("v_dual_fmaak_f32", "v_dual_fmamk_f32") for n in (nx, ny))
  lit = int.from_bytes(data[8:12], "little") if need_lit else None
  if need_lit and len(data) < 12: raise DecodeError("VOPD needs a literal dword")
  parts = [(nx, src0x, vsrc1x, vdstx), (ny, src0y, vsrc1y, vdsty)]
  text = f"{nx} v{vdstx}, src{src0x}, v{vsrc1x} :: {ny} v{vdsty}, src{src0y}, v{vsrc1y}" + (f" lit {lit:#x}" if lit is not None else "")
  return ExtraInstruction(_Opcode("v_dual", _Fmt("VOPD")), {}, lit, 12 if need_lit else 8, parts, text)


def _decode_unchecked(data: bytes, arch: str):
  """hcq.asm's decode without the printer's check: fields the printer cannot spell yet (s_waitcnt_depctr values)
  still execute."""
  isa = load(arch)
  for fmt in isa.decode_order:
    if len(data) < fmt.size: continue
    word = int.from_bytes(data[:fmt.size], "little")   # fixed bits may lie past the first dword (VOP3 DPP's src0 = 0xfa/0xe9)
    if word & fmt.fixed_mask != fmt.fixed_value: continue
    values = fmt.unpack(word)
    opcode = isa.by_op[fmt.name].get(values.pop("op", 0))
    if opcode is None or any(values[f] != v for f, v in opcode.fixed.items()): continue
    literal = int.from_bytes(data[fmt.size:fmt.size + 4], "little") if uses_literal(opcode, values) else None
    return Instruction(isa, opcode, values, literal)
  return None


def decode(data: bytes, arch: str = "gfx1100"):
  """One instruction from `data` (at least 12 bytes where available): an hcq.asm Instruction or an ExtraInstruction."""
  try:
    return Instruction.decode(data, arch)
  except Exception:   # DecodeError, or the printer's check failing on a field it cannot spell yet: decode unchecked
    if len(data) < 4: raise
    ins = _decode_unchecked(data, arch)
    if ins is not None: return ins
    if not arch.startswith("gfx11"): raise   # the encodings below are gfx11's
    w0 = int.from_bytes(data[:4], "little")
    if w0 >> 26 == 0b110010 and len(data) >= 8: return _vopd(data)
    if w0 >> 26 == 0b111000 and len(data) >= 8 and (w0 >> 18) & 0xff in _MUBUF_NOPS:
      name = _MUBUF_NOPS[(w0 >> 18) & 0xff]
      return ExtraInstruction(_Opcode(name, _Fmt("MUBUF")), {}, None, 8, text=name)
    raise
