"""gfx942 (CDNA3) in hcq.asm against llvm-mc 19: the formats gfx942 lacks, and the cdna3 DSL (AGPRs, MFMA, SDWA,
DPP, gfx9 SMEM) with its errors. Every opcode, random words and table freshness: tests/test_asm_llvm.py, as for
every arch."""
from __future__ import annotations
import pytest

from hcq.asm import llvm
from hcq.asm.isa import load
from tests.tools import require

ARCH = "gfx942"


@pytest.fixture(scope="module", autouse=True)
def needs_llvm_mc():
  require(llvm.available(), "llvm-mc-19")


def test_absent_formats_are_probed_absent():
  """Formats of other archs (VOPD, DPP8, LDSDIR, VINTERP, EXP, MIMG, VOPC DPP): the generator swept their opcode
  fields through llvm-mc for gfx942 and recorded how many decode; only DPP8's src0=233 word decodes, and only for
  opcodes that ignore src0."""
  from hcq.asm.generator.__main__ import ABSENT_ARCHS
  isa = load(ARCH)
  assert set(isa.absent) == set(ABSENT_ARCHS[ARCH])
  assert all(n == 0 for f, n in isa.absent.items() if f != "VOP1_DPP8"), isa.absent
  from hcq.asm.generator import probe
  from hcq.asm.generator.layouts import ARCHS
  dpp8 = ABSENT_ARCHS[ARCH]["VOP1_DPP8"]
  decoded = probe.sweep("VOP1_DPP8", {**ARCHS[ARCH], "VOP1_DPP8": dpp8}, ARCH)
  assert len(decoded) == isa.absent["VOP1_DPP8"] and all(not isa.by_op["VOP1"][op].operands for op in decoded), decoded  # v_nop, v_clrexcp
  assert not {"VOPD", "LDSDIR", "VINTERP", "EXP", "MIMG"} & set(isa.by_op)


# --- the cdna3 DSL and text, each checked against llvm-mc's encoding of the same text ---

DSL_CASES = [
  "v_mfma_f32_32x32x8_f16(a[0:15], v[0:1], v[2:3], a[0:15], cbsz=1, abid=2, blgp=3)",
  "v_mfma_f32_32x32x8_f16(v[0:15], a[0:1], a[2:3], v[0:15])",
  "v_mfma_f32_16x16x16_f16(a[0:3], v[0:1], v[2:3], 0)",
  "v_mfma_f64_4x4x4_4b_f64(v[0:1], v[2:3], v[4:5], v[0:1], neg=[1, 0, 1])",
  "v_smfmac_f32_16x16x32_f16(v[0:3], v[4:5], v[6:9], v[10], cbsz=1, abid=1)",
  "v_accvgpr_read_b32(v[1], a[2])",
  "v_accvgpr_write_b32(a[1], v[2])",
  "ds_read_b32(a[1], v[2], offset=4)",
  "ds_add_rtn_u32(a[1], v[2], a[3])",
  "global_load_dword(a[1], v[2], s[4:5], offset=8)",
  "global_load_dword(v[1], v[2:3], OFF, offset=-8, sc0=True, nt=True, sc1=True)",
  "global_atomic_add(a[1], v[2], a[3], s[4:5], sc0=True)",
  "scratch_load_dword(v[1], OFF, s[2], offset=8)",
  "buffer_load_dword(a[1], v[2], s[4:7], s[3], idxen=True, offset=12)",
  "buffer_load_dword(v[1], s[12:15], s[4], offen=True, lds=True)",
  "tbuffer_load_format_x(v[1], v[2], s[4:7], s[3], format='format:[BUF_DATA_FORMAT_32,BUF_NUM_FORMAT_FLOAT]', idxen=True)",
  "s_load_dwordx4(s[4:7], s[0:1], 0x10)",
  "s_load_dword(s[5], s[4:5], s[7])",
  "s_load_dword(s[5], s[4:5], s[7], offset=0x10, glc=True)",
  "s_waitcnt('vmcnt(0) lgkmcnt(0)')",
  "s_waitcnt('vmcnt(40) expcnt(1)')",
  "s_mov_b32(M0, s[0])",
  "s_mov_b64('flat_scratch', s[0:1])",
  "v_add_f32_sdwa(v[1], v[2], v[3], dst_sel='WORD_1', dst_unused='UNUSED_PAD', src0_sel='BYTE_0')",
  "v_add_f32_sdwa(v[1], s[2], -abs(v[3]), clamp=True, omod=1)",
  "v_add_u32_sdwa(v[1], -v[2], 5)",
  "v_cmp_eq_f32_sdwa(s[4:5], v[2], s[3], src0_sel='WORD_1')",
  "v_cmp_eq_f32_sdwa(VCC, v[2], v[3])",
  "v_mov_b32_dpp(v[1], v[2], dpp_ctrl='wave_shl:1')",
  "v_add_f32_dpp(v[1], -v[2], v[3], dpp_ctrl='row_bcast:15', row_mask=0xa, bank_mask=5, bound_ctrl=True)",
  "v_add_f32_dpp(v[1], v[2], v[3], dpp_ctrl='row_newbcast:1')",
  "v_add_co_u32_e64(v[1], s[2:3], v[2], v[3])",
  "v_pk_fma_f32(v[0:1], v[2:3], v[4:5], v[6:7], op_sel_hi=[0, 1, 1])",
  "s_set_gpr_idx_on(s[2], 'gpr_idx(SRC0,DST)')",
]


@pytest.mark.parametrize("code", DSL_CASES)
def test_dsl_matches_llvm_mc(code: str):
  """The DSL instruction's bytes are llvm-mc's encoding of its text; repr evaluates back to an equal instruction;
  text parses back to it; our decoder gives it back from its bytes."""
  import hcq.asm.cdna3 as cdna3
  from hcq.asm.instruction import Instruction
  from hcq.asm.parser import parse_line
  ns = vars(cdna3)
  inst = eval(code, ns)  # noqa: S307 - the test's own DSL text
  want = llvm.assemble_each([str(inst)], ARCH)[0]
  assert inst.encode() == want, f"{inst}: ours {inst.encode().hex()}, llvm-mc {want.hex() if isinstance(want, bytes) else want}"
  assert eval(repr(inst), ns) == inst, repr(inst)  # noqa: S307
  assert parse_line(load(ARCH), str(inst)) == inst
  assert str(Instruction.decode(inst.encode(), ARCH)) == str(inst)


def test_every_sample_reprs_back():
  """repr of every sample instruction (every opcode, constants, literals, each modifier) evaluates back to it."""
  import hcq.asm.cdna3 as cdna3
  from hcq.asm.verify import sample_instructions
  isa, ns = load(ARCH), vars(cdna3)
  bad = []
  for opc in isa.by_mnemonic.values():
    for inst in sample_instructions(isa, opc):
      try: back = eval(repr(inst), ns)  # noqa: S307
      except Exception as e: bad.append(f"{repr(inst)}: {e}"); continue  # noqa: BLE001
      if back != inst: bad.append(f"{repr(inst)}: {back.encode().hex()} != {inst.encode().hex()}")
  assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("text,message", [
  ("v_dual_add_f32 v1, v2, v3 :: v_dual_mul_f32 v4, v5, v6", "not a gfx942 instruction (it is on gfx1100, gfx1201)"),
  ("v_mfma_f32_32x32x8_f17 a[0:15], v[0:1], v[2:3], a[0:15]", "did you mean v_mfma_f32_32x32x8_f16"),  # (v_mfma_f32_32x32x8f16: an old name llvm-mc takes)
  ("ds_add_rtn_u32 a1, v2, v3", "must be all VGPRs or all AGPRs"),
  ("v_add_f32_e32 v1, a2, v3", "1:19: src0: expected a VGPR"),
  ("v_mfma_f32_32x32x8_f16 a[0:15], s[0:1], v[2:3], a[0:15]", "src0: expected a VGPR or AGPR range of 2"),
  ("s_mov_b32 s102, s0", "past s101"),
  ("v_add_f32_sdwa v1, v2, v3 dst_sel:WORD_3", "dst_sel: expected one of BYTE_0"),
  ("s_waitcnt vmcnt(64)", "cannot read"),
  ("v_add_f32_sdwa v1, 0x1234, v3", "SDWA takes no literal"),
])
def test_text_errors(text: str, message: str):
  """Bad gfx942 text: an AsmError at line:column saying what was wrong."""
  from hcq.asm import assemble
  from hcq.asm.parser import AsmError
  with pytest.raises(AsmError) as e: assemble(text, ARCH)
  assert message in str(e.value), str(e.value)


# --- gfx942 code objects: descriptors judged by llvm-mc's .amdhsa_kernel ---

KD_CASES = [dict(vgprs=40, sgprs=8, kernarg_size=16), dict(vgprs=3, agprs=32, sgprs=14), dict(vgprs=64, agprs=200, sgprs=30, lds_size=4096),
            dict(vgprs=1, sgprs=0, workitem_id_dims=3, workgroup_ids=(True, True, True), dispatch_ptr=True)]


@pytest.mark.parametrize("case", KD_CASES)
def test_gfx942_descriptor_matches_llvm_mc(case, tmp_path):
  """Our gfx942 kernel descriptor (wave64, VGPR+AGPR granules, accum_offset, SGPR granules) equals llvm-mc's."""
  import subprocess
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.elf_writer import kernel_descriptor
  from tests.tools import require_tool
  mc = require_tool("llvm-mc-19")
  accum = (max(case["vgprs"], 1) + 3) // 4 * 4
  total = accum + case["agprs"] if case.get("agprs") else case["vgprs"]
  d = [f".amdhsa_next_free_vgpr {total}", f".amdhsa_next_free_sgpr {case['sgprs']}", f".amdhsa_accum_offset {accum}",
       f".amdhsa_kernarg_size {case.get('kernarg_size', 0)}", f".amdhsa_group_segment_fixed_size {case.get('lds_size', 0)}",
       f".amdhsa_user_sgpr_dispatch_ptr {int(case.get('dispatch_ptr', False))}", ".amdhsa_user_sgpr_kernarg_segment_ptr 1",
       f".amdhsa_system_vgpr_workitem_id {case.get('workitem_id_dims', 1) - 1}", ".amdhsa_float_denorm_mode_32 3"]
  d += [f".amdhsa_system_sgpr_workgroup_id_{x} {int(on)}" for x, on in zip("xyz", case.get("workgroup_ids", (True, False, False)))]
  (tmp_path / "k.s").write_text('.amdgcn_target "amdgcn-amd-amdhsa--gfx942"\n.text\n.globl k\n.p2align 8\n.type k,@function\nk:\n  s_endpgm\n'
                                ".rodata\n.p2align 6\n.amdhsa_kernel k\n" + "\n".join(d) + "\n.end_amdhsa_kernel\n")
  subprocess.run([mc, "-triple", "amdgcn-amd-amdhsa", "-mcpu=gfx942", "-filetype=obj", str(tmp_path / "k.s"), "-o", str(tmp_path / "k.o")], check=True)
  theirs = read_code_object((tmp_path / "k.o").read_bytes()).kernels["k"].descriptor
  ours = kernel_descriptor(arch=ARCH, wave32=False, **case)
  for f, *_ in type(ours)._fields_:
    if f in ("kernel_code_entry_byte_offset",) or f.startswith("reserved"): continue
    assert getattr(ours, f) == getattr(theirs, f), f"{f}: ours {getattr(ours, f):#x}, llvm-mc {getattr(theirs, f):#x}"


def test_gfx942_kernel_code_object(tmp_path):
  """A DSL kernel with MFMA and AGPRs becomes a gfx942 code object: our reader and llvm-objdump/readelf accept it,
  with wave64, the gfx942 machine and the AGPRs counted in the descriptor."""
  import subprocess
  from hcq.asm.cdna3 import a, s, s_endpgm, s_load_dwordx2, s_waitcnt, v, v_accvgpr_write_b32, v_mfma_f32_32x32x8_f16, v_mov_b32_e32
  from hcq.asm.codeobject import read_code_object
  from hcq.asm.kernel import Kernel
  from tests.tools import require_tool
  k = Kernel("mm", "gfx942", args=[("out", "buffer")])
  k.add(s_load_dwordx2(s[4:5], s[0:1], 0), s_waitcnt("lgkmcnt(0)"), v_mov_b32_e32(v[2], 0), v_accvgpr_write_b32(a[0], v[2]))
  k.add(v_mfma_f32_32x32x8_f16(a[0:15], v[0:1], v[2:3], a[0:15]), s_endpgm())
  data = k.to_elf()
  co = read_code_object(data)
  assert co.arch == "gfx942" and co.kernels["mm"].wavefront_size == 64
  desc = co.kernels["mm"].descriptor
  assert desc.compute_pgm_rsrc3 & 0x3f == 0  # accum_offset 4 (v0..v3): AGPRs a0..a15 follow
  assert desc.compute_pgm_rsrc1 & 0x3f == (4 + 16 + 7) // 8 - 1
  (tmp_path / "k.co").write_bytes(data)
  dis = subprocess.run([require_tool("llvm-objdump-19"), "-d", str(tmp_path / "k.co")], capture_output=True, text=True)
  assert dis.returncode == 0 and not dis.stderr and "v_mfma_f32_32x32x8_f16 a[0:15]" in dis.stdout, dis.stdout + dis.stderr
  hdr = subprocess.run([require_tool("llvm-readelf-19"), "-h", str(tmp_path / "k.co")], capture_output=True, text=True)
  assert "gfx942" in hdr.stdout, hdr.stdout
