"""Writing code objects: descriptors judged by llvm-mc's .amdhsa_kernel, the ELF by llvm-readelf/llvm-objdump and our reader."""
from __future__ import annotations
import subprocess

import pytest

from hcq.asm.codeobject import read_code_object
from hcq.asm.elf_writer import KernelImage, kernel_descriptor, write_code_object
from tests.tools import require_tool

CASES = [
  dict(vgprs=1), dict(vgprs=13, kernarg_size=24, lds_size=512, workgroup_ids=(True, True, False), workitem_id_dims=2),
  dict(vgprs=64, kernarg_size=8, dispatch_ptr=True, workgroup_ids=(True, True, True), workitem_id_dims=3),
  dict(vgprs=200, wave32=False, kernarg_size=256, queue_ptr=True, kernarg_ptr=True, lds_size=65536),
  dict(vgprs=9, kernarg_ptr=False, ieee_mode=False, dx10_clamp=False, denorms=False),
]


def directives(c: dict) -> str:
  d = [f".amdhsa_next_free_vgpr {c['vgprs']}", ".amdhsa_next_free_sgpr 8",
       f".amdhsa_user_sgpr_kernarg_segment_ptr {int(c.get('kernarg_ptr', True))}",
       f".amdhsa_user_sgpr_dispatch_ptr {int(c.get('dispatch_ptr', False))}", f".amdhsa_user_sgpr_queue_ptr {int(c.get('queue_ptr', False))}",
       f".amdhsa_kernarg_size {c.get('kernarg_size', 0)}", f".amdhsa_group_segment_fixed_size {c.get('lds_size', 0)}",
       f".amdhsa_wavefront_size32 {int(c.get('wave32', True))}", f".amdhsa_system_vgpr_workitem_id {c.get('workitem_id_dims', 1) - 1}",
       f".amdhsa_ieee_mode {int(c.get('ieee_mode', True))}", f".amdhsa_dx10_clamp {int(c.get('dx10_clamp', True))}",
       f".amdhsa_float_denorm_mode_32 {3 if c.get('denorms', True) else 0}"]
  for axis, on in zip("xyz", c.get("workgroup_ids", (True, False, False))): d.append(f".amdhsa_system_sgpr_workgroup_id_{axis} {int(on)}")
  return "\n".join(d)


@pytest.mark.parametrize("case", CASES)
def test_descriptor_matches_llvm_mc(case, tmp_path):
  mc = require_tool("llvm-mc-19")
  src = f""".amdgcn_target "amdgcn-amd-amdhsa--gfx1100"
.text
.globl k
.p2align 8
.type k,@function
k:
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel k
{directives(case)}
.end_amdhsa_kernel
"""
  (tmp_path / "k.s").write_text(src)
  subprocess.run([mc, "-triple", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-filetype=obj", str(tmp_path / "k.s"), "-o", str(tmp_path / "k.o")], check=True)
  theirs = read_code_object((tmp_path / "k.o").read_bytes()).kernels["k"].descriptor
  ours = kernel_descriptor(**case)
  for f, *_ in type(ours)._fields_:
    if f in ("kernel_code_entry_byte_offset",) or f.startswith("reserved"): continue
    assert getattr(ours, f) == getattr(theirs, f), f"{f}: ours {getattr(ours, f):#x}, llvm-mc {getattr(theirs, f):#x}"


def test_written_code_object_is_accepted(tmp_path):
  code = bytes.fromhex("000080bf") * 3 + bytes.fromhex("0000b0bf")  # s_nop 0 x3, s_endpgm
  kernels = [KernelImage("first", code, kernel_descriptor(vgprs=4, kernarg_size=8)),
             KernelImage("second", code[8:], kernel_descriptor(vgprs=20, kernarg_size=16), {".args": [{".offset": 0, ".size": 8, ".value_kind": "global_buffer"}]})]
  data = write_code_object("gfx1100", kernels)
  (tmp_path / "k.co").write_bytes(data)
  co = read_code_object(data)
  assert co.arch == "gfx1100" and set(co.kernels) == {"first", "second"}
  assert co.image[co.kernels["first"].code_offset:][:len(code)] == code
  assert co.kernels["second"].args[0].value_kind == "global_buffer" and co.kernels["second"].kernarg_size == 16
  notes = subprocess.run([require_tool("llvm-readelf-19"), "--notes", str(tmp_path / "k.co")], capture_output=True, text=True)
  assert notes.returncode == 0 and ".symbol:         second.kd" in notes.stdout and "amdgcn-amd-amdhsa--gfx1100" in notes.stdout, notes.stdout + notes.stderr
  dis = subprocess.run([require_tool("llvm-objdump-19"), "-d", str(tmp_path / "k.co")], capture_output=True, text=True)
  assert dis.returncode == 0 and "<first>:" in dis.stdout and "s_endpgm" in dis.stdout, dis.stdout + dis.stderr
  assert not dis.stderr
