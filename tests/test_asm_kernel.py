"""The Kernel builder: DSL and text with labels, branch fix-ups equal to llvm-mc's, code objects the LLVM tools accept."""
from __future__ import annotations
import subprocess

from hcq.asm.codeobject import read_code_object
from hcq.asm.kernel import Kernel, registers_used
from tests.tools import require_tool

LOOP = """s_mov_b32 s4, 10
loop:
v_add_f32_e32 v1, 1.0, v1
s_sub_u32 s4, s4, 1
s_cmp_lg_u32 s4, 0
s_cbranch_scc1 loop
s_branch done
v_mov_b32_e32 v7, 0
done:
s_endpgm"""


def llvm_mc_bytes(text: str, tmp_path) -> bytes:
  """The .text llvm-mc assembles from `text`, branches resolved (an object file, then its section's bytes)."""
  mc, objcopy = require_tool("llvm-mc-19"), require_tool("llvm-objcopy-19")
  (tmp_path / "k.s").write_text(text + "\n")
  subprocess.run([mc, "-triple", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-filetype=obj", str(tmp_path / "k.s"), "-o", str(tmp_path / "k.o")], check=True)
  subprocess.run([objcopy, "-O", "binary", "--only-section=.text", str(tmp_path / "k.o"), str(tmp_path / "k.bin")], check=True)
  return (tmp_path / "k.bin").read_bytes()


def test_branches_match_llvm_mc(tmp_path):
  k = Kernel("loop").add(LOOP)
  assert k.code() == llvm_mc_bytes(LOOP, tmp_path)


def test_dsl_and_labels(tmp_path):
  from hcq.asm.rdna3 import s, s_add_u32, s_cmp_lg_u32, s_endpgm, s_mov_b32, s_sub_u32, v, v_add_f32_e32
  k = Kernel("dsl", args=[("out", "buffer"), ("n", "u32")])
  k.add(s_mov_b32(s[4], 10)).label("top").add(v_add_f32_e32(v[1], 1.0, v[1]), s_sub_u32(s[4], s[4], 1), s_add_u32(s[9], s[9], 2))
  k.add(s_cmp_lg_u32(s[4], 0)).branch("s_cbranch_scc1", "top").add(s_endpgm())
  text = LOOP.replace("s_branch done\nv_mov_b32_e32 v7, 0\ndone:\n", "").replace("s_sub_u32 s4, s4, 1", "s_sub_u32 s4, s4, 1\ns_add_u32 s9, s9, 2")
  assert k.code() == llvm_mc_bytes(text.replace("loop", "top"), tmp_path)
  co = read_code_object(k.to_elf())
  kern = co.kernels["dsl"]
  assert [(a.name, a.offset, a.size) for a in kern.args] == [("out", 0, 8), ("n", 8, 4)] and kern.kernarg_size == 16
  assert kern.metadata[".vgpr_count"] == 2 and kern.metadata[".sgpr_count"] == 10


def test_code_object_accepted_by_llvm_tools(tmp_path):
  co = Kernel("loop", args=[("x", "f32")]).add(LOOP).to_elf()
  (tmp_path / "k.co").write_bytes(co)
  dis = subprocess.run([require_tool("llvm-objdump-19"), "-d", str(tmp_path / "k.co")], capture_output=True, text=True)
  assert dis.returncode == 0 and not dis.stderr and "s_cbranch_scc1" in dis.stdout and "<loop>:" in dis.stdout
  notes = subprocess.run([require_tool("llvm-readelf-19"), "--notes", str(tmp_path / "k.co")], capture_output=True, text=True)
  assert notes.returncode == 0 and ".name:           x" in notes.stdout and ".vgpr_count:     8" in notes.stdout


def test_registers_used():
  assert registers_used(["v_add_f32_e32 v3, v1, v2", "global_load_b64 v[10:11], v0, s[4:5]", "s_mov_b32 s20, 0"]) == (12, 21)
  assert registers_used(["s_endpgm"]) == (0, 0)
